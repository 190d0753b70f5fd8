"""The checks measured on learners' answers written from the prompts alone (tests/learner_answers.py): every
correct alternative passes, every wrong answer is rejected, and at least 80 % of the rejections name or locate
the mistake (the message contains one of the answer's phrases). `pytest -s` prints the table per exercise."""

from __future__ import annotations

import pytest
from conftest import LearnersAnswers
from learner_answers import ANSWERS, Answer, define

import attn_course_exercises as checks

#: The share of wrong answers whose message must name or locate the mistake.
NAMED_AT_LEAST = 0.80

#: Chapters 9 and 10's learners' answers are in tests/exercises/test_checks_ch9_ch10.py.
ELSEWHERE = ("ch9.", "ch10.")
JUDGED = LearnersAnswers([a for a in ANSWERS if not a.key.startswith(ELSEWHERE)], define)
CORRECT, WRONG = JUDGED.correct, JUDGED.wrong


@pytest.mark.parametrize("answer", CORRECT, ids=JUDGED.ids(CORRECT))
def test_correct_alternative_passes(answer: Answer) -> None:
    JUDGED.assert_passes(answer)


@pytest.mark.parametrize("answer", WRONG, ids=JUDGED.ids(WRONG))
def test_wrong_answer_is_rejected(answer: Answer) -> None:
    JUDGED.assert_rejected(answer)


def test_most_rejections_name_the_mistake() -> None:
    rows, named_total = [], 0
    for key in (k for k in checks.EXERCISES if not k.startswith(ELSEWHERE)):
        wrong = [a for a in WRONG if a.key == key]
        rejected = [a for a in wrong if JUDGED.result(a).status == checks.FAILED]
        named = [a for a in rejected if JUDGED.names_its_mistake(a)]
        named_total += len(named)
        rows.append(f"{key:8} {len(wrong):5} {len(rejected):8} {len(named):5}")
        for a in wrong:
            if a not in named:
                message = JUDGED.result(a).message.replace("\n", " ")[:160]
                rows.append(f"    not named: {a.label}: {message}")
    rejected_total = sum(JUDGED.result(a).status == checks.FAILED for a in WRONG)
    print(f"\n{'exercise':8} {'wrong':>5} {'rejected':>8} {'named':>5}")
    print("\n".join(rows))
    print(
        f"all: {len(WRONG)} wrong answers, {rejected_total / len(WRONG):.0%} rejected, "
        f"{named_total / len(WRONG):.0%} named; {len(CORRECT)} correct alternatives, "
        f"{sum(JUDGED.result(a).passed for a in CORRECT)} accepted"
    )
    assert named_total / len(WRONG) >= NAMED_AT_LEAST
