"""Scoring trained models on held-out examples: BLEU of their translations, the alignment error of their
attention under forced decoding, and where local attention centres its window.

    scores = evaluate(model, data)          # perplexity, BLEU, exact match, AER and accuracy per convention
    forced = accuracy_by_position(model, data.test, data)                     # exposure bias (chapter 9):
    free = accuracy_by_position(model, data.test, data, free_running=True)    # fed its own words instead
    attention = forced_attention(model, data.test, data)
    aer, accuracy = alignment_scores(attention, data.test, convention="output")

Translations come from `attn_course.models.decoding.translate`; the alignment metrics from
`attn_course.measure.metrics`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import torch

from attn_course.data.tasks import Example, TaskData, make_batch
from attn_course.measure.metrics import (
    CONVENTIONS,
    attention_to_links,
    corpus_alignment_accuracy,
    corpus_alignment_error_rate,
    corpus_bleu,
    exact_match,
)
from attn_course.models.decoders import LuongDecoder, top_layer
from attn_course.models.decoding import translate
from attn_course.models.modes import eval_mode
from attn_course.models.seq2seq import Seq2Seq
from attn_course.training.loop import evaluate_loss, scheduled_sampling_logits


def _batches(examples: Sequence[Example], batch_size: int):
    """Chunks of (positions, examples), sorted by source length so little of each batch is padding."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].src))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        yield chunk, [examples[i] for i in chunk]


def translations(model: Seq2Seq, examples: Sequence[Example], data: TaskData,
                 **options: Any) -> list[list[str]]:
    """The model's translations of the examples' sources, as token lists without <eos>.

    options go to `attn_course.models.decoding.translate`: greedy search unless beam_size > 1, batch_size, ...
    """
    found = translate(model, [e.src for e in examples], data.src_vocab, data.tgt_vocab, **options)
    return [translation.target for translation in found]


@torch.no_grad()
def forced_attention(model: Seq2Seq, examples: Sequence[Example], data: TaskData, *,
                     batch_size: int = 128) -> list[torch.Tensor]:
    """The attention of every decoder step when the model is fed the reference ("forced decoding").

    Returns, per example, a CPU tensor (len(tgt) + 1, len(src) + 1): row t is the step fed y_{t-1} that
    predicts y_t (the last row predicts <eos>), column i is source word i (the last column is <eos>).
    """
    if not model.decoder.has_attention:
        raise ValueError(f"a {type(model.decoder).__name__} has no attention to align with")
    device = next(model.parameters()).device
    results: list[torch.Tensor | None] = [None] * len(examples)
    # No gradients here: an RNN model's attention scores take their faster form (attn_course.attention.fast)
    options = {"fast_scores": True} if isinstance(model, Seq2Seq) else {}
    with eval_mode(model):
        for chunk, part in _batches(examples, batch_size):
            batch = make_batch(part, data.src_vocab, data.tgt_vocab).to(device)
            _, attention = model(batch.src, batch.src_valid_lens, batch.tgt_in, **options)
            for k, (i, example) in enumerate(zip(chunk, part, strict=True)):
                results[i] = attention[k, : len(example.tgt) + 1, : len(example.src) + 1].float().cpu()
    return results


@torch.no_grad()
def accuracy_by_position(model: Seq2Seq, examples: Sequence[Example], data: TaskData, *,
                         free_running: bool = False, batch_size: int = 128) -> tuple[list[float], list[int]]:
    """Next-word accuracy at every target position: teacher-forced, or free running.

    Position t is target token t (t = len(tgt) is <eos>). Teacher-forced (free_running=False): step t is
    fed the reference y_{t-1}; free running: it is fed the model's own argmax of step t - 1 (greedy decoding
    that never stops early), so its mistakes feed later steps: the gap between the two is exposure bias
    (Bengio et al. 2015; Ranzato et al. 2016). Returns (accuracy, count) per position: the share of the
    examples long enough to have a token there whose argmax prediction is that token, and how many there are.
    """
    device = next(model.parameters()).device
    correct: list[int] = []
    count: list[int] = []
    with eval_mode(model):
        for _, part in _batches(examples, batch_size):
            batch = make_batch(part, data.src_vocab, data.tgt_vocab).to(device)
            logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in,
                                               0.0 if free_running else 1.0)
            num_steps = batch.tgt_out.shape[1]
            real = torch.arange(num_steps, device=device)[None] < batch.tgt_valid_lens[:, None]
            hits = ((logits.argmax(-1) == batch.tgt_out) & real).sum(0).tolist()
            for t, (hit, n) in enumerate(zip(hits, real.sum(0).tolist(), strict=True)):
                if t == len(correct):
                    correct.append(0)
                    count.append(0)
                correct[t] += hit
                count[t] += n
    if not count:
        raise ValueError("examples is empty: there is no position to score")
    return [c / n if n else math.nan for c, n in zip(correct, count, strict=True)], count


def alignment_scores(attention: Sequence[torch.Tensor], examples: Sequence[Example], *,
                     convention: str) -> tuple[float, float]:
    """(AER, argmax accuracy) of forced-decoding attention matrices against the examples' gold links.

    attention: per example (len(tgt) + 1, len(src) + 1), as `forced_attention` returns.
    """
    predicted = [attention_to_links(a, convention=convention, src_len=len(e.src), tgt_len=len(e.tgt))
                 for a, e in zip(attention, examples, strict=True)]
    sure = [e.sure for e in examples]
    possible = [e.possible for e in examples]
    return (corpus_alignment_error_rate(predicted, sure, possible),
            corpus_alignment_accuracy(predicted, sure, possible))


def evaluate(model: Seq2Seq, data: TaskData, examples: Sequence[Example] | None = None, *,
             batch_size: int = 128) -> dict[str, float | None]:
    """Test perplexity, corpus BLEU and exact match of greedy translations, and AER/accuracy per convention.

    examples: default data.test. Alignment scores are None for a model without attention.
    """
    examples = data.test if examples is None else list(examples)
    loss = evaluate_loss(model, data.loader(examples, batch_size), device=next(model.parameters()).device)
    hyps = translations(model, examples, data, batch_size=batch_size)
    refs = [e.tgt for e in examples]
    scores: dict[str, float | None] = {
        "perplexity": math.exp(loss),
        "bleu": corpus_bleu(hyps, refs),
        "exact_match": exact_match(hyps, refs),
    }
    attention = forced_attention(model, examples, data) if model.decoder.has_attention else None
    for convention in CONVENTIONS:
        aer = accuracy = None
        if attention is not None:
            aer, accuracy = alignment_scores(attention, examples, convention=convention)
        scores[f"aer_{convention}"] = aer
        scores[f"accuracy_{convention}"] = accuracy
    return scores


@torch.no_grad()
def window_centres(model: Seq2Seq, examples: Sequence[Example], data: TaskData) -> list[torch.Tensor]:
    """Local attention's window centres p_t under forced decoding, per example a CPU tensor (len(tgt) + 1,).

    p_t of step t (fed y_{t-1}, predicting y_t): t (clamped) for local-m, S_i·sigmoid(v_pᵀ tanh(W_p h_t))
    for local-p (Luong et al. 2015, eq. 9), from `LuongDecoder.centres`.
    """
    decoder = model.decoder
    if not isinstance(decoder, LuongDecoder) or decoder.alignment == "global":
        raise ValueError("window_centres needs a LuongDecoder with alignment='local-m' or 'local-p' "
                         "(ModelConfig's attention=)")
    device = next(model.parameters()).device
    results: list[torch.Tensor | None] = [None] * len(examples)
    with eval_mode(model):
        for chunk, part in _batches(examples, 128):
            batch = make_batch(part, data.src_vocab, data.tgt_vocab).to(device)
            state = decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
            centres = []
            for t in range(batch.tgt_in.shape[1]):
                _, state, _ = decoder.step(batch.tgt_in[:, t], state)
                query = top_layer(state.hidden)[:, None]                         # h_t: (B, 1, H)
                centres.append(decoder.centres(query, t, batch.src_valid_lens)[:, 0])
            centres = torch.stack(centres, 1).float().cpu()                      # (B, T)
            for k, (i, example) in enumerate(zip(chunk, part, strict=True)):
                results[i] = centres[k, : len(example.tgt) + 1]
    return results


def centre_statistics(centres: Sequence[torch.Tensor], examples: Sequence[Example]) -> dict[str, float]:
    """How well window centres follow the gold alignment, over every target word with one sure link.

    centres: per example (len(tgt) + 1,), as `window_centres` returns; step t is compared with the
    source position of the word it predicts (the "output" convention). Returns
    centre_error: mean |p_t - gold source position|, in positions;
    centre_slope: the least-squares slope of p_t against t within sentences (+1 follows the diagonal,
    -1 the reversal's anti-diagonal, 0 a fixed position).
    """
    errors, pairs = [], []
    for p, example in zip(centres, examples, strict=True):
        gold = {}
        for i, j in example.sure:
            gold.setdefault(j, []).append(i)
        steps = [j for j in range(len(example.tgt)) if len(gold.get(j, ())) == 1]
        if len(steps) < 2:
            continue
        values = [float(p[j]) for j in steps]
        errors += [abs(v - gold[j][0]) for v, j in zip(values, steps, strict=True)]
        mean_t, mean_p = statistics.fmean(steps), statistics.fmean(values)
        pairs += [(j - mean_t, v - mean_p) for j, v in zip(steps, values, strict=True)]
    if not errors:
        raise ValueError("no example has two or more target words with exactly one sure link")
    slope = sum(dt * dp for dt, dp in pairs) / sum(dt * dt for dt, _ in pairs)
    return {"centre_error": statistics.fmean(errors), "centre_slope": slope}
