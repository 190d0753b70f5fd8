"""Parsons problems (attn_course_exercises.parsons): the model's order passes and so does another right one;
each distractor is a line of a named mistake that makes that mistake, and a program using it is told which
line and which mistake; a line left out or a wrong order gets the check's own message; bad orders are refused
naming the argument; the display bundle (static HTML with the answer behind <details>, a widget in a kernel);
graded work shows no lines; the package itself never imports the practice modules or ipywidgets."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import attn_course_exercises as checks
from attn_course_exercises import parsons as parsons_module
from attn_course_exercises.parsons import (
    PROBLEMS,
    WIDGET_VIEW,
    ParsonsProblem,
    define,
    parsons,
    strip_comments,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def problems() -> dict[str, ParsonsProblem]:
    return {key: parsons(key) for key in PROBLEMS}


def _swap(order: tuple[int, ...], a: int, b: int) -> list[int]:
    out = list(order)
    out[a], out[b] = out[b], out[a]
    return out


# ------------------------------------------------------------------------------------------- right orders


@pytest.mark.parametrize("key", PROBLEMS)
def test_the_model_order_passes(problems, key):
    problem = problems[key]
    result = problem.answer(list(problem.model_order))
    assert result.passed, result.message
    assert not any(problem.lines[i].distractor for i in problem.model_order)


def test_another_right_order_passes(problems):
    # In Bahdanau's loop the three appends may come in any order: the check judges the program, not the order.
    problem = problems["ch4.q1"]
    texts = [problem.lines[i].text.strip() for i in problem.model_order]
    states, weights = texts.index("states.append(s)"), texts.index("weights.append(weight[:, 0])")
    order = _swap(problem.model_order, states, weights)
    assert order != list(problem.model_order)
    assert problem.answer(order).passed


def test_lines_are_shuffled_by_the_seed_and_each_model_line_appears_once(problems):
    for key, problem in problems.items():
        again = parsons(key)
        assert [line.text for line in again.lines] == [line.text for line in problem.lines]
        assert list(problem.model_order) != sorted(problem.model_order)
        assert len(problem.model_order) + len(problem.distractors) == len(problem.lines)
    other = parsons("ch1.q2", seed=1)
    assert [line.text for line in other.lines] != [line.text for line in problems["ch1.q2"].lines]


# ------------------------------------------------------------------------------------------- distractors


@pytest.mark.parametrize("key", PROBLEMS)
def test_every_problem_has_two_or_three_tempting_distractors_from_different_mistakes(problems, key):
    problem = problems[key]
    distractors = [problem.lines[i] for i in problem.distractors]
    assert 2 <= len(distractors) <= 3
    assert len({id(line.mistake) for line in distractors}) == len(distractors)
    model_texts = {problem.lines[i].text.strip() for i in problem.model_order}
    for line in distractors:
        assert line.text.strip() not in model_texts
        assert line.text.strip() in strip_comments(line.mistake.code)  # a line of the mistake's own code


@pytest.mark.parametrize("key", PROBLEMS)
def test_a_distractor_in_place_of_its_model_line_makes_its_mistake_and_is_named(problems, key):
    problem = problems[key]
    for number in problem.distractors:
        line = problem.lines[number]
        order = list(problem.model_order)
        order[line.replaces] = number
        result = problem.answer(order)
        assert not result.passed
        assert f"Line {number}" in result.message and line.text.strip() in result.message
        assert line.mistake.hint in result.message
        # The claim is true: the exercise's own check names that very mistake for the program the line makes.
        judged = problem.exercise.evaluate(define(problem.exercise, problem.program(order)))
        assert not judged.passed and judged.message.startswith(line.mistake.hint)


def test_every_distractor_used_is_named(problems):
    problem = problems["ch1.q2"]
    order = list(problem.model_order) + list(problem.distractors)
    message = problem.answer(order).message
    for number in problem.distractors:
        assert f"Line {number}" in message and problem.lines[number].mistake.hint in message


# ------------------------------------------------------------------------------------------- wrong programs


def _checks_message(problem: ParsonsProblem, order: list[int]) -> str:
    return problem.exercise.evaluate(define(problem.exercise, problem.program(order))).message


def test_a_line_left_out_gets_the_checks_own_message(problems):
    problem = problems["ch4.q1"]
    order = [
        i for i in problem.model_order if problem.lines[i].text.strip() != "weights.append(weight[:, 0])"
    ]
    result = problem.answer(order)
    assert not result.passed
    assert result.message == _checks_message(problem, order)


def test_a_wrong_order_without_distractors_gets_the_checks_own_message(problems):
    # The state updated before the attention reads it: Bahdanau's order turned round.
    problem = problems["ch4.q1"]
    texts = [problem.lines[i].text.strip() for i in problem.model_order]
    attend = next(i for i, t in enumerate(texts) if t.startswith("context, weight = attention.attend"))
    order = _swap(problem.model_order, attend, attend + 1)
    result = problem.answer(order)
    assert not result.passed
    assert result.message == _checks_message(problem, order)


def test_an_order_python_cannot_read_says_so(problems):
    problem = problems["ch1.q2"]
    header = next(i for i in problem.model_order if problem.lines[i].text.strip() == "if valid_lens is None:")
    order = list(problem.model_order)
    order.remove(order[order.index(header) + 1])  # the `if` loses its body
    result = problem.answer(order)
    assert not result.passed and result.message.startswith("Python cannot read the program in this order")


@pytest.mark.parametrize(
    ("order", "says"),
    [
        ([99], "order[0] is 99, but the lines are numbered 0..9"),
        ([0, -1], "order[1] is -1"),
        ([3, 1, 3], "order uses line 3 twice (order[0] and order[2])"),
        ([True], "order[0] is True"),
        ([1.0], "order[0] is 1.0"),
        ("0123", "order must be a list of line numbers (0..9), got '0123'"),
        (None, "order must be a list of line numbers"),
    ],
)
def test_a_bad_order_is_refused_naming_the_argument(problems, order, says):
    problem = problems["ch1.q2"]
    assert len(problem.lines) == 10
    with pytest.raises(ValueError) as raised:
        problem.answer(order)
    assert says in str(raised.value)


def test_a_bad_exercise_is_refused_naming_the_argument():
    for bad in ("ch99.q1", 3, None):
        with pytest.raises(ValueError, match="exercise must be an Exercise or a key"):
            parsons(bad)
    with pytest.raises(ValueError, match="distractors must be an int"):
        ParsonsProblem(checks.EXERCISES["ch1.q2"], distractors=9)


# ------------------------------------------------------------------------------------------- display


def test_outside_a_kernel_the_bundle_is_text_and_static_html_with_the_answer_behind_details(problems):
    problem = problems["ch1.q2"]
    bundle = problem._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    page = bundle["text/html"]
    listed = page.split('<ol start="0"')[1].split("</ol>")[0]
    assert listed.count("<li>") == len(problem.lines)
    answer = page.split("<details>")[1]
    assert str(list(problem.model_order)) in answer
    for number in problem.distractors:
        assert problem.lines[number].mistake.hint.split("`")[0][:40] in answer
    assert str(list(problem.model_order)) not in page.split("<details>")[0]
    assert "call the problem's answer([...])" in bundle["text/plain"]


def test_in_a_kernel_the_bundle_adds_the_widget_and_clicking_the_model_order_passes(problems, monkeypatch):
    problem = problems["ch6.q2"]
    monkeypatch.setattr(parsons_module, "_in_kernel", lambda: True)
    bundle = problem._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and "text/html" in bundle
    board = parsons_module._Board(problem)
    first, *rest = problem.model_order
    for number in [*rest, first]:  # the first line last, then moved to the top
        board.add(number)
    assert board.buttons[first].disabled
    for position in range(len(rest), 0, -1):
        board.move(position, -1)
    board.add(problem.distractors[0])
    board.remove(len(board.order) - 1)
    assert board.order == list(problem.model_order)
    board.check()
    assert "Correct" in board.feedback.value


def test_graded_work_shows_a_note_and_no_line():
    q2 = checks.chapter(1, graded=True)[1]
    shown = parsons(q2)
    bundle = shown._repr_mimebundle_()
    assert "off for graded work" in bundle["text/plain"]
    assert "masked_fill" not in bundle["text/html"]
    with pytest.raises(ValueError, match="off for graded work"):
        shown.answer([0])


def test_comments_are_stripped_but_strings_are_kept():
    source = 'def f(x):\n    # a note\n    y = "#not a comment"  # a comment\n    return y\n'
    assert strip_comments(source) == 'def f(x):\n    y = "#not a comment"\n    return y\n'


# ------------------------------------------------------------------------------------------- the package


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_package_the_grader_imports_imports_no_practice_module_and_no_widget():
    package = ROOT / "attn_course_exercises"
    imported = _imports(package / "__init__.py", top_level_only=False)
    assert not {m for m in imported if m.endswith((".parsons", ".drills")) or m.startswith("ipywidgets")}
    for name in ("parsons.py", "drills.py"):  # ipywidgets only inside the functions that build a widget
        assert not any(m.startswith("ipywidgets") for m in _imports(package / name, top_level_only=True))
