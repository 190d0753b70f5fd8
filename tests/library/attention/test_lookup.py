"""nadaraya_watson: the normalised Gaussian kernel as a softmax over the keys, finite where the kernel
underflows, the two limits of sigma, and input errors that name the argument."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_course.attention.lookup import nadaraya_watson

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
