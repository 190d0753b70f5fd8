"""Chapter 4's exercises, Bahdanau's attention decoder: `bahdanau_decode` (ch4.q1), a decoder loop whose
query is s_{t-1}, and `alignment_error_rate` (ch4.q2) against sure and possible links.

The decoder's cases are built from seeded GRU weights and the package's `AdditiveAttention`; its reference is
the same loop written out here, and its mistakes include querying with s_t instead of s_{t-1}.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import (
    gru_cell,
    gru_params,
    package_attention,
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
    with_gradients,
)


def _bahdanau_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, t, s = (spec_size(spec, n) for n in ("batch_size", "num_steps", "num_keys"))
    e, h, enc, a = (spec_size(spec, n) for n in ("embed_size", "num_hiddens", "enc_size", "attn_hiddens"))
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    inputs = {
        "embedded": seeded_randn((b, t, e), gen, dtype),
        "s_0": seeded_randn((b, h), gen, dtype, 0.5),
        "enc_outputs": seeded_randn((b, s, enc), gen, dtype),
        "valid_lens": lens,
        "attention": {
            "W_k.weight": seeded_randn((a, enc), gen, dtype, 0.5),
            "W_q.weight": seeded_randn((a, h), gen, dtype, 0.5),
            "w_v.weight": seeded_randn((1, a), gen, dtype),
        },
        "rnn": gru_params(gen, dtype, e + enc, h),
    }
    label = (
        f"{t} steps, batch {b}, embed_size {e}, num_hiddens {h}, {s} source positions of size {enc}, "
        f"valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(
        label,
        inputs,
        spec,
        ("the states", "the contexts", "the weights", "whether the steps re-project the keys"),
    )


def _bahdanau_parts(inputs: dict[str, Any]) -> tuple[nn.Module, nn.GRUCell, Any]:
    """The package's AdditiveAttention with the case's weights, its memory of the source, and the GRU cell."""
    p = inputs["attention"]
    (a, enc), h = p["W_k.weight"].shape, p["W_q.weight"].shape[1]
    attention = package_attention("AdditiveAttention", enc, h, a).to(p["W_k.weight"].dtype)
    attention.load_state_dict(p)
    memory = attention.prepare(inputs["enc_outputs"], inputs["enc_outputs"], inputs["valid_lens"])
    return attention, gru_cell(inputs["rnn"]), memory


def _bahdanau_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    """Run the learner's decoder loop; then again with W_k poisoned, to see whether it projects keys again."""
    attention, rnn, memory = _bahdanau_parts(inputs)
    result = fn(inputs["embedded"], inputs["s_0"], memory, attention, rnn)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return result
    if inputs.get("gradient"):  # poisoning W_k in place would break the gradient's backward pass
        return (*result, False)
    with torch.no_grad():
        attention.W_k.weight.fill_(math.nan)
    again = fn(inputs["embedded"], inputs["s_0"], memory, attention, rnn)
    had_nan = any(isinstance(r, torch.Tensor) and bool(torch.isnan(r).any()) for r in result)
    has_nan = any(isinstance(r, torch.Tensor) and bool(torch.isnan(r).any()) for r in again)
    return (*result, has_nan and not had_nan)


def _bahdanau_loop(
    inputs: dict[str, Any],
    *,
    query: str = "previous",
    order: str = "yc",
    once: bool = False,
    shift: bool = False,
    same_input: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """Bahdanau's decoder over the teacher-forced steps, and its known-wrong variants."""
    attention, rnn, memory = _bahdanau_parts(inputs)
    embedded, s = inputs["embedded"], inputs["s_0"]
    previous_context = embedded.new_zeros(embedded.shape[0], memory.values.shape[-1])
    states, contexts, weights = [], [], []
    first = attention.attend(s[:, None], memory)
    for t in range(embedded.shape[1]):
        if query == "previous":
            context, weight = first if once else attention.attend(s[:, None], memory)
            parts = [embedded[:, 0 if same_input else t], context[:, 0]]
            new_s = rnn(torch.cat(parts if order == "yc" else parts[::-1], -1), s)
        else:  # attend with the new state, feeding the previous step's context to the GRU
            new_s = rnn(torch.cat([embedded[:, t], previous_context], -1), s)
            context, weight = attention.attend(new_s[:, None], memory)
            previous_context = context[:, 0]
        states.append(s if shift else new_s)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
        s = new_s
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1), False


BAHDANAU_DECODE = Exercise(
    "ch4.q1",
    "bahdanau_decode",
    "Bahdanau's decoder, step by step (query = s_{t-1})",
    solution='''
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    """Run Bahdanau's decoder over T teacher-forced steps (Bahdanau et al. 2014, eqs. 4-6).

    At step t: c_t, alpha_t = attend(s_{t-1}); s_t = GRU([e(y_{t-1}); c_t], s_{t-1}).
    embedded: (batch_size, T, embed_size), the embeddings of <bos>, y_1, ..., y_{T-1};
    s_0: (batch_size, num_hiddens); memory: attention.prepare(annotations, annotations, valid_lens), the keys
    already projected; attention: attn_course's AdditiveAttention; rnn: nn.GRUCell(embed_size + enc_size,
    num_hiddens).
    Returns: states s_1..s_T (batch_size, T, num_hiddens), contexts c_1..c_T (batch_size, T, enc_size),
    weights alpha_1..alpha_T (batch_size, T, num_keys).
    """
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        context, weight = attention.attend(s[:, None, :], memory)          # query: the previous state
        s = rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), s)     # then update the state
        states.append(s)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
''',
    hint="Loop over the target steps. In Bahdanau's order, step t first attends with the state from before "
    "the update, s_{t-1} (a query axis of size 1, through the memory prepared once), then feeds the "
    "word's embedding together with the context to the GRU cell to get s_t. Collect each step's state, "
    "context and weights and stack them along the time axis. Running the whole attention module at "
    "each step would project the keys again.",
    covers="several steps; padded sources and length-1 sources; the keys projected once; float32 and "
    "float64; gradients through time",
    defaults={
        "seed": 0,
        "grad": False,
        "batch_size": 2,
        "num_steps": 4,
        "num_keys": 5,
        "embed_size": 3,
        "num_hiddens": 6,
        "enc_size": 4,
        "attn_hiddens": 5,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 81, "valid_lens": [5, 3]},
        {"seed": 82, "batch_size": 3, "num_steps": 3, "num_keys": 1, "valid_lens": [1, 1, 1]},
        {
            "seed": 83,
            "num_steps": 5,
            "num_keys": 6,
            "embed_size": 4,
            "enc_size": 4,
            "valid_lens": [2, 6],
            "dtype": "float64",
        },
        {"seed": 184, "valid_lens": [4, 2], "grad": True},
    ],
    build=_bahdanau_case,
    call=_bahdanau_call,
    reference=_bahdanau_loop,
    mistakes=[
        Mistake(
            "The attention at step t uses the new state s_t, where Bahdanau's decoder needs the previous "
            "one, s_{t-1}: attend first (with the state you have), then run the GRU on [e(y_{t-1}); c_t].",
            lambda i: _bahdanau_loop(i, query="current"),
        ),
        Mistake(
            "The GRU's input is [e(y_{t-1}); c_t] -- the embedding first, then the context: the cell's "
            "weights were trained for that order.",
            lambda i: _bahdanau_loop(i, order="cy"),
        ),
        Mistake(
            "The context never changes: it must be recomputed at every step from the current s_{t-1}; "
            "yours is the one from s_0.",
            lambda i: _bahdanau_loop(i, once=True),
        ),
        Mistake(
            "Off by one: the states to return are s_1..s_T, the state after each step; yours start at s_0.",
            lambda i: _bahdanau_loop(i, shift=True),
        ),
        Mistake(
            "Every step was fed the first embedding, `embedded[:, 0]`: step t takes e(y_{t-1}), "
            "`embedded[:, t]`.",
            lambda i: _bahdanau_loop(i, same_input=True),
        ),
        Mistake(
            "The results are stacked along axis 0, (T, batch_size, ...): stack the steps along axis 1, "
            "`torch.stack(states, dim=1)`, for (batch_size, T, ...).",
            lambda i: (*(r.transpose(0, 1) for r in _bahdanau_loop(i)[:3]), False),
        ),
        Mistake(
            "The steps project the keys again (e.g. by calling `attention(query, keys, ...)`): the memory "
            "already holds W_k h_j; call `attention.attend(query, memory)` at every step.",
            lambda i: (*_bahdanau_loop(i)[:3], True),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"queries has shape \(\d+, \d+\), expected",
            "`attention.attend` wants queries (batch_size, num_queries, query_size): give the state a "
            "query axis, `s[:, None, :]`.",
        ),
        ErrorHint(
            r"input has inconsistent input_size|Expected hidden size|size mismatch|mat1 and mat2",
            "The GRU cell takes [e(y_{t-1}); c_t] of size embed_size + enc_size and the state s_{t-1} "
            "(batch_size, num_hiddens): squeeze the query axis of the context (`context[:, 0]`) before "
            "concatenating.",
        ),
        ErrorHint(
            r"Tensors must have same number of dimensions",
            "The context from `attend` is (batch_size, 1, enc_size): squeeze its query axis "
            "(`context[:, 0]`) before concatenating it with the embedding (batch_size, embed_size).",
        ),
    ],
    package=["attn_course.models.decoders.BahdanauDecoder"],
)
with_gradients(BAHDANAU_DECODE, ("embedded", "s_0", "enc_outputs"))


def _links_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    src, tgt = spec_size(spec, "src_len"), spec_size(spec, "tgt_len")
    grid = [(i, j) for i in range(src) for j in range(tgt)]
    draw = torch.rand(len(grid), 3, generator=gen).tolist()
    possible = {link for link, (p, _, _) in zip(grid, draw, strict=True) if p < spec["possible_rate"]}
    sure = {link for link, (p, q, _) in zip(grid, draw, strict=True) if link in possible and q < 0.6}
    kind = spec["predicted"]
    if kind == "argmax":  # one source word per target word, like attention_to_links
        picks = torch.randint(0, src, (tgt,), generator=gen).tolist()
        predicted = {(i, j) for j, i in enumerate(picks)}
    elif kind in ("sure", "possible", "empty"):
        predicted = {"sure": set(sure), "possible": set(possible), "empty": set()}[kind]
    else:
        raise ValueError(f"predicted must be 'argmax', 'sure', 'possible' or 'empty', got {kind!r}")
    if not sure and not predicted:
        sure = {(0, 0)}
        possible.add((0, 0))
    label = (
        f"{src} source and {tgt} target words: |A| = {len(predicted)} predicted, |S| = {len(sure)} sure, "
        f"|P| = {len(possible)} possible links"
    )
    return Case(label, {"predicted": predicted, "sure": sure, "possible": possible}, spec, "the AER")


def _aer_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> float | None:
        a, s, p = inputs["predicted"], inputs["sure"], inputs["possible"]
        if kind == "sure_only":
            return 1 - 2 * len(a & s) / (len(a) + len(s))
        if kind == "possible_denominator":
            return 1 - (len(a & s) + len(a & p)) / (len(a) + len(p)) if a or p else None
        if kind == "score":
            return (len(a & s) + len(a & p)) / (len(a) + len(s))
        if kind == "possible_only":
            return 1 - 2 * len(a & p) / (len(a) + len(s))
        if kind == "precision":
            return 1 - len(a & p) / len(a) if a else None
        if not (a or s):
            return None
        if kind == "sure_once":
            return 1 - len(a & s) / (len(a) + len(s))
        if kind == "floor":
            return 1 - (len(a & s) + len(a & p)) // (len(a) + len(s))
        if kind == "swapped":
            a = {(t, src) for src, t in a}
            return 1 - (len(a & s) + len(a & p)) / (len(a) + len(s))
        return None

    return variant


def _aer_rounded(inputs: dict[str, Any]) -> float | None:
    """The AER rounded to two decimals, where the inputs have links at all."""
    a, s = inputs["predicted"], inputs["sure"]
    if not (a or s):
        return None
    return round(1 - (len(a & s) + len(a & inputs["possible"])) / (len(a) + len(s)), 2)


ALIGNMENT_ERROR_RATE = Exercise(
    "ch4.q2",
    "alignment_error_rate",
    "Alignment error rate (AER) against sure and possible links",
    solution='''
def alignment_error_rate(predicted, sure, possible):
    """Och & Ney's alignment error rate (2000, eq. 6), lower is better:
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|).

    predicted (A), sure (S), possible (P): sets of (src_index, tgt_index) links, with S ⊆ P.
    Returns: a float in [0, 1].
    """
    return 1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))
''',
    hint="Think of A, S and P as sets of links: the formula's |A ∩ S| and |A ∩ P| are sizes of "
    "intersections. A possible-but-not-sure link is never an error and never required: check where P "
    "and S each appear in the formula, and that your counts follow it.",
    covers="argmax alignments, A = S (AER 0), A = P, an empty prediction, sure = possible",
    defaults={"seed": 0, "src_len": 5, "tgt_len": 6, "possible_rate": 0.35, "predicted": "argmax"},
    specs=[
        {"seed": 91},
        {"seed": 92, "src_len": 7, "tgt_len": 5, "predicted": "sure"},
        {"seed": 93, "src_len": 4, "tgt_len": 4, "predicted": "possible", "possible_rate": 0.5},
        {"seed": 94, "src_len": 6, "tgt_len": 3, "predicted": "empty"},
        {"seed": 95, "src_len": 8, "tgt_len": 8, "possible_rate": 0.25},
    ],
    build=_links_case,
    call=lambda answer, i: answer(i["predicted"], i["sure"], i["possible"]),
    reference=lambda i: resolve("attn_course.measure.metrics.alignment_error_rate")(
        i["predicted"], i["sure"], i["possible"]
    ),
    mistakes=[
        Mistake(
            "You counted only the sure links as correct: a predicted link that is merely possible is not an "
            "error either. The numerator is |A ∩ S| + |A ∩ P|.",
            _aer_variant("sure_only"),
        ),
        Mistake(
            "The denominator is |A| + |S| (the sure links are the ones that must be found), not |A| + |P|.",
            _aer_variant("possible_denominator"),
        ),
        Mistake(
            "You returned the agreement, 1 - AER; AER is an error rate: 0 is a perfect alignment.",
            _aer_variant("score"),
        ),
        Mistake(
            "Both counts in the numerator used P: it is |A ∩ S| + |A ∩ P|, so a sure link counts twice and a "
            "merely possible link once.",
            _aer_variant("possible_only"),
        ),
        Mistake(
            "That is 1 - precision, which ignores the sure links that were missed; AER also divides by "
            "|A| + |S|.",
            _aer_variant("precision"),
        ),
        Mistake(
            "The numerator is |A ∩ S| + |A ∩ P|: you left out |A ∩ P|, the predicted links that are "
            "possible.",
            _aer_variant("sure_once"),
        ),
        Mistake(
            "Integer division: `//` rounds the fraction down to 0 (or 1); divide with `/` for a float.",
            _aer_variant("floor"),
        ),
        Mistake(
            "The links were read as (tgt_index, src_index): each link is (src_index, tgt_index), in the same "
            "order in all three sets; compare them as they come.",
            _aer_variant("swapped"),
        ),
        Mistake(
            "The AER was rounded: return the exact fraction (round only when you print it).",
            _aer_rounded,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"unsupported operand type\(s\) for &",
            "The links come as Python sets: use `predicted & sure` for the intersection.",
        ),
    ],
    package=["attn_course.measure.metrics.alignment_error_rate", "attn_course.measure.metrics.corpus_alignment_error_rate"],
)
