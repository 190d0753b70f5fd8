"""A course's rules in the gradebook: each exercise's points, the due date, the late penalty and its cap,
extensions, the instructor's overrides, and when each submission was handed in.

`Rules` is tested on its own (the Gradescope autograder calls it too); the gradebook's forms and the
feedback on grades made up here; the command line with a stand-in for the sandboxes (`stand_in`, from
`test_redteam_gradebook`'s way of grading: each notebook's metadata says its points)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import ExerciseGrade, SubmissionGrade, pipeline, write_gradebook
from attn_course_tools.grading.gradebook import Marking, notes_path, write_feedback
from attn_course_tools.grading.gradebook import score as score_row
from attn_course_tools.grading.records import Row
from attn_course_tools.grading.rules import (
    Override,
    Rules,
    canvas_late,
    parse_time,
    read_overrides,
    read_times,
)

PARIS = timezone(timedelta(hours=1))
DUE = datetime(2025, 3, 14, 23, 59, tzinfo=PARIS)
KEYS = ["ch1.q1", "ch1.q2", "ch1.q3"]

RULES_FILE = """\
# the course's rules for chapter 1
due = 2025-03-14T23:59:00+01:00

[late]
per_day = 0.1
cap = 0.3

[points]
"ch1.q2" = 2
"ch1.q3" = 0.5

[extensions]
dan = 2025-03-17T23:59:00+01:00
"""


def rules_file(tmp_path: Path, text: str = RULES_FILE) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


def table(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


# ------------------------------------------------------------------------------------------------
# Rules


def test_a_rules_file_gives_points_the_due_date_the_late_penalty_and_extensions(tmp_path: Path) -> None:
    rules = Rules.load(rules_file(tmp_path))
    assert rules.points == {"ch1.q2": 2.0, "ch1.q3": 0.5}
    assert [rules.weight(k) for k in KEYS] == [1.0, 2.0, 0.5]  # an exercise left out is worth 1
    assert (rules.due, rules.per_day, rules.cap) == (DUE, 0.1, 0.3)
    assert rules.extensions == {"dan": datetime(2025, 3, 17, 23, 59, tzinfo=PARIS)}


def test_local_dates_take_the_rules_time_zone_and_a_date_alone_ends_that_day(tmp_path: Path) -> None:
    rules = Rules.load(
        rules_file(
            tmp_path, 'timezone = "Europe/Paris"\ndue = 2025-03-14\n[extensions]\nx = 2025-07-01T12:00:00\n'
        )
    )
    assert rules.due.isoformat() == "2025-03-14T23:59:59+01:00"
    assert rules.extensions["x"].isoformat() == "2025-07-01T12:00:00+02:00"  # summer time


def test_without_a_file_each_exercise_is_worth_a_point_and_nothing_is_late() -> None:
    assert Rules().weight("ch1.q1") == 1.0
    assert Rules().late("alice", DUE + timedelta(days=40)) == (1.0, None)


@pytest.mark.parametrize(
    ("submitted", "factor"),
    [
        (DUE, 1.0),  # on the minute
        (DUE + timedelta(minutes=1), 0.9),  # a part of a day counts as a day
        (DUE + timedelta(days=1), 0.9),
        (DUE + timedelta(days=1, seconds=1), 0.8),
        (DUE + timedelta(days=30), 0.7),  # the cap
        (None, 1.0),  # no time known
    ],
)
def test_the_late_factor_loses_per_day_or_part_of_one_up_to_the_cap(
    submitted: datetime, factor: float
) -> None:
    rules = Rules(due=DUE, per_day=0.1, cap=0.3)
    found, sentence = rules.late("alice", submitted)
    assert found == pytest.approx(factor)
    assert (sentence is None) == (factor == 1.0)


def test_the_late_sentence_says_how_late_and_what_it_costs() -> None:
    rules = Rules(due=DUE, per_day=0.1, cap=0.3)
    _, sentence = rules.late("alice", datetime(2025, 3, 16, 9, 0, tzinfo=timezone.utc))
    assert sentence == (
        "Handed in 2 days late (2025-03-16 10:00 UTC+01:00; the due date was 2025-03-14 23:59 UTC+01:00): "
        "20% of its points are taken off (10% a day or part of a day, at most 30%)."
    )


def test_an_extension_moves_that_students_due_date_only() -> None:
    rules = Rules(due=DUE, per_day=0.5, cap=1.0, extensions={"dan": DUE + timedelta(days=3)})
    handed_in = DUE + timedelta(days=2)
    assert rules.late("dan", handed_in) == (1.0, None)
    assert rules.late("eve", handed_in)[0] == 0.0
    assert "your extended due date" in rules.late("dan", handed_in + timedelta(days=2))[1]


def test_a_time_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="submitted must be a timezone-aware datetime"):
        Rules(due=DUE).late("alice", datetime(2025, 3, 15))
    with pytest.raises(ValueError, match="cap must be a number in \\[0, 1\\], got 2"):
        Rules(cap=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("due = 2025-03-14T23:59:00+01:00\nlate_penalty = 0.1\n", "line 2: unknown key 'late_penalty'"),
        ("[late]\nper_day = 0.1\n", "line 2: late.per_day is set, but there is no due date"),
        ("due = 2025-03-14T23:59:00+01:00\n[late]\nper_day = 10\n", "line 3: late.per_day must be a share"),
        ("due = 2025-03-14T23:59:00\n", "line 1: due = 2025-03-14T23:59:00 has no time zone"),
        ('[points]\n"ch1.q9" = 2\n', "line 2: points: 'ch1.q9' is not an exercise of the course"),
        ('[points]\n"ch1.q2" = -1\n', "line 2: points.ch1.q2 must be a number >= 0"),
        ('timezone = "Mars/Olympus"\n', "line 1: timezone 'Mars/Olympus' is not a time zone name"),
        ("due = 2025-03-14T23:59:00+01:00\n[late\n", "not a TOML file"),
        ('due = "next friday"\n', "line 1: due must be a date and time"),
        ("[late]\nper_day = 0.1\nlate = 2\n", "line 3: unknown key late.late"),
    ],
)
def test_a_malformed_rules_file_names_its_line_and_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        Rules.load(rules_file(tmp_path, text))


def test_a_malformed_rules_file_stops_the_command_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rules_file(tmp_path, "due = 2025-03-14T23:59:00+01:00\n[late]\ncap = 1.5\n")
    notebook = tmp_path / "alice.ipynb"
    notebook.write_text("{}")
    assert main(["grade", str(notebook), "--out", str(tmp_path / "g.csv"), "--rules", str(path)]) == 1
    assert "line 3: late.cap must be a share in [0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


# ------------------------------------------------------------------------------------------------
# Submission times


def test_times_come_from_iso_or_moodles_own_way_of_writing_them() -> None:
    rules = Rules(due=DUE)
    assert parse_time("2025-03-15T09:00:00Z", rules) == datetime(2025, 3, 15, 9, tzinfo=timezone.utc)
    assert parse_time("Friday, 14 March 2025, 6:02 PM", rules) == datetime(2025, 3, 14, 18, 2, tzinfo=PARIS)
    with pytest.raises(ValueError, match="'yesterday' is not a time"):
        parse_time("yesterday", rules)
    with pytest.raises(ValueError, match="has no time zone"):
        parse_time("2025-03-15 09:00", Rules())


def test_a_times_file_gives_each_student_a_time_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "times.csv"
    path.write_text("student,submitted\nalice,2025-03-15T09:00:00+01:00\nbob,soon\n")
    with pytest.raises(ValueError, match="line 3: the time 'soon' is not a time"):
        read_times(path, Rules(due=DUE))
    path.write_text("student,submitted\nalice,2025-03-15T09:00:00+01:00\n")
    assert read_times(path, Rules(due=DUE)) == {"alice": datetime(2025, 3, 15, 9, tzinfo=PARIS)}


def test_canvas_marks_a_late_file_in_its_name() -> None:
    assert canvas_late(Path("doejane_LATE_1234_50077_ex01_masked_softmax-1.ipynb"))
    assert not canvas_late(Path("doejane_1234_50001_ex01_masked_softmax.ipynb"))


# ------------------------------------------------------------------------------------------------
# Overrides


def overrides_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "overrides.csv"
    path.write_text("student,exercise,points,reason\n" + text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice,ch1.q9,1,typo\n", "line 2: 'ch1.q9' is not an exercise of the course"),
        ("alice,ch1.q1,lots,why\n", "line 2: points must be a number, got 'lots'"),
        ("alice,ch1.q2,3,why\n", "line 2: points of ch1.q2 must be between 0 and 2, got 3"),
        ("alice,ch1.q1,1,\n", "line 2: the reason is empty"),
        ("alice,ch1.q1,1,a\nalice,ch1.q1,0,b\n", "line 3: alice ch1.q1 is overridden twice"),
    ],
)
def test_a_bad_override_names_its_line(tmp_path: Path, text: str, expected: str) -> None:
    rules = Rules(points={"ch1.q2": 2.0})
    with pytest.raises(ValueError, match=re.escape(expected)):
        read_overrides(overrides_file(tmp_path, text), rules)


def test_an_override_needs_the_header_of_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "overrides.csv"
    path.write_text("alice,ch1.q1,1,why\n")
    with pytest.raises(
        ValueError, match="the first line must name the columns student, exercise, points, reason"
    ):
        read_overrides(path)


# ------------------------------------------------------------------------------------------------
# The gradebook and the feedback under the rules


def made_up(
    student: str, points: Sequence[int], name: str = "ex01.ipynb", cached: bool = False
) -> SubmissionGrade:
    exercises = {
        key: ExerciseGrade(key, checks.EXERCISES[key].name, p, checks.PASSED if p else checks.FAILED, "msg")
        for key, p in zip(KEYS, points, strict=True)
    }
    return SubmissionGrade(Path("class") / student / name, student, "0" * 64, exercises, [], 0.1, cached)


RULES = Rules(points={"ch1.q2": 2.0, "ch1.q3": 0.5}, due=DUE, per_day=0.1, cap=0.3)
LATE = {"bob": DUE + timedelta(days=1, hours=2)}  # two days (or part) late: 20% off
OVERRIDE = Override("carol", "ch1.q2", 1.5, "graded by hand: right idea, one sign wrong")


def test_the_course_csv_shows_the_points_possible_each_exercises_points_the_late_penalty_and_the_total(
    tmp_path: Path,
) -> None:
    grades = [made_up("alice", (1, 1, 1)), made_up("bob", (1, 1, 0)), made_up("carol", (1, 0, 1))]
    marking = Marking(RULES, (OVERRIDE,), LATE)
    path = write_gradebook(grades, KEYS, tmp_path / "g.csv", marking=marking)
    assert table(path) == [
        ["student", "ch1.q1", "ch1.q2", "ch1.q3", "late penalty", "total"],
        ["points possible", "1", "2", "0.5", "", "3.5"],
        ["alice", "1", "2", "0.5", "0", "3.5"],
        ["bob", "1", "2", "0", "-0.6", "2.4"],
        ["carol", "1", "1.5", "0.5", "0", "3"],
    ]


def test_canvas_gets_each_exercises_points_possible_or_one_total_column(tmp_path: Path) -> None:
    grades = [made_up("Alice Martin_1001", (1, 1, 0)), made_up("Bob Stone_1002", (1, 1, 1))]
    marking = Marking(RULES, (), {"Bob Stone_1002": LATE["bob"]})
    path = write_gradebook(grades, KEYS, tmp_path / "c.csv", rule="canvas", format="canvas", marking=marking)
    assert table(path)[1] == ["Points Possible", "", "", "", "", "1", "2", "0.5"]
    assert table(path)[3][5:] == ["0.8", "1.6", "0.4"]  # after the late penalty: Canvas has one number
    one = write_gradebook(
        grades, KEYS, tmp_path / "c1.csv", rule="canvas", format="canvas", marking=marking,
        canvas_column="Assignment 1 (4406)",
    )  # fmt: skip
    assert table(one) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Assignment 1 (4406)"],
        ["Points Possible", "", "", "", "", "3.5"],
        ["Alice Martin", "1001", "", "", "", "3"],
        ["Bob Stone", "1002", "", "", "", "2.8"],
    ]


def test_moodle_gets_the_weighted_total_and_a_comment_with_the_late_penalty_and_the_reasons(
    tmp_path: Path,
) -> None:
    grades = [made_up("Bob Stone_2002", (1, 1, 0)), made_up("Carol Wu_2003", (1, 0, 1))]
    marking = Marking(
        RULES, (Override("Carol Wu_2003", "ch1.q2", 1.5, "right idea"),), {"Bob Stone_2002": LATE["bob"]}
    )
    path = write_gradebook(grades, KEYS, tmp_path / "m.csv", rule="moodle", format="moodle", marking=marking)
    rows = [dict(zip(table(path)[0], row, strict=True)) for row in table(path)[1:]]
    assert [(r["Grade"], r["Maximum Grade"]) for r in rows] == [("2.4", "3.5"), ("3", "3.5")]
    assert "20% of its points are taken off" in rows[0]["Feedback comments"]
    assert (
        rows[1]["Feedback comments"]
        == "ch1.q1 1/1; ch1.q2 1.5/2 (set by your instructor: right idea); ch1.q3 0.5/0.5"
    )


def test_an_override_holds_for_a_cached_grade_and_the_student_reads_its_reason(tmp_path: Path) -> None:
    original = made_up("carol", (1, 0, 1))
    cached = SubmissionGrade.from_json(json.loads(json.dumps(original.to_json())), original.path, "carol")
    marks = score_row(Row("carol", "", [cached], ""), KEYS, Marking(RULES, (OVERRIDE,)))
    assert cached.cached and marks.marks["ch1.q2"].points == 1.5 and marks.total == 3.0
    feedback = write_feedback("carol", [cached], KEYS, tmp_path, marks=marks).read_text()
    assert "| ch1.q2 `masked_softmax` | 1.5/2 | set by your instructor |" in feedback
    assert (
        "**Set by your instructor: graded by hand: right idea, one sign wrong** (1.5 of 2 points" in feedback
    )
    assert "**Total: 3 of 3.5**" in feedback


def test_an_override_stands_as_given_on_a_late_file() -> None:
    bob = made_up("bob", (1, 0, 0))
    override = Override("bob", "ch1.q2", 2.0, "the checks missed a right answer")
    marks = score_row(Row("bob", "", [bob], ""), KEYS, Marking(RULES, (override,), LATE))
    assert (marks.marks["ch1.q2"].earned, marks.marks["ch1.q1"].earned) == (2.0, 0.8)
    assert marks.total == pytest.approx(2.8)


def test_the_feedback_shows_the_late_penalty_and_each_exercises_points(tmp_path: Path) -> None:
    bob = made_up("bob", (1, 1, 0))
    marks = score_row(Row("bob", "", [bob], ""), KEYS, Marking(RULES, (), LATE))
    feedback = write_feedback("bob", [bob], KEYS, tmp_path, marks=marks).read_text()
    assert "- Late: Handed in 2 days late" in feedback and "20% of its points are taken off" in feedback
    assert "| ch1.q2 `masked_softmax` | 2/2 | correct |" in feedback
    assert "**Total: 2.4 of 3.5** (0.6 taken off for lateness)" in feedback


def test_of_two_files_the_one_earning_most_after_its_late_penalty_counts() -> None:
    on_time, late = made_up("eve", (1, 1, 0), "ex01.ipynb"), made_up("eve", (1, 1, 1), "ex01_late.ipynb")
    times = {"eve": DUE}  # one time for both: both on time
    marks = score_row(Row("eve", "", [on_time, late], ""), KEYS, Marking(RULES, (), times))
    assert marks.marks["ch1.q3"].file is late and marks.marks["ch1.q1"].file is on_time  # a tie: the first
    assert marks.marks["ch1.q1"].others == 1


# ------------------------------------------------------------------------------------------------
# The command line


def stand_in(tasks: Sequence, **kwargs: object) -> list[SubmissionGrade]:
    """`grade_many` without a sandbox: each notebook's metadata ``said`` gives its exercises' points."""
    results = []
    for task in tasks:
        said = task.submission.notebook["metadata"]["said"]
        exercises = {
            k: ExerciseGrade(k, checks.EXERCISES[k].name, said.get(k, 0), checks.FAILED, "msg")
            for k in task.keys
        }
        results.append(SubmissionGrade(task.path, task.student, task.submission.sha256, exercises, [], 0.1))
    return results


@pytest.fixture
def a_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two Moodle submissions (Ann Lee 2001, Bo Wu 2002), graded by `stand_in`."""
    monkeypatch.setattr(pipeline, "grade_many", stand_in)
    for student, points in (("Ann Lee_2001", 1), ("Bo Wu_2002", 0)):
        folder = tmp_path / "downloads" / f"{student}_assignsubmission_file_"
        folder.mkdir(parents=True)
        said = {"ch1.q1": points, "ch1.q2": 1}
        (folder / "ex01.ipynb").write_text(json.dumps({"cells": [], "metadata": {"said": said}}))
    return tmp_path / "downloads"


def test_moodles_worksheet_as_roster_gives_the_times_that_make_the_late_penalty(
    tmp_path: Path, a_class: Path
) -> None:
    worksheet, out = tmp_path / "worksheet.csv", tmp_path / "grades.csv"
    worksheet.write_text(
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade),Feedback comments\n"
        'Participant 2001,Ann Lee,,,,,Yes,"Saturday, 15 March 2025, 10:00 AM",-,\n'
        'Participant 2002,Bo Wu,,,,,Yes,"Friday, 14 March 2025, 6:02 PM",-,\n'
    )
    argv = ["grade", str(a_class), "--out", str(out), "--roster", str(worksheet), "--chapter", "1"]
    rules = rules_file(tmp_path, RULES_FILE.replace("dan = ", "2002 = "))  # extensions by roster id
    assert main([*argv, "--rules", str(rules)]) == 0
    assert table(out)[2:] == [
        ["2001", "Ann Lee", "1", "2", "0", "-0.3", "2.7", ""],  # a day late: 10% of 3 points
        ["2002", "Bo Wu", "0", "2", "0", "0", "2", ""],
    ]
    feedback = (tmp_path / "grades_feedback" / "2001.md").read_text()
    assert "Handed in 1 day late (2025-03-15 10:00 UTC+01:00" in feedback
    assert "ex01.ipynb: Handed in 1 day late" in notes_path(out).read_text()


def test_overrides_show_in_the_gradebook_and_survive_a_regrade_and_bad_ones_stop_the_run(
    tmp_path: Path, a_class: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "grades.csv"
    argv = ["grade", str(a_class), "--out", str(out), "--chapter", "1"]
    good = overrides_file(tmp_path, "Bo Wu_2002,ch1.q1,0.5,half right: the mask is fine\n")
    for _ in range(2):  # applied on every run, whatever the grades come from
        assert main([*argv, "--overrides", str(good)]) == 0
        assert table(out)[2] == ["Bo Wu_2002", "0.5", "1", "0", "1.5"]
    assert (
        "Set by your instructor: half right: the mask is fine"
        in (tmp_path / "grades_feedback" / "Bo_Wu_2002.md").read_text()
    )
    before = out.read_bytes()
    for text, expected in (
        ("Bo Wu_9999,ch1.q1,1,typo\n", "the override of ch1.q1 for 'Bo Wu_9999': no such student"),
        (
            "Bo Wu_2002,ch2.q1,1,other chapter\n",
            "the override of ch2.q1 for 'Bo Wu_2002': the gradebook has no column",
        ),
        ("Bo Wu_2002,ch1.q1,2,too much\n", "points of ch1.q1 must be between 0 and 1, got 2"),
    ):
        assert main([*argv, "--overrides", str(overrides_file(tmp_path, text))]) == 1
        assert expected in capsys.readouterr().err
        assert out.read_bytes() == before


def test_an_extension_for_a_student_not_on_the_roster_stops_the_run(
    tmp_path: Path, a_class: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("2001,Ann Lee\n2002,Bo Wu\n")
    rules = rules_file(tmp_path, RULES_FILE.replace("dan = ", "2003 = "))
    argv = [
        "grade",
        str(a_class),
        "--out",
        str(tmp_path / "g.csv"),
        "--roster",
        str(roster),
        "--rules",
        str(rules),
    ]
    assert main(argv) == 1
    assert "the extension of '2003': not on the roster" in capsys.readouterr().err
