"""The checks of chapters 9 and 10 measured on learners' answers written from the prompts alone: every correct
alternative passes, every wrong answer is rejected, at least 80 % of each question's rejections name or locate
the mistake (the message holds one of the answer's phrases), every named mistake is the verdict on some wrong
answer, and an answer that hands the work to the course's own function is refused by name."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import NamedTuple

import pytest
import torch
from conftest import LearnersAnswers

import attn_course_exercises as checks
from attn_course_exercises import ch9_dynamics, ch10_diagnosis
from attn_course_exercises.core import Exercise

ROOT = Path(__file__).resolve().parents[2]
#: The share of a question's wrong answers whose message must name or locate the mistake.
NAMED_AT_LEAST = 0.80
#: Chapters 9 and 10's exercises in order, whether or not the package's registry lists them yet.
CHAPTER_9 = (ch9_dynamics.EXPOSURE, ch9_dynamics.HALF_WAY, ch9_dynamics.SEED_NOISE)
CHAPTER_10 = (ch10_diagnosis.MEAN_ENTROPY, ch10_diagnosis.MEAN_CONCENTRATION, ch10_diagnosis.DIAGNOSIS,
              ch10_diagnosis.PREDICTIONS)
EXERCISES: dict[str, Exercise] = {**checks.EXERCISES, **{e.key: e for e in CHAPTER_9 + CHAPTER_10}}
KEYS = tuple(e.key for e in CHAPTER_9 + CHAPTER_10)


@pytest.fixture(autouse=True)
def _every_exercise_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness looks exercises up in the package's registry: show it chapters 9 and 10 in full."""
    monkeypatch.setattr(checks, "EXERCISES", EXERCISES)


class Answer(NamedTuple):
    key: str
    label: str
    phrases: tuple[str, ...] | None  # None: a correct alternative
    source: str


ANSWERS: list[Answer] = []


def ok(key: str, label: str, source: str) -> None:
    ANSWERS.append(Answer(key, label, None, source))


def wrong(key: str, label: str, phrases: list[str], source: str) -> None:
    ANSWERS.append(Answer(key, label, tuple(phrases), source))


def define(key: str, source: str) -> object:
    """The function `source` defines, after the chapter's set-up imports, as the grader runs it."""
    namespace: dict = {"__name__": "__main__"}
    exec(checks.PREAMBLES[int(key[2 : key.index(".")])], namespace)
    exec(source, namespace)
    return namespace[EXERCISES[key].name]


# ---------------------------------------------------------------------------------------------------------
# ch9.q1 free_running_accuracy

K = "ch9.q1"
ok(K, "position by position, softmax before the argmax, counts in Python", """
def free_running_accuracy(model, batch):
    with torch.no_grad():
        state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
        y = batch.tgt_in[:, 0]
        accuracy, count = [], []
        for t in range(batch.tgt_out.shape[1]):
            logits, state, _ = model.decoder.step(y, state)
            y = torch.softmax(logits, dim=-1).argmax(dim=-1)
            real = batch.tgt_valid_lens > t
            n = int(real.sum())
            count.append(n)
            accuracy.append(int(((y == batch.tgt_out[:, t]) & real).sum()) / n)
    return accuracy, count
""")
ok(K, "one sentence at a time", """
def free_running_accuracy(model, batch):
    T = batch.tgt_out.shape[1]
    hits, count = [0] * T, [0] * T
    for b in range(batch.src.shape[0]):
        state = model.decoder.init_state(model.encode(batch.src[b:b + 1], batch.src_valid_lens[b:b + 1]))
        y = batch.tgt_in[b:b + 1, 0]
        for t in range(int(batch.tgt_valid_lens[b])):
            logits, state, _ = model.decoder.step(y, state)
            y = logits.argmax(-1)
            hits[t] += int(y.item() == batch.tgt_out[b, t].item())
            count[t] += 1
    return [h / n for h, n in zip(hits, count)], count
""")
wrong(K, "feeds the reference word", ["teacher-forced", "reference word"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    preds = []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(batch.tgt_in[:, t], state)
        preds.append(logits.argmax(-1))
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_out) & real).sum(0) / n).tolist(), n.tolist()
""")
wrong(K, "never updates the input", ["<bos>"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y = batch.tgt_in[:, 0]
    preds = []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        preds.append(logits.argmax(-1))
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_out) & real).sum(0) / n).tolist(), n.tolist()
""")
wrong(K, "compares with tgt_in", ["tgt_in"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y)
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_in) & real).sum(0) / n).tolist(), n.tolist()
""")
wrong(K, "divides by the batch size", ["padded"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y)
    preds = torch.stack(preds, 1)
    B = preds.shape[0]
    return [float(x) for x in (preds == batch.tgt_out).float().mean(0)], [B] * preds.shape[1]
""")
wrong(K, "stops a sentence at its first <eos>", ["<eos>", "never stops early"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    done = torch.zeros_like(y, dtype=torch.bool)
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y.masked_fill(done, -1))
        done = done | (y == 2)
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_out) & real).sum(0) / n).tolist(), n.tolist()
""")
wrong(K, "stops at <eos> and leaves the rest out", ["<eos>", "never stops early"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y = batch.tgt_in[:, 0]
    done = torch.zeros_like(y, dtype=torch.bool)
    accuracy, count = [], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        real = (batch.tgt_valid_lens > t) & ~done
        count.append(int(real.sum()))
        accuracy.append(float(((y == batch.tgt_out[:, t]) & real).sum()) / max(count[-1], 1))
        done = done | (y == 2)
    return accuracy, count
""")
wrong(K, "tensors instead of numbers", ["tensor", "python numbers"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y)
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return list(((preds == batch.tgt_out) & real).sum(0) / n), list(n)
""")
wrong(K, "one accuracy over all tokens", ["one number", "every position"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y)
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    return float(((preds == batch.tgt_out) & real).sum() / real.sum())
""")
wrong(K, "returns only the accuracies", ["counts too"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y)
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    return (((preds == batch.tgt_out) & real).sum(0) / real.sum(0)).tolist()
""")
wrong(K, "argmax over the batch axis", ["last axis", "vocabulary"], """
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(0)
        preds.append(y)
    preds = torch.stack(preds, 1)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_out) & real).sum(0) / n).tolist(), n.tolist()
""")
wrong(K, "writes its own words into the caller's batch.tgt_in", ["batch.tgt_in", "in place"], """
@torch.no_grad()
def free_running_accuracy(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    T = batch.tgt_in.shape[1]
    hits = torch.zeros(T)
    for t in range(T):
        logits, state, _ = model.decoder.step(batch.tgt_in[:, t], state)
        y = logits.argmax(-1)
        if t + 1 < T:
            batch.tgt_in[:, t + 1] = y          # the next step reads my own word
        real = batch.tgt_valid_lens > t
        hits[t] = ((y == batch.tgt_out[:, t]) & real).sum()
    count = [int((batch.tgt_valid_lens > t).sum()) for t in range(T)]
    return [h / n for h, n in zip(hits.tolist(), count)], count
""")
wrong(K, "hands the decoding to the package", ["course's own"], """
from attn_course.training.loop import scheduled_sampling_logits

def free_running_accuracy(model, batch):
    logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.0)
    real = torch.arange(logits.shape[1], device=logits.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((logits.argmax(-1) == batch.tgt_out) & real).sum(0) / n).tolist(), n.tolist()
""")

# ---------------------------------------------------------------------------------------------------------
# ch9.q2 k_for_half

K = "ch9.q2"
ok(K, "Newton's method on k ln k = i from the right", """
def k_for_half(step):
    k = step + 2.0
    for _ in range(200):
        new = k - (k * math.log(k) - step) / (math.log(k) + 1)
        if abs(new - k) <= 1e-15 * k:
            break
        k = new
    return max(k, 1.0)
""")
ok(K, "bisection on u = ln k, where u e^u = i", """
def k_for_half(step):
    lo, hi = 0.0, math.log(step + 2.0)
    while hi - lo > 1e-13:
        mid = (lo + hi) / 2
        if mid * math.exp(mid) < step:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)
""")
wrong(K, "k = i", ["k ln k"], """
def k_for_half(step):
    return float(step)
""")
wrong(K, "bisection on [1, i]", ["interval", "small steps"], """
def k_for_half(step):
    lo, hi = 1.0, max(float(step), 1.0)
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid * math.log(mid) < step:
            lo = mid
        else:
            hi = mid
    return lo
""")
wrong(K, "five fixed-point iterations, k = i / ln k", ["ln k", "log 1", "k = 1"], """
def k_for_half(step):
    k = float(step)
    for _ in range(5):
        k = step / math.log(k)
    return k
""")
wrong(K, "the fixed-point iteration k = i / ln k, step 0 handled", ["went to 0 or below", "below 1"], """
def k_for_half(step):
    if step == 0:
        return 1.0
    k = step + 1.0
    for _ in range(100):
        k = step / math.log(k)
    return k
""")
wrong(K, "the fixed-point iteration from k = i, 0 handled", ["ln 1", "k = i"], """
def k_for_half(step):
    if step == 0:
        return 1.0
    k = float(step)
    for _ in range(60):
        k = step / math.log(k)
    return k
""")
wrong(K, "the first-order approximation i / ln i", ["iteration", "k ln k"], """
def k_for_half(step):
    if step < 3:
        return 1.0
    return step / math.log(step)
""")
wrong(K, "log base 10", ["base"], """
def k_for_half(step):
    lo, hi = 1.0, step + 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid * math.log10(mid) < step:
            lo = mid
        else:
            hi = mid
    return mid
""")
wrong(K, "solves for the step after", ["one step late", "count from 0"], """
def k_for_half(step):
    i = step + 1
    lo, hi = 1.0, i + 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid * math.log(mid) < i:
            lo = mid
        else:
            hi = mid
    return mid
""")
wrong(K, "a tensor from torch's Newton", ["tensor", "python numbers"], """
def k_for_half(step):
    k = torch.tensor(step + 2.0, dtype=torch.float64)
    for _ in range(100):
        k = k - (k * torch.log(k) - step) / (torch.log(k) + 1)
    return k
""")
wrong(K, "bisection stopped early", ["expected 0.5"], """
def k_for_half(step):
    lo, hi = 1.0, step + 2.0
    while hi - lo > 1e-2:
        mid = (lo + hi) / 2
        if mid * math.log(mid) < step:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
""")
ok(K, "bisection on exp(i / k) = k itself", """
def k_for_half(step):
    lo, hi = 1.0, step + 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.exp(step / mid) > mid:
            lo = mid
        else:
            hi = mid
    return mid
""")
wrong(K, "the fixed point k = exp(i / k) from k = 1", ["overflow"], """
def k_for_half(step):
    k = 1.0
    for _ in range(100):
        k = math.exp(step / k)
    return k
""")
wrong(K, "forgot the k in the denominator", ["denominator"], """
def k_for_half(step):
    lo, hi = 1.0, step + 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1 + math.exp(min(step / mid, 700)) > 2 * mid:
            lo = mid
        else:
            hi = mid
    return mid
""")

# ---------------------------------------------------------------------------------------------------------
# ch10: shared pieces of learners' answers

MASKS = """
    B, T, S = weights.shape
    steps = torch.arange(T, device=weights.device)[None, :] < tgt_valid_lens[:, None]
    keys = torch.arange(S, device=weights.device)[None, None, :] < src_valid_lens[:, None, None]
"""

K = "ch10.q1"
ok(K, "a loop over sentences in float32, xlogy", """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):
    total, steps = 0.0, 0
    for b in range(weights.shape[0]):
        S, T = int(src_valid_lens[b]), int(tgt_valid_lens[b])
        rows = weights[b, :T, :S].float()
        p = rows / rows.sum(-1, keepdim=True)
        h = -torch.special.xlogy(p, p).sum(-1)
        if S > 1:
            total += float((h / math.log(S)).sum())
        steps += T
    return total / steps
""")
ok(K, "masked_fill and nan_to_num in float64", """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double().masked_fill(~keys, 0)
    p = w / w.sum(-1, keepdim=True)
    h = torch.nan_to_num(-(p * p.log())).sum(-1)
    logS = src_valid_lens.double().log()[:, None].expand_as(h)
    norm = torch.where(logS > 0, h / logS, torch.zeros_like(h))
    return float(norm[steps].sum() / steps.sum())
""")
wrong(K, "rows used as given", ["sum to 1", "divide each real row"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    h = -torch.special.xlogy(w, w).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    norm = torch.where(logS > 0, h / logS, 0.0)
    return norm[steps].mean().item()
""")
wrong(K, "epsilon in the weights' own dtype", ["float16", "nan"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights * keys
    p = w / w.sum(-1, keepdim=True)
    h = -(p * torch.log(p + 1e-12)).sum(-1).double()
    logS = src_valid_lens.double().log()[:, None]
    norm = torch.where(logS > 0, h / logS, 0.0)
    return norm[steps].mean().item()
""")
wrong(K, "in the weights' own dtype, xlogy", ["bfloat16", "own dtype"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = torch.where(keys, weights, torch.zeros_like(weights))
    p = w / w.sum(-1, keepdim=True)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.log().to(h.dtype)[:, None]
    norm = torch.where(logS > 0, h / logS, torch.zeros_like(h))
    return norm[steps].mean().item()
""")
wrong(K, "everything cast to bfloat16 to save memory", ["bfloat16"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.bfloat16() * keys
    p = w / w.sum(-1, keepdim=True)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.log().bfloat16()[:, None]
    norm = torch.where(logS > 0, h / logS, torch.zeros_like(h))
    return norm[steps].float().mean().item()
""")
wrong(K, "float64, but p log p unguarded", ["0 log 0", "xlogy"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True)
    h = -(p * torch.log(p)).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    norm = torch.where(logS > 0, h / logS, torch.zeros_like(h))
    return norm[steps].mean().item()
""")
wrong(K, "every step in the mean", ["padded decoder steps"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    return torch.where(logS > 0, h / logS, 0.0).mean().item()
""")
wrong(K, "log of the padded width", ["num_keys", "padded width"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True)
    h = -torch.special.xlogy(p, p).sum(-1) / math.log(S)
    return h[steps].mean().item()
""")
wrong(K, "mean per sentence first", ["per sentence"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    norm = torch.where(logS > 0, h / logS, 0.0) * steps
    return (norm.sum(1) / steps.sum(1)).mean().item()
""")
wrong(K, "the mean as a tensor", ["tensor", "python numbers"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    return torch.where(logS > 0, h / logS, 0.0)[steps].mean()
""")
wrong(K, "rows normalised over every key", ["padded keys"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double()
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    return torch.where(logS > 0, h / logS, 0.0)[steps].mean().item()
""")
wrong(K, "0 / log 1 for a one-key sentence", ["one real key", "0 / 0"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    h = -torch.special.xlogy(p, p).sum(-1) / src_valid_lens.double().log()[:, None]
    return h[steps].mean().item()
""")
wrong(K, "not normalised", ["not normalised"], """
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    return (-torch.special.xlogy(p, p).sum(-1))[steps].mean().item()
""")
wrong(K, "wraps the package", ["course's own"], """
from attn_course.measure import diagnostics

def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = (weights.double() * keys * steps[..., None])
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    return diagnostics.mean_entropy(w, src_valid_lens, tgt_valid_lens, normalise=True)
""")

K = "ch10.q2"
ok(K, "a loop over sentences", """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):
    shares = []
    for b in range(weights.shape[0]):
        rows = weights[b, : int(tgt_valid_lens[b]), : int(src_valid_lens[b])].double()
        rows = rows / rows.sum(dim=1, keepdim=True)
        column = rows.sum(0)
        shares.append(float(column.max() / column.sum()))
    return sum(shares) / len(shares)
""")
ok(K, "einsum over a step mask, float32", """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.float() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    columns = torch.einsum("bt,btk->bk", steps.float(), p)
    return (columns.amax(-1) / tgt_valid_lens.float()).mean().item()
""")
wrong(K, "every step counted", ["padded decoder steps"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    col = p.sum(1)
    return (col.max(-1).values / col.sum(-1)).mean().item()
""")
wrong(K, "rows as given", ["as they are", "divide each real row"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys * steps[..., None]
    col = w.sum(1)
    return (col.max(-1).values / col.sum(-1)).mean().item()
""")
wrong(K, "each row's peak", ["largest weight", "column"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    peaks = (p.max(-1).values * steps).sum(1) / steps.sum(1)
    return peaks.mean().item()
""")
wrong(K, "divided by num_steps", ["num_steps"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    return (p.sum(1).max(-1).values / T).mean().item()
""")
wrong(K, "pooled over the batch", ["pooled", "per sentence"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    col = p.sum(1)
    return (col.max(-1).values.sum() / col.sum()).item()
""")
wrong(K, "in the weights' own dtype", ["bfloat16", "own dtype"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights * keys * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-4)
    col = p.sum(1)
    return (col.max(-1).values / col.sum(-1)).mean().item()
""")
wrong(K, "a loop per sentence in bfloat16", ["bfloat16"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):
    shares = []
    for b in range(weights.shape[0]):
        rows = weights[b, : int(tgt_valid_lens[b]), : int(src_valid_lens[b])].bfloat16()
        rows = rows / rows.sum(dim=1, keepdim=True)
        column = rows.sum(0)
        shares.append((column.max() / column.sum()).item())
    return sum(shares) / len(shares)
""")
wrong(K, "a tensor per sentence", ["tensor", "python numbers"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    col = p.sum(1)
    return col.max(-1).values / col.sum(-1)
""")
wrong(K, "every key counted", ["padded keys"], """
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    col = p.sum(1)
    return (col.max(-1).values / col.sum(-1)).mean().item()
""")

ENTROPY_AND_CONCENTRATION = """
def _numbers(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = torch.where(steps[..., None] & keys, weights.double(), 0.0)
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    col = p.sum(1)
    c = (col.max(-1).values / col.sum(-1)).mean().item()
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    h = torch.where(logS > 0, h / logS, 0.0)[steps].mean().item()
    return h, c
"""

K = "ch10.q3"
ok(K, "other thresholds, both numbers", ENTROPY_AND_CONCENTRATION + """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    h, c = _numbers(weights, src_valid_lens, tgt_valid_lens)
    if h > 0.95:
        return "frozen"
    return "lazy" if c > 0.5 else "healthy"
""")
ok(K, "concentration in fair shares (C times S), loop per sentence", """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    fair, ent, n = [], 0.0, 0
    for b in range(weights.shape[0]):
        S, T = int(src_valid_lens[b]), int(tgt_valid_lens[b])
        p = weights[b, :T, :S].double()
        p = p / p.sum(-1, keepdim=True)
        col = p.sum(0)
        fair.append(float(col.max() / col.sum()) * S)
        ent += float((-torch.special.xlogy(p, p).sum(-1) / math.log(S)).sum())
        n += T
    if sum(fair) / len(fair) > 3:
        return "lazy"
    return "frozen" if ent / n > 0.85 else "healthy"
""")
wrong(K, "entropy alone", ["entropy alone"], ENTROPY_AND_CONCENTRATION + """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    h, c = _numbers(weights, src_valid_lens, tgt_valid_lens)
    return "frozen" if h > 0.9 else "healthy"
""")
wrong(K, "concentration alone", ["concentration alone"], ENTROPY_AND_CONCENTRATION + """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    h, c = _numbers(weights, src_valid_lens, tgt_valid_lens)
    return "lazy" if c > 0.6 else "healthy"
""")
wrong(K, "frozen and lazy mixed up", ["swapped"], ENTROPY_AND_CONCENTRATION + """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    h, c = _numbers(weights, src_valid_lens, tgt_valid_lens)
    if c >= 0.6:
        return "frozen"
    return "lazy" if h >= 0.9 else "healthy"
""")
wrong(K, "the package's words", ["package's words"], ENTROPY_AND_CONCENTRATION + """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    h, c = _numbers(weights, src_valid_lens, tgt_valid_lens)
    if c >= 0.6:
        return "collapsed"
    return "near-uniform" if h >= 0.9 else "looking"
""")
wrong(K, "rows as given", ["sum to 1"], """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    p = torch.where(steps[..., None] & keys, weights.double(), 0.0)
    col = p.sum(1)
    c = (col.max(-1).values / col.sum(-1)).mean().item()
    h = -torch.special.xlogy(p, p).sum(-1) / src_valid_lens.double().log()[:, None]
    h = h[steps].mean().item()
    if c >= 0.6:
        return "lazy"
    return "frozen" if h >= 0.9 else "healthy"
""")
wrong(K, "epsilon in half precision", ["half-precision", "float16"], """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights * keys * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-4)
    col = p.sum(1)
    c = (col.max(-1).values / col.sum(-1)).mean().item()
    h = -(p * torch.log(p + 1e-12)).sum(-1) / src_valid_lens.log()[:, None].to(p.dtype)
    h = h[steps].mean().item()
    if c >= 0.6:
        return "lazy"
    return "frozen" if h >= 0.9 else "healthy"
""")
wrong(K, "padded steps counted", ["padded decoder steps"], """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * keys
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    col = p.sum(1)
    c = (col.max(-1).values / col.sum(-1)).mean().item()
    h = (-torch.special.xlogy(p, p).sum(-1) / src_valid_lens.double().log()[:, None])[steps].mean().item()
    if c >= 0.6:
        return "lazy"
    return "frozen" if h >= 0.9 else "healthy"
""")
wrong(K, "padded keys counted", ["padded keys"], """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = weights.double() * steps[..., None]
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    col = p.sum(1)
    c = (col.max(-1).values / col.sum(-1)).mean().item()
    h = (-torch.special.xlogy(p, p).sum(-1) / src_valid_lens.double().log()[:, None])[steps].mean().item()
    if c >= 0.6:
        return "lazy"
    return "frozen" if h >= 0.9 else "healthy"
""")
wrong(K, "the package's diagnose, renamed", ["course's own"], """
from attn_course.measure.diagnostics import diagnose

def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = torch.where(steps[..., None] & keys, weights.double(), 0.0)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    verdict = diagnose(w, src_valid_lens, tgt_valid_lens).verdict
    return {"looking": "healthy", "near-uniform": "frozen", "collapsed": "lazy"}[verdict]
""")

wrong(K, "very low entropy read as lazy", ["low entropy", "sharp"], ENTROPY_AND_CONCENTRATION + """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    h, c = _numbers(weights, src_valid_lens, tgt_valid_lens)
    if h < 0.1:
        return "lazy"
    if h > 0.9:
        return "frozen"
    return "lazy" if c > 0.6 else "healthy"
""")
wrong(K, "looks for laziness on <eos> only", ["<eos>", "any one position"], """
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):""" + MASKS + """
    w = torch.where(steps[..., None] & keys, weights.double(), 0.0)
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    last = torch.nn.functional.one_hot(src_valid_lens - 1, S).double()
    on_eos = (p * last[:, None, :]).sum((1, 2)) / steps.sum(1)
    h = -torch.special.xlogy(p, p).sum(-1)
    logS = src_valid_lens.double().log()[:, None]
    h = torch.where(logS > 0, h / logS, 0.0)[steps].mean().item()
    if on_eos.mean() > 0.5:
        return "lazy"
    return "frozen" if h > 0.9 else "healthy"
""")

# ---------------------------------------------------------------------------------------------------------
# ch9.q3 sign_test_rows

K = "ch9.q3"
ok(K, "a helper for the binomial tail, seeds gathered first", """
def binomial_tail(k, n):
    total = 0
    for i in range(k + 1):
        total += math.factorial(n) // (math.factorial(i) * math.factorial(n - i))
    return total / 2 ** n


def sign_test_rows(runs, rows):
    value = {}
    for r in runs:
        value[r["variant"], r["seed"]] = r
    all_seeds = sorted(set(r["seed"] for r in runs))
    threshold = 0.05 / len(rows)
    result = ([], [], [])
    for variant, baseline, measure in rows:
        diffs = []
        for seed in all_seeds:
            diffs.append(value[variant, seed][measure] - value[baseline, seed][measure])
        pos = len([d for d in diffs if d > 0])
        neg = len([d for d in diffs if d < 0])
        if pos == neg:
            p = 1.0
        else:
            p = 2 * binomial_tail(min(pos, neg), pos + neg)
        result[0].append(diffs)
        result[1].append(p)
        result[2].append(p < threshold)
    return result
""")
ok(K, "scipy's binomtest, one row at a time", """
from scipy.stats import binomtest

def sign_test_rows(runs, rows):
    out_d, out_p, out_s = [], [], []
    for variant, baseline, measure in rows:
        mine = {r["seed"]: r[measure] for r in runs if r["variant"] == variant}
        base = {r["seed"]: r[measure] for r in runs if r["variant"] == baseline}
        d = [mine[s] - base[s] for s in sorted(mine)]
        nonzero = [x for x in d if x != 0]
        if nonzero:
            p = binomtest(sum(x > 0 for x in nonzero), len(nonzero), 0.5).pvalue
        else:
            p = 1.0
        out_d.append(d)
        out_p.append(float(p))
        out_s.append(bool(p * len(rows) < 0.05))
    return out_d, out_p, out_s
""")
ok(K, "the tail from the larger side", """
def sign_test_rows(runs, rows):
    table = {}
    for r in runs:
        table.setdefault(r["seed"], {})[r["variant"]] = r
    diffs, ps, keep = [], [], []
    alpha = 0.05 / len(rows)
    for variant, baseline, measure in rows:
        d = [table[s][variant][measure] - table[s][baseline][measure] for s in sorted(table)]
        up, down = len([x for x in d if x > 0]), len([x for x in d if x < 0])
        n = up + down
        more = max(up, down)
        tail = sum(math.comb(n, i) for i in range(more, n + 1)) / 2 ** n if n else 1.0
        p = 1.0 if up == down else 2 * tail
        diffs.append(d)
        ps.append(p)
        keep.append(p < alpha)
    return diffs, ps, keep
""")
wrong(K, "pairs the runs in the order they come", ["same seed", "pair"], """
def sign_test_rows(runs, rows):
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        a = [r[measure] for r in runs if r["variant"] == variant]
        b = [r[measure] for r in runs if r["variant"] == baseline]
        d = [x - y for x, y in zip(a, b)]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "against the baseline's mean", ["same seed", "pair"], """
def sign_test_rows(runs, rows):
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        mine = sorted((r["seed"], r[measure]) for r in runs if r["variant"] == variant)
        base = [r[measure] for r in runs if r["variant"] == baseline]
        mean = sum(base) / len(base)
        d = [v - mean for _, v in mine]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "baseline minus variant", ["variant minus baseline"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[baseline, s][measure] - by[variant, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "no correction for the number of rows", ["correct", "questions"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05)
    return differences, p_values, survives
""")
wrong(K, "the correction multiplies the threshold", ["correct", "divide"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 * len(rows))
    return differences, p_values, survives
""")
wrong(K, "one tail only", ["one-sided", "two-sided"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "one-sided: only a rise counts", ["one-sided", "two-sided"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n = up + down
        p = sum(math.comb(n, i) for i in range(up, n + 1)) / 2 ** n
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "a tie counted as a loss", ["tie"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up = sum(x > 0 for x in d)
        down = len(d) - up
        n, k = len(d), min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "ties left in the number of tosses", ["tie"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = len(d), min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "an even split doubled past 1", ["above 1", "cap"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "differences in the order the runs come", ["seed order", "increasing seed"], """
def sign_test_rows(runs, rows):
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        base = {r["seed"]: r[measure] for r in runs if r["variant"] == baseline}
        d = [r[measure] - base[r["seed"]] for r in runs if r["variant"] == variant]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        n, k = up + down, min(up, down)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")
wrong(K, "p-values as tensors", ["tensor", "python numbers"], """
def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = torch.tensor([by[variant, s][measure] - by[baseline, s][measure] for s in seeds])
        up, down = int((d > 0).sum()), int((d < 0).sum())
        n, k = up + down, min(up, down)
        p = torch.tensor(min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n))
        differences.append(d.tolist())
        p_values.append(p)
        survives.append(bool(p < 0.05 / len(rows)))
    return differences, p_values, survives
""")
wrong(K, "hands the test to the course", ["course's own"], """
from attn_course.measure.significance import sign_test

def sign_test_rows(runs, rows):
    by = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        d = [by[variant, s][measure] - by[baseline, s][measure] for s in seeds]
        p = sign_test(d)
        differences.append(d)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))
    return differences, p_values, survives
""")

# ---------------------------------------------------------------------------------------------------------
# ch10.q4 predictions

K = "ch10.q4"
ok(K, "reasoned to the last digit", """
def predictions():
    return {
        "sharp diagonal": (0.0, 1 / 8, "healthy"),
        "one word": (0.0, 1.0, "lazy"),
        "half frozen, half lazy": (0.5, (1 + 1 / 8) / 2, "healthy"),
    }
""")
ok(K, "rounded guesses", """
def predictions():
    return {
        "sharp diagonal": (0.05, 0.2, "healthy"),
        "one word": (0, 0.95, "lazy"),
        "half frozen, half lazy": (0.45, 0.6, "healthy"),
    }
""")
CORRECT_PREDICTIONS = {
    "sharp diagonal": '(0.0, 0.125, "healthy")',
    "one word": '(0.0, 1.0, "lazy")',
    "half frozen, half lazy": '(0.5, 0.56, "healthy")',
}


def predicted(batch: str, prediction: str) -> str:
    """A predictions() answer, right but for `batch`, whose entry is `prediction` (its source text)."""
    entries = dict(CORRECT_PREDICTIONS, **{batch: prediction})
    lines = "".join(f"        {name!r}: {value},\n" for name, value in entries.items())
    return f"def predictions():\n    return {{\n{lines}    }}\n"


MIX = "half frozen, half lazy"
wrong(K, "a sharp diagonal taken for lazy", ["sharp", "different word"],
      predicted("sharp diagonal", '(0.0, 0.9, "lazy")'))
wrong(K, "one word taken for healthy: sharp rows, so one word each", ["one word", "column"],
      predicted("one word", '(0.0, 0.125, "healthy")'))
wrong(K, "the mix: the lazy half decides", ["mean", "half"], predicted(MIX, '(0.1, 0.95, "lazy")'))
wrong(K, "the mix: the frozen half decides", ["mean", "half"], predicted(MIX, '(0.9, 0.2, "frozen")'))
wrong(K, "the mix: the numbers right, the verdict from the sentences", ["means", "threshold"],
      predicted(MIX, '(0.5, 0.56, "lazy")'))
wrong(K, "the mix: the numbers right, the verdict frozen", ["means", "threshold"],
      predicted(MIX, '(0.52, 0.55, "frozen")'))
wrong(K, "entropy in nats, not normalised", ["normalised", "nats"], predicted(MIX, '(1.04, 0.56, "healthy")'))
wrong(K, "the package's words", ["'healthy'", "package's words"], predicted(MIX, '(0.5, 0.56, "looking")'))
wrong(K, "a batch left out", ["every batch", "three"], """
def predictions():
    return {"sharp diagonal": (0.0, 0.125, "healthy"), "one word": (0.0, 1.0, "lazy")}
""")
wrong(K, "numbers as tensors", ["tensor", "python numbers"], """
def predictions():
    return {
        "sharp diagonal": (torch.tensor(0.0), torch.tensor(0.125), "healthy"),
        "one word": (torch.tensor(0.0), torch.tensor(1.0), "lazy"),
        "half frozen, half lazy": (torch.tensor(0.5), torch.tensor(0.56), "healthy"),
    }
""")

JUDGED = LearnersAnswers(ANSWERS, lambda answer: define(answer.key, answer.source))
CORRECT, WRONG = JUDGED.correct, JUDGED.wrong


@pytest.mark.parametrize("answer", CORRECT, ids=JUDGED.ids(CORRECT))
def test_correct_alternative_passes(answer: Answer) -> None:
    JUDGED.assert_passes(answer)


@pytest.mark.parametrize("answer", WRONG, ids=JUDGED.ids(WRONG))
def test_wrong_answer_is_rejected_without_a_traceback(answer: Answer) -> None:
    JUDGED.assert_rejected(answer)


@pytest.mark.parametrize("key", KEYS)
def test_each_question_has_six_wrong_answers_two_correct_ones_and_names_most_mistakes(key: str) -> None:
    wrong_here = [a for a in WRONG if a.key == key]
    assert len(wrong_here) >= 6 and sum(a.key == key for a in CORRECT) >= 2
    unnamed = JUDGED.unnamed(key)
    assert 1 - len(unnamed) / len(wrong_here) >= NAMED_AT_LEAST, "\n".join(unnamed)


@pytest.mark.parametrize("key", KEYS)
def test_every_named_mistake_is_the_verdict_on_some_wrong_answer(key: str) -> None:
    unreached = JUDGED.unreached(key)
    assert not unreached, "no wrong answer is diagnosed with:\n" + "\n".join(unreached)


@pytest.mark.parametrize("key", KEYS)
def test_the_course_function_itself_is_refused_by_name(key: str) -> None:
    JUDGED.assert_package_refused(key)


def test_the_exposure_model_is_trained_without_touching_the_callers_random_state_or_threads() -> None:
    torch.manual_seed(123)
    random.seed(5)
    expected, threads = torch.rand(3), torch.get_num_threads()
    torch.manual_seed(123)
    ch9_dynamics.exposure_weights.cache_clear()
    config, state = ch9_dynamics.exposure_weights(True)
    assert torch.equal(torch.rand(3), expected) and torch.get_num_threads() == threads
    _, again = ch9_dynamics.exposure_weights.__wrapped__(True)
    assert all(torch.equal(state[name], again[name]) for name in state)


def test_the_trained_exposure_model_shows_an_exposure_gap() -> None:
    case = checks.EXERCISES["ch9.q1"].cases()[2]                     # 40 test sentences
    free, count = ch9_dynamics.reference_exposure(case.inputs)
    forced, _ = ch9_dynamics.reference_exposure(case.inputs, free_running=False)
    total = sum(count)
    assert sum(f * n for f, n in zip(forced, count, strict=True)) / total > 0.6
    assert sum((a - b) * n for a, b, n in zip(forced, free, count, strict=True)) / total > 0.03


@pytest.mark.parametrize("step", [0, 1, 2, 189, 10**4, 10**9])
def test_k_for_half_solution_puts_the_ratio_at_one_half(step: int) -> None:
    k = define("ch9.q2", checks.EXERCISES["ch9.q2"].solution_code)(step)
    decay = checks.resolve("attn_course.training.loop.inverse_sigmoid_decay")
    assert isinstance(k, float) and k >= 1 and decay(step, k=k) == pytest.approx(0.5, rel=1e-9)


@pytest.mark.parametrize("kind", sorted(ch10_diagnosis.KINDS))
def test_every_generated_set_is_diagnosed_as_its_kind_in_every_presentation(kind: str) -> None:
    exercise = EXERCISES["ch10.q3"]
    extra = [dict(exercise.defaults, seed=seed, kind=kind) for seed in range(5)]
    for case in exercise.cases({"seeds": [1001, 1002, 7], "cases": extra}):
        verdict = ch10_diagnosis.KINDS[case.spec["kind"]]
        assert exercise.reference(case.inputs) == (verdict,) * 5, case.label


# ---------------------------------------------------------------------------------------------------------
# The false passes and wrong diagnoses fixed: each answer's message must name its own mistake


#: (key, label) of the wrong answers that passed, or were diagnosed as another mistake, before the fix.
FIXED = [
    ("ch9.q1", "writes its own words into the caller's batch.tgt_in"),
    ("ch9.q2", "the fixed-point iteration k = i / ln k, step 0 handled"),
    ("ch9.q2", "the fixed-point iteration from k = i, 0 handled"),
    ("ch10.q1", "in the weights' own dtype, xlogy"),
    ("ch10.q1", "everything cast to bfloat16 to save memory"),
    ("ch10.q1", "float64, but p log p unguarded"),
    ("ch10.q2", "in the weights' own dtype"),
    ("ch10.q2", "a loop per sentence in bfloat16"),
]


def answer(key: str, label: str) -> Answer:
    return next(a for a in ANSWERS if (a.key, a.label) == (key, label))


@pytest.mark.parametrize(("key", "label"), FIXED, ids=[f"{k}:{lbl}" for k, lbl in FIXED])
def test_a_fixed_false_pass_or_wrong_diagnosis_now_names_its_mistake(key: str, label: str) -> None:
    found = answer(key, label)
    assert JUDGED.result(found).status == checks.FAILED
    assert JUDGED.names_its_mistake(found), JUDGED.result(found).message


def test_writing_into_the_callers_batch_is_caught_with_the_tensor_named() -> None:
    message = JUDGED.result(answer(*FIXED[0])).message
    assert message.startswith("The result is right, but your code changed its input `batch.tgt_in` in place")


def test_an_iteration_that_runs_below_one_is_not_blamed_on_step_zero() -> None:
    message = JUDGED.result(answer(*FIXED[1])).message
    assert "At step 0" not in message and "(in k_for_half(1))" in message


HALF_PRECISION = [
    ("ch10.q1", "in the weights' own dtype, xlogy", "Your results on the half-precision weights"),
    ("ch10.q1", "everything cast to bfloat16 to save memory", "Every result is off in the third digit: you "
     "computed in bfloat16"),
    ("ch10.q2", "in the weights' own dtype", "Your results on the half-precision weights"),
    ("ch10.q2", "a loop per sentence in bfloat16", "Every result is off in the third digit: you computed in "
     "bfloat16"),
]


@pytest.mark.parametrize(("key", "label", "diagnosis"), HALF_PRECISION, ids=[f"{k}:{x}" for k, x, _ in
                                                                             HALF_PRECISION])
def test_a_result_computed_in_half_precision_names_the_dtype(key: str, label: str, diagnosis: str) -> None:
    message = JUDGED.result(answer(key, label)).message
    assert message.startswith(diagnosis), message


def test_a_missing_zero_guard_in_float64_is_not_blamed_on_an_epsilon_in_half_precision() -> None:
    diagnosis = JUDGED.result(answer(*FIXED[5])).message.split("\nFailing case:")[0]
    assert diagnosis.startswith("NaN from 0 log 0") and "epsilon" not in diagnosis


def test_half_precision_results_are_judged_to_float32s_precision() -> None:
    exercise = EXERCISES["ch10.q1"]
    case = exercise.cases()[0]
    expected = exercise.reference(case.inputs)
    assert [e.dtype for e in expected] == [torch.float32] * 5
    off = tuple(e + 2e-3 for e in expected)                     # the size of bfloat16's rounding
    assert checks.compare(expected, off) is not None


# ---------------------------------------------------------------------------------------------------------
# The exercises the package may not list yet: what tests/exercises/test_checks.py asks of every exercise


@pytest.mark.parametrize("key", KEYS)
def test_solution_passes_its_check_on_three_cases_or_more_and_the_hidden_template(key: str) -> None:
    exercise = EXERCISES[key]
    for hidden in (None, {"seeds": [1001, 1002], "cases": [dict(exercise.defaults, seed=1003)]}):
        result = exercise.evaluate(define(key, exercise.solution_code), hidden)
        assert result.passed, result.message
        assert result.cases_passed == result.cases_total >= 3


@pytest.mark.parametrize("key", KEYS)
def test_untouched_stub_answers_not_attempted(key: str) -> None:
    exercise = EXERCISES[key]
    result = exercise.evaluate(define(key, exercise.stub_code))
    assert result.status == checks.NOT_ATTEMPTED and exercise.marker in result.message


@pytest.mark.parametrize("key", KEYS)
def test_every_exercise_has_three_escalating_hints_the_first_without_code(key: str) -> None:
    hints = EXERCISES[key].hints
    assert len(hints) == 3 and len(set(hints)) == 3
    assert not re.findall(r"`[^`]*[(\[@=][^`]*`", hints[0])


def test_the_k_for_half_stub_states_the_contract_but_not_the_derivation_or_the_method() -> None:
    stub = EXERCISES["ch9.q2"].stub_code
    assert "1/2" in stub and "Returns" in stub
    for give_away in ("k ln k", "ln k", "isection", "i + 2", "[1,"):
        assert give_away not in stub, give_away
    assert "k ln k = i" in EXERCISES["ch9.q2"].solution_code                 # the model answer keeps it


def test_the_diagnosis_stub_asks_for_thresholds_and_gives_none() -> None:
    stub = EXERCISES["ch10.q3"].stub_code
    assert "justify" in stub
    assert not re.findall(r"0\.[0-9]", stub)


EXERCISE_NOTEBOOKS = {9: ("ex09_training_dynamics.ipynb", CHAPTER_9),
                      10: ("ex10_diagnosing_attention.ipynb", CHAPTER_10)}


@pytest.mark.parametrize("chapter", [9, 10])
def test_notebooks_hold_every_exercise_as_its_stub_and_its_model_answer_in_order(chapter: int) -> None:
    name, exercises = EXERCISE_NOTEBOOKS[chapter]
    for folder, text in (("exercises", "stub_code"), ("solutions", "solution_code")):
        cells = json.loads((ROOT / folder / name).read_text())["cells"]
        sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        found = [source for source in sources if source.startswith("# EXERCISE ")]
        assert found == [f"{e.marker}\n{getattr(e, text)}".rstrip("\n") for e in exercises], folder
        for i in range(len(exercises)):
            assert f"q{i + 1}.check()" in sources
        names = ", ".join(f"q{i + 1}" for i in range(len(exercises)))
        assert f"{names} = checks.chapter({chapter})" in sources[0]


# ---------------------------------------------------------------------------------------------------------
# ch9.q3 and ch10.q4: their cases teach what the chapters say


def test_the_committed_study_read_by_the_sign_test_keeps_fewer_rows_when_more_are_asked() -> None:
    exercise = EXERCISES["ch9.q3"]
    questions, every = (c for c in exercise.cases() if c.spec["source"] == "committed")
    _, p_asked, kept_asked = exercise.reference(questions.inputs)
    _, p_every, kept_every = exercise.reference(every.inputs)
    assert (len(p_asked), len(p_every)) == (20, 50)
    assert (sum(kept_asked), sum(p < 0.05 for p in p_asked)) == (4, 8)      # 12 of 12 only; 8 uncorrected
    assert (sum(kept_every), sum(p < 0.05 for p in p_every)) == (7, 16)
    assert max(p for p, kept in zip(p_every, kept_every, strict=True) if kept) < 0.05 / 50
    found = {(v, m) for (v, _, m), kept in zip(every.inputs["rows"], kept_every, strict=True) if kept}
    asked = {(v, m) for (v, _, m), kept in zip(questions.inputs["rows"], kept_asked, strict=True) if kept}
    assert asked < found and found - asked == {("scheduled sampling, coin per sentence", "train_loss"),
                                               ("attention temperature 4", "gap"),
                                               ("attention temperature 4", "train_loss")}


def test_a_made_up_study_where_nothing_works_has_uncorrected_false_alarms_and_no_corrected_ones() -> None:
    exercise = EXERCISES["ch9.q3"]
    null = [c for c in exercise.cases() if c.spec["null"]]
    assert null
    for case in null:
        _, p_values, kept = exercise.reference(case.inputs)
        assert not any(kept) and any(p < 0.05 for p in p_values)


def test_the_made_up_studies_have_ties_even_splits_and_seeds_out_of_order() -> None:
    cases = [c for c in EXERCISES["ch9.q3"].cases() if c.spec["source"] == "synthetic"]
    differences = [d for c in cases for d in EXERCISES["ch9.q3"].reference(c.inputs)[0]]
    assert any(0.0 in d for d in differences)
    assert any(sum(x > 0 for x in d) == sum(x < 0 for x in d) > 0 for d in differences)
    for case in cases:
        seeds = [r["seed"] for r in case.inputs["runs"] if r["variant"] == "teacher forcing"]
        assert seeds != sorted(seeds) and sorted(seeds) != list(range(len(seeds)))


def test_the_prediction_batches_measure_as_their_description_says() -> None:
    diagnose = checks.resolve("attn_course.measure.diagnostics.diagnose")
    found = {name: diagnose(*batch) for name, batch in ch10_diagnosis.prediction_batches().items()}
    assert found["sharp diagonal"] == (0.0, 0.125, "looking")
    assert found["one word"] == (0.0, 1.0, "collapsed")
    assert found["half frozen, half lazy"] == (0.5, 0.5625, "looking")     # the means hide the mix


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("key", KEYS)
def test_solution_runs_on_cuda(key: str) -> None:
    exercise = EXERCISES[key]
    answer = define(key, exercise.solution_code)
    for case in exercise.cases():
        on_gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in case.inputs.items()}
        if "views" in on_gpu:
            on_gpu["views"] = [v.cuda() for v in on_gpu["views"]]
        if key == "ch9.q1":
            model = ch9_dynamics.exposure_model(case.inputs).cuda()
            batch = ch9_dynamics.exposure_batch(case.inputs).to("cuda")
            assert answer(model, batch) == exercise.reference(case.inputs)
        elif key in ("ch9.q2", "ch9.q3", "ch10.q4"):              # Python numbers, no tensors
            continue
        else:
            got = exercise.call(answer, on_gpu)
            expected = exercise.reference(case.inputs)
            assert got == expected if isinstance(expected, tuple) else torch.allclose(got, expected)
