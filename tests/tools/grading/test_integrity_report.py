"""The integrity report: whether the submissions ran in the OS-level jail, then each student something
flagged, with every flag and its evidence (copies with the matching lines side by side, the grader's
integrity cases with file, exercise and text); students with nothing flagged left out. A slow test grades
a small class with the command line and reads the report written next to the gradebook."""

from __future__ import annotations

from pathlib import Path

import pytest
from grading_cases import ANSWER, DISGUISED, PASTED, notebook, write
from learner_answers import ANSWERS

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import ExerciseGrade, SubmissionGrade
from attn_course_tools.grading.integrity import JAIL_UNKNOWN, markdown, write_integrity_report
from attn_course_tools.grading.report import report_paths
from attn_course_tools.grading.similarity import similar_pairs

FISHING = (
    "The code called gc.get_objects() while `masked_softmax` was graded, which reaches the course's own "
    "answers.\nFirst call: line 4 of the answer cell."
)


def grade(key: str, integrity: str | None = None) -> ExerciseGrade:
    exercise = checks.EXERCISES[key]
    return ExerciseGrade(key, exercise.name, 0, checks.FAILED, "0 points", integrity=integrity)


def submission(student: str, path: str, **grades: ExerciseGrade) -> SubmissionGrade:
    exercises = {g.key: g for g in grades.values()}
    return SubmissionGrade(Path(path), student, "0" * 64, exercises, [], 1.0)


def independent_answer() -> str:
    return next(a.source for a in ANSWERS if a.key == "ch1.q1" and a.label == "loop over rows on a clone")


def test_with_nothing_flagged_it_says_so_and_still_says_whether_the_jail_ran() -> None:
    graded = {"ann": [submission("ann", "ann/ex01.ipynb", q=grade("ch1.q1"))]}
    text = markdown(graded, [], jail_note=None)
    assert text.splitlines()[:3] == ["# Integrity report", "", f"**OS-level jail:** {JAIL_UNKNOWN}"]
    assert "Nothing flagged." in text and "## ann" not in text
    jailed = markdown(graded, [], jail_note="every submission ran in the bubblewrap jail, without network.")
    assert (
        jailed.splitlines()[2]
        == "**OS-level jail:** every submission ran in the bubblewrap jail, without network."
    )


def test_every_grading_integrity_case_is_listed_with_student_file_exercise_and_text() -> None:
    graded = {
        "ann": [
            submission("ann", "/class/ann/ex01.ipynb", a=grade("ch1.q1"), b=grade("ch1.q2", FISHING)),
            submission("ann", "/class/ann/ex01_v2.ipynb", b=grade("ch1.q3", "opened masking.py")),
        ],
        "ben": [submission("ben", "/class/ben/ex01.ipynb", a=grade("ch1.q1"))],
    }
    text = markdown(graded, [])
    assert "## ann" in text and "## ben" not in text and "Nothing flagged" not in text
    assert "### ch1.q2 `masked_softmax`: reached for the course's own answers" in text
    assert "In <code>/class/ann/ex01.ipynb</code>, while grading:" in text
    assert "> The code called gc.get_objects() while `masked_softmax` was graded" in text
    assert "> First call: line 4 of the answer cell." in text
    assert "### ch1.q3 `nadaraya_watson`" in text and "In <code>/class/ann/ex01_v2.ipynb</code>" in text
    assert text.count("`: reached for the course's own answers") == 2
    assert "2 students graded; 1 with something flagged" in text


def test_learner_controlled_text_cannot_forge_a_heading_or_html() -> None:
    planted = "opened a file\n## zed\n<img src=x onerror=alert(1)>"
    graded = {"ann<b>": [submission("ann<b>", "/class/a|b/ex01.ipynb", a=grade("ch1.q1", planted))]}
    text = markdown(graded, [])
    assert "\n## zed" not in text and "> ## zed" in text
    assert "<img" not in text and "&lt;img src=x" in text
    assert "## ann&lt;b&gt;" in text and "a&#124;b" in text


def test_copies_are_listed_for_each_student_with_their_own_lines_on_the_left() -> None:
    padded_copy = ANSWER.replace("    filled =", "    _unused = None\n    filled =")
    answers = {
        "ch1.q1": {
            "ann": ANSWER,
            "ben": DISGUISED,
            "cal": PASTED,
            "eve": independent_answer(),
            "fay": padded_copy
            + "\n\ndef helper(x):\n    y = torch.zeros(3, 4)\n    return y.sum(dim=0) + x * 2\n",
        }
    }
    pairs = similar_pairs(answers)
    graded = {s: [submission(s, f"/class/{s}/ex01.ipynb", a=grade("ch1.q1"))] for s in answers["ch1.q1"]}
    text = markdown(graded, pairs, jail_note="jailed")
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}
    assert set(sections) == {"ann", "ben", "cal", "fay"}  # eve's independent answer is not flagged
    assert "### ch1.q1 `sequence_mask`: the same code as ben (1.00)" in sections["ann"]
    assert "### ch1.q1 `sequence_mask`: the same code as ann (1.00)" in sections["ben"]
    assert "| ben | ann |" in sections["ben"] and "is_real = torch.arange" in sections["ben"]
    assert sections["ben"].index("is_real") < sections["ben"].index("keep = torch.arange")  # ben's left
    assert "similar to ann (and ben, the same code)" not in sections["fay"]
    assert "### ch1.q1 `sequence_mask`: similar to ann, ben (1.00)" in sections["fay"]
    course = "### ch1.q1 `sequence_mask`: 1.00 of the answer is found in the course's own code"
    assert course in sections["cal"]
    assert (
        "attn_course/attention/masking.py:" in sections["cal"]
        and "pad = pos &gt;= valid_len" in sections["cal"]
    )


def test_the_report_is_written_next_to_the_gradebook(tmp_path: Path) -> None:
    path = report_paths(tmp_path / "grades.csv").integrity
    assert path == tmp_path / "grades_integrity.md"
    graded = {"ann": [submission("ann", "ann/ex01.ipynb", a=grade("ch1.q1", "opened masking.py"))]}
    assert write_integrity_report(graded, [], path, jail_note="jailed") == path
    assert path.read_text(encoding="utf-8") == markdown(graded, [], "jailed") + "\n"


@pytest.mark.slow
def test_the_command_line_writes_the_integrity_report_next_to_the_gradebook(tmp_path: Path) -> None:
    cells = {
        "alice": {"ch1.q1": ANSWER},
        "bob": {"ch1.q1": DISGUISED},
        "carol": {"ch1.q1": PASTED},
        "dan": {},
    }
    for student, answers in cells.items():
        (tmp_path / "class" / student).mkdir(parents=True)
        write(tmp_path / "class" / student, "ex01_masked_softmax", notebook(answers, solved=False))
    out = tmp_path / "grades.csv"
    assert main(["grade", str(tmp_path / "class"), "--out", str(out), "--jobs", "2", "--quiet"]) == 0
    text = report_paths(out).integrity.read_text(encoding="utf-8")
    assert text.startswith("# Integrity report\n\n**OS-level jail:** ")
    assert "4 students graded; 3 with something flagged" in text
    assert "## alice" in text and "## bob" in text and "## carol" in text and "## dan" not in text
    assert "the same code as bob (1.00)" in text and "found in the course's own code" in text
