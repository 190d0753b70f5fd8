"""Predict-then-see questions (attn_course_exercises.predict): verdicts, validation, the display bundle, the
session's memory, the discovery of the chapters' questions, and where each chapter asks them."""

from __future__ import annotations

import ast
import re
import runpy
import types
from pathlib import Path

import nbformat
import pytest

from attn_course_exercises import predict
from attn_course_exercises.predict import SESSION, Choice, Number, Verdict, _all, _checked, ask, chapter
from attn_course_exercises.questions import discover

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "attn_course_exercises"
#: The chapters that teach a mechanism, each with at least three questions.
MECHANISM_CHAPTERS = (1, 2, 3, 4, 5, 6, 9, 10, 11, 12)
ASK = re.compile(r"""^ask\(\s*["'](ch\d+\.p\d+)["']\s*\)\s*$""")
ASKED = re.compile(r"""\bask\(\s*["'](ch\d+\.p\d+)["']""")

PADDING = Choice(
    key="ch7.p1",
    prompt="Which row of the weights is all zero?",
    options=(
        ("the first row", "tempting: it is the first, but it has valid length 2"),
        ("the last row", "right: its valid length is 0, so every key is masked"),
        ("no row", "tempting if you expect softmax to spread weight everywhere"),
    ),
    answer=1,
    reveal="The next cell prints the weights and asserts the last row is zero.",
)
GAP = Number(
    key="ch7.p2",
    prompt="How many of the 4 weights are zero?",
    answer=2,
    tolerance=0,
    why="Two keys lie past the valid length 2; a guess of 0 forgets the mask.",
    reveal="The next cell counts them.",
)
RATIO = Number(
    key="ch7.p3",
    prompt="What share of the pairs is padding?",
    answer=37.5,
    tolerance=2.5,
    why="Padding fills each batch up to its longest pair.",
    reveal="The next cell measures it.",
    unit="%",
)


@pytest.fixture(autouse=True)
def _fresh_session():
    SESSION.forget()
    yield
    SESSION.forget()


# ------------------------------------------------------------------------------------------- verdicts


def test_the_right_option_is_right_and_every_option_is_explained():
    verdict = PADDING.check(1)
    assert verdict == Verdict(True, verdict.text) and verdict.text.startswith("Right")
    for text, why in PADDING.options:
        assert text in verdict.text and why in verdict.text


def test_a_wrong_option_is_wrong_names_the_choice_and_still_explains_every_option():
    verdict = PADDING.check(2)
    assert not verdict.correct
    assert "you chose C" in verdict.text and "The answer is B" in verdict.text
    assert all(why in verdict.text for _, why in PADDING.options)


@pytest.mark.parametrize("guess", [3, -1, True, "B", 1.0, None])
def test_a_guess_that_is_no_option_s_index_is_refused_naming_the_range(guess):
    with pytest.raises(ValueError, match=r"guess must be an option's index in 0\.\.2, got"):
        PADDING.check(guess)


@pytest.mark.parametrize(
    ("guess", "correct"), [(37.5, True), (35.0, True), (40.0, True), (34.9, False), (41, False)]
)
def test_a_number_within_the_tolerance_is_right_and_one_outside_is_wrong(guess, correct):
    verdict = RATIO.check(guess)
    assert verdict.correct is correct
    assert "The answer is 37.5%" in verdict.text and RATIO.why in verdict.text


def test_a_zero_tolerance_takes_only_the_exact_number():
    assert GAP.check(2).correct and GAP.check(2.0).correct and not GAP.check(3).correct


@pytest.mark.parametrize("guess", [float("nan"), float("inf"), "2", None, True])
def test_a_guess_that_is_not_a_finite_number_is_refused(guess):
    with pytest.raises(ValueError, match="guess must be a finite number"):
        GAP.check(guess)


# ----------------------------------------------------------------------------------------- validation

CHOICE = dict(PADDING.__dict__)


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"key": "ch4"}, "key"),
        ({"key": "ch4.q1"}, "key"),
        ({"key": "ch04.p1"}, "key"),
        ({"key": "ch4.p0"}, "key"),
        ({"prompt": " "}, "prompt"),
        ({"reveal": ""}, "reveal"),
        ({"answer": 3}, "answer"),
        ({"answer": -1}, "answer"),
        ({"answer": True}, "answer"),
        ({"options": (("only one", "why"),)}, "options"),
        ({"options": "AB"}, "options"),
        ({"options": (("a", "why a"), ("b", ""))}, r"options\[1\] why"),
        ({"options": (("a", "why a"), ("", "why b"))}, r"options\[1\] text"),
        ({"options": (("a", "why a"), ("b",))}, r"options\[1\]"),
    ],
)
def test_a_bad_choice_is_refused_naming_the_argument(change, argument):
    with pytest.raises(ValueError, match=rf"^{argument}"):
        Choice(**{**CHOICE, **change})


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"tolerance": -0.1}, "tolerance"),
        ({"tolerance": float("nan")}, "tolerance"),
        ({"answer": "2"}, "answer"),
        ({"why": ""}, "why"),
        ({"key": "chapter4.p1"}, "key"),
    ],
)
def test_a_bad_number_question_is_refused_naming_the_argument(change, argument):
    with pytest.raises(ValueError, match=rf"^{argument}"):
        Number(**{**dict(GAP.__dict__), **change})


def test_questions_are_frozen_and_their_options_a_tuple():
    with pytest.raises(AttributeError):
        PADDING.answer = 0
    built = Choice(**{**CHOICE, "options": [["a", "why a"], ["b", "why b"]], "answer": 0})
    assert built.options == (("a", "why a"), ("b", "why b"))


# ---------------------------------------------------------------------------------------------- display


def test_the_fallback_shows_the_question_and_hides_the_answer_and_every_explanation_in_details():
    page = PADDING.fallback_html()
    shown, hidden = page.split("<details>", 1)
    assert PADDING.prompt in shown and all(text in shown for text, _ in PADDING.options)
    assert "<summary>" in hidden and hidden.index("</details>") > max(
        hidden.index(w) for _, w in PADDING.options
    )
    assert not any(why in shown for _, why in PADDING.options)
    assert "Answer: B. the last row" in hidden and PADDING.reveal in hidden


def test_a_number_question_s_fallback_hides_its_answer_in_details():
    shown, hidden = RATIO.fallback_html().split("<details>", 1)
    assert RATIO.prompt in shown and "37.5" not in shown
    assert "Answer: 37.5%" in hidden and RATIO.why in hidden


def test_text_is_escaped_and_backticks_become_code():
    question = Choice(**{**CHOICE, "prompt": "Is <script>alert(1)</script> `valid_lens` masked?"})
    page = question.fallback_html()
    assert "<script>" not in page and "&lt;script&gt;" in page and "<code>valid_lens</code>" in page


def test_outside_a_kernel_the_bundle_is_text_and_html_only():
    bundle = PADDING._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/html"] == PADDING.fallback_html()
    assert "Which row" in bundle["text/plain"] and "the last row" in bundle["text/plain"]
    assert not any(why in bundle["text/plain"] for _, why in PADDING.options)


def test_in_a_kernel_the_bundle_adds_the_widget_view_beside_the_fallback(monkeypatch):
    monkeypatch.setattr(predict, "_in_kernel", lambda: True)
    bundle = PADDING._repr_mimebundle_()
    assert bundle[predict.WIDGET_VIEW]["model_id"] and bundle["text/html"] == PADDING.fallback_html()


def test_the_book_ranks_a_question_s_html_above_its_widget_and_a_plain_widget_above_text():
    from myst_nb.core.render import get_mime_priority

    overrides = runpy.run_path(str(ROOT / "book" / "conf.py"))["nb_mime_priority_overrides"]
    for builder in ("html", "dirhtml", "singlehtml"):
        order = get_mime_priority(builder, overrides)
        assert order.index("text/html") < order.index(predict.WIDGET_VIEW) < order.index("text/plain")
        assert order.index(predict.WIDGET_VIEW) < order.index("image/png")


# ------------------------------------------------------------------------------ the widget and the session


def _check(widget, value):
    _, field, button, feedback = widget.children
    field.value = value
    button.click()
    return feedback.value


def test_check_shows_the_verdict_and_every_explanation_and_remembers_the_answer():
    feedback = _check(PADDING.widget(), 2)
    assert "Not quite" in feedback and all(why in feedback for _, why in PADDING.options)
    assert "your answer" in feedback and PADDING.reveal in feedback
    assert SESSION.answer("ch7.p1") == 2


def test_a_question_shown_again_shows_the_previous_answer_and_its_verdict():
    _check(PADDING.widget(), 1)
    _, field, _, feedback = PADDING.widget().children
    assert field.value == 1 and "Right" in feedback.value
    assert GAP.widget().children[1].value == "", "another question starts blank"


def test_check_without_an_answer_asks_for_one_and_remembers_nothing():
    assert "Pick an option first" in _check(PADDING.widget(), None)
    assert "Type a number first" in _check(RATIO.widget(), "about half")
    assert SESSION.answer("ch7.p1") is None and SESSION.answer("ch7.p3") is None


def test_a_number_is_read_from_the_box_with_or_without_its_unit():
    assert "Right" in _check(RATIO.widget(), " 36% ")
    assert SESSION.answer("ch7.p3") == 36.0
    assert RATIO.widget().children[1].value == "36"


# ------------------------------------------------------------------------------------ the house rules


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module or "")
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def test_the_exercises_package_imports_no_question_and_predict_no_widget_at_import():
    imported = _imported_modules(PACKAGE / "__init__.py")
    assert not any("predict" in name or "questions" in name or "ipywidgets" in name for name in imported)
    top_level = ast.parse((PACKAGE / "predict.py").read_text(encoding="utf-8")).body
    top_imports = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in top_level
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert not any(name.startswith(("ipywidgets", "IPython", "torch")) for name in top_imports), top_imports


# ----------------------------------------------------------------------------------------- discovery


def test_discovery_finds_every_chapter_module_and_keeps_the_chapters_order():
    modules = sorted(p.stem for p in (PACKAGE / "questions").glob("ch[0-9][0-9].py"))
    assert list(discover()) == [int(name[2:]) for name in modules]
    found = predict.QUESTIONS
    assert found is _all() and {f"ch{int(m[2:])}" for m in modules} == {key.split(".")[0] for key in found}
    numbers = [q.chapter for q in found.values()]
    assert numbers == sorted(numbers)


def test_a_module_whose_keys_skip_or_belong_to_another_chapter_is_refused():
    second = Choice(**{**CHOICE, "key": "ch7.p3"})
    with pytest.raises(ValueError, match=r"has keys \['ch7.p1', 'ch7.p3'\], expected \['ch7.p1', 'ch7.p2'\]"):
        _checked(types.SimpleNamespace(__name__="ch07", QUESTIONS=(PADDING, second)), 7)
    with pytest.raises(ValueError, match="expected"):
        _checked(types.SimpleNamespace(__name__="ch08", QUESTIONS=(PADDING,)), 8)
    with pytest.raises(ValueError, match="must be a tuple"):
        _checked(types.SimpleNamespace(__name__="ch07", QUESTIONS=[PADDING]), 7)


def test_ask_returns_the_question_and_an_unknown_key_names_the_chapter_s_questions():
    assert ask("ch1.p1") is predict.QUESTIONS["ch1.p1"]
    with pytest.raises(KeyError, match=r"no question 'ch1.p99'; chapter's questions: \['ch1.p1'"):
        ask("ch1.p99")
    with pytest.raises(ValueError, match="key must look like"):
        ask("1.1")


def test_chapter_returns_its_questions_in_order_and_refuses_a_bad_number():
    assert [q.key for q in chapter(1)] == [f"ch1.p{i}" for i in range(1, len(chapter(1)) + 1)]
    assert chapter(99) == ()
    with pytest.raises(ValueError, match="number must be a chapter number"):
        chapter(0)


# ------------------------------------------------------------------------- where the chapters ask them


def _notebook(number: int) -> nbformat.NotebookNode:
    paths = sorted((ROOT / "notebooks").glob(f"{number:02d}_*.ipynb"))
    assert len(paths) == 1, f"expected one notebooks/{number:02d}_*.ipynb, found {paths}"
    return nbformat.read(paths[0], as_version=4)


def placement_problems(cells: list, keys: list[str]) -> list[str]:
    """What is wrong with where `cells` ask the questions `keys`.

    Each must be asked once, in order, by a code cell whose last line is `ask("chN.pK")`, not compared by
    nbval, with a code cell after it to show the answer.
    """
    asked = [
        (i, key)
        for i, cell in enumerate(cells)
        if cell.cell_type == "code"
        for key in ASKED.findall(cell.source)
    ]
    if [key for _, key in asked] != keys:
        return [f"asks {[key for _, key in asked]}, expected {keys} in that order"]
    problems = []
    for i, key in asked:
        last_line = cells[i].source.strip().splitlines()[-1]
        if not ASK.match(last_line):
            problems.append(f"{key}: `ask(...)` must be its cell's last line to show, got {last_line!r}")
        if i + 1 == len(cells) or cells[i + 1].cell_type != "code":
            problems.append(f"{key}: the next cell must be a code cell that shows the answer")
        # a widget's model id changes every run: nbval must not compare the question's output
        if "nbval-check-output" in cells[i].metadata.get("tags", []):
            problems.append(f"{key}: tagged nbval-check-output")
    return problems


def test_misplaced_questions_are_each_named():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    good = [
        md("lead"),
        code('ask("ch7.p1")'),
        code("reveal()"),
        md("lead"),
        code('ask("ch7.p2")'),
        code("r()"),
    ]
    assert placement_problems(good, ["ch7.p1", "ch7.p2"]) == []
    assert placement_problems(good, ["ch7.p2", "ch7.p1"]) == [
        "asks ['ch7.p1', 'ch7.p2'], expected ['ch7.p2', 'ch7.p1'] in that order"
    ]
    assert placement_problems(good[:2], ["ch7.p1"]) == [
        "ch7.p1: the next cell must be a code cell that shows the answer"
    ]
    hidden = [code('q = ask("ch7.p1")\nprint(1)'), code("reveal()")]
    assert "must be its cell's last line" in placement_problems(hidden, ["ch7.p1"])[0]
    then_prose = [code('ask("ch7.p1")'), md("the answer is B"), code("reveal()")]
    assert placement_problems(then_prose, ["ch7.p1"]) == [
        "ch7.p1: the next cell must be a code cell that shows the answer"
    ]
    tagged = [code('ask("ch7.p1")'), code("reveal()")]
    tagged[0].metadata["tags"] = ["nbval-check-output"]
    assert placement_problems(tagged, ["ch7.p1"]) == ["ch7.p1: tagged nbval-check-output"]


@pytest.mark.parametrize("number", MECHANISM_CHAPTERS, ids=[f"ch{n}" for n in MECHANISM_CHAPTERS])
def test_each_chapter_asks_its_questions_in_order_each_before_a_cell_that_shows_the_answer(number):
    keys = [q.key for q in chapter(number)]
    assert len(keys) >= 3, f"chapter {number} has {len(keys)} questions, expected at least 3"
    assert placement_problems(_notebook(number).cells, keys) == [], f"chapter {number}"
