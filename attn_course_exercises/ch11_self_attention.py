"""Chapter 11's exercises, self-attention: the causal + padding mask (ch11.q1) and multi-head attention's
split into heads and merge back (ch11.q2).

Their references are `attn_course.attention.multihead`; each mistake is written as the wrong answer that
makes it: the upper triangle for the lower, a diagonal left out or one too many, padding on the query axis,
heads split with a reshape that mixes positions and heads, a missing 1/sqrt(d_head), lengths tiled instead
of repeated per head, and more.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from attn_course.attention.masking import masked_softmax
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course_exercises.inputs import (
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


def _mask_reference(inputs: dict[str, Any]) -> torch.Tensor:
    """The package's per-query lengths (`attention_lens`, causal) as a mask (batch_size, n, n): True where
    key j < the query's length."""
    lens, n = inputs["valid_lens"], inputs["num_steps"]
    attention_lens = resolve("attn_course.attention.multihead.attention_lens")
    per_query = attention_lens(lens, len(lens), n, n, True, lens.device)
    return torch.arange(n, device=lens.device)[None, None, :] < per_query[..., None]


# The mistakes of ch11.q1, each written as a learner writes it.
def causal_mask_triu(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).triu()
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_strict(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril(-1)
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_plus_one(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril(1)
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_longest(valid_lens, num_steps):
    n = int(valid_lens.max())
    causal = torch.zeros(num_steps, num_steps, dtype=torch.bool)
    causal[:n, :n] = torch.ones(n, n, dtype=torch.bool).tril()
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_longest_padding(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    padding = torch.arange(num_steps)[None, :] < valid_lens.max()
    return (causal & padding)[None].expand(len(valid_lens), -1, -1)


def causal_mask_no_padding(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return causal[None].expand(len(valid_lens), -1, -1)


def causal_mask_padding_only(valid_lens, num_steps):
    keep = torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None]
    return keep.expand(-1, num_steps, -1)


def causal_mask_padding_on_queries(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return causal[None] & (torch.arange(num_steps)[None, :, None] < valid_lens[:, None, None])


def causal_mask_or(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return causal[None] | (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_inverted(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return ~(causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None]))


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
    hint=(
        "For query i of sentence b, which keys j may it see? Two different reasons can hide a key: what "
        "are they, and does either depend on the lengths of the other sentences?",
        "Two broadcast comparisons of aranges, both over all num_steps positions: a causal grid (a key no "
        "later than its query) of shape (num_steps, num_steps), and a padding condition (a key before the "
        "sentence's length) of shape (batch_size, 1, num_steps), combined with a logical and.",
        "With `positions` an arange over num_steps: the causal line compares it as a row with itself as a "
        "column (key <= query); the padding line compares it with `valid_lens` given two new axes; the "
        "return line ands the two, the causal grid given a batch axis.",
    ),
    covers="valid lengths 0, 1, in between and full; batches with no sequence at full length; one step; "
    "batches of 1 to 3",
    defaults={"seed": 0, "batch_size": 2, "num_steps": 4, "valid_lens": "random"},
    specs=[
        {"seed": 1, "batch_size": 2, "num_steps": 4, "valid_lens": [4, 2]},
        {"seed": 2, "batch_size": 3, "num_steps": 5, "valid_lens": [5, 0, 3]},
        {"seed": 3, "batch_size": 1, "num_steps": 1, "valid_lens": [1]},
        {"seed": 4, "batch_size": 2, "num_steps": 6, "valid_lens": [1, 6]},
        {"seed": 5, "batch_size": 3, "num_steps": 5, "valid_lens": [2, 3, 1]},
        {"seed": 6, "batch_size": 2, "num_steps": 6, "valid_lens": [4, 0]},
    ],
    build=_mask_case,
    call=lambda answer, i: answer(i["valid_lens"], i["num_steps"]),
    reference=_mask_reference,
    mistakes=[
        Mistake(
            "This is the upper triangle: query i sees the keys *after* it (j >= i). A decoder may look back, "
            "not ahead: keep j <= i (torch.tril, not torch.triu).",
            wrong=causal_mask_triu,
        ),
        Mistake(
            "Off by one: the diagonal is masked, so query i cannot see its own position (and query 0 sees "
            "nothing). Keep j <= i, not j < i.",
            wrong=causal_mask_strict,
        ),
        Mistake(
            "Off by one: query i also sees position i + 1, the word it must predict. Keep j <= i.",
            wrong=causal_mask_plus_one,
        ),
        Mistake(
            "The causal triangle stops at the longest valid length (`valid_lens.max()`): in a batch with no "
            "sequence at full length, the queries beyond it lost every key, padding or not. Queries and keys "
            "are all num_steps padded positions: build the triangle over num_steps, whatever the lengths.",
            wrong=causal_mask_longest,
        ),
        Mistake(
            "The padding condition used one length for every sequence, the longest (`valid_lens.max()`): "
            "each sequence b has its own, so a key j is padding when j >= valid_lens[b]; compare the keys "
            "with the lengths given two new axes, one length per sequence.",
            wrong=causal_mask_longest_padding,
        ),
        Mistake(
            "The padding is not masked: only the causal triangle is applied. Keys at positions j >= "
            "valid_lens[b] are padding and must be False too.",
            wrong=causal_mask_no_padding,
        ),
        Mistake(
            "The causal triangle is missing: only the padding is masked, so every query sees the whole "
            "sentence, later words included.",
            wrong=causal_mask_padding_only,
        ),
        Mistake(
            # With j <= i, padding on the rows alone and on both axes give the same mask: one hint for both.
            "The padding mask runs along the queries (rows), alone or on both axes (with the causal "
            "triangle the two give the same mask): padded queries, rows i >= valid_lens[b], lost every key. "
            "What must be hidden is a padding *key*, column j >= valid_lens[b], for every query; drop the "
            "condition on the rows.",
            wrong=causal_mask_padding_on_queries,
        ),
        Mistake(
            "The two conditions are combined with `|`: a key may be attended only when it is in the past "
            "(j <= i) *and* real (j < valid_lens[b]), so combine them with `&`.",
            wrong=causal_mask_or,
        ),
        Mistake(
            "The mask is inverted: True must mean 'may attend' (the convention of "
            "F.scaled_dot_product_attention's boolean attn_mask), not 'masked out'.",
            wrong=causal_mask_inverted,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"shape mismatch|must match the size|cannot be broadcast",
            "The two conditions do not broadcast together: give the causal grid the shape (num_steps, "
            "num_steps) (not sized from the longest valid length: a batch may hold no sequence at full "
            "length) and the padding condition the shape (batch_size, 1, num_steps), one length per "
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


# The mistakes of ch11.q2, each written as a learner writes it: `_multi_head` is a learner's answer with the
# slip named by `bug` (None: right), each mistake below one of them.
def _multi_head(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None, *, bug=None):
    b, n_q, d = queries.shape
    d_head = d // num_heads

    def split(X):
        if bug == "view":
            return X.reshape(b * num_heads, X.shape[1], d_head)
        if bug in ("strided", "strided_split"):
            X = X.reshape(b, X.shape[1], d_head, num_heads).permute(0, 3, 1, 2)
            return X.reshape(-1, X.shape[2], d_head)
        X = X.reshape(b, X.shape[1], num_heads, d_head).transpose(1, 2)
        return X.reshape(b * num_heads, -1, d_head)

    def project(X, W, name):
        untransposed = bug == "X @ W" or (bug == "X @ W but W_o" and name != "W_o")
        return X @ W if untransposed else X @ W.T

    q, k, v = (split(project(X, W, n)) for X, W, n in ((queries, W_q, "W_q"), (keys, W_k, "W_k"),
                                                       (values, W_v, "W_v")))
    if valid_lens is not None and bug == "unmasked":
        valid_lens = None
    if valid_lens is not None:
        valid_lens = (valid_lens.repeat(num_heads, *([1] * (valid_lens.dim() - 1))) if bug == "tile"
                      else valid_lens.repeat_interleave(num_heads, dim=0))
    scale = 1.0 if bug == "unscaled" else math.sqrt(d if bug == "sqrt_d" else d_head)
    weights = masked_softmax(q @ k.transpose(1, 2) / scale, valid_lens)
    context = weights @ v
    if bug in ("view", "merge_view"):
        context = context.reshape(b, n_q, d)
    elif bug == "strided":
        context = context.reshape(b, num_heads, n_q, d_head).permute(0, 2, 3, 1).reshape(b, n_q, d)
    else:
        context = context.reshape(b, num_heads, n_q, d_head).transpose(1, 2).reshape(b, n_q, d)
    outputs = context if bug == "no_W_o" else project(context, W_o, "W_o")
    return outputs, weights.reshape(b, num_heads, n_q, -1)


def mha_view_split(*args):
    return _multi_head(*args, bug="view")


def mha_strided_heads(*args):
    return _multi_head(*args, bug="strided")


def mha_strided_split_only(*args):
    return _multi_head(*args, bug="strided_split")


def mha_projections_untransposed(*args):
    return _multi_head(*args, bug="X @ W")


def mha_input_projections_untransposed(*args):
    return _multi_head(*args, bug="X @ W but W_o")


def mha_merge_without_transpose(*args):
    return _multi_head(*args, bug="merge_view")


def mha_unscaled(*args):
    return _multi_head(*args, bug="unscaled")


def mha_scaled_by_d(*args):
    return _multi_head(*args, bug="sqrt_d")


def mha_tiled_lens(*args):
    return _multi_head(*args, bug="tile")


def mha_no_output_layer(*args):
    return _multi_head(*args, bug="no_W_o")


def mha_unmasked(*args):
    return _multi_head(*args, bug="unmasked")


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
    hint=(
        "After projecting, where in the d features does head k find its own queries, keys and values? And "
        "what shape lets one batched matrix product serve every head at once?",
        "Splitting into heads: view the last axis as (num_heads, d_head), move the heads next to the "
        "batch and flatten them into it; each head scales its scores by the square root of d_head; each "
        "length is repeated once per head (`repeat_interleave`); merging undoes the split in reverse "
        "order before W_o.",
        "In `split`: reshape to (batch_size, n, num_heads, d_head), swap axes 1 and 2, flatten to "
        "(batch_size * num_heads, n, d_head). In the merge: reshape to (batch_size, num_heads, "
        "num_queries, d_head), swap axes 1 and 2 back, flatten to (batch_size, num_queries, d), then W_o.",
    ),
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
            wrong=mha_view_split,
        ),
        Mistake(
            _STRIDED,
            wrong=mha_strided_heads,
        ),
        Mistake(_STRIDED, wrong=mha_strided_split_only),
        Mistake(_UNTRANSPOSED, wrong=mha_projections_untransposed),
        Mistake(_UNTRANSPOSED, wrong=mha_input_projections_untransposed),
        Mistake(
            "The heads are merged with a plain reshape: after the attention the heads sit next to the batch "
            "axis, so move them back beside the features (transpose) before flattening to "
            "(batch_size, n, d).",
            wrong=mha_merge_without_transpose,
        ),
        Mistake(
            "The scores are not scaled: each head divides its q·k by sqrt(d_head), the size of its own "
            "vectors.",
            wrong=mha_unscaled,
        ),
        Mistake(
            "The scores are divided by sqrt(d), the full width; each head's vectors have d_head = d / "
            "num_heads features, so divide by sqrt(d_head).",
            wrong=mha_scaled_by_d,
        ),
        Mistake(
            "The lengths are tiled (valid_lens.repeat) where each must be repeated num_heads times in a row "
            "(repeat_interleave): row b * num_heads + k of the split tensors is sequence b, so its heads "
            "got other sequences' lengths.",
            wrong=mha_tiled_lens,
        ),
        Mistake(
            "The output projection W_o is missing: the concatenated heads go through W_o (sec. 3.2.2).",
            wrong=mha_no_output_layer,
        ),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Pass every head's scores and "
            "lengths to `masked_softmax`.",
            wrong=mha_unmasked,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"shape mismatch|must match the size|cannot be broadcast|valid_lens has shape",
            "A shape does not fit: after the split the batch axis holds batch_size * num_heads rows, so "
            "valid_lens needs one length per row, each sequence's length repeated for its heads.",
        ),
    ],
    package=["attn_course.attention.multihead.MultiHeadAttention",
             "attn_course.attention.multihead.split_heads", "attn_course.attention.multihead.merge_heads"],
)
