"""Chapter 6's exercises, decoding: batched `greedy_decode` (ch6.q1), one `beam_step` (ch6.q2) and a batched
`beam_search` (ch6.q3).

The greedy and beam-search cases run a `ScriptedModel`, a stand-in for `Seq2Seq` whose logits are a fixed
function of the source, the previous token (for beam search also the one before, so that a row's state is
its own history) and the step, so that the expected output (and each sentence's <eos>) is known exactly.
The greedy check also counts the rows fed to the decoder at each step: finished sentences must leave the
batch. The beam step is checked against the best continuations over all beams.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import seeded_randn, spec_generator, spec_lengths, spec_size


class ScriptedState(NamedTuple):
    """The decoding state of a `ScriptedModel`: each row's source offsets, the step count, and (for a model
    with a `previous` table) each row's token before the last one, so a row's state is its own history."""

    source: torch.Tensor
    step: int
    before: torch.Tensor | None = None

    def index_select(self, index: torch.Tensor) -> ScriptedState:
        before = None if self.before is None else self.before.index_select(0, index)
        return ScriptedState(self.source.index_select(0, index), self.step, before)


class ScriptedDecoder(nn.Module):
    """A decoder whose logits are a fixed function of the source, the previous token and the step:
    logits_t = transitions[y_{t-1}] + source offsets + steps[t]. Same interface as the course's decoders."""

    has_attention = False

    def __init__(self, transitions: torch.Tensor, steps: torch.Tensor, previous: torch.Tensor | None = None):
        super().__init__()
        self.transitions = nn.Parameter(transitions, requires_grad=False)
        self.steps = nn.Parameter(steps, requires_grad=False)
        self.previous = None if previous is None else nn.Parameter(previous, requires_grad=False)
        self.vocab_size = transitions.shape[0]
        self.rows_fed: list[int] = []  # the batch size of every call of step(), for checking a search's work

    def init_state(self, enc: torch.Tensor) -> ScriptedState:
        before = None if self.previous is None else torch.zeros(enc.shape[0], dtype=torch.long)
        return ScriptedState(enc, 0, before)

    def step(self, y_prev: torch.Tensor, state: ScriptedState) -> tuple[torch.Tensor, ScriptedState, None]:
        self.rows_fed.append(int(y_prev.shape[0]) if y_prev.dim() else 1)
        t = min(state.step, self.steps.shape[0] - 1)
        logits = self.transitions[y_prev] + state.source + self.steps[t]
        if self.previous is None:
            return logits, ScriptedState(state.source, state.step + 1), None
        logits = logits + self.previous[state.before]  # depends on the row's own history: a beam's state
        return logits, ScriptedState(state.source, state.step + 1, y_prev.clone()), None


class ScriptedModel(nn.Module):
    """A stand-in for `attn_course.models.seq2seq.Seq2Seq` with the same decoding interface -- `encode(src,
    src_valid_lens)`, `decoder.init_state(enc)`, `decoder.step(y_prev, state)` -- whose choices are fixed
    by three tables (four with `previous`: logits also depend on the token before the last), so that a
    decoding exercise can be checked exactly and quickly."""

    def __init__(
        self,
        source_logits: torch.Tensor,
        transitions: torch.Tensor,
        steps: torch.Tensor,
        previous: torch.Tensor | None = None,
    ):
        super().__init__()
        self.source_logits = nn.Parameter(source_logits, requires_grad=False)
        self.decoder = ScriptedDecoder(transitions, steps, previous)

    def encode(self, src: torch.Tensor, src_valid_lens: torch.Tensor) -> torch.Tensor:
        real = (torch.arange(src.shape[1])[None, :] < src_valid_lens[:, None]).to(self.source_logits.dtype)
        return (self.source_logits[src] * real[..., None]).sum(1) / src_valid_lens[:, None]


def _scripted_batch(
    spec: dict[str, Any], gen: torch.Generator, b: int, s: int, v: int, max_len: int, bos: int, eos: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A decoding case's source batch and step table: (valid lengths (b,), right-padded sources (b, s) of
    tokens 3..v-1, per-step logit offsets (max_len + 2, v) under which <eos> grows likelier with t and
    <pad> and <bos> are never generated)."""
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    src = torch.randint(3, v, (b, s), generator=gen).masked_fill(torch.arange(s)[None, :] >= lens[:, None], 0)
    steps = torch.zeros(max_len + 2, v)
    steps[:, eos] = (torch.arange(max_len + 2) - max_len / 3) * spec["eos_ramp"]  # <eos> likelier as t grows
    steps[:, [0, bos]] = -1e4  # <pad> and <bos> are never generated
    return lens, src, steps


def _greedy_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    b, s = spec_size(spec, "batch_size"), spec_size(spec, "num_keys")
    v, max_len = spec_size(spec, "vocab_size", 5), spec_size(spec, "max_len")
    bos, eos = 1, 2
    lens, src, steps = _scripted_batch(spec, gen, b, s, v, max_len, bos, eos)
    inputs = {
        "source_logits": seeded_randn((v, v), gen, torch.float32, 1.5),
        "transitions": seeded_randn((v, v), gen, torch.float32, 2.0),
        "steps": steps,
        "src": src,
        "src_valid_lens": lens,
        "bos": bos,
        "eos": eos,
        "max_len": max_len,
    }
    label = (
        f"a batch of {b} sources of lengths {lens.tolist()}, vocabulary {v}, <bos> 1, <eos> 2, "
        f"max_len {max_len}"
    )
    return Case(label, inputs, spec, ("the token lists", "the rows fed to the decoder at each step"))


def _scripted_model(inputs: dict[str, Any]) -> ScriptedModel:
    tables = inputs["source_logits"], inputs["transitions"], inputs["steps"], inputs.get("previous")
    return ScriptedModel(*tables).eval()


def _greedy_call(fn: Callable, inputs: dict[str, Any]) -> tuple[Any, list[int]]:
    """The learner's token lists, and the batch size of every decoder call it made (its work)."""
    model = _scripted_model(inputs)
    tokens = fn(
        model,
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
    )
    return tokens, list(model.decoder.rows_fed)


def _greedy_reference(inputs: dict[str, Any]) -> tuple[list[list[int]], list[int]]:
    model = _scripted_model(inputs)
    hypotheses = resolve("attn_course.models.decoding.greedy_decode")(
        model,
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
    )
    return [h.tokens for h in hypotheses], list(model.decoder.rows_fed)


def _rollout(inputs: dict[str, Any], steps: int, feed_bos: bool = False) -> list[list[int]]:
    """Greedy choices for `steps` steps, never stopping (and feeding <bos> each step if feed_bos)."""
    model = _scripted_model(inputs)
    with torch.no_grad():
        state = model.decoder.init_state(model.encode(inputs["src"], inputs["src_valid_lens"]))
        y = torch.full((inputs["src"].shape[0],), inputs["bos"])
        tokens = []
        for _ in range(steps):
            logits, state, _ = model.decoder.step(y, state)
            choice = logits.argmax(-1)
            tokens.append(choice)
            y = torch.full_like(choice, inputs["bos"]) if feed_bos else choice
    return torch.stack(tokens, 1).tolist() if tokens else [[] for _ in range(inputs["src"].shape[0])]


def _cut(row: list[int], eos: int, keep_eos: bool = False) -> list[int]:
    return row[: row.index(eos) + keep_eos] if eos in row else row


def _rows_dropping(rows: list[list[int]], eos: int, max_len: int) -> list[int]:
    """The rows fed at each step when every sentence leaves the batch at its <eos> (or max_len)."""
    ends = [min(r.index(eos) + 1 if eos in r else max_len, max_len) for r in rows]
    return [sum(end > t for end in ends) for t in range(max(ends, default=0))]


def _greedy_variant(kind: str):
    """A known-wrong greedy search: its token lists and the rows it feeds the decoder at each step."""

    def variant(inputs: dict[str, Any]) -> tuple[list[list[int]], list[int]]:
        eos, max_len, b = inputs["eos"], inputs["max_len"], inputs["src"].shape[0]
        rows = _rollout(inputs, max_len)
        ends = [r.index(eos) + 1 if eos in r else max_len for r in rows]
        right = [_cut(r, eos) for r in rows]
        if kind in ("truncates", "keeps_rows") and max(ends) == max_len:
            return None  # the two are the same work here: let a case where they differ name the mistake
        if kind == "truncates":  # d2l's predict_step: every row to max_len, cut afterwards
            return right, [b] * max_len
        if kind == "keeps_rows":  # stops when all are done, but finished rows stay in the batch
            return right, [b] * max(ends)
        if kind == "eos_kept":
            return [_cut(r, eos, keep_eos=True) for r in rows], _rows_dropping(rows, eos, max_len)
        if kind == "no_stop":
            return rows, [b] * max_len
        if kind == "feed_bos":
            fed = _rollout(inputs, max_len, feed_bos=True)
            return [_cut(r, eos) for r in fed], _rows_dropping(fed, eos, max_len)
        if kind in ("max_len_minus", "max_len_plus"):
            n = max_len + (1 if kind == "max_len_plus" else -1)
            longer = _rollout(inputs, n)
            return [_cut(r, eos) for r in longer], _rows_dropping(longer, eos, n) if n else []
        if kind == "first_stops_all":
            stop = min(ends)
            return [_cut(r[:stop], eos) for r in rows], [b] * stop
        stop = max(ends)  # "all_stop": keeps going after a sentence's <eos>
        return [[token for token in r[:stop] if token != eos] for r in rows], [b] * stop

    return variant


GREEDY_DECODE = Exercise(
    "ch6.q1",
    "greedy_decode",
    "Batched greedy decoding that stops each sentence at its <eos>",
    solution='''
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    """Greedy search for a batch: at every step each unfinished sentence takes its most likely token.

    model: has `encode(src, src_valid_lens)`, `decoder.init_state(enc)` and `decoder.step(y_prev, state)
    -> (logits (n, vocab_size), state, weights)` for the n rows still in the batch; the state has
    `state.index_select(rows)`, which keeps (in that order) the rows given by a long tensor.
    src: (batch_size, S); src_valid_lens: (batch_size,).
    max_len: the most tokens per sentence, <eos> included.
    Returns: one list of token ids per sentence, without <bos> and <eos>; a sentence stops at its own <eos>
    and leaves the batch: the decoder is called only for unfinished sentences, and not at all once every
    sentence has finished.
    """
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos, dtype=torch.long)
    tokens = [[] for _ in range(src.shape[0])]
    active = torch.arange(src.shape[0])                    # the sentence of each row still in the batch
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(dim=-1)                          # feed back the model's own choice
        for i, token in zip(active.tolist(), y.tolist(), strict=True):
            if token != eos:
                tokens[i].append(token)
        keep = (y != eos).nonzero()[:, 0]                  # finished sentences leave the batch
        if keep.numel() == 0:
            break
        active, y, state = active[keep], y[keep], state.index_select(keep)
    return tokens
''',
    hint="Start from the encoder's state and <bos> for every sentence; at each of at most max_len steps, "
    "ask the decoder for the next token's logits, take the most likely token and feed it back at the next "
    "step. Keep track of which sentence each row of the batch belongs to: a sentence that produced <eos> "
    "is finished (and <eos> is not in its list), so drop its row from the tokens you feed back and from "
    "the decoder state (`state.index_select` keeps the rows you give it). When no row is left, stop.",
    covers="sentences that end at different steps, sentences cut by max_len, max_len 1, a batch of one; "
    "finished sentences leave the batch and the search stops when all have finished",
    defaults={
        "seed": 0,
        "batch_size": 4,
        "num_keys": 5,
        "vocab_size": 8,
        "max_len": 8,
        "eos_ramp": 1.0,
        "valid_lens": "random",
    },
    specs=[
        {"seed": 133},
        {"seed": 137, "batch_size": 5, "max_len": 10},
        {"seed": 138},
        {"seed": 131, "batch_size": 3, "max_len": 1},
        {"seed": 134, "batch_size": 1, "max_len": 6},
        {"seed": 135, "max_len": 10},  # every sentence ends before max_len, at different steps
    ],
    build=_greedy_case,
    call=_greedy_call,
    reference=_greedy_reference,
    mistakes=[
        Mistake(
            "The tokens are right, but your search ran every sentence to max_len and cut the lists "
            "afterwards (d2l's way): stop calling the decoder once every sentence has produced <eos>, and "
            "drop each finished sentence's row from the batch.",
            _greedy_variant("truncates"),
        ),
        Mistake(
            "The tokens are right, but finished sentences stayed in the batch: the decoder kept computing "
            "their rows after their <eos>. Drop a sentence's row (from the tokens fed back and from the "
            "state, `state.index_select`) as soon as it finishes, so each step feeds only the unfinished "
            "sentences.",
            _greedy_variant("keeps_rows"),
        ),
        Mistake(
            "The lists end with <eos>: leave it out (the token lists are the words, without <bos> and "
            "<eos>).",
            _greedy_variant("eos_kept"),
        ),
        Mistake(
            "The sentences never stop: each must end at its own <eos>, and take no tokens after it.",
            _greedy_variant("no_stop"),
        ),
        Mistake(
            "Tokens after a sentence's <eos> were kept: once a sentence has produced <eos> it is finished, "
            "even while the others go on.",
            _greedy_variant("all_stop"),
        ),
        Mistake(
            "The whole batch stopped when its first sentence produced <eos>; each sentence must go on until "
            "its own <eos> (or max_len).",
            _greedy_variant("first_stops_all"),
        ),
        Mistake(
            "You fed <bos> at every step; feed back the token the model just chose: y_t becomes the input "
            "of step t + 1.",
            _greedy_variant("feed_bos"),
        ),
        Mistake(
            "Off by one: a sentence without <eos> gets max_len tokens (max_len counts <eos> too); yours got "
            "one fewer.",
            _greedy_variant("max_len_minus"),
        ),
        Mistake(
            "Off by one: a sentence without <eos> gets max_len tokens; yours got one more.",
            _greedy_variant("max_len_plus"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"argument 'index'|index out of range in self|Expected tensor for argument",
            "Feed the decoder a tensor of token ids of shape (batch_size,), dtype long: "
            "`torch.full((batch_size,), bos, dtype=torch.long)` at the start, then the argmax.",
        ),
    ],
    package=["attn_course.models.decoding.greedy_decode", "attn_course.models.decoding.beam_search"],
)


def _beam_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    b, k, v = spec_size(spec, "batch_size"), spec_size(spec, "beam_size"), spec_size(spec, "vocab_size")
    if k > v:
        raise ValueError(f"beam_size must be <= vocab_size = {v}, got {k}")
    log_probs = F.log_softmax(seeded_randn((b, k, v), gen, torch.float64, 2.0), -1)
    if spec["first_step"]:  # only the first beam is alive: all beams start equal, expand one
        scores = torch.full((b, k), -math.inf, dtype=torch.float64)
        scores[:, 0] = 0.0
    else:
        scores = -torch.rand(b, k, generator=gen, dtype=torch.float64) * 5
    label = (
        f"beam_scores {(b, k)}{' (first step: only beam 0 alive)' if spec['first_step'] else ''}, "
        f"log_probs {(b, k, v)}, beam_size {k}"
    )
    return Case(
        label,
        {"beam_scores": scores, "log_probs": log_probs, "beam_size": k},
        spec,
        ("the scores", "the beams", "the tokens"),
    )


def _beam_step(
    inputs: dict[str, Any],
    *,
    add: bool = True,
    per_beam: bool = False,
    swap: bool = False,
    divide_by_beams: bool = False,
    largest: bool = True,
    multiply: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One beam-search step as attn_course.models.decoding's beam search takes it, and known-wrong variants."""
    scores, log_probs, k = inputs["beam_scores"], inputs["log_probs"], inputs["beam_size"]
    b, _, v = log_probs.shape
    candidates = scores[:, :, None] + log_probs if add else log_probs
    if multiply:
        candidates = scores[:, :, None] * log_probs
    if per_beam:
        best, tokens = candidates.max(-1)
        return best, torch.arange(k).expand(b, k).clone(), tokens
    top, index = candidates.reshape(b, -1).topk(k, dim=-1, largest=largest)
    if swap:
        return top, index % v, index // v
    return top, index // (k if divide_by_beams else v), index % (k if divide_by_beams else v)


BEAM_STEP = Exercise(
    "ch6.q2",
    "beam_step",
    "One step of beam search: the best continuations over all beams",
    solution='''
def beam_step(beam_scores, log_probs, beam_size):
    """Extend every beam by every token and keep the beam_size best continuations of each sentence.

    beam_scores: (batch_size, beam_size), log P of each live prefix (-inf for an unused beam);
    log_probs: (batch_size, beam_size, vocab_size), log p(next token | prefix) for each beam.
    Returns: the new scores (batch_size, beam_size), best first; for each, the beam it extends and the token
    it adds, both (batch_size, beam_size) long.
    """
    batch_size, _, vocab_size = log_probs.shape
    candidates = (beam_scores[:, :, None] + log_probs).reshape(batch_size, -1)  # (batch, beam_size * vocab)
    scores, index = candidates.topk(beam_size, dim=-1)
    return scores, index // vocab_size, index % vocab_size
''',
    hint="A continuation's score is its prefix's log P plus the token's log-probability. The best beam_size "
    "continuations are taken over all beams and tokens together, not beam by beam: put a sentence's "
    "beam_size * vocab_size candidates on one axis, and work out from a candidate's position there "
    "which beam it extends and which token it adds.",
    covers="the first step (one live beam), later steps, beam size 1, beam_size * vocab_size candidates",
    defaults={"seed": 0, "batch_size": 2, "beam_size": 3, "vocab_size": 7, "first_step": False},
    specs=[
        {"seed": 141},
        {"seed": 142, "vocab_size": 5, "first_step": True},
        {"seed": 143, "beam_size": 1, "vocab_size": 6},
        {"seed": 144, "batch_size": 1, "beam_size": 4, "vocab_size": 4},
    ],
    build=_beam_case,
    call=lambda answer, i: answer(i["beam_scores"], i["log_probs"], i["beam_size"]),
    reference=_beam_step,
    mistakes=[
        Mistake(
            "The prefixes' scores are not added: a continuation's score is log P(prefix) + log p(token | "
            "prefix), `beam_scores[:, :, None] + log_probs`.",
            lambda i: _beam_step(i, add=False),
        ),
        Mistake(
            "You kept each beam's best token; beam search keeps the beam_size best of *all* beam_size * "
            "vocab_size continuations, so one good beam can fill several places.",
            lambda i: _beam_step(i, per_beam=True),
        ),
        Mistake(
            "Beam and token are swapped: candidate c of the flattened (beam, token) grid extends beam "
            "`c // vocab_size` with token `c % vocab_size`.",
            lambda i: _beam_step(i, swap=True),
        ),
        Mistake(
            "Divide by vocab_size, not beam_size, to recover the beam: the flattened index is beam * "
            "vocab_size + token.",
            lambda i: _beam_step(i, divide_by_beams=True),
        ),
        Mistake(
            "You multiplied the scores: they are log-probabilities, so the probabilities' product is their "
            "sum, `beam_scores[:, :, None] + log_probs`.",
            lambda i: _beam_step(i, multiply=True),
        ),
        Mistake(
            "You kept the smallest scores: the best continuations have the *largest* log-probabilities "
            "(`topk` with its default `largest=True`).",
            lambda i: _beam_step(i, largest=False),
        ),
        Mistake(
            "The best continuations are there but in the wrong order: return them best first, highest "
            "score first (`topk` sorts them so).",
            lambda i: tuple(r.flip(-1) for r in _beam_step(i)),
        ),
        Mistake(
            "The three results are in the wrong order: return `(scores, beams, tokens)`, the new scores "
            "first.",
            lambda i: (lambda top, beams, tokens: (beams, tokens, top))(*_beam_step(i)),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"selected index k out of range",
            "topk needs all beam_size * vocab_size candidates of a sentence in one axis: flatten with "
            "`.reshape(batch_size, -1)` first.",
        ),
    ],
)


def _beam_search_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    b, s = spec_size(spec, "batch_size"), spec_size(spec, "num_keys")
    v, max_len, k = spec_size(spec, "vocab_size", 5), spec_size(spec, "max_len"), spec_size(spec, "beam_size")
    bos, eos = 1, 2
    lens, src, steps = _scripted_batch(spec, gen, b, s, v, max_len, bos, eos)
    inputs = {
        "source_logits": seeded_randn((v, v), gen, torch.float32, spec["source_scale"]),
        "transitions": seeded_randn((v, v), gen, torch.float32, 1.0),
        "previous": seeded_randn((v, v), gen, torch.float32, 1.5),
        "steps": steps,
        "src": src,
        "src_valid_lens": lens,
        "bos": bos,
        "eos": eos,
        "max_len": max_len,
        "beam_size": k,
        "alpha": float(spec["alpha"]),
    }
    label = (
        f"a batch of {b} sources of lengths {lens.tolist()}, vocabulary {v}, <bos> 1, <eos> 2, "
        f"max_len {max_len}, beam_size {k}, alpha {spec['alpha']}"
    )
    return Case(label, inputs, spec, "the token lists")


def _beam_search_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    return fn(
        _scripted_model(inputs),
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
        beam_size=inputs["beam_size"],
        alpha=inputs["alpha"],
    )


def _beam_search_reference(inputs: dict[str, Any]) -> list[list[int]]:
    hypotheses = resolve("attn_course.models.decoding.beam_search")(
        _scripted_model(inputs),
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
        beam_size=inputs["beam_size"],
        length_penalty_alpha=inputs["alpha"],
    )
    return [h.tokens for h in hypotheses]


def _one_beam_search(inputs: dict[str, Any], i: int, kind: str) -> list[int]:
    """Beam search for sentence i alone, as attn_course.models.decoding.beam_search does it, or with one bug
    (`kind`): the known-wrong variants of ch6.q3. Each sentence's search is independent of the others'."""
    model, eos, k, alpha = _scripted_model(inputs), inputs["eos"], inputs["beam_size"], inputs["alpha"]
    with torch.no_grad():
        enc = model.encode(inputs["src"][i : i + 1], inputs["src_valid_lens"][i : i + 1])
        state = model.decoder.init_state(enc)
        state = state.index_select(torch.zeros(k, dtype=torch.long))
        scores = [0.0] * k if kind == "all_start" else [0.0] + [-math.inf] * (k - 1)
        prefixes: list[list[int]] = [[] for _ in range(k)]
        y = torch.full((k,), inputs["bos"], dtype=torch.long)
        finished: list[tuple[float, float, list[int]]] = []  # (log P / lp, log P, tokens)
        for t in range(inputs["max_len"]):
            logits, new_state, _ = model.decoder.step(y, state)
            log_probs = F.log_softmax(logits.float(), dim=-1).double()
            lp = 1.0 if kind == "no_norm" else (t + 1) ** alpha
            eos_lp = max(t, 1) ** alpha if kind == "eos_uncounted" else lp  # L without the <eos>
            candidates = (torch.tensor(scores, dtype=torch.float64)[:, None] + log_probs).view(-1)
            top, index = candidates.topk(2 * k)
            picks = [(float(score), int(c) // log_probs.shape[1], int(c) % log_probs.shape[1])
                     for score, c in zip(top.tolist(), index.tolist(), strict=True)]
            if kind != "eos_continues":
                finished += [(score / eos_lp, score, prefixes[beam]) for score, beam, token in picks[:k]
                             if token == eos and math.isfinite(score)]
            if kind in ("keeps_finished", "eos_continues"):
                live = picks[:k]  # <eos> continuations stay in the beam and are extended
            elif kind == "top_k_only":  # the <eos> continuations among the K best leave dead beams
                live = [p if p[2] != eos else (-math.inf, p[1], p[2]) for p in picks[:k]]
            else:
                live = [p for p in picks if p[2] != eos][:k]
            scores = [score for score, _, _ in live]
            prefixes = [prefixes[beam] + [token] for _, beam, token in live]
            rows = torch.tensor([beam for _, beam, _ in live])
            state = new_state if kind == "no_reorder" else new_state.index_select(rows)
            y = torch.tensor([token for _, _, token in live])
            at_limit = t + 1 == inputs["max_len"]
            first_stops = kind in ("first_stops", "first_stops_early") and finished
            if at_limit or len(finished) >= k or first_stops:
                if at_limit and not (kind == "first_stops_early" and first_stops):
                    room = k if kind in ("eos_continues", "all_live") else max(0, k - len(finished))
                    live_ones = [(sc, p) for sc, p in zip(scores, prefixes, strict=True) if math.isfinite(sc)]
                    finished += [(sc / lp, sc, p) for sc, p in live_ones[:room]]
                break
    return max(finished, key=lambda c: c[0])[2]


def _cut_beam_search(inputs: dict[str, Any], i: int) -> list[int]:
    """The wrong search that treats <eos> as an ordinary token: K beams run to max_len, then each is cut at
    its first <eos> and scored log P (of the whole beam) / L^alpha, L up to that <eos>."""
    model, eos, k, alpha = _scripted_model(inputs), inputs["eos"], inputs["beam_size"], inputs["alpha"]
    with torch.no_grad():
        enc = model.encode(inputs["src"][i : i + 1], inputs["src_valid_lens"][i : i + 1])
        state = model.decoder.init_state(enc).index_select(torch.zeros(k, dtype=torch.long))
        scores = torch.tensor([0.0] + [-math.inf] * (k - 1), dtype=torch.float64)
        prefixes: list[list[int]] = [[] for _ in range(k)]
        y = torch.full((k,), inputs["bos"], dtype=torch.long)
        for _ in range(inputs["max_len"]):
            logits, state, _ = model.decoder.step(y, state)
            log_probs = F.log_softmax(logits.float(), dim=-1).double()
            scores, index = (scores[:, None] + log_probs).view(-1).topk(k)
            beams, tokens = index // log_probs.shape[1], index % log_probs.shape[1]
            prefixes = [prefixes[b] + [w] for b, w in zip(beams.tolist(), tokens.tolist(), strict=True)]
            state, y = state.index_select(beams), tokens
    best, best_score = [], -math.inf
    for score, tokens in zip(scores.tolist(), prefixes, strict=True):
        length = tokens.index(eos) + 1 if eos in tokens else len(tokens)
        if score / length**alpha > best_score:
            best, best_score = tokens[: length - (eos in tokens)], score / length**alpha
    return best


def _beam_search_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> list[list[int]]:
        if kind == "cut_after":
            return [_cut_beam_search(inputs, i) for i in range(inputs["src"].shape[0])]
        return [_one_beam_search(inputs, i, kind) for i in range(inputs["src"].shape[0])]

    return variant


_FIRST_STOPS = (
    "The sentence stopped when its first hypothesis finished: go on until it has beam_size finished "
    "hypotheses (or reaches max_len), since a later one may score better."
)

BEAM_SEARCH = Exercise(
    "ch6.q3",
    "beam_search",
    "Batched beam search with finished hypotheses and length normalisation",
    solution='''
def beam_search(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha):
    """Beam search for a batch: keep the beam_size most likely prefixes of every sentence.

    model: as in greedy_decode (`encode`, `decoder.init_state`, `decoder.step`; the state has
    `index_select(rows)`); src: (batch_size, S); src_valid_lens: (batch_size,).
    Each step extends every live prefix by every token; among a sentence's beam_size best continuations,
    those ending in <eos> are finished hypotheses, and the beam_size best that do not end in <eos> are the
    new beams. A sentence is done when it has beam_size finished hypotheses, or at max_len, where its live
    prefixes become candidates too. Returns, per sentence, the tokens (without <bos> and <eos>) of the
    candidate with the best log P / L^alpha, L its number of tokens, <eos> included.
    """
    batch_size, K = src.shape[0], beam_size
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    state = state.index_select(torch.arange(batch_size).repeat_interleave(K))  # K rows per sentence
    scores = torch.full((batch_size, K), -math.inf, dtype=torch.float64)
    scores[:, 0] = 0.0                                   # the K rows start equal: expand only the first
    prefixes = [[] for _ in range(batch_size * K)]       # the tokens of each row's prefix
    y = torch.full((batch_size * K,), bos, dtype=torch.long)
    finished = [[] for _ in range(batch_size)]           # (log P / L^alpha, tokens) per sentence
    done = [False] * batch_size
    for t in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        log_probs = F.log_softmax(logits.float(), dim=-1).double()
        vocab_size = log_probs.shape[-1]
        candidates = (scores.view(-1, 1) + log_probs).view(batch_size, K * vocab_size)
        top, index = candidates.topk(2 * K, dim=-1)     # 2K: at least K of them do not end in <eos>
        rows, tokens = (index // vocab_size).tolist(), (index % vocab_size).tolist()
        keep = []                                        # (row, token) of each new beam, sentence-major
        for b in range(batch_size):
            for j in range(K):
                if tokens[b][j] == eos and top[b, j] > -math.inf and not done[b]:
                    prefix = prefixes[b * K + rows[b][j]]
                    finished[b].append((top[b, j].item() / (t + 1) ** alpha, prefix))
            live = [j for j in range(2 * K) if tokens[b][j] != eos][:K]
            keep += [(b * K + rows[b][j], tokens[b][j]) for j in live]
            scores[b] = top[b, live]
        prefixes = [prefixes[row] + [token] for row, token in keep]
        state = state.index_select(torch.tensor([row for row, _ in keep]))  # the state follows its beam
        y = torch.tensor([token for _, token in keep])
        for b in range(batch_size):
            if not done[b] and t + 1 == max_len:         # at max_len, live prefixes are candidates too
                live = [k for k in range(K) if scores[b, k] > -math.inf][: max(0, K - len(finished[b]))]
                finished[b] += [(scores[b, k].item() / (t + 1) ** alpha, prefixes[b * K + k]) for k in live]
            done[b] = done[b] or len(finished[b]) >= K or t + 1 == max_len
        if all(done):
            break
    return [max(candidates, key=lambda c: c[0])[1] for candidates in finished]
''',
    hint="Give each sentence beam_size rows (the state's `index_select` can repeat rows), only the first "
    "alive at the start (score 0, the others -inf). Each step ranks the continuations like your "
    "beam_step, but looks at more than beam_size of them, since some of the best may end in <eos>: "
    "those among the beam_size best are set aside with log P / L^alpha, and the beam_size best others "
    "become the beams. The decoder state must follow the beams you keep. A sentence is done with "
    "beam_size finished hypotheses, or at max_len, where its live beams compete too.",
    covers="beams reordered across rows, hypotheses finishing at different steps, length normalisation "
    "(with <eos> counted in L) changing the winner, sentences stopped by max_len with more live beams than "
    "room, beam size 1 and 3",
    defaults={
        "seed": 0,
        "batch_size": 3,
        "num_keys": 5,
        "vocab_size": 7,
        "max_len": 8,
        "beam_size": 3,
        "alpha": 0.75,
        "eos_ramp": 0.6,
        "source_scale": 3.0,
        "valid_lens": "random",
    },
    specs=[
        {"seed": 157},
        {"seed": 163, "beam_size": 2, "max_len": 10},
        {"seed": 156, "alpha": 1.0},  # one sentence's best translation is empty: <eos> at once
        {"seed": 154, "beam_size": 1, "max_len": 6},
        {"seed": 161, "batch_size": 4, "max_len": 5},
        {"seed": 152, "max_len": 4},  # a sentence's best hypothesis depends on counting its <eos> in L
        {"seed": 151, "max_len": 4},  # at max_len, more live beams than room for them
    ],
    build=_beam_search_case,
    call=_beam_search_call,
    reference=_beam_search_reference,
    mistakes=[
        Mistake(
            "The decoder state does not follow the beams: after choosing the new beams, reorder the state "
            "with `state.index_select(rows)` so that each row's state is that of the prefix it extends "
            "(one beam may continue another row's prefix, or two beams the same one).",
            _beam_search_variant("no_reorder"),
        ),
        Mistake(
            "The winner was picked by raw log P: divide each candidate's log P by L^alpha (L its number of "
            "tokens, <eos> included) before comparing; raw scores favour short translations.",
            _beam_search_variant("no_norm"),
        ),
        Mistake(
            "Hypotheses ending in <eos> stayed in the beam and were extended: set them aside as finished, "
            "and fill the beam with the beam_size best continuations that do not end in <eos>.",
            _beam_search_variant("keeps_finished"),
        ),
        Mistake(
            "<eos> was treated as an ordinary token: a continuation ending in <eos> is a finished "
            "hypothesis (its tokens without <eos>), not a prefix to extend up to max_len.",
            _beam_search_variant("eos_continues"),
        ),
        Mistake(_FIRST_STOPS, _beam_search_variant("first_stops"),
        ),
        Mistake(_FIRST_STOPS, _beam_search_variant("first_stops_early")),
        Mistake(
            "Every beam started with score 0: the beam_size rows of a sentence start from the same <bos> and "
            "state, so at the first step each picks the same best tokens and the beam fills with copies of "
            "one prefix. Only the first row starts alive (score 0); give the others score -inf.",
            _beam_search_variant("all_start"),
        ),
        Mistake(
            "The length L left out the <eos>: L counts a finished hypothesis' tokens *and* its <eos> (whose "
            "probability is in its log P), so a hypothesis with n tokens is divided by (n + 1)^alpha.",
            _beam_search_variant("eos_uncounted"),
        ),
        Mistake(
            "At max_len every live beam joined the candidates: only as many as it takes to reach beam_size "
            "candidates join (the best first), and none when the sentence already has beam_size finished "
            "hypotheses.",
            _beam_search_variant("all_live"),
        ),
        Mistake(
            "The new beams were taken from the beam_size best continuations only, so each <eos> among them "
            "left a dead beam. Look at enough candidates (2 * beam_size) to find the beam_size best that do "
            "not end in <eos>.",
            _beam_search_variant("top_k_only"),
        ),
        Mistake(
            "<eos> was treated as an ordinary token: the beams ran to max_len and were cut at their <eos> "
            "afterwards, each scored by the log P of the whole beam. A continuation that ends in <eos> is "
            "a finished hypothesis at once (scored with log P up to its <eos>), and the beams go on "
            "without it.",
            _beam_search_variant("cut_after"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"selected index k out of range",
            "Take the best continuations over all of a sentence's beams and tokens at once: view the "
            "candidates as (batch_size, beam_size * vocab_size) before topk.",
        ),
    ],
    package=["attn_course.models.decoding.beam_search"],
)
