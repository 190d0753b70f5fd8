"""Chapter 2's exercises, scoring functions: scaled dot-product attention (ch2.q1), additive attention
(ch2.q2), Luong's general (ch2.q3) and concat (ch2.q4) scores, and a masked attention with three planted bugs
to find (ch2.q5).

Their references are `attn_course.attention.layers` and `attn_course.attention.scoring`; the mistakes named include a missing
scale, softmax over the wrong axis, and the d2l fill value that leaves empty rows with uniform weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from attn_course.checks.bug_hunt import BugHunt, planted_mistakes
from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import (
    d2l_masked_softmax,
    finite_masked_softmax,
    lens_text,
    package_attention,
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
    with_gradients,
)


def _attention_case(
    spec: dict[str, Any],
    *,
    values: bool = True,
    names: Any = ("the context", "the weights"),
    scale: float = 1.0,
) -> Case:
    """queries, keys (and values), valid_lens from a spec with the attention vocabulary's sizes."""
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, q, k = (spec_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    qs, ks = spec_size(spec, "query_size"), spec_size(spec, "key_size")
    inputs: dict[str, Any] = {
        "queries": seeded_randn((b, q, qs), gen, dtype, scale),
        "keys": seeded_randn((b, k, ks), gen, dtype, scale),
    }
    sizes = f"queries {(b, q, qs)}, keys {(b, k, ks)}"
    if values:
        vs = spec_size(spec, "value_size")
        inputs["values"] = seeded_randn((b, k, vs), gen, dtype)
        sizes += f", values {(b, k, vs)}"
        lens = spec_lengths(spec["valid_lens"], (b, q) if spec["per_query"] else (b,), k, gen, "valid_lens")
        inputs["valid_lens"] = lens
        sizes += f", {lens_text(lens)}"
    return Case(f"{sizes}, dtype {spec['dtype']}", inputs, spec, names)


_ATTENTION_DEFAULTS = {
    "seed": 0,
    "grad": False,
    "batch_size": 2,
    "num_queries": 3,
    "num_keys": 5,
    "query_size": 4,
    "key_size": 4,
    "value_size": 6,
    "dtype": "float32",
    "valid_lens": "random",
    "per_query": False,
}


def _dot_attention(
    inputs: dict[str, Any],
    *,
    divisor: str = "sqrt_d",
    dim: int = -1,
    mask: str = "finite",
    transposed: bool = False,
    weigh: str = "values",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention and its known-wrong variants (divisor, softmax axis, masking, ...)."""
    q, k, lens = inputs["queries"], inputs["keys"], inputs["valid_lens"]
    scores = torch.bmm(k, q.transpose(1, 2)) if transposed else torch.bmm(q, k.transpose(1, 2))
    d = q.shape[-1]
    scores = (
        scores
        / {
            "sqrt_d": math.sqrt(d),
            "d": d,
            "none": 1.0,
            "sqrt_keys": math.sqrt(k.shape[1]),
            "sqrt_values": math.sqrt(inputs["values"].shape[-1]),
            "sqrt_queries": math.sqrt(q.shape[1]),
        }[divisor]
    )
    if mask == "none":
        weights = F.softmax(scores, dim=dim)
    elif mask == "d2l":
        weights = d2l_masked_softmax(scores, lens, dim=dim)
    elif mask == "first_column":
        if lens is None or lens.dim() == 1:
            return None
        weights = finite_masked_softmax(scores, lens[:, 0], dim=dim)
    else:
        weights = finite_masked_softmax(scores, lens, dim=dim)
    return torch.bmm(weights, inputs[weigh]), weights


def _dot_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    attention = package_attention("DotProductAttention", 0.0, True)
    context = attention(inputs["queries"], inputs["keys"], inputs["values"], inputs["valid_lens"])
    return context, attention.attention_weights


_BMM_HINT = ErrorHint(
    r"Expected size for first two dimensions of batch2|batch1 and batch2 must have|mat1 and mat2 shapes|"
    r"size mismatch|must match the size of tensor",
    "The shapes do not line up. The scores are `queries @ keys.transpose(1, 2)`, shape (batch_size, "
    "num_queries, num_keys); the context is `weights @ values`, shape (batch_size, num_queries, value_size).",
)

_EMPTY_ROW_HINT = (
    "A row whose valid length is 0 came out uniform instead of all zeros: that is d2l's -1e6 "
    "masking. Use `masked_softmax` from chapter 1 (imported in the set-up cell), which gives a "
    "row with no real key zero weight everywhere."
)

SCALED_DOT_PRODUCT = Exercise(
    "ch2.q1",
    "scaled_dot_product_attention",
    "Scaled dot-product attention",
    solution='''
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    """softmax(q kᵀ / sqrt(d)) v over the valid keys (Vaswani et al. 2017, eq. 1; d2l's DotProductAttention).

    queries: (batch_size, num_queries, d); keys: (batch_size, num_keys, d); values: (batch_size, num_keys,
    value_size); valid_lens: None, (batch_size,) or (batch_size, num_queries).
    Returns: context (batch_size, num_queries, value_size), weights (batch_size, num_queries, num_keys).
    """
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)  # (batch_size, num_queries, num_keys)
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
''',
    hint="Three steps: a score for every query against every key (a batched matrix product), divided by the "
    "square root of the query/key size -- which axis holds that size, and which holds the number of "
    "keys? -- then the weights from the masked softmax, then the weighted sum of the values. Return "
    "the context and the weights.",
    covers="valid_lens None, (batch_size,) and (batch_size, num_queries); rows of valid length 0; one key; "
    "d, num_keys and value_size all different; float32 and float64; gradients",
    defaults=_ATTENTION_DEFAULTS,
    specs=[
        {"seed": 21, "valid_lens": None},
        {"seed": 22, "valid_lens": [2, 5]},
        {
            "seed": 23,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 4,
            "query_size": 8,
            "key_size": 8,
            "value_size": 3,
            "valid_lens": [[1, 4], [2, 3], [4, 4]],
            "per_query": True,
        },
        {
            "seed": 24,
            "num_queries": 1,
            "num_keys": 1,
            "query_size": 3,
            "key_size": 3,
            "value_size": 2,
            "valid_lens": [1, 0],
        },
        {
            "seed": 25,
            "num_queries": 4,
            "num_keys": 4,
            "query_size": 2,
            "key_size": 2,
            "value_size": 2,
            "dtype": "float64",
            "valid_lens": [0, 3],
        },
        {"seed": 126, "valid_lens": [3, 0], "grad": True},
    ],
    build=lambda spec: _attention_case(spec, scale=1.5),
    call=lambda answer, i: answer(i["queries"], i["keys"], i["values"], i["valid_lens"]),
    reference=_dot_reference,
    mistakes=[
        Mistake(
            "The scores are not scaled: divide q·k by sqrt(d), d = queries.shape[-1], so that their "
            "spread does not grow with the size of the vectors.",
            lambda i: _dot_attention(i, divisor="none"),
        ),
        Mistake(
            "The scores are divided by d; the scaling is 1/sqrt(d): `/ math.sqrt(d)`.",
            lambda i: _dot_attention(i, divisor="d"),
        ),
        Mistake(
            "You scaled by sqrt(num_keys); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the number of keys.",
            lambda i: _dot_attention(i, divisor="sqrt_keys"),
        ),
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the keys must sum to 1 (the "
            "last axis).",
            lambda i: _dot_attention(i, dim=1),
        ),
        # d2l's masking before no masking: with a single key, a row of valid length 0 comes out the same
        # under both, and the case with one key comes before the one that tells them apart.
        Mistake(_EMPTY_ROW_HINT, lambda i: _dot_attention(i, mask="d2l")),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Pass the scores and valid_lens to "
            "`masked_softmax`.",
            lambda i: _dot_attention(i, mask="none"),
        ),
        Mistake(
            "You computed keys · queriesᵀ, a (batch_size, num_keys, num_queries) matrix. The scores are "
            "`queries @ keys.transpose(1, 2)`: one row per query, one column per key.",
            lambda i: _dot_attention(i, transposed=True),
        ),
        Mistake(
            "The context averages the keys; it must average the values: `weights @ values`.",
            lambda i: _dot_attention(i, weigh="keys"),
        ),
        Mistake(
            "You scaled by sqrt(value_size); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the size of the values.",
            lambda i: _dot_attention(i, divisor="sqrt_values"),
        ),
        Mistake(
            "You scaled by sqrt(num_queries); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the number of queries (axis 1).",
            lambda i: _dot_attention(i, divisor="sqrt_queries"),
        ),
        Mistake(
            "valid_lens of shape (batch_size, num_queries) gives one length per query; you used one per "
            "sequence (e.g. its first column). Broadcast it as `valid_lens[:, :, None]` against the keys.",
            lambda i: _dot_attention(i, mask="first_column"),
        ),
        Mistake(
            "The two results are in the wrong order: return `(context, weights)`, the context first.",
            lambda i: _dot_attention(i)[::-1],
        ),
    ],
    error_hints=[_BMM_HINT],
    package=["attn_course.attention.layers.DotProductAttention", "attn_course.attention.scoring.dot_scores"],
)
with_gradients(SCALED_DOT_PRODUCT, ("queries", "keys", "values"))


def _additive_case(spec: dict[str, Any]) -> Case:
    case = _attention_case(spec, names=("the contexts", "the weights", "whether attend used W_k"))
    if case.inputs["valid_lens"] is not None and case.inputs["valid_lens"].dim() != 1:
        raise ValueError("AdditiveAttention cases take valid_lens of shape (batch_size,) only")
    gen = spec_generator(dict(spec, seed=spec["seed"] + 1000))
    ks, qs, h = spec["key_size"], spec["query_size"], spec_size(spec, "num_hiddens")
    dtype = spec_dtype(spec)
    params = {
        "W_k.weight": seeded_randn((h, ks), gen, dtype, 0.5),
        "W_q.weight": seeded_randn((h, qs), gen, dtype, 0.5),
        "w_v.weight": seeded_randn((1, h), gen, dtype, 0.5),
    }
    inputs = dict(case.inputs, params=params)
    per_call = spec_size(spec, "queries_per_call")
    inputs["queries_per_call"] = per_call
    calls = (
        "one attend call per query (decoder step)" if per_call == 1 else f"{per_call} queries per attend call"
    )
    label = f"{case.label}, num_hiddens {h}, {calls}"
    return Case(label, inputs, spec, case.names)


def _additive_call(cls: Any, inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Build the learner's module with the case's weights, prepare once, attend step by step; then check
    whether attend still reads W_k by poisoning it with NaN after prepare."""
    params = inputs["params"]
    (h, ks), qs = params["W_k.weight"].shape, params["W_q.weight"].shape[1]
    attention = cls(ks, qs, h).to(params["W_k.weight"].dtype)
    attention.load_state_dict(params)
    queries, per_call = inputs["queries"], inputs["queries_per_call"]
    memory = attention.prepare(inputs["keys"], inputs["values"], inputs["valid_lens"])
    # A second source prepared before the first is attended to: `attend` must read its own memory.
    attention.prepare(inputs["keys"][:, :1], inputs["values"][:, :1], None)
    steps = [
        attention.attend(queries[:, t : t + per_call], memory) for t in range(0, queries.shape[1], per_call)
    ]
    contexts, weights = (torch.cat([step[j] for step in steps], 1) for j in (0, 1))
    if inputs.get("gradient"):  # poisoning W_k in place would break the gradient's backward pass
        return contexts, weights, False
    with torch.no_grad():
        for p in attention.parameters():
            if p is attention.W_k.weight:
                p.fill_(math.nan)
    context, weight = attention.attend(queries[:, :1], memory)
    poisoned = bool(torch.isnan(context).any() or torch.isnan(weight).any())
    return contexts, weights, poisoned and not bool(torch.isnan(contexts).any() or torch.isnan(weights).any())


def _additive_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, bool]:
    params = inputs["params"]
    (h, ks), qs = params["W_k.weight"].shape, params["W_q.weight"].shape[1]
    attention = package_attention("AdditiveAttention", ks, qs, h).to(params["W_k.weight"].dtype)
    attention.load_state_dict(params)
    memory = attention.prepare(inputs["keys"], inputs["values"], inputs["valid_lens"])
    context, weights = attention.attend(inputs["queries"], memory)
    return context, weights, False


def _additive_variant(
    inputs: dict[str, Any],
    *,
    swap: bool = False,
    tanh: str = "inside",
    dim: int = -1,
    mask: str = "finite",
    uses_wk: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    p = inputs["params"]
    W_q, W_k, w_v = p["W_q.weight"], p["W_k.weight"], p["w_v.weight"]
    q, k, lens = inputs["queries"], inputs["keys"], inputs["valid_lens"]
    if swap:
        W_q, W_k = W_k, W_q
    features = (q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :]
    if tanh == "inside":
        scores = (torch.tanh(features) @ w_v.T).squeeze(-1)
    elif tanh == "outside":
        scores = torch.tanh(features @ w_v.T).squeeze(-1)
    elif tanh == "relu":
        scores = (torch.relu(features) @ w_v.T).squeeze(-1)
    else:
        scores = (features @ w_v.T).squeeze(-1)
    if mask == "none":
        weights = F.softmax(scores, dim=-1)
    elif mask == "d2l":
        weights = d2l_masked_softmax(scores, lens)
    else:
        weights = finite_masked_softmax(scores, lens)
    if dim != -1:  # attend sees queries_per_call queries per call: a softmax over the queries sees those
        per_call = inputs.get("queries_per_call", 1)
        weights = torch.cat(
            [finite_masked_softmax(scores[:, t : t + per_call], lens, dim=1)
             for t in range(0, scores.shape[1], per_call)],
            1,
        )
    return torch.bmm(weights, inputs["values"]), weights, uses_wk


def _additive_first_query_per_call(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, bool] | None:
    """The reference, if `attend` answered only the first query of each call."""
    per_call = inputs["queries_per_call"]
    if per_call == 1:
        return None
    firsts = dict(inputs, queries=inputs["queries"][:, ::per_call])
    return _additive_reference(firsts)


ADDITIVE_ATTENTION = Exercise(
    "ch2.q2",
    "AdditiveAttention",
    "Additive attention with the keys projected once",
    solution='''
class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention, score w_vᵀ tanh(W_q q + W_k k), with W_k k computed once per batch.

    memory = attention.prepare(keys, values, valid_lens)   # once per source batch
    context, weights = attention.attend(queries, memory)   # at every decoder step
    Bahdanau et al. 2014, eq. (6); the layer names follow d2l's AdditiveAttention.
    """

    def __init__(self, key_size, query_size, num_hiddens):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def prepare(self, keys, values, valid_lens=None):
        """Once per source batch: project the keys; return what `attend` needs (a tuple will do).

        keys: (batch_size, num_keys, key_size); values: (batch_size, num_keys, value_size);
        valid_lens: None or (batch_size,) integer.
        """
        return self.W_k(keys), values, valid_lens

    def attend(self, queries, memory):
        """At every decoder step, without touching W_k: the keys were projected in `prepare`.

        queries: (batch_size, num_queries, query_size); memory: what `prepare` returned.
        Returns: context (batch_size, num_queries, value_size), weights (batch_size, num_queries, num_keys).
        """
        projected_keys, values, valid_lens = memory
        # (batch, num_queries, 1, num_hiddens) + (batch, 1, num_keys, num_hiddens): every query with every key
        features = torch.tanh(self.W_q(queries)[:, :, None, :] + projected_keys[:, None, :, :])
        weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
        return torch.bmm(weights, values), weights

    def forward(self, queries, keys, values, valid_lens=None):
        return self.attend(queries, self.prepare(keys, values, valid_lens))
''',
    write=("prepare", "attend"),
    hint="`prepare` does the work that depends only on the keys, once, so that every decoder step reuses "
    "it. `attend` projects the queries, combines every query with every key (give each its own new "
    "axis and let broadcasting build a (batch, num_queries, num_keys, num_hiddens) tensor), and turns "
    "each combination into one score with Bahdanau's tanh and w_v; then the masked softmax and the "
    "weighted sum of the values.",
    covers="attend called once per decoder step; W_k used only in prepare; valid_lens None and "
    "(batch_size,); "
    "rows of valid length 0; one key; query, key, value and hidden sizes all different; float64; "
    "several queries per attend call; a second prepare before attend; gradients",
    defaults=dict(_ATTENTION_DEFAULTS, query_size=3, key_size=5, num_hiddens=7, queries_per_call=1),
    specs=[
        {"seed": 31, "valid_lens": None},
        {"seed": 32, "num_queries": 4, "valid_lens": [3, 0]},
        {
            "seed": 33,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 6,
            "query_size": 4,
            "key_size": 4,
            "value_size": 2,
            "num_hiddens": 5,
            "valid_lens": [6, 1, 4],
        },
        {"seed": 34, "num_queries": 2, "num_keys": 1, "dtype": "float64", "valid_lens": [1, 1]},
        {"seed": 135, "valid_lens": [4, 2], "grad": True},
        {"seed": 136, "num_queries": 4, "valid_lens": [2, 4], "queries_per_call": 2},
    ],
    build=_additive_case,
    call=_additive_call,
    reference=_additive_reference,
    mistakes=[
        Mistake(
            "`attend` uses `self.W_k`: the keys are projected again at every decoder step. Project them "
            "once in `prepare`, put W_k k into the memory, and only read it in `attend`.",
            lambda i: (*_additive_reference(i)[:2], True),
        ),
        Mistake(
            "tanh is missing: the score is w_vᵀ tanh(W_q q + W_k k); without the tanh it is linear in the "
            "query and the key.",
            lambda i: _additive_variant(i, tanh="none"),
        ),
        Mistake(
            "You used ReLU where the score has tanh: w_vᵀ tanh(W_q q + W_k k). ReLU cuts the negative "
            "features to 0, so many keys score alike.",
            lambda i: _additive_variant(i, tanh="relu"),
        ),
        Mistake(
            "tanh is applied after w_v; it goes inside: w_vᵀ tanh(W_q q + W_k k).",
            lambda i: _additive_variant(i, tanh="outside"),
        ),
        Mistake(
            "W_q and W_k are swapped: W_q projects the queries, W_k the keys.",
            lambda i: (
                _additive_variant(i, swap=True, uses_wk=True)
                if i["params"]["W_q.weight"].shape == i["params"]["W_k.weight"].shape
                else None
            ),
        ),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Keep valid_lens in the memory and "
            "use `masked_softmax`.",
            lambda i: _additive_variant(i, mask="none"),
        ),
        Mistake(_EMPTY_ROW_HINT, lambda i: _additive_variant(i, mask="d2l")),
        Mistake(
            "The softmax runs over the wrong axis: with one query per step, a softmax over the queries "
            "gives every key weight 1. Normalise over the keys (the last axis).",
            lambda i: _additive_variant(i, dim=1),
        ),
        Mistake(
            "`attend` answered only the first of several queries: queries is (batch_size, num_queries, "
            "query_size), and each query needs its own context and weights.",
            _additive_first_query_per_call,
        ),
        Mistake(
            "`attend` used the memory of the last `prepare` call, not the memory it was given: keep "
            "nothing on `self` in `prepare`; return the projected keys, the values and valid_lens, and "
            "read them from `memory` in `attend`.",
            lambda i: _additive_reference(
                dict(i, keys=i["keys"][:, :1], values=i["values"][:, :1], valid_lens=None)
            ),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor|scores has shape \(\d+, \d+\), expected 3 dimensions",
            "W_q q is (batch, num_queries, num_hiddens) and W_k k is (batch, num_keys, num_hiddens): "
            "to add every query to every key, give them axes to broadcast over, "
            "`[:, :, None, :]` and `[:, None, :, :]`; and squeeze only the last axis of w_v's output, "
            "`.squeeze(-1)` (a bare `.squeeze()` also drops an axis of size 1).",
        ),
        ErrorHint(
            r"Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict|size mismatch for",
            "Keep the layers of the given `__init__` (W_k, W_q, w_v, bias-free) unchanged: the check "
            "loads its weights into them.",
        ),
    ],
    package=["attn_course.attention.layers.AdditiveAttention"],
)
with_gradients(ADDITIVE_ATTENTION, ("queries", "keys", "values"))


def _scores_case(spec: dict[str, Any], weights: Callable[[dict, torch.Generator, torch.dtype], dict]) -> Case:
    case = _attention_case(spec, values=False, names="the scores")
    gen, dtype = spec_generator(dict(spec, seed=spec["seed"] + 1000)), spec_dtype(spec)
    extra = weights(spec, gen, dtype)
    shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in extra.items())
    return Case(f"{case.label}, {shapes}", dict(case.inputs, **extra), spec, case.names)


def _general_variant(
    inputs: dict[str, Any],
    *,
    transpose: bool = False,
    ignore: bool = False,
    scale: bool = False,
    softmax: bool = False,
    swap_axes: bool = False,
) -> torch.Tensor | None:
    q, k, W_a = inputs["queries"], inputs["keys"], inputs["W_a"]
    if (transpose or ignore) and q.shape[-1] != k.shape[-1]:
        return None
    projected = k if ignore else k @ (W_a if transpose else W_a.T)  # (batch, num_keys, query_size)
    scores = torch.bmm(q, projected.transpose(1, 2))
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if softmax:
        scores = F.softmax(scores, dim=-1)
    return scores.transpose(1, 2) if swap_axes else scores


_FIRST_QUERY = (
    "Only the first query was scored: queries is (batch_size, num_queries, query_size), and every query "
    "gets its own row of scores."
)


def _first_query_only(inputs: dict[str, Any], scores: Callable[[dict[str, Any]], Any]) -> Any:
    """The scores of the first query alone, where the case has several."""
    if inputs["queries"].shape[1] == 1:
        return None
    return scores(dict(inputs, queries=inputs["queries"][:, :1]))


_SOFTMAX_SCORES = (
    "You returned softmax weights; this function returns the raw scores (the masked softmax comes later)."
)
_TRANSPOSED_SCORES = (
    "The scores are transposed: return (batch_size, num_queries, num_keys), one row per query "
    "and one column per key."
)

GENERAL_SCORES = Exercise(
    "ch2.q3",
    "general_scores",
    "Luong's general score qᵀ W_a k",
    solution='''
def general_scores(queries, keys, W_a):
    """Luong's "general" score qᵀ W_a k for every query and key.

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (query_size, key_size), the weight of nn.Linear(key_size, query_size, bias=False).
    Returns: scores (batch_size, num_queries, num_keys).
    Luong et al. 2015, sec. 3.1: one of the content-based scores of eq. (7).
    """
    projected_keys = keys @ W_a.T                       # W_a k: (batch_size, num_keys, query_size)
    return torch.bmm(queries, projected_keys.transpose(1, 2))
''',
    hint="q^T W_a k is a dot product between the query and W_a k. Bring every key into the query's space "
    "first -- with the keys stored as rows, think about which side of the product W_a goes on, and "
    "whether it needs transposing -- and then score as in the plain dot product. No scaling, no "
    "softmax.",
    covers="query_size different from key_size and equal to it; one key; float32 and float64; "
    "several queries; gradients",
    defaults=dict(_ATTENTION_DEFAULTS, query_size=4, key_size=6),
    specs=[
        {"seed": 41},
        {"seed": 42, "num_queries": 2, "num_keys": 4, "query_size": 3, "key_size": 3},
        {"seed": 43, "batch_size": 3, "num_queries": 1, "num_keys": 1, "dtype": "float64"},
        {"seed": 144, "grad": True},
    ],
    build=lambda spec: _scores_case(
        spec, lambda s, g, d: {"W_a": seeded_randn((s["query_size"], s["key_size"]), g, d)}
    ),
    call=lambda answer, i: answer(i["queries"], i["keys"], i["W_a"]),
    reference=lambda i: resolve("attn_course.attention.scoring.general_scores")(i["queries"], i["keys"], i["W_a"]),
    mistakes=[
        Mistake(
            "W_a is used untransposed. It is (query_size, key_size), the weight of nn.Linear(key_size, "
            "query_size): W_a k for a batch of keys is `keys @ W_a.T`.",
            lambda i: _general_variant(i, transpose=True),
        ),
        Mistake(
            "W_a is ignored: that is the dot score qᵀk. The general score maps the keys first: qᵀ (W_a k).",
            lambda i: _general_variant(i, ignore=True),
        ),
        Mistake(
            "Luong's general score is not scaled: drop the 1/sqrt(d).",
            lambda i: _general_variant(i, scale=True),
        ),
        Mistake(_SOFTMAX_SCORES, lambda i: _general_variant(i, softmax=True)),
        Mistake(_TRANSPOSED_SCORES, lambda i: _general_variant(i, swap_axes=True)),
        Mistake(
            "You applied tanh to the scores: Luong's general score is the raw qᵀ W_a k, with no "
            "non-linearity.",
            lambda i: torch.tanh(_general_variant(i)),
        ),
        Mistake(_FIRST_QUERY, lambda i: _first_query_only(i, _general_variant)),
    ],
    error_hints=[
        ErrorHint(
            r"mat1 and mat2 shapes|size mismatch|must match the size|Expected size for first two",
            "W_a is (query_size, key_size): W_a k for a batch of keys is `keys @ W_a.T` (batch_size, "
            "num_keys, query_size), which then meets the queries in "
            "`torch.bmm(queries, ....transpose(1, 2))`: every query with every key.",
        ),
    ],
    package=["attn_course.attention.scoring.general_scores"],
)
with_gradients(GENERAL_SCORES, ("queries", "keys", "W_a"))


def _concat_variant(
    inputs: dict[str, Any],
    *,
    order: str = "qk",
    tanh: str = "inside",
    softmax: bool = False,
    swap_axes: bool = False,
) -> torch.Tensor | None:
    q, k, W_a, v_a = inputs["queries"], inputs["keys"], inputs["W_a"], inputs["v_a"]
    qs = q.shape[-1]
    if order == "kq":
        if q.shape[-1] != k.shape[-1]:
            return None
        W_q, W_k = W_a[:, qs:], W_a[:, :qs]
    else:
        W_q, W_k = W_a[:, :qs], W_a[:, qs:]
    features = (q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :]
    if tanh == "inside":
        scores = (torch.tanh(features) @ v_a.T).squeeze(-1)
    elif tanh == "outside":
        scores = torch.tanh(features @ v_a.T).squeeze(-1)
    else:
        scores = (features @ v_a.T).squeeze(-1)
    if softmax:
        scores = F.softmax(scores, dim=-1)
    return scores.transpose(1, 2) if swap_axes else scores


CONCAT_SCORES = Exercise(
    "ch2.q4",
    "concat_scores",
    "Luong's concat score v_aᵀ tanh(W_a [q; k])",
    solution='''
def concat_scores(queries, keys, W_a, v_a):
    """Luong's "concat" score v_aᵀ tanh(W_a [q; k]) for every query and key.

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (num_hiddens, query_size + key_size); v_a: (1, num_hiddens).
    Returns: scores (batch_size, num_queries, num_keys).
    Luong et al. 2015, sec. 3.1: one of the content-based scores of eq. (7).
    """
    num_queries, num_keys = queries.shape[1], keys.shape[1]
    pairs = torch.cat([queries[:, :, None, :].expand(-1, -1, num_keys, -1),   # [q; k] for every pair:
                       keys[:, None, :, :].expand(-1, num_queries, -1, -1)],  # (batch, num_queries, num_keys,
                      dim=-1)                                                 #  query_size + key_size)
    return (torch.tanh(pairs @ W_a.T) @ v_a.T).squeeze(-1)
''',
    hint="Every (query, key) pair needs its own [q; k], query first: expand the queries and the keys to a "
    "common (batch, num_queries, num_keys, ...) shape before concatenating along the features. Then "
    "Luong's concat score turns each pair into one number: W_a, tanh, v_a. (W_a [q; k] also splits "
    "into a query part plus a key part, which avoids building the big tensor.)",
    covers="query_size different from key_size and equal to it; one key; float32 and float64; "
    "several queries; gradients",
    defaults=dict(_ATTENTION_DEFAULTS, query_size=3, key_size=5, num_hiddens=4),
    specs=[
        {"seed": 51, "num_queries": 2, "num_keys": 6},
        {"seed": 52, "num_queries": 3, "num_keys": 3, "query_size": 4, "key_size": 4},
        {"seed": 53, "batch_size": 1, "num_queries": 2, "num_keys": 1, "dtype": "float64"},
        {"seed": 154, "grad": True},
    ],
    build=lambda spec: _scores_case(
        spec,
        lambda s, g, d: {
            "W_a": seeded_randn((spec_size(s, "num_hiddens"), s["query_size"] + s["key_size"]), g, d, 0.7),
            "v_a": seeded_randn((1, s["num_hiddens"]), g, d),
        },
    ),
    call=lambda answer, i: answer(i["queries"], i["keys"], i["W_a"], i["v_a"]),
    reference=lambda i: resolve("attn_course.attention.scoring.concat_scores")(
        i["queries"], i["keys"], i["W_a"], i["v_a"]
    ),
    mistakes=[
        Mistake(
            "The concatenation order is reversed: the score reads [q; k] -- the query first, then the key "
            "-- so the first query_size columns of W_a multiply the query. You built [k; q].",
            lambda i: _concat_variant(i, order="kq"),
        ),
        Mistake(
            "tanh is missing: the score is v_aᵀ tanh(W_a [q; k]).", lambda i: _concat_variant(i, tanh="none")
        ),
        Mistake(
            "tanh is applied after v_a; it goes inside: v_aᵀ tanh(W_a [q; k]).",
            lambda i: _concat_variant(i, tanh="outside"),
        ),
        Mistake(_SOFTMAX_SCORES, lambda i: _concat_variant(i, softmax=True)),
        Mistake(_TRANSPOSED_SCORES, lambda i: _concat_variant(i, swap_axes=True)),
        Mistake(_FIRST_QUERY, lambda i: _first_query_only(i, _concat_variant)),
        Mistake(
            "`.squeeze()` without an axis also dropped an axis of size 1 (the batch, the queries or the "
            "keys): squeeze only the last axis, `.squeeze(-1)`.",
            lambda i: (
                _concat_variant(i).squeeze()
                if _concat_variant(i).squeeze().shape != _concat_variant(i).shape
                else None
            ),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"Sizes of tensors must match except in dimension",
            "Pair every query with every key. torch.cat needs both halves shaped alike except in the last "
            "axis: expand the queries to "
            "(batch, num_queries, num_keys, query_size) and the keys to (batch, num_queries, num_keys, "
            "key_size) first.",
        ),
        ErrorHint(
            r"mat1 and mat2 shapes|size mismatch|must match the size",
            "W_a is (num_hiddens, query_size + key_size) and v_a is (1, num_hiddens): apply them as "
            "`pairs @ W_a.T` and `... @ v_a.T` on the last axis of the (batch, num_queries, num_keys, "
            "query_size + key_size) pairs.",
        ),
    ],
    package=["attn_course.attention.scoring.concat_scores"],
)
with_gradients(CONCAT_SCORES, ("queries", "keys", "W_a", "v_a"))


_ATTENTION_BUGS = {
    "axis": "The mask is broadcast along the wrong axis: `real` is (batch_size, num_keys), and `real[:, :, "
    "None]` lines its keys up with the *queries* axis of the scores, so it masks whole queries (or fails, "
    "or changes the shape, when num_queries != num_keys). A key is padding for every query: "
    "`real[:, None, :]`.",
    "dim": "The softmax runs over the wrong axis: `dim=1` normalises over the queries; each query's weights "
    "over the keys must sum to 1, `dim=-1`.",
    "fill": "A sentence of valid length 0 gets uniform weights (1/num_keys, all on padding) instead of "
    "zeros: filling with a very negative number cannot empty a row, so zero the padded weights after the "
    "softmax (e.g. multiply by the mask). And -1e6 does not fit in float16: fill with "
    "`torch.finfo(scores.dtype).min`.",
}


def _bugged_attention(inputs: dict[str, Any], remaining: frozenset[str] = frozenset(), fill: str = "") -> Any:
    """masked_attention with the planted bugs named in `remaining` left in, the others fixed (the reference
    when none remain); fill="inf": fixed but for a -inf fill."""
    q, k, v, lens = inputs["queries"], inputs["keys"], inputs["values"], inputs["valid_lens"]
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    real = torch.arange(k.shape[1]) < lens[:, None]
    real = real[:, :, None] if "axis" in remaining else real[:, None, :]
    # The planted -1e6 raises in float16; a learner who only changed the number still has the bug.
    value = max(-1e6, torch.finfo(scores.dtype).min) if "fill" in remaining else torch.finfo(scores.dtype).min
    weights = F.softmax(
        scores.masked_fill(~real, -math.inf if fill == "inf" else value), -1 if "dim" not in remaining else 1
    )
    if "fill" not in remaining:
        weights = weights.masked_fill(~real, 0.0) if fill != "inf" else weights
    return weights @ v, weights


def _fixed_attention(inputs: dict[str, Any], *, mask_before: bool = True, extra: int = 0) -> Any:
    """masked_attention with its three bugs fixed but one new slip: the padded keys left in the softmax and
    zeroed after it (mask_before=False), or `extra` padded keys kept (`<=` in the mask: extra=1)."""
    q, k, v, lens = inputs["queries"], inputs["keys"], inputs["values"], inputs["valid_lens"]
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    real = (torch.arange(k.shape[1]) < lens[:, None] + extra)[:, None, :]
    if mask_before:
        scores = scores.masked_fill(~real, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1) * real
    return weights @ v, weights


def _masked_attention_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    weights = resolve("attn_course.attention.masking.masked_softmax")(
        inputs["queries"] @ inputs["keys"].transpose(1, 2) / math.sqrt(inputs["queries"].shape[-1]),
        inputs["valid_lens"],
    )
    return weights @ inputs["values"], weights


MASKED_ATTENTION_BUGS = BugHunt(
    "ch2.q5",
    "masked_attention",
    "Find the bugs: masked attention, d2l style",
    buggy='''
def masked_attention(queries, keys, values, valid_lens):
    """Scaled dot-product attention over a padded batch of keys (Vaswani et al. 2017, eq. 1, with a mask).

    queries: (batch_size, num_queries, d); keys: (batch_size, num_keys, d); values: (batch_size, num_keys,
    value_size); valid_lens: (batch_size,), each in [0, num_keys]: key j of sentence i is real when
    j < valid_lens[i]. Any floating dtype, float16 included.
    Returns: context (batch_size, num_queries, value_size) and weights (batch_size, num_queries, num_keys):
    each query's weights sum to 1 over the real keys and are 0 on padded keys; a sentence of valid length 0
    gets all-zero weights (and a zero context).
    """
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)        # (batch_size, num_queries, num_keys)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]       # (batch_size, num_keys)
    scores = scores.masked_fill(~real[:, :, None], -1e6)
    weights = F.softmax(scores, dim=1)
    return weights @ values, weights
''',
    namespace={"math": math, "torch": torch, "F": F},
    solution='''
def masked_attention(queries, keys, values, valid_lens):
    """Scaled dot-product attention over a padded batch of keys (Vaswani et al. 2017, eq. 1, with a mask).

    queries: (batch_size, num_queries, d); keys: (batch_size, num_keys, d); values: (batch_size, num_keys,
    value_size); valid_lens: (batch_size,), each in [0, num_keys]: key j of sentence i is real when
    j < valid_lens[i]. Any floating dtype, float16 included.
    Returns: context (batch_size, num_queries, value_size) and weights (batch_size, num_queries, num_keys):
    each query's weights sum to 1 over the real keys and are 0 on padded keys; a sentence of valid length 0
    gets all-zero weights (and a zero context).
    """
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)        # (batch_size, num_queries, num_keys)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]       # (batch_size, num_keys)
    real = real[:, None, :]                        # fix 1: a padded key is padding for every query
    scores = scores.masked_fill(~real, torch.finfo(scores.dtype).min)   # fix 3: a fill that fits float16
    weights = F.softmax(scores, dim=-1) * real     # fix 2: over the keys; fix 3: an empty row becomes 0
    return weights @ values, weights
''',
    hint="Three bugs, each a classic. Read each line against the shapes in its comment and the docstring: "
    "which axis of the scores is the keys'? Which axis must the weights sum to 1 over? And what does the "
    "softmax give a row in which *every* score is -1e6 -- and what does -1e6 become in float16?",
    covers="num_queries equal to and different from num_keys; sentences of valid length 0 and full length; "
    "float16, bfloat16, float32 and float64; written without the course's masked_softmax",
    defaults=_ATTENTION_DEFAULTS,
    specs=[
        {"seed": 91, "batch_size": 3, "num_queries": 4, "num_keys": 4, "valid_lens": [2, 0, 3]},
        {"seed": 92, "num_queries": 3, "num_keys": 5, "valid_lens": [5, 2]},
        {"seed": 93, "num_queries": 3, "num_keys": 3, "valid_lens": [0, 2], "dtype": "float16"},
        {
            "seed": 94,
            "num_queries": 1,
            "num_keys": 4,
            "value_size": 2,
            "valid_lens": [4, 1],
            "dtype": "float64",
        },
        {"seed": 95, "num_queries": 2, "num_keys": 3, "valid_lens": [1, 0], "dtype": "bfloat16"},
    ],
    build=_attention_case,
    call=lambda answer, i: answer(i["queries"], i["keys"], i["values"], i["valid_lens"]),
    reference=_masked_attention_reference,
    mistakes=[
        *planted_mistakes(_ATTENTION_BUGS, _bugged_attention),
        Mistake(
            "A sentence of valid length 0 came out NaN: filled with -inf, its softmax computes 0/0. Fill "
            "with `torch.finfo(scores.dtype).min` and zero the padded weights after the softmax.",
            lambda i: _bugged_attention(i, fill="inf"),
        ),
        Mistake(
            "The padded keys took part in the softmax: zeroing their weights afterwards leaves the real "
            "keys' weights summing to less than 1. Mask the scores *before* the softmax (fill with "
            "`torch.finfo(scores.dtype).min`), then zero the padded weights.",
            lambda i: _fixed_attention(i, mask_before=False),
        ),
        Mistake(
            "The mask keeps one padded key: key j is real when j < valid_lens[i]; with `<=` the first "
            "padded key gets weight too.",
            lambda i: _fixed_attention(i, extra=1),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor",
            "The mask does not broadcast against the scores: `real[:, :, None]` is (batch_size, num_keys, "
            "1), its keys on the queries' axis. A key is padding for every query: `real[:, None, :]`, "
            "(batch_size, 1, num_keys).",
        ),
        ErrorHint(
            r"cannot be converted to type .*Half without overflow",
            "-1e6 does not fit in float16 (its largest magnitude is 65504): fill with "
            "`torch.finfo(scores.dtype).min`, which fits every dtype.",
        ),
    ],
    package=["attn_course.attention.layers.DotProductAttention"],
    # The prompt asks for it without masked_softmax, which the other exercises of the chapter use.
    avoid=[
        "attn_course.attention.masking.masked_softmax",
        "attn_course.attention.masking.masked_softmax_unchecked",
        "attn_course.attention.masking.softmax_excluding",
    ],
)
