"""The checks measured on learners' answers written from the prompts alone (tests/learner_answers.py): every
correct alternative passes, every wrong answer is rejected, and at least 80 % of the rejections name or locate
the mistake (the message contains one of the answer's phrases). `pytest -s` prints the table per exercise."""

from __future__ import annotations

import functools

import pytest
from learner_answers import ANSWERS, Answer, define

from attn_course import checks

#: The share of wrong answers whose message must name or locate the mistake.
NAMED_AT_LEAST = 0.80

#: Chapters 9 and 10's learners' answers are in tests/library/checks/test_checks_ch9_ch10.py.
ELSEWHERE = ("ch9.", "ch10.")
CURRENT = [a for a in ANSWERS if not a.key.startswith(ELSEWHERE)]
CORRECT = [a for a in CURRENT if a.phrases is None]
WRONG = [a for a in CURRENT if a.phrases is not None]


@functools.cache
def verdict(index: int) -> checks.CheckResult:
    answer = ANSWERS[index]
    return checks.EXERCISES[answer.key].evaluate(define(answer))


def result(answer: Answer) -> checks.CheckResult:
    return verdict(ANSWERS.index(answer))


def names_its_mistake(answer: Answer, message: str) -> bool:
    """Whether the diagnosis (the message before its "Failing case: ..." line, whose inputs could hold one
    of the phrases by chance) contains one of the answer's phrases."""
    diagnosis = message.split("\nFailing case:")[0].lower()
    return any(phrase.lower() in diagnosis for phrase in answer.phrases or ())


@pytest.mark.parametrize("answer", CORRECT, ids=[f"{a.key}:{a.label}" for a in CORRECT])
def test_correct_alternative_passes(answer: Answer) -> None:
    outcome = result(answer)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("answer", WRONG, ids=[f"{a.key}:{a.label}" for a in WRONG])
def test_wrong_answer_is_rejected(answer: Answer) -> None:
    outcome = result(answer)
    assert outcome.status == checks.FAILED, f"{answer.label} passes: {outcome.message}"


def test_most_rejections_name_the_mistake() -> None:
    rows, named_total = [], 0
    for key in (k for k in checks.EXERCISES if not k.startswith(ELSEWHERE)):
        wrong = [a for a in WRONG if a.key == key]
        rejected = [a for a in wrong if result(a).status == checks.FAILED]
        named = [a for a in rejected if names_its_mistake(a, result(a).message)]
        named_total += len(named)
        rows.append(f"{key:8} {len(wrong):5} {len(rejected):8} {len(named):5}")
        for a in wrong:
            if a not in named:
                message = result(a).message.replace("\n", " ")[:160]
                rows.append(f"    not named: {a.label}: {message}")
    rejected_total = sum(result(a).status == checks.FAILED for a in WRONG)
    print(f"\n{'exercise':8} {'wrong':>5} {'rejected':>8} {'named':>5}")
    print("\n".join(rows))
    print(
        f"all: {len(WRONG)} wrong answers, {rejected_total / len(WRONG):.0%} rejected, "
        f"{named_total / len(WRONG):.0%} named; {len(CORRECT)} correct alternatives, "
        f"{sum(result(a).passed for a in CORRECT)} accepted"
    )
    assert named_total / len(WRONG) >= NAMED_AT_LEAST
