"""The exercise checks: solutions pass, untouched stubs are "not attempted", and known-wrong answers are
rejected with a message that names the mistake (mutation tests): every mistake a check names is written once,
as wrong code in its chapter's check module, and submitted here as an answer; MUTANTS holds the wrong answers
no named mistake covers (errors, inputs changed in place, planted bugs). Also the learner-facing behaviour of
check(), hint() and solution(), hidden cases, and the exercise/solution notebooks' correspondence."""

from __future__ import annotations

import functools
import json
import linecache
import re
import sys
from pathlib import Path

import pytest
import torch
from learner_answers import ANSWERS
from learner_answers import define as define_answer
from torch import nn
from torch.nn import functional as F

import attn_course_exercises as checks
from attn_course.attention.masking import masked_softmax
from attn_course_exercises.bug_hunt import BugHunt
from attn_course_exercises.ch1_lookup import nw_exp_over_sum
from attn_course_exercises.ch1_masking import mask_inverted
from attn_course_exercises.ch2_scoring import AdditiveLayers, hunted
from attn_course_exercises.ch3_seq2seq import EncoderBase
from attn_course_tools.cli import hidden_template

ROOT = Path(__file__).resolve().parents[2]


def learner_namespace(key: str) -> dict:
    """What a learner's cell sees: the chapter's set-up imports."""
    namespace: dict = {"__name__": "__main__"}
    exec(checks.PREAMBLES[int(key[2 : key.index(".")])], namespace)
    return namespace


def define(key: str, source: str) -> object:
    namespace = learner_namespace(key)
    exec(source, namespace)
    return namespace[checks.EXERCISES[key].name]


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_solution_passes_its_check(key: str) -> None:
    exercise = checks.EXERCISES[key]
    result = exercise.evaluate(define(key, exercise.solution_code))
    assert result.passed, result.message
    assert result.cases_passed == result.cases_total >= 3


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_untouched_stub_answers_not_attempted(key: str) -> None:
    exercise = checks.EXERCISES[key]
    # A find-the-bug exercise's stub is the buggy function itself.
    assert "raise NotImplementedError" in exercise.stub_code or isinstance(exercise, BugHunt)
    result = exercise.evaluate(define(key, exercise.stub_code))
    assert result.status == checks.NOT_ATTEMPTED
    assert not result.passed
    assert exercise.marker in result.message


# ------------------------------------------------------------------------------------------------
# Mutants: known-wrong answers a learner might write that no named mistake covers, each with the words its
# rejection must contain (the named mistakes are written as wrong code beside their exercises).


def keep_mask(valid_lens, num_queries, num_keys):
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    return (torch.arange(num_keys) < lens).expand(-1, num_queries, -1)


def written_masked_softmax(scores, valid_lens=None):
    """A masked softmax as a learner writes it (ch1.q2's answers may not call the package's own)."""
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1) * keep


def mask_d2l_in_place(X, valid_len, value=0):
    mask = torch.arange(X.size(1))[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def softmax_fill_minus_1e6(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores.float(), dim=-1).to(scores.dtype)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, -1e6).float(), dim=-1).to(scores.dtype) * keep


def softmax_detached(scores, valid_lens=None):
    return written_masked_softmax(scores.detach(), valid_lens)


def softmax_fill_float32_min(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, torch.finfo(torch.float32).min), dim=-1) * keep


def softmax_float32_min_assigned(scores, valid_lens=None):
    filled = scores.clone()
    if valid_lens is None:
        return F.softmax(filled, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    filled[~keep] = torch.finfo(torch.float32).min
    return F.softmax(filled, dim=-1) * keep


def causal_mask_padded_from_longest(valid_lens, num_steps):
    n = int(valid_lens.max())
    causal = F.pad(torch.ones(n, n).tril(), (0, num_steps - n, 0, num_steps - n)).bool()
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_sized_by_longest(valid_lens, num_steps):
    n = int(valid_lens.max())
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


class AdditiveNoBroadcast(AdditiveLayers):
    def attend(self, queries, memory):
        projected_keys, values, valid_lens = memory
        features = torch.tanh(self.W_q(queries) + projected_keys)  # no axes to broadcast over
        weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
        return torch.bmm(weights, values), weights


def concat_no_expand(queries, keys, W_a, v_a):
    return (torch.tanh(torch.cat([queries[:, :, None], keys[:, None]], dim=-1) @ W_a.T) @ v_a.T).squeeze(-1)


def ce_classes_last(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits, tgt_out)


class EncoderSorted(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens, enforce_sorted=True)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))[None]


class EncoderBackwardOnly(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(h_n[1]))[None]


class EncoderSortsByHand(EncoderBase):
    """A correct alternative: sort the batch by length, pack it sorted, and put the rows back in order."""

    def forward(self, src, valid_lens):
        lens, order = valid_lens.sort(descending=True)
        outputs, h_n = self.packed(src[order], lens, enforce_sorted=True)
        back = order.argsort()
        s_0 = torch.tanh(self.bridge(h_n.transpose(0, 1).reshape(src.shape[0], -1)))
        return outputs[back], s_0[back].unsqueeze(0)


class EncoderOutputHalves(EncoderBase):
    """Correct too: the final states read from the outputs (forward at the last word, backward at 0)."""

    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        h = self.num_hiddens
        forward_last = outputs[torch.arange(src.shape[0]), valid_lens - 1, :h]
        return outputs, torch.tanh(self.bridge(torch.cat([forward_last, outputs[:, 0, h:]], -1)))[None]


class QueryWithoutAxis:
    """An attention layer as a learner calls it when the query keeps no query axis: `attend(s, memory)` with
    s (batch_size, num_hiddens) instead of (batch_size, 1, num_hiddens)."""

    def __init__(self, attention) -> None:
        self.attention = attention

    def attend(self, queries, memory):
        return self.attention.attend(queries[:, 0], memory)


def model_answer(key: str) -> object:
    """Exercise `key`'s model answer, defined as a learner's cell is."""
    return define(key, checks.EXERCISES[key].solution_code)


def bahdanau_query_without_axis(embedded, s_0, memory, attention, rnn):
    return model_answer("ch4.q1")(embedded, s_0, memory, QueryWithoutAxis(attention), rnn)


def luong_query_without_axis(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    return model_answer("ch5.q2")(y_emb, h_prev, feed, memory, QueryWithoutAxis(attention), rnn, W_c)


def local_p_renormalised(*args):
    centres, weights = model_answer("ch5.q4")(*args)
    return centres, weights / weights.sum(-1, keepdim=True)


def location_untransposed(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a[:num_keys], valid_lens)


def local_p_one_sentence_at_a_time(queries, scores, W_p, v_p, window, valid_lens):
    """A correct alternative: a Python loop over the sentences, nn.Linear-free, sigma written as D / 2."""
    centres, weights = [], []
    for i in range(queries.shape[0]):
        n = int(valid_lens[i])
        p = n * torch.sigmoid(torch.tanh(queries[i] @ W_p.T) @ v_p[0])
        s = torch.arange(scores.shape[-1], dtype=scores.dtype)
        inside = ((s[None, :] - p[:, None]).abs() <= window) & (s < n)
        a = torch.softmax(torch.where(inside, scores[i], torch.tensor(-torch.inf, dtype=scores.dtype)), -1)
        centres.append(p)
        weights.append(
            torch.where(inside, a, 0) * torch.exp(-((s[None, :] - p[:, None]) ** 2) / (2 * (window / 2) ** 2))
        )
    return torch.stack(centres), torch.stack(weights)


def hunt_axis_left(*args):
    return hunted(*args, axis=True)


def hunt_dim_left(*args):
    return hunted(*args, dim=True)


def hunt_fill_left(*args):
    return hunted(*args, fill="planted")


def hunt_only_number_changed(*args):
    return hunted(*args, fill="number")


def hunt_axis_and_dim_left(*args):
    return hunted(*args, axis=True, dim=True)


def hunt_axis_and_fill_left(*args):
    return hunted(*args, axis=True, fill="planted")


def hunt_dim_and_fill_left(*args):
    return hunted(*args, dim=True, fill="planted")


def hunt_number_changed_only(*args):
    return hunted(*args, axis=True, dim=True, fill="number")


def hunt_zeroed_but_minus_1e6(*args):
    return hunted(*args, fill="zeroed")


def hunt_with_where(queries, keys, values, valid_lens):
    """A correct alternative: torch.where, -inf replaced after the softmax, the context by einsum."""
    scores = torch.einsum("bqd,bkd->bqk", queries, keys) / queries.shape[-1] ** 0.5
    real = (torch.arange(keys.shape[1])[None, :] < valid_lens[:, None])[:, None, :]
    weights = torch.softmax(torch.where(real, scores, torch.finfo(scores.dtype).min), dim=2)
    weights = torch.where(real, weights, torch.zeros((), dtype=weights.dtype))
    return torch.einsum("bqk,bkv->bqv", weights, values), weights


def greedy_masks_rows(model, src, src_valid_lens, *, bos, eos, max_len):
    """A correct alternative: finished rows leave through boolean masks, tokens collected in a tensor."""
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    out = torch.full((src.shape[0], max_len), eos)
    alive = torch.ones(src.shape[0], dtype=torch.bool)
    y = torch.full((src.shape[0],), bos)
    for t in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        out[alive, t] = y
        still = y != eos
        alive = alive.clone()
        alive[alive.clone()] = still
        if not alive.any():
            break
        y, state = y[still], state.index_select(torch.arange(len(still))[still])
    return [[token for token in row if token != eos] for row in out.tolist()]


def beam_topk_per_beam(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] + log_probs).topk(beam_size, dim=-1)
    return top.reshape(top.shape[0], -1), index, index


def state_batch_axis(outputs, valid_lens):
    return outputs[valid_lens - 1, -1]


def beam_search_sentence_by_sentence(model, src, src_valid_lens, **kwargs):
    """A correct alternative: one sentence at a time, through the batched solution."""
    solve = define("ch6.q3", checks.EXERCISES["ch6.q3"].solution_code)
    return [solve(model, src[i : i + 1], src_valid_lens[i : i + 1], **kwargs)[0] for i in range(src.shape[0])]


MUTANTS = [
    ("ch1.q1", mask_d2l_in_place, "changed its input `X` in place"),
    ("ch1.q2", softmax_fill_minus_1e6, "-1e6 does not fit in float16"),
    ("ch1.q2", softmax_detached, "cuts the gradient"),
    ("ch2.q2", AdditiveNoBroadcast, "give them axes to broadcast over"),
    ("ch2.q4", concat_no_expand, "torch.cat needs both halves shaped alike"),
    ("ch2.q5", hunt_axis_left, "One planted bug remains. The mask is broadcast along the wrong axis"),
    ("ch2.q5", hunt_dim_left, "One planted bug remains. The softmax runs over the wrong axis"),
    ("ch2.q5", hunt_fill_left, "One planted bug remains. A sentence of valid length 0 gets uniform weights"),
    ("ch2.q5", hunt_only_number_changed, "One planted bug remains. A sentence of valid length 0"),
    ("ch2.q5", hunt_axis_and_dim_left, "2 of the 3 planted bugs remain"),
    ("ch2.q5", hunt_axis_and_fill_left, "2 of the 3 planted bugs remain"),
    ("ch2.q5", hunt_dim_and_fill_left, "2 of the 3 planted bugs remain"),
    ("ch2.q5", hunt_number_changed_only, "All 3 planted bugs remain"),
    ("ch2.q5", hunt_zeroed_but_minus_1e6, "-1e6 does not fit in float16"),
    ("ch3.q1", ce_classes_last, "expects the classes on axis 1"),
    ("ch3.q3", EncoderSorted, "pass `enforce_sorted=False`"),
    ("ch3.q3", EncoderBackwardOnly, "both directions' final states side by side"),
    ("ch4.q1", bahdanau_query_without_axis, "give the state a query axis"),
    ("ch5.q1", location_untransposed, "`queries @ W_a.T`"),
    ("ch5.q2", luong_query_without_axis, "give h_t a query axis"),
    ("ch5.q4", local_p_renormalised, "were renormalised after the Gaussian"),
    ("ch6.q2", beam_topk_per_beam, "shape (2, 9), expected (2, 3)"),
    ("ch3.q2", state_batch_axis, "You indexed the batch axis"),
    ("ch1.q2", softmax_fill_float32_min, "`torch.finfo(torch.float32).min` (about -3.4e38) does not fit"),
    ("ch1.q2", softmax_float32_min_assigned, "NaN in half precision: `torch.finfo(torch.float32).min`"),
    ("ch11.q1", causal_mask_padded_from_longest, "The causal triangle stops at the longest valid length"),
    ("ch11.q1", causal_mask_sized_by_longest, "not sized from the longest valid length"),
]


def learner(key: str, label: str) -> object:
    """The wrong answer of tests/learner_answers.py labelled `label`, as a mutant."""
    (answer,) = [a for a in ANSWERS if a.key == key and a.label == label]
    return define_answer(answer)


# Mistakes found by learners' answers: each is the verdict on one of them.
MUTANTS += [
    ("ch1.q3", learner("ch1.q3", "no minus"), "The minus sign is missing"),
    ("ch1.q3", learner("ch1.q3", "no minus naive exp"), "inf / inf is NaN"),
    ("ch1.q3", learner("ch1.q3", "naive exp with an epsilon in the denominator"), "the epsilon"),
    ("ch1.q3", learner("ch1.q3", "sum without keepdim"), "keepdim=True"),
    ("ch1.q3", learner("ch1.q3", "max subtracted without keepdim"), "keepdim=True"),
    ("ch1.q3", learner("ch1.q3", "squeeze() drops the key axis of a single key"), "without a dim"),
    ("ch1.q3", learner("ch1.q3", "calls the course's nadaraya_watson"), "calls the course's own"),
    ("ch2.q5", learner("ch2.q5", "softmax over all keys, padding zeroed afterwards"), "*before* the softmax"),
    ("ch2.q5", learner("ch2.q5", "<= in the mask"), "keeps one padded key"),
    (
        "ch2.q5",
        learner("ch2.q5", "rewritten with the course's masked_softmax"),
        "own `attn_course.attention.masking",
    ),
    ("ch3.q3", learner("ch3.q3", "calls the course's encoder"), "calls the course's own"),
    ("ch5.q4", learner("ch5.q4", "centre detached"), "No gradient reaches W_p and v_p"),
    ("ch5.q4", learner("ch5.q4", "centre computed under no_grad"), "No gradient reaches W_p and v_p"),
    ("ch5.q4", learner("ch5.q4", "centre rounded to a position"), "p_t was rounded"),
    ("ch6.q3", learner("ch6.q3", "every beam starts with score 0"), "Every beam started with score 0"),
    ("ch6.q3", learner("ch6.q3", "length without the <eos>"), "left out the <eos>"),
    ("ch6.q3", learner("ch6.q3", "every live beam joins at max_len"), "every live beam joined"),
    ("ch6.q3", learner("ch6.q3", "new beams only among the beam_size best"), "enough candidates"),
    ("ch6.q3", learner("ch6.q3", "<eos> continued like any token, cut at the end"), "cut at their"),
    ("ch6.q3", learner("ch6.q3", "done at the first finished hypothesis"), "stopped when its first"),
    ("ch6.q3", learner("ch6.q3", "calls the course's beam_search"), "calls the course's own"),
    ("ch11.q1", learner("ch11.q1", "padding masked on both axes"), "alone or on both axes"),
    ("ch11.q1", learner("ch11.q1", "or instead of and"), "combined with `|`"),
    ("ch11.q1", learner("ch11.q1", "calls the course's attention_lens"), "calls the course's own"),
    ("ch11.q2", learner("ch11.q2", "projections applied as X @ W"), "applied as `X @ W`"),
    ("ch11.q2", learner("ch11.q2", "features dealt to the heads in turn"), "every num_heads-th feature"),
    ("ch11.q2", learner("ch11.q2", "calls the course's MultiHeadAttention"), "calls the course's own"),
    ("ch12.q1", learner("ch12.q1", "each source word's target word"), "The argmax ran down the columns"),
    ("ch12.q1", learner("ch12.q1", "cuts off the last row and column"), "padded as in a batch"),
    ("ch12.q1", learner("ch12.q1", "ties count"), "Ties were counted as crossings"),
    ("ch12.q1", learner("ch12.q1", "calls the course's attention_to_links"), "calls the course's own"),
    ("ch12.q2", learner("ch12.q2", "a crossing with one right row called a reordering"), "only when *both*"),
    ("ch12.q2", learner("ch12.q2", "links looked up as (t, i)"), "read the other way round"),
    ("ch12.q2", learner("ch12.q2", "misaligned means the row's peak is under one half"),
     "not its correctness"),
    ("ch12.q2", learner("ch12.q2", "the kinds given as numbers"), "not how many there are"),
]


#: Chapters 9, 10 and 12's exercises have their mutation tests in tests/exercises/test_checks_ch9_ch10.py
#: and tests/exercises/test_checks_ch12.py (chapter 12's learners' mutants above also give the grading
#: benchmark its cells).
ELSEWHERE = ("ch9.", "ch10.", "ch12.")
MUTATED = [key for key in checks.EXERCISES if not key.startswith(ELSEWHERE)]


#: Every mistake a check names that is written as the wrong code that makes it (`Mistake(hint, wrong=...)`, in
#: the chapter's check module), every chapter's: (key, that code, its hint).
WRITTEN = [
    (key, mistake.wrong, mistake.hint)
    for key, exercise in checks.EXERCISES.items()
    for mistake in exercise.mistakes
    if mistake.wrong is not None
]


@functools.cache
def verdict(key: str, mutant: object) -> checks.CheckResult:
    """The check's verdict on a mutant (computed once: two tests read it)."""
    return checks.EXERCISES[key].evaluate(mutant)


@pytest.mark.parametrize(
    ("key", "wrong", "hint"), WRITTEN, ids=[f"{key}-{wrong.__name__}" for key, wrong, _ in WRITTEN]
)
def test_mistake_written_as_code_is_rejected_with_its_own_hint(key: str, wrong: object, hint: str) -> None:
    result = verdict(key, wrong)
    assert result.status == checks.FAILED
    assert result.message.startswith(hint + "\n"), result.message


@pytest.mark.parametrize(
    ("key", "mutant", "expected"), MUTANTS, ids=[f"{key}-{mutant.__name__}" for key, mutant, _ in MUTANTS]
)
def test_known_wrong_answer_is_rejected_with_its_hint(key: str, mutant: object, expected: str) -> None:
    result = verdict(key, mutant)
    assert result.status == checks.FAILED
    assert expected in result.message, result.message
    assert "Traceback" not in result.message


@pytest.mark.parametrize("key", MUTATED)
def test_every_named_mistake_is_the_verdict_on_some_mutant(key: str) -> None:
    # A mistake that always shares its output with another (never the only match of a case, never ahead on
    # the cases for and against it) never fires; only a mutant whose verdict is that mistake's hint shows that
    # it can.
    verdicts = [verdict(key, mutant).message for k, mutant, _ in MUTANTS + WRITTEN if k == key]
    unreached = [
        mistake.hint
        for mistake in checks.EXERCISES[key].mistakes
        if not any(message.startswith(mistake.hint + "\n") for message in verdicts)
    ]
    assert not unreached, "no mutant is diagnosed with:\n" + "\n".join(unreached)


def test_every_exercise_has_at_least_three_mutants() -> None:
    counts = {key: sum(k == key for k, _, _ in MUTANTS + WRITTEN) for key in MUTATED}
    assert min(counts.values()) >= 3, counts


def test_nadaraya_watson_cases_hold_what_the_check_says_they_cover() -> None:
    exercise = checks.EXERCISES["ch1.q3"]
    cases = {case.spec["seed"]: case.inputs for case in exercise.cases()}
    assert exercise.reference(cases[23])[0].eq(1).all()  # a single key gets all the weight
    wide = cases[24]
    _, predictions = exercise.reference(wide)
    torch.testing.assert_close(predictions, wide["values"].mean().expand_as(predictions), rtol=0, atol=1e-3)
    narrow = cases[25]
    nearest = (narrow["queries"][:, None] - narrow["keys"][None, :]).abs().argmin(-1)
    torch.testing.assert_close(exercise.reference(narrow)[1], narrow["values"][nearest], rtol=0, atol=1e-6)
    for seed, dtype in ((26, torch.float32), (27, torch.float64)):  # far from every key: exp underflows
        far = cases[seed]
        assert far["queries"].dtype == dtype
        assert torch.isnan(nw_exp_over_sum(**far)[1]).all()
        weights, predictions = exercise.reference(far)
        assert torch.isfinite(predictions).all() and weights.max(-1).values.gt(0.999).all()


# ------------------------------------------------------------------------------------------------
# What a learner sees


def test_check_finds_the_answer_in_the_callers_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    q1 = checks.EXERCISES["ch1.q1"]
    namespace = learner_namespace("ch1.q1")
    exec(q1.solution_code, namespace)
    namespace["q1"] = q1
    exec("result = q1.check()", namespace)
    assert namespace["result"].passed
    assert "Correct" in capsys.readouterr().out  # outside IPython, display() prints the plain text


def test_check_of_an_undefined_answer_says_which_cell_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = {"q2": checks.EXERCISES["ch1.q2"]}
    exec("result = q2.check()", namespace)
    result = namespace["result"]
    assert not result.passed
    assert "`masked_softmax` is not defined yet" in result.message
    assert "# EXERCISE ch1.q2" in capsys.readouterr().out


def test_exception_is_summarised_with_the_learners_line() -> None:
    def broken(X, valid_len, value=0):
        length = X.shape[1]
        return X[:, :length] / 0 + valid_len.undefined_attribute

    result = checks.EXERCISES["ch1.q1"].evaluate(broken)
    assert not result.passed
    assert "AttributeError" in result.message
    assert "`return X[:, :length] / 0 + valid_len.undefined_attribute`" in result.message
    assert "Traceback" not in result.message


@pytest.mark.parametrize(
    "answer",
    [
        42,
        None,
        "masked_softmax",
        lambda scores, valid_lens=None: None,
        lambda scores, valid_lens=None: scores.numpy(),
    ],
)
def test_check_of_a_nonsense_answer_fails_instead_of_raising(
    answer: object, capsys: pytest.CaptureFixture[str]
) -> None:
    result = checks.EXERCISES["ch1.q2"].check(answer)
    assert result.status == checks.FAILED
    assert result.message
    capsys.readouterr()


def test_numpy_result_is_named_as_such() -> None:
    result = checks.EXERCISES["ch1.q2"].evaluate(
        lambda scores, valid_lens=None: F.softmax(scores, -1).numpy()
    )
    assert "numpy.ndarray" in result.message and "expected a torch.Tensor" in result.message


def test_missing_return_is_reported_as_none() -> None:
    result = checks.EXERCISES["ch1.q1"].evaluate(lambda X, valid_len, value=0: None)
    assert "is None, expected a torch.Tensor" in result.message, result.message


def test_the_packages_own_function_is_not_accepted_as_an_answer() -> None:
    result = checks.EXERCISES["ch1.q2"].evaluate(masked_softmax)
    assert not result.passed
    assert "package's own" in result.message


def test_a_library_not_implemented_error_is_an_error_not_a_missing_attempt() -> None:
    def uses_sparse(X, valid_len, value=0):
        return torch.empty(0).to_sparse().to_dense() @ X  # raises inside torch, not in the stub

    result = checks.EXERCISES["ch1.q1"].evaluate(uses_sparse)
    assert result.status == checks.FAILED


def test_an_unfinished_branch_is_incorrect_not_unattempted() -> None:
    def per_sequence_only(scores, valid_lens=None):
        if valid_lens is not None and valid_lens.dim() == 2:
            raise NotImplementedError
        return written_masked_softmax(scores.clone(), valid_lens)

    result = checks.EXERCISES["ch1.q2"].evaluate(per_sequence_only)
    assert result.status == checks.FAILED
    assert "a branch is still unfinished" in result.message and "(batch_size, num_queries)" in result.message


def test_result_renders_html_and_plain_text() -> None:
    result = checks.EXERCISES["ch1.q1"].evaluate(mask_inverted)
    bundle = result.rich()._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Incorrect (ch1.q1, sequence_mask):")
    assert "#c62828" in bundle["text/html"] and "<code>" in bundle["text/html"]
    assert str(result) == bundle["text/plain"]


def test_hint_and_solution_show_the_hint_and_the_model_answer(capsys: pytest.CaptureFixture[str]) -> None:
    q2 = checks.EXERCISES["ch1.q2"]
    assert q2.hint() is None and q2.solution() is None
    out = capsys.readouterr().out
    assert "Hint" in out and "def masked_softmax" in out


def test_inputs_are_not_shared_between_attempts() -> None:
    exercise = checks.EXERCISES["ch1.q1"]
    case = exercise.cases()[0]
    before = case.inputs["X"].clone()
    exercise.attempt(mask_d2l_in_place, case)
    assert torch.equal(case.inputs["X"], before)


# ------------------------------------------------------------------------------------------------
# Hidden cases


def test_hidden_seeds_and_cases_are_added_after_the_shipped_ones() -> None:
    exercise = checks.EXERCISES["ch1.q2"]
    shipped = exercise.cases()
    hidden = {"seeds": [101], "cases": [{"batch_size": 4, "num_keys": 9, "dtype": "float64", "seed": 7}]}
    cases = exercise.cases(hidden)
    assert len(cases) == 2 * len(shipped) + 1
    assert cases[-1].inputs["scores"].shape == (4, 3, 9)
    assert not torch.equal(cases[len(shipped)].inputs["scores"], shipped[0].inputs["scores"])


def test_hidden_cases_can_fail_an_answer_the_shipped_cases_pass() -> None:
    def works_for_small_keys_only(scores, valid_lens=None):
        weights = written_masked_softmax(scores, valid_lens)
        return weights if scores.shape[-1] <= 6 else weights.flip(-1)

    exercise = checks.EXERCISES["ch1.q2"]
    assert exercise.evaluate(works_for_small_keys_only).passed
    hidden = {"cases": [{"num_keys": 9, "seed": 5}]}
    assert not exercise.evaluate(works_for_small_keys_only, hidden).passed


@pytest.mark.parametrize(
    "hidden",
    [{"extra": 1}, {"seeds": ["x"]}, {"cases": [{"num_heads": 2}]}, {"cases": [{"valid_lens": [9, 9]}]}],
)
def test_malformed_hidden_inputs_are_refused(hidden: dict) -> None:
    with pytest.raises(ValueError, match="ch1.q2"):
        checks.EXERCISES["ch1.q2"].cases(hidden)


@pytest.mark.parametrize(
    ("key", "hidden", "named"),
    [
        ("ch1.q2", {"seeds": [True]}, "hidden seed for ch1.q2 must be an int, got True"),
        ("ch1.q2", {"cases": [{"seed": 1.5}]}, "seed must be an int, got 1.5"),
        ("ch1.q2", {"cases": [{"num_keys": 0}]}, "num_keys must be an int >= 1, got 0"),
        ("ch1.q1", {"cases": [{"shape": [2, 0]}]}, r"shape\[1\] must be an int >= 1, got 0"),
        ("ch1.q1", {"cases": [{"shape": [2, True]}]}, r"shape\[1\] must be an int >= 1, got True"),
    ],
)
def test_a_malformed_hidden_case_names_the_key_and_the_value(key: str, hidden: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        checks.EXERCISES[key].cases(hidden)


# ------------------------------------------------------------------------------------------------
# The notebooks


def code_cells(path: Path) -> list[str]:
    notebook = json.loads(path.read_text())
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def all_cells(path: Path) -> list[tuple[str, str]]:
    notebook = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]


EXERCISE_NOTEBOOKS = sorted((ROOT / "exercises").glob("ex[0-9]*.ipynb"))


def test_every_chapter_with_exercises_has_an_exercise_and_a_solution_notebook() -> None:
    chapters = {int(p.name[2:4]) for p in EXERCISE_NOTEBOOKS}
    assert chapters == set(checks.chapters())
    for path in EXERCISE_NOTEBOOKS:
        assert (ROOT / "solutions" / path.name).exists()


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_solution_notebook_is_the_exercise_notebook_with_the_stubs_filled_in(path: Path) -> None:
    exercise_cells, solution_cells = all_cells(path), all_cells(ROOT / "solutions" / path.name)
    assert len(exercise_cells) == len(solution_cells)
    chapter = int(path.name[2:4])
    found = []
    for (kind, stub), (_, solution) in zip(exercise_cells, solution_cells, strict=True):
        if kind == "code" and stub.startswith("# EXERCISE "):
            exercise = checks.EXERCISES[stub.splitlines()[0].removeprefix("# EXERCISE ").strip()]
            assert stub == f"{exercise.marker}\n{exercise.stub_code}".rstrip("\n")
            assert solution == f"{exercise.marker}\n{exercise.solution_code}".rstrip("\n")
            found.append(exercise)
        else:
            assert stub == solution
    assert tuple(found) == checks.chapter(chapter)


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_no_hint_spells_out_the_code(key: str) -> None:
    # A hint points at the idea; a code span with a call, an index or an operator would be the answer.
    assert not re.findall(r"`[^`]*[(\[@=][^`]*`", checks.EXERCISES[key].hint_text)


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_no_exercise_prompt_gives_the_answers_expression(path: Path) -> None:
    prompts = "\n".join(source for kind, source in all_cells(path) if kind == "markdown")
    for give_away in ("keys @ W_a.T", "Sets make it one line", "torch.bmm("):
        assert give_away not in prompts


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_set_up_cell_imports_the_graders_preamble_and_binds_every_question(path: Path) -> None:
    chapter = int(path.name[2:4])
    setup = code_cells(path)[0]
    for line in checks.PREAMBLES[chapter].splitlines():
        assert line in setup.splitlines()
    names = ", ".join(f"q{i + 1}" for i in range(len(checks.chapter(chapter))))
    assert f"{names} = checks.chapter({chapter})" in setup
    for i in range(len(checks.chapter(chapter))):
        assert f"q{i + 1}.check()" in code_cells(path)


# ------------------------------------------------------------------------------------------------
# The references of the decoder exercises are the package's decoders, taken apart


def copy_gru(cell_params: dict, rnn: nn.GRU) -> None:
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(rnn, f"{name}_l0").copy_(cell_params[name])


@pytest.mark.parametrize("encoder", [EncoderSortsByHand, EncoderOutputHalves], ids=lambda c: c.__name__)
def test_encoder_exercise_accepts_other_correct_encoders(encoder: type) -> None:
    result = checks.EXERCISES["ch3.q3"].evaluate(encoder)
    assert result.passed, result.message


def test_bug_hunt_accepts_another_correct_fix() -> None:
    assert checks.EXERCISES["ch2.q5"].evaluate(hunt_with_where).passed


def test_bug_hunt_names_each_remaining_bug_of_a_partial_fix() -> None:
    message = verdict("ch2.q5", hunt_dim_and_fill_left).message
    assert "softmax runs over the wrong axis" in message and "gets uniform weights" in message
    assert "broadcast along the wrong axis" not in message


def test_bug_hunt_stub_is_the_buggy_function_and_an_edit_that_fixes_nothing_is_not_attempted() -> None:
    exercise = checks.EXERCISES["ch2.q5"]
    assert "-1e6" in exercise.stub_code and "raise NotImplementedError" not in exercise.stub_code
    renamed = exercise.stub_code.replace("weights = ", "w = ").replace(
        "return weights @ values, weights", "return w @ values, w"
    )
    result = exercise.evaluate(define("ch2.q5", renamed))
    assert (
        result.status == checks.NOT_ATTEMPTED and "still behaves like the function as given" in result.message
    )


def test_bahdanau_exercise_agrees_with_the_packages_bahdanau_decoder() -> None:
    from attn_course.models.decoders import BahdanauDecoder
    from attn_course.models.encoders import EncoderOutput

    exercise = checks.EXERCISES["ch4.q1"]
    case = exercise.cases()[0]
    i = case.inputs
    (a, enc), h = i["attention"]["W_k.weight"].shape, i["attention"]["W_q.weight"].shape[1]
    e = i["embedded"].shape[-1]
    decoder = BahdanauDecoder(11, e, h, enc_size=enc, attn_hiddens=a).eval()
    decoder.attention.load_state_dict(i["attention"])
    copy_gru(i["rnn"], decoder.rnn)
    tgt_in = torch.randint(3, 11, i["embedded"].shape[:2])
    inputs = dict(i, embedded=decoder.embedding(tgt_in).detach())
    states, contexts, weights, _ = exercise.reference(inputs)
    _, attention = decoder(tgt_in, EncoderOutput(i["enc_outputs"], i["s_0"][None], i["valid_lens"]))
    torch.testing.assert_close(weights, attention)


def test_luong_step_exercise_agrees_with_the_packages_luong_decoder_step() -> None:
    from attn_course.models.decoders import DecoderState, LuongDecoder

    exercise = checks.EXERCISES["ch5.q2"]
    i = exercise.cases()[0].inputs
    h, enc = i["W_a"].shape
    e = i["y_emb"].shape[-1]
    decoder = LuongDecoder(11, e, h, enc_size=enc, score="general", input_feeding=True).eval()
    decoder.attention.load_state_dict({"W_a.weight": i["W_a"]})
    copy_gru(i["rnn"], decoder.rnn)
    with torch.no_grad():
        decoder.W_c.weight.copy_(i["W_c"])
    y_prev = torch.randint(3, 11, (i["y_emb"].shape[0],))
    inputs = dict(i, y_emb=decoder.embedding(y_prev).detach())
    h_t, attentional, weights = exercise.reference(inputs)
    memory = decoder.attention.prepare(i["enc_outputs"], i["enc_outputs"], i["valid_lens"])
    state = DecoderState(i["h_prev"][None], memory, i["feed"], 0, i["valid_lens"])
    _, new_state, step_weights = decoder.step(y_prev, state)
    torch.testing.assert_close(h_t, new_state.hidden[-1])
    torch.testing.assert_close(attentional, new_state.feed)
    torch.testing.assert_close(weights, step_weights)


def test_local_p_exercise_agrees_with_the_packages_local_p_alignment() -> None:
    from attn_course.models.decoders import LuongDecoder

    decoder = LuongDecoder(11, 4, 6, enc_size=6, score="general", alignment="local-p", window=2).eval()
    keys, lens = torch.randn(3, 9, 6), torch.tensor([9, 5, 7])
    queries = torch.randn(3, 4, 6)
    memory = decoder.attention.prepare(keys, keys, lens)
    inputs = {
        "scores": decoder.attention.scores(queries, memory),
        "centres": decoder.centres(queries, 0, lens),
        "window": 2,
        "valid_lens": lens,
    }
    expected = decoder.align(queries, memory, 0)[1]
    torch.testing.assert_close(checks.EXERCISES["ch5.q3"].reference(inputs), expected)


def test_local_p_attention_accepts_a_loop_over_sentences() -> None:
    assert checks.EXERCISES["ch5.q4"].evaluate(local_p_one_sentence_at_a_time).passed


def test_local_p_attention_exercise_agrees_with_the_packages_local_p_decoder() -> None:
    from attn_course.models.decoders import LuongDecoder

    decoder = LuongDecoder(11, 4, 6, enc_size=6, score="general", alignment="local-p", window=2).eval()
    keys, lens = torch.randn(3, 9, 6), torch.tensor([9, 5, 7])
    queries = torch.randn(3, 4, 6)
    memory = decoder.attention.prepare(keys, keys, lens)
    inputs = {
        "queries": queries,
        "scores": decoder.attention.scores(queries, memory),
        "W_p": decoder.W_p.weight.detach(),
        "v_p": decoder.v_p.weight.detach(),
        "window": 2,
        "valid_lens": lens,
    }
    with torch.no_grad():
        centres, weights = checks.EXERCISES["ch5.q4"].reference(inputs)
        torch.testing.assert_close(centres, decoder.centres(queries, 0, lens))
        torch.testing.assert_close(weights, decoder.align(queries, memory, 0)[1])


def test_scripted_model_decodes_like_a_seq2seq_under_the_packages_greedy_search() -> None:
    exercise = checks.EXERCISES["ch6.q1"]
    lengths = {len(tokens) for case in exercise.cases() for tokens in exercise.reference(case.inputs)[0]}
    assert 0 in lengths and 8 in lengths and len(lengths) >= 6  # empty, cut by max_len, and in between


def test_greedy_check_counts_the_rows_fed_at_each_step() -> None:
    # 4 sentences ending after 6, 5, 6 and 3 steps: the decoder sees 4 rows 3 times, then 3, 3, 2.
    case = next(c for c in checks.EXERCISES["ch6.q1"].cases() if c.spec["seed"] == 135)
    assert checks.EXERCISES["ch6.q1"].reference(case.inputs)[1] == [4, 4, 4, 3, 3, 2]


def test_greedy_that_drops_rows_with_boolean_masks_passes() -> None:
    result = checks.EXERCISES["ch6.q1"].evaluate(greedy_masks_rows)
    assert result.passed, result.message


def test_beam_search_one_sentence_at_a_time_passes() -> None:
    result = checks.EXERCISES["ch6.q3"].evaluate(beam_search_sentence_by_sentence)
    assert result.passed, result.message


def test_beam_step_of_size_one_is_the_greedy_choice() -> None:
    exercise = checks.EXERCISES["ch6.q2"]
    log_probs = F.log_softmax(torch.randn(3, 1, 7, dtype=torch.float64), -1)
    scores, beams, tokens = exercise.reference(
        {"beam_scores": torch.zeros(3, 1, dtype=torch.float64), "log_probs": log_probs, "beam_size": 1}
    )
    assert torch.equal(tokens[:, 0], log_probs[:, 0].argmax(-1)) and not beams.any()


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_solution_passes_the_hidden_template_cases_too(key: str) -> None:
    exercise = checks.EXERCISES[key]
    hidden = hidden_template([int(key[2 : key.index(".")])])[key]
    result = exercise.evaluate(define(key, exercise.solution_code), hidden)
    assert result.passed, result.message
    assert result.cases_total == 3 * len(exercise.specs) + 1


# ------------------------------------------------------------------------------------------------
# How a check chooses a diagnosis, and delegation to the course's own functions


def doubling(mistakes: list[checks.Mistake], error_hints: tuple[checks.ErrorHint, ...] = ()) -> object:
    """A toy exercise: return 2 x, on x = 1, 2 and 3."""
    return checks.Exercise(
        "toy.q1",
        "double",
        "double",
        solution="def double(x):\n    return 2 * x\n",
        hint="What does doubling do to x?",
        covers="",
        defaults={"x": 1},
        specs=[{"x": 1}, {"x": 2}, {"x": 3}],
        build=lambda spec: checks.Case(f"x = {spec['x']}", {"x": spec["x"]}, spec),
        call=lambda answer, i: answer(i["x"]),
        reference=lambda i: 2 * i["x"],
        mistakes=mistakes,
        error_hints=error_hints,
    )


TRIPLES = checks.Mistake("You tripled x.", lambda i: 3 * i["x"])


def test_a_mistake_is_named_when_every_failing_case_agrees_on_it() -> None:
    result = doubling([TRIPLES]).evaluate(lambda x: 3 * x)
    assert result.message.startswith("You tripled x.\n")


def test_no_mistake_is_named_when_a_failing_case_disagrees() -> None:
    result = doubling([TRIPLES]).evaluate(lambda x: 3 * x if x == 1 else 5 * x)
    assert not result.passed and "tripled" not in result.message
    assert result.message.startswith("The result is 3, expected 2.")


def test_a_failing_case_the_mistake_would_get_right_speaks_against_it() -> None:
    only_odd = checks.Mistake("You tripled odd x.", lambda i: 3 * i["x"] if i["x"] % 2 else 2 * i["x"])
    result = doubling([only_odd]).evaluate(lambda x: 3 * x)
    assert "odd" not in result.message


def test_a_case_that_raised_counts_neither_for_nor_against_a_mistake() -> None:
    def triples_or_raises(x):
        if x == 2:
            raise ValueError("no")
        return 3 * x

    assert doubling([TRIPLES]).evaluate(triples_or_raises).message.startswith("You tripled x.\n")


def test_a_mistake_written_as_code_is_named_by_running_it_as_an_answer() -> None:
    def triples(x):
        return 3 * x

    result = doubling([checks.Mistake("You tripled x.", wrong=triples)]).evaluate(lambda x: 3 * x)
    assert result.message.startswith("You tripled x.\n")


def test_wrong_code_that_cannot_make_its_mistake_on_a_case_raises_and_the_case_counts_neither_way() -> None:
    def triples_odd(x):
        if x % 2 == 0:
            raise ValueError("the mistake is made on odd x only")
        return 3 * x

    def triples_odd_else_right(x):   # right on even x: an even failing case speaks against the mistake
        return 3 * x if x % 2 else 2 * x

    named = doubling([checks.Mistake("You tripled odd x.", wrong=triples_odd)]).evaluate(lambda x: 3 * x)
    assert named.message.startswith("You tripled odd x.\n")
    against = checks.Mistake("You tripled odd x.", wrong=triples_odd_else_right)
    assert "odd" not in doubling([against]).evaluate(lambda x: 3 * x).message


@pytest.mark.parametrize("parts", [{}, {"variant": lambda i: 3 * i["x"], "wrong": lambda x: 3 * x}])
def test_a_mistake_takes_exactly_one_of_wrong_code_and_a_variant(parts: dict) -> None:
    with pytest.raises(ValueError, match="exactly one of `wrong` and `variant`"):
        checks.Mistake("You tripled x.", **parts)


def test_the_fallback_says_which_outputs_differ() -> None:
    exercise = checks.EXERCISES["ch5.q4"]
    solve = define("ch5.q4", exercise.solution_code)

    def wrong_weights(*args):
        centres, weights = solve(*args)
        return centres, weights.flip(-1)

    message = exercise.evaluate(wrong_weights).message
    assert "What differs: the weights in" in message and "the centres p_t agree" in message


def cell_function(source: str, filename: str) -> object:
    """The function `source` defines, compiled as a notebook cell is (its lines in linecache)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["double"]


def test_an_error_hint_can_require_the_learners_line() -> None:
    exercise = doubling([], (checks.ErrorHint("ValueError", "Mind the keepdim.", line=r"keepdim"),))
    elsewhere = cell_function("def double(x):\n    raise ValueError(x)\n", "<cell 1>")
    on_the_line = cell_function("def double(x):\n    raise ValueError(x)  # keepdim\n", "<cell 2>")
    assert exercise.evaluate(elsewhere).message.startswith("Your code raised ValueError")
    assert exercise.evaluate(on_the_line).message.startswith("Mind the keepdim.")


def test_an_answer_that_calls_the_course_function_it_re_implements_fails() -> None:
    def nadaraya_watson(queries, keys, values, sigma):
        from attn_course.attention import lookup as mine

        return mine.nadaraya_watson(queries, keys, values, sigma)

    result = checks.EXERCISES["ch1.q3"].evaluate(nadaraya_watson)
    assert not result.passed
    assert "calls the course's own `attn_course.attention.lookup.nadaraya_watson`" in result.message


def test_an_answer_may_call_what_its_prompt_allows_but_not_what_it_forbids() -> None:
    allowed = checks.EXERCISES["ch2.q1"]  # its model answer calls masked_softmax
    assert allowed.evaluate(define("ch2.q1", allowed.solution_code)).passed
    forbidden = learner("ch2.q5", "rewritten with the course's masked_softmax")
    result = checks.EXERCISES["ch2.q5"].evaluate(forbidden)
    assert "calls the course's own `attn_course.attention.masking.masked_softmax`" in result.message


def test_a_function_switched_off_while_grading_reads_as_delegation() -> None:
    exercise = checks.EXERCISES["ch1.q3"]
    cases = exercise.cases()
    message = (
        "attn_course.attention.lookup.nadaraya_watson is switched off while grading: ch1.q3 asks you to "
        "write `nadaraya_watson` yourself"
    )
    error = {"type": "RuntimeError", "where": "line 2", "message": message}
    result = exercise.judge(cases, [{"status": "error", "error": error}] * len(cases))
    assert "calls the course's own `attn_course.attention.lookup.nadaraya_watson`" in result.message


def test_the_call_watch_restores_the_profiler_it_found() -> None:
    before = sys.getprofile()
    checks.EXERCISES["ch1.q3"].evaluate(learner("ch1.q3", "calls the course's nadaraya_watson"))
    assert sys.getprofile() is before
