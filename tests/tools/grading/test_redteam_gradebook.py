"""Gradebooks nobody clobbers or garbles, by accident or on purpose.

- Regrading one student's folder over the class's gradebook stops before grading (exit 1) and says how many
  rows it would drop and what to pass; `--only STUDENT` updates that student's rows in place, every other
  line byte for byte, and writes only their feedback; `--replace` writes over it; a file at `--out` that
  is not a gradebook is never written over; two runs on one gradebook at once do not both write.
- A Canvas gradebook export or Moodle's exports work as `--roster`; a CSV that is not a roster (a
  gradebook, a header read as a student, scores where names go) is refused with exit 1.
- The bug-hunt exercise's multi-line mistake names keep the class report's tables and chart labels whole.
- Of several files answering one exercise, the feedback and the gradebook's notes name the one that
  counted.
- A student's feedback holds no local path (file names only) and no note for the instructor (what to check
  by hand, an integrity case, the paths of superseded files): those go to the gradebook's notes.
- A student id that starts like a spreadsheet formula (=, +, -, @) is written as text (a ' before it) in the
  gradebook, its notes and the class report, and read back as the id.

The pipeline's tests grade with a stand-in for `batch.grade_many` that gives each notebook the points its
metadata lists (no sandbox, so they are quick); one slow test grades for real.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from grading_cases import EX01, LIMITS, ROOT

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import ExerciseGrade, Roster, RosterError, SubmissionGrade, grade, pipeline
from attn_course_tools.grading.gradebook import GradebookError, gradebook_lock, notes_path
from attn_course_tools.grading.judging import mistake_names
from attn_course_tools.grading.report import bars, markdown, summarise

KEYS = ["ch1.q1", "ch1.q2", "ch1.q3"]


def stand_in(
    tasks: Sequence, jobs: int = 1, cache: object = None, force: bool = False, progress=None
) -> list:
    """`grade_many` without a sandbox: each exercise gets the points, message, notes and integrity case that
    the notebook's metadata ``said`` gives it ({"ch1.q1": 1, "message": ..., "notes": [...], ...})."""
    results = []
    for task in tasks:
        said = task.submission.notebook["metadata"]["said"]
        exercises = {
            key: ExerciseGrade(
                key,
                checks.EXERCISES[key].name,
                said.get(key, 0),
                checks.PASSED if said.get(key, 0) else checks.FAILED,
                said.get("message", "The result differs from the reference."),
                list(said.get("notes", [])),
                integrity=said.get("integrity"),
            )
            for key in task.keys
        }
        results.append(SubmissionGrade(task.path, task.student, task.submission.sha256, exercises, [], 0.1))
        if progress is not None:
            progress(results[-1])
    return results


@pytest.fixture
def graded(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Grading with `stand_in`; the list of the students each run graded."""
    runs: list[list[str]] = []

    def counted(tasks: Sequence, **kwargs: object) -> list:
        runs.append(sorted(task.student for task in tasks))
        return stand_in(tasks, **kwargs)

    monkeypatch.setattr(pipeline, "grade_many", counted)
    return runs


def hand_in(folder: Path, name: str, **said: object) -> Path:
    """A chapter 1 notebook at folder/name.ipynb that `stand_in` grades as `said` says."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {"attn_course": {"chapter": 1}, "said": said}}))
    return path


def a_class(root: Path) -> Path:
    """alice, bob and carol hand in ex01; dan hands in four notebooks of chapter 1."""
    for student, points in (("alice", 1), ("bob", 0), ("carol", 1)):
        hand_in(root / student, "ex01_masked_softmax", **{"ch1.q1": points, "ch1.q2": 1})
    for name in ("ex01_masked_softmax", "ex01_retry", "ex01_final", "scratch"):
        hand_in(root / "dan", name, **{"ch1.q1": 0})
    return root


def table(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


# ------------------------------------------------------------------------------------------------
# One student's regrade over the class's gradebook


def test_regrading_one_students_folder_over_the_class_gradebook_stops_before_grading(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture[str]
) -> None:
    root, out = a_class(tmp_path / "submissions"), tmp_path / "grades.csv"
    assert main(["grade", str(root), "--out", str(out)]) == 0
    before = {p: p.read_bytes() for p in tmp_path.glob("grades*") if p.is_file()}
    capsys.readouterr()
    assert main(["grade", str(root / "dan"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{out} has 4 students' rows" in err and "drop 4 of them (alice, bob, carol, dan)" in err
    assert "--only STUDENT" in err and "--replace" in err and "nothing was graded" in err
    assert graded == [["alice", "bob", "carol", "dan", "dan", "dan", "dan"]]  # the second run graded nothing
    assert {p: p.read_bytes() for p in tmp_path.glob("grades*") if p.is_file()} == before
    assert sorted(p.stem for p in (tmp_path / "grades_feedback").iterdir()) == [
        "alice",
        "bob",
        "carol",
        "dan",
    ]


def test_only_regrades_one_student_in_place_keeping_every_other_line_byte_for_byte(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture[str]
) -> None:
    root, out = a_class(tmp_path / "submissions"), tmp_path / "grades.csv"
    assert main(["grade", str(root), "--out", str(out)]) == 0
    lines = out.read_bytes().split(b"\r\n")
    lines[1] = b'"alice",1,1,0,2'  # edited by hand in a spreadsheet: its bytes must survive as they are
    out.write_bytes(b"\r\n".join(lines))
    reports = {p: p.read_bytes() for p in tmp_path.glob("grades_*.*")}
    (tmp_path / "grades_feedback" / "alice.md").unlink()
    hand_in(root / "dan", "ex01_final", **{"ch1.q1": 1, "ch1.q3": 1})  # dan's corrected notebook
    assert main(["grade", str(root / "dan"), "--out", str(out), "--only", "dan"]) == 0
    assert "updated the rows of dan in" in capsys.readouterr().out
    after = out.read_bytes().split(b"\r\n")
    assert after[:4] == lines[:4] and after[5:] == lines[5:]  # header, alice, bob, carol, the end
    assert after[4] == b"dan,1,0,1,2"
    assert graded[-1] == ["dan", "dan", "dan", "dan"]
    assert not (tmp_path / "grades_feedback" / "alice.md").exists()  # only dan's feedback is written
    assert "`ex01_final.ipynb`" in (tmp_path / "grades_feedback" / "dan.md").read_text()
    kept = {p: p.read_bytes() for p in tmp_path.glob("grades_*.*") if p != notes_path(out)}
    assert kept == {p: b for p, b in reports.items() if p != notes_path(out)}  # the class's reports


def test_only_refuses_a_student_none_of_the_files_belong_to(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture[str]
) -> None:
    root, out = a_class(tmp_path / "submissions"), tmp_path / "grades.csv"
    assert main(["grade", str(root), "--out", str(out)]) == 0
    before = out.read_bytes()
    assert main(["grade", str(root / "dan"), "--out", str(out), "--only", "dna"]) == 1
    assert "no file among those given belongs to dna" in capsys.readouterr().err
    assert out.read_bytes() == before and len(graded) == 1


def test_only_needs_a_gradebook_to_update(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture
) -> None:
    root = a_class(tmp_path / "submissions")
    assert main(["grade", str(root), "--out", str(tmp_path / "g.csv"), "--only", "dan"]) == 1
    assert "holds no gradebook to update" in capsys.readouterr().err and not graded


def test_replace_writes_over_a_gradebook_the_run_shrinks(tmp_path: Path, graded: list) -> None:
    root, out = a_class(tmp_path / "submissions"), tmp_path / "grades.csv"
    assert main(["grade", str(root), "--out", str(out)]) == 0
    assert main(["grade", str(root / "alice"), "--out", str(out), "--replace"]) == 0
    assert [row[0] for row in table(out)] == ["student", "ex01_masked_softmax"]


def test_a_file_at_out_that_is_not_a_gradebook_is_never_written_over(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture[str]
) -> None:
    root, roster = a_class(tmp_path / "submissions"), tmp_path / "roster.csv"
    roster.write_text("alice\nbob\ncarol\ndan\n")
    assert main(["grade", str(root), "--out", str(roster)]) == 1
    assert "is not a gradebook this command writes" in capsys.readouterr().err
    assert roster.read_text() == "alice\nbob\ncarol\ndan\n" and not graded


def test_a_second_run_on_a_gradebook_being_written_stops(tmp_path: Path, graded: list) -> None:
    root, out = a_class(tmp_path / "submissions"), tmp_path / "grades.csv"
    with gradebook_lock(out), pytest.raises(GradebookError, match="another grading run is writing"):
        grade([root], out=out, limits=LIMITS)
    assert not out.exists() and not graded


# ------------------------------------------------------------------------------------------------
# LMS rosters, and files that are no roster


CANVAS_EXPORT = """\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (4406),Current Points,\
Final Score
,,,,,Manual Posting,,
    Points Possible,,,,,10.00,(read only),(read only)
"Martin, Alice",1001,A001,amartin,Section 1,8.00,8.00,80.00
"Stone, Bob",1002,A002,bstone,Section 1,,0.00,0.00
"Wu, Carol",1003,A003,cwu,Section 2,9.50,9.50,95.00
"Student, Test",1999,,,Section 1,,,
"""


def test_a_canvas_gradebook_export_is_a_roster_of_canvas_ids_and_names(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(CANVAS_EXPORT)
    roster = Roster.read(path)
    assert (roster.source, roster.ids) == ("canvas", ("1001", "1002", "1003"))  # no Points Possible, no Test
    assert roster.names["1002"] == "Stone, Bob"
    assert roster.match("stonebob_1002") == "1002"


def test_grading_canvas_downloads_against_canvas_s_export_gives_a_row_per_student(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture[str]
) -> None:
    downloads = tmp_path / "downloads"
    hand_in(downloads, f"martinalice_1001_7001_{EX01[:-6]}", **{"ch1.q1": 1, "ch1.q2": 1})
    hand_in(downloads, f"wucarol_LATE_1003_7002_{EX01[:-6]}", **{"ch1.q1": 1})
    export, out = tmp_path / "export.csv", tmp_path / "grades.csv"
    export.write_text(CANVAS_EXPORT)
    assert (
        main(["grade", str(downloads), "--out", str(out), "--roster", str(export), "--format", "canvas"]) == 0
    )
    assert "no submission (1): 1002" in capsys.readouterr().out
    assert [row[:3] for row in table(out)[2:]] == [
        ["Martin, Alice", "1001", ""],
        ["Stone, Bob", "1002", ""],
        ["Wu, Carol", "1003", ""],
    ]
    assert [row[5:] for row in table(out)[2:]] == [["1", "1", "0"], ["0", "0", "0"], ["1", "0", "0"]]


def test_moodle_s_worksheet_and_participants_export_are_rosters(tmp_path: Path) -> None:
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade),Feedback comments\n"
        "Participant 2001,Ann Lee,ann@example.org,Submitted for grading,,10,Yes,"
        '"Friday, 14 March 2025, 6:02 PM",-,\n'
        "Participant 2002,Bo Wu,bo@example.org,No submission,,10,Yes,-,-,\n"
    )
    roster = Roster.read(worksheet)
    assert (roster.source, roster.ids, roster.names["2001"]) == (
        "moodle worksheet",
        ("2001", "2002"),
        "Ann Lee",
    )
    assert roster.submitted == {"2001": "Friday, 14 March 2025, 6:02 PM"}
    assert roster.match("Ann Lee_2001") == "2001"
    participants = tmp_path / "participants.csv"
    participants.write_text(
        "First name,Last name,Email address,Roles,Groups,Last access to course\n"
        "Ann,Lee,ann@example.org,Student,Group A,2 days\n"
        "Tom,Teach,tom@example.org,Teacher,,now\n"
        "Bo,Wu,bo@example.org,Student,Group B,never\n"
    )
    roster = Roster.read(participants)
    assert (roster.source, roster.ids) == ("moodle participants", ("Ann Lee", "Bo Wu"))  # no teacher
    assert roster.match("Ann Lee_2001") == "Ann Lee" and roster.match("Tom Teach_2003") is None


def test_two_participants_of_one_name_point_to_the_worksheet(tmp_path: Path) -> None:
    participants = tmp_path / "participants.csv"
    participants.write_text(
        "Full name,Email address,Roles\nAnn Lee,a@x.org,Student\nAnn Lee,b@x.org,Student\n"
    )
    with pytest.raises(RosterError, match="line 3: student 'Ann Lee' is listed twice.*grading worksheet"):
        Roster.read(participants)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("student,ch1.q1,ch1.q2,total\nalice,1,1,2\n", "line 1 has 4 columns"),  # a gradebook
        ("name,id\nAlice Martin,alice\n", "line 1: 'name' reads like the name of a column"),
        ("alice,95\nbob,40\n", "line 1: the name '95' is a number"),  # scores where names go
        ("alice\n    Points Possible\nbob\n", "line 2: 'Points Possible' reads like the name of a column"),
        ("Name,Email,Phone\nAlice,a@x.org,555\n", "line 1 has 3 columns"),
    ],
)
def test_a_file_that_is_not_a_roster_is_refused_with_exit_1_before_grading(
    tmp_path: Path, graded: list, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    roster, out = tmp_path / "roster.csv", tmp_path / "grades.csv"
    roster.write_text(text)
    root = a_class(tmp_path / "submissions")
    assert main(["grade", str(root), "--out", str(out), "--roster", str(roster)]) == 1
    assert expected in capsys.readouterr().err
    assert not out.exists() and not graded


# ------------------------------------------------------------------------------------------------
# The class report with the bug-hunt's mistake names


def test_multi_line_mistake_names_keep_the_report_s_tables_and_the_chart_s_labels_whole() -> None:
    bug_hunt, kernel = checks.EXERCISES["ch2.q5"], checks.EXERCISES["ch1.q3"]
    names = [n for n in mistake_names(bug_hunt).values() if "\n" in n]
    assert names, "the bug-hunt has a mistake name of several lines"
    piped = next(n for n in mistake_names(kernel).values() if "|" in n)
    grades = {
        f"s{i}": {
            "ch2.q5": ExerciseGrade("ch2.q5", bug_hunt.name, 0, checks.FAILED, f"{name}\nmore", [], name),
            "ch1.q3": ExerciseGrade("ch1.q3", kernel.name, 0, checks.FAILED, piped, [], piped),
        }
        for i, name in enumerate(names)
    }
    summaries = summarise(grades, ["ch1.q3", "ch2.q5"])
    text = markdown(summaries, len(grades), [1.0], "chart.png")
    header = None
    for line in text.splitlines():
        pipes = len(re.findall(r"(?<!\\)\|", line))
        header = (header or pipes) if line.startswith("|") else None
        assert header is None or pipes == header, line  # a table's every line has its header's cells
    assert not [line for line in text.splitlines() if line.startswith("- The ")]  # no list leaked out
    ranked = text[text.index("## To re-teach first") : text.index("## Exercises")]
    assert all(line.startswith(("1.", "2.", "3.", "   ", "#")) for line in ranked.splitlines() if line)
    assert all("\n" not in label for _, label, _ in bars(summaries))


# ------------------------------------------------------------------------------------------------
# Which file counted, and what the student may read


def test_the_feedback_and_the_notes_name_the_file_whose_attempt_counted(tmp_path: Path, graded: list) -> None:
    root, out = tmp_path / "submissions", tmp_path / "grades.csv"
    hand_in(root / "erin", "ex01_first_try", **{"ch1.q1": 0, "ch1.q2": 1})
    hand_in(root / "erin", "ex01_second_try", **{"ch1.q1": 1, "ch1.q2": 0})
    hand_in(root / "fay", "ex01_masked_softmax", **{"ch1.q1": 1})
    grade([root], out=out, id_from="folder", limits=LIMITS)
    feedback = (tmp_path / "grades_feedback" / "erin.md").read_text()
    q1 = feedback[feedback.index("## ch1.q1") : feedback.index("## ch1.q2")]
    q2 = feedback[feedback.index("## ch1.q2") : feedback.index("## ch1.q3")]
    assert "Counted: your attempt in `ex01_second_try.ipynb`; 2 of your files answer" in q1
    assert "Counted: your attempt in `ex01_first_try.ipynb`" in q2
    assert str(root) not in feedback
    notes = table(notes_path(out))
    counted = "counted ex01_second_try.ipynb (the files that answer it: ex01_first_try.ipynb 0, "
    assert ["erin", "ch1.q1", counted + "ex01_second_try.ipynb 1)"] in notes
    assert not [n for n in notes if n[0] == "fay"]  # one file: nothing to say


def test_the_students_feedback_holds_no_local_path_and_no_note_for_the_instructor(
    tmp_path: Path, graded: list
) -> None:
    downloads, out = tmp_path / "home" / "instructor" / "downloads", tmp_path / "grades.csv"
    by_hand = "cell 2 uses importlib/reload: check by hand that it does not bring back a package function"
    said = {
        "ch1.q1": 0,
        "message": f"0 points: your code opened {ROOT}/attn_course_exercises/ch1_masking.py while grading.",
        "notes": [by_hand, "cell 3 raised ValueError: bad shape at /tmp/job-81x/cell_3.py line 2"],
        "integrity": "ch1.q1 `sequence_mask`: opened the course's model answers (ch1_masking.py)",
    }
    first = hand_in(downloads, f"doejane_1234_50001_{EX01[:-6]}", **said)
    later = hand_in(downloads, f"doejane_1234_50077_{EX01[:-6]}-1", **said)
    grade([downloads], out=out, limits=LIMITS)
    feedback = (tmp_path / "grades_feedback" / "doejane_1234.md").read_text()
    for secret in (str(tmp_path), str(ROOT), "/tmp/job-81x", "check by hand", "integrity", "model answers"):
        assert secret not in feedback, secret
    assert f"`{first.name}` was also received; this later submission was graded instead." in feedback
    assert "ch1_masking.py while grading" in feedback and "cell_3.py line 2" in feedback  # file names stay
    notes = notes_path(out).read_text()
    assert by_hand in notes and "integrity: ch1.q1 `sequence_mask`: opened" in notes
    assert f"superseded {first} (graded {later}, the later)" in notes


# ------------------------------------------------------------------------------------------------
# For real: a class graded, then one student regraded alone


@pytest.mark.slow
def test_for_real_one_students_regrade_updates_only_their_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, out = tmp_path / "submissions", tmp_path / "grades.csv"
    for student, source in (("alice", ROOT / "solutions" / EX01), ("dan", ROOT / "exercises" / EX01)):
        (root / student).mkdir(parents=True)
        shutil.copy(source, root / student / EX01)
    argv = ["grade", str(root), "--out", str(out), "--jobs", "1", "--quiet"]
    assert main(argv) == 0
    assert [row[-1] for row in table(out)] == ["total", "3", "0"]
    shutil.copy(ROOT / "solutions" / EX01, root / "dan" / "ex01_masked_softmax_v2.ipynb")
    assert main(["grade", str(root / "dan"), "--out", str(out), "--quiet"]) == 1
    assert main(["grade", str(root / "dan"), "--out", str(out), "--only", "dan", "--quiet"]) == 0
    assert [row[-1] for row in table(out)] == ["total", "3", "3"]
    feedback = (tmp_path / "grades_feedback" / "dan.md").read_text()
    assert "Counted: your attempt in `ex01_masked_softmax_v2.ipynb`; 2 of your files" in feedback


# ------------------------------------------------------------------------------------------------
# Formulas in the gradebook (CSV injection)

FORMULAS = ["=1+1", '=HYPERLINK("http:", "click")', "@SUM(A1)", "+cmd", "-2+3", "'=quoted"]


def test_no_cell_a_student_names_reaches_a_spreadsheet_as_a_formula(tmp_path: Path, graded: list) -> None:
    """A student who names their folder like a formula gets a cell that a spreadsheet shows as text, in the
    gradebook, its notes and the class report; `--only` still finds their row, and reading undoes it."""
    root, out = tmp_path / "submissions", tmp_path / "grades.csv"
    for name in FORMULAS:
        hand_in(root / name, "ex01_first_try", **{"ch1.q1": 0, "ch1.q2": 1})
        hand_in(root / name, "ex01_second_try", **{"ch1.q1": 1, "ch1.q2": 0})  # two files: a note each
    assert main(["grade", str(root), "--out", str(out)]) == 0
    written = [out, notes_path(out), *tmp_path.glob("grades_*.csv")]
    for path in written:
        for cells in table(path):
            for cell in cells:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")), (path.name, cell)
                assert not cell.startswith("-") or re.fullmatch(r"-[\d.]+", cell), (path.name, cell)
    students = [cells[0] for cells in table(out)[1:]]
    assert sorted(students) == sorted("'" + name for name in FORMULAS)
    assert [row for row in table(notes_path(out)) if row[0] == "'=1+1"]
    lines = out.read_bytes()
    hand_in(root / "=1+1", "ex01_second_try", **{"ch1.q1": 1, "ch1.q2": 1, "ch1.q3": 1})
    assert main(["grade", str(root / "=1+1"), "--out", str(out), "--only", "=1+1"]) == 0
    after = out.read_bytes().split(b"\r\n")
    changed = [line for line in after if line not in lines.split(b"\r\n")]
    assert changed == [b"'=1+1,1,1,1,3"]
    assert len(after) == len(lines.split(b"\r\n"))
    assert [n for n in table(notes_path(out)) if n[0] == "'=1+1"]  # its notes rewritten, not doubled
    assert len([n for n in table(notes_path(out)) if n[0] == "'=1+1"]) == len(
        [n for n in table(notes_path(out)) if n[0] == "'+cmd"]
    )
