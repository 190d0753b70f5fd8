"""Chapter 1's exercises, masking: `sequence_mask` (ch1.q1) and `masked_softmax` (ch1.q2).

Each exercise is an `Exercise` with its cases (shapes, valid lengths of 0 and of the full length, dtypes), its
reference in `attn_course.attention.masking`, and its known mistakes, each written as the wrong code a learner
writes (`mask_inverted`, `softmax_wrong_axis`, ...), whose output names the learner's likely mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from attn_course.validation import check_positive_int
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course_exercises.inputs import (
    keep_mask,
    lens_text,
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
)


def _sequence_mask_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    shape = tuple(spec["shape"])
    if len(shape) < 2:
        raise ValueError(f"shape must be 2+ positive ints (batch_size, maxlen, ...), got {spec['shape']!r}")
    for axis, size in enumerate(shape):
        check_positive_int(f"shape[{axis}]", size)
    if dtype.is_floating_point:
        X = seeded_randn(shape, gen, dtype)
    else:
        X = torch.randint(1, 100, shape, generator=gen).to(dtype)
    lens = spec_lengths(spec["valid_len"], shape[:1], shape[1], gen, "valid_len")
    inputs = {"X": X, "valid_len": lens, "value": spec["value"]}
    label = (
        f"X of shape {shape} and dtype {spec['dtype']}, valid_len {lens.tolist()}, value {spec['value']!r}"
    )
    return Case(label, inputs, spec, "the result")


# The mistakes of ch1.q1, each written as a learner writes it.


def mask_keeps_one_too_many(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] <= valid_len[:, None]
    return X.masked_fill(~keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)


def mask_drops_last_real(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None] - 1
    return X.masked_fill(~keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)


def mask_inverted(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    return X.masked_fill(keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)


def mask_last_axis(X, valid_len, value=0):
    keep = torch.arange(X.shape[-1])[None, :] < valid_len[:, None]
    return X.masked_fill(~keep.reshape(X.shape[0], *([1] * (X.dim() - 2)), X.shape[-1]), value)


def mask_ignores_value(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    return X * keep.reshape(*keep.shape, *([1] * (X.dim() - 2)))


def mask_first_row_length(X, valid_len, value=0):
    Y = X.clone()
    Y[:, int(valid_len[0]) :] = value
    return Y


SEQUENCE_MASK = Exercise(
    "ch1.q1",
    "sequence_mask",
    "sequence_mask: blank out the padding of a batch",
    solution='''
def sequence_mask(X, valid_len, value=0):
    """A copy of X with every position at or beyond its row's valid length set to `value`.

    X: (batch_size, maxlen, *rest), any dtype; the mask runs along axis 1 and covers all of *rest.
    valid_len: (batch_size,) integer, each in [0, maxlen].
    Returns: a new tensor shaped and typed like X; X itself is left unchanged.
    """
    keep = torch.arange(X.shape[1], device=X.device)[None, :] < valid_len[:, None]  # (batch_size, maxlen)
    keep = keep.reshape(*keep.shape, *([1] * (X.dim() - 2)))                       # broadcast over *rest
    return X.masked_fill(~keep, value)
''',
    hint=(
        "Whether position j of row i is padding depends on two numbers only. Which two, and could you "
        "compare them for every (i, j) at once, without a loop?",
        "Broadcasting builds the mask: a row of positions 0 .. maxlen-1 compared with a column of valid "
        "lengths gives the whole (batch_size, maxlen) grid of real positions. Give it X's trailing axes "
        "(of size 1) so it covers them too, and fill a *new* tensor: the caller's X must stay as it was.",
        "Write the mask line: positions from an arange over axis 1 as a row, `valid_len` as a column, "
        "compared with `<`. Reshape it to (batch_size, maxlen, 1, ..., 1), then return X filled with "
        "`value` wherever the mask is False, with the out-of-place `masked_fill`.",
    ),
    covers="2-, 3- and 4-D X; float16/32/64 and int64; valid length 0 and full; maxlen 1; X left unchanged; "
    "a batch with no row at full length",
    defaults={"seed": 0, "shape": [3, 4], "dtype": "float32", "valid_len": "random", "value": 0},
    specs=[
        {"seed": 1, "shape": [3, 4], "valid_len": [1, 3, 4], "value": 0},
        {"seed": 2, "shape": [2, 5, 3], "valid_len": [2, 5], "value": -1.0},
        {"seed": 3, "shape": [3, 4], "dtype": "int64", "valid_len": [0, 2, 4], "value": -1},
        {"seed": 4, "shape": [2, 1], "dtype": "float64", "valid_len": [1, 0], "value": 0},
        {"seed": 5, "shape": [2, 3, 2, 2], "dtype": "float16", "valid_len": [3, 1], "value": 7},
        {"seed": 6, "shape": [3, 5], "valid_len": [2, 0, 3], "value": 0},
    ],
    build=_sequence_mask_case,
    call=lambda answer, i: answer(i["X"], i["valid_len"], i["value"]),
    reference=lambda i: resolve("attn_course.attention.masking.sequence_mask")(
        i["X"], i["valid_len"], i["value"]
    ),
    mistakes=[
        Mistake(
            "Off by one: you kept one padded position too many. Position `valid_len` itself is already "
            "padding (positions 0 .. valid_len-1 are real), so keep `j < valid_len`, not `j <= valid_len`.",
            wrong=mask_keeps_one_too_many,
        ),
        Mistake(
            "Off by one: you masked the last real position too. Positions 0 .. valid_len-1 are real: "
            "keep `j < valid_len`.",
            wrong=mask_drops_last_real,
        ),
        Mistake(
            "The mask is inverted: you blanked the real positions and kept the padding. Keep positions "
            "`j < valid_len`; fill the others.",
            wrong=mask_inverted,
        ),
        Mistake(
            "You masked along the last axis. The sequence axis is axis 1 (X is (batch_size, maxlen, ...)): "
            "a padded position has all of its trailing features masked.",
            wrong=mask_last_axis,
        ),
        Mistake(
            "The `value` argument was ignored: padded positions must be set to `value`, not to 0.",
            wrong=mask_ignores_value,
        ),
        Mistake(
            "Every row was cut at the first row's valid length: row i has its own length, `valid_len[i]`; "
            "compare the positions with the column `valid_len[:, None]`.",
            wrong=mask_first_row_length,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"shape mismatch|must match the size|cannot be broadcast|shape .* is invalid",
            "The mask does not broadcast against X. Build it over all maxlen positions, "
            "`torch.arange(X.shape[1])` (not up to the longest valid length: a batch may have no row at "
            "full length), and for X with trailing axes reshape it to (batch_size, maxlen, 1, ..., 1).",
        ),
    ],
    package=["attn_course.attention.masking.sequence_mask"],
)


def _masked_softmax_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, q, k = (spec_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be floating, got {spec['dtype']}")
    scores = seeded_randn((b, q, k), gen, dtype, scale=spec["scale"])
    form = spec["valid_lens"]
    shape = (b, q) if spec["per_query"] else (b,)
    lens = spec_lengths(form, shape, k, gen, "valid_lens")
    inputs = {"scores": scores, "valid_lens": lens}
    grad = bool(spec["grad"])
    if grad:
        inputs["probe"] = seeded_randn((b, q, k), gen, torch.float32)
    size = f", scores up to {scores.abs().max().item():.0f} in size" if spec["scale"] > 2 else ""
    label = f"scores of shape {(b, q, k)} and dtype {spec['dtype']}, {lens_text(lens)}{size}" + (
        ", with the gradient of the weights" if grad else ""
    )
    names = ("the weights", "the gradient with respect to the scores") if grad else "the weights"
    return Case(label, inputs, spec, names)


def _masked_softmax_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    if "probe" not in inputs:
        return fn(inputs["scores"], inputs["valid_lens"])
    scores = inputs["scores"].requires_grad_(True)
    weights = fn(scores, inputs["valid_lens"])
    (gradient,) = torch.autograd.grad((weights.float() * inputs["probe"]).sum(), scores)
    return weights, gradient


# The mistakes of ch1.q2, each written as a learner writes it.


def _written_masked_softmax(scores, valid_lens=None):
    """A right masked softmax, as a learner writes it: what three of the mistakes below build on."""
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1) * keep


def softmax_wrong_axis(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, -1e4), dim=1) * keep


def softmax_no_mask(scores, valid_lens=None):
    return F.softmax(scores.float(), dim=-1).to(scores.dtype)


def softmax_d2l_fill(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(torch.where(keep, scores, torch.tensor(-1e6)), dim=-1)


def softmax_fill_minus_1e6_in_dtype(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    filled = torch.where(keep, scores, torch.tensor(-1e6, dtype=scores.dtype))
    return F.softmax(filled, dim=-1) * keep


def softmax_fill_float32_min(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    filled = torch.where(keep, scores, torch.finfo(torch.float32).min)
    return F.softmax(filled, dim=-1) * keep


def softmax_neg_inf(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def softmax_then_zero(scores, valid_lens=None):
    weights = F.softmax(scores, dim=-1)
    if valid_lens is None:
        return weights
    return weights * keep_mask(valid_lens, scores.shape[1], scores.shape[2])


def softmax_float32_out(scores, valid_lens=None):
    if scores.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError("this mistake is made on half-precision scores only")
    return _written_masked_softmax(scores.float(), valid_lens)


def softmax_unstabilised(scores, valid_lens=None):
    keep = torch.ones_like(scores, dtype=torch.bool)
    if valid_lens is not None:
        keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    e = torch.exp(scores) * keep
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


def softmax_first_column(scores, valid_lens=None):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return _written_masked_softmax(scores, valid_lens)


def softmax_keeps_one_too_many(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    return _written_masked_softmax(scores, valid_lens + 1)


def softmax_zero_filled(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    return F.softmax(scores * keep_mask(valid_lens, scores.shape[1], scores.shape[2]), dim=-1)


#: The error of filling a half-precision tensor with a number beyond its range.
_OVERFLOW = r"cannot be converted to type .*(Half|BFloat16) without overflow"

MASKED_SOFTMAX = Exercise(
    "ch1.q2",
    "masked_softmax",
    "masked_softmax: a softmax that ignores padding, empty rows included",
    solution='''
def masked_softmax(scores, valid_lens=None):
    """Softmax over the last axis that gives weight exactly 0 to keys beyond each valid length.

    scores: (batch_size, num_queries, num_keys), floating (float16, bfloat16, float32, float64).
    valid_lens: None, (batch_size,) (one length per sequence) or (batch_size, num_queries) (one per query).
    Returns: weights shaped and typed like scores; each row sums to 1, or is all 0 if its valid length is 0.
    """
    work = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    if valid_lens is None:
        return F.softmax(work, dim=-1).to(scores.dtype)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = torch.arange(scores.shape[-1], device=scores.device) < lens  # (batch, 1 or num_queries, num_keys)
    filled = work.masked_fill(~keep, torch.finfo(work.dtype).min)       # finite in every dtype: no NaN
    return (F.softmax(filled, dim=-1) * keep).to(scores.dtype)          # rows of valid length 0 become 0
''',
    hint=(
        "What should a padded key's weight be after the softmax, what must its score be before it for "
        "that to happen in every dtype, float16 included, and what should a row with no real key at all "
        "come out as?",
        "Mask, then softmax, then zero: fill the padded scores with the most negative *finite* number of "
        "the working dtype (`torch.finfo(...).min`; -1e6 overflows float16, -inf makes an all-masked row "
        "NaN), softmax over the keys, and multiply by the mask so that an empty row is all 0. Half "
        "precision is safer worked in float32 and converted back.",
        "The `keep` line compares an arange over the keys with the lengths given two new axes (one per "
        "sequence) or one (one per query); the fill line uses the working dtype's minimum; the return "
        "line multiplies the softmax over the last axis by `keep` and converts back to the scores' dtype.",
    ),
    covers="valid_lens None, (batch_size,) and (batch_size, num_queries); rows of valid length 0; one key; "
    "float16, bfloat16, float32, float64; finite gradients; scores left unchanged; "
    "large scores in float32 and float16",
    defaults={
        "seed": 0,
        "batch_size": 2,
        "num_queries": 3,
        "num_keys": 5,
        "dtype": "float32",
        "valid_lens": "random",
        "per_query": False,
        "grad": False,
        "scale": 2.0,
    },
    specs=[
        {"seed": 11, "valid_lens": None},
        {"seed": 12, "valid_lens": [2, 5]},
        {
            "seed": 13,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 4,
            "valid_lens": [[1, 4], [2, 3], [4, 4]],
            "per_query": True,
        },
        {"seed": 14, "num_queries": 2, "num_keys": 6, "valid_lens": [0, 3]},
        {"seed": 15, "num_queries": 1, "num_keys": 1, "dtype": "float64", "valid_lens": [1, 0]},
        {"seed": 16, "dtype": "float16", "valid_lens": [0, 4]},
        {
            "seed": 17,
            "num_queries": 2,
            "num_keys": 4,
            "dtype": "bfloat16",
            "valid_lens": [[0, 4], [3, 1]],
            "per_query": True,
        },
        {"seed": 18, "num_queries": 2, "num_keys": 4, "valid_lens": [0, 3], "grad": True},
        {"seed": 19, "valid_lens": [4, 2], "scale": 100.0},
        {
            "seed": 20,
            "num_keys": 4,
            "dtype": "float16",
            "valid_lens": [[3, 1, 2], [2, 0, 3]],
            "per_query": True,
            "scale": 12.0,
        },
    ],
    build=_masked_softmax_case,
    call=_masked_softmax_call,
    reference=lambda i: _masked_softmax_call(resolve("attn_course.attention.masking.masked_softmax"), i),
    mistakes=[
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the keys must sum to 1, so "
            "normalise over the last axis (`dim=-1`, the keys), not over the queries.",
            wrong=softmax_wrong_axis,
        ),
        Mistake(
            "The mask is not applied: the padded keys still get weight. Use `valid_lens` to fill the "
            "padded scores before the softmax.",
            wrong=softmax_no_mask,
        ),
        Mistake(
            "A row whose valid length is 0 came out uniform (1/num_keys everywhere): that is what d2l's "
            "-1e6 fill gives when every key of a row is masked. A row with no real key must attend to "
            "nothing: zero the masked weights after the softmax (e.g. multiply by the mask).",
            wrong=softmax_d2l_fill,
        ),
        Mistake(
            "NaN in float16: -1e6 does not fit in float16 (its largest magnitude is 65504), so it became "
            "-inf and a row of valid length 0 softmaxed to NaN, which zeroing cannot undo (NaN x 0 = NaN). "
            "Fill with `torch.finfo(scores.dtype).min`, which fits every dtype.",
            wrong=softmax_fill_minus_1e6_in_dtype,
        ),
        Mistake(
            "NaN in half precision: `torch.finfo(torch.float32).min` (about -3.4e38) is beyond the range "
            "of float16 (largest magnitude 65504) and of bfloat16 (about 3.39e38), so stored in the scores' "
            "dtype it became -inf, and a row of valid length 0, all -inf, softmaxed to NaN (0/0), which "
            "zeroing cannot undo. Fill with the minimum of the scores' own dtype, "
            "`torch.finfo(scores.dtype).min`, or fill and softmax in float32, then convert back.",
            wrong=softmax_fill_float32_min,
        ),
        Mistake(
            "A row whose valid length is 0 came out NaN: with -inf in every position the softmax computes "
            "0/0. Fill with a finite number (`torch.finfo(scores.dtype).min`) and zero the masked weights "
            "after the softmax.",
            wrong=softmax_neg_inf,
        ),
        Mistake(
            "You zeroed the padded weights after a softmax over all keys, so the real weights no longer "
            "sum to 1. Mask the scores *before* the softmax (fill them with a very negative number), then "
            "zero the padded weights.",
            wrong=softmax_then_zero,
        ),
        Mistake(
            "For float16/bfloat16 scores, return weights of the same dtype: compute in float32 if you like, "
            "then `.to(scores.dtype)`.",
            wrong=softmax_float32_out,
        ),
        Mistake(
            "Large scores overflow: `torch.exp` of a score above about 88 (float32) or 11 (float16) is inf, "
            "and inf / inf is NaN. Subtract each row's max before `exp` (that is what `F.softmax` does), or "
            "use `F.softmax` on the filled scores.",
            wrong=softmax_unstabilised,
        ),
        Mistake(
            "valid_lens of shape (batch_size, num_queries) gives one length per query; you used one per "
            "sequence (e.g. its first column). Broadcast it as `valid_lens[:, :, None]` against the keys.",
            wrong=softmax_first_column,
        ),
        Mistake(
            "Off by one: one key too many gets weight. Key `valid_lens` itself is already padding (keys "
            "0 .. valid_lens-1 are real), so keep `j < valid_lens`, not `j <= valid_lens`.",
            wrong=softmax_keeps_one_too_many,
        ),
        Mistake(
            "The padded scores were set to 0 (e.g. `scores * mask`), and a score of 0 still gets weight "
            "after the softmax. Fill them with a very negative number (`torch.finfo(scores.dtype).min`) "
            "before the softmax, then zero the padded weights.",
            wrong=softmax_zero_filled,
        ),
    ],
    error_hints=[
        ErrorHint(
            _OVERFLOW,
            "`torch.finfo(torch.float32).min` (about -3.4e38) does not fit in float16 (largest magnitude "
            "65504) nor in bfloat16 (about 3.39e38), so filling half-precision scores with it fails. Fill "
            "with the minimum of the scores' own dtype, `torch.finfo(scores.dtype).min`, or fill and "
            "softmax in float32, then convert back.",
            line=r"float32|3\.4\d*e\+?38",
        ),
        ErrorHint(
            _OVERFLOW,
            "-1e6 does not fit in float16 (its largest magnitude is 65504). Fill with "
            "`torch.finfo(scores.dtype).min`, which fits every dtype.",
            line=r"1e\+?0?6|10\s*\*\*\s*6|1_?000_?000",
        ),
        ErrorHint(
            _OVERFLOW,
            "The fill value does not fit in the scores' half-precision dtype (float16's largest magnitude is "
            "65504: -1e6 is beyond it, and float32's minimum is beyond bfloat16's range too). Fill with "
            "`torch.finfo(scores.dtype).min`, which fits every dtype.",
        ),
        ErrorHint(
            r"does not require grad|does not have a grad_fn",
            "Your function cuts the gradient (e.g. `.detach()`, `torch.no_grad()`, or building a new "
            "tensor from Python numbers): the weights must stay differentiable with respect to the scores.",
        ),
    ],
    package=[
        "attn_course.attention.masking.masked_softmax",
        "attn_course.attention.masking.masked_softmax_unchecked",
    ],
)
