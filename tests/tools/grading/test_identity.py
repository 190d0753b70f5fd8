"""Student ids from a batch's layout: a folder per student, nbgrader, Canvas and Moodle downloads, file names,
metadata; `auto` picks the layout, resubmissions are told apart, and two students are never merged into one
row -- a collision stops the run before grading. The rules are tested on lists of paths (no sandbox); one slow
test grades the layout the issue reported (one folder per student, the assignment's own file name)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from grading_cases import EX01, ROOT

from attn_course_tools.cli import main
from attn_course_tools.grading import Identities, IdentityError, collect, identify
from attn_course_tools.grading.identity import detect

SOLVED = ROOT / "solutions" / "ex01_masked_softmax.ipynb"
UNSOLVED = ROOT / "exercises" / "ex01_masked_softmax.ipynb"


def paths(*names: str) -> list[Path]:
    return [Path(name) for name in names]


def ids(identities: Identities) -> list[str]:
    return list(identities.students.values())


def test_a_folder_per_student_gives_each_file_its_folders_name() -> None:
    batch = paths(*(f"submissions/{s}/{EX01}" for s in ("alice", "bob", "carol")))
    found = identify(batch)
    assert (found.rule, found.auto) == ("folder", True)
    assert ids(found) == ["alice", "bob", "carol"]
    assert found.summary() == ["student ids: from the folder of each submission (auto)"]
    assert ids(identify(batch, "folder")) == ["alice", "bob", "carol"]


def test_flat_files_named_after_students_give_each_file_its_name() -> None:
    batch = paths("submissions/alice.ipynb", "submissions/bob.ipynb")
    found = identify(batch)
    assert (found.rule, ids(found)) == ("file", ["alice", "bob"])
    assert found.summary() == ["student ids: from the file name of each submission (auto)"]
    assert identify(batch, "stem").rule == "file"  # the older name of the rule is still accepted


def test_nbgrader_gives_the_folder_under_submitted() -> None:
    batch = paths(
        "course/submitted/alice/ps1/ex01.ipynb",
        "course/submitted/alice/ps1/ex02.ipynb",  # one student's two notebooks: one row, no collision
        "course/submitted/bob/ps1/ex01.ipynb",
    )
    found = identify(batch)
    assert (found.rule, ids(found)) == ("nbgrader", ["alice", "alice", "bob"])
    assert found.superseded == {}


def test_nbgrader_refuses_files_outside_its_layout_and_lists_them() -> None:
    with pytest.raises(IdentityError, match=r"not in that layout[\s\S]*extra/carol\.ipynb"):
        identify(paths("course/submitted/alice/ps1/ex01.ipynb", "extra/carol.ipynb"))


def test_canvas_gives_name_and_user_id_and_grades_the_latest_resubmission() -> None:
    batch = paths(
        "downloads/doejane_1234_50001_ex01_masked_softmax.ipynb",
        "downloads/doejane_LATE_1234_50077_ex01_masked_softmax-1.ipynb",  # resubmitted late, renamed
        "downloads/doejane_1234_50002_ex02_attention_scoring.ipynb",  # her other notebook: kept
        "downloads/doejohn_5678_50003_ex01_masked_softmax.ipynb",  # same surname, another student
    )
    found = identify(batch)
    assert found.rule == "canvas"
    assert found.students == {
        batch[1]: "doejane_1234",
        batch[2]: "doejane_1234",
        batch[3]: "doejohn_5678",
    }
    assert found.superseded == {batch[0]: batch[1]}
    summary = found.summary()
    assert "the highest submission id (the latest) is graded" in summary[0]
    assert summary[1] == f"superseded: {batch[0]} (not graded: {batch[1]} is later)"


def test_canvas_files_with_the_same_submission_id_are_a_collision() -> None:
    batch = paths("a/doejane_1234_50001_ex01.ipynb", "b/doejane_1234_50001_ex01.ipynb")
    with pytest.raises(IdentityError, match="same notebook in more than one file"):
        identify(batch)


def test_moodle_gives_full_name_and_id_from_its_folders_or_file_names() -> None:
    batch = paths(
        "dl/Ann Lee_4101_assignsubmission_file_/ex01_masked_softmax.ipynb",
        "dl/Ann Lee_4102_assignsubmission_file_/ex01_masked_softmax.ipynb",  # two students named Ann Lee
        "dl/Bo Wu_4103_assignsubmission_file_ex01_masked_softmax.ipynb",
    )
    found = identify(batch)
    assert (found.rule, ids(found)) == ("moodle", ["Ann Lee_4101", "Ann Lee_4102", "Bo Wu_4103"])


def test_metadata_names_the_student_and_the_layout_speaks_for_notebooks_without_it() -> None:
    batch = paths(f"submissions/alice/{EX01}", f"submissions/bob/{EX01}")
    found = identify(batch, "metadata", metadata={batch[0]: "s1001", batch[1]: None})
    assert ids(found) == ["s1001", "bob"]
    assert found.summary() == [
        "student ids: from metadata.attn_course.student, else from the folder of each submission (chosen)"
    ]
    with pytest.raises(ValueError, match="needs each notebook's metadata"):
        identify(batch, "metadata")


def test_a_copied_notebook_that_names_the_same_student_is_a_collision() -> None:
    batch = paths(f"submissions/alice/{EX01}", f"submissions/bob/{EX01}")
    with pytest.raises(IdentityError) as caught:
        identify(batch, "metadata", metadata={batch[0]: "alice", batch[1]: "alice"})
    assert str(batch[0]) in str(caught.value) and str(batch[1]) in str(caught.value)


def test_the_issues_layout_graded_by_file_name_stops_with_every_colliding_file() -> None:
    batch = paths(*(f"submissions/{s}/{EX01}" for s in ("alice", "bob", "carol")))
    with pytest.raises(IdentityError) as caught:
        identify(batch, "file")
    message = str(caught.value)
    assert "student 'ex01_masked_softmax'" in message and "nothing was graded" in message
    assert all(str(p) in message for p in batch)


def test_one_students_different_notebooks_are_not_a_collision() -> None:
    found = identify(paths("alice/ex01.ipynb", "alice/ex02.ipynb", "bob/ex01.ipynb"))
    assert ids(found) == ["alice", "alice", "bob"] and found.superseded == {}


@pytest.mark.parametrize(
    "batch, rule",
    [
        (["submitted/a/ps1/x.ipynb", "b.ipynb"], "nbgrader"),  # any nbgrader file
        (["Ann Lee_1_assignsubmission_file_/x.ipynb", "b.ipynb"], "moodle"),  # any Moodle file
        (["doejane_1_2_x.ipynb", "doejohn_3_4_x.ipynb"], "canvas"),  # every file Canvas's
        (["doejane_1_2_x.ipynb", "alice.ipynb"], "file"),  # not every file Canvas's
        (["a/x.ipynb", "b/x.ipynb"], "folder"),  # one name in two folders
        (["a/alice.ipynb", "b/bob.ipynb"], "file"),
        (["x.ipynb"], "file"),
    ],
)
def test_auto_picks_the_rule_from_the_whole_batch(batch: list[str], rule: str) -> None:
    assert detect(paths(*batch)) == rule


def test_an_unknown_rule_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="folder, file, nbgrader, canvas, moodle, metadata"):
        identify(paths("a.ipynb"), "email")


def test_collect_searches_folders_skips_checkpoints_and_lists_a_file_once(tmp_path: Path) -> None:
    for name in ("alice", "bob", "bob/.ipynb_checkpoints"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / EX01).write_text("{}")
    found = collect([tmp_path, tmp_path / "alice" / EX01])
    assert found == [tmp_path / "alice" / EX01, tmp_path / "bob" / EX01]


def test_the_command_stops_before_grading_when_two_students_collide(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = []
    for student in ("alice", "bob"):
        (tmp_path / student).mkdir()
        batch.append(tmp_path / student / EX01)
        shutil.copy(SOLVED, batch[-1])
    out = tmp_path / "grades.csv"
    status = main(["grade", *map(str, batch), "--out", str(out), "--id-from", "file"])
    assert status == 2
    err = capsys.readouterr().err
    assert "nothing was graded" in err and all(str(p) in err for p in batch)
    assert "Traceback" not in err and not out.exists()


@pytest.mark.slow
def test_one_folder_per_student_with_the_assignments_file_name_gives_a_row_per_student(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for student, source in (("alice", SOLVED), ("bob", UNSOLVED), ("carol", SOLVED)):
        (tmp_path / "submissions" / student).mkdir(parents=True)
        shutil.copy(source, tmp_path / "submissions" / student / EX01)
    out = tmp_path / "grades.csv"
    status = main(
        ["grade", *map(str, sorted((tmp_path / "submissions").glob(f"*/{EX01}"))), "--out", str(out)]
    )
    assert status == 0
    assert "student ids: from the folder of each submission (auto)" in capsys.readouterr().out
    rows = {row["student"]: row["total"] for row in csv.DictReader(out.open())}
    assert rows == {"alice": "3", "bob": "0", "carol": "3"}
    assert {p.stem for p in (tmp_path / "grades_feedback").glob("*.md")} == {"alice", "bob", "carol"}
