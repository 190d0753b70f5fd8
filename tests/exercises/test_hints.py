"""Every exercise's hints escalate: three of them, distinct; the first a question that points the learner's
attention, the second naming the concept, the third pointing at the line to write in a few lines without
pasting the model answer; `next_hint()` gives levels 1, 2, 3 and then 3 again, and `hint()` says which
hint of the three it shows."""

from __future__ import annotations

import copy

import pytest

import attn_course_exercises as checks

KEYS = list(checks.EXERCISES)

#: The longest third hint: a pointer at the line, not a second solution.
MOST_CHARACTERS, MOST_LINES = 400, 4


def fresh(key: str) -> checks.Exercise:
    """The exercise with no hint shown yet (a copy: the shared one keeps its own count)."""
    exercise = copy.copy(checks.EXERCISES[key])
    exercise._hints_shown = 0
    return exercise


def answer_lines(solution: str) -> list[str]:
    """The model answer's lines of code, without comments, docstrings or lines too short to tell apart."""
    lines, in_docstring = [], False
    for raw in solution.splitlines():
        line = raw.split("  #")[0].strip()
        quotes = line.count('"""') + line.count("'''")
        if quotes or in_docstring:
            in_docstring ^= quotes % 2 == 1
            continue
        if len(line) >= 12 and not line.startswith("#"):
            lines.append(line)
    return lines


@pytest.mark.parametrize("key", KEYS)
def test_three_distinct_hints(key: str) -> None:
    hints = checks.EXERCISES[key].hints
    assert len(hints) == 3, f"{key} has {len(hints)} hint(s), expected 3 (nudge, concept, line)"
    assert len(set(hints)) == 3, f"{key}'s hints repeat one another"


@pytest.mark.parametrize("key", [k for k in KEYS if k.startswith(("ch1.", "ch3.", "ch11."))])
def test_the_first_hint_asks_a_question(key: str) -> None:
    assert "?" in checks.EXERCISES[key].hints[0]


@pytest.mark.parametrize("key", KEYS)
def test_next_hint_escalates_then_repeats_the_last(key: str) -> None:
    exercise = fresh(key)
    shown = [exercise.next_hint() for _ in range(4)]
    assert [level for level, _ in shown] == [1, 2, 3, 3]
    assert [text for _, text in shown] == [*exercise.hints, exercise.hints[-1]]


@pytest.mark.parametrize("key", KEYS)
def test_the_third_hint_points_at_the_line_without_pasting_the_answer(key: str) -> None:
    exercise = checks.EXERCISES[key]
    third = exercise.hints[-1]
    assert len(third) <= MOST_CHARACTERS and len(third.splitlines()) <= MOST_LINES, third
    pasted = [line for line in answer_lines(exercise.solution_code) if line in third]
    assert not pasted, f"{key}'s third hint holds the model answer's lines {pasted}"


@pytest.mark.parametrize("key", KEYS)
def test_hint_says_which_of_the_three_it_shows(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    exercise = fresh(key)
    exercise.hint()
    first = capsys.readouterr().out
    exercise.hint()
    second = capsys.readouterr().out
    assert "Hint 1 of 3" in first and exercise.hints[0][:40] in first and "again for a stronger one" in first
    assert "Hint 2 of 3" in second and exercise.hints[1][:40] in second


def test_the_answer_lines_of_a_model_answer_are_found() -> None:
    lines = answer_lines(checks.EXERCISES["ch3.q2"].solution_code)
    assert lines == [
        "def final_state(outputs, valid_lens):",
        "rows = torch.arange(outputs.shape[0], device=outputs.device)",
        "return outputs[rows, valid_lens - 1]",
    ]
