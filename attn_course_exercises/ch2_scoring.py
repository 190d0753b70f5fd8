"""Chapter 2's exercises, scoring functions: scaled dot-product attention (ch2.q1), additive attention
(ch2.q2), Luong's general (ch2.q3) and concat (ch2.q4) scores, and a masked attention with three planted bugs
to find (ch2.q5).

Their references are `attn_course.attention.layers` and `attn_course.attention.scoring`. Each mistake named is
written once, as the wrong code a learner writes: the exercise's model answer with the learner's lines edited
in (`core.edit_of`: `no_scaling`, `AdditiveNoTanh`, ...; ch2.q5's partial fixes are its fixed function with
planted bugs put back), so that the checks hold no second attention or score. Only d2l's masking
(`attention_d2l_masking`), a different algorithm, is written out whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from attn_course.attention.masking import masked_softmax
from attn_course_exercises.bug_hunt import BugHunt, planted_mistakes
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, edit_of, resolve
from attn_course_exercises.inputs import (
    keep_mask,
    lens_text,
    package_attention,
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
    with_gradients,
)

#: What the chapter's set-up cell imports: the names a learner's answer, and so each mistake's code, uses.
_NAMESPACE = {
    "__name__": __name__,
    "math": math,
    "torch": torch,
    "nn": nn,
    "F": F,
    "masked_softmax": masked_softmax,
}


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
    "A row whose valid length is 0 came out uniform instead of all zeros: a very negative fill (d2l's "
    "-1e6) cannot empty a row. Use `masked_softmax` from chapter 1 (imported in the set-up cell), which "
    "gives a row with no real key zero weight everywhere."
)

_DOT_SOLUTION = '''
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
'''


def _dot_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch2.q1's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_DOT_SOLUTION, "scaled_dot_product_attention", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch2.q1, each written as a learner writes it: the model answer with the learner's lines, but
# for d2l's masking (written out whole).

_D = "d = queries.shape[-1]"
_SCALED = " / math.sqrt(d)"
_WEIGHTS = "weights = masked_softmax(scores, valid_lens)"
_CONTEXT = "return torch.bmm(weights, values), weights"

no_scaling = _dot_with("no_scaling", (_SCALED, ""))
divide_by_d = _dot_with("divide_by_d", (_SCALED, " / d"))
divide_by_num_keys = _dot_with("divide_by_num_keys", (_D, "d = keys.shape[1]"))
divide_by_value_size = _dot_with("divide_by_value_size", (_D, "d = values.shape[-1]"))
divide_by_num_queries = _dot_with("divide_by_num_queries", (_D, "d = queries.shape[1]"))
attention_scaled_after_softmax = _dot_with(
    "attention_scaled_after_softmax", (_SCALED, ""), (_WEIGHTS, _WEIGHTS + _SCALED)
)
attention_wrong_axis = _dot_with("attention_wrong_axis", (_WEIGHTS, "weights = F.softmax(scores, dim=1)"))
attention_no_mask = _dot_with("attention_no_mask", (_WEIGHTS, "weights = F.softmax(scores, dim=-1)"))
attention_transposed = _dot_with(
    "attention_transposed",
    ("torch.bmm(queries, keys.transpose(1, 2))", "torch.bmm(keys, queries.transpose(1, 2))"),
)
attention_over_keys = _dot_with(
    "attention_over_keys", ("torch.bmm(weights, values)", "torch.bmm(weights, keys)")
)
attention_first_column = _dot_with(
    "attention_first_column",
    (
        f"    {_WEIGHTS}",
        "    if valid_lens is not None and valid_lens.dim() == 2:\n"
        f"        valid_lens = valid_lens[:, 0]\n    {_WEIGHTS}",
    ),
)
attention_weights_first = _dot_with(
    "attention_weights_first", (_CONTEXT, "return weights, torch.bmm(weights, values)")
)


def attention_d2l_masking(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        scores = scores.masked_fill(~keep_mask(valid_lens, scores.shape[1], scores.shape[2]), -1e6)
    weights = F.softmax(scores, dim=-1)
    return torch.bmm(weights, values), weights


SCALED_DOT_PRODUCT = Exercise(
    "ch2.q1",
    "scaled_dot_product_attention",
    "Scaled dot-product attention",
    solution=_DOT_SOLUTION,
    hint=(
        (
            "Which axis of the queries holds the size d that the scores are divided by, and over which axis "
            "must each query's weights sum to 1?"
        ),
        (
            "Scaled dot-product attention (Vaswani et al. 2017, eq. 1): a score for every query against "
            "every key, a batched matrix product of the queries with the keys turned on their side, divided "
            "by the square root of the query/key size d; then the masked softmax over the keys; then the "
            "weighted sum of the values. Return the context and the weights."
        ),
        (
            "The score line: multiply the queries by the keys with their last two axes swapped and divide "
            "by the square root of the queries' last size; the next line hands those scores and valid_lens "
            "to the masked softmax; the last multiplies its weights by the values."
        ),
    ),
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
            wrong=no_scaling,
        ),
        Mistake(
            "The scores are divided by d; the scaling is 1/sqrt(d): `/ math.sqrt(d)`.",
            wrong=divide_by_d,
        ),
        Mistake(
            "The weights were divided by sqrt(d) after the softmax, so they no longer sum to 1: the scaling "
            "divides the *scores*, q·k / sqrt(d), before the softmax.",
            wrong=attention_scaled_after_softmax,
        ),
        Mistake(
            "You scaled by sqrt(num_keys); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the number of keys.",
            wrong=divide_by_num_keys,
        ),
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the keys must sum to 1 (the "
            "last axis), over the real keys only: `masked_softmax` normalises the last axis and masks it.",
            wrong=attention_wrong_axis,
        ),
        # d2l's masking before no masking: with a single key, a row of valid length 0 comes out the same
        # under both, and the case with one key comes before the one that tells them apart.
        Mistake(_EMPTY_ROW_HINT, wrong=attention_d2l_masking),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Pass the scores and valid_lens to "
            "`masked_softmax`.",
            wrong=attention_no_mask,
        ),
        Mistake(
            "You computed keys · queriesᵀ, a (batch_size, num_keys, num_queries) matrix. The scores are "
            "`queries @ keys.transpose(1, 2)`: one row per query, one column per key.",
            wrong=attention_transposed,
        ),
        Mistake(
            "The context averages the keys; it must average the values: `weights @ values`.",
            wrong=attention_over_keys,
        ),
        Mistake(
            "You scaled by sqrt(value_size); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the size of the values.",
            wrong=divide_by_value_size,
        ),
        Mistake(
            "You scaled by sqrt(num_queries); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the number of queries (axis 1).",
            wrong=divide_by_num_queries,
        ),
        Mistake(
            "valid_lens of shape (batch_size, num_queries) gives one length per query; you used one per "
            "sequence (e.g. its first column). Broadcast it as `valid_lens[:, :, None]` against the keys.",
            wrong=attention_first_column,
        ),
        Mistake(
            "The two results are in the wrong order: return `(context, weights)`, the context first.",
            wrong=attention_weights_first,
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


_ADDITIVE_SOLUTION = '''
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
'''


# The mistakes of ch2.q2, each written as a learner writes it: the model answer with the learner's lines.


class AdditiveLayers(nn.Module):
    """The given `__init__` of ch2.q2 and the one-line `prepare`, on which a wrong `attend` can be written
    (the mutation tests write some). Not an answer: `attend` is the exercise."""

    def __init__(self, key_size, query_size, num_hiddens):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def prepare(self, keys, values, valid_lens=None):
        return self.W_k(keys), values, valid_lens


def _additive_with(name: str, *edits: tuple[str, str]) -> type:
    """ch2.q2's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_ADDITIVE_SOLUTION, "AdditiveAttention", *edits, namespace=_NAMESPACE, rename=name)


_PREPARED = "return self.W_k(keys), values, valid_lens"
_TANH = "features = torch.tanh("
_SOFTMAX = "masked_softmax(self.w_v(features).squeeze(-1), valid_lens)"
_D2L_SOFTMAX = """scores = self.w_v(features).squeeze(-1)
        if valid_lens is not None:
            real = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
            scores = scores.masked_fill(~real, -1e6)
        weights = F.softmax(scores, dim=-1)"""

AdditiveProjectsEveryStep = _additive_with(
    "AdditiveProjectsEveryStep",
    (_PREPARED, "return keys, values, valid_lens"),
    ("projected_keys[:, None, :, :]", "self.W_k(projected_keys)[:, None, :, :]"),
)
AdditiveNoTanh = _additive_with("AdditiveNoTanh", (_TANH, "features = ("))
AdditiveRelu = _additive_with("AdditiveRelu", (_TANH, "features = torch.relu("))
AdditiveTanhOutside = _additive_with(
    "AdditiveTanhOutside",
    (_TANH, "features = ("),
    (_SOFTMAX, "masked_softmax(torch.tanh(self.w_v(features).squeeze(-1)), valid_lens)"),
)
AdditiveSwapped = _additive_with(
    "AdditiveSwapped",
    (_PREPARED, "return self.W_q(keys), values, valid_lens"),
    ("self.W_q(queries)", "self.W_k(queries)"),
)
AdditiveNoMask = _additive_with(
    "AdditiveNoMask", (_SOFTMAX, "F.softmax(self.w_v(features).squeeze(-1), dim=-1)")
)
AdditiveD2lMasking = _additive_with("AdditiveD2lMasking", (f"weights = {_SOFTMAX}", _D2L_SOFTMAX))
AdditiveWrongAxis = _additive_with(
    "AdditiveWrongAxis", (_SOFTMAX, "F.softmax(self.w_v(features).squeeze(-1), dim=1)")
)
AdditiveFirstQueryOnly = _additive_with(
    "AdditiveFirstQueryOnly", ("self.W_q(queries)", "self.W_q(queries[:, :1])")
)
AdditiveMemoryOnSelf = _additive_with(
    "AdditiveMemoryOnSelf",
    (_PREPARED, "self.memory = self.W_k(keys), values, valid_lens"),
    ("projected_keys, values, valid_lens = memory", "projected_keys, values, valid_lens = self.memory"),
)


ADDITIVE_ATTENTION = Exercise(
    "ch2.q2",
    "AdditiveAttention",
    "Additive attention with the keys projected once",
    solution=_ADDITIVE_SOLUTION,
    write=("prepare", "attend"),
    hint=(
        (
            "Which part of the score depends only on the keys, and so can be computed once per source batch "
            "rather than at every decoder step?"
        ),
        (
            "Additive attention (Bahdanau et al. 2014, eq. 6) with its key projection cached: prepare does "
            "the work that depends only on the keys, once, and returns it as the memory; attend projects "
            "the queries, combines every query with every key by broadcasting to (batch, num_queries, "
            "num_keys, num_hiddens), and turns each combination into one score with tanh and w_v; then the "
            "masked softmax and the weighted sum of the values. Nothing is kept on self between the two."
        ),
        (
            "The line to write in attend: the queries through W_q, given a key axis, plus the projected "
            "keys from the memory, given a query axis, inside tanh; then w_v, dropping only its last axis "
            "of size 1, into the masked softmax with the memory's valid_lens."
        ),
    ),
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
            wrong=AdditiveProjectsEveryStep,
        ),
        Mistake(
            "tanh is missing: the score is w_vᵀ tanh(W_q q + W_k k); without the tanh it is linear in the "
            "query and the key.",
            wrong=AdditiveNoTanh,
        ),
        Mistake(
            "You used ReLU where the score has tanh: w_vᵀ tanh(W_q q + W_k k). ReLU cuts the negative "
            "features to 0, so many keys score alike.",
            wrong=AdditiveRelu,
        ),
        Mistake(
            "tanh is applied after w_v; it goes inside: w_vᵀ tanh(W_q q + W_k k).",
            wrong=AdditiveTanhOutside,
        ),
        Mistake(
            "W_q and W_k are swapped: W_q projects the queries, W_k the keys.",
            wrong=AdditiveSwapped,
        ),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Keep valid_lens in the memory and "
            "use `masked_softmax`.",
            wrong=AdditiveNoMask,
        ),
        Mistake(_EMPTY_ROW_HINT, wrong=AdditiveD2lMasking),
        Mistake(
            "The softmax runs over the wrong axis: with one query per step, a softmax over the queries "
            "gives every key weight 1. Normalise over the keys (the last axis).",
            wrong=AdditiveWrongAxis,
        ),
        Mistake(
            "`attend` answered only the first of several queries: queries is (batch_size, num_queries, "
            "query_size), and each query needs its own context and weights.",
            wrong=AdditiveFirstQueryOnly,
        ),
        Mistake(
            "`attend` used the memory of the last `prepare` call, not the memory it was given: keep "
            "nothing on `self` in `prepare`; return the projected keys, the values and valid_lens, and "
            "read them from `memory` in `attend`.",
            wrong=AdditiveMemoryOnSelf,
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


_FIRST_QUERY = (
    "Only the first query was scored: queries is (batch_size, num_queries, query_size), and every query "
    "gets its own row of scores."
)


_SOFTMAX_SCORES = (
    "You returned softmax weights; this function returns the raw scores (the masked softmax comes later)."
)
_TRANSPOSED_SCORES = (
    "The scores are transposed: return (batch_size, num_queries, num_keys), one row per query "
    "and one column per key."
)

_GENERAL_SOLUTION = '''
def general_scores(queries, keys, W_a):
    """Luong's "general" score qᵀ W_a k for every query and key.

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (query_size, key_size), the weight of nn.Linear(key_size, query_size, bias=False).
    Returns: scores (batch_size, num_queries, num_keys).
    Luong et al. 2015, sec. 3.1: one of the content-based scores of eq. (7).
    """
    projected_keys = keys @ W_a.T                       # W_a k: (batch_size, num_keys, query_size)
    return torch.bmm(queries, projected_keys.transpose(1, 2))
'''


def _general_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch2.q3's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_GENERAL_SOLUTION, "general_scores", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch2.q3, each written as a learner writes it: the model answer with the learner's lines.

_SCORES = "torch.bmm(queries, projected_keys.transpose(1, 2))"

general_untransposed = _general_with("general_untransposed", ("keys @ W_a.T", "keys @ W_a"))
general_ignores_W_a = _general_with(
    "general_ignores_W_a", ("projected_keys = keys @ W_a.T", "projected_keys = keys")
)
general_scaled = _general_with("general_scaled", (_SCORES, f"{_SCORES} / math.sqrt(queries.shape[-1])"))
general_softmaxed = _general_with("general_softmaxed", (_SCORES, f"F.softmax({_SCORES}, dim=-1)"))
general_transposed = _general_with(
    "general_transposed", (_SCORES, "torch.bmm(projected_keys, queries.transpose(1, 2))")
)
general_tanh = _general_with("general_tanh", (_SCORES, f"torch.tanh({_SCORES})"))
general_first_query = _general_with(
    "general_first_query", ("torch.bmm(queries,", "torch.bmm(queries[:, :1],")
)


GENERAL_SCORES = Exercise(
    "ch2.q3",
    "general_scores",
    "Luong's general score qᵀ W_a k",
    solution=_GENERAL_SOLUTION,
    hint=(
        (
            "In qᵀ W_a k, does W_a act on the query or on the key, and with the keys stored as rows, on "
            "which side of the product does it go?"
        ),
        (
            "Luong's general score is a bilinear form: the dot product of the query with the key brought "
            "into the query's space by W_a, the weight of nn.Linear(key_size, query_size), (query_size, "
            "key_size). No scaling, no non-linearity, no softmax."
        ),
        (
            "Two lines: the projected keys are the keys times W_a transposed, (batch_size, num_keys, "
            "query_size); the scores are the batched product of the queries with the projected keys' last "
            "two axes swapped."
        ),
    ),
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
    reference=lambda i: resolve("attn_course.attention.scoring.general_scores")(
        i["queries"], i["keys"], i["W_a"]
    ),
    mistakes=[
        Mistake(
            "W_a is applied the wrong way round: you computed qᵀ W_aᵀ k (e.g. `keys @ W_a`, or "
            "`queries @ W_a.T`). W_a is (query_size, key_size), the weight of nn.Linear(key_size, "
            "query_size): it maps a key into the query's space, W_a k, which for keys stored as rows is "
            "`keys @ W_a.T`.",
            wrong=general_untransposed,
        ),
        Mistake(
            "W_a is ignored: that is the dot score qᵀk. The general score maps the keys first: qᵀ (W_a k).",
            wrong=general_ignores_W_a,
        ),
        Mistake(
            "Luong's general score is not scaled: drop the 1/sqrt(d).",
            wrong=general_scaled,
        ),
        Mistake(_SOFTMAX_SCORES, wrong=general_softmaxed),
        Mistake(_TRANSPOSED_SCORES, wrong=general_transposed),
        Mistake(
            "You applied tanh to the scores: Luong's general score is the raw qᵀ W_a k, with no "
            "non-linearity.",
            wrong=general_tanh,
        ),
        Mistake(_FIRST_QUERY, wrong=general_first_query),
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


_CONCAT_SOLUTION = '''
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
'''


def _concat_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch2.q4's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_CONCAT_SOLUTION, "concat_scores", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch2.q4, each written as a learner writes it: the model answer with the learner's lines.

_QUERY_HALF = "queries[:, :, None, :].expand(-1, -1, num_keys, -1)"
_KEY_HALF = "keys[:, None, :, :].expand(-1, num_queries, -1, -1)"
_SCORE = "return (torch.tanh(pairs @ W_a.T) @ v_a.T).squeeze(-1)"

concat_key_first = _concat_with(
    "concat_key_first", (f"[{_QUERY_HALF},", f"[{_KEY_HALF},"), (f"{_KEY_HALF}],", f"{_QUERY_HALF}],")
)
concat_no_tanh = _concat_with("concat_no_tanh", ("torch.tanh(pairs @ W_a.T)", "(pairs @ W_a.T)"))
concat_tanh_outside = _concat_with(
    "concat_tanh_outside", (_SCORE, "return torch.tanh(pairs @ W_a.T @ v_a.T).squeeze(-1)")
)
concat_softmaxed = _concat_with(
    "concat_softmaxed", (_SCORE, "return F.softmax((torch.tanh(pairs @ W_a.T) @ v_a.T).squeeze(-1), dim=-1)")
)
concat_keys_by_queries = _concat_with(
    "concat_keys_by_queries",
    (_QUERY_HALF, "queries[:, None, :, :].expand(-1, num_keys, -1, -1)"),
    (_KEY_HALF, "keys[:, :, None, :].expand(-1, -1, num_queries, -1)"),
)
concat_first_query = _concat_with(
    "concat_first_query",
    ("queries[:, :, None, :]", "queries[:, :1, None, :]"),
    ("expand(-1, num_queries, -1, -1)", "expand(-1, 1, -1, -1)"),
)
concat_bare_squeeze = _concat_with("concat_bare_squeeze", (".squeeze(-1)", ".squeeze()"))


CONCAT_SCORES = Exercise(
    "ch2.q4",
    "concat_scores",
    "Luong's concat score v_aᵀ tanh(W_a [q; k])",
    solution=_CONCAT_SOLUTION,
    hint=(
        (
            "For every query and every key you need one [q; k]: what shape must the queries and the keys "
            "each have before they can be concatenated?"
        ),
        (
            "Luong's concat score v_aᵀ tanh(W_a [q; k]): every (query, key) pair gets its own "
            "concatenation, query first, so both are expanded to a common (batch, num_queries, num_keys, "
            "...) shape and joined along the features; W_a, tanh and v_a then turn each pair into one "
            "number. (W_a [q; k] also splits into a query part plus a key part, which avoids building the "
            "big tensor.)"
        ),
        (
            "The pairs line: the queries given a key axis and the keys given a query axis, each expanded to "
            "(batch, num_queries, num_keys, ...), concatenated query first along the last axis; the score "
            "line: through W_a (transposed), tanh, through v_a (transposed), dropping only the last axis."
        ),
    ),
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
            "The query and the key meet the wrong halves of W_a: the score reads [q; k] -- the query first, "
            "then the key -- so the first query_size columns of W_a multiply the query and the rest the key. "
            "You built [k; q] (or gave the query W_a's key columns).",
            wrong=concat_key_first,
        ),
        Mistake("tanh is missing: the score is v_aᵀ tanh(W_a [q; k]).", wrong=concat_no_tanh),
        Mistake(
            "tanh is applied after v_a; it goes inside: v_aᵀ tanh(W_a [q; k]).",
            wrong=concat_tanh_outside,
        ),
        Mistake(_SOFTMAX_SCORES, wrong=concat_softmaxed),
        Mistake(_TRANSPOSED_SCORES, wrong=concat_keys_by_queries),
        Mistake(_FIRST_QUERY, wrong=concat_first_query),
        Mistake(
            "`.squeeze()` without an axis also dropped an axis of size 1 (the batch, the queries or the "
            "keys): squeeze only the last axis, `.squeeze(-1)`.",
            wrong=concat_bare_squeeze,
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


_HUNT_SOLUTION = '''
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
'''
#: The model answer of ch2.q5 without its "# fix" comments: the code each partial fix is an edit of.
_HUNT_FIXED = re.sub(r" +# fix [^\n]*", "", _HUNT_SOLUTION)

#: Each planted bug, as the (right, wrong) edits that put it back into the fixed function.
_PLANTED = {
    "axis": (("real = real[:, None, :]", "real = real[:, :, None]"),),
    "dim": (("dim=-1)", "dim=1)"),),
    "fill": (("torch.finfo(scores.dtype).min)", "-1e6)"), (" * real\n", "\n")),
}

#: How a learner may have treated the fill: fixed, left as planted, or fixed in part.
_FILLS = {
    "fixed": (),
    "planted": _PLANTED["fill"],
    "number": ((" * real\n", "\n"),),  # the right number, the empty rows not zeroed
    "zeroed": (("torch.finfo(scores.dtype).min)", "-1e6)"),),  # zeroed, but -1e6 kept
    "inf": (("torch.finfo(scores.dtype).min)", "-math.inf)"),),
}


def _hunt_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch2.q5's fixed function with a learner's edits: each (right, wrong) piece of its source replaced."""
    return edit_of(_HUNT_FIXED, "masked_attention", *edits, namespace=_NAMESPACE, rename=name)


def _partly_fixed(axis: bool = False, dim: bool = False, fill: str = "fixed") -> Callable:
    """ch2.q5's masked_attention as a learner's partial fix leaves it: the axis and dim bugs left in where
    true, the fill as `fill` says (a key of _FILLS)."""
    edits = (*(_PLANTED["axis"] if axis else ()), *(_PLANTED["dim"] if dim else ()), *_FILLS[fill])
    left = [bug for bug, kept in (("axis", axis), ("dim", dim), (f"fill_{fill}", fill != "fixed")) if kept]
    return _hunt_with("_".join(["masked_attention_with", *left]) if left else "masked_attention", *edits)


def _left_in(remaining: frozenset[str]) -> Callable:
    """The function with the planted bugs named in `remaining` left in and the others fixed. The fill bug is
    the empty rows left uniform, with the number fixed: -1e6 raises in float16, where a learner who only
    changed the number still has the bug (and the three bugs with -1e6 are the function as given)."""
    fill = "number" if "fill" in remaining else "fixed"
    return _partly_fixed("axis" in remaining, "dim" in remaining, fill)


def hunted(queries, keys, values, valid_lens, *, axis=False, dim=False, fill="fixed"):
    """ch2.q5's masked_attention with some planted bugs fixed, as a learner fixes them (`_partly_fixed`)."""
    return _partly_fixed(axis, dim, fill)(queries, keys, values, valid_lens)


# The mistakes of ch2.q5 besides the planted ones, each written as a learner writes it: the fixed function
# with the learner's lines.

hunt_minus_inf = _hunt_with("hunt_minus_inf", *_FILLS["inf"])
hunt_masked_after_softmax = _hunt_with(
    "hunt_masked_after_softmax",
    ("    scores = scores.masked_fill(~real, torch.finfo(scores.dtype).min)\n", ""),
)
hunt_keeps_one_padded_key = _hunt_with(
    "hunt_keeps_one_padded_key",
    ("torch.arange(keys.shape[1]) < valid_lens", "torch.arange(keys.shape[1]) <= valid_lens"),
)


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
    solution=_HUNT_SOLUTION,
    hint=(
        (
            "Read each line against the shapes in its comment and the docstring: which axis of the scores "
            "is the keys', which axis must the weights sum to 1 over, and what does the softmax give a row "
            "in which every score is -1e6?"
        ),
        (
            "Three classic masking bugs: a mask must broadcast along the keys' axis (a padded key is "
            "padding for every query); the softmax normalises each query's scores over the keys; and a very "
            "negative fill cannot empty a row (a sentence of valid length 0 comes out uniform), while -1e6 "
            "does not even fit in float16, whose largest magnitude is 65504."
        ),
        (
            "Three lines to fix: the mask line (its new axis goes where the queries are), the softmax line "
            "(its dim), and the fill line (the dtype's own smallest number, then the padded weights zeroed "
            "after the softmax by multiplying with the mask)."
        ),
    ),
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
    reference=_dot_reference,
    mistakes=[
        *planted_mistakes(_ATTENTION_BUGS, wrong=_left_in),
        Mistake(
            "A sentence of valid length 0 came out NaN: its row has no real key, so its weights are 0 / 0 "
            "-- the softmax of a row filled with -inf, or a row of zeros divided by its zero sum. An empty "
            "row's weights must be all 0: fill with `torch.finfo(scores.dtype).min` and zero the padded "
            "weights after the softmax (dividing by hand, divide only where the sum is not 0).",
            wrong=hunt_minus_inf,
        ),
        Mistake(
            "The padded keys took part in the softmax: zeroing their weights afterwards leaves the real "
            "keys' weights summing to less than 1. Mask the scores *before* the softmax (fill with "
            "`torch.finfo(scores.dtype).min`), then zero the padded weights.",
            wrong=hunt_masked_after_softmax,
        ),
        Mistake(
            "The mask keeps one padded key: key j is real when j < valid_lens[i]; with `<=` the first "
            "padded key gets weight too.",
            wrong=hunt_keeps_one_padded_key,
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
