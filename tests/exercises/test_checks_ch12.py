"""The checks of chapter 12 measured on learners' answers written from the prompts alone: every correct
alternative passes (loops, numpy, a merge sort, sacrebleu called directly), every wrong answer is rejected, at
least 80 % of each question's rejections name or locate the mistake (the message holds one of the answer's
phrases), every named mistake is the verdict on some wrong answer, and an answer that hands the work to the
course's own function is refused by name."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch
from conftest import LearnersAnswers

import attn_course_exercises as checks

#: The share of a question's wrong answers whose message must name or locate the mistake.
NAMED_AT_LEAST = 0.80
KEYS = ("ch12.q1", "ch12.q2")


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
# ch12.q2 bleu_by_source_length

K = "ch12.q2"
ok(K, "bisect finds the bin", """
import bisect

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    groups = {k: [] for k in range(len(edges) - 1)}
    for i, n in enumerate(src_lengths):
        k = bisect.bisect_right(edges, n) - 1
        if k < 0 or k >= len(edges) - 1:
            raise ValueError(f"source length {n} is outside {edges}")
        groups[k].append(i)
    out = []
    for k in range(len(edges) - 1):
        idx = groups[k]
        if not idx:
            out.append((0, None))
            continue
        hyps, refs = [hypotheses[i] for i in idx], [reference_sets[i] for i in idx]
        out.append((len(idx), multi_reference_bleu(hyps, refs)))
    return out
""")
ok(K, "sacrebleu's BLEU with the course's settings, streams by zip_longest", """
import itertools
from sacrebleu.metrics import BLEU

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    if any(not edges[0] <= n < edges[-1] for n in src_lengths):
        raise ValueError("a sentence lies outside the bins")
    result = []
    for low, high in zip(edges[:-1], edges[1:]):
        chosen = [i for i, n in enumerate(src_lengths) if low <= n < high]
        if not chosen:
            result.append((0, None))
            continue
        hyps = [" ".join(hypotheses[i]) for i in chosen]
        sets = [[" ".join(r) for r in reference_sets[i]] for i in chosen]
        streams = [list(s) for s in itertools.zip_longest(*sets)]
        bleu = BLEU(tokenize="none", smooth_method="exp", force=True).corpus_score(hyps, streams)
        result.append((len(chosen), bleu.score))
    return result
""")
ok(K, "sacrebleu.corpus_bleu with its defaults, streams padded with None by hand", """
import sacrebleu

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    bins = [[] for _ in edges[1:]]
    for i, n in enumerate(src_lengths):
        for k in range(len(bins)):
            if edges[k] <= n < edges[k + 1]:
                bins[k].append(i)
                break
        else:
            raise ValueError(f"src_lengths[{i}] = {n} is in no bin")
    out = []
    for members in bins:
        if len(members) == 0:
            out.append((0, None))
        else:
            most = max(len(reference_sets[i]) for i in members)
            streams = []
            for k in range(most):
                streams.append([" ".join(reference_sets[i][k]) if k < len(reference_sets[i]) else None
                                for i in members])
            hyps = [" ".join(hypotheses[i]) for i in members]
            out.append((len(members), sacrebleu.corpus_bleu(hyps, streams).score))
    return out
""")
ok(K, "numpy digitize", """
import numpy as np

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    slots = np.digitize(np.asarray(src_lengths, dtype=float), np.asarray(edges, dtype=float)) - 1
    if ((slots < 0) | (slots >= len(edges) - 1)).any():
        raise ValueError("some source lengths fall outside the bins")
    answer = []
    for k in range(len(edges) - 1):
        idx = np.flatnonzero(slots == k).tolist()
        if idx:
            answer.append((len(idx), multi_reference_bleu([hypotheses[i] for i in idx],
                                                          [reference_sets[i] for i in idx])))
        else:
            answer.append((0, None))
    return answer
""")
ok(K, "lists of lists, strings joined first", """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    hyps = [" ".join(h) for h in hypotheses]
    refs = [[" ".join(r) for r in rs] for rs in reference_sets]
    table = []
    for k in range(len(edges) - 1):
        table.append([i for i in range(len(hyps)) if edges[k] <= src_lengths[i] < edges[k + 1]])
    if sum(len(row) for row in table) != len(hyps):
        raise ValueError("not every sentence is in a bin")
    return [[len(row), multi_reference_bleu([hyps[i] for i in row], [refs[i] for i in row]) if row else None]
            for row in table]
""")

BINS = """
    groups = [[] for _ in range(len(edges) - 1)]
    for i, n in enumerate(src_lengths):
        k = next((k for k in range(len(groups)) if edges[k] <= n < edges[k + 1]), None)
        if k is None:
            raise ValueError("outside")
        groups[k].append(i)"""

wrong(K, "first reference only", ["first reference"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    out = []
    for g in groups:
        if not g:
            out.append((0, None))
        else:
            out.append((len(g), multi_reference_bleu([hypotheses[i] for i in g],
                                                     [[reference_sets[i][0]] for i in g])))
    return out
""")
wrong(K, "streams by zip(*sets)", ["smallest set", "all of its translations"], """
import sacrebleu

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    out = []
    for g in groups:
        if not g:
            out.append((0, None))
            continue
        sets = [[" ".join(r) for r in reference_sets[i]] for i in g]
        streams = [list(s) for s in zip(*sets)]
        out.append((len(g), sacrebleu.corpus_bleu([" ".join(hypotheses[i]) for i in g], streams).score))
    return out
""")
wrong(K, "missing references filled with empty strings", ["empty strings", "none where"], """
import itertools
import sacrebleu

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    out = []
    for g in groups:
        if not g:
            out.append((0, None))
            continue
        sets = [[" ".join(r) for r in reference_sets[i]] for i in g]
        streams = [list(s) for s in itertools.zip_longest(*sets, fillvalue="")]
        out.append((len(g), sacrebleu.corpus_bleu([" ".join(hypotheses[i]) for i in g], streams).score))
    return out
""")
wrong(K, "mean of sacrebleu.sentence_bleu", ["mean of the sentences"], """
import sacrebleu

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    out = []
    for g in groups:
        if not g:
            out.append((0, None))
            continue
        scores = [sacrebleu.sentence_bleu(" ".join(hypotheses[i]), [" ".join(r) for r in reference_sets[i]])
                  for i in g]
        scores = [s.score for s in scores]
        out.append((len(g), sum(scores) / len(scores)))
    return out
""")
wrong(K, "mean of one-sentence multi_reference_bleu", ["mean of the sentences"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    out = []
    for g in groups:
        if not g:
            out.append((0, None))
            continue
        scores = [multi_reference_bleu([hypotheses[i]], [reference_sets[i]]) for i in g]
        out.append((len(g), sum(scores) / len(g)))
    return out
""")
wrong(K, "closed bins", ["half-open", "edge"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    groups = [[] for _ in range(len(edges) - 1)]
    for i, n in enumerate(src_lengths):
        for k in range(len(groups)):
            if edges[k] <= n <= edges[k + 1]:
                groups[k].append(i)
                break
        else:
            raise ValueError(f"length {n} is in no bin")
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g])
             if g else None) for g in groups]
""")
wrong(K, "left-open bins (a, b]", ["half-open", "edge"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    out, placed = [], 0
    for lo, hi in zip(edges[:-1], edges[1:]):
        g = [i for i, n in enumerate(src_lengths) if lo < n <= hi]
        placed += len(g)
        out.append((len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g])
                    if g else None))
    if placed < len(src_lengths):
        raise ValueError("a sentence is in no bin")
    return out
""")
wrong(K, "binned by the hypothesis's length", ["hypothesis", "source"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    groups = [[] for _ in range(len(edges) - 1)]
    for i, hyp in enumerate(hypotheses):
        k = next((k for k in range(len(groups)) if edges[k] <= len(hyp) < edges[k + 1]), None)
        if k is None:
            raise ValueError(f"sentence {i} is outside the bins")
        groups[k].append(i)
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g])
             if g else None) for g in groups]
""")
wrong(K, "empty bins skipped", ["empty bin was left out"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g]))
            for g in groups if g]
""")
wrong(K, "empty bins scored 0", ["bleu 0", "not 0"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g])
             if g else 0.0) for g in groups]
""")
wrong(K, "BLEU divided by 100", ["0-100"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g]) / 100
             if g else None) for g in groups]
""")
wrong(K, "a sentence outside every bin skipped", ["valueerror", "silently"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    groups = [[] for _ in range(len(edges) - 1)]
    for i, n in enumerate(src_lengths):
        for k in range(len(groups)):
            if edges[k] <= n < edges[k + 1]:
                groups[k].append(i)
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g])
             if g else None) for g in groups]
""")
wrong(K, "scores an empty bin too", ["no bleu", "none without calling"], """
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    return [(len(g), multi_reference_bleu([hypotheses[i] for i in g], [reference_sets[i] for i in g]))
            for g in groups]
""")
wrong(K, "reference sets handed to sacrebleu as streams", ["streams", "transpose"], """
import sacrebleu

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):""" + BINS + """
    out = []
    for g in groups:
        if not g:
            out.append((0, None))
            continue
        refs = [[" ".join(r) for r in reference_sets[i]] for i in g]
        out.append((len(g), sacrebleu.corpus_bleu([" ".join(hypotheses[i]) for i in g], refs).score))
    return out
""")
wrong(K, "calls bleu_by_length", ["course's own"], """
from attn_course.measure.metrics import bleu_by_length

def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    bins = bleu_by_length(hypotheses, reference_sets, src_lengths, edges, score=multi_reference_bleu)
    return [(b.count, b.bleu) for b in bins]
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
def test_each_question_has_twelve_wrong_answers_four_correct_ones_and_names_most_mistakes(key: str) -> None:
    wrong_here = [a for a in WRONG if a.key == key]
    assert len(wrong_here) >= 12 and sum(a.key == key for a in CORRECT) >= 4
    unnamed = JUDGED.unnamed(key)
    assert 1 - len(unnamed) / len(wrong_here) >= NAMED_AT_LEAST, "\n".join(unnamed)


@pytest.mark.parametrize("key", KEYS)
def test_every_named_mistake_is_the_verdict_on_some_wrong_answer(key: str) -> None:
    unreached = JUDGED.unreached(key)
    assert not unreached, "no wrong answer is diagnosed with:\n" + "\n".join(unreached)


@pytest.mark.parametrize("key", KEYS)
def test_the_course_function_itself_is_refused_by_name(key: str) -> None:
    JUDGED.assert_package_refused(key)


# ---------------------------------------------------------------------------------------------------------
# The cases hold what the checks say they cover


def test_crossing_cases_cover_one_word_ties_eos_peaks_a_reversal_and_every_presentation() -> None:
    exercise = checks.EXERCISES["ch12.q1"]
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


def test_bleu_cases_cover_edges_empty_bins_open_ends_several_references_and_a_length_outside() -> None:
    exercise = checks.EXERCISES["ch12.q2"]
    cases = exercise.cases()
    inputs = [c.inputs for c in cases]
    assert any(n in i["edges"] for i in inputs for n in i["src_lengths"])                  # on an edge
    bins = [b for c in cases if not c.inputs["outside"] for b in exercise.reference(c.inputs)]
    assert (0, None) in bins                                                                 # an empty bin
    assert any(i["edges"][-1] == float("inf") for i in inputs)
    assert {len(s) for i in inputs for s in i["reference_sets"]} == {1, 2, 3, 4}
    assert [i["outside"] for i in inputs].count(True) == 1
    hypotheses = [h for i in inputs for h in i["hypotheses"]]
    assert all(isinstance(h, list) and all(isinstance(w, str) for w in h) for h in hypotheses)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_crossings_solution_runs_on_cuda() -> None:
    exercise = checks.EXERCISES["ch12.q1"]
    answer = define("ch12.q1", exercise.solution_code)
    for case in exercise.cases():
        on_gpu = dict(case.inputs, views=[v.cuda() for v in case.inputs["views"]])
        assert exercise.call(answer, on_gpu) == exercise.reference(case.inputs)
