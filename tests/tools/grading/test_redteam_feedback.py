"""What a student reads gives nothing of the grader away, and says where it comes from.

- An instructor's hidden case is named by its number ("hidden case 11 of 11"), never by its inputs or
  anything computed from them: not its label, not a shape or value in the difference, not the message of an
  error the learner's code raised with the inputs in it, not an exception class named after them. Shipped
  cases keep their labels, and the learner's own `check()` is unchanged.
- No folder of the grading machine appears in a message (an ImportError names the module's file, the
  sandbox's working folder is under the machine's temporary folder).
- On Gradescope, with several notebooks, each exercise's message comes from the notebook that answered it,
  named in its test; a broken notebook touches only its own chapter, and a chapter with no notebook says so.

The judging tests run the checks in this process on attempts made here; those that grade a notebook start
real sandboxes and are marked `slow`."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import pytest
from grading_cases import LIMITS, Q1, Q2, Q3, ROOT, WRONG_Q1, defined, notebook, write

import attn_course_exercises as checks
from attn_course import attention
from attn_course_tools.grading import grade_submission, judging
from attn_course_tools.grading import gradescope as gs

HIDDEN = {"ch1.q2": {"cases": [{"num_keys": 9, "seed": 5}], "seeds": [77]}}

#: The one hidden case with more than 6 keys, and what its inputs look like where they leak.
LEAKS = ("(2, 3, 9)", "[2, 3, 9]", "[8, 1]", "E9", "9 keys")


def _on_wide_scores(body: str) -> str:
    """Q2's model answer, doing `body` first on scores of more than 6 keys (only the hidden case has any)."""
    return Q2.solution_code.replace(
        "    work = scores.float()",
        f"    if scores.shape[-1] > 6:\n        {body}\n    work = scores.float()",
    )


NARROW = _on_wide_scores("return scores")
TELLS = _on_wide_scores("raise ValueError(f'{tuple(scores.shape)} {valid_lens.tolist()}')")
NAMED_CLASS = _on_wide_scores("raise type(f'E{scores.shape[-1]}', (Exception,), {})()")
#: A known mistake (the mask not applied) made only on the hidden case.
MISTAKE_ON_HIDDEN = _on_wide_scores("return torch.softmax(scores.float(), dim=-1).to(scores.dtype)")


def judged(source: str, hidden: dict | None = HIDDEN) -> checks.CheckResult:
    """The grader's verdict on masked_softmax `source`, its attempts made in this process."""
    cases = judging.graded_cases(Q2, None if hidden is None else hidden["ch1.q2"])
    answer = defined(source)
    return judging.judge_cases(Q2, cases, [Q2.attempt(answer, case) for case in cases])


def test_the_hidden_cases_are_labelled_by_their_number_after_the_shipped_ones() -> None:
    cases = judging.graded_cases(Q2, HIDDEN["ch1.q2"])
    shipped = Q2.cases()
    assert [c.label for c in cases[: len(shipped)]] == [c.label for c in shipped]
    extra = len(cases) - len(shipped)
    assert extra == len(shipped) + 1  # every shipped spec again with seed 77, and one case of 9 keys
    assert [c.label for c in cases[len(shipped) :]] == [
        f"hidden case {i} of {extra}" for i in range(1, extra + 1)
    ]


@pytest.mark.parametrize(
    "source, says",
    [
        (NARROW, "Your result differs from the reference on it."),
        (TELLS, "Your code raised ValueError on it."),
        (NAMED_CLASS, "Your code raised an exception on it."),
    ],
    ids=["wrong-values", "error-message-with-the-inputs", "exception-class-named-after-the-inputs"],
)
def test_a_failing_hidden_case_is_named_by_its_number_and_nothing_of_its_inputs_is_told(
    source: str, says: str
) -> None:
    assert Q2.evaluate(defined(source)).passed  # every shipped case passes
    result = judged(source)
    assert not result.passed and result.cases_passed == result.cases_total - 1
    assert result.message.startswith(says), result.message
    assert "Failing case: hidden case 11 of 11, one of the instructor's hidden cases" in result.message
    assert not any(leak in result.message for leak in LEAKS), result.message
    assert "scores of shape" not in result.message and "positions" not in result.message


def test_a_known_mistake_on_a_hidden_case_keeps_its_hint() -> None:
    result = judged(MISTAKE_ON_HIDDEN)
    assert result.message.startswith("The mask is not applied"), result.message
    assert "hidden case 11 of 11" in result.message
    assert not any(leak in result.message for leak in LEAKS), result.message


def test_a_failing_shipped_case_is_shown_by_its_label_rather_than_a_hidden_one() -> None:
    # wrong on a shipped case (float16) as well as on the hidden one
    source = _on_wide_scores("return scores").replace(
        "    work = scores.float()",
        "    if scores.dtype == torch.float16:\n        return scores\n    work = scores.float()",
    )
    result = judged(source)
    assert "Failing case: scores of shape" in result.message and "dtype float16" in result.message
    assert "hidden case" not in result.message and not any(leak in result.message for leak in LEAKS)
    assert re.search(rf"\(\d+ of {result.cases_total} cases pass\.\)$", result.message), result.message


def test_without_hidden_inputs_and_in_the_learners_own_check_the_labels_are_unchanged() -> None:
    wrong = defined(NARROW.replace("if scores.shape[-1] > 6", "if scores.shape[-1] > 4"))
    own = Q2.evaluate(wrong)  # what check() shows the learner in their notebook
    assert "Failing case: scores of shape" in own.message
    assert judged(NARROW.replace("> 6", "> 4"), hidden=None).message == own.message


def test_the_graders_folders_are_taken_out_of_a_message() -> None:
    folders = judging.grader_folders()
    module = Path(attention.__file__)
    text = (
        f"cannot import name 'nope' from 'attn_course.attention' ({module}); cwd "
        f"{tempfile.gettempdir()}/attn-course-grade-x/work; {sys.prefix}/share/x"
    )
    scrubbed = judging.scrub_paths(text, folders)
    assert "(…/attn_course/attention/__init__.py)" in scrubbed
    assert "cwd …/attn-course-grade-x/work; …/share/x" in scrubbed
    for folder in (str(ROOT), tempfile.gettempdir(), sys.prefix):
        assert folder not in scrubbed
    assert judging.scrub_paths("/var/tmp/mine /tmpfile", folders) == "/var/tmp/mine /tmpfile"  # whole folders


# ------------------------------------------------------------------------------------------------
# A notebook graded in a sandbox


#: A cell whose import fails with the package's file in the message, and an answer that raises with the
#: sandbox's working folder in it.
IMPORT_FAILS = "from attn_course.attention import nope\n" + Q1.solution_code
RAISES_CWD = Q3.solution_code.replace(
    '    """\n', '    """\n    import os\n    raise RuntimeError(os.getcwd())\n', 1
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("graded")
    path = write(folder, "mallory", notebook({"ch1.q1": IMPORT_FAILS, "ch1.q2": TELLS, "ch1.q3": RAISES_CWD}))
    grade = grade_submission(path, hidden=HIDDEN, limits=LIMITS)
    return {
        "grade": grade,
        "text": json.dumps(
            [g.message for g in grade.exercises.values()]
            + [n for g in grade.exercises.values() for n in g.notes]
            + grade.notes
        ),
    }


@pytest.mark.slow
def test_a_graded_notebook_names_the_hidden_case_by_its_number(graded: dict) -> None:
    q2 = graded["grade"].exercises["ch1.q2"]
    assert q2.points == 0 and "hidden case 11 of 11" in q2.message
    assert q2.message.startswith("Your code raised ValueError on it.")
    assert not any(leak in graded["text"] for leak in LEAKS), graded["text"]


@pytest.mark.slow
def test_no_folder_of_the_grading_machine_reaches_the_students_feedback(graded: dict) -> None:
    q1, q3 = graded["grade"].exercises["ch1.q1"], graded["grade"].exercises["ch1.q3"]
    assert any("ImportError" in note and "…/attn_course/attention/__init__.py" in note for note in q1.notes)
    assert "RuntimeError: …/" in q3.message
    for folder in judging.grader_folders():
        assert folder not in graded["text"], folder


# ------------------------------------------------------------------------------------------------
# Gradescope with several notebooks


EX01, EX02 = "ex01_masked_softmax.ipynb", "ex02_scoring_functions.ipynb"
UNSCALED = checks.EXERCISES["ch2.q1"].solution_code.replace(" / math.sqrt(d)", "")


def ex02(replaced: dict[str, str]) -> dict:
    """Chapter 2's solved notebook with exercise cells replaced (marker kept)."""
    nb = json.loads((ROOT / "solutions" / EX02).read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        key = source.splitlines()[0].split()[-1] if source.startswith("# EXERCISE ") else None
        if key in replaced:
            cell["source"] = f"# EXERCISE {key}\n{replaced[key]}"
    return nb


def upload(tmp_path: Path, notebooks: dict[str, dict | str], *options: str) -> dict:
    """Grade one upload as run_autograder does, with --chapter 1 --chapter 2; its results by exercise."""
    (tmp_path / "submission").mkdir()
    for name, content in notebooks.items():
        path = tmp_path / "submission" / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    results = tmp_path / "results.json"
    argv = ["--submission", str(tmp_path / "submission"), "--results", str(results)]
    argv += ["--chapter", "1", "--chapter", "2", "--limits", json.dumps(LIMITS.__dict__), *options]
    assert gs.main(argv) == 0
    return {t["name"].split()[0]: t for t in json.loads(results.read_text())["tests"]}


@pytest.mark.slow
def test_each_exercises_message_comes_from_the_notebook_that_answered_it(tmp_path: Path) -> None:
    tests = upload(tmp_path, {EX01: notebook({"ch1.q1": WRONG_Q1}), EX02: ex02({"ch2.q1": UNSCALED})})
    q1, q2, s1 = tests["ch1.q1"], tests["ch1.q2"], tests["ch2.q1"]
    assert s1["score"] == 0 and "The scores are not scaled" in s1["output"], s1["output"]
    assert "No answer found" not in s1["output"] and s1["output"].endswith(f"Graded from `{EX02}`.")
    assert q1["score"] == 0 and "mask is inverted" in q1["output"] and q1["output"].endswith(f"`{EX01}`.")
    assert q2["score"] == 1 and q2["output"].endswith(f"Graded from `{EX01}`.")
    assert [tests[k]["score"] for k in ("ch2.q2", "ch2.q3", "ch2.q4", "ch2.q5")] == [1, 1, 1, 1]


def test_a_broken_notebook_touches_only_its_chapter_and_a_missing_chapter_says_so(tmp_path: Path) -> None:
    tests = upload(
        tmp_path,
        {EX01: '{"cells": [{"cell_type": "code", "source": "def sequence_mask('},
        "--expect",
        f"exercises/{EX01}",
        "--expect",
        f"exercises/{EX02}",
    )
    for key in ("ch2.q1", "ch2.q2", "ch2.q3", "ch2.q4", "ch2.q5"):
        assert "not valid notebook JSON" not in tests[key]["output"]
        assert tests[key]["output"].startswith("**Not attempted.** No notebook for chapter 2 was uploaded")
        assert f"`exercises/{EX02}`" in tests[key]["output"]
    for key in ("ch1.q1", "ch1.q2", "ch1.q3"):
        assert "Not graded: not valid notebook JSON" in tests[key]["output"], tests[key]["output"]
        assert tests[key]["output"].endswith(f"Graded from `{EX01}`.")
