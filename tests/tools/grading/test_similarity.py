"""The similarity report: a normalised form of each answer that survives renaming, reformatting and comments;
copies between students and from the course's own code are listed with their matching lines; independent
correct answers (the learner-answer catalogue's correct alternatives) are calibrated against the threshold.

Calibration at THRESHOLD 0.9 (MIN_TOKENS 40): of the 68 pairs of correct alternatives to one exercise, 1 is
listed (ch5.q3's two alternatives that differ in one comparison, 0.93); of the 62 long-enough alternatives, 2
are listed against the course's code (ch2.q1's three-line `bmm` answer, which is the model answer less its
docstring and comment, and ch6.q2's `flatten and topk`, 0.90). The bounds below keep it so."""

from __future__ import annotations

import itertools
from collections import defaultdict

from grading_cases import ANSWER, DISGUISED, PASTED
from learner_answers import ANSWERS

from attn_course import checks
from attn_course_tools.grading.similarity import (
    COURSE,
    MIN_TOKENS,
    THRESHOLD,
    course_sources,
    markdown,
    normalise,
    similar_pairs,
    without_template,
)


def texts(source: str) -> list[str]:
    return [t.text for t in normalise(source)]


def test_renaming_reformatting_and_comments_leave_the_normalised_form_unchanged() -> None:
    assert texts(ANSWER) == texts(DISGUISED)
    assert "torch" in texts(ANSWER) and "arange" in texts(ANSWER)  # library names are kept
    assert "valid_len" not in texts(ANSWER)  # the answer's own names are not


def test_a_disguised_copy_and_an_identical_cell_are_listed_at_full_score() -> None:
    pairs = similar_pairs({"ch1.q1": {"ann": ANSWER, "ben": DISGUISED, "cal": ANSWER}})
    listed = {(p.first, p.second): round(p.match.score, 2) for p in pairs}
    assert listed == {("ann", "ben, cal"): 1.0}  # one entry for the three who handed in the same code
    text = markdown(pairs, 3)
    assert "keep = torch.arange" in text and "is_real = torch.arange" in text  # ann's lines beside ben's


def test_the_packages_body_pasted_without_its_checks_is_listed_against_the_course() -> None:
    (pair,) = similar_pairs({"ch1.q1": {"dee": PASTED}})
    assert (pair.first, pair.second, pair.match.score) == ("dee", COURSE, 1.0)
    text = markdown([pair], 1)
    assert "## ch1.q1 `sequence_mask`: dee and the course's own code: 1.00" in text
    assert "<code>&nbsp;&nbsp;&nbsp;&nbsp;pad = pos &gt;= valid_len.to(X.device)[:, None]</code> |" in text
    assert "<code>&nbsp;&nbsp;&nbsp;&nbsp;padding = positions &gt;= valid_len" in text
    assert "it changes no grade" in text


def test_the_untouched_stub_and_short_answers_are_not_compared() -> None:
    stub = checks.EXERCISES["ch1.q1"].stub_code
    template = normalise(stub)
    assert without_template(normalise(stub), template) == []
    assert similar_pairs({"ch1.q1": {"ann": stub, "ben": stub}}) == []
    one_liner = "def sequence_mask(X, valid_len, value=0):\n    return X\n"
    assert len(without_template(normalise(one_liner), template)) < MIN_TOKENS
    assert similar_pairs({"ch1.q1": {"ann": one_liner, "ben": one_liner}}) == []


def correct_alternatives() -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for answer in ANSWERS:
        if answer.phrases is None:
            found[answer.key][answer.label] = answer.source
    return found


def test_independent_correct_answers_are_rarely_listed_against_each_other_or_the_course() -> None:
    alternatives = correct_alternatives()
    every = similar_pairs(alternatives, threshold=0.0)
    between = [p for p in every if p.second != COURSE]
    long_enough = {(p.key, p.first) for p in every if p.second == COURSE}
    against_course = {(p.key, p.first) for p in every if p.second == COURSE and p.match.score >= THRESHOLD}
    flagged = [(p.key, p.first, p.second) for p in between if p.match.score >= THRESHOLD]
    compared = sum(len(list(itertools.combinations(v, 2))) for v in alternatives.values())
    assert compared >= len(between) >= 60  # the pairs of answers long enough to compare
    assert len(flagged) / len(between) <= 0.03, flagged
    assert len(against_course) / len(long_enough) <= 0.05, against_course


def test_the_course_code_of_every_exercise_is_its_model_answer_and_package_source() -> None:
    for key, exercise in checks.EXERCISES.items():
        sources = course_sources(key)
        assert sources[0] == exercise.solution_code
        assert len(sources) == 1 + len(exercise.package), key
