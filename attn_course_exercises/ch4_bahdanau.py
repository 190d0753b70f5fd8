"""Chapter 4's exercises, Bahdanau's attention decoder: `bahdanau_decode` (ch4.q1), a decoder loop whose
query is s_{t-1}, and `alignment_error_rate` (ch4.q2) against sure and possible links.

The decoder's cases are built from seeded GRU weights and the package's `AdditiveAttention`; its reference is
the package's `BahdanauDecoder`, stepped over the case. Each known mistake is written once, as the wrong code
a learner writes: the model answer with the learner's lines edited in (`core.edit_of`:
`bahdanau_queries_with_s_t`, `aer_sure_only`, ...), and named when the learner's output is its output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attn_course.models.decoders import BahdanauDecoder, DecoderState
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, edit_of, resolve
from attn_course_exercises.inputs import (
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

#: What the chapter's set-up cell imports: the names a learner's answer, and so each mistake's code, uses.
_NAMESPACE = {"__name__": __name__, "math": math, "torch": torch}


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


class _CaseEmbedding(nn.Module):
    """In a decoder, in place of its embedding: token t stands for step t, whose embedding is the case's
    `embedded[:, t]` (the gradient reaches it)."""

    def __init__(self, embedded: torch.Tensor):
        super().__init__()
        self.held = embedded

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.held[torch.arange(self.held.shape[0]), tokens]


def _bahdanau_loop(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """The package's BahdanauDecoder stepped over the case's teacher-forced steps, fed its embeddings, s_0,
    GRU and attention weights; its output layer is the identity, so each step's logits are the features
    [s_t; c_t; e(y_{t-1})] of eq. 4. Returns the states, contexts and weights, and False (keys projected
    once)."""
    p, embedded = inputs["attention"], inputs["embedded"]
    (a, enc), (b, steps, e), h = p["W_k.weight"].shape, embedded.shape, inputs["s_0"].shape[-1]
    decoder = BahdanauDecoder(steps, e, h, enc_size=enc, attn_hiddens=a).to(embedded.dtype).eval()
    decoder.attention.load_state_dict(p)
    decoder.rnn.load_state_dict({f"{name}_l0": value for name, value in inputs["rnn"].items()})
    decoder.embedding, decoder.output = _CaseEmbedding(embedded), nn.Identity()
    lens = inputs["valid_lens"]
    memory = decoder.attention.prepare(inputs["enc_outputs"], inputs["enc_outputs"], lens)
    state = DecoderState(hidden=inputs["s_0"][None], memory=memory, feed=None, step=0, src_valid_lens=lens)
    states, contexts, weights = [], [], []
    for t in range(steps):
        features, state, weight = decoder.step(torch.full((b,), t), state)
        states.append(state.hidden[-1])
        contexts.append(features[:, h : h + enc])
        weights.append(weight)
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1), False


_BAHDANAU_SOLUTION = '''
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
'''


def _bahdanau_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch4.q1's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_BAHDANAU_SOLUTION, "bahdanau_decode", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch4.q1, each written as a learner writes it: the model answer with the learner's lines.

_START = "    s, states, contexts, weights = s_0, [], [], []\n"
_LOOP = "    for t in range(embedded.shape[1]):\n"
_ATTEND = (
    "        context, weight = attention.attend(s[:, None, :], memory)          # query: the previous state\n"
)
_UPDATE = (
    "        s = rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), s)     # then update the state\n"
)
_KEEP = "        states.append(s)\n"
_STACK = "return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)"

bahdanau_queries_with_s_t = _bahdanau_with(  # Luong's order: the GRU first, fed the previous context
    "bahdanau_queries_with_s_t",
    (_START, _START + "    context = embedded.new_zeros(embedded.shape[0], 1, memory.values.shape[-1])\n"),
    (  # the moved lines lose their comments, which no longer hold
        _ATTEND + _UPDATE,
        "        s = rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), s)\n"
        "        context, weight = attention.attend(s[:, None, :], memory)\n",
    ),
)
bahdanau_context_first = _bahdanau_with(
    "bahdanau_context_first", ("[embedded[:, t], context[:, 0]]", "[context[:, 0], embedded[:, t]]")
)
bahdanau_context_once = _bahdanau_with(
    "bahdanau_context_once", (_LOOP + _ATTEND, _ATTEND.replace("        ", "    ", 1) + _LOOP)
)
bahdanau_returns_s_0 = _bahdanau_with("bahdanau_returns_s_0", (_UPDATE + _KEEP, _KEEP + _UPDATE))
bahdanau_keeps_s_0 = _bahdanau_with(
    "bahdanau_keeps_s_0", (_START, "    s, states, contexts, weights = s_0, [s_0], [], []\n")
)
bahdanau_first_embedding = _bahdanau_with("bahdanau_first_embedding", ("embedded[:, t]", "embedded[:, 0]"))
bahdanau_one_step_short = _bahdanau_with(
    "bahdanau_one_step_short", ("range(embedded.shape[1])", "range(embedded.shape[1] - 1)")
)
bahdanau_stacked_on_axis_0 = _bahdanau_with(
    "bahdanau_stacked_on_axis_0",
    (_STACK, "return torch.stack(states), torch.stack(contexts), torch.stack(weights)"),
)
bahdanau_returns_lists = _bahdanau_with(
    "bahdanau_returns_lists", (_STACK, "return states, contexts, weights")
)
bahdanau_calls_forward = _bahdanau_with(
    "bahdanau_calls_forward",
    (
        "context, weight = attention.attend(s[:, None, :], memory)",
        "context = attention(s[:, None, :], memory.keys, memory.values, memory.valid_lens)\n"
        "        weight = attention.attention_weights",
    ),
)


BAHDANAU_DECODE = Exercise(
    "ch4.q1",
    "bahdanau_decode",
    "Bahdanau's decoder, step by step (query = s_{t-1})",
    solution=_BAHDANAU_SOLUTION,
    hint=(
        (
            "At step t, which state does Bahdanau's decoder attend with: the one before this step's GRU "
            "update, or the one after?"
        ),
        (
            "Bahdanau's order (eqs. 4-6): step t first attends with the state from before the update, "
            "s_{t-1} (a query axis of size 1, through the memory prepared once), then feeds the word's "
            "embedding together with the context to the GRU cell to get s_t. Each step's state, context and "
            "weights are collected and stacked along the time axis. Running the whole attention module at "
            "each step would project the keys again."
        ),
        (
            "Inside the loop, two lines in this order: attend with the current state given a query axis, "
            "through the memory; then the GRU cell on step t's embedding concatenated with the context (its "
            "query axis dropped), from the current state. After the loop, stack each list along axis 1."
        ),
    ),
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
            wrong=bahdanau_queries_with_s_t,
        ),
        Mistake(
            "The GRU's input is [e(y_{t-1}); c_t] -- the embedding first, then the context: the cell's "
            "weights were trained for that order.",
            wrong=bahdanau_context_first,
        ),
        Mistake(
            "The context never changes: it must be recomputed at every step from the current s_{t-1}; "
            "yours is the one from s_0.",
            wrong=bahdanau_context_once,
        ),
        Mistake(
            "Off by one: the states to return are s_1..s_T, the state after each step; yours start at s_0.",
            wrong=bahdanau_returns_s_0,
        ),
        Mistake(
            "The states hold one too many: s_0 is the state before the first step, not an output. Return "
            "s_1..s_T, the T states after each step, (batch_size, T, num_hiddens).",
            wrong=bahdanau_keeps_s_0,
        ),
        Mistake(
            "One step short: the loop ran T - 1 steps. There is one step for each of the T embeddings "
            "(<bos>, y_1, ..., y_{T-1}), each giving a state, a context and weights.",
            wrong=bahdanau_one_step_short,
        ),
        Mistake(
            "Every step was fed the first embedding, `embedded[:, 0]`: step t takes e(y_{t-1}), "
            "`embedded[:, t]`.",
            wrong=bahdanau_first_embedding,
        ),
        Mistake(
            "The results are stacked along axis 0, (T, batch_size, ...): stack the steps along axis 1, "
            "`torch.stack(states, dim=1)`, for (batch_size, T, ...).",
            wrong=bahdanau_stacked_on_axis_0,
        ),
        Mistake(
            "You returned Python lists of the steps' tensors: stack each list into one tensor along the time "
            "axis, axis 1, for (batch_size, T, ...).",
            wrong=bahdanau_returns_lists,
        ),
        Mistake(
            "The steps project the keys again (e.g. by calling `attention(query, keys, ...)`): the memory "
            "already holds W_k h_j; call `attention.attend(query, memory)` at every step.",
            wrong=bahdanau_calls_forward,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"queries has shape \(\d+, \d+(, \d+)?\), expected",
            "`attention.attend` wants queries (batch_size, num_queries, query_size): give the state a "
            "query axis, in the middle, `s[:, None, :]`.",
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


_AER_SOLUTION = '''
def alignment_error_rate(predicted, sure, possible):
    """Och & Ney's alignment error rate (2000, eq. 6), lower is better:
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|).

    predicted (A), sure (S), possible (P): sets of (src_index, tgt_index) links, with S ⊆ P.
    Returns: a float in [0, 1].
    """
    return 1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))
'''


def _aer_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch4.q2's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_AER_SOLUTION, "alignment_error_rate", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch4.q2, each written as a learner writes it: the model answer with the learner's lines.

_NUMERATOR = "len(predicted & sure) + len(predicted & possible)"
_DENOMINATOR = "(len(predicted) + len(sure))"

aer_sure_only = _aer_with("aer_sure_only", ("+ len(predicted & possible)", "+ len(predicted & sure)"))
aer_possible_denominator = _aer_with(
    "aer_possible_denominator", (_DENOMINATOR, "(len(predicted) + len(possible))")
)
aer_agreement = _aer_with("aer_agreement", ("return 1 - ", "return "))
aer_possible_twice = _aer_with(
    "aer_possible_twice", ("(len(predicted & sure) +", "(len(predicted & possible) +")
)
aer_precision = _aer_with(
    "aer_precision", (f"({_NUMERATOR}) / {_DENOMINATOR}", "len(predicted & possible) / len(predicted)")
)
aer_without_possible = _aer_with("aer_without_possible", (_NUMERATOR, "len(predicted & sure)"))
aer_floor_division = _aer_with("aer_floor_division", (f") / {_DENOMINATOR}", f") // {_DENOMINATOR}"))
aer_links_swapped = _aer_with(
    "aer_links_swapped",
    ("    return 1 - ", "    predicted = {(t, s) for s, t in predicted}\n    return 1 - "),
)
aer_rounded = _aer_with(
    "aer_rounded", ("return 1 - ", "return round(1 - "), (_DENOMINATOR, f"{_DENOMINATOR}, 2)")
)
aer_union_denominator = _aer_with("aer_union_denominator", (_DENOMINATOR, "len(predicted | sure)"))


ALIGNMENT_ERROR_RATE = Exercise(
    "ch4.q2",
    "alignment_error_rate",
    "Alignment error rate (AER) against sure and possible links",
    solution=_AER_SOLUTION,
    hint=(
        (
            "Is a predicted link that is possible but not sure an error? And which links must an alignment "
            "find?"
        ),
        (
            "Och and Ney's alignment error rate: a predicted link is correct if it is sure (it counts in "
            "both |A ∩ S| and |A ∩ P|) or merely possible (in |A ∩ P| only), and the denominator |A| + |S| "
            "counts the links predicted and the links that must be found. An error rate: 0 is a perfect "
            "alignment."
        ),
        (
            "One line: one minus the sum of the sizes of the two intersections (predicted with sure, "
            "predicted with possible) over the sum of the sizes of predicted and sure; a set's & is its "
            "intersection."
        ),
    ),
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
            wrong=aer_sure_only,
        ),
        Mistake(
            "The denominator is |A| + |S| (the sure links are the ones that must be found), not |A| + |P|.",
            wrong=aer_possible_denominator,
        ),
        Mistake(
            "You returned the agreement, 1 - AER; AER is an error rate: 0 is a perfect alignment.",
            wrong=aer_agreement,
        ),
        Mistake(
            "Both counts in the numerator used P: it is |A ∩ S| + |A ∩ P|, so a sure link counts twice and a "
            "merely possible link once.",
            wrong=aer_possible_twice,
        ),
        Mistake(
            "That is 1 - precision, which ignores the sure links that were missed; AER also divides by "
            "|A| + |S|.",
            wrong=aer_precision,
        ),
        Mistake(
            "The numerator is |A ∩ S| + |A ∩ P|: you left out |A ∩ P|, the predicted links that are "
            "possible.",
            wrong=aer_without_possible,
        ),
        Mistake(
            "Integer division: `//` rounds the fraction down to 0 (or 1); divide with `/` for a float.",
            wrong=aer_floor_division,
        ),
        Mistake(
            "The links were read as (tgt_index, src_index): each link is (src_index, tgt_index), in the same "
            "order in all three sets; compare them as they come.",
            wrong=aer_links_swapped,
        ),
        Mistake(
            "The AER was rounded: return the exact fraction (round only when you print it).",
            wrong=aer_rounded,
        ),
        Mistake(
            "The denominator is |A| + |S|, not |A ∪ S|: a link that is both predicted and sure counts twice "
            "(once among the links predicted, once among those that must be found), as it does in the "
            "numerator.",
            wrong=aer_union_denominator,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"unsupported operand type\(s\) for &",
            "The links come as Python sets: use `predicted & sure` for the intersection.",
        ),
    ],
    package=[
        "attn_course.measure.metrics.alignment_error_rate",
        "attn_course.measure.metrics.corpus_alignment_error_rate",
    ],
)
