"""Chapter 6's exercises, decoding: batched `greedy_decode` (ch6.q1) and one `beam_step` (ch6.q2).

The greedy cases run a `ScriptedModel`, a stand-in for `Seq2Seq` whose logits are a fixed function of the
source, the previous token and the step, so that the expected output (and each sentence's <eos>) is known
exactly; the beam step is checked against the best continuations over all beams.
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
    """The decoding state of a `ScriptedModel`: each sentence's source offsets and the step count."""

    source: torch.Tensor
    step: int

    def index_select(self, index: torch.Tensor) -> ScriptedState:
        return ScriptedState(self.source.index_select(0, index), self.step)


class ScriptedDecoder(nn.Module):
    """A decoder whose logits are a fixed function of the source, the previous token and the step:
    logits_t = transitions[y_{t-1}] + source offsets + steps[t]. Same interface as the course's decoders."""

    has_attention = False

    def __init__(self, transitions: torch.Tensor, steps: torch.Tensor):
        super().__init__()
        self.transitions = nn.Parameter(transitions, requires_grad=False)
        self.steps = nn.Parameter(steps, requires_grad=False)
        self.vocab_size = transitions.shape[0]

    def init_state(self, enc: torch.Tensor) -> ScriptedState:
        return ScriptedState(enc, 0)

    def step(self, y_prev: torch.Tensor, state: ScriptedState) -> tuple[torch.Tensor, ScriptedState, None]:
        t = min(state.step, self.steps.shape[0] - 1)
        logits = self.transitions[y_prev] + state.source + self.steps[t]
        return logits, ScriptedState(state.source, state.step + 1), None


class ScriptedModel(nn.Module):
    """A stand-in for `attn_course.seq2seq.Seq2Seq` with the same decoding interface -- `encode(src,
    src_valid_lens)`, `decoder.init_state(enc)`, `decoder.step(y_prev, state)` -- whose choices are fixed
    by three tables, so that a decoding exercise can be checked exactly and quickly."""

    def __init__(self, source_logits: torch.Tensor, transitions: torch.Tensor, steps: torch.Tensor):
        super().__init__()
        self.source_logits = nn.Parameter(source_logits, requires_grad=False)
        self.decoder = ScriptedDecoder(transitions, steps)

    def encode(self, src: torch.Tensor, src_valid_lens: torch.Tensor) -> torch.Tensor:
        real = (torch.arange(src.shape[1])[None, :] < src_valid_lens[:, None]).to(self.source_logits.dtype)
        return (self.source_logits[src] * real[..., None]).sum(1) / src_valid_lens[:, None]


def _greedy_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    b, s = spec_size(spec, "batch_size"), spec_size(spec, "num_keys")
    v, max_len = spec_size(spec, "vocab_size", 5), spec_size(spec, "max_len")
    bos, eos = 1, 2
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    src = torch.randint(3, v, (b, s), generator=gen).masked_fill(torch.arange(s)[None, :] >= lens[:, None], 0)
    steps = torch.zeros(max_len + 2, v)
    steps[:, eos] = (torch.arange(max_len + 2) - max_len / 3) * spec["eos_ramp"]  # <eos> likelier as t grows
    steps[:, [0, bos]] = -1e4  # <pad> and <bos> are never generated
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
    return Case(label, inputs, spec, "the token lists")


def _scripted_model(inputs: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel(inputs["source_logits"], inputs["transitions"], inputs["steps"]).eval()


def _greedy_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    return fn(
        _scripted_model(inputs),
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
    )


def _greedy_reference(inputs: dict[str, Any]) -> list[list[int]]:
    hypotheses = resolve("attn_course.decoding.greedy_decode")(
        _scripted_model(inputs),
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
    )
    return [h.tokens for h in hypotheses]


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


def _greedy_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> list[list[int]]:
        eos, max_len = inputs["eos"], inputs["max_len"]
        if kind == "eos_kept":
            return [_cut(r, eos, keep_eos=True) for r in _rollout(inputs, max_len)]
        if kind == "no_stop":
            return _rollout(inputs, max_len)
        if kind == "feed_bos":
            return [_cut(r, eos) for r in _rollout(inputs, max_len, feed_bos=True)]
        if kind in ("max_len_minus", "max_len_plus"):
            return [_cut(r, eos) for r in _rollout(inputs, max_len + (1 if kind == "max_len_plus" else -1))]
        rows = _rollout(inputs, max_len)
        ends = [r.index(eos) + 1 if eos in r else max_len for r in rows]
        if kind == "first_stops_all":
            stop = min(ends)
            return [_cut(r[:stop], eos) for r in rows]
        stop = max(ends)  # "all_stop": keeps going after a sentence's <eos>
        return [[token for token in r[:stop] if token != eos] for r in rows]

    return variant


GREEDY_DECODE = Exercise(
    "ch6.q1",
    "greedy_decode",
    "Batched greedy decoding that stops each sentence at its <eos>",
    solution='''
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    """Greedy search for a batch: at every step each unfinished sentence takes its most likely token.

    model: has `encode(src, src_valid_lens)`, `decoder.init_state(enc)` and `decoder.step(y_prev, state)
    -> (logits (batch_size, vocab_size), state, weights)`; src: (batch_size, S);
    src_valid_lens: (batch_size,).
    max_len: the most tokens per sentence, <eos> included.
    Returns: one list of token ids per sentence, without <bos> and <eos>; a sentence stops at its own <eos>.
    """
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos, dtype=torch.long)
    tokens = [[] for _ in range(src.shape[0])]
    finished = [False] * src.shape[0]
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(dim=-1)                          # feed back the model's own choice
        for i, token in enumerate(y.tolist()):
            if not finished[i]:
                finished[i] = token == eos
                if not finished[i]:
                    tokens[i].append(token)
        if all(finished):
            break
    return tokens
''',
    hint="Start from `state = model.decoder.init_state(model.encode(src, src_valid_lens))` and y = <bos> for "
    "every sentence. At each of at most max_len steps: `logits, state, _ = model.decoder.step(y, state)`, "
    "y = the argmax over the vocabulary (fed back at the next step). Keep a `finished` flag per sentence: a "
    "sentence that produced <eos> takes no more tokens (and <eos> itself is not in its list). Stop when all "
    "are finished.",
    covers="sentences that end at different steps, sentences cut by max_len, max_len 1, a batch of one",
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
    ],
    build=_greedy_case,
    call=_greedy_call,
    reference=_greedy_reference,
    mistakes=[
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
    package=["attn_course.decoding.greedy_decode", "attn_course.decoding.beam_search"],
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
    """One beam-search step as attn_course.decoding's beam search takes it, and known-wrong variants."""
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
    hint="A continuation's score is its prefix's score plus the token's log-probability: "
    "`beam_scores[:, :, None] + log_probs`. Flatten the beams and tokens into one axis of beam_size * "
    "vocab_size candidates per sentence and take `topk(beam_size)`; candidate c extends beam `c // "
    "vocab_size` "
    "with token `c % vocab_size`.",
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
