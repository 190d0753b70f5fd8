"""sequence_mask and masked_softmax: equal to d2l where d2l is right, correct where it is not."""

from __future__ import annotations

import d2l.torch as d2l
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_course import masked_softmax, sequence_mask
from attn_course.attention.masking import masked_softmax_unchecked, softmax_excluding

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
FAST = settings(max_examples=40, deadline=None)


def random_lens(batch_size: int, num_queries: int, num_keys: int, kind: str, low: int, gen: torch.Generator):
    """valid_lens of the given kind ("none", "per_sequence", "per_query") with values in [low, num_keys]."""
    if kind == "none":
        return None
    shape = (batch_size,) if kind == "per_sequence" else (batch_size, num_queries)
    return torch.randint(low, num_keys + 1, shape, generator=gen)


def lens_per_query(valid_lens: torch.Tensor | None, batch_size: int, num_queries: int, num_keys: int):
    """valid_lens expanded to (batch_size, num_queries), the length that applies to each row."""
    if valid_lens is None:
        return torch.full((batch_size, num_queries), num_keys)
    if valid_lens.dim() == 1:
        return valid_lens[:, None].expand(batch_size, num_queries)
    return valid_lens


shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 7))
lens_kinds = st.sampled_from(["none", "per_sequence", "per_query"])
seeds = st.integers(0, 2**31 - 1)


# ---------------------------------------------------------------- sequence_mask


@pytest.mark.parametrize("extra_dims", [(), (3,), (2, 3)])
def test_sequence_mask_equals_d2l(extra_dims):
    X = torch.randn(4, 5, *extra_dims)
    valid_len = torch.tensor([0, 2, 5, 3])
    expected = d2l.sequence_mask(X.clone(), valid_len, value=-7.0)
    torch.testing.assert_close(sequence_mask(X, valid_len, value=-7.0), expected, rtol=0, atol=0)


def test_sequence_mask_leaves_its_input_untouched_unlike_d2l():
    X = torch.ones(2, 3)
    d2l_input = X.clone()
    d2l.sequence_mask(d2l_input, torch.tensor([1, 2]))
    assert d2l_input.sum() == 3, "d2l writes the mask into its argument"
    masked = sequence_mask(X, torch.tensor([1, 2]))
    assert torch.equal(X, torch.ones(2, 3))
    assert torch.equal(masked, torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))


def test_sequence_mask_keeps_integer_dtype():
    tokens = torch.arange(1, 7).reshape(2, 3)
    masked = sequence_mask(tokens, torch.tensor([3, 1]), value=0)
    assert masked.dtype == torch.int64
    assert masked.tolist() == [[1, 2, 3], [4, 0, 0]]


@pytest.mark.parametrize(
    ("X", "valid_len", "message"),
    [
        (
            torch.ones(3),
            torch.tensor([1, 1, 1]),
            r"X has shape \(3,\), expected \(batch_size, maxlen, \.\.\.\)",
        ),
        ([[1.0]], torch.tensor([1]), "X must be a torch.Tensor, got list"),
        (
            torch.ones(2, 3),
            torch.tensor([1, 1, 1]),
            r"valid_len has shape \(3,\), expected \(batch_size,\) = \(2,\)",
        ),
        (
            torch.ones(2, 3),
            torch.tensor([[1], [1]]),
            r"valid_len has shape \(2, 1\), expected \(batch_size,\)",
        ),
        (
            torch.ones(2, 3),
            torch.tensor([1.0, 2.0]),
            "valid_len must hold integer lengths, got dtype torch.float32",
        ),
        (
            torch.ones(2, 3),
            torch.tensor([1, 4]),
            r"valid_len must lie in \[0, num_keys\] = \[0, 3\], got .* to 4",
        ),
        (
            torch.ones(2, 3),
            torch.tensor([-1, 2]),
            r"valid_len must lie in \[0, num_keys\] = \[0, 3\], got .*-1 to",
        ),
    ],
)
def test_sequence_mask_rejects_bad_input_with_a_clear_message(X, valid_len, message):
    with pytest.raises(ValueError, match=message):
        sequence_mask(X, valid_len)


# ---------------------------------------------------------------- masked_softmax: agreement with d2l


@FAST
@given(shape=shapes, kind=lens_kinds, dtype=st.sampled_from([torch.float32, torch.float64]), seed=seeds)
def test_masked_softmax_equals_d2l_on_rows_with_at_least_one_key(shape, kind, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    scores = (torch.randn(shape, generator=gen) * 10).to(dtype)
    valid_lens = random_lens(*shape, kind, low=1, gen=gen)
    expected = d2l.masked_softmax(scores.clone(), valid_lens)
    torch.testing.assert_close(masked_softmax(scores, valid_lens), expected, rtol=1e-6, atol=1e-7)


def test_masked_softmax_leaves_scores_untouched_unlike_d2l():
    scores = torch.zeros(1, 1, 3)
    d2l_input = scores.clone()
    d2l.masked_softmax(d2l_input, torch.tensor([1]))
    assert d2l_input[0, 0, 1] == -1e6, "d2l writes -1e6 into the caller's scores"
    masked_softmax(scores, torch.tensor([1]))
    assert torch.equal(scores, torch.zeros(1, 1, 3))


# ---------------------------------------------------------------- masked_softmax: properties


@FAST
@given(shape=shapes, kind=lens_kinds, seed=seeds)
def test_masked_positions_are_exactly_zero_and_rows_sum_to_one_or_zero(shape, kind, seed):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(shape, generator=gen, dtype=torch.float64) * 10
    valid_lens = random_lens(*shape, kind, low=0, gen=gen)
    weights = masked_softmax(scores, valid_lens)
    lens = lens_per_query(valid_lens, *shape)
    padding = torch.arange(shape[2]) >= lens[..., None]
    assert torch.all(weights[padding] == 0)
    assert torch.all(weights[~padding] > 0)
    torch.testing.assert_close(weights.sum(-1), (lens > 0).to(torch.float64))


def test_empty_row_gets_zero_weights_where_d2l_gives_uniform_weights():
    scores = torch.randn(2, 3, 4)
    valid_lens = torch.tensor([0, 2])
    ours = masked_softmax(scores, valid_lens)
    theirs = d2l.masked_softmax(scores.clone(), valid_lens)
    assert torch.equal(ours[0], torch.zeros(3, 4))
    torch.testing.assert_close(theirs[0], torch.full((3, 4), 0.25))
    torch.testing.assert_close(ours[1], theirs[1])


def test_d2l_float16_empty_row_is_nan_ours_is_zero():
    scores = torch.randn(2, 1, 4).half()
    valid_lens = torch.tensor([0, 4])
    assert torch.tensor(-1e6, dtype=torch.float16).isinf(), "-1e6 overflows float16 to -inf"
    theirs = d2l.masked_softmax(scores.clone(), valid_lens)
    assert torch.isnan(theirs[0]).all()
    ours = masked_softmax(scores, valid_lens)
    assert torch.equal(ours[0], torch.zeros(1, 4, dtype=torch.float16))
    torch.testing.assert_close(ours[1], torch.softmax(scores[1].float(), -1).half())


def test_empty_row_has_finite_zero_gradient():
    scores = torch.randn(2, 2, 3, requires_grad=True)
    weights = masked_softmax(scores, torch.tensor([[0, 3], [1, 0]]))
    (weights * torch.randn_like(weights)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.equal(scores.grad[0, 0], torch.zeros(3))
    assert torch.equal(scores.grad[1, 1], torch.zeros(3))
    assert torch.equal(scores.grad[1, 0, 1:], torch.zeros(2)), "masked positions get exactly zero gradient"
    assert scores.grad[0, 1].abs().sum() > 0


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_no_nan_anywhere_in_the_graph_under_anomaly_detection():
    scores = torch.randn(2, 2, 3, dtype=torch.float64, requires_grad=True)
    with torch.autograd.detect_anomaly():
        masked_softmax(scores, torch.tensor([0, 2])).sum().backward()
    assert torch.isfinite(scores.grad).all()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["none", "per_sequence", "per_query"])
def test_dtype_matrix_gives_finite_weights_and_gradients_even_for_extreme_scores(dtype, kind, device):
    big = torch.finfo(dtype).max
    gen = torch.Generator().manual_seed(1)
    scores = torch.randn(3, 4, 5, generator=gen, dtype=torch.float64) * 10
    scores[0, 0] = torch.tensor([6e4, -6e4, 6e4, -6e4, 0.0], dtype=torch.float64)
    scores[1, 0] = torch.tensor([big, -big, big, 0.0, -big], dtype=torch.float64)
    scores[2, 0] = torch.tensor([-big, -big, -6e4, -big, -big], dtype=torch.float64)
    scores = scores.to(dtype=dtype, device=device).requires_grad_()
    valid_lens = {
        "none": None,
        "per_sequence": torch.tensor([5, 3, 0]),
        "per_query": torch.tensor([[5, 4, 0, 1], [3, 3, 2, 0], [5, 1, 2, 3]]),
    }[kind]
    weights = masked_softmax(scores, None if valid_lens is None else valid_lens.to(device))
    assert weights.dtype == dtype and weights.device == scores.device
    assert torch.isfinite(weights).all()
    lens = lens_per_query(valid_lens, 3, 4, 5).to(device)
    torch.testing.assert_close(weights.float().sum(-1), (lens > 0).float(), rtol=0, atol=2e-2)
    (weights.float() * torch.linspace(-1, 1, 5, device=device)).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_float16_scores_at_the_limit_are_softmaxed_correctly():
    scores = torch.tensor([[[6e4, 6e4 - 32, -6e4]]], dtype=torch.float16)
    weights = masked_softmax(scores, torch.tensor([3]))
    expected = torch.softmax(scores.double(), -1).half()
    assert torch.equal(weights, expected)
    assert weights[0, 0, 0] > 0.99


@pytest.mark.parametrize("kind", ["per_sequence", "per_query"])
def test_masked_softmax_passes_gradcheck_including_empty_rows(kind):
    scores = torch.randn(3, 2, 4, dtype=torch.float64, requires_grad=True)
    valid_lens = torch.tensor([0, 2, 4]) if kind == "per_sequence" else torch.tensor([[0, 4], [1, 3], [2, 0]])
    assert torch.autograd.gradcheck(lambda s: masked_softmax(s, valid_lens), (scores,))
    assert torch.autograd.gradgradcheck(lambda s: masked_softmax(s, valid_lens), (scores,))


def test_masked_softmax_accepts_every_integer_dtype_for_valid_lens():
    scores = torch.randn(2, 1, 3)
    expected = masked_softmax(scores, torch.tensor([1, 3]))
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):
        assert torch.equal(masked_softmax(scores, torch.tensor([1, 3], dtype=dtype)), expected)


def test_masked_softmax_works_on_the_device_of_its_scores(device):
    scores = torch.randn(2, 2, 3, device=device)
    weights = masked_softmax(scores, torch.tensor([1, 2], device=device))
    assert weights.device == scores.device
    torch.testing.assert_close(weights.cpu(), masked_softmax(scores.cpu(), torch.tensor([1, 2])))


def test_masked_softmax_works_under_no_grad():
    with torch.no_grad():
        weights = masked_softmax(torch.randn(2, 2, 3, requires_grad=True), torch.tensor([1, 0]))
    assert not weights.requires_grad
    assert torch.equal(weights[1], torch.zeros(2, 3))


# ---------------------------------------------------------------- masked_softmax: error messages


@pytest.mark.parametrize(
    ("scores", "valid_lens", "message"),
    [
        (
            torch.ones(2, 3, 4, dtype=torch.int64),
            None,
            "scores must be a floating-point tensor, got dtype torch.int64",
        ),
        (
            torch.ones(2, 3, 4, dtype=torch.bool),
            None,
            "scores must be a floating-point tensor, got dtype torch.bool",
        ),
        ([[[0.0]]], None, "scores must be a torch.Tensor, got list"),
        (
            torch.ones(3, 4),
            None,
            r"scores has shape \(3, 4\), expected 3 dimensions \(batch_size, num_queries, num_k",
        ),
        (
            torch.ones(2, 3, 4),
            torch.tensor([1, 2, 3]),
            r"valid_lens has shape \(3,\), expected \(batch_size,\) = \(2,\) "
            r"or \(batch_size, num_queries\) = \(2, 3\)",
        ),
        (
            torch.ones(2, 3, 4),
            torch.ones(2, 4, dtype=torch.int64),
            r"valid_lens has shape \(2, 4\), expected",
        ),
        (
            torch.ones(2, 3, 4),
            torch.ones(2, 3, 1, dtype=torch.int64),
            r"valid_lens has shape \(2, 3, 1\), expected",
        ),
        (
            torch.ones(2, 3, 4),
            torch.tensor(2),
            r"valid_lens has shape \(\), expected \(batch_size,\) = \(2,\)",
        ),
        (
            torch.ones(2, 3, 4),
            torch.tensor([1.0, 2.0]),
            r"valid_lens must hold integer lengths, got dtype torch.float32; d2l accepts float lengths",
        ),
        (
            torch.ones(2, 3, 4),
            torch.tensor([True, False]),
            "valid_lens must hold integer lengths, got dtype torch.bool",
        ),
        (torch.ones(2, 3, 4), [1, 2], "valid_lens must be a torch.Tensor, got list"),
        (
            torch.ones(2, 3, 4),
            torch.tensor([-1, 2]),
            r"valid_lens must lie in \[0, num_keys\] = \[0, 4\], got values from -1 to 2",
        ),
        (
            torch.ones(2, 3, 4),
            torch.tensor([[1, 2, 3], [4, 5, 0]]),
            r"valid_lens must lie in \[0, num_keys\] = \[0, 4\], got values from 0 to 5",
        ),
    ],
)
def test_masked_softmax_rejects_bad_input_with_a_clear_message(scores, valid_lens, message):
    with pytest.raises(ValueError, match=message):
        masked_softmax(scores, valid_lens)


# ---------------------------------------------------------------- the unchecked forms the modules share


@given(shape=shapes, kind=lens_kinds, dtype=st.sampled_from(FLOAT_DTYPES), seed=seeds)
@FAST
def test_unchecked_masked_softmax_equals_the_checked_one(shape, kind, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(*shape, generator=gen).to(dtype)
    lens = random_lens(*shape, kind, low=0, gen=gen)
    assert torch.equal(masked_softmax_unchecked(scores, lens), masked_softmax(scores, lens))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_excluding_zeroes_any_mask_and_equals_masked_softmax_on_padding(dtype):
    scores = torch.randn(2, 3, 5).to(dtype)
    window = torch.tensor([[0, 1, 1, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)[None]
    weights = softmax_excluding(scores, ~window)
    assert weights.dtype == dtype
    assert torch.all(weights[~window.expand_as(weights)] == 0)  # an all-excluded row is all 0
    assert torch.allclose(weights.float().sum(-1), torch.tensor([[1.0, 1.0, 0.0]] * 2), atol=1e-2)
    lens = torch.tensor([3, 0])
    padding = torch.arange(5) >= lens[:, None, None]
    assert torch.equal(softmax_excluding(scores, padding), masked_softmax(scores, lens))
