"""Inference: batched greedy search and beam search, returning tokens and attention matrices.

Both work on a padded batch of sentences of different lengths and stop each sentence at its own <eos>:
finished sentences leave the batch (their rows are dropped from the decoder state), so they cost no more
work. Every result carries the attention of each step, trimmed to the sentence's real source length.
The searches opt into `attn_course.attention.fast` (the same results, computed faster): its additive scores,
asked for when they prepare the decoder's state (`initial_state`), and its index_select, which copies the
encoder's outputs once when rows leave or are reordered.

Each search is written once, as a generator of its steps (`greedy_steps`, `beam_steps`): the decoding
functions run it to the end and keep the tokens, and the course's step-through widgets
(`attn_course.view.steppers`) show its records one at a time, so what a widget shows is what the search did.

    hyps = greedy_decode(model, src, src_valid_lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos)
    hyps = beam_search(model, src, src_valid_lens, bos=..., eos=..., beam_size=4)
    translations = translate(model, ["the cat sleeps ."], src_vocab, tgt_vocab, beam_size=4)
    for step in greedy_steps(model, src, src_valid_lens, bos=..., eos=...): ...   # GreedyStep records
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.nn import functional as F

from attn_course.attention import fast
from attn_course.models.modes import eval_mode
from attn_course.models.seq2seq import Seq2Seq
from attn_course.validation import (
    check_floating,
    check_int,
    check_positive_int,
    check_shape,
    check_tensor,
    check_tokens,
    check_valid_lens,
)

LENGTH_NORMS = ("power", "gnmt")


class Hypothesis(NamedTuple):
    """One decoded sentence.

    tokens:    generated token ids, without <bos> and <eos>.
    attention: (T_i, S_i) float on the CPU, or None for a model without attention. Row t is the step that
               predicted tokens[t] (Bahdanau's alpha_t, Luong's a_t); the last row is the <eos> step when
               `finished`, so T_i = len(tokens) + finished. S_i is the sentence's real source length (its
               <eos> included), so padding columns are cut.
    score:     log p(tokens, <eos> | source) under the model (the <eos> term only when finished).
    finished:  whether the sentence ended with <eos> (False: it hit max_len).
    """

    tokens: list[int]
    attention: Tensor | None
    score: float
    finished: bool


class Translation(NamedTuple):
    """A translated sentence, as tokens: source (S_i tokens, <eos> included: the attention's columns),
    target (without <eos>), attention (T_i, S_i) or None, score and finished as in Hypothesis."""

    source: list[str]
    target: list[str]
    attention: Tensor | None
    score: float
    finished: bool


def length_penalty(length: int, alpha: float, norm: str = "power") -> float:
    """The divisor lp(L) of a hypothesis' log-probability in beam search: score / lp(L).

    norm="power": lp(L) = L^alpha (d2l, sec. 10.8: (1/L^alpha) log P, alpha about 0.75);
    norm="gnmt":  lp(L) = ((5 + L) / 6)^alpha (Wu et al. 2016, eq. 14).
    L counts the generated tokens, <eos> included; alpha = 0 ranks by raw log-probability.
    """
    if norm == "power":
        return float(length) ** alpha
    if norm == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    raise ValueError(f"length_norm={norm!r}, expected one of {LENGTH_NORMS}")


def _check_inputs(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, eos: int,
                  max_len: int | None) -> list[int]:
    """Validate the common arguments; return each sentence's most tokens (default 2 S_i + 10).

    The default counts each sentence's own source length S_i, not the padded width, so a sentence's
    result does not depend on the sentences it is batched with.
    """
    check_tokens("src", src)
    check_tensor("src_valid_lens", src_valid_lens)
    check_valid_lens(src_valid_lens, src.shape[0], None, src.shape[1], low=1, per_query=False, upper="S",
                     name="src_valid_lens")
    vocab_size = model.decoder.vocab_size
    for name, value in (("bos", bos), ("eos", eos)):
        check_int(name, value, low=0, high=vocab_size - 1)  # a token id
    if max_len is None:
        return [2 * int(n) + 10 for n in src_valid_lens.tolist()]
    check_positive_int("max_len", max_len)  # the most tokens to generate
    return [max_len] * src.shape[0]


def _model_device(model: Seq2Seq) -> torch.device:
    return next(model.parameters()).device


def initial_state(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor) -> Any:
    """The decoder's state before the first step, its attention scores in their faster form.

    src: (batch_size, S) long; src_valid_lens: (batch_size,) long, both on the model's device.
    A `Seq2Seq` prepares its attention memory with fast_scores=True (`attn_course.attention.fast`: the same
    results, computed faster); another model with `encode` and a decoder's `init_state` (the Transformer,
    whose scores have no faster form) is asked for its state as it is.
    """
    enc = model.encode(src, src_valid_lens)
    if isinstance(model, Seq2Seq):
        return model.decoder.init_state(enc, fast_scores=True)
    return model.decoder.init_state(enc)


class GreedyStep(NamedTuple):
    """One step of greedy search, over the n sentences still in the batch (one row each).

    t:          the step, from 0; it chooses token t + 1 of each sentence (<eos> counted).
    sentences:  (n,) long, the batch positions of the rows, in row order.
    fed:        (n,) long, the token each row was fed, y_{t-1} (<bos> at t = 0).
    state:      the decoder state before the step (n rows; `initial_state` at t = 0).
    log_probs:  (n, vocab_size) float, log p(y | y_<t, x) of every token.
    tokens:     (n,) long, the argmax: the token each row takes.
    weights:    (n, S) the step's attention (Bahdanau's alpha_t, Luong's a_t), or None without attention.
    next_state: the decoder state after the step (n rows: the rows that stop here are still in it).
    done:       (n,) bool, whether the row stops here: it chose <eos> or reached its max_len.
    """

    t: int
    sentences: Tensor
    fed: Tensor
    state: Any
    log_probs: Tensor
    tokens: Tensor
    weights: Tensor | None
    next_state: Any
    done: Tensor


@torch.no_grad()
def greedy_decode(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, *, bos: int, eos: int,
                  max_len: int | None = None) -> list[Hypothesis]:
    """Greedy search for a batch: at each step every unfinished sentence takes its most likely token.

    src: (batch_size, S) long, right-padded; src_valid_lens: (batch_size,) long in [1, S].
    max_len: the most tokens per sentence, <eos> included (default 2 S_i + 10, S_i its source length).
    Returns one Hypothesis per sentence, in order. A sentence leaves the batch at its <eos> or its limit.
    """
    limits = _check_inputs(model, src, src_valid_lens, bos, eos, max_len)
    with eval_mode(model):
        return _greedy_search(model, src, src_valid_lens, bos, eos, limits)


def greedy_steps(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, *, bos: int, eos: int,
                 max_len: int | None = None) -> Iterator[GreedyStep]:
    """`greedy_decode`'s search one step at a time: a generator of GreedyStep records, from step 0 on.

    Arguments as greedy_decode's (checked before the first step). `greedy_decode` runs the same steps to the
    end, so the records are exactly what it computed. The model is in evaluation mode from the first step
    until the generator is exhausted or closed, then back in the mode it had.
    """
    limits = _check_inputs(model, src, src_valid_lens, bos, eos, max_len)
    return _in_eval_mode(model, _greedy_steps(model, src, src_valid_lens, bos, eos, limits))


def _in_eval_mode(model: Seq2Seq, steps: Iterator) -> Iterator:
    """The records of `steps`, the model in evaluation mode while they are computed."""
    with eval_mode(model):
        yield from steps


@torch.no_grad()
def _greedy_steps(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, eos: int,
                  limits: list[int]) -> Iterator[GreedyStep]:
    """greedy_steps on checked arguments, the model in eval mode; limits: each sentence's most tokens."""
    device = _model_device(model)
    src, src_valid_lens = src.to(device), src_valid_lens.to(device)
    state = initial_state(model, src, src_valid_lens)
    limit = torch.tensor(limits, device=device)
    sentences = torch.arange(src.shape[0], device=device)   # the sentences still being decoded
    y = torch.full((src.shape[0],), bos, dtype=torch.long, device=device)
    for t in range(max(limits)):
        logits, next_state, weights = model.decoder.step(y, state)
        log_probs = F.log_softmax(logits.float(), dim=-1)
        tokens = log_probs.argmax(-1)
        done = (tokens == eos) | (limit[sentences] <= t + 1)
        yield GreedyStep(t, sentences, y, state, log_probs, tokens, weights, next_state, done)
        if bool(done.any()):
            keep = (~done).nonzero()[:, 0]
            if keep.numel() == 0:
                return
            # = next_state.index_select(keep), copying the encoder's outputs once (attn_course.attention.fast)
            sentences, tokens, next_state = sentences[keep], tokens[keep], fast.index_select(next_state, keep)
        y, state = tokens, next_state


def _greedy_search(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, eos: int,
                   limits: list[int]) -> list[Hypothesis]:
    """greedy_decode on checked arguments, the model in eval mode; limits: each sentence's most tokens.

    Runs `_greedy_steps` to the end, writing each step's tokens, log-probabilities and attention into
    per-sentence tensors.
    """
    max_len, device = max(limits), _model_device(model)
    batch_size, num_keys = src.shape
    tokens = torch.full((batch_size, max_len), eos, dtype=torch.long, device=device)
    has_attention = model.decoder.has_attention
    weights = torch.zeros(batch_size, max_len, num_keys, device=device) if has_attention else None
    scores = torch.zeros(batch_size, dtype=torch.float64, device=device)
    steps = torch.full((batch_size,), max_len, dtype=torch.long, device=device)
    for step in _greedy_steps(model, src, src_valid_lens, bos, eos, limits):
        rows, t = step.sentences, step.t
        tokens[rows, t] = step.tokens
        scores[rows] += step.log_probs.gather(1, step.tokens[:, None])[:, 0].double()
        if has_attention:
            weights[rows, t] = step.weights.float()
        steps[rows] = torch.where(step.done, t + 1, steps[rows])
    return _greedy_results(tokens, weights, scores, steps, src_valid_lens, eos)


def _greedy_results(tokens: Tensor, weights: Tensor | None, scores: Tensor, steps: Tensor,
                    src_valid_lens: Tensor, eos: int) -> list[Hypothesis]:
    """One Hypothesis per sentence. The tensors are read into Python (and off the GPU) once for the batch,
    not once per sentence: with a thousand sentences, per-sentence reads cost as much as decoder steps."""
    attention = None if weights is None else weights.float().cpu()
    results = []
    for i, (row, num_steps, score, src_len) in enumerate(zip(
            tokens.tolist(), steps.tolist(), scores.tolist(), src_valid_lens.tolist(), strict=True)):
        ids = row[:num_steps]
        finished = ids[-1] == eos       # an unfinished sentence has no <eos> (it would have finished)
        if finished:
            ids.pop()
        rows = None if attention is None else attention[i, :num_steps, :src_len]
        results.append(Hypothesis(ids, rows, score, finished))
    return results


@torch.no_grad()
def beam_search(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, *, bos: int, eos: int,
                max_len: int | None = None, beam_size: int = 4, length_penalty_alpha: float = 0.75,
                length_norm: str = "power") -> list[Hypothesis]:
    """Beam search for a batch: keep the beam_size most likely prefixes of every sentence.

    src: (batch_size, S) long, right-padded; src_valid_lens: (batch_size,) long in [1, S].
    Each step extends every live prefix by every token and keeps, per sentence, the beam_size best
    continuations that do not end in <eos>; a continuation ending in <eos> among the beam_size best
    becomes a finished hypothesis. A sentence stops when it has beam_size finished hypotheses (or at
    max_len, when its live prefixes join the candidates) and leaves the batch. The result is the
    candidate with the best log P / lp(L), lp from `length_penalty` (alpha = length_penalty_alpha, L the
    number of generated tokens with <eos>). beam_size=1 is exactly greedy search.
    Returns one Hypothesis per sentence, in order.
    """
    limits = _check_beam_inputs(model, src, src_valid_lens, bos, eos, max_len, beam_size, length_norm)
    with eval_mode(model):
        return _beam_search(model, src, src_valid_lens, bos, eos, limits, beam_size,
                            length_penalty_alpha, length_norm)


class Candidate(NamedTuple):
    """A hypothesis beam search may return: log P / lp(L), log P, tokens (without <bos> and <eos>),
    attention rows (T, S) or None, and finished (whether it ends with <eos>)."""

    normalised: float
    score: float
    tokens: list[int]
    attention: Tensor | None
    finished: bool


class BeamStep(NamedTuple):
    """One step of beam search, over the n sentences still in the batch (K rows each, K the beam size).

    t:                the step, from 0; its candidates have L = t + 1 tokens (<eos> counted).
    sentences:        the n batch positions of the sentences, in row order (a list of int).
    prefixes:         (n K, t) long, the live prefixes the step extends; row b K + k is sentence b's beam k.
    prefix_scores:    (n, K) float64, their log P; -inf for a row not in use (rows 1..K-1 at t = 0).
    weights:          (n K, S) float, the step's attention on each row, or None without attention.
    candidate_scores: (n, C) float64, the log P of the C = min(2K, K vocab_size) best continuations,
                      best first.
    candidate_beams:  (n, C) long, the beam k (0..K-1) each continuation extends.
    candidate_tokens: (n, C) long, the token it appends.
    finishing:        (n, C) bool, the continuations that finish here: <eos> among the K best, score finite.
    kept:             (n, K) long, which continuations (indices into C) become the next live beams, in order:
                      the K best that do not end in <eos>.
    finished:         (batch position, Candidate) pairs set aside at this step: the finishing ones, and, for
                      a sentence at its max_len, its live prefixes (unfinished) up to K hypotheses in all.
    penalty:          lp(t + 1), the divisor of this step's normalised scores (`length_penalty`).
    """

    t: int
    sentences: list[int]
    prefixes: Tensor
    prefix_scores: Tensor
    weights: Tensor | None
    candidate_scores: Tensor
    candidate_beams: Tensor
    candidate_tokens: Tensor
    finishing: Tensor
    kept: Tensor
    finished: list[tuple[int, Candidate]]
    penalty: float


def beam_candidates(beam_scores: Tensor, log_probs: Tensor, num: int) -> tuple[Tensor, Tensor, Tensor]:
    """One step of beam search: every live beam extended by every token, and the `num` best continuations
    of each sentence over all its beams and tokens together, best first.

    beam_scores: (batch_size, beam_size), log P of each prefix (-inf for a beam not in use);
    log_probs: (batch_size, beam_size, vocab_size), log p(next token | prefix) of each beam.
    Returns (scores, beams, tokens), each (batch_size, num): a continuation's score is its prefix's log P
    plus its token's log-probability; it extends beam `beams` with token `tokens` (position c of a
    sentence's beam_size * vocab_size candidates is beam c // vocab_size, token c % vocab_size).
    `beam_search` takes num = 2 * beam_size (so that beam_size remain when some end in <eos>).
    """
    check_shape("beam_scores", check_floating("beam_scores", beam_scores), {"batch_size": None,
                                                                            "beam_size": None})
    batch_size, beam_size = beam_scores.shape
    check_shape("log_probs", check_floating("log_probs", log_probs),
                {"batch_size": batch_size, "beam_size": beam_size, "vocab_size": None})
    vocab_size = log_probs.shape[-1]
    check_int("num", num, low=1, high=beam_size * vocab_size, high_name="beam_size * vocab_size")
    return _beam_candidates(beam_scores, log_probs, num)


def _beam_candidates(beam_scores: Tensor, log_probs: Tensor, num: int) -> tuple[Tensor, Tensor, Tensor]:
    """beam_candidates on checked arguments (beam search's loop calls it at every step)."""
    batch_size, beam_size, vocab_size = log_probs.shape
    candidates = (beam_scores[:, :, None] + log_probs).reshape(batch_size, beam_size * vocab_size)
    scores, index = candidates.topk(num, dim=-1)
    return scores, index // vocab_size, index % vocab_size


def best_candidate(candidates: Sequence[Candidate]) -> Candidate:
    """The candidate beam search returns: the best log P / lp(L) (the first of equals)."""
    return max(candidates, key=lambda c: c.normalised)


def beam_steps(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, *, bos: int, eos: int,
               max_len: int | None = None, beam_size: int = 4, length_penalty_alpha: float = 0.75,
               length_norm: str = "power") -> Iterator[BeamStep]:
    """`beam_search`'s search one step at a time: a generator of BeamStep records, from step 0 on.

    Arguments as beam_search's (checked before the first step). `beam_search` runs the same steps to the end
    and returns, per sentence, `best_candidate` of the Candidates the records set aside. The model is in
    evaluation mode from the first step until the generator is exhausted or closed.
    """
    limits = _check_beam_inputs(model, src, src_valid_lens, bos, eos, max_len, beam_size, length_norm)
    return _in_eval_mode(model, _beam_steps(model, src, src_valid_lens, bos, eos, limits, beam_size,
                                            length_penalty_alpha, length_norm))


def _check_beam_inputs(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, eos: int,
                       max_len: int | None, beam_size: int, length_norm: str) -> list[int]:
    """_check_inputs, then beam_size (an int >= 1) and length_norm (one of LENGTH_NORMS)."""
    limits = _check_inputs(model, src, src_valid_lens, bos, eos, max_len)
    check_positive_int("beam_size", beam_size)
    if length_norm not in LENGTH_NORMS:
        raise ValueError(f"length_norm={length_norm!r}, expected one of {LENGTH_NORMS}")
    return limits


def _beam_search(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, eos: int,
                 limits: list[int], K: int, alpha: float, norm: str) -> list[Hypothesis]:
    """beam_search on checked arguments, the model in eval mode; K: the beam size.

    Runs `_beam_steps` to the end, collecting every sentence's set-aside candidates, then picks the best.
    """
    finished: list[list[Candidate]] = [[] for _ in range(src.shape[0])]      # per sentence
    for step in _beam_steps(model, src, src_valid_lens, bos, eos, limits, K, alpha, norm):
        for sentence, candidate in step.finished:
            finished[sentence].append(candidate)
    return _best_hypotheses(finished, src_valid_lens)


class _Beams(NamedTuple):
    """The live beams between two steps: n sentences, K rows each (sentence-major)."""

    sentences: list[int]      # their batch positions
    scores: Tensor            # (n, K) float64, log P of each row
    history: Tensor           # (n K, t) long, each row's tokens so far
    attention: Tensor | None  # (n K, t, S), each row's attention rows so far
    state: Any                # the decoder state, n K rows


@torch.no_grad()
def _beam_steps(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, bos: int, eos: int,
                limits: list[int], K: int, alpha: float, norm: str) -> Iterator[BeamStep]:
    """beam_steps on checked arguments, the model in eval mode; K: the beam size."""
    device = _model_device(model)
    src, src_valid_lens = src.to(device), src_valid_lens.to(device)
    batch_size, num_keys = src.shape
    vocab_size, has_attention = model.decoder.vocab_size, model.decoder.has_attention
    state = initial_state(model, src, src_valid_lens)
    state = fast.index_select(state, torch.arange(batch_size, device=device).repeat_interleave(K))
    scores = torch.full((batch_size, K), -math.inf, dtype=torch.float64, device=device)
    scores[:, 0] = 0.0                                   # all K rows start equal: expand only the first
    beams = _Beams(list(range(batch_size)), scores, torch.empty(batch_size * K, 0, dtype=torch.long,
                   device=device), torch.empty(batch_size * K, 0, num_keys, device=device)
                   if has_attention else None, state)
    num_finished = [0] * batch_size                      # per sentence
    y = torch.full((batch_size * K,), bos, dtype=torch.long, device=device)
    num_candidates = min(2 * K, K * vocab_size)
    for t in range(max(limits)):
        logits, state, step_weights = model.decoder.step(y, beams.state)
        n, penalty = len(beams.sentences), length_penalty(t + 1, alpha, norm)
        log_probs = F.log_softmax(logits.float(), dim=-1).double()
        top_scores, top_beam, top_token = _beam_candidates(  # (n, 2K) each, best first
            beams.scores, log_probs.view(n, K, vocab_size), num_candidates
        )
        rows = torch.arange(n, device=device)[:, None] * K + top_beam             # source rows (n, 2K)
        if has_attention:
            step_weights = step_weights.float()
        is_eos = top_token == eos
        finishing = is_eos & torch.isfinite(top_scores)
        finishing[:, K:] = False                         # an <eos> finishes only among the K best
        finished = _eos_candidates(finishing, top_scores, rows, beams.history, beams.attention,
                                   step_weights, penalty)
        # The live beams: the K best continuations that do not end in <eos> (there are always >= K).
        order = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :K]
        keep_rows = rows.gather(1, order).view(-1)
        history = torch.cat([beams.history[keep_rows], top_token.gather(1, order).view(-1, 1)], 1)
        attention = (None if beams.attention is None
                     else torch.cat([beams.attention[keep_rows], step_weights[keep_rows][:, None]], 1))
        kept = _Beams(beams.sentences, top_scores.gather(1, order), history, attention,
                      fast.index_select(state, keep_rows))
        at_limit = [limits[s] <= t + 1 for s in kept.sentences]
        for b, _ in finished:
            num_finished[kept.sentences[b]] += 1
        done = [num_finished[s] >= K or at_limit[b] for b, s in enumerate(kept.sentences)]
        if any(at_limit):                  # at its limit, a sentence's live prefixes join the candidates
            room = [max(0, K - num_finished[s]) if at_limit[b] else 0 for b, s in enumerate(kept.sentences)]
            finished += _live_candidates(room, kept.scores, kept.history, kept.attention, penalty)
        yield BeamStep(t, beams.sentences, beams.history, beams.scores, step_weights, top_scores, top_beam,
                       top_token, finishing, order, [(beams.sentences[b], c) for b, c in finished], penalty)
        if all(done):
            return
        beams = _without_done(kept, done, K) if any(done) else kept
        y = beams.history[:, -1]


def _without_done(beams: _Beams, done: list[bool], K: int) -> _Beams:
    """The beams of the sentences not done (their K rows each); done: one flag per sentence."""
    keep = [b for b in range(len(done)) if not done[b]]
    index = torch.tensor(keep, dtype=torch.long, device=beams.scores.device)
    row_index = (index[:, None] * K + torch.arange(K, device=index.device)).view(-1)
    return _Beams([beams.sentences[b] for b in keep], beams.scores[index], beams.history[row_index],
                  None if beams.attention is None else beams.attention[row_index],
                  fast.index_select(beams.state, row_index))


def _eos_candidates(finishing: Tensor, top_scores: Tensor, rows: Tensor, history: Tensor,
                    attention: Tensor | None, step_weights: Tensor | None,
                    penalty: float) -> list[tuple[int, Candidate]]:
    """The finished hypotheses of one step, as (batch position b, candidate) pairs.

    finishing, top_scores, rows: (n, 2K), which of each sentence's best continuations finish here, their
    scores and the live rows they extend; history (n K, t); attention (n K, t, S) or None; step_weights
    (n K, S) or None. The hits are read into Python together (on a GPU, one wait, not one per hypothesis).
    """
    hits = finishing.nonzero()
    if not hits.numel():
        return []
    hit_sentences, hit_rows = hits[:, 0].tolist(), rows[hits[:, 0], hits[:, 1]]
    hit_scores, hit_tokens = top_scores[hits[:, 0], hits[:, 1]].tolist(), history[hit_rows].tolist()
    hit_attention = (None if attention is None
                     else torch.cat([attention[hit_rows], step_weights[hit_rows][:, None]], 1))
    return [(b, Candidate(score / penalty, score, hit_tokens[i],
                          None if hit_attention is None else hit_attention[i], True))
            for i, (b, score) in enumerate(zip(hit_sentences, hit_scores, strict=True))]


def _live_candidates(room: list[int], beam_scores: Tensor, history: Tensor, attention: Tensor | None,
                     penalty: float) -> list[tuple[int, Candidate]]:
    """Unfinished hypotheses, as (batch position b, candidate) pairs: the first room[b] live prefixes of
    sentence b with a finite score, best first (room 0 for a sentence not at its limit).

    beam_scores: (n, K); history: (n K, t); attention: (n K, t, S) or None.
    """
    live_scores, live_tokens = beam_scores.tolist(), history.tolist()
    K = beam_scores.shape[1]
    candidates = []
    for b, scores in enumerate(live_scores):
        for k in [k for k in range(K) if math.isfinite(scores[k])][:room[b]]:
            row = b * K + k
            candidates.append((b, Candidate(scores[k] / penalty, scores[k], live_tokens[row],
                                             None if attention is None else attention[row], False)))
    return candidates


def _best_hypotheses(finished: list[list[Candidate]], src_valid_lens: Tensor) -> list[Hypothesis]:
    """Each sentence's best candidate by log P / lp(L), its attention cut to the sentence's source length."""
    best = [best_candidate(candidates) for candidates in finished]
    attention_rows = _to_cpu([None if c.attention is None else c.attention[:, :n]
                              for c, n in zip(best, src_valid_lens.tolist(), strict=True)])
    return [Hypothesis(c.tokens, rows, float(c.score), c.finished)
            for c, rows in zip(best, attention_rows, strict=True)]


def _to_cpu(tensors: list[Tensor | None]) -> list[Tensor | None]:
    """Float32 CPU copies of tensors of different shapes, moved off the device in one transfer."""
    if not tensors or tensors[0] is None:
        return tensors
    flat = torch.cat([t.reshape(-1) for t in tensors]).float().cpu()
    parts = flat.split([t.numel() for t in tensors])
    return [part.view(t.shape) for part, t in zip(parts, tensors, strict=True)]


def translate(model: Seq2Seq, sentences: Sequence[str | Sequence[str]], src_vocab, tgt_vocab, *,
              beam_size: int = 1, max_len: int | None = None, batch_size: int = 128,
              length_penalty_alpha: float = 0.75, length_norm: str = "power") -> list[Translation]:
    """Translate sentences (strings split on whitespace, or token lists) with greedy (beam_size=1) or beam
    search, in batches of similar length on the model's device; results in the input order.

    src_vocab / tgt_vocab: attn_course.data.tasks.Vocab (unknown source tokens become <unk>).
    """
    if isinstance(sentences, str):
        raise ValueError("sentences is one str, expected a list of sentences (wrap it: [sentence])")
    token_lists = [s.split() if isinstance(s, str) else list(s) for s in sentences]
    for i, tokens in enumerate(token_lists):
        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"sentences[{i}] is {sentences[i]!r}, expected a non-empty list of str tokens")
    check_positive_int("batch_size", batch_size)
    order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
    results: list[Translation | None] = [None] * len(token_lists)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        ids = [src_vocab[token_lists[i]] + [src_vocab.eos] for i in chunk]
        width = max(len(row) for row in ids)
        src = torch.tensor([row + [src_vocab.pad] * (width - len(row)) for row in ids], dtype=torch.long)
        lens = torch.tensor([len(row) for row in ids], dtype=torch.long)
        if beam_size == 1:
            hyps = greedy_decode(model, src, lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos, max_len=max_len)
        else:
            hyps = beam_search(model, src, lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos, max_len=max_len,
                               beam_size=beam_size, length_penalty_alpha=length_penalty_alpha,
                               length_norm=length_norm)
        for i, row, hyp in zip(chunk, ids, hyps, strict=True):
            source = fast.to_tokens(src_vocab, row)      # unknown words as <unk>, then <eos>
            target = list(fast.to_tokens(tgt_vocab, hyp.tokens)) if hyp.tokens else []
            results[i] = Translation(source, target, hyp.attention, hyp.score, hyp.finished)
    return results
