"""Chapter 6's exercises, decoding: batched `greedy_decode` (ch6.q1), one `beam_step` (ch6.q2) and a batched
`beam_search` (ch6.q3).

The greedy and beam-search cases run a `ScriptedModel`, a stand-in for `Seq2Seq` whose logits are a fixed
function of the source, the previous token (for beam search also the one before, so that a row's state is
its own history) and the step, so that the expected output (and each sentence's <eos>) is known exactly.
The greedy check also counts the rows fed to the decoder at each step: finished sentences must leave the
batch. The beam step is checked against the best continuations over all beams.

The references of greedy and beam search are the package's own (`attn_course.models.decoding`). Each known
mistake is written once, as the wrong code a learner writes: the exercise's model answer with the learner's
lines edited in (`core.edit_of`: `greedy_feeds_bos`, `beam_swapped`, `beam_search_by_raw_score`, ...), so that
the checks hold no greedy or beam search besides the package's and the model answers; two mistakes that are a
different search altogether (`beam_best_token_per_beam`, `beam_search_cut_at_eos`) are written out whole.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, edit_of, resolve
from attn_course_exercises.inputs import seeded_randn, spec_generator, spec_lengths, spec_size

#: What the chapter's set-up cell imports: the names a learner's answer, and so each mistake's code, uses.
_NAMESPACE = {"__name__": __name__, "math": math, "torch": torch, "F": F}


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


_GREEDY_SOLUTION = '''
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
'''


def _greedy_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch6.q1's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_GREEDY_SOLUTION, "greedy_decode", *edits, namespace=_NAMESPACE, rename=name)


def _where_distinct(answer: Callable) -> Callable:
    """`answer` (greedy_truncates or greedy_keeps_finished_rows), raising ValueError on a batch where a
    sentence needs all max_len steps: there the two do the same work, and a case where they differ names the
    mistake. Its source (`Mistake.code`) is the answer's."""

    def distinct(*args: Any, **kwargs: Any) -> list[list[int]]:
        tokens = answer(*args, **kwargs)
        if any(len(row) >= kwargs["max_len"] - 1 for row in tokens):  # ends at step max_len, or never
            raise ValueError("a sentence runs to max_len: the two mistakes do the same work on this batch")
        return tokens

    return functools.update_wrapper(distinct, answer)


# The mistakes of ch6.q1, each written as a learner writes it: the model answer with the learner's lines.

_LOOP = "    for _ in range(max_len):\n"
_WITH_DONE = "    done = torch.zeros(src.shape[0], dtype=torch.bool)\n" + _LOOP
_APPEND = "            if token != eos:\n                tokens[i].append(token)\n"
_LEAVE = """        keep = (y != eos).nonzero()[:, 0]                  # finished sentences leave the batch
        if keep.numel() == 0:
            break
        active, y, state = active[keep], y[keep], state.index_select(keep)
"""
_DONE_STOPS = "        done |= y == eos\n        if done.all():\n            break\n"

greedy_truncates = _where_distinct(
    _greedy_with(
        "greedy_truncates",
        (_LOOP, _WITH_DONE),
        (_APPEND, _APPEND.replace("token != eos", "token != eos and not done[i]")),
        (_LEAVE, "        done |= y == eos\n"),
    )
)
greedy_keeps_finished_rows = _where_distinct(
    _greedy_with(
        "greedy_keeps_finished_rows",
        (_LOOP, _WITH_DONE),
        (_APPEND, _APPEND.replace("token != eos", "token != eos and not done[i]")),
        (_LEAVE, _DONE_STOPS),
    )
)
greedy_keeps_eos = _greedy_with("greedy_keeps_eos", (_APPEND, "            tokens[i].append(token)\n"))
greedy_never_stops = _greedy_with(
    "greedy_never_stops", (_APPEND, "            tokens[i].append(token)\n"), (_LEAVE, "")
)
greedy_stops_at_first_eos = _greedy_with(
    "greedy_stops_at_first_eos", (_LEAVE, "        if (y == eos).any():\n            break\n")
)
greedy_feeds_bos = _greedy_with(
    "greedy_feeds_bos", ("model.decoder.step(y, state)", "model.decoder.step(torch.full_like(y, bos), state)")
)
greedy_one_step_short = _greedy_with("greedy_one_step_short", ("range(max_len)", "range(max_len - 1)"))
greedy_one_step_long = _greedy_with("greedy_one_step_long", ("range(max_len)", "range(max_len + 1)"))
greedy_keeps_tokens_after_eos = _greedy_with(
    "greedy_keeps_tokens_after_eos", (_LOOP, _WITH_DONE), (_LEAVE, _DONE_STOPS)
)
greedy_appends_by_row = _greedy_with(
    "greedy_appends_by_row", ("zip(active.tolist(), y.tolist(), strict=True)", "enumerate(y.tolist())")
)


GREEDY_DECODE = Exercise(
    "ch6.q1",
    "greedy_decode",
    "Batched greedy decoding that stops each sentence at its <eos>",
    solution=_GREEDY_SOLUTION,
    hint=(
        (
            "At each step, which sentences still need the decoder, and how does your loop know which "
            "sentence each row of the batch belongs to once some have finished?"
        ),
        (
            "Greedy search with early stopping: each step feeds back each sentence's most likely token; a "
            "sentence that produces <eos> is finished (the <eos> is not in its list) and leaves the batch, "
            "its row dropped from the tokens fed back and from the decoder state (the state's index_select "
            "keeps the rows you give it). The search stops when no row is left, or after max_len steps."
        ),
        (
            "The line to write comes after the step's tokens are recorded: find the rows whose token is not "
            "<eos>, and keep exactly those rows, in one go, of the row-to-sentence map, of the tokens fed "
            "back and of the state; stop the loop when there are none."
        ),
    ),
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
            "Your search ran every sentence to max_len and cut the lists afterwards (d2l's way): stop "
            "calling the decoder once every sentence has produced <eos>, and "
            "drop each finished sentence's row from the batch.",
            wrong=greedy_truncates,
        ),
        Mistake(
            "Finished sentences stayed in the batch: the decoder kept computing their rows after their "
            "<eos>. Drop a sentence's row (from the tokens fed back and from the "
            "state, `state.index_select`) as soon as it finishes, so each step feeds only the unfinished "
            "sentences.",
            wrong=greedy_keeps_finished_rows,
        ),
        Mistake(
            "The lists end with <eos>: leave it out (the token lists are the words, without <bos> and "
            "<eos>).",
            wrong=greedy_keeps_eos,
        ),
        Mistake(
            "The sentences never stop: each must end at its own <eos>, and take no tokens after it.",
            wrong=greedy_never_stops,
        ),
        Mistake(
            "Tokens after a sentence's <eos> were kept: once a sentence has produced <eos> it is finished, "
            "even while the others go on.",
            wrong=greedy_keeps_tokens_after_eos,
        ),
        Mistake(
            "The whole batch stopped when its first sentence produced <eos>; each sentence must go on until "
            "its own <eos> (or max_len).",
            wrong=greedy_stops_at_first_eos,
        ),
        Mistake(
            "You fed <bos> at every step; feed back the token the model just chose: y_t becomes the input "
            "of step t + 1.",
            wrong=greedy_feeds_bos,
        ),
        Mistake(
            "Off by one: a sentence without <eos> gets max_len tokens (max_len counts <eos> too); yours got "
            "one fewer.",
            wrong=greedy_one_step_short,
        ),
        Mistake(
            "Off by one: a sentence without <eos> gets max_len tokens; yours got one more.",
            wrong=greedy_one_step_long,
        ),
        Mistake(
            "Once a sentence has left the batch, row j is no longer sentence j: the tokens went to the "
            "sentence with the row's number. Keep the sentence of each row still in the batch (drop it "
            "with the row) and append each token to that sentence's list.",
            wrong=greedy_appends_by_row,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"argument 'index'|index out of range in self|Expected tensor for argument|is out of bounds for "
            r"dimension",
            "Feed the decoder a tensor of token ids of shape (batch_size,), dtype long: "
            "`torch.full((batch_size,), bos, dtype=torch.long)` at the start, then the argmax over the "
            "vocabulary, the last axis (`argmax(dim=-1)`): one token per row.",
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


def _beam_step(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The package's beam-search step (the one attn_course.models.decoding's beam search takes inside its
    loop, with 2K candidates there): the beam_size best continuations of each sentence, best first."""
    candidates = resolve("attn_course.models.decoding.beam_candidates")
    return candidates(inputs["beam_scores"], inputs["log_probs"], inputs["beam_size"])


_BEAM_STEP_SOLUTION = '''
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
'''


def _beam_step_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch6.q2's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_BEAM_STEP_SOLUTION, "beam_step", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch6.q2, each written as a learner writes it: the model answer with the learner's lines, but
# for keeping each beam's best token (a different search).

_SUM = "beam_scores[:, :, None] + log_probs"
_SPLIT = "return scores, index // vocab_size, index % vocab_size"
_TOPK = "scores, index = candidates.topk(beam_size, dim=-1)"

beam_without_prefix_scores = _beam_step_with("beam_without_prefix_scores", (f"({_SUM})", "log_probs"))
beam_swapped = _beam_step_with(
    "beam_swapped", (_SPLIT, "return scores, index % vocab_size, index // vocab_size")
)
beam_divided_by_beam_size = _beam_step_with(
    "beam_divided_by_beam_size", (_SPLIT, "return scores, index // beam_size, index % beam_size")
)
beam_multiplied = _beam_step_with("beam_multiplied", (_SUM, "beam_scores[:, :, None] * log_probs"))
beam_smallest = _beam_step_with(
    "beam_smallest", (_TOPK, "scores, index = candidates.topk(beam_size, dim=-1, largest=False)")
)
beam_worst_first = _beam_step_with(
    "beam_worst_first", (_TOPK, _TOPK + "\n    scores, index = scores.flip(-1), index.flip(-1)")
)
beam_scores_last = _beam_step_with(
    "beam_scores_last", (_SPLIT, "return index // vocab_size, index % vocab_size, scores")
)
beam_flattened_token_major = _beam_step_with(
    "beam_flattened_token_major", (f"({_SUM}).reshape", f"({_SUM}).transpose(1, 2).reshape")
)


def beam_best_token_per_beam(beam_scores, log_probs, beam_size):
    best, tokens = (beam_scores[:, :, None] + log_probs).max(-1)
    return best, torch.arange(beam_size).expand_as(tokens), tokens


BEAM_STEP = Exercise(
    "ch6.q2",
    "beam_step",
    "One step of beam search: the best continuations over all beams",
    solution=_BEAM_STEP_SOLUTION,
    hint=(
        (
            "Must the beam_size best continuations come from different beams, or may one good beam supply "
            "several of them?"
        ),
        (
            "A continuation's score is its prefix's log P plus the token's log-probability, and the best "
            "are taken over all beams and tokens together: one axis of beam_size * vocab_size candidates "
            "per sentence, whose position says both the beam it extends and the token it adds."
        ),
        (
            "The lines to write: add each beam's score to its log-probabilities (broadcast over the "
            "tokens), flatten each sentence's candidates into one axis, take its beam_size largest; then "
            "split each position into its beam (the quotient by vocab_size) and its token (the remainder)."
        ),
    ),
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
            wrong=beam_without_prefix_scores,
        ),
        Mistake(
            "You kept each beam's best token; beam search keeps the beam_size best of *all* beam_size * "
            "vocab_size continuations, so one good beam can fill several places.",
            wrong=beam_best_token_per_beam,
        ),
        Mistake(
            "Beam and token are swapped: candidate c of the flattened (beam, token) grid extends beam "
            "`c // vocab_size` with token `c % vocab_size`.",
            wrong=beam_swapped,
        ),
        Mistake(
            "Divide by vocab_size, not beam_size, to recover the beam: the flattened index is beam * "
            "vocab_size + token.",
            wrong=beam_divided_by_beam_size,
        ),
        Mistake(
            "You multiplied the scores: they are log-probabilities, so the probabilities' product is their "
            "sum, `beam_scores[:, :, None] + log_probs`.",
            wrong=beam_multiplied,
        ),
        Mistake(
            "You kept the smallest scores: the best continuations have the *largest* log-probabilities "
            "(`topk` with its default `largest=True`).",
            wrong=beam_smallest,
        ),
        Mistake(
            "The best continuations are there but in the wrong order: return them best first, highest "
            "score first (`topk` sorts them so).",
            wrong=beam_worst_first,
        ),
        Mistake(
            "The three results are in the wrong order: return `(scores, beams, tokens)`, the new scores "
            "first.",
            wrong=beam_scores_last,
        ),
        Mistake(
            "The candidates were flattened token by token (transposed to (token, beam) first), so position "
            "c is no longer beam c // vocab_size: flatten the (beam, token) grid in its own order, "
            "`.reshape(batch_size, -1)`, so that c = beam * vocab_size + token.",
            wrong=beam_flattened_token_major,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"selected index k out of range",
            "topk needs all beam_size * vocab_size candidates of a sentence in one axis: flatten with "
            "`.reshape(batch_size, -1)` first.",
        ),
    ],
    package=["attn_course.models.decoding.beam_candidates", "attn_course.models.decoding.beam_search"],
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


_BEAM_SEARCH_SOLUTION = '''
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
'''


def _beam_search_with(name: str, *edits: tuple[str, str]) -> Callable:
    """ch6.q3's model answer with a learner's bug: each (right, wrong) piece of its source replaced."""
    return edit_of(_BEAM_SEARCH_SOLUTION, "beam_search", *edits, namespace=_NAMESPACE, rename=name)


# The mistakes of ch6.q3, each written as a learner writes it: the model answer with the learner's lines.

_EOS_FINISHED = """            for j in range(K):
                if tokens[b][j] == eos and top[b, j] > -math.inf and not done[b]:
                    prefix = prefixes[b * K + rows[b][j]]
                    finished[b].append((top[b, j].item() / (t + 1) ** alpha, prefix))
"""
_LIVE = "live = [j for j in range(2 * K) if tokens[b][j] != eos][:K]"
_ENOUGH = "len(finished[b]) >= K"

beam_search_without_reordering = _beam_search_with(
    "beam_search_without_reordering",
    ("state = state.index_select(torch.tensor([row for row, _ in keep]))", "state = state"),
)
beam_search_by_raw_score = _beam_search_with(
    "beam_search_by_raw_score",
    ("top[b, j].item() / (t + 1) ** alpha", "top[b, j].item()"),
    ("scores[b, k].item() / (t + 1) ** alpha", "scores[b, k].item()"),
)
beam_search_keeping_finished_beams = _beam_search_with(
    "beam_search_keeping_finished_beams", (_LIVE, "live = list(range(K))")
)
beam_search_ignoring_eos = _beam_search_with(
    "beam_search_ignoring_eos", (_EOS_FINISHED, ""), (_LIVE, "live = list(range(K))")
)
beam_search_stopping_at_first_finished = _beam_search_with(
    "beam_search_stopping_at_first_finished", (_ENOUGH, "len(finished[b]) >= 1")
)
beam_search_done_at_first_finished = _beam_search_with(
    "beam_search_done_at_first_finished",
    (_ENOUGH, "len(finished[b]) >= 1"),
    ("if not done[b] and t + 1 == max_len:", "if not done[b] and t + 1 == max_len and not finished[b]:"),
)
beam_search_every_beam_alive = _beam_search_with(
    "beam_search_every_beam_alive",
    (
        "scores = torch.full((batch_size, K), -math.inf, dtype=torch.float64)",
        "scores = torch.zeros((batch_size, K), dtype=torch.float64)",
    ),
)
beam_search_length_without_eos = _beam_search_with(  # L = t, the tokens before <eos> (at least 1)
    "beam_search_length_without_eos",
    ("top[b, j].item() / (t + 1) ** alpha", "top[b, j].item() / max(t, 1) ** alpha"),
)
beam_search_every_live_beam_at_max_len = _beam_search_with(
    "beam_search_every_live_beam_at_max_len", ("[: max(0, K - len(finished[b]))]", "")
)
beam_search_new_beams_among_the_best = _beam_search_with(
    "beam_search_new_beams_among_the_best",
    (_LIVE, "live = list(range(K))"),
    (
        "scores[b] = top[b, live]",
        "scores[b] = top[b, live].masked_fill(torch.tensor(tokens[b][:K]) == eos, -math.inf)",
    ),
)


beam_search_length_times_alpha = _beam_search_with(
    "beam_search_length_times_alpha",
    ("top[b, j].item() / (t + 1) ** alpha", "top[b, j].item() / ((t + 1) * alpha)"),
    ("scores[b, k].item() / (t + 1) ** alpha", "scores[b, k].item() / ((t + 1) * alpha)"),
)
beam_search_state_rows_within_sentence = _beam_search_with(
    "beam_search_state_rows_within_sentence",
    (
        "state.index_select(torch.tensor([row for row, _ in keep]))",
        "state.index_select(torch.tensor([row % K for row, _ in keep]))",
    ),
)
beam_search_finished_with_eos = _beam_search_with(
    "beam_search_finished_with_eos",
    (
        "finished[b].append((top[b, j].item() / (t + 1) ** alpha, prefix))",
        "finished[b].append((top[b, j].item() / (t + 1) ** alpha, prefix + [eos]))",
    ),
)


def beam_search_cut_at_eos(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha):
    results = []
    for i in range(src.shape[0]):  # one sentence at a time; <eos> is a token like any other
        enc = model.encode(src[i : i + 1], src_valid_lens[i : i + 1])
        state = model.decoder.init_state(enc).index_select(torch.zeros(beam_size, dtype=torch.long))
        scores = torch.tensor([0.0] + [-math.inf] * (beam_size - 1), dtype=torch.float64)
        prefixes = [[] for _ in range(beam_size)]
        y = torch.full((beam_size,), bos, dtype=torch.long)
        for _ in range(max_len):
            logits, state, _ = model.decoder.step(y, state)
            log_probs = F.log_softmax(logits.float(), dim=-1).double()
            scores, index = (scores[:, None] + log_probs).view(-1).topk(beam_size)
            beams, y = index // log_probs.shape[1], index % log_probs.shape[1]
            prefixes = [prefixes[b] + [w] for b, w in zip(beams.tolist(), y.tolist(), strict=True)]
            state = state.index_select(beams)
        best, best_score = [], -math.inf
        for score, tokens in zip(scores.tolist(), prefixes, strict=True):  # cut each beam at its <eos>
            length = tokens.index(eos) + 1 if eos in tokens else len(tokens)
            if score / length**alpha > best_score:
                best, best_score = tokens[: length - (eos in tokens)], score / length**alpha
        results.append(best)
    return results


_FIRST_STOPS = (
    "The sentence stopped when its first hypothesis finished: go on until it has beam_size finished "
    "hypotheses (or reaches max_len), since a later one may score better."
)

BEAM_SEARCH = Exercise(
    "ch6.q3",
    "beam_search",
    "Batched beam search with finished hypotheses and length normalisation",
    solution=_BEAM_SEARCH_SOLUTION,
    hint=(
        (
            "When one of the best continuations ends in <eos>, should it stay among the beams, and how many "
            "candidates must a step look at so that beam_size live beams remain?"
        ),
        (
            "Give each sentence beam_size rows (the state's index_select can repeat rows), only the first "
            "alive at the start (score 0, the others -inf). Each step ranks the continuations like your "
            "beam_step, but looks at more than beam_size of them, since some of the best may end in <eos>: "
            "those among the beam_size best are finished hypotheses, scored log P / L^alpha (L counts the "
            "<eos>), and the beam_size best others become the beams. The decoder state follows the beams "
            "you keep. A sentence is done with beam_size finished hypotheses, or at max_len, where its live "
            "beams compete too."
        ),
        (
            "The lines to check: where a finished hypothesis is scored (log P divided by its length, <eos> "
            "included, raised to the power alpha) and where the state is reordered (by each new beam's row "
            "in the whole batch, its sentence's offset plus the beam it extends)."
        ),
    ),
    covers="beams reordered across rows, hypotheses finishing at different steps, length normalisation "
    "(with <eos> counted in L, alpha 0.5, 0.75 and 1) changing the winner, sentences stopped by max_len with "
    "more live beams than room, beam size 1 and 3",
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
        {"seed": 166, "alpha": 0.5, "max_len": 6},  # L^0.5 and L (alpha = 1) pick different winners
    ],
    build=_beam_search_case,
    call=_beam_search_call,
    reference=_beam_search_reference,
    mistakes=[
        Mistake(
            "The decoder state does not follow the beams: after choosing the new beams, reorder the state "
            "with `state.index_select(rows)` so that each row's state is that of the prefix it extends "
            "(one beam may continue another row's prefix, or two beams the same one).",
            wrong=beam_search_without_reordering,
        ),
        Mistake(
            "The winner was picked by raw log P: divide each candidate's log P by L^alpha (L its number of "
            "tokens, <eos> included) before comparing; raw scores favour short translations.",
            wrong=beam_search_by_raw_score,
        ),
        Mistake(
            "Hypotheses ending in <eos> stayed in the beam and were extended: set them aside as finished, "
            "and fill the beam with the beam_size best continuations that do not end in <eos>.",
            wrong=beam_search_keeping_finished_beams,
        ),
        Mistake(
            "<eos> was treated as an ordinary token: a continuation ending in <eos> is a finished "
            "hypothesis (its tokens without <eos>), not a prefix to extend up to max_len.",
            wrong=beam_search_ignoring_eos,
        ),
        Mistake(
            _FIRST_STOPS,
            wrong=beam_search_stopping_at_first_finished,
        ),
        Mistake(_FIRST_STOPS, wrong=beam_search_done_at_first_finished),
        Mistake(
            "Every beam started with score 0: the beam_size rows of a sentence start from the same <bos> and "
            "state, so at the first step each picks the same best tokens and the beam fills with copies of "
            "one prefix. Only the first row starts alive (score 0); give the others score -inf.",
            wrong=beam_search_every_beam_alive,
        ),
        Mistake(
            "The length L left out the <eos>: L counts a finished hypothesis' tokens *and* its <eos> (whose "
            "probability is in its log P), so a hypothesis with n tokens is divided by (n + 1)^alpha.",
            wrong=beam_search_length_without_eos,
        ),
        Mistake(
            "At max_len every live beam joined the candidates: only as many as it takes to reach beam_size "
            "candidates join (the best first), and none when the sentence already has beam_size finished "
            "hypotheses.",
            wrong=beam_search_every_live_beam_at_max_len,
        ),
        Mistake(
            "The new beams were taken from the beam_size best continuations only, so each <eos> among them "
            "left a dead beam. Look at enough candidates (2 * beam_size) to find the beam_size best that do "
            "not end in <eos>.",
            wrong=beam_search_new_beams_among_the_best,
        ),
        Mistake(
            "<eos> was treated as an ordinary token: the beams ran to max_len and were cut at their <eos> "
            "afterwards, each scored by the log P of the whole beam. A continuation that ends in <eos> is "
            "a finished hypothesis at once (scored with log P up to its <eos>), and the beams go on "
            "without it.",
            wrong=beam_search_cut_at_eos,
        ),
        Mistake(
            "The length penalty is a power, L^alpha: you divided by L * alpha (or by L alone), which ranks "
            "the candidates as alpha = 1 would, since a constant factor 1/alpha changes no comparison. "
            "Raise the length to the power alpha (`** alpha`).",
            wrong=beam_search_length_times_alpha,
        ),
        Mistake(
            "The decoder state follows the wrong sentence: each sentence's beams are its own beam_size rows "
            "of the batch, row b * beam_size + beam. You reordered the state by the beam number alone "
            "(0 .. beam_size - 1), so every sentence continues from the first sentence's states: add the "
            "sentence's offset b * beam_size.",
            wrong=beam_search_state_rows_within_sentence,
        ),
        Mistake(
            "The finished hypotheses kept their <eos>: a finished translation's tokens are its prefix, "
            "without <bos> and <eos> (the <eos> still counts in its length L).",
            wrong=beam_search_finished_with_eos,
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
