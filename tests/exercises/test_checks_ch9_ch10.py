"""The checks of chapters 9 and 10 measured on learners' answers written from the prompts alone: every correct
alternative passes, every wrong answer is rejected, at least 80 % of each question's rejections name or locate
the mistake (the message holds one of the answer's phrases), every named mistake is the verdict on some wrong
answer, and an answer that hands the work to the course's own function is refused by name."""

from __future__ import annotations

import random
from typing import NamedTuple

import pytest
import torch
from conftest import LearnersAnswers

import attn_course_exercises as checks
from attn_course_exercises import ch9_dynamics

#: The share of a question's wrong answers whose message must name or locate the mistake.
NAMED_AT_LEAST = 0.80
KEYS = ("ch9.q1", "ch9.q2", "ch10.q1", "ch10.q2", "ch10.q3")


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
    return namespace[checks.EXERCISES[key].name]


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


@pytest.mark.parametrize("kind", ["healthy", "frozen", "lazy"])
def test_every_generated_set_is_diagnosed_as_its_kind_in_every_presentation(kind: str) -> None:
    exercise = checks.EXERCISES["ch10.q3"]
    extra = [dict(exercise.defaults, seed=seed, kind=kind) for seed in range(5)]
    hidden = {"seeds": [1001, 1002, 7], "cases": extra}
    for case in exercise.cases(hidden):
        assert exercise.reference(case.inputs) == (case.spec["kind"],) * 5, case.label


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("key", KEYS)
def test_solution_runs_on_cuda(key: str) -> None:
    exercise = checks.EXERCISES[key]
    answer = define(key, exercise.solution_code)
    for case in exercise.cases():
        on_gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in case.inputs.items()}
        if "views" in on_gpu:
            on_gpu["views"] = [v.cuda() for v in on_gpu["views"]]
        if key == "ch9.q1":
            model = ch9_dynamics.exposure_model(case.inputs).cuda()
            batch = ch9_dynamics.exposure_batch(case.inputs).to("cuda")
            assert answer(model, batch) == exercise.reference(case.inputs)
        elif key == "ch9.q2":
            continue
        else:
            got = exercise.call(answer, on_gpu)
            expected = exercise.reference(case.inputs)
            assert got == expected if isinstance(expected, tuple) else torch.allclose(got, expected)
