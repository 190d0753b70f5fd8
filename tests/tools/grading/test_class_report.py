"""The class report: counts of attempts, solutions and named mistakes per exercise, what to re-teach first,
where each point is taught, and the files beside the gradebook. Tested on grades made up here, named the way
the grader names them (`judging.named_mistake` on the checks' own messages), and on a cached grade; a slow
test grades a small class with the command line, twice, and reads its class and similarity reports."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from grading_cases import ANSWER, DISGUISED, PASTED, ROOT, notebook, write
from learner_answers import ANSWERS

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import ExerciseGrade, SubmissionGrade
from attn_course_tools.grading.judging import mistake_names, named_mistake
from attn_course_tools.grading.report import OTHER, report_paths, summarise, to_reteach, write_class_report
from attn_course_tools.grading.sections import SECTIONS, section

Q1, Q2 = checks.EXERCISES["ch1.q1"], checks.EXERCISES["ch1.q2"]
INVERTED, WRONG_AXIS = Q1.mistakes[2].hint, Q2.mistakes[0].hint


def failed(key: str, hint: str | None) -> ExerciseGrade:
    """A failing grade whose message opens with `hint`, as `Exercise.judge` writes it."""
    exercise = checks.EXERCISES[key]
    message = (
        f"{hint or 'The result differs from the reference.'}\nFailing case: a case. (1 of 4 cases pass.)"
    )
    mistake = None if hint is None else named_mistake(exercise, message)
    return ExerciseGrade(key, exercise.name, 0, checks.FAILED, message, [], mistake)


def solved(key: str) -> ExerciseGrade:
    return ExerciseGrade(key, checks.EXERCISES[key].name, 1, checks.PASSED, "agrees")


def untouched(key: str) -> ExerciseGrade:
    return ExerciseGrade(key, checks.EXERCISES[key].name, 0, checks.NOT_ATTEMPTED, "write it")


KEYS = ["ch1.q1", "ch1.q2", "ch1.q3"]
CLASS = {
    "ann": {"ch1.q1": failed("ch1.q1", INVERTED), "ch1.q2": failed("ch1.q2", WRONG_AXIS)},
    "ben": {"ch1.q1": failed("ch1.q1", INVERTED), "ch1.q2": failed("ch1.q2", WRONG_AXIS)},
    "cal": {"ch1.q1": solved("ch1.q1"), "ch1.q2": failed("ch1.q2", WRONG_AXIS)},
    "dee": {"ch1.q1": solved("ch1.q1"), "ch1.q2": failed("ch1.q2", None)},
    "eve": {"ch1.q1": untouched("ch1.q1"), "ch1.q2": untouched("ch1.q2"), "ch1.q3": untouched("ch1.q3")},
}


def test_every_mistake_and_known_error_of_every_exercise_has_a_distinct_name() -> None:
    for exercise in checks.EXERCISES.values():
        names = mistake_names(exercise)
        assert len(set(names.values())) == len(names), exercise.key
        assert all(0 < len(name) <= 90 for name in names.values())
    assert mistake_names(Q2)[WRONG_AXIS] == "The softmax runs over the wrong axis"


def test_a_verdict_is_named_by_the_mistake_it_opens_with_and_unnamed_otherwise() -> None:
    assert failed("ch1.q1", INVERTED).mistake == "The mask is inverted"
    assert named_mistake(Q1, "The result has shape (2, 3), expected (2, 4).") is None


def test_the_summary_counts_attempts_solutions_and_who_made_each_mistake() -> None:
    q1, q2, q3 = summarise(CLASS, KEYS)
    assert (q1.attempted, q1.solved) == (["ann", "ben", "cal", "dee"], ["cal", "dee"])
    assert q1.mistakes == {"The mask is inverted": ["ann", "ben"]}
    assert q2.mistakes == {"The softmax runs over the wrong axis": ["ann", "ben", "cal"], OTHER: ["dee"]}
    assert q2.share("The softmax runs over the wrong axis") == pytest.approx(0.75)
    assert q2.messages["The softmax runs over the wrong axis"] == WRONG_AXIS
    assert q3.attempted == []  # eve left it as the stub


def test_the_mistake_made_by_the_largest_share_comes_first() -> None:
    ranked = [(s.key, m) for s, m in to_reteach(summarise(CLASS, KEYS))]
    assert ranked == [("ch1.q2", "The softmax runs over the wrong axis"), ("ch1.q1", "The mask is inverted")]


def test_the_report_files_sit_beside_the_gradebook_with_mistakes_sections_and_the_chart(
    tmp_path: Path,
) -> None:
    out = tmp_path / "grades.csv"
    paths = write_class_report(CLASS, KEYS, [1.0, 2.0, 9.0, 3.0, 2.5], out)
    assert paths == report_paths(out) and paths.markdown.name == "grades_report.md"
    text = paths.markdown.read_text()
    first = text.index("**ch1.q2 `masked_softmax`: The softmax runs over the wrong axis**: 3 of 4")
    assert first < text.index("**ch1.q1 `sequence_mask`: The mask is inverted**: 2 of 4")
    assert "5 students, 5 submissions; median time per submission 2.5 s." in text
    assert "notebooks/01_masked_softmax.ipynb, § 4. `masked_softmax`, one step at a time" in text
    assert "## Nobody attempted\n\n- ch1.q3 `nadaraya_watson`" in text
    assert "![Named mistakes per exercise](grades_mistakes.png)" in text
    assert paths.figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with paths.csv.open() as f:
        rows = list(csv.DictReader(f))
    axis = next(r for r in rows if r["mistake"] == "The softmax runs over the wrong axis")
    assert (axis["students"], axis["share"], axis["who"], axis["message"]) == (
        "3",
        "0.750",
        "ann ben cal",
        WRONG_AXIS,
    )
    assert [r["mistake"] for r in rows if r["exercise"] == "ch1.q3"] == [""]


def test_a_class_without_named_mistakes_gets_no_chart(tmp_path: Path) -> None:
    paths = write_class_report({"ann": {"ch1.q1": solved("ch1.q1")}}, ["ch1.q1"], [1.0], tmp_path / "g.csv")
    assert not paths.figure.exists() and "No named mistake was made." in paths.markdown.read_text()


def test_a_cached_grade_keeps_its_mistake_so_the_report_needs_no_regrading() -> None:
    grade = SubmissionGrade(Path("a.ipynb"), "ann", "0" * 64, {"ch1.q1": failed("ch1.q1", INVERTED)}, [], 1.0)
    back = SubmissionGrade.from_json(json.loads(json.dumps(grade.to_json())), Path("a.ipynb"), "ann")
    assert back.cached and back.exercises["ch1.q1"].mistake == "The mask is inverted"


def headings(notebook: str) -> set[str]:
    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    lines = ["".join(c["source"]).splitlines() for c in cells if c["cell_type"] == "markdown"]
    return {line.lstrip("#").strip() for cell in lines for line in cell if line.startswith("#")}


def test_every_exercise_points_to_a_heading_its_chapter_notebook_has() -> None:
    assert set(SECTIONS) == set(checks.EXERCISES)
    for key, (chapter, heading) in SECTIONS.items():
        assert chapter.startswith(f"{int(key[2 : key.index('.')]):02d}_"), key
        assert heading in headings(chapter), f"{key}: {heading!r} is not a heading of {chapter}"
    assert section("ch9.q2") == "notebooks/09_training_dynamics.ipynb, § 3. Scheduled sampling"
    assert section("ch99.q1") == ""


# ------------------------------------------------------------------------------------------------
# For real: a small class graded by the command line, twice (the second run from the grade cache)


def catalogue(key: str, label: str) -> str:
    return next(a.source for a in ANSWERS if a.key == key and a.label == label)


def small_class(root: Path) -> None:
    """Six students in folders: two copy from each other, one pastes the package, three share mistakes."""
    axis, inverted = catalogue("ch1.q2", "softmax over dim=1"), catalogue("ch1.q1", "inverted mask")
    right_q2 = next(a.source for a in ANSWERS if a.key == "ch1.q2" and a.phrases is None)
    cells = {
        "alice": {"ch1.q1": ANSWER, "ch1.q2": right_q2},
        "bob": {"ch1.q1": DISGUISED, "ch1.q2": axis},
        "carol": {"ch1.q1": PASTED, "ch1.q2": axis},
        "dan": {"ch1.q1": inverted, "ch1.q2": catalogue("ch1.q2", "d2l's -1e6 fill")},
        "eve": {"ch1.q1": inverted, "ch1.q2": axis},
        "fay": {},
    }
    for student, answers in cells.items():
        (root / student).mkdir(parents=True)
        write(root / student, "ex01_masked_softmax", notebook(answers, solved=False))


@pytest.mark.slow
def test_the_command_line_writes_the_class_and_similarity_reports_and_keeps_them_whole_from_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_class(tmp_path / "class")
    out = tmp_path / "grades.csv"
    argv = ["grade", str(tmp_path / "class"), "--out", str(out), "--jobs", "2", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    paths = report_paths(out)
    assert f"class report {paths.markdown} and {paths.csv}, chart {paths.figure}" in printed
    assert f"similarity report {paths.similarity}" in printed
    report, similarity = paths.markdown.read_text(), paths.similarity.read_text()
    assert "6 students, 6 submissions; median time per submission" in report
    reteach = report[report.index("## To re-teach first") : report.index("## Exercises")]
    order = ["The softmax runs over the wrong axis**: 3 of 5", "The mask is inverted**: 2 of 5", "uniform"]
    assert [reteach.index(o) for o in order] == sorted(reteach.index(o) for o in order), reteach
    assert "bob, carol, eve" in reteach and "## Nobody attempted\n\n- ch1.q3" in report
    assert "## ch1.q1 `sequence_mask`: alice and bob: 1.00" in similarity
    assert "## ch1.q1 `sequence_mask`: carol and the course's own code: 1.00" in similarity
    assert "dan and eve: 1.00" in similarity  # the same catalogue answer, handed in twice
    assert "## ch1.q2 `masked_softmax`: bob and carol, eve: 1.00" in similarity  # one entry for three
    assert "alice and carol" not in similarity
    assert main(argv) == 0
    assert "reused 6 remembered grades" in capsys.readouterr().out
    assert paths.markdown.read_text() == report and paths.similarity.read_text() == similarity
