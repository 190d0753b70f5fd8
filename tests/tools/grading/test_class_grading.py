"""Grading a whole class: rosters, Canvas's and Moodle's gradebook imports, the grade cache, parallel jobs.

The roster, the gradebook formats and the cache are tested on grades made up here (no sandbox). Slow
tests grade for real: the hostile batch of `test_grading` in every submission layout with two jobs gets the
grades it gets with one, and the command line remembers grades between runs."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from grading_cases import EX01, LIMITS, ROOT, hostile_batch, place, student_of

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import (
    ExerciseGrade,
    GradeCache,
    IdentityError,
    Limits,
    Roster,
    RosterError,
    SubmissionGrade,
    Task,
    grade,
    grade_many,
    gradebook_rows,
    read_submission,
    write_gradebook,
)
from attn_course_tools.grading.cache import grader_version
from attn_course_tools.grading.closure import package_roots

KEYS = ["ch1.q1", "ch1.q2"]


def made_up(student: str, points: tuple[int, int], path: str = "x.ipynb") -> SubmissionGrade:
    """A grade of chapter 1 for `student`, as the grader would return it."""
    exercises = {
        key: ExerciseGrade(key, checks.EXERCISES[key].name, p, checks.PASSED if p else checks.FAILED, "msg")
        for key, p in zip(KEYS, points, strict=True)
    }
    return SubmissionGrade(Path(path), student, "0" * 64, exercises, [], 0.1)


def table(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


# ------------------------------------------------------------------------------------------------
# Rosters


def roster_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(text)
    return path


def test_a_roster_reads_ids_and_optional_names_skipping_header_blanks_and_comments(tmp_path: Path) -> None:
    roster = Roster.read(roster_file(tmp_path, "student,name\nalice,Alice Martin\n\n# dropped: eve\nbob\n"))
    assert roster.ids == ("alice", "bob")
    assert roster.names == {"alice": "Alice Martin"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice\nbob\nalice\n", "line 3: student 'alice' is listed twice"),
        ("alice\n,Bob\n", "line 2: the student id (first column) is empty"),
        ("# nobody\n", "lists no student"),
    ],
)
def test_a_bad_roster_names_its_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(RosterError, match=re.escape(expected)):
        Roster.read(roster_file(tmp_path, text))


def test_a_roster_id_matches_the_same_id_or_the_lms_number_an_id_ends_with() -> None:
    roster = Roster(("alice", "12345"), {})
    assert roster.match("alice") == "alice"
    assert roster.match("Bob Stone_12345") == "12345"  # Canvas / Moodle: <name>_<number>
    assert [roster.match(s) for s in ("bob_2345", "12345x", "carol")] == [None, None, None]


def test_two_students_matching_one_roster_id_stop_the_run_before_grading() -> None:
    roster = Roster(("12345",), {})
    with pytest.raises(IdentityError, match="'12345': Bob_12345, Robert_12345"):
        roster.assign(["Bob_12345", "Robert_12345"])


def test_every_roster_student_gets_a_row_and_strangers_are_marked(tmp_path: Path) -> None:
    roster = Roster(("carol", "alice", "dan"), {"alice": "Alice Martin"})
    grades = [made_up("alice", (1, 0)), made_up("zed", (1, 1)), made_up("carol", (0, 0))]
    path = write_gradebook(grades, KEYS, tmp_path / "g.csv", roster=roster)
    assert table(path) == [
        ["student", "name", "ch1.q1", "ch1.q2", "total", "note"],
        ["carol", "", "0", "0", "0", ""],
        ["alice", "Alice Martin", "1", "0", "1", ""],
        ["dan", "", "0", "0", "0", "no submission"],
        ["zed", "", "1", "1", "2", "not on the roster"],
    ]


def test_without_a_roster_the_gradebook_keeps_its_columns_and_leaves_unanswered_exercises_empty(
    tmp_path: Path,
) -> None:
    only_q1 = made_up("bob", (1, 0))
    del only_q1.exercises["ch1.q2"]
    path = write_gradebook([made_up("alice", (1, 1)), only_q1], KEYS, tmp_path / "g.csv")
    assert table(path) == [["student", *KEYS, "total"], ["alice", "1", "1", "2"], ["bob", "1", "", "1"]]


# ------------------------------------------------------------------------------------------------
# Canvas and Moodle


def test_canvas_import_has_its_identity_columns_points_possible_and_a_column_per_exercise(
    tmp_path: Path,
) -> None:
    grades = [made_up("Alice Martin_1001", (1, 1)), made_up("Bob Stone_1002", (0, 1))]
    path = write_gradebook(grades, KEYS, tmp_path / "canvas.csv", rule="canvas", format="canvas")
    assert table(path) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "ch1.q1 sequence_mask",
         "ch1.q2 masked_softmax"],
        ["Points Possible", "", "", "", "", "1", "1"],
        ["Alice Martin", "1001", "", "", "", "1", "1"],
        ["Bob Stone", "1002", "", "", "", "0", "1"],
    ]  # fmt: skip


def test_canvas_import_puts_the_course_id_in_sis_user_id_when_no_canvas_number_is_known(
    tmp_path: Path,
) -> None:
    grades = [made_up("bob_2", (1, 1))]
    path = write_gradebook(grades, KEYS, tmp_path / "c.csv", rule="folder", format="canvas")
    assert table(path)[2][:3] == ["bob_2", "", "bob_2"]  # a folder named bob_2 is not a Canvas number


def test_moodle_worksheet_has_a_participant_identifier_one_total_grade_and_feedback(tmp_path: Path) -> None:
    roster = Roster(("2001", "2002"), {})
    grades = [made_up("Alice Martin_2001", (1, 0))]
    path = write_gradebook(grades, KEYS, tmp_path / "m.csv", roster=roster, rule="moodle", format="moodle")
    rows = [dict(zip(table(path)[0], row, strict=True)) for row in table(path)[1:]]
    assert [(r["Identifier"], r["Grade"], r["Maximum Grade"]) for r in rows] == [
        ("Participant 2001", "1", "2"),
        ("Participant 2002", "0", "2"),
    ]
    assert [r["Full name"] for r in rows] == ["Alice Martin", "2002"]  # from the download, else the id
    assert rows[0]["Feedback comments"] == "ch1.q1 1/1; ch1.q2 0/1"
    assert rows[1]["Feedback comments"].startswith("no submission.")
    assert table(path)[0][:5] == ["Identifier", "Full name", "Email address", "Status", "Grade"]


def test_an_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="format must be one of csv, canvas, moodle, got 'xls'"):
        write_gradebook([made_up("a", (1, 1))], KEYS, tmp_path / "g.csv", format="xls")


# ------------------------------------------------------------------------------------------------
# The cache


def test_a_grade_survives_the_cache_and_comes_back_marked_cached(tmp_path: Path) -> None:
    cache = GradeCache(tmp_path, version="v1")
    original = made_up("alice", (1, 0))
    key = cache.key("0" * 64, KEYS, None, Limits())
    assert cache.store(key, original, "0" * 64)
    back = cache.load(key, Path("elsewhere.ipynb"), "alice")
    assert back.cached and back.path == Path("elsewhere.ipynb")
    assert (back.exercises, back.notes, back.sha256) == (original.exercises, original.notes, original.sha256)


def test_the_cache_key_changes_with_what_the_grade_depends_on() -> None:
    cache = GradeCache("unused", version="v1")
    base = cache.key("a" * 64, KEYS, {"ch1.q1": {"seeds": [1]}}, Limits())
    assert base == cache.key("a" * 64, KEYS, {"ch1.q1": {"seeds": [1]}, "ch2.q1": {"seeds": [9]}}, Limits())
    for changed in (
        cache.key("b" * 64, KEYS, {"ch1.q1": {"seeds": [1]}}, Limits()),  # the submission
        cache.key("a" * 64, KEYS, {"ch1.q1": {"seeds": [2]}}, Limits()),  # its hidden inputs
        cache.key("a" * 64, KEYS[:1], {"ch1.q1": {"seeds": [1]}}, Limits()),  # the exercises graded
        cache.key("a" * 64, KEYS, {"ch1.q1": {"seeds": [1]}}, Limits(cell_timeout=5)),  # the limits
        GradeCache("unused", version="v2").key("a" * 64, KEYS, {"ch1.q1": {"seeds": [1]}}, Limits()),
    ):
        assert changed != base


def test_the_grader_version_covers_the_checks_source() -> None:
    assert len(grader_version()) == 64 and grader_version() == grader_version()


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the course's two packages, {package: its folder}, to edit."""
    folder = tmp_path_factory.mktemp("packages")
    ignore = shutil.ignore_patterns("__pycache__")
    roots = package_roots()
    return {name: Path(shutil.copytree(root, folder / name, ignore=ignore)) for name, root in roots.items()}


def test_the_grader_version_ignores_modules_grading_never_imports(package_copy: dict[str, Path]) -> None:
    before = grader_version(package_copy)
    assert before == grader_version()  # the copy's sources are the course's own
    for unrelated in (
        package_copy["attn_course"] / "view" / "widgets.py",
        package_copy["attn_course_tools"] / "publish" / "book.py",
        package_copy["attn_course_tools"] / "robustness.py",
    ):
        unrelated.write_text(unrelated.read_text() + "\n# edited\n")
    assert grader_version(package_copy) == before


def test_the_grader_version_changes_with_a_check_or_the_sandbox(package_copy: dict[str, Path]) -> None:
    before = grader_version(package_copy)
    for judged in (
        package_copy["attn_course_exercises"] / "ch1_masking.py",
        package_copy["attn_course"] / "attention" / "masking.py",  # a reference the checks call
        package_copy["attn_course_tools"] / "grading" / "sandbox_child.py",
    ):
        original = judged.read_text()
        judged.write_text(original + "\n# edited\n")
        assert grader_version(package_copy) != before, judged
        judged.write_text(original)
    assert grader_version(package_copy) == before


def test_grades_the_grader_could_not_finish_are_not_remembered(tmp_path: Path) -> None:
    cache = GradeCache(tmp_path, version="v1")
    failed = made_up("alice", (0, 0))
    failed.exercises["ch1.q1"].message = "Not graded: the grading sandbox failed (...)."
    assert not cache.store("k1", failed, "0" * 64)
    assert not cache.store("k2", made_up("bob", (1, 1)), "f" * 64)  # the file changed while graded
    assert list(tmp_path.iterdir()) == []


def test_an_unreadable_cache_entry_is_graded_again(tmp_path: Path) -> None:
    (tmp_path / "k.json").write_text("{not json")
    assert GradeCache(tmp_path, version="v1").load("k", Path("a.ipynb"), "a") is None


def test_a_second_run_grades_only_new_or_changed_files_and_force_grades_all(tmp_path: Path) -> None:
    files = {s: tmp_path / f"{s}.ipynb" for s in ("alice", "bob", "carol")}
    for student, path in files.items():
        path.write_text(json.dumps({"cells": [], "student": student}))

    def tasks() -> list[Task]:  # each run reads the files afresh, as `grade` does
        return [Task(read_submission(p, Limits()), s, (), None, Limits()) for s, p in files.items()]

    cache = GradeCache(tmp_path / "cache", version="v1")
    first = grade_many(tasks(), cache=cache)
    assert [r.cached for r in first] == [False, False, False]
    files["bob"].write_text(json.dumps({"cells": [], "student": "bob", "resubmitted": True}))
    second = grade_many(tasks(), cache=cache)
    assert [r.cached for r in second] == [True, False, True]
    assert [r.student for r in second] == [r.student for r in first]
    assert second[1].sha256 == hashlib.sha256(files["bob"].read_bytes()).hexdigest()
    assert [r.cached for r in grade_many(tasks(), cache=cache, force=True)] == [False, False, False]


# ------------------------------------------------------------------------------------------------
# For real: every layout, two jobs


@pytest.fixture(scope="module")
def one_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, tuple[int, str]]]:
    """The hostile batch graded with one job, flat files named after the students: the reference."""
    folder = tmp_path_factory.mktemp("one_job")
    results = grade(hostile_batch(folder), out=folder / "g.csv", limits=LIMITS, jobs=1)
    return {r.student: {k: (g.points, g.message) for k, g in r.exercises.items()} for r in results}


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["folder", "nbgrader", "canvas", "moodle"])
def test_every_hostile_submission_costs_the_same_in_every_layout_with_two_jobs(
    tmp_path: Path, layout: str, one_job: dict
) -> None:
    (tmp_path / "flat").mkdir()
    flat = hostile_batch(tmp_path / "flat")
    root = tmp_path / "class"
    placed = [place(root, layout, i, p.stem, p) for i, p in enumerate(flat)]
    before = {p: p.read_bytes() for p in placed}
    results = grade([root], out=tmp_path / "g.csv", limits=LIMITS, jobs=2)
    found = {
        student_of(layout, r.student): {k: (g.points, g.message) for k, g in r.exercises.items()}
        for r in results
    }
    assert found == one_job  # hang, crash, exit, kill, tampering, output, memory, JSON, delegation
    assert {p: p.read_bytes() for p in placed} == before
    assert [points for points, _ in found["alice"].values()] == [1, 1, 1] and found["hang"]["ch1.q1"][0] == 0


@pytest.mark.slow
def test_the_command_line_grades_a_class_against_its_roster_and_remembers_grades(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "class"
    solved, unsolved = ROOT / "solutions" / EX01, ROOT / "exercises" / EX01
    for i, (student, source) in enumerate([("alice", solved), ("bob", unsolved), ("zed", solved)]):
        place(root, "folder", i, student, source)
    roster = roster_file(tmp_path, "student,name\nalice,Alice Martin\nbob,Bob Stone\ncarol,Carol Wu\n")
    out = tmp_path / "grades.csv"
    command = ["grade", str(root), "--out", str(out), "--roster", str(roster), "--jobs", "2"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "no submission (1): carol" in printed and "not on the roster (1): zed" in printed
    assert "graded 3 submissions and reused 0 remembered grades" in printed
    first = out.read_bytes()
    assert [row[-2:] for row in table(out)[1:]] == [["3", ""], ["0", ""], ["0", "no submission"],
                                                    ["3", "not on the roster"]]  # fmt: skip
    feedback = {p.name: p.read_bytes() for p in (tmp_path / "grades_feedback").iterdir()}
    assert sorted(feedback) == ["alice.md", "bob.md", "zed.md"]

    assert main(command) == 0  # again: nothing changed, so nothing is graded
    assert "graded 0 submissions and reused 3 remembered grades" in capsys.readouterr().out
    assert out.read_bytes() == first
    assert {p.name: p.read_bytes() for p in (tmp_path / "grades_feedback").iterdir()} == feedback

    resubmitted = json.loads(solved.read_text())
    resubmitted["metadata"]["resubmitted"] = True  # bob's own solution: not byte for byte alice's
    (root / "bob" / EX01).write_text(json.dumps(resubmitted))
    assert main([*command, "--format", "canvas"]) == 0
    assert "graded 1 submissions and reused 2 remembered grades" in capsys.readouterr().out
    assert table(out)[1][0] == "Points Possible" and table(out)[3][:2] == ["Bob Stone", ""]
    assert main([*command, "--force"]) == 0
    assert "graded 3 submissions and reused 0 remembered grades" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "expected", "status"),
    [
        (["--jobs", "0"], "--jobs must be at least 1, got 0", 2),
        (["--roster", "missing.csv"], "roster missing.csv cannot be read", 1),  # a file given, refused
        (["--canvas-column", "A1"], "--canvas-column is for --format canvas", 2),
        (["--only", "a", "--replace"], "give one", 2),
    ],
)
def test_bad_class_options_stop_the_command_before_grading(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    expected: str,
    status: int,
    monkeypatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["grade", str(ROOT / "solutions" / EX01), "--out", "g.csv", *extra]) == status
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


def test_gradebook_rows_follow_the_roster_then_the_alphabet() -> None:
    rows = gradebook_rows([made_up("b", (1, 1)), made_up("a", (1, 1))], Roster(("c", "b"), {}))
    notes = [(r.student, r.note) for r in rows]
    assert notes == [("c", "no submission"), ("b", ""), ("a", "not on the roster")]


def test_jobs_below_one_are_refused_by_the_library_too() -> None:
    with pytest.raises(ValueError, match="jobs must be an int >= 1, got 0"):
        grade_many([], jobs=0)


def test_students_whose_ids_give_one_file_name_get_a_feedback_file_each() -> None:
    from attn_course_tools.grading.gradebook import feedback_names

    names = feedback_names(["a b", "a_b", "A_B", "carol"])
    assert names["carol"] == "carol"
    clashing = [names[s] for s in ("a b", "a_b", "A_B")]
    assert len(set(clashing)) == 3 and all(n.lower().startswith("a_b-") for n in clashing)


@pytest.mark.slow
def test_a_script_without_a_main_guard_is_still_graded_in_one_process_with_a_warning(tmp_path: Path) -> None:
    # Spawned workers re-import the main module: unguarded, each starts grading again and dies. The grade
    # must not be lost (nor marked "Not graded"): the batch falls back to this process and says why.
    import subprocess
    import sys

    for name in ("a", "b"):
        nb = json.loads((ROOT / "solutions" / EX01).read_text())
        nb["metadata"]["copy"] = name
        (tmp_path / f"{name}.ipynb").write_text(json.dumps(nb))
    (tmp_path / "script.py").write_text(
        "from attn_course_tools.grading import grade\n"
        "print([r.total for r in grade(['a.ipynb', 'b.ipynb'], out='g.csv', jobs=2)])\n"
    )
    done = subprocess.run(
        [sys.executable, "script.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[3, 3]"
    assert "needs `if __name__ == '__main__':`" in done.stderr
