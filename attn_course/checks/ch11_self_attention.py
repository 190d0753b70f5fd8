"""Chapter 11's exercises, self-attention: the causal + padding mask (ch11.q1) and multi-head attention's
split into heads and merge back (ch11.q2).

Their references are `attn_course.attention.multihead`; the mistakes named include the upper triangle for the lower, a
diagonal left out or one too many, padding on the query axis, heads split with a reshape that mixes positions
and heads, a missing 1/sqrt(d_head), and lengths tiled instead of repeated per head.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn import functional as F

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import (
    finite_masked_softmax,
    lens_text,
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
)


# ---------------------------------------------------------------------------------------------- ch11.q1
def _mask_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    b, n = spec_size(spec, "batch_size"), spec_size(spec, "num_steps")
    lens = spec_lengths(spec["valid_lens"], (b,), n, gen, "valid_lens")
    return Case(f"{lens_text(lens)}, num_steps {n}", {"valid_lens": lens, "num_steps": n}, spec, "the mask")


def _mask(
    inputs: dict[str, Any], *, causal: str = "lower", padding: str = "keys", combine: str = "and"
) -> torch.Tensor:
    """The mask (batch_size, n, n), or a wrong one: causal "lower" (j <= i), "upper", "strict" (j < i),
    "plus_one" (j <= i + 1), "none"; padding "keys" (j < len), "queries" (i < len), "both" (i, j < len),
    "none"; combine "and" (right) or "or"."""
    lens, n = inputs["valid_lens"], inputs["num_steps"]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    rule = {"lower": j <= i, "upper": j >= i, "strict": j < i, "plus_one": j <= i + 1,
            "none": torch.ones(n, n, dtype=torch.bool)}[causal]
    if padding == "keys":
        pad = torch.arange(n)[None, None, :] < lens[:, None, None]
    elif padding == "queries":
        pad = torch.arange(n)[None, :, None] < lens[:, None, None]
    elif padding == "both":
        real = torch.arange(n)[None, :] < lens[:, None]
        pad = real[:, :, None] & real[:, None, :]
    else:
        pad = torch.ones(1, 1, 1, dtype=torch.bool)
    mask = rule[None] | pad if combine == "or" else rule[None] & pad
    return mask.expand(len(lens), n, n).clone()


CAUSAL_MASK = Exercise(
    "ch11.q1",
    "causal_padding_mask",
    "The decoder's mask: causal and padding together",
    solution='''
def causal_padding_mask(valid_lens, num_steps):
    """Which keys each query of a decoder's self-attention may see: True = may attend.

    valid_lens: (batch_size,) integer, real positions of each sequence, in [0, num_steps].
    num_steps: the padded length (queries and keys are the same num_steps positions).
    Returns: bool (batch_size, num_steps, num_steps); [b, i, j] is True iff j <= i (no peeking at later
    positions) and j < valid_lens[b] (no padding key).
    """
    positions = torch.arange(num_steps, device=valid_lens.device)
    causal = positions[None, :] <= positions[:, None]                        # (num_steps, num_steps): j <= i
    padding = positions[None, None, :] < valid_lens[:, None, None]           # (batch_size, 1, num_steps)
    return causal[None] & padding
''',
    hint="Two conditions, each a comparison of two aranges that broadcasting turns into a grid: one "
    "between the query's position and the key's (which of the two may be larger?), one between the key's "
    "position and the sequence's length. Combine them with `&`; write out the 3 x 3 grid for one sentence "
    "by hand to check the diagonal.",
    covers="valid lengths 0, 1, in between and full; one step; batches of 1 to 3",
    defaults={"seed": 0, "batch_size": 2, "num_steps": 4, "valid_lens": "random"},
    specs=[
        {"seed": 1, "batch_size": 2, "num_steps": 4, "valid_lens": [4, 2]},
        {"seed": 2, "batch_size": 3, "num_steps": 5, "valid_lens": [5, 0, 3]},
        {"seed": 3, "batch_size": 1, "num_steps": 1, "valid_lens": [1]},
        {"seed": 4, "batch_size": 2, "num_steps": 6, "valid_lens": [1, 6]},
    ],
    build=_mask_case,
    call=lambda answer, i: answer(i["valid_lens"], i["num_steps"]),
    reference=lambda i: _mask(i),
    mistakes=[
        Mistake(
            "This is the upper triangle: query i sees the keys *after* it (j >= i). A decoder may look back, "
            "not ahead: keep j <= i (torch.tril, not torch.triu).",
            lambda i: _mask(i, causal="upper"),
        ),
        Mistake(
            "Off by one: the diagonal is masked, so query i cannot see its own position (and query 0 sees "
            "nothing). Keep j <= i, not j < i.",
            lambda i: _mask(i, causal="strict"),
        ),
        Mistake(
            "Off by one: query i also sees position i + 1, the word it must predict. Keep j <= i.",
            lambda i: _mask(i, causal="plus_one"),
        ),
        Mistake(
            "The padding is not masked: only the causal triangle is applied. Keys at positions j >= "
            "valid_lens[b] are padding and must be False too.",
            lambda i: _mask(i, padding="none"),
        ),
        Mistake(
            "The causal triangle is missing: only the padding is masked, so every query sees the whole "
            "sentence, later words included.",
            lambda i: _mask(i, causal="none"),
        ),
        Mistake(
            # With j <= i, padding on the rows alone and on both axes give the same mask: one hint for both.
            "The padding mask runs along the queries (rows), alone or on both axes (with the causal "
            "triangle the two give the same mask): padded queries, rows i >= valid_lens[b], lost every key. "
            "What must be hidden is a padding *key*, column j >= valid_lens[b], for every query; drop the "
            "condition on the rows.",
            lambda i: _mask(i, padding="queries"),
        ),
        Mistake(
            "The two conditions are combined with `|`: a key may be attended only when it is in the past "
            "(j <= i) *and* real (j < valid_lens[b]), so combine them with `&`.",
            lambda i: _mask(i, combine="or"),
        ),
        Mistake(
            "The mask is inverted: True must mean 'may attend' (the convention of "
            "F.scaled_dot_product_attention's boolean attn_mask), not 'masked out'.",
            lambda i: ~_mask(i),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"shape mismatch|must match the size|cannot be broadcast",
            "The two conditions do not broadcast together: give the causal grid the shape (num_steps, "
            "num_steps) and the padding condition the shape (batch_size, 1, num_steps), one length per "
            "sequence along the first axis.",
        ),
    ],
    package=["attn_course.attention.multihead.attention_lens"],
)


# ---------------------------------------------------------------------------------------------- ch11.q2
def _mha_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, q, k = (spec_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    h, d_head = spec_size(spec, "num_heads"), spec_size(spec, "head_size")
    d = h * d_head
    inputs: dict[str, Any] = {
        "queries": seeded_randn((b, q, d), gen, dtype, 1.5),
        "keys": seeded_randn((b, k, d), gen, dtype, 1.5),
        "values": seeded_randn((b, k, d), gen, dtype),
    }
    for name in ("W_q", "W_k", "W_v", "W_o"):
        inputs[name] = seeded_randn((d, d), gen, dtype, 1 / math.sqrt(d))
    inputs["num_heads"] = h
    lens = spec_lengths(spec["valid_lens"], (b, q) if spec["per_query"] else (b,), k, gen, "valid_lens")
    inputs["valid_lens"] = lens
    label = (f"queries {(b, q, d)}, keys and values {(b, k, d)}, num_heads {h}, {lens_text(lens)}, "
             f"dtype {spec['dtype']}")
    return Case(label, inputs, spec, ("the outputs", "the weights"))


def _split_right(X: torch.Tensor, h: int) -> torch.Tensor:
    b, n, d = X.shape
    return X.reshape(b, n, h, d // h).transpose(1, 2).reshape(b * h, n, d // h)


def _split_view(X: torch.Tensor, h: int) -> torch.Tensor:
    """The wrong split: X.reshape(b * h, n, d_head) without moving the heads first (mixes positions)."""
    b, n, d = X.shape
    return X.reshape(b * h, n, d // h)


def _split_strided(X: torch.Tensor, h: int) -> torch.Tensor:
    """Head k gets features k, k + h, k + 2h, ...: the last axis viewed as (d_head, h), not (h, d_head)."""
    b, n, d = X.shape
    return X.reshape(b, n, d // h, h).permute(0, 3, 1, 2).reshape(b * h, n, d // h)


def _merge_right(X: torch.Tensor, h: int) -> torch.Tensor:
    bh, n, dh = X.shape
    return X.reshape(bh // h, h, n, dh).transpose(1, 2).reshape(bh // h, n, h * dh)


def _merge_view(X: torch.Tensor, h: int) -> torch.Tensor:
    bh, n, dh = X.shape
    return X.reshape(bh // h, n, h * dh)


def _merge_strided(X: torch.Tensor, h: int) -> torch.Tensor:
    bh, n, dh = X.shape
    return X.reshape(bh // h, h, n, dh).permute(0, 2, 3, 1).reshape(bh // h, n, h * dh)


_SPLITS = {"right": (_split_right, _merge_right), "view": (_split_view, _merge_view),
           "strided": (_split_strided, _merge_strided), "strided_split": (_split_strided, _merge_right),
           "no_merge_transpose": (_split_right, _merge_view)}


def _mha(inputs: dict[str, Any], *, split: str = "right", scale: str = "d_head", lens: str = "interleave",
         output_layer: bool = True, mask: bool = True,
         untransposed: tuple[str, ...] = ()) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Multi-head attention, or a learner's wrong version of it (see the mistakes)."""
    q, k, v, h = inputs["queries"], inputs["keys"], inputs["values"], inputs["num_heads"]
    # X @ W instead of X @ W.T for the weights named in `untransposed`: F.linear with them transposed.
    inputs = dict(inputs, **{w: inputs[w].T for w in untransposed})
    valid_lens = inputs["valid_lens"] if mask else None
    b, num_queries, d = q.shape
    split_heads, merge_heads = _SPLITS[split]
    pairs = ((q, "W_q"), (k, "W_k"), (v, "W_v"))
    qh, kh, vh = (split_heads(F.linear(x, inputs[w]), h) for x, w in pairs)
    divisor = {"d_head": math.sqrt(d // h), "d": math.sqrt(d), "none": 1.0}[scale]
    scores = torch.bmm(qh, kh.transpose(1, 2)) / divisor
    if valid_lens is not None:
        valid_lens = (valid_lens.repeat_interleave(h, dim=0) if lens == "interleave"
                      else valid_lens.repeat(h, *([1] * (valid_lens.dim() - 1))))
    weights = finite_masked_softmax(scores, valid_lens)
    context = merge_heads(torch.bmm(weights, vh), h)
    outputs = F.linear(context, inputs["W_o"]) if output_layer else context
    return outputs, weights.reshape(b, h, num_queries, -1)


def _mha_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    q = inputs["queries"]
    d = q.shape[-1]
    layer = resolve("attn_course.attention.multihead.MultiHeadAttention")(d, inputs["num_heads"], bias=False)
    layer = layer.to(q.dtype)
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v", "W_o"):
            getattr(layer, name).weight.copy_(inputs[name])
    with torch.no_grad():
        return layer(q, inputs["keys"], inputs["values"], inputs["valid_lens"])


def _tiled_lens(inputs: dict[str, Any]):
    """The tiled-lengths mistake only shows when the sequences' lengths differ."""
    lens = inputs["valid_lens"]
    if lens is None or bool((lens == lens[:1]).all()):
        return None
    return _mha(inputs, lens="tile")


_STRIDED = (
    "Each head takes every num_heads-th feature (features k, k + h, ...), not a block of d_head consecutive "
    "features: the last axis must be viewed as (num_heads, d_head), in that order."
)

_UNTRANSPOSED = (
    "The projections are applied as `X @ W`: W_q, W_k, W_v and W_o are nn.Linear weights, so a projection "
    "is `X @ W.T` (what `F.linear(X, W)` computes)."
)

MULTI_HEAD = Exercise(
    "ch11.q2",
    "multi_head_attention",
    "Multi-head attention: split into heads, attend, merge",
    solution='''
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    """Multi-head attention (Vaswani et al. 2017, sec. 3.2.2) with bias-free projections.

    queries: (batch_size, num_queries, d); keys, values: (batch_size, num_keys, d);
    W_q, W_k, W_v, W_o: (d, d), applied as X @ W.T (nn.Linear's weight); num_heads divides d;
    valid_lens: None, (batch_size,) or (batch_size, num_queries).
    Returns: outputs (batch_size, num_queries, d), weights (batch_size, num_heads, num_queries, num_keys).
    Head k uses features k * d_head .. (k + 1) * d_head - 1 of each projection, d_head = d / num_heads;
    the heads may run one at a time in a loop or all at once, batched.
    """
    batch_size, num_queries, d = queries.shape
    d_head = d // num_heads

    def split(X):                      # (batch_size, n, d) -> (batch_size * num_heads, n, d_head)
        X = X.reshape(X.shape[0], X.shape[1], num_heads, d_head).transpose(1, 2)
        return X.reshape(-1, X.shape[2], d_head)

    q, k, v = split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)
    if valid_lens is not None:
        valid_lens = valid_lens.repeat_interleave(num_heads, dim=0)    # row b * num_heads + k: sequence b
    weights = masked_softmax(q @ k.transpose(1, 2) / math.sqrt(d_head), valid_lens)
    context = (weights @ v).reshape(batch_size, num_heads, num_queries, d_head).transpose(1, 2)
    outputs = context.reshape(batch_size, num_queries, d) @ W_o.T
    return outputs, weights.reshape(batch_size, num_heads, num_queries, -1)
''',
    hint="Project first, then split each projection's d features into num_heads blocks of d / num_heads "
    "consecutive features and move the heads next to the batch axis, so that one batched matrix product "
    "serves every head; a plain reshape to (batch_size * num_heads, n, d_head) would cut through the "
    "positions. Each head scales by the square root of its own size. The lengths must follow the rows "
    "they belong to; merging back undoes the split in reverse order.",
    covers="1 to 4 heads; valid_lens None, (batch_size,) and (batch_size, num_queries); rows of valid length "
    "0; different lengths per sequence; num_queries != num_keys; float32 and float64",
    defaults={"seed": 0, "batch_size": 2, "num_queries": 3, "num_keys": 4, "num_heads": 2, "head_size": 3,
              "valid_lens": None, "per_query": False, "dtype": "float32"},
    specs=[
        {"seed": 31, "valid_lens": None},
        {"seed": 32, "valid_lens": [4, 2]},
        {"seed": 33, "batch_size": 3, "num_heads": 4, "head_size": 2, "valid_lens": [1, 4, 3],
         "dtype": "float64"},
        {"seed": 34, "num_queries": 2, "valid_lens": [[1, 3], [0, 4]], "per_query": True},
        {"seed": 35, "num_heads": 1, "head_size": 4, "valid_lens": [2, 0]},
        {"seed": 36, "batch_size": 1, "num_queries": 5, "num_keys": 5, "num_heads": 2, "head_size": 2,
         "valid_lens": [3]},
    ],
    build=_mha_case,
    call=lambda answer, i: answer(i["queries"], i["keys"], i["values"], i["W_q"], i["W_k"], i["W_v"],
                                  i["W_o"], i["num_heads"], i["valid_lens"]),
    reference=_mha_reference,
    mistakes=[
        Mistake(
            "The heads are split with a plain reshape to (batch_size * num_heads, n, d_head): that cuts the "
            "sequence axis, not the features, so a head mixes several positions. Reshape to (batch_size, n, "
            "num_heads, d_head) first, then move the heads next to the batch (transpose), then flatten.",
            lambda i: _mha(i, split="view"),
        ),
        Mistake(
            _STRIDED,
            lambda i: _mha(i, split="strided"),
        ),
        Mistake(_STRIDED, lambda i: _mha(i, split="strided_split")),
        Mistake(_UNTRANSPOSED, lambda i: _mha(i, untransposed=("W_q", "W_k", "W_v", "W_o"))),
        Mistake(_UNTRANSPOSED, lambda i: _mha(i, untransposed=("W_q", "W_k", "W_v"))),
        Mistake(
            "The heads are merged with a plain reshape: after the attention the heads sit next to the batch "
            "axis, so move them back beside the features (transpose) before flattening to "
            "(batch_size, n, d).",
            lambda i: _mha(i, split="no_merge_transpose"),
        ),
        Mistake(
            "The scores are not scaled: each head divides its q·k by sqrt(d_head), the size of its own "
            "vectors.",
            lambda i: _mha(i, scale="none"),
        ),
        Mistake(
            "The scores are divided by sqrt(d), the full width; each head's vectors have d_head = d / "
            "num_heads features, so divide by sqrt(d_head).",
            lambda i: _mha(i, scale="d"),
        ),
        Mistake(
            "The lengths are tiled (valid_lens.repeat) where each must be repeated num_heads times in a row "
            "(repeat_interleave): row b * num_heads + k of the split tensors is sequence b, so its heads "
            "got other sequences' lengths.",
            _tiled_lens,
        ),
        Mistake(
            "The output projection W_o is missing: the concatenated heads go through W_o (sec. 3.2.2).",
            lambda i: _mha(i, output_layer=False),
        ),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Pass every head's scores and "
            "lengths to `masked_softmax`.",
            lambda i: _mha(i, mask=False),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"shape mismatch|must match the size|cannot be broadcast|valid_lens has shape",
            "A shape does not fit: after the split the batch axis holds batch_size * num_heads rows, so "
            "valid_lens needs one length per row, each sequence's length repeated for its heads.",
        ),
    ],
    package=["attn_course.attention.multihead.MultiHeadAttention", "attn_course.attention.multihead.split_heads",
             "attn_course.attention.multihead.merge_heads"],
)
