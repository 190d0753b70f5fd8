"""Find-the-bug drills (attn_course_exercises.drills): every chapter with exercises yields valid drills (the
planted code is the code shown, it really fails the check and the check names its mistake, the diagnosis is
among four distinct options, the mistake's name is not given away); the k-th and the seeded pick; the verdict
on a pick carries the check's message; bad arguments are refused naming them; a helper that is itself a named
mistake, or one with switches, is not shown as given code; the display bundle; graded work shows no code;
the Practice sections of the exercise notebooks, which the grader does not read."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

import attn_course_exercises as checks
from attn_course_exercises import drills
from attn_course_exercises.drills import OPTIONS, Drill, drill, planted, run_planted
from attn_course_exercises.parsons import WIDGET_VIEW
from attn_course_tools.grading import reading

#: Chapter 9's first exercise judges a trained model on every case: its drills take many seconds.
CHAPTERS = [c if c != 9 else pytest.param(9, marks=pytest.mark.slow) for c in checks.chapters()]


def assert_valid(d: Drill) -> None:
    item = d.planted
    assert not d.check.passed, f"{item.exercise.key}: the planted code passes the check"
    assert d.check.message.startswith(item.mistake.hint), d.check.message
    assert len(d.options) == OPTIONS and len(set(d.options)) == OPTIONS
    assert d.options[d.right] == item.mistake.hint
    assert d.failure.startswith("On the case ")
    name = getattr(item.mistake.wrong, "__name__", "")
    assert name == item.exercise.name or name not in item.source  # the code does not name its mistake
    assert f"def {item.exercise.name}(" in item.source or f"class {item.exercise.name}(" in item.source


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_yields_a_valid_drill(chapter):
    found = planted(chapter)
    assert found, f"chapter {chapter} has no drill"
    d = drill(chapter)
    assert_valid(d)
    assert d.check == d.planted.exercise.evaluate(run_planted(d.planted))  # its message is the check's


@pytest.mark.slow
@pytest.mark.parametrize("chapter", checks.chapters())
def test_every_drill_of_every_chapter_is_valid(chapter):
    for k in range(len(planted(chapter))):
        assert_valid(drill(chapter, k))


def test_the_k_th_drill_and_the_seeded_pick():
    found = planted(1)
    assert drill(1, 0).planted == found[0] and drill(1, len(found) - 1).planted == found[-1]
    assert drill(1).k == drill(checks.chapter(1)).k == drills._pick(1, len(found), 0)
    assert len({drills._pick(1, len(found), seed) for seed in range(6)}) > 1
    first, again = drill(1, 3), drill(1, 3)
    assert first.options == again.options and first.right == again.right


def test_a_right_pick_is_right_and_a_wrong_one_names_the_planted_mistake_with_the_checks_message():
    d = drill(1, 0)
    right = d.answer(d.right)
    assert right.correct and right.text.startswith("Right")
    wrong = d.answer((d.right + 1) % OPTIONS)
    assert not wrong.correct and f"you chose ({(d.right + 1) % OPTIONS})" in wrong.text
    assert d.options[d.right] in wrong.text and str(d.check) in wrong.text
    assert d.check.message.split("\n")[0][:60] in wrong.html.replace("<br>", "\n")


def test_the_failing_output_shows_what_came_back_against_what_was_expected():
    d = next(drill(1, k) for k, item in enumerate(planted(1)) if item.exercise.key == "ch1.q1")
    assert "returned" in d.failure and "expected" in d.failure
    case = checks.EXERCISES["ch1.q1"].cases()[0]
    assert case.label in d.failure


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda: drill(7), "chapter must be one of"),
        (lambda: drill("1"), "chapter must be a chapter number or the exercises of one chapter"),
        (lambda: drill([*checks.chapter(1), *checks.chapter(2)]), "exercises of one chapter"),
        (lambda: drill(1, 10_000), "k must be a drill's number in 0.."),
        (lambda: drill(1, -1), "k must be a drill's number"),
        (lambda: drill(1, True), "got True"),
        (lambda: drill(1, 0).answer(OPTIONS), f"choice must be a diagnosis' number in 0..{OPTIONS - 1}"),
        (lambda: drill(1, 0).answer("2"), "choice must be"),
    ],
)
def test_bad_arguments_are_refused_naming_them(call, says):
    with pytest.raises(ValueError) as raised:
        call()
    assert says in str(raised.value)


# ------------------------------------------------------------------------------------------- given helpers


def _course_helper(source: str):
    namespace: dict = {}
    exec(textwrap.dedent(source), namespace)
    function = next(v for k, v in namespace.items() if not k.startswith("__"))
    function.__module__ = "attn_course_exercises.ch1_masking"
    return function


def test_a_plain_course_helper_is_written_out_before_the_function():
    from attn_course_exercises.inputs import keep_mask

    source = "def f(scores, lens):\n    return scores * keep_mask(lens, 1, 2)\n"
    helpers = drills._helpers(source, {"keep_mask": keep_mask}, {"f", "torch"})
    assert helpers is not None and helpers[0].startswith("def keep_mask(")
    assert '"""' not in helpers[0]  # its docstring speaks of the checks, not of the code


def test_a_helper_with_switches_or_that_is_a_named_mistake_or_unknown_disqualifies_the_drill(monkeypatch):
    from attn_course_exercises.ch1_masking import mask_inverted

    switches = _course_helper("def loop(x, *, swap=False):\n    return x\n")
    flag = _course_helper("def loop(x, swap=False):\n    return x\n")
    monkeypatch.setattr(drills.inspect, "getsource", lambda obj: "def loop(x):\n    return x\n")
    source = "def f(x):\n    return loop(x)\n"
    assert drills._helpers(source, {"loop": switches}, {"f"}) is None
    assert drills._helpers(source, {"loop": flag}, {"f"}) is None
    assert drills._helpers(source, {"loop": mask_inverted}, {"f"}) is None
    assert drills._helpers(source, {"loop": len}, {"f"}) is None
    assert drills._helpers(source, {}, {"f"}) is None


def test_a_mistake_that_raises_on_purpose_makes_no_drill():
    exercise = checks.EXERCISES["ch1.q2"]
    for mistake in exercise.mistakes:
        if mistake.code and "raise " in mistake.code:
            assert drills._planted_source(exercise, mistake, drills._preamble_names(1)) is None


def test_bug_hunts_make_no_drill_they_are_drills_already():
    from attn_course_exercises.bug_hunt import BugHunt

    hunts = {e.key for e in checks.EXERCISES.values() if isinstance(e, BugHunt)}
    assert hunts and not any(item.exercise.key in hunts for c in checks.chapters() for item in planted(c))


# ------------------------------------------------------------------------------------------- display


def test_outside_a_kernel_the_bundle_is_text_and_static_html_with_the_answer_behind_details():
    d = drill(1, 0)
    bundle = d._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    shown, answer = bundle["text/html"].split("<details>")
    assert '<ol start="0">' in shown and shown.count("<li>") == OPTIONS
    assert "The planted mistake is" in answer and "The planted mistake is" not in shown
    assert "call the drill's answer(k)" in bundle["text/plain"] and d.planted.source in bundle["text/plain"]


def test_in_a_kernel_the_bundle_adds_the_widget_and_picking_shows_the_verdict(monkeypatch):
    d = drill(1, 0)
    monkeypatch.setattr(drills, "_in_kernel", lambda: True)
    assert WIDGET_VIEW in d._repr_mimebundle_()
    box = d.widget()
    _, choice, button, feedback = box.children
    button.click()
    assert "Pick a diagnosis first" in feedback.value
    choice.value = d.right
    button.click()
    assert "Right." in feedback.value and "What the check says" in feedback.value


def test_graded_work_shows_a_note_and_no_code():
    shown = drill(checks.chapter(1, graded=True))
    bundle = shown._repr_mimebundle_()
    assert "off for graded work" in bundle["text/plain"] and "def " not in bundle["text/html"]


# ------------------------------------------------------------------------------------------- the notebooks

ROOT = Path(__file__).resolve().parents[2]
#: The exercise notebooks with a Practice section, and the Parsons problems each asks (the argument given).
PRACTICE = {
    1: ["q2"], 2: [], 3: [], 4: ["checks.chapter(2)[1]", "q1"], 5: [], 6: ["q2"],
    9: [], 10: [], 11: [], 12: [],
}


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
@pytest.mark.parametrize("chapter", PRACTICE)
def test_the_exercise_notebook_ends_with_practice_that_the_grader_does_not_read(folder, chapter):
    (path,) = (ROOT / folder).glob(f"ex{chapter:02d}_*.ipynb")
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = [(c["cell_type"], "".join(c["source"]), c) for c in notebook["cells"]]
    start = next(i for i, (kind, source, _) in enumerate(cells) if source.startswith("## Practice"))
    code = [(source, cell) for kind, source, cell in cells[start:] if kind == "code"]
    asked = [re.search(r"parsons\((.*)\)", s).group(1) for s, _ in code if "= parsons(" in s]
    assert asked == PRACTICE[chapter]
    drill_cell = f"from attn_course_exercises.drills import drill\n\nd = drill(checks.chapter({chapter}))\nd"
    assert code[-1][0] == drill_cell
    for source, cell in code:  # run, stored as the static view (the book's); the widget comes when it runs
        assert "EXERCISE" not in source
        data = [o.get("data", {}) for o in cell["outputs"]]
        assert data and all("text/html" in d and WIDGET_VIEW not in d for d in data), path.name
    # No widget state: a release for graded work keeps the notebook's metadata, and the state holds the
    # model answer's lines. After `nbconvert --execute --inplace`, drop the practice cells' widget views and
    # metadata["widgets"] (their text/html is what JupyterLab shows until a cell runs, and the book shows).
    assert "widgets" not in notebook["metadata"], f"{path.name}: widget state stored (see the comment above)"
    found, _ = reading.exercise_cells(notebook, [e.key for e in checks.chapter(chapter)])
    assert [c.exercise for c in found] == [e.key for e in checks.chapter(chapter)]
    assert all(c.index < start for c in found)
