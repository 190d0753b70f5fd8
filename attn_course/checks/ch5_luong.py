"""Chapter 5's exercises, Luong's attention: location-based weights (ch5.q1), one decoder step with input
feeding (ch5.q2), local-p weights (ch5.q3), a window and a Gaussian around the predicted position p_t, and
local-p attention from the decoder state (ch5.q4), which predicts p_t first (eq. 9).

The step's cases are built from seeded GRU weights and the package's `LuongAttention`; its reference is the
step written out here, next to the known-wrong variants that name the learner's likely mistake.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import (
    finite_masked_softmax,
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


def _location_reference(inputs: dict[str, Any]) -> torch.Tensor:
    scores = resolve("attn_course.attention.scoring.location_scores")(
        inputs["queries"], inputs["W_a"], inputs["num_keys"]
    )
    return resolve("attn_course.attention.masking.masked_softmax")(scores, inputs["valid_lens"])


def _location_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> torch.Tensor:
        scores = inputs["queries"] @ inputs["W_a"].T  # (batch, num_queries, max_len)
        k, lens = inputs["num_keys"], inputs["valid_lens"]
        if kind == "uncut":
            return finite_masked_softmax(scores, lens)
        if kind == "cut_after":
            return F.softmax(scores, -1)[..., :k]
        scores = scores[..., :k]
        if kind == "unmasked":
            return F.softmax(scores, -1)
        if kind == "last_rows":
            return finite_masked_softmax(inputs["queries"] @ inputs["W_a"][-k:].T, lens)
        if kind == "first_query":
            return None if scores.shape[1] == 1 else finite_masked_softmax(scores[:, :1], lens)
        return finite_masked_softmax(scores, lens, dim=1)  # wrong axis

    return variant


LOCATION_WEIGHTS = Exercise(
    "ch5.q1",
    "location_weights",
    "Luong's location-based attention, masked",
    solution='''
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
''',
    hint="The location score ignores the keys: one score per source position, from the query alone through "
    "W_a. W_a has a row for every position the model can handle, but a batch has only num_keys "
    "positions: use just those. Positions beyond each valid length must get weight 0.",
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
            _location_variant("uncut"),
        ),
        Mistake(
            "You normalised over all max_len positions and cut afterwards, so each row's weights do not sum "
            "to 1 and padding is not masked. Cut W_a to num_keys rows first, then `masked_softmax`.",
            _location_variant("cut_after"),
        ),
        Mistake(
            "The mask is not applied: positions beyond valid_lens get weight. Use `masked_softmax(scores, "
            "valid_lens)`.",
            _location_variant("unmasked"),
        ),
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the source positions must sum "
            "to 1 (the last axis).",
            _location_variant("wrong_axis"),
        ),
        Mistake(
            "You kept the last num_keys rows of W_a; row s scores source position s, so keep the first "
            "num_keys rows, `W_a[:num_keys]`.",
            _location_variant("last_rows"),
        ),
        Mistake(
            "Only the first query was scored: queries is (batch_size, num_queries, query_size), and every "
            "query gets its own row of weights.",
            _location_variant("first_query"),
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


def _luong_step(
    inputs: dict[str, Any],
    *,
    query: str = "current",
    feed: str = "feed",
    order: str = "ch",
    tanh: bool = True,
    input_order: str = "yf",
    combine: str = "current",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of Luong's decoder with input feeding, and its known-wrong variants."""
    attention, rnn, memory = _luong_parts(inputs)
    y, h_prev = inputs["y_emb"], inputs["h_prev"]
    fed = inputs["feed"] if feed == "feed" else h_prev
    h_t = rnn(torch.cat([y, fed] if input_order == "yf" else [fed, y], -1), h_prev)
    context, weights = attention.attend((h_t if query == "current" else h_prev)[:, None], memory)
    h = h_t if combine == "current" else h_prev
    pair = [context[:, 0], h] if order == "ch" else [h, context[:, 0]]
    attentional = torch.cat(pair, -1) @ inputs["W_c"].T
    return h_t, torch.tanh(attentional) if tanh else attentional, weights[:, 0]


LUONG_STEP = Exercise(
    "ch5.q2",
    "luong_step",
    "Luong's attentional state with input feeding",
    solution='''
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
''',
    hint="Luong's order is not Bahdanau's: the RNN runs first, on the word's embedding together with the "
    "previous attentional state (input feeding); then attend with the new state h_t; then the "
    "attentional state tanh(W_c [c_t; h_t]), the context first in the concatenation.",
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
            lambda i: _luong_step(i, order="hc"),
        ),
        Mistake(
            "The attention used h_{t-1} where Luong's decoder needs the current state h_t (that is "
            "Bahdanau's order): run the GRU first, then attend with its output.",
            lambda i: _luong_step(i, query="previous"),
        ),
        Mistake(
            "Input feeding feeds the previous *attentional* state h̃_{t-1} (`feed`), not the previous "
            "hidden state h_{t-1}.",
            lambda i: _luong_step(i, feed="h_prev"),
        ),
        Mistake(
            "The GRU's input is [e(y_{t-1}); h̃_{t-1}] -- the embedding first.",
            lambda i: _luong_step(i, input_order="fy"),
        ),
        Mistake("tanh is missing: h̃_t = tanh(W_c [c_t; h_t]).", lambda i: _luong_step(i, tanh=False)),
        Mistake(
            "h_t and h̃_t are swapped: return `(h_t, h̃_t, a_t)`, the GRU's new state first, then the "
            "attentional state.",
            lambda i: (lambda h, att, a: (att, h, a))(*_luong_step(i)),
        ),
        Mistake(
            "h̃_t was built from the previous state h_{t-1}; it combines the context with the new state: "
            "tanh(W_c [c_t; h_t]).",
            lambda i: _luong_step(i, combine="previous"),
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


def _local_weights(
    inputs: dict[str, Any],
    *,
    sigma: str = "half",
    cut: str = "both",
    gaussian: bool = True,
    renormalise: bool = False,
    two: bool = True,
    rounded: bool = False,
    edges: bool = True,
    stable: bool = True,
    window_after: bool = False,
) -> torch.Tensor:
    """Local-p weights as LuongDecoder.align computes them, and known-wrong variants."""
    scores, centres, window, lens = (
        inputs["scores"],
        inputs["centres"],
        inputs["window"],
        inputs["valid_lens"],
    )
    if rounded:
        centres = centres.round()
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None] - centres[..., None]  # s - p_t: (batch, queries, keys)
    padding = positions[None, None] >= lens[:, None, None]
    beyond = distance.abs() > window if edges else distance.abs() >= window
    outside = {
        "both": beyond | padding,
        "padding": padding.expand_as(distance),
        "window": beyond,
    }[cut]
    if window_after:  # the softmax over every real position, the window applied to its output
        weights = F.softmax(scores.masked_fill(padding, torch.finfo(scores.dtype).min), -1)
        weights = weights.masked_fill(outside, 0.0)
    elif stable:
        weights = F.softmax(scores.masked_fill(outside, torch.finfo(scores.dtype).min), -1)
        weights = weights.masked_fill(outside, 0.0)
    else:  # exp(score) * mask: inf where a score is large, NaN after the division
        exp = torch.exp(scores) * ~outside
        weights = exp / exp.sum(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
    if gaussian:
        s = window / 2 if sigma == "half" else window
        weights = weights * torch.exp(-distance.square() / ((2 if two else 1) * s**2))
    if renormalise:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights


LOCAL_P_WEIGHTS = Exercise(
    "ch5.q3",
    "local_p_weights",
    "Local-p attention: a window and a Gaussian around p_t",
    solution='''
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
''',
    hint="Work with the distance s - p_t between every source position and every query's centre (broadcast "
    "the positions against the centres). Positions outside the window and padding positions get no "
    "weight: mask both before the softmax. Then scale the weights by the Gaussian of the distance, "
    "with sigma = D / 2 and p_t kept real-valued; Luong et al. do not renormalise afterwards.",
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
    reference=_local_weights,
    mistakes=[
        Mistake(
            "sigma is D / 2 (Luong et al. set it empirically); you used sigma = D, a Gaussian twice as wide.",
            lambda i: _local_weights(i, sigma="full"),
        ),
        Mistake(
            "The Gaussian's exponent is -(s - p_t)^2 / (2 sigma^2): the factor 2 is missing.",
            lambda i: _local_weights(i, two=False),
        ),
        Mistake(
            "There is no window: positions further than D from p_t must get weight 0 (mask them before the "
            "softmax), the Gaussian only favours the centre within it.",
            lambda i: _local_weights(i, cut="padding"),
        ),
        Mistake(
            "The window reaches past the end of the sentence: positions at or beyond valid_len are padding "
            "and must be masked too.",
            lambda i: _local_weights(i, cut="window"),
        ),
        Mistake(
            "The Gaussian is missing: that is local-m's window alone; local-p multiplies the windowed "
            "softmax by exp(-(s - p_t)^2 / (2 sigma^2)).",
            lambda i: _local_weights(i, gaussian=False),
        ),
        Mistake(
            "You renormalised after the Gaussian; Luong et al. do not, so the weights sum to at most 1.",
            lambda i: _local_weights(i, renormalise=True),
        ),
        Mistake(
            "The softmax ran over every position of the sentence, and the window was applied after it: "
            "align is the softmax of the scores inside the window only, so mask the positions outside "
            "[p_t - D, p_t + D] *before* the softmax.",
            lambda i: _local_weights(i, window_after=True),
        ),
        Mistake(
            "The window's edges are left out: the window is [p_t - D, p_t + D], edges included, so a "
            "position exactly D from p_t is inside (`<= D`, not `< D`).",
            lambda i: _local_weights(i, edges=False),
        ),
        Mistake(
            "Large scores overflow: `torch.exp` of a score above about 88 (float32) is inf, and inf / inf is "
            "NaN. Subtract the max before `exp`, or use `F.softmax` on the filled scores.",
            lambda i: _local_weights(i, stable=False),
        ),
        Mistake(
            "p_t was rounded to an integer: it is real-valued, and both the window and the Gaussian use "
            "it as it is.",
            lambda i: _local_weights(i, rounded=True),
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


def _predicted(
    inputs: dict[str, Any],
    *,
    length: str = "valid",
    tanh: bool = True,
    transposed: bool = False,
    gaussian: str = "after",
    edges: bool = True,
    detached: bool = False,
    **weights: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local-p's centres (eq. 9) and weights (eq. 10) as LuongDecoder computes them, and wrong variants."""
    queries, W_p, v_p, lens = inputs["queries"], inputs["W_p"], inputs["v_p"], inputs["valid_lens"]
    hidden = queries @ (W_p if transposed else W_p.T)
    S = {
        "valid": lens.to(queries.dtype)[:, None],
        "padded": torch.full_like(lens, inputs["scores"].shape[-1]).to(queries.dtype)[:, None],
        "minus_one": (lens - 1).to(queries.dtype)[:, None],
    }[length]
    centres = S * torch.sigmoid(((torch.tanh(hidden) if tanh else hidden) @ v_p.T).squeeze(-1))
    centres = centres.detach() if detached else centres
    local = dict(inputs, centres=centres)
    if gaussian == "after" and edges:
        return centres, _local_weights(local, **weights)
    scores, window = inputs["scores"], inputs["window"]
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None] - centres[..., None]
    outside = (distance.abs() >= window if not edges else distance.abs() > window) | (
        positions[None, None] >= lens[:, None, None]
    )
    log_gaussian = -distance.square() / (2 * (window / 2) ** 2)
    if gaussian == "after":  # the window without its edges
        align = F.softmax(scores.masked_fill(outside, torch.finfo(scores.dtype).min), -1).masked_fill(
            outside, 0
        )
        return centres, align * log_gaussian.exp()
    before = scores + log_gaussian if gaussian == "added" else scores * log_gaussian.exp()
    return centres, F.softmax(before.masked_fill(outside, torch.finfo(scores.dtype).min), -1).masked_fill(
        outside, 0
    )


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
    solution='''
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
''',
    hint="First the centre: the score v_pᵀ tanh(W_p h_t) is one number per query; squash it into (0, 1) with "
    "a sigmoid and stretch it to the sentence, whose length is its *valid* length, not the batch's padded "
    "width. Then the weights, as in Q3: the window [p_t - D, p_t + D] (edges included) and the padding are "
    "masked before the softmax, and only then does the Gaussian with sigma = D / 2 multiply the result.",
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
    reference=_predicted,
    mistakes=[
        Mistake(
            "S in p_t = S * sigmoid(...) is each sentence's own valid length S_i, not the batch's padded "
            "width num_keys: otherwise a short sentence's window is centred on padding.",
            lambda i: _predicted(i, length="padded"),
        ),
        Mistake(
            "You used S_i - 1; the course takes p_t = S_i * sigmoid(...) as Luong et al. write it (p_t in "
            "[0, S_i)).",
            lambda i: _predicted(i, length="minus_one"),
        ),
        Mistake(
            "tanh is missing: p_t = S_i * sigmoid(v_pᵀ tanh(W_p h_t)).",
            lambda i: _predicted(i, tanh=False),
        ),
        Mistake(
            "W_p is the weight of nn.Linear(num_hiddens, num_hiddens): W_p h_t is `queries @ W_p.T`, "
            "not `queries @ W_p`.",
            lambda i: _predicted(i, transposed=True),
        ),
        Mistake(
            "sigma is D / 2 (Luong et al. set it empirically); you used sigma = D, a Gaussian twice as wide.",
            lambda i: _predicted(i, sigma="full"),
        ),
        Mistake(
            "There is no window: positions further than D from p_t must get weight 0 (mask them before the "
            "softmax), the Gaussian only favours the centre within it.",
            lambda i: _predicted(i, cut="padding"),
        ),
        Mistake(
            "The window is not clipped to the sentence: positions at or beyond valid_len are padding and "
            "must be masked too, even when p_t + D reaches past them.",
            lambda i: _predicted(i, cut="window"),
        ),
        Mistake(_GAUSSIAN_BEFORE, lambda i: _predicted(i, gaussian="added")),
        Mistake(_GAUSSIAN_BEFORE, lambda i: _predicted(i, gaussian="multiplied")),
        Mistake(
            "The window's edges are left out: the window is [p_t - D, p_t + D], so a position exactly D from "
            "p_t is inside (mask |s - p_t| > D, not >= D).",
            lambda i: _predicted(i, edges=False),
        ),
        Mistake(
            "No gradient reaches W_p and v_p: the centre p_t was detached (`.detach()`, `torch.no_grad()`, "
            "`.item()`), so the position predictor never learns where to look. Keep p_t in the graph: the "
            "Gaussian's exp(-(s - p_t)^2 / (2 sigma^2)) is what carries the gradient back to W_p and v_p.",
            lambda i: _predicted(i, detached=True),
        ),
        Mistake(
            "p_t was rounded to an integer: it is real-valued, and both the window and the Gaussian use it "
            "as it is.",
            lambda i: _predicted(i, rounded=True),
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
