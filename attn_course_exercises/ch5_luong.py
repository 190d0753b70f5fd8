"""Chapter 5's exercises, Luong's attention: location-based weights (ch5.q1), one decoder step with input
feeding (ch5.q2), local-p weights (ch5.q3), a window and a Gaussian around the predicted position p_t, and
local-p attention from the decoder state (ch5.q4), which predicts p_t first (eq. 9).

The step's cases are built from seeded GRU weights and the package's `LuongAttention`. The references of the
step and of local-p are the package's `LuongDecoder` (its `step`, `centres` and `align`) fed the case's
tensors. Each known mistake is written once, as the wrong code a learner writes: the model answer with the
learner's lines edited in (`core.edit_of`: `location_uncut`, `luong_no_tanh`, `local_p_padded_width`, ...), so
that the checks hold no second local-p window; it is named when the learner's output is its.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from attn_course.attention.layers import Memory
from attn_course.models.decoders import DecoderState, LuongDecoder
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, edit_of, resolve
from attn_course_exercises.inputs import (
    gru_cell,
    gru_params,
    lens_text,
    package_attention,
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
    with_gradients,
)


def _location_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, q, qs = (spec_size(spec, n) for n in ("batch_size", "num_queries", "query_size"))
    max_len, k = spec_size(spec, "max_len"), spec_size(spec, "num_keys")
    if k > max_len:
        raise ValueError(f"num_keys must be <= max_len = {max_len}, got {k}")
    lens = spec_lengths(spec["valid_lens"], (b, q) if spec["per_query"] else (b,), k, gen, "valid_lens")
    inputs = {
        "queries": seeded_randn((b, q, qs), gen, dtype),
        "W_a": seeded_randn((max_len, qs), gen, dtype),
        "num_keys": k,
        "valid_lens": lens,
    }
    label = (
        f"queries {(b, q, qs)}, W_a {(max_len, qs)} (max_len {max_len}), num_keys {k}, {lens_text(lens)}, "
        f"dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, "the weights")


def masked_softmax(scores: torch.Tensor, valid_lens: torch.Tensor | None) -> torch.Tensor:
    """The package's masked softmax, which the learner's cell imports (ch5.q1's answers may call it)."""
    return resolve("attn_course.attention.masking.masked_softmax")(scores, valid_lens)


#: What the chapter's set-up cell imports: the names a learner's answer, and so each mistake's code, uses.
_NAMESPACE = {"__name__": __name__, "math": math, "torch": torch, "F": F, "masked_softmax": masked_softmax}


def _location_reference(inputs: dict[str, Any]) -> torch.Tensor:
    scores = resolve("attn_course.attention.scoring.location_scores")(
        inputs["queries"], inputs["W_a"], inputs["num_keys"]
    )
    return masked_softmax(scores, inputs["valid_lens"])


_LOCATION_SOLUTION = '''
def location_weights(queries, W_a, num_keys, valid_lens=None):
    """Luong's location-based weights a_t = softmax(W_a h_t) over the source positions (Luong et al. 2015,
    eq. 8), cut to the batch's num_keys positions and masked to each valid length.

    queries: (batch_size, num_queries, query_size); W_a: (max_len, query_size), the weight of
    nn.Linear(query_size, max_len, bias=False); num_keys <= max_len: the batch's padded source length;
    valid_lens: None, (batch_size,) or (batch_size, num_queries).
    Returns: weights (batch_size, num_queries, num_keys).
    """
    scores = queries @ W_a[:num_keys].T  # one score per source position: (batch, num_queries, num_keys)
    return masked_softmax(scores, valid_lens)
'''


def _location_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch5.q1's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_LOCATION_SOLUTION, "location_weights", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch5.q1, each written as a learner writes it: the model answer with the learner's lines.

_CUT = "W_a[:num_keys]"
_MASKED = "return masked_softmax(scores, valid_lens)"

location_uncut = _location_with("location_uncut", (f"{_CUT}.T", "W_a.T"))
location_cut_after = _location_with(
    "location_cut_after",
    (f"{_CUT}.T", "W_a.T"),
    (_MASKED, "return F.softmax(scores, dim=-1)[..., :num_keys]"),
)
location_unmasked = _location_with("location_unmasked", (_MASKED, "return F.softmax(scores, dim=-1)"))
location_wrong_axis = _location_with("location_wrong_axis", (_MASKED, "return F.softmax(scores, dim=1)"))
location_last_rows = _location_with("location_last_rows", (_CUT, "W_a[-num_keys:]"))
location_first_query = _location_with("location_first_query", ("queries @", "queries[:, :1] @"))


LOCATION_WEIGHTS = Exercise(
    "ch5.q1",
    "location_weights",
    "Luong's location-based attention, masked",
    solution=_LOCATION_SOLUTION,
    hint=(
        (
            "What does a location score look at: the keys, or only the query? And how many source positions "
            "does a batch have, compared with the rows of W_a?"
        ),
        (
            "Luong's location-based score (eq. 8), a_t = softmax(W_a h_t): one score per source position "
            "from the query alone. W_a has a row for every position the model can handle (max_len); a batch "
            "has num_keys positions, the first num_keys rows. Positions beyond each valid length get weight "
            "0."
        ),
        (
            "Two lines: the scores are the queries times W_a's first num_keys rows, transposed, (batch, "
            "num_queries, num_keys); the weights are the masked softmax of those scores with valid_lens."
        ),
    ),
    covers="num_keys below and equal to max_len; valid_lens None, (batch_size,) and (batch_size, "
    "num_queries); "
    "rows of valid length 0; one key; float32 and float64; "
    "valid_lens None with num_keys below max_len; gradients",
    defaults={
        "seed": 0,
        "grad": False,
        "batch_size": 2,
        "num_queries": 3,
        "query_size": 4,
        "max_len": 7,
        "num_keys": 5,
        "dtype": "float32",
        "valid_lens": "random",
        "per_query": False,
    },
    specs=[
        {"seed": 101, "valid_lens": [3, 5]},
        {"seed": 102, "num_keys": 7, "valid_lens": None},
        {
            "seed": 103,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 4,
            "per_query": True,
            "valid_lens": [[1, 4], [0, 2], [4, 3]],
        },
        {"seed": 104, "num_queries": 1, "num_keys": 1, "valid_lens": [1, 0], "dtype": "float64"},
        {"seed": 194, "grad": True},
        {"seed": 105, "num_keys": 4, "valid_lens": None},
    ],
    build=_location_case,
    call=lambda answer, i: answer(i["queries"], i["W_a"], i["num_keys"], i["valid_lens"]),
    reference=_location_reference,
    mistakes=[
        Mistake(
            "The weights cover all max_len positions W_a can score; a batch has only num_keys of them: keep "
            "the first num_keys rows of W_a (`W_a[:num_keys]`).",
            wrong=location_uncut,
        ),
        Mistake(
            "You normalised over all max_len positions and cut afterwards, so each row's weights do not sum "
            "to 1 and padding is not masked. Cut W_a to num_keys rows first, then `masked_softmax`.",
            wrong=location_cut_after,
        ),
        Mistake(
            "The mask is not applied: positions beyond valid_lens get weight. Use `masked_softmax(scores, "
            "valid_lens)`.",
            wrong=location_unmasked,
        ),
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the source positions must sum "
            "to 1 (the last axis).",
            wrong=location_wrong_axis,
        ),
        Mistake(
            "You kept the last num_keys rows of W_a; row s scores source position s, so keep the first "
            "num_keys rows, `W_a[:num_keys]`.",
            wrong=location_last_rows,
        ),
        Mistake(
            "Only the first query was scored: queries is (batch_size, num_queries, query_size), and every "
            "query gets its own row of weights.",
            wrong=location_first_query,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"mat1 and mat2 shapes|size mismatch|must match the size",
            "W_a is (max_len, query_size), the weight of nn.Linear(query_size, max_len): the scores are "
            "`queries @ W_a.T`, one per position.",
        ),
    ],
    package=["attn_course.attention.scoring.location_scores"],
)
with_gradients(LOCATION_WEIGHTS, ("queries", "W_a"))


def _luong_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, s = spec_size(spec, "batch_size"), spec_size(spec, "num_keys")
    e, h, enc = (spec_size(spec, n) for n in ("embed_size", "num_hiddens", "enc_size"))
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    inputs = {
        "y_emb": seeded_randn((b, e), gen, dtype),
        "h_prev": seeded_randn((b, h), gen, dtype, 0.5),
        "feed": seeded_randn((b, h), gen, dtype, 0.5),
        "enc_outputs": seeded_randn((b, s, enc), gen, dtype),
        "valid_lens": lens,
        "W_a": seeded_randn((h, enc), gen, dtype, 0.5),
        "rnn": gru_params(gen, dtype, e + h, h),
        "W_c": seeded_randn((h, enc + h), gen, dtype, 1 / math.sqrt(enc + h)),
    }
    label = (
        f"batch {b}, embed_size {e}, num_hiddens {h}, {s} source positions of size {enc}, "
        f"valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, ("h_t", "the attentional state h̃_t", "the weights a_t"))


def _luong_parts(inputs: dict[str, Any]) -> tuple[nn.Module, nn.GRUCell, Any]:
    """The package's LuongAttention ("general") with the case's W_a, its memory, and the GRU cell."""
    h, enc = inputs["W_a"].shape
    attention = package_attention("LuongAttention", "general", h, enc).to(inputs["W_a"].dtype)
    attention.load_state_dict({"W_a.weight": inputs["W_a"]})
    memory = attention.prepare(inputs["enc_outputs"], inputs["enc_outputs"], inputs["valid_lens"])
    return attention, gru_cell(inputs["rnn"]), memory


def _luong_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    attention, rnn, memory = _luong_parts(inputs)
    return fn(inputs["y_emb"], inputs["h_prev"], inputs["feed"], memory, attention, rnn, inputs["W_c"])


class _CaseEmbedding(nn.Module):
    """In a decoder, in place of its embedding: every token's embedding is the case's `y_emb` (batch_size,
    embed_size), which the gradient reaches."""

    def __init__(self, y_emb: torch.Tensor):
        super().__init__()
        self.held = y_emb

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.held


def _luong_step(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of the package's LuongDecoder ("general" score, input feeding) fed the case: its y_emb,
    h_{t-1}, h̃_{t-1}, GRU weights, W_a and W_c. Returns h_t, h̃_t and a_t."""
    (h, enc), e = inputs["W_a"].shape, inputs["y_emb"].shape[-1]
    decoder = LuongDecoder(1, e, h, enc_size=enc, score="general", input_feeding=True)
    decoder = decoder.to(inputs["W_a"].dtype).eval()
    decoder.attention.load_state_dict({"W_a.weight": inputs["W_a"]})
    decoder.rnn.load_state_dict({f"{name}_l0": value for name, value in inputs["rnn"].items()})
    decoder.embedding, decoder.W_c = _CaseEmbedding(inputs["y_emb"]), _CaseWeight(inputs["W_c"])
    lens = inputs["valid_lens"]
    memory = decoder.attention.prepare(inputs["enc_outputs"], inputs["enc_outputs"], lens)
    state = DecoderState(
        hidden=inputs["h_prev"][None], memory=memory, feed=inputs["feed"], step=0, src_valid_lens=lens
    )
    _, state, weights = decoder.step(torch.zeros_like(lens), state)
    return state.hidden[-1], state.feed, weights


_LUONG_SOLUTION = '''
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    """One step of Luong's decoder with input feeding (Luong et al. 2015, sec. 3 and 3.3).

    h_t = GRU([e(y_{t-1}); h̃_{t-1}], h_{t-1}); c_t, a_t = attend(h_t); h̃_t = tanh(W_c [c_t; h_t]).
    y_emb: (batch_size, embed_size); h_prev: h_{t-1} (batch_size, num_hiddens); feed: h̃_{t-1} (batch_size,
    num_hiddens); memory, attention: a prepared LuongAttention; rnn: nn.GRUCell(embed_size + num_hiddens,
    num_hiddens); W_c: (num_hiddens, enc_size + num_hiddens).
    Returns: h_t and h̃_t (batch_size, num_hiddens), a_t (batch_size, num_keys).
    """
    h_t = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)               # input feeding: h̃_{t-1} joins the input
    context, weights = attention.attend(h_t[:, None, :], memory)       # Luong attends with the *current* h_t
    attentional = torch.tanh(torch.cat([context[:, 0], h_t], dim=-1) @ W_c.T)
    return h_t, attentional, weights[:, 0]
'''


def _luong_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch5.q2's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_LUONG_SOLUTION, "luong_step", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch5.q2, each written as a learner writes it: the model answer with the learner's lines.

_FED = "[y_emb, feed]"
_PAIR = "[context[:, 0], h_t]"
_ATTENTIONAL = f"torch.tanh(torch.cat({_PAIR}, dim=-1) @ W_c.T)"

luong_h_before_c = _luong_with("luong_h_before_c", (_PAIR, "[h_t, context[:, 0]]"))
luong_queries_with_h_prev = _luong_with(
    "luong_queries_with_h_prev", ("attention.attend(h_t[:, None, :]", "attention.attend(h_prev[:, None, :]")
)
luong_feeds_h_prev = _luong_with("luong_feeds_h_prev", (_FED, "[y_emb, h_prev]"))
luong_feed_first = _luong_with("luong_feed_first", (_FED, "[feed, y_emb]"))
luong_no_tanh = _luong_with("luong_no_tanh", (_ATTENTIONAL, f"torch.cat({_PAIR}, dim=-1) @ W_c.T"))
luong_swapped_states = _luong_with(
    "luong_swapped_states",
    ("return h_t, attentional, weights[:, 0]", "return attentional, h_t, weights[:, 0]"),
)
luong_attentional_from_h_prev = _luong_with(
    "luong_attentional_from_h_prev", (_PAIR, "[context[:, 0], h_prev]")
)


LUONG_STEP = Exercise(
    "ch5.q2",
    "luong_step",
    "Luong's attentional state with input feeding",
    solution=_LUONG_SOLUTION,
    hint=(
        (
            "Which comes first in Luong's step, the RNN or the attention, and which state does the "
            "attention query with?"
        ),
        (
            "Luong's order is not Bahdanau's: the RNN runs first, on the word's embedding together with the "
            "previous attentional state (input feeding); then attend with the new state h_t; then the "
            "attentional state tanh(W_c [c_t; h_t]), the context first in the concatenation."
        ),
        (
            "Three lines: the GRU cell on the embedding concatenated with feed, from h_prev; attend with "
            "the new h_t given a query axis; the attentional state is tanh of the context (its query axis "
            "dropped) concatenated with h_t, times W_c transposed."
        ),
    ),
    covers="enc_size different from num_hiddens; padded and length-1 sources; float32 and float64; gradients",
    defaults={
        "seed": 0,
        "grad": False,
        "batch_size": 2,
        "num_keys": 5,
        "embed_size": 3,
        "num_hiddens": 4,
        "enc_size": 6,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 111, "valid_lens": [5, 2]},
        {"seed": 112, "batch_size": 3, "num_keys": 1, "valid_lens": [1, 1, 1]},
        {
            "seed": 113,
            "num_keys": 6,
            "embed_size": 5,
            "num_hiddens": 5,
            "enc_size": 5,
            "valid_lens": [3, 6],
            "dtype": "float64",
        },
        {"seed": 204, "grad": True},
    ],
    build=_luong_case,
    call=_luong_call,
    reference=_luong_step,
    mistakes=[
        Mistake(
            "h̃_t = tanh(W_c [c_t; h_t]): the context comes first. You built [h_t; c_t], so the halves of "
            "W_c meet the wrong vectors.",
            wrong=luong_h_before_c,
        ),
        Mistake(
            "The attention used h_{t-1} where Luong's decoder needs the current state h_t (that is "
            "Bahdanau's order): run the GRU first, then attend with its output.",
            wrong=luong_queries_with_h_prev,
        ),
        Mistake(
            "Input feeding feeds the previous *attentional* state h̃_{t-1} (`feed`), not the previous "
            "hidden state h_{t-1}.",
            wrong=luong_feeds_h_prev,
        ),
        Mistake(
            "The GRU's input is [e(y_{t-1}); h̃_{t-1}] -- the embedding first.",
            wrong=luong_feed_first,
        ),
        Mistake("tanh is missing: h̃_t = tanh(W_c [c_t; h_t]).", wrong=luong_no_tanh),
        Mistake(
            "h_t and h̃_t are swapped: return `(h_t, h̃_t, a_t)`, the GRU's new state first, then the "
            "attentional state.",
            wrong=luong_swapped_states,
        ),
        Mistake(
            "h̃_t was built from the previous state h_{t-1}; it combines the context with the new state: "
            "tanh(W_c [c_t; h_t]).",
            wrong=luong_attentional_from_h_prev,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"queries has shape \(\d+, \d+\), expected",
            "`attention.attend` wants queries (batch_size, num_queries, query_size): give h_t a query "
            "axis, `h_t[:, None, :]`.",
        ),
        ErrorHint(
            r"input has inconsistent input_size|Expected hidden size|size mismatch|mat1 and mat2",
            "Check the sizes: the GRU takes [e(y_{t-1}); h̃_{t-1}] (embed_size + num_hiddens), and W_c "
            "takes [c_t; h_t] (enc_size + num_hiddens) with the context's query axis squeezed "
            "(`context[:, 0]`). W_c is (num_hiddens, enc_size + num_hiddens): apply it as `... @ W_c.T`.",
        ),
    ],
    package=["attn_course.models.decoders.LuongDecoder"],
)
with_gradients(LUONG_STEP, ("y_emb", "h_prev", "feed", "enc_outputs", "W_c"))


def _local_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, q, s = (spec_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    window = spec_size(spec, "window")
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    # p_t = S_i * sigmoid(...): a real position in [0, S_i), as the local-p decoder predicts it.
    centres = lens[:, None].to(dtype) * torch.sigmoid(seeded_randn((b, q), gen, dtype, 2.0))
    if spec["centres"] != "random":  # given centres, e.g. whole numbers that put a window edge on a position
        centres = torch.tensor(spec["centres"], dtype=dtype)
        if tuple(centres.shape) != (b, q):
            raise ValueError(f"centres must have shape {(b, q)}, got {spec['centres']!r}")
    inputs = {
        "scores": seeded_randn((b, q, s), gen, dtype, spec["scale"]),
        "centres": centres,
        "window": window,
        "valid_lens": lens,
    }
    label = (
        f"scores {(b, q, s)}, centres {[[round(c, 2) for c in row] for row in centres.tolist()]}, window "
        f"D = {window}, valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, "the weights")


class _CaseScores(nn.Module):
    """In a LuongDecoder, in place of its attention layer: the scores are a case's own (no dropout)."""

    def __init__(self, scores: torch.Tensor):
        super().__init__()
        self.given, self.dropout = scores, nn.Identity()

    def scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        return self.given


class _CaseWeight(nn.Module):
    """In a LuongDecoder, in place of a bias-free nn.Linear: its weight is a case's tensor, which the
    gradient reaches (W_p, v_p)."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.held = weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.held)


class _CaseDecoder(LuongDecoder):
    """The package's local-p LuongDecoder fed a case: its scores, its window, its W_p and v_p (ch5.q4) or
    its centres p_t (ch5.q3). `align`, Luong et al.'s eqs. 9-10, is the package's own: the checks' reference
    for local-p is the decoder's local-p."""

    def __init__(self, inputs: dict[str, Any]):
        queries = inputs.get("queries")
        num_hiddens = 1 if queries is None else queries.shape[-1]
        super().__init__(1, 1, num_hiddens, enc_size=1, alignment="local-p", window=inputs["window"])
        self.eval()
        self.attention = _CaseScores(inputs["scores"])
        if queries is not None:
            self.W_p, self.v_p = _CaseWeight(inputs["W_p"]), _CaseWeight(inputs["v_p"])
        self.given_centres = None if queries is not None else inputs["centres"]

    def centres(self, queries: torch.Tensor, first_step: int, src_valid_lens: torch.Tensor) -> torch.Tensor:
        if self.given_centres is not None:
            return self.given_centres
        return super().centres(queries, first_step, src_valid_lens)


def _local_p(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The package's local-p on a case: the centres p_t (batch_size, num_queries) and the weights
    (batch_size, num_queries, num_keys)."""
    scores, lens = inputs["scores"], inputs["valid_lens"]
    queries = inputs.get("queries", scores)  # ch5.q3 gives no queries: align then reads only the scores
    values = scores.new_zeros(*scores.shape[::2], 1)  # align's context is not judged here
    memory = Memory(keys=values, values=values, valid_lens=lens, projected_keys=None)
    decoder = _CaseDecoder(inputs)
    return decoder.centres(queries, 0, lens), decoder.align(queries, memory, 0)[1]


_LOCAL_SOLUTION = '''
def local_p_weights(scores, centres, window, valid_lens):
    """Luong's local-p weights (Luong et al. 2015, sec. 3.2, eq. 10):
    a_t(s) = align(h_t, h̄_s) * exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2,
    where align is the softmax of the scores inside the window [p_t - D, p_t + D], cut to the real positions,
    and 0 outside. As in the paper, the result is not renormalised.

    scores: (batch_size, num_queries, num_keys); centres: p_t (batch_size, num_queries), real-valued;
    window: D, an int; valid_lens: (batch_size,).
    Returns: weights (batch_size, num_queries, num_keys).
    """
    positions = torch.arange(scores.shape[-1], device=scores.device, dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]             # s - p_t
    outside = (distance.abs() > window) | (positions >= valid_lens[:, None, None])
    filled = scores.masked_fill(outside, torch.finfo(scores.dtype).min)
    align = F.softmax(filled, dim=-1).masked_fill(outside, 0.0)
    sigma = window / 2
    return align * torch.exp(-distance**2 / (2 * sigma**2))
'''


def _local_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch5.q3's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_LOCAL_SOLUTION, "local_p_weights", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch5.q3 and ch5.q4, each written as a learner writes it: the model answer with the
# learner's lines (each edit below applies to both answers).

_WINDOW = "(distance.abs() > window) | "
_PAST_END = " | (positions >= valid_lens[:, None, None])"
_SIGMA = "sigma = window / 2"
_GAUSSIAN = "align * torch.exp(-distance**2 / (2 * sigma**2))"
_CENTRES = "- centres[:, :, None]"

local_sigma_d = _local_with("local_sigma_d", (_SIGMA, "sigma = window"))
local_no_two = _local_with("local_no_two", ("(2 * sigma**2)", "sigma**2"))
local_no_window = _local_with("local_no_window", (_WINDOW, ""))
local_window_past_end = _local_with("local_window_past_end", (_PAST_END, ""))
local_no_gaussian = _local_with("local_no_gaussian", (_GAUSSIAN, "align"))
local_renormalised = _local_with(
    "local_renormalised",
    (f"return {_GAUSSIAN}", f"weights = {_GAUSSIAN}\n    return weights / weights.sum(-1, keepdim=True)"),
)
local_rounded = _local_with("local_rounded", (_CENTRES, "- centres.round()[:, :, None]"))
local_window_after_softmax = _local_with(
    "local_window_after_softmax",
    ("scores.masked_fill(outside,", "scores.masked_fill(positions >= valid_lens[:, None, None],"),
)
local_edges_left_out = _local_with(
    "local_edges_left_out", ("distance.abs() > window", "distance.abs() >= window")
)
local_unstabilised = _local_with(
    "local_unstabilised",
    (
        "align = F.softmax(filled, dim=-1).masked_fill(outside, 0.0)",
        "e = torch.exp(scores) * ~outside\n    align = e / e.sum(-1, keepdim=True).clamp_min(1e-30)",
    ),
)


LOCAL_P_WEIGHTS = Exercise(
    "ch5.q3",
    "local_p_weights",
    "Local-p attention: a window and a Gaussian around p_t",
    solution=_LOCAL_SOLUTION,
    hint=(
        (
            "How far is each source position from a query's centre p_t, and which positions may get any "
            "weight at all?"
        ),
        (
            "Luong's local-p weights (eq. 10): align, the softmax of the scores inside the window [p_t - D, "
            "p_t + D] (edges included) and inside the sentence, 0 elsewhere; then multiplied by a Gaussian "
            "of the distance s - p_t, sigma = D / 2, p_t kept real-valued. Luong et al. do not renormalise "
            "afterwards."
        ),
        (
            "The lines: the distance from every position to every centre, by broadcasting; the mask of "
            "positions farther than D or at or beyond the valid length; the softmax of the scores filled "
            "there with the dtype's smallest number, zeroed there; times the Gaussian of the distance."
        ),
    ),
    covers="windows of 1, 2 and 3; windows that reach past the start and the end of the sentence; padded and "
    "length-1 sources; float32 and float64; "
    "window edges exactly on a position; large scores; gradients with respect to the scores and p_t",
    defaults={
        "seed": 0,
        "grad": False,
        "batch_size": 2,
        "num_queries": 3,
        "num_keys": 9,
        "window": 2,
        "dtype": "float32",
        "valid_lens": "random",
        "centres": "random",
        "scale": 2.0,
    },
    specs=[
        {"seed": 121, "valid_lens": [9, 6]},
        {"seed": 122, "window": 1, "valid_lens": [4, 9]},
        {
            "seed": 123,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 12,
            "window": 3,
            "valid_lens": [12, 7, 10],
            "dtype": "float64",
        },
        {"seed": 124, "num_keys": 1, "window": 1, "valid_lens": [1, 1]},
        {"seed": 214, "grad": True},
        {"seed": 125, "num_queries": 2, "centres": [[3.0, 5.0], [2.0, 4.5]], "valid_lens": [9, 7]},
        {"seed": 126, "scale": 100.0, "valid_lens": [8, 9]},
    ],
    build=_local_case,
    call=lambda answer, i: answer(i["scores"], i["centres"], i["window"], i["valid_lens"]),
    reference=lambda i: _local_p(i)[1],
    mistakes=[
        Mistake(
            "sigma is D / 2 (Luong et al. set it empirically); you used sigma = D, a Gaussian twice as wide.",
            wrong=local_sigma_d,
        ),
        Mistake(
            "The Gaussian's exponent is -(s - p_t)^2 / (2 sigma^2): the factor 2 is missing.",
            wrong=local_no_two,
        ),
        Mistake(
            "There is no window: positions further than D from p_t must get weight 0 (mask them before the "
            "softmax), the Gaussian only favours the centre within it.",
            wrong=local_no_window,
        ),
        Mistake(
            "The window reaches past the end of the sentence: positions at or beyond valid_len are padding "
            "and must be masked too.",
            wrong=local_window_past_end,
        ),
        Mistake(
            "The Gaussian is missing: that is local-m's window alone; local-p multiplies the windowed "
            "softmax by exp(-(s - p_t)^2 / (2 sigma^2)).",
            wrong=local_no_gaussian,
        ),
        Mistake(
            "You renormalised after the Gaussian; Luong et al. do not, so the weights sum to at most 1.",
            wrong=local_renormalised,
        ),
        Mistake(
            "The softmax ran over every position of the sentence, and the window was applied after it: "
            "align is the softmax of the scores inside the window only, so mask the positions outside "
            "[p_t - D, p_t + D] *before* the softmax.",
            wrong=local_window_after_softmax,
        ),
        Mistake(
            "The window's edges are left out: the window is [p_t - D, p_t + D], edges included, so a "
            "position exactly D from p_t is inside (`<= D`, not `< D`).",
            wrong=local_edges_left_out,
        ),
        Mistake(
            "Large scores overflow: `torch.exp` of a score above about 88 (float32) is inf, and inf / inf is "
            "NaN. Subtract the max before `exp`, or use `F.softmax` on the filled scores.",
            wrong=local_unstabilised,
        ),
        Mistake(
            "p_t was rounded to an integer: it is real-valued, and both the window and the Gaussian use "
            "it as it is.",
            wrong=local_rounded,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor",
            "Broadcast the distances: positions (1, 1, num_keys) minus centres (batch_size, num_queries, "
            "1) gives (batch_size, num_queries, num_keys).",
        ),
    ],
    package=["attn_course.models.decoders.LuongDecoder"],
)
with_gradients(LOCAL_P_WEIGHTS, ("scores", "centres"))


def _predict_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, q, s, h = (spec_size(spec, n) for n in ("batch_size", "num_queries", "num_keys", "num_hiddens"))
    window, centred = spec_size(spec, "window"), spec_size(spec, "centred_queries", low=0)
    if centred > q:
        raise ValueError(f"centred_queries must be <= num_queries = {q}, got {centred}")
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    queries = seeded_randn((b, q, h), gen, dtype)
    # A zero state h_t gives v_pᵀ tanh(0) = 0, sigmoid(0) = 1/2, p_t = S_i / 2: an integer centre for an even
    # S_i, so that positions p_t - D and p_t + D fall exactly on the window's edges.
    queries[:, :centred] = 0
    inputs = {
        "queries": queries,
        "scores": seeded_randn((b, q, s), gen, dtype, 2.0),
        "W_p": seeded_randn((h, h), gen, dtype, 1.0),
        "v_p": seeded_randn((1, h), gen, dtype, 1.5),
        "window": window,
        "valid_lens": lens,
    }
    label = (
        f"queries {(b, q, h)} (the first {centred} of each sentence all zeros, so p_t = S_i / 2), scores "
        f"{(b, q, s)}, window D = {window}, valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, ("the centres p_t", "the weights"))


_LOCAL_P_SOLUTION = '''
def local_p_attention(queries, scores, W_p, v_p, window, valid_lens):
    """Luong's local-p alignment (Luong et al. 2015, sec. 3.2): the predicted centre (eq. 9)
    p_t = S_i * sigmoid(v_pᵀ tanh(W_p h_t)), S_i the valid length of sentence i, and the weights (eq. 10)
    a_t(s) = align(h_t, h̄_s) * exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2, align being the softmax of the
    scores of the positions s with |s - p_t| <= D and s < S_i (0 elsewhere). Not renormalised.

    queries: h_t (batch_size, num_queries, num_hiddens); scores: (batch_size, num_queries, num_keys);
    W_p: (num_hiddens, num_hiddens) and v_p: (1, num_hiddens), the weights of bias-free nn.Linear layers;
    window: D, an int; valid_lens: (batch_size,), each in [1, num_keys].
    Returns: centres p_t (batch_size, num_queries), real-valued; weights (batch_size, num_queries, num_keys).
    """
    S = valid_lens.to(queries.dtype)[:, None]                                  # each sentence's own length
    centres = S * torch.sigmoid(torch.tanh(queries @ W_p.T) @ v_p.T).squeeze(-1)
    positions = torch.arange(scores.shape[-1], device=scores.device, dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]                  # s - p_t
    outside = (distance.abs() > window) | (positions >= valid_lens[:, None, None])
    filled = scores.masked_fill(outside, torch.finfo(scores.dtype).min)
    align = F.softmax(filled, dim=-1).masked_fill(outside, 0.0)                # softmax inside the window
    sigma = window / 2
    return centres, align * torch.exp(-distance**2 / (2 * sigma**2))          # then the Gaussian
'''


def _local_p_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch5.q4's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_LOCAL_P_SOLUTION, "local_p_attention", *edits, namespace=_NAMESPACE, rename=name)


_S = "S = valid_lens.to(queries.dtype)[:, None]"
_FILLED = "filled = scores.masked_fill("
_GAUSSIAN_TERM = "torch.exp(-distance**2 / (2 * (window / 2) ** 2))"

local_p_padded_width = _local_p_with("local_p_padded_width", (_S, "S = scores.shape[-1]"))
local_p_length_minus_one = _local_p_with(
    "local_p_length_minus_one", (_S, "S = (valid_lens - 1).to(queries.dtype)[:, None]")
)
local_p_no_tanh = _local_p_with("local_p_no_tanh", ("torch.tanh(queries @ W_p.T)", "(queries @ W_p.T)"))
local_p_untransposed_W_p = _local_p_with("local_p_untransposed_W_p", ("queries @ W_p.T", "queries @ W_p"))
local_p_sigma_d = _local_p_with("local_p_sigma_d", (_SIGMA, "sigma = window"))
local_p_no_window = _local_p_with("local_p_no_window", (_WINDOW, ""))
local_p_window_past_end = _local_p_with("local_p_window_past_end", (_PAST_END, ""))
local_p_gaussian_added_to_scores = _local_p_with(
    "local_p_gaussian_added_to_scores",
    (_FILLED, "filled = (scores - distance**2 / (2 * (window / 2) ** 2)).masked_fill("),
    (_GAUSSIAN, "align"),
)
local_p_gaussian_times_scores = _local_p_with(
    "local_p_gaussian_times_scores",
    (_FILLED, f"filled = (scores * {_GAUSSIAN_TERM}).masked_fill("),
    (_GAUSSIAN, "align"),
)
local_p_open_window = _local_p_with(
    "local_p_open_window", ("distance.abs() > window", "distance.abs() >= window")
)
local_p_centre_detached = _local_p_with(
    "local_p_centre_detached", ("@ v_p.T).squeeze(-1)", "@ v_p.T).squeeze(-1).detach()")
)
local_p_centre_rounded = _local_p_with("local_p_centre_rounded", (_CENTRES, "- centres.round()[:, :, None]"))


_GAUSSIAN_BEFORE = (
    "The weights were renormalised after the Gaussian (adding -(s - p_t)^2 / (2 sigma^2) to the scores "
    "before the softmax does the same), or the Gaussian scaled the scores. Eq. 10 multiplies "
    "align -- the softmax of the scores inside the window -- by exp(-(s - p_t)^2 / (2 sigma^2)) *after* it: "
    "the weights then sum to at most 1."
)

LOCAL_P_ATTENTION = Exercise(
    "ch5.q4",
    "local_p_attention",
    "Local-p attention: predict p_t, then weigh the window",
    solution=_LOCAL_P_SOLUTION,
    hint=(
        (
            "What length S does p_t = S * sigmoid(...) stretch over for a sentence shorter than the batch's "
            "padded width?"
        ),
        (
            "Local-p predicts its centre (eq. 9): the score v_pᵀ tanh(W_p h_t), one number per query, "
            "squashed into (0, 1) by a sigmoid and stretched to the sentence, whose length is its valid "
            "length, not the batch's padded width. Then the weights as in Q3: window and padding masked "
            "before the softmax, the Gaussian with sigma = D / 2 after it."
        ),
        (
            "The centre line: each sentence's valid length (a float, with a query axis) times the sigmoid "
            "of v_p applied to tanh of W_p applied to the queries (each as nn.Linear applies its weight, "
            "transposed), its last axis dropped; the lines after it are Q3's, around these centres."
        ),
    ),
    covers="p_t from each sentence's own length; window edges hit exactly (p_t = S_i / 2); windows wider "
    "than short sentences; several queries per call; W_p applied as nn.Linear does; float32 and float64; "
    "gradients reaching W_p, v_p, the queries and the scores",
    defaults={
        "seed": 0,
        "batch_size": 3,
        "num_queries": 3,
        "num_keys": 10,
        "num_hiddens": 4,
        "window": 2,
        "centred_queries": 1,
        "dtype": "float32",
        "valid_lens": "random",
        "grad": False,
    },
    specs=[
        {"seed": 131, "valid_lens": [6, 8, 4]},
        {"seed": 132, "num_keys": 7, "window": 3, "valid_lens": [2, 1, 4], "centred_queries": 2},
        {
            "seed": 133,
            "batch_size": 2,
            "num_queries": 4,
            "num_keys": 12,
            "num_hiddens": 5,
            "window": 1,
            "valid_lens": [10, 6],
            "dtype": "float64",
        },
        {"seed": 134, "batch_size": 2, "num_queries": 2, "window": 4, "valid_lens": [10, 8]},
        {"seed": 135, "batch_size": 2, "num_queries": 2, "valid_lens": [7, 9], "grad": True},
    ],
    build=_predict_case,
    call=lambda answer, i: answer(
        i["queries"], i["scores"], i["W_p"], i["v_p"], i["window"], i["valid_lens"]
    ),
    reference=_local_p,
    mistakes=[
        Mistake(
            "S in p_t = S * sigmoid(...) is each sentence's own valid length S_i, not the batch's padded "
            "width num_keys: otherwise a short sentence's window is centred on padding.",
            wrong=local_p_padded_width,
        ),
        Mistake(
            "You used S_i - 1; the course takes p_t = S_i * sigmoid(...) as Luong et al. write it (p_t in "
            "[0, S_i)).",
            wrong=local_p_length_minus_one,
        ),
        Mistake(
            "tanh is missing: p_t = S_i * sigmoid(v_pᵀ tanh(W_p h_t)).",
            wrong=local_p_no_tanh,
        ),
        Mistake(
            "W_p is the weight of nn.Linear(num_hiddens, num_hiddens): W_p h_t is `queries @ W_p.T`, "
            "not `queries @ W_p`.",
            wrong=local_p_untransposed_W_p,
        ),
        Mistake(
            "sigma is D / 2 (Luong et al. set it empirically); you used sigma = D, a Gaussian twice as wide.",
            wrong=local_p_sigma_d,
        ),
        Mistake(
            "There is no window: positions further than D from p_t must get weight 0 (mask them before the "
            "softmax), the Gaussian only favours the centre within it.",
            wrong=local_p_no_window,
        ),
        Mistake(
            "The window is not clipped to the sentence: positions at or beyond valid_len are padding and "
            "must be masked too, even when p_t + D reaches past them.",
            wrong=local_p_window_past_end,
        ),
        Mistake(_GAUSSIAN_BEFORE, wrong=local_p_gaussian_added_to_scores),
        Mistake(_GAUSSIAN_BEFORE, wrong=local_p_gaussian_times_scores),
        Mistake(
            "The window's edges are left out: the window is [p_t - D, p_t + D], so a position exactly D from "
            "p_t is inside (mask |s - p_t| > D, not >= D).",
            wrong=local_p_open_window,
        ),
        Mistake(
            "No gradient reaches W_p and v_p: the centre p_t was detached (`.detach()`, `torch.no_grad()`, "
            "`.item()`), so the position predictor never learns where to look. Keep p_t in the graph: the "
            "Gaussian's exp(-(s - p_t)^2 / (2 sigma^2)) is what carries the gradient back to W_p and v_p.",
            wrong=local_p_centre_detached,
        ),
        Mistake(
            "p_t was rounded to an integer: it is real-valued, and both the window and the Gaussian use it "
            "as it is.",
            wrong=local_p_centre_rounded,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor|mat1 and mat2 shapes",
            "Mind the shapes: v_pᵀ tanh(W_p h_t) is (batch_size, num_queries, 1) -- squeeze the last axis "
            "for p_t -- and the lengths need a query axis, `valid_lens[:, None]`, to scale it.",
        ),
    ],
    package=["attn_course.models.decoders.LuongDecoder"],
)
with_gradients(LOCAL_P_ATTENTION, ("queries", "scores", "W_p", "v_p"))
