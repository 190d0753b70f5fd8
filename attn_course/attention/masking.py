"""Masking a padded batch: sequence_mask for any per-position tensor, masked_softmax for attention scores.

A batch of sentences is padded to a common length; the padding positions must get no attention.
d2l fills them with -1e6 before the softmax. That works for most rows but fails in two ways the
course shows: a row whose valid length is 0 gets uniform weights instead of zeros, and in float16
-1e6 rounds to -inf, so such a row becomes NaN. Here masked positions are set to exactly 0 *after*
the softmax, the softmax runs in at least float32, and nothing in the forward or backward pass is NaN.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from attn_course.validation import check_floating, check_shape, check_tensor, check_valid_lens

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def sequence_mask(X: torch.Tensor, valid_len: torch.Tensor, value: float = 0) -> torch.Tensor:
    """Return a copy of X with every position at or beyond its sequence's valid length set to `value`.

    X: (batch_size, maxlen, *rest), any dtype; the mask runs along dim 1 and covers all of `rest`.
    valid_len: (batch_size,) integer, each in [0, maxlen].
    Returns: a new tensor shaped and typed like X (d2l's sequence_mask writes into X; this one does not).
    """
    check_tensor("X", X)
    if X.dim() < 2:
        raise ValueError(
            f"X has shape {tuple(X.shape)}, expected (batch_size, maxlen, ...) with 2+ dimensions"
        )
    check_shape("valid_len", valid_len, {"batch_size": X.shape[0]})
    check_valid_lens(valid_len, X.shape[0], None, X.shape[1], low=0, name="valid_len")
    positions = torch.arange(X.shape[1], device=X.device)
    padding = positions >= valid_len.to(X.device)[:, None]  # (batch_size, maxlen)
    padding = padding.view(*padding.shape, *([1] * (X.dim() - 2)))
    return X.masked_fill(padding, value)


def masked_softmax(scores: torch.Tensor, valid_lens: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis that gives exactly 0 weight to positions beyond each valid length.

    scores: (batch_size, num_queries, num_keys), floating (float16, bfloat16, float32, float64).
    valid_lens: None (nothing masked), (batch_size,) (one length per sequence, shared by its queries) or
        (batch_size, num_queries) (one per query); integer, each in [0, num_keys].
    Returns: weights like `scores` (same shape and dtype); each row sums to 1, or is all 0 if its valid
        length is 0; masked positions are exactly 0 and receive exactly 0 gradient.

    Equation (Bahdanau et al. 2014, eq. 6, restricted to the valid keys):
    alpha_ij = exp(e_ij) / sum_{k < len_i} exp(e_ik) for j < len_i, else 0.
    Half-precision scores are softmaxed in float32 and cast back, so scores up to the dtype's limits
    (e.g. +-6e4 in float16) give finite weights. Unlike d2l's, this function never modifies `scores`.
    """
    check_floating("scores", scores)
    if scores.dim() != 3:
        expected = "3 dimensions (batch_size, num_queries, num_keys)"
        raise ValueError(f"scores has shape {tuple(scores.shape)}, expected {expected}")
    valid_lens = check_valid_lens(valid_lens, *scores.shape, low=0)
    if valid_lens is not None:
        valid_lens = valid_lens.to(scores.device)
    return masked_softmax_unchecked(scores, valid_lens)


def masked_softmax_unchecked(scores: torch.Tensor, valid_lens: torch.Tensor | None) -> torch.Tensor:
    """masked_softmax without the checks, for callers that validated once (attention modules).

    valid_lens must already be on the device of `scores`.
    """
    if valid_lens is None:
        work_dtype = torch.float32 if scores.dtype in _HALF_DTYPES else scores.dtype
        return F.softmax(scores, dim=-1, dtype=work_dtype).to(scores.dtype)
    # (batch, 1, 1) or (batch, num_queries, 1) against (num_keys,): broadcasting builds the mask directly.
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[..., None]
    padding = torch.arange(scores.shape[-1], device=scores.device) >= lens
    return softmax_excluding(scores, padding)


def softmax_excluding(scores: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis that gives exactly 0 weight wherever `excluded` is True; no checks.

    scores: (..., num_keys) floating; excluded: bool, broadcastable to `scores` (padding, or a local
    attention window's outside). Returns weights like `scores`; a row excluded everywhere is all 0.
    """
    work_dtype = torch.float32 if scores.dtype in _HALF_DTYPES else scores.dtype
    # The most negative *finite* value, not -inf: an all-excluded row then softmaxes to a uniform row
    # (finite, no NaN anywhere, even in the backward pass) before being zeroed below.
    filled = scores.to(work_dtype).masked_fill(excluded, torch.finfo(work_dtype).min)
    return F.softmax(filled, dim=-1).masked_fill(excluded, 0.0).to(scores.dtype)
