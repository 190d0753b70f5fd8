"""The checks of chapter 12 measured on learners' answers written from the prompts alone: every correct
alternative passes (loops, numpy, torch grids, a merge sort, Counter unions, sacrebleu's n-gram helper),
every wrong answer is rejected, at least 80 % of each question's rejections name or locate the mistake (the
message holds one of the answer's phrases), every named mistake is the verdict on some wrong answer, and an
answer that hands the work to the course's own function is refused by name. Then what the cases hold: the
real maps of chapter 12's Transformer, the kinds of crossing, the ties and repeats that BLEU's counts turn
on."""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path
from typing import NamedTuple

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
import torch
from conftest import LearnersAnswers
from sacrebleu.metrics import BLEU

import attn_course_exercises as checks
from attn_course.measure.diagnostics import alignment_crossings
from attn_course.measure.metrics import BLEU_SETTINGS, multi_reference_bleu
from attn_course_exercises import ch12_real_sentences as chapter

#: The share of a question's wrong answers whose message must name or locate the mistake.
NAMED_AT_LEAST = 0.80
#: Chapter 12's exercises as its module defines them, by key.
EXERCISES = {e.key: e for e in (chapter.CROSSINGS, chapter.CROSSING_KINDS, chapter.BLEU_STATISTICS)}
KEYS = tuple(EXERCISES)


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
    exec(checks.PREAMBLES[12], namespace)
    exec(source, namespace)
    return namespace[EXERCISES[key].name]


# ---------------------------------------------------------------------------------------------------------
# ch12.q1 crossings

K = "ch12.q1"
ok(K, "argmax by hand in plain Python", """
def crossings(weights, src_len, tgt_len):
    rows = weights.float().tolist()
    aligned = []
    for t in range(tgt_len):
        best = 0
        for i in range(1, src_len):
            if rows[t][i] > rows[t][best]:
                best = i
        aligned.append(best)
    count = 0
    for t1 in range(tgt_len):
        for t2 in range(t1 + 1, tgt_len):
            if aligned[t1] > aligned[t2]:
                count += 1
    return count
""")
ok(K, "numpy, upper triangle of the pairs", """
import numpy as np

def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].float().cpu().numpy().argmax(axis=1)
    first, second = np.triu_indices(tgt_len, k=1)
    return int((a[first] > a[second]).sum())
""")
ok(K, "torch broadcasting and triu", """
def crossings(weights, src_len, tgt_len):
    a = torch.max(weights[:tgt_len, :src_len], dim=-1).indices
    later_is_left = a[:, None] > a[None, :]
    return int(torch.triu(later_is_left, diagonal=1).sum())
""")
ok(K, "inversions by merge sort", """
def crossings(weights, src_len, tgt_len):
    def sort_count(xs):
        if len(xs) < 2:
            return xs, 0
        left, n_left = sort_count(xs[:len(xs) // 2])
        right, n_right = sort_count(xs[len(xs) // 2:])
        merged, n, i, j = [], n_left + n_right, 0, 0
        while i < len(left) and j < len(right):
            if right[j] < left[i]:
                merged.append(right[j])
                n += len(left) - i
                j += 1
            else:
                merged.append(left[i])
                i += 1
        return merged + left[i:] + right[j:], n

    aligned = [int(row[:src_len].argmax()) for row in weights[:tgt_len]]
    return sort_count(aligned)[1]
""")
ok(K, "itertools.combinations of the positions", """
import itertools

def crossings(weights, src_len, tgt_len):
    a = weights.narrow(0, 0, tgt_len).narrow(1, 0, src_len).argmax(1).tolist()
    return sum(1 for x, y in itertools.combinations(a, 2) if x > y)
""")
wrong(K, "argmax down the columns", ["down the columns"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=0).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "counts the <eos> row", ["<eos> row"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len + 1, :src_len].argmax(dim=1).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "every row, source words only", ["<eos> row"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:, :src_len].argmax(-1).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "argmax over the <eos> column too", ["<eos> column"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len + 1].argmax(dim=1).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "argmax over every column", ["<eos> column"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len].argmax(dim=-1).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "argmax of the whole matrix", ["every row and column"], """
def crossings(weights, src_len, tgt_len):
    a = weights.argmax(dim=-1).tolist()
    n = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            n += a[i] > a[j]
    return n
""")
wrong(K, "drops the tensor's last row and column", ["tensor's last row", "padding"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:-1, :-1].argmax(dim=1).tolist()       # drop <eos>
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "drops the tensor's last row", ["tensor's last row", "padding"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:-1, :src_len].argmax(dim=1).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "drops the tensor's last column", ["tensor's last row", "padding"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :-1].argmax(dim=1).tolist()
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))
""")
wrong(K, "ties counted", ["ties"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum(a[i] >= a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))
""")
wrong(K, "both orders of every pair", ["twice"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    n = 0
    for i in range(tgt_len):
        for j in range(tgt_len):
            if (i - j) * (a[i] - a[j]) < 0:
                n += 1
    return n
""")
wrong(K, "t1 != t2", ["t1 < t2"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum(1 for i in range(tgt_len) for j in range(tgt_len) if i != j and a[i] > a[j])
""")
wrong(K, "neighbours only", ["neighbouring"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum(a[t] > a[t + 1] for t in range(tgt_len - 1))
""")
wrong(K, "a float from .float().sum().item()", ["float"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1)
    return (a[:, None] > a[None, :]).triu(1).float().sum().item()
""")
wrong(K, "a 0-dim tensor", ["tensor"], """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1)
    return (a[:, None] > a[None, :]).triu(1).sum()
""")
wrong(K, "numpy on bfloat16 weights", ["bfloat16"], """
import numpy as np

def crossings(weights, src_len, tgt_len):
    a = np.argmax(weights[:tgt_len, :src_len].numpy(), axis=1)
    return int(sum(a[i] > a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len)))
""")
wrong(K, "calls alignment_crossings", ["course's own"], """
from attn_course.measure.diagnostics import alignment_crossings

def crossings(weights, src_len, tgt_len):
    return alignment_crossings(weights, src_len, tgt_len)
""")
wrong(K, "links from attention_to_links", ["course's own", "attention_to_links"], """
from attn_course.measure import metrics

def crossings(weights, src_len, tgt_len):
    links = sorted(metrics.attention_to_links(weights, src_len=src_len, tgt_len=tgt_len), key=lambda l: l[1])
    a = [i for i, _ in links]
    return sum(a[x] > a[y] for x in range(len(a)) for y in range(x + 1, len(a)))
""")
wrong(K, "row 0 taken for <bos>", ["shifted by one"], """
def crossings(weights, src_len, tgt_len):
    a = weights[1:tgt_len + 1, :src_len].argmax(dim=1).tolist()         # row 0 is the <bos> step
    return sum(a[i] > a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))
""")
wrong(K, "the centre of mass of each row, rounded", ["[0] as given"], """
def crossings(weights, src_len, tgt_len):
    w = weights[:tgt_len, :src_len].double()
    centre = (w * torch.arange(src_len, dtype=torch.float64)).sum(1) / w.sum(1)
    a = centre.round().long().tolist()
    return sum(a[i] > a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))
""")

# ---------------------------------------------------------------------------------------------------------
# ch12.q2 crossing_kinds

K = "ch12.q2"
ok(K, "loops and a set of the links", """
def crossing_kinds(weights, src_words, tgt_words, links):
    S, T = len(src_words), len(tgt_words)
    a = [int(weights[t, :S].argmax()) for t in range(T)]
    gold = set(tuple(link) for link in links)
    right = [(a[t], t) in gold for t in range(T)]
    reorderings, misalignments = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                if right[t1] and right[t2]:
                    reorderings.append((t1, t2))
                else:
                    misalignments.append((t1, t2))
    return reorderings, misalignments
""")
ok(K, "torch: a grid of the gold links and an upper triangle of the crossings", """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=-1)
    gold = torch.zeros(T, S, dtype=torch.bool)
    for i, t in links:
        gold[t, i] = True
    right = gold[torch.arange(T), a]
    cross = torch.triu(a[:, None] > a[None, :], diagonal=1)
    both = right[:, None] & right[None, :]
    return ([tuple(p) for p in (cross & both).nonzero().tolist()],
            [tuple(p) for p in (cross & ~both).nonzero().tolist()])
""")
ok(K, "each target word's source words in a dict of sets, itertools.combinations", """
import itertools

def crossing_kinds(weights, src_words, tgt_words, links):
    translates = {}
    for i, t in links:
        translates.setdefault(t, set()).add(i)
    a = weights[:len(tgt_words), :len(src_words)].max(dim=1).indices.tolist()
    kinds = ([], [])
    for t1, t2 in itertools.combinations(range(len(tgt_words)), 2):
        if a[t1] > a[t2]:
            good = a[t1] in translates.get(t1, set()) and a[t2] in translates.get(t2, set())
            kinds[0 if good else 1].append((t1, t2))
    return kinds
""")
ok(K, "numpy, the wrong rows first, two sets", """
import numpy as np

def crossing_kinds(weights, src_words, tgt_words, links):
    w = weights.float().numpy()[:len(tgt_words), :len(src_words)]
    a = w.argmax(axis=1)
    gold = set(links)
    wrong_rows = {t for t in range(len(tgt_words)) if (int(a[t]), t) not in gold}
    reorderings, misalignments = set(), set()
    for t1 in range(len(a)):
        for t2 in range(t1 + 1, len(a)):
            if a[t1] > a[t2]:
                if t1 in wrong_rows or t2 in wrong_rows:
                    misalignments.add((t1, t2))
                else:
                    reorderings.add((t1, t2))
    return reorderings, misalignments
""")
ok(K, "a_t from the course's attention_to_links", """
from attn_course.measure.metrics import attention_to_links

def crossing_kinds(weights, src_words, tgt_words, links):
    predicted = attention_to_links(weights, src_len=len(src_words), tgt_len=len(tgt_words))
    a = {t: i for i, t in predicted}
    right = {t: (i, t) in set(links) for i, t in predicted}
    out = ([], [])
    for t1 in range(len(tgt_words)):
        for t2 in range(t1 + 1, len(tgt_words)):
            if a[t1] > a[t2]:
                out[0 if right[t1] and right[t2] else 1].append((t1, t2))
    return out
""")

ROWS = """
    S, T = len(src_words), len(tgt_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    right = [(a[t], t) in links for t in range(T)]"""

wrong(K, "one right row is enough", ["both"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t1] or right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "only the earlier row checked", ["both"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t1] else m).append((t1, t2))
    return r, m
""")
wrong(K, "only the later row checked", ["both"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "the two lists swapped", ["swapped", "other way round"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (m if right[t1] and right[t2] else r).append((t1, t2))
    return r, m
""")
wrong(K, "a reordering when the gold links cross", ["gold"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    gold = {}
    for i, t in links:
        gold.setdefault(t, []).append(i)
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                moved = any(i1 > i2 for i1 in gold.get(t1, []) for i2 in gold.get(t2, []))
                (r if moved else m).append((t1, t2))
    return r, m
""")
wrong(K, "links read as (target, source)", ["(src_index, tgt_index)", "(i, t)"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    right = [(t, a[t]) in links for t in range(T)]
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t1] and right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "one source word kept per target word", ["several", "more than one"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    gold = {t: i for i, t in links}
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if gold.get(t1) == a[t1] and gold.get(t2) == a[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "every target word assumed to have a link", ["no link", "translates nothing"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    gold = {}
    for i, t in links:
        gold.setdefault(t, set()).add(i)
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if a[t1] in gold[t1] and a[t2] in gold[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "argmax over the <eos> column too", ["<eos> column"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T = len(tgt_words)
    a = weights[:T].argmax(dim=1).tolist()
    right = [(a[t], t) in links for t in range(T)]
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t1] and right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "the <eos> row counted", ["<eos> row"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    S = len(src_words)
    a = weights[:, :S].argmax(dim=1).tolist()
    right = [(a[t], t) in links for t in range(len(a))]
    r, m = [], []
    for t1 in range(len(a)):
        for t2 in range(t1 + 1, len(a)):
            if a[t1] > a[t2]:
                (r if right[t1] and right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "the argmax of every row over every column", ["every row and column"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    a = weights.argmax(dim=-1).tolist()
    right = [(a[t], t) in links for t in range(len(a))]
    r, m = [], []
    for t1 in range(len(a)):
        for t2 in range(t1 + 1, len(a)):
            if a[t1] > a[t2]:
                (r if right[t1] and right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "ties counted as crossings", ["ties"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] >= a[t2]:
                (r if right[t1] and right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "neighbouring rows only", ["neighbour"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t in range(T - 1):
        if a[t] > a[t + 1]:
            (r if right[t] and right[t + 1] else m).append((t, t + 1))
    return r, m
""")
wrong(K, "the source positions of a crossing", ["target word"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t1] and right[t2] else m).append((a[t1], a[t2]))
    return r, m
""")
wrong(K, "the wrong rows instead of the crossings", ["pairs"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    r = [(t1, t2) for t1 in range(T) for t2 in range(t1 + 1, T)
         if a[t1] > a[t2] and right[t1] and right[t2]]
    return r, [t for t in range(T) if not right[t]]
""")
wrong(K, "every crossing a reordering, the misaligned ones also listed", ["exactly one", "both lists"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    crossed = [(t1, t2) for t1 in range(T) for t2 in range(t1 + 1, T) if a[t1] > a[t2]]
    return crossed, [(t1, t2) for t1, t2 in crossed if not (right[t1] and right[t2])]
""")
wrong(K, "a misaligned row is one without a clear peak", ["links", "translates"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    best = weights[:T, :S].max(dim=1)
    a, sure = best.indices.tolist(), (best.values >= 0.5).tolist()
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if sure[t1] and sure[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "a misaligned row is one off the diagonal", ["links", "translates"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (m if a[t1] != t1 or a[t2] != t2 else r).append((t1, t2))
    return r, m
""")
wrong(K, "argmax down the columns", ["down the columns"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=0).tolist()
    r, m = [], []
    for x in range(len(a)):
        for y in range(x + 1, len(a)):
            if a[x] > a[y]:
                (r if (x, a[x]) in links and (y, a[y]) in links else m).append((x, y))
    return r, m
""")
wrong(K, "rows compared by their words", ["position", "occurrence"], """
def crossing_kinds(weights, src_words, tgt_words, links):
    T, S = len(tgt_words), len(src_words)
    a = weights[:T, :S].argmax(dim=1).tolist()
    meaning = {}
    for i, t in links:
        meaning.setdefault(tgt_words[t], set()).add(src_words[i])
    right = [src_words[a[t]] in meaning.get(tgt_words[t], set()) for t in range(T)]
    r, m = [], []
    for t1 in range(T):
        for t2 in range(t1 + 1, T):
            if a[t1] > a[t2]:
                (r if right[t1] and right[t2] else m).append((t1, t2))
    return r, m
""")
wrong(K, "counts instead of the pairs", ["pairs"], """
def crossing_kinds(weights, src_words, tgt_words, links):""" + ROWS + """
    crossed = [(t1, t2) for t1 in range(T) for t2 in range(t1 + 1, T) if a[t1] > a[t2]]
    good = sum(right[t1] and right[t2] for t1, t2 in crossed)
    return good, len(crossed) - good
""")

# ---------------------------------------------------------------------------------------------------------
# ch12.q3 bleu_statistics

K = "ch12.q3"
ok(K, "Counters, loops, the closest length by a key of (distance, length)", """
from collections import Counter

def bleu_statistics(hypotheses, reference_sets):
    matches, totals = [0] * 4, [0] * 4
    hyp_length = ref_length = 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in range(1, 5):
            grams = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
            most = Counter()
            for ref in refs:
                for g, c in Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1)).items():
                    most[g] = max(most[g], c)
            matches[n - 1] += sum(min(c, most[g]) for g, c in grams.items())
            totals[n - 1] += sum(grams.values())
        hyp_length += len(hyp)
        ref_length += min((len(r) for r in refs), key=lambda L: (abs(L - len(hyp)), L))
    return matches, totals, hyp_length, ref_length
""")
ok(K, "Counter union (|) keeps the max over references, zip for the n-grams", """
import functools
from collections import Counter

def bleu_statistics(hypotheses, reference_sets):
    def ngrams(words, n):
        return Counter(zip(*[words[k:] for k in range(n)]))

    matches, totals, c, r = [0, 0, 0, 0], [0, 0, 0, 0], 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in (1, 2, 3, 4):
            h = ngrams(hyp, n)
            best = functools.reduce(lambda x, y: x | y, (ngrams(ref, n) for ref in refs))
            matches[n - 1] += sum((h & best).values())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
        c += len(hyp)
        lengths = sorted(len(ref) for ref in refs)
        r += min(lengths, key=lambda L: abs(L - len(hyp)))
    return matches, totals, c, r
""")
ok(K, "dicts by hand, the closest length by a running comparison", """
def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        c += len(hyp)
        best = None
        for ref in refs:
            d = abs(len(ref) - len(hyp))
            if best is None or d < best[0] or (d == best[0] and len(ref) < best[1]):
                best = (d, len(ref))
        r += best[1]
        for n in range(1, 5):
            counts = {}
            for i in range(len(hyp) - n + 1):
                g = " ".join(hyp[i:i + n])
                counts[g] = counts.get(g, 0) + 1
            limit = {}
            for ref in refs:
                seen = {}
                for i in range(len(ref) - n + 1):
                    g = " ".join(ref[i:i + n])
                    seen[g] = seen.get(g, 0) + 1
                for g, k in seen.items():
                    limit[g] = max(limit.get(g, 0), k)
            for g, k in counts.items():
                matches[n - 1] += min(k, limit.get(g, 0))
                totals[n - 1] += k
    return matches, totals, c, r
""")
ok(K, "sacrebleu's n-gram helper, clipping and lengths written out", """
from sacrebleu.metrics.helpers import extract_all_word_ngrams

def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        h, length = extract_all_word_ngrams(" ".join(hyp), 1, 4)
        most = {}
        for ref in refs:
            counts, _ = extract_all_word_ngrams(" ".join(ref), 1, 4)
            for g, k in counts.items():
                most[g] = max(most.get(g, 0), k)
        for g, k in h.items():
            totals[len(g) - 1] += k
            matches[len(g) - 1] += min(k, most.get(g, 0))
        c += length
        r += sorted((abs(len(ref) - length), len(ref)) for ref in refs)[0][1]
    return matches, totals, c, r
""")

STATS = """
from collections import Counter

def grams(words, n):
    return Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))

"""
CLOSEST = "min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))"


def clipped(limit: str, ref_length: str = CLOSEST, total: str = "sum(h.values())") -> str:
    """An answer whose clipping limit per n-gram `g` is `limit` and whose reference length is `ref_length`."""
    return STATS + f"""def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in range(1, 5):
            h = grams(hyp, n)
            counts = [grams(x, n) for x in refs]
            matches[n - 1] += sum(min(k, {limit}) for g, k in h.items())
            totals[n - 1] += {total}
        c += len(hyp)
        r += {ref_length}
    return matches, totals, c, r
"""


wrong(K, "clipped by the first reference only", ["first reference"],
      clipped("counts[0][g]"))
wrong(K, "clipped by the sum over the references", ["sum"],
      clipped("sum(x[g] for x in counts)"))
wrong(K, "not clipped: an n-gram in any reference counts every time", ["clip"],
      clipped("(k if any(x[g] for x in counts) else 0)"))
wrong(K, "clipped by the least use over the references", ["most", "max"],
      clipped("min(x[g] for x in counts)"))
wrong(K, "each reference matched separately and the matches added", ["sum"], STATS + """
def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in range(1, 5):
            h = grams(hyp, n)
            totals[n - 1] += sum(h.values())
            for ref in refs:
                x = grams(ref, n)
                matches[n - 1] += sum(min(k, x[g]) for g, k in h.items())
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))
    return matches, totals, c, r
""")
wrong(K, "the references of every sentence pooled", ["own"], STATS + """
def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    every = [ref for refs in reference_sets for ref in refs]
    for n in range(1, 5):
        most = Counter()
        for ref in every:
            most |= grams(ref, n)
        for hyp in hypotheses:
            h = grams(hyp, n)
            matches[n - 1] += sum(min(k, most[g]) for g, k in h.items())
            totals[n - 1] += sum(h.values())
    for hyp, refs in zip(hypotheses, reference_sets):
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))
    return matches, totals, c, r
""")
wrong(K, "the longest reference", ["longest"],
      clipped("max(x[g] for x in counts)", "max(len(x) for x in refs)"))
wrong(K, "the shortest reference", ["shortest"],
      clipped("max(x[g] for x in counts)", "min(len(x) for x in refs)"))
wrong(K, "the mean reference length", ["average", "mean"],
      clipped("max(x[g] for x in counts)", "sum(len(x) for x in refs) / len(refs)"))
wrong(K, "the first reference's length", ["first reference"],
      clipped("max(x[g] for x in counts)", "len(refs[0])"))
wrong(K, "ties go to the longer", ["tie"],
      clipped("max(x[g] for x in counts)",
              "min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), -L))"))
wrong(K, "ties go to the one listed first", ["tie"],
      clipped("max(x[g] for x in counts)", "len(min(refs, key=lambda x: abs(len(x) - len(hyp))))"))
wrong(K, "the distance without abs", ["closest", "abs"],
      clipped("max(x[g] for x in counts)", "min((len(x) for x in refs), key=lambda L: L - len(hyp))"))
wrong(K, "the hypothesis length added inside the loop over n", ["once"], STATS + """
def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in range(1, 5):
            h = grams(hyp, n)
            most = Counter()
            for ref in refs:
                most |= grams(ref, n)
            matches[n - 1] += sum(min(k, most[g]) for g, k in h.items())
            totals[n - 1] += sum(h.values())
            c += len(hyp)
        r += min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))
    return matches, totals, c, r
""")
wrong(K, "totals of distinct n-grams", ["distinct", "every"],
      clipped("max(x[g] for x in counts)", CLOSEST, "len(h)"))
wrong(K, "totals of the hypothesis length for every order", ["len(hypothesis) - n + 1", "n-grams"],
      clipped("max(x[g] for x in counts)", CLOSEST, "len(hyp)"))
wrong(K, "orders 0 to 3", ["1 to 4", "order"], STATS + """
def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in range(4):
            h = grams(hyp, n)
            most = Counter()
            for ref in refs:
                most |= grams(ref, n)
            matches[n] += sum(min(k, most[g]) for g, k in h.items())
            totals[n] += sum(h.values())
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))
    return matches, totals, c, r
""")
wrong(K, "precisions instead of counts", ["count", "int"], STATS + """
def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        for n in range(1, 5):
            h = grams(hyp, n)
            most = Counter()
            for ref in refs:
                most |= grams(ref, n)
            matches[n - 1] += sum(min(k, most[g]) for g, k in h.items())
            totals[n - 1] += sum(h.values())
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))
    return [m / t if t else 0.0 for m, t in zip(matches, totals)], totals, c, r
""")
wrong(K, "n-grams of each string's characters", ["token", "string"], """
from collections import Counter

def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, reference_sets):
        hyp, refs = " ".join(hyp), [" ".join(x) for x in refs]
        for n in range(1, 5):
            h = Counter(hyp[i:i + n] for i in range(len(hyp) - n + 1))
            most = Counter()
            for ref in refs:
                most |= Counter(ref[i:i + n] for i in range(len(ref) - n + 1))
            matches[n - 1] += sum(min(k, most[g]) for g, k in h.items())
            totals[n - 1] += sum(h.values())
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda L: (abs(L - len(hyp)), L))
    return matches, totals, c, r
""")
wrong(K, "sacrebleu's BLEU read for its counts", ["write it yourself"], """
from sacrebleu.metrics import BLEU

def bleu_statistics(hypotheses, reference_sets):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    scorer = BLEU(tokenize="none", effective_order=True)
    for hyp, refs in zip(hypotheses, reference_sets):
        s = scorer.sentence_score(" ".join(hyp), [" ".join(x) for x in refs])
        matches = [a + b for a, b in zip(matches, s.counts)]
        totals = [a + b for a, b in zip(totals, s.totals)]
        c, r = c + s.sys_len, r + s.ref_len
    return matches, totals, c, r
""")


class ChapterAnswers(LearnersAnswers):
    """The shared harness, judging with the chapter's own exercises (`EXERCISES`)."""

    def result(self, answer: Answer) -> checks.CheckResult:
        index = self.answers.index(answer)
        if index not in self._verdicts:
            self._verdicts[index] = EXERCISES[answer.key].evaluate(self.define(answer))
        return self._verdicts[index]

    def assert_package_refused(self, key: str) -> None:
        exercise = EXERCISES[key]
        for dotted in exercise.package:
            outcome = exercise.evaluate(checks.resolve(dotted))
            assert not outcome.passed and "package's own" in outcome.message

    def unreached(self, key: str) -> list[str]:
        messages = [self.result(a).message for a in self.wrong if a.key == key]
        return [m.hint for m in EXERCISES[key].mistakes
                if not any(message.startswith(m.hint + "\n") for message in messages)]


JUDGED = ChapterAnswers(ANSWERS, lambda answer: define(answer.key, answer.source))
CORRECT, WRONG = JUDGED.correct, JUDGED.wrong
WRITTEN = [(key, m) for key, exercise in EXERCISES.items() for m in exercise.mistakes]


@pytest.mark.parametrize("answer", CORRECT, ids=JUDGED.ids(CORRECT))
def test_correct_alternative_passes(answer: Answer) -> None:
    JUDGED.assert_passes(answer)


@pytest.mark.parametrize("answer", WRONG, ids=JUDGED.ids(WRONG))
def test_wrong_answer_is_rejected_without_a_traceback(answer: Answer) -> None:
    JUDGED.assert_rejected(answer)


@pytest.mark.parametrize("key", KEYS)
def test_each_question_has_twelve_wrong_answers_four_correct_ones_and_names_most_mistakes(key: str) -> None:
    wrong_here = [a for a in WRONG if a.key == key]
    assert len(wrong_here) >= 12 and sum(a.key == key for a in CORRECT) >= 4
    unnamed = JUDGED.unnamed(key)
    assert 1 - len(unnamed) / len(wrong_here) >= NAMED_AT_LEAST, "\n".join(unnamed)


@pytest.mark.parametrize("key", KEYS)
def test_every_named_mistake_is_the_verdict_on_some_wrong_answer(key: str) -> None:
    unreached = JUDGED.unreached(key)
    assert not unreached, "no wrong answer is diagnosed with:\n" + "\n".join(unreached)


@pytest.mark.parametrize(("key", "mistake"), WRITTEN, ids=[f"{k}-{m.wrong.__name__}" for k, m in WRITTEN])
def test_each_mistake_written_as_code_is_rejected_with_its_own_hint(key: str, mistake: checks.Mistake
                                                                     ) -> None:
    result = EXERCISES[key].evaluate(mistake.wrong)
    assert result.status == checks.FAILED and result.message.startswith(mistake.hint + "\n"), result.message


@pytest.mark.parametrize("key", KEYS)
def test_the_course_function_itself_is_refused_by_name(key: str) -> None:
    JUDGED.assert_package_refused(key)


@pytest.mark.parametrize("key", KEYS)
def test_each_exercise_gives_three_hints_each_stronger(key: str) -> None:
    hints = EXERCISES[key].hints
    assert len(hints) == 3 and len(set(hints)) == 3


def test_a_model_answer_that_reads_sacrebleus_counts_is_refused_by_name() -> None:
    (answer,) = [a for a in WRONG if a.label == "sacrebleu's BLEU read for its counts"]
    message = JUDGED.result(answer).message
    assert "sacrebleu.metrics.bleu.BLEU" in message and "write it yourself" in message
    assert "the library function `sacrebleu" in message and "course's own" not in message  # not the course's


# ---------------------------------------------------------------------------------------------------------
# The cases hold what the checks say they cover


def test_crossing_cases_cover_one_word_ties_eos_peaks_a_reversal_and_every_presentation() -> None:
    exercise = EXERCISES["ch12.q1"]
    hidden = {"seeds": [1001, 1002], "cases": [dict(exercise.defaults, seed=s) for s in range(20)]}
    counts = []
    for case in exercise.cases(hidden):
        views, src_len, tgt_len = case.inputs["views"], case.inputs["src_len"], case.inputs["tgt_len"]
        assert [v.dtype for v in views] == [torch.float32] * 3 + [torch.float16, torch.bfloat16]
        assert views[0].shape == (tgt_len + 1, src_len + 1) and views[1].shape > views[0].shape
        aligned = views[0][:tgt_len, :src_len].argmax(1)
        for view in views:                                          # every presentation: the same a_t
            assert torch.equal(view[:tgt_len, :src_len].argmax(1), aligned), case.label
        assert not torch.allclose(views[2].sum(1), torch.ones(tgt_len + 1))
        counts.append(exercise.reference(case.inputs)[0])
        if src_len > 1 and tgt_len > 1:                              # the <eos> column wins some rows
            assert (views[0][:tgt_len].argmax(1) == src_len).any(), case.label
    shipped = {c.spec["seed"]: c for c in exercise.cases()}
    assert shipped[302].inputs["src_len"] == shipped[302].inputs["tgt_len"] == 1
    assert exercise.reference(shipped[306].inputs) == (15,) * 5                      # a reversal of 6
    assert exercise.reference(shipped[301].inputs) == (1,) * 5                       # une voiture rouge
    assert len(set(counts)) > 5


def kinds_cases(hidden: dict | None = None) -> list[checks.Case]:
    return EXERCISES["ch12.q2"].cases(hidden)


def test_real_maps_are_chapter_twelves_sentences_with_one_clear_peak_per_row() -> None:
    maps = chapter.stored_maps()
    sources = [" ".join(pair["src"]) for pair in maps]
    assert sources[:2] == ["i don't care for green tea .", "i love french movies ."]  # chapter 12's showcase
    for pair in maps:
        weights = torch.tensor(pair["weights"])
        src_len, tgt_len = len(pair["src"]), len(pair["tgt"])
        assert weights.shape == (tgt_len + 1, src_len + 1) and len(pair["translates"]) == tgt_len
        torch.testing.assert_close(weights.sum(1), torch.ones(tgt_len + 1), atol=3e-3, rtol=0)  # rounded rows
        top = weights[:tgt_len, :src_len].topk(2, dim=1).values
        assert (top[:, 0] - top[:, 1]).min() > 0.01                      # float32 keeps every argmax
        assert all(0 <= i < src_len for gold in pair["translates"] for i in gold)


def test_the_real_maps_are_package_data_so_an_installed_course_has_them() -> None:
    root = Path(__file__).resolve().parents[2]  # the checkout
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    settings = pyproject["tool"]["setuptools"]["package-data"]
    stored = "data/ch12_cross_attention.json"
    assert (root / "attn_course_exercises" / stored).is_file()
    assert any(fnmatch.fnmatch(stored, pattern) for pattern in settings.get("attn_course_exercises", []))


def test_the_showcase_sentence_splits_as_the_chapter_reads_it_one_reordering_three_misalignments() -> None:
    exercise = EXERCISES["ch12.q2"]
    case = next(c for c in kinds_cases() if c.spec["real"] == 0)
    assert case.inputs["tgt_words"] == ["je", "n'aime", "pas", "le", "thé", "vert", "."]
    assert alignment_crossings(case.inputs["weights"], 7, 7) == 4                  # the chapter's count
    reorderings, misalignments = exercise.reference(case.inputs)
    assert reorderings == [(3, 5)]                                       # le on tea, vert on green
    assert misalignments == [(1, 2), (3, 4), (3, 6)]                    # n'aime on for, thé and . on green


def test_kinds_cases_cover_both_kinds_several_links_no_link_a_repeated_word_and_eos_peaks() -> None:
    exercise = EXERCISES["ch12.q2"]
    cases = kinds_cases({"seeds": [1001, 1002]})
    kinds = [exercise.reference(c.inputs) for c in cases]
    assert any(r and m for r, m in kinds) and any(r and not m for r, m in kinds)
    assert any(m and not r for r, m in kinds) and any(not r and not m for r, m in kinds)
    links = [c.inputs["links"] for c in cases]
    targets = [[t for _, t in found] for found in links]
    assert any(len(set(t)) < len(t) for t in targets)                            # a word with two links
    assert any(len(set(t)) < len(c.inputs["tgt_words"]) for t, c in zip(targets, cases, strict=True))
    assert any(len(set(c.inputs["src_words"])) < len(c.inputs["src_words"]) for c in cases)   # 'the' twice
    seeded = [c for c in cases if c.spec["real"] is None]
    assert any(links[cases.index(c)] != sorted(links[cases.index(c)]) for c in seeded)   # in no order
    for case in seeded:                                          # <eos> wins some rows, never a_t
        weights, src_len = case.inputs["weights"], len(case.inputs["src_words"])
        assert (weights[: len(case.inputs["tgt_words"])].argmax(1) == src_len).any(), case.label
    assert {c.spec["real"] for c in cases} == {None, 0, 1, 2, 3, 4}


def test_bleu_statistics_reference_gives_multi_reference_bleu_on_every_case() -> None:
    exercise = EXERCISES["ch12.q3"]
    for case in exercise.cases({"seeds": [1001, 1002, 1003]}):
        matches, totals, hyp_length, ref_length = exercise.reference(case.inputs)
        score = BLEU.compute_bleu(matches, totals, hyp_length, ref_length, smooth_method="exp").score
        expected = multi_reference_bleu(case.inputs["hypotheses"], case.inputs["reference_sets"])
        assert math.isclose(score, expected, rel_tol=1e-9, abs_tol=1e-9), case.label


def test_bleu_cases_cover_repeats_ties_both_ways_short_hypotheses_and_one_to_four_references() -> None:
    cases = EXERCISES["ch12.q3"].cases()
    sets = [refs for c in cases for refs in c.inputs["reference_sets"]]
    pairs = [(h, refs) for c in cases for h, refs in zip(c.inputs["hypotheses"], c.inputs["reference_sets"],
                                                        strict=True)]
    assert {len(refs) for refs in sets} == {1, 2, 3, 4}
    assert any(len(h) < 4 for h, _ in pairs)                                      # no 4-grams at all
    assert any(len(set(h)) < len(h) for h, _ in pairs)                           # a repeated word
    ties = []
    for h, refs in pairs:
        distance = [abs(len(r) - len(h)) for r in refs]
        closest = [len(r) for r, d in zip(refs, distance, strict=True) if d == min(distance)]
        if len(set(closest)) > 1:
            ties.append(closest[0] < closest[1])
    assert set(ties) == {True, False}                        # the shorter listed first, and the longer
    assert any(h in refs[1:] and h not in refs[:1] for h, refs in pairs)           # another reference


def test_bleu_statistics_settings_are_the_course_bleus() -> None:
    assert BLEU_SETTINGS["max_ngram_order"] == 4 and BLEU_SETTINGS["tokenize"] == "none"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_crossings_solutions_run_on_cuda() -> None:
    for key, move in (("ch12.q1", "views"), ("ch12.q2", "weights")):
        exercise = EXERCISES[key]
        answer = define(key, exercise.solution_code)
        for case in exercise.cases():
            value = case.inputs[move]
            moved = [v.cuda() for v in value] if key == "ch12.q1" else value.cuda()
            on_gpu = dict(case.inputs, **{move: moved})
            assert exercise.call(answer, on_gpu) == exercise.reference(case.inputs)
