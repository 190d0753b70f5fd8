"""nadaraya_watson: the normalised Gaussian kernel as a softmax over the keys, finite where the kernel
underflows, the two limits of sigma, and input errors that name the argument."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_course.attention.lookup import fit_width, nadaraya_watson, parametric_nadaraya_watson

FAST = settings(max_examples=40, deadline=None)


def points(seed: int, num_queries: int, num_keys: int, dtype: torch.dtype = torch.float64):
    gen = torch.Generator().manual_seed(seed)
    queries = (torch.rand(num_queries, generator=gen, dtype=torch.float64) * 5).to(dtype)
    keys = (torch.rand(num_keys, generator=gen, dtype=torch.float64) * 5).to(dtype)
    values = torch.randn(num_keys, generator=gen, dtype=torch.float64).to(dtype)
    return queries, keys, values


@FAST
@given(st.integers(1, 6), st.integers(1, 8), st.floats(0.3, 10.0), st.integers(0, 2**31 - 1))
def test_weights_are_the_normalised_gaussian_kernel(num_queries: int, num_keys: int, sigma: float, seed: int):
    queries, keys, values = points(seed, num_queries, num_keys)
    weights, predictions = nadaraya_watson(queries, keys, values, sigma)
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    torch.testing.assert_close(weights, kernel / kernel.sum(-1, keepdim=True))
    torch.testing.assert_close(weights.sum(-1), torch.ones(num_queries, dtype=torch.float64))
    torch.testing.assert_close(predictions, (kernel * values).sum(-1) / kernel.sum(-1))
    assert weights.shape == (num_queries, num_keys) and predictions.shape == (num_queries,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_query_far_from_every_key_puts_all_weight_on_the_nearest_key(dtype: torch.dtype) -> None:
    keys, values = torch.tensor([0.0, 1.0, 2.0], dtype=dtype), torch.tensor([5.0, 6.0, 7.0], dtype=dtype)
    queries = torch.tensor([-100.0, 150.0], dtype=dtype)
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * 0.5**2))
    assert torch.isnan(kernel / kernel.sum(-1, keepdim=True)).all()  # exp / sum exp is 0 / 0 here
    weights, predictions = nadaraya_watson(queries, keys, values, 0.5)
    one_hot = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=dtype)
    torch.testing.assert_close(weights, one_hot, rtol=0, atol=1e-30)  # finite: no 0 / 0
    torch.testing.assert_close(predictions, torch.tensor([5.0, 7.0], dtype=dtype))


def test_a_wide_kernel_predicts_the_mean_and_a_narrow_one_the_nearest_keys_value() -> None:
    queries, keys, values = points(3, 6, 9)
    _, wide = nadaraya_watson(queries, keys, values, 1e4)
    torch.testing.assert_close(wide, values.mean().expand(6), rtol=0, atol=1e-6)
    nearest = (queries[:, None] - keys[None, :]).abs().argmin(-1)
    _, narrow = nadaraya_watson(queries, keys, values, 1e-3)
    torch.testing.assert_close(narrow, values[nearest], rtol=0, atol=1e-6)


def test_a_single_key_gets_all_the_weight() -> None:
    weights, predictions = nadaraya_watson(
        torch.tensor([0.0, 3.0]), torch.tensor([1.0]), torch.tensor([4.0]), 0.5
    )
    assert weights.tolist() == [[1.0], [1.0]] and predictions.tolist() == [4.0, 4.0]


def test_inputs_are_left_unchanged() -> None:
    queries, keys, values = points(4, 3, 5)
    before = [t.clone() for t in (queries, keys, values)]
    nadaraya_watson(queries, keys, values, 0.5)
    assert all(torch.equal(a, b) for a, b in zip(before, (queries, keys, values), strict=True))


@pytest.mark.parametrize(
    ("queries", "keys", "values", "sigma", "message"),
    [
        (torch.zeros(2, 1), torch.zeros(3), torch.zeros(3), 1.0, r"queries has shape \(2, 1\), expected"),
        (
            torch.zeros(2),
            torch.zeros(3),
            torch.zeros(4),
            1.0,
            r"values has shape \(4,\), expected \(num_keys,\)",
        ),
        (torch.zeros(2), torch.zeros(0), torch.zeros(0), 1.0, r"keys has shape \(0,\)"),
        (torch.zeros(2), torch.zeros(3, dtype=torch.int64), torch.zeros(3), 1.0, "keys must be a floating"),
        (torch.zeros(2), torch.zeros(3), torch.zeros(3, dtype=torch.float64), 1.0, "values has dtype"),
        (torch.zeros(2), torch.zeros(3), torch.zeros(3), 0.0, "sigma must be a finite number > 0"),
        (torch.zeros(2), torch.zeros(3), torch.zeros(3), -1.0, "sigma must be a finite number > 0"),
        (torch.zeros(2), torch.zeros(3), torch.zeros(3), math.inf, "sigma must be a finite number > 0"),
        (torch.zeros(2), torch.zeros(3), torch.zeros(3), True, "sigma must be a finite number > 0"),
    ],
)
def test_bad_input_is_refused_with_the_arguments_name(queries, keys, values, sigma, message) -> None:
    with pytest.raises(ValueError, match=message):
        nadaraya_watson(queries, keys, values, sigma)


# ---------------------------------------------------- the width as a parameter (d2l's parametric pooling)
def noisy_curve(seed: int, n: int = 50) -> tuple[torch.Tensor, torch.Tensor]:
    """Chapter 1's data: n noisy samples of 2 sin(x) + x^0.8 on [0, 5], sorted, from their own generator."""
    gen = torch.Generator().manual_seed(seed)
    x, _ = torch.sort(torch.rand(n, generator=gen) * 5)
    return x, 2 * torch.sin(x) + x**0.8 + 0.5 * torch.randn(n, generator=gen)


@pytest.mark.parametrize("w", [0.5, 2.0, -3.0])
def test_the_parametric_kernel_with_w_is_the_fixed_kernel_with_sigma_one_over_w(w: float) -> None:
    queries, keys, values = points(5, 4, 7)
    expected = nadaraya_watson(queries, keys, values, 1 / abs(w))
    torch.testing.assert_close(parametric_nadaraya_watson(queries, keys, values, w), expected)


def test_leave_one_out_gives_each_key_no_weight_on_itself_and_renormalises_the_rest() -> None:
    _, keys, values = points(6, 1, 5)
    weights, predictions = parametric_nadaraya_watson(keys, keys, values, 1.5, leave_one_out=True)
    assert (weights.diagonal() == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, dtype=torch.float64))
    full = parametric_nadaraya_watson(keys, keys, values, 1.5)[0]
    full = full.masked_fill(torch.eye(5, dtype=torch.bool), 0)
    torch.testing.assert_close(weights, full / full.sum(-1, keepdim=True))
    torch.testing.assert_close(predictions, weights @ values)


def test_the_weights_are_differentiable_in_w() -> None:
    queries, keys, values = points(7, 3, 6)
    w = torch.tensor(1.2, dtype=torch.float64, requires_grad=True)
    parametric_nadaraya_watson(queries, keys, values, w)[1].sum().backward()
    assert w.grad is not None and w.grad != 0


def test_fit_width_lowers_its_loss_and_lands_at_the_leave_one_out_optimum() -> None:
    keys, values = noisy_curve(0)
    fit = fit_width(keys, values)
    assert fit.losses[-1] < 0.6 * fit.losses[0] and len(fit.losses) == 200
    grid = [0.05 + 0.005 * k for k in range(191)]  # the loss fit_width descends, by brute force over sigma
    best = min(grid, key=lambda sigma: squared_error(keys, values, sigma, leave_one_out=True))
    assert abs(fit.sigma - best) < 0.01 and fit.sigma == pytest.approx(1 / abs(fit.w))


def squared_error(keys: torch.Tensor, values: torch.Tensor, sigma: float, *, leave_one_out: bool) -> float:
    """fit_width's loss at width sigma: the summed squared error at the training inputs."""
    predictions = parametric_nadaraya_watson(keys, keys, values, 1 / sigma, leave_one_out=leave_one_out)[1]
    return float(((predictions - values) ** 2).sum())


def test_without_leaving_one_out_the_training_loss_would_reward_the_narrowest_kernel() -> None:
    keys, values = noisy_curve(1)
    seen = [squared_error(keys, values, sigma, leave_one_out=False) for sigma in (0.01, 0.1, 0.3)]
    assert seen == sorted(seen)  # each point sees its own noisy value: the narrower, the lower
    left_out = [squared_error(keys, values, sigma, leave_one_out=True) for sigma in (0.01, 0.3)]
    assert left_out[0] > left_out[1]  # left out, copying a neighbour's noise costs


def test_fit_width_draws_no_random_numbers_and_leaves_its_inputs_alone() -> None:
    keys, values = noisy_curve(2)
    before, state = (keys.clone(), values.clone()), torch.random.get_rng_state()
    first, second = fit_width(keys, values, steps=20), fit_width(keys, values, steps=20)
    assert torch.equal(torch.random.get_rng_state(), state) and first == second
    assert torch.equal(keys, before[0]) and torch.equal(values, before[1])


def three() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.zeros(2), torch.zeros(3), torch.zeros(3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parametric_nadaraya_watson(*three(), 0.0), "w must be a finite number != 0"),
        (lambda: parametric_nadaraya_watson(*three(), math.nan), "w must be a finite number"),
        (lambda: parametric_nadaraya_watson(*three(), torch.ones(2)), r"w has shape \(2,\)"),
        (lambda: parametric_nadaraya_watson(*three(), 1.0, leave_one_out=True), r"queries has shape \(2,\)"),
        (lambda: fit_width(torch.zeros(1), torch.zeros(1)), r"keys has shape \(1,\)"),
        (lambda: fit_width(torch.zeros(3), torch.zeros(3), lr=0.0), "lr must be a finite number > 0"),
        (lambda: fit_width(torch.zeros(3), torch.zeros(3), steps=0), "steps"),
        (lambda: fit_width(torch.zeros(3), torch.zeros(3), w=0.0), "w must be"),
    ],
)
def test_bad_input_to_the_parametric_kernel_is_refused_with_the_arguments_name(call, message) -> None:
    """three(): two queries and three keys; each call gets one argument wrong."""
    with pytest.raises(ValueError, match=message):
        call()
