"""The grader: a batch of honest and hostile submissions (hangs, crashes, a process that kills itself or its
parent, tampering with the checks and torch, huge output, a memory hog, malformed JSON) is graded in one
run; each hostile act costs only the exercise it touches, the gradebook and feedback say why, and no
submission file is modified. Hidden inputs and the command line are tested on a second, small batch.

Tests that start real sandboxes (a fork server, real timeouts and sleeps) are marked `slow`; the reading of
notebooks, the step record and the limits are tested without one."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from grading_cases import LIMITS, Q1, Q2, SOLVED, defined, digest, hostile_batch, notebook, write

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import (
    Limits,
    Sandboxes,
    Step,
    SubmissionGrade,
    check_hidden,
    grade,
    grade_submission,
)
from attn_course_tools.grading.reading import exercise_cells
from attn_course_tools.grading.sandbox import overrun, read_journal


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("submissions")
    paths = hostile_batch(folder)
    before = {p: digest(p) for p in paths}
    out = folder / "out" / "grades.csv"
    # Count the sandbox runs each submission needed: one, unless a step killed its sandbox.
    sandbox_runs: dict[str, int] = {}
    calls = 0
    run = Sandboxes.run

    def counted_run(self: Sandboxes, *args: object, **kwargs: object) -> tuple[int | None, str | None]:
        nonlocal calls
        calls += 1
        return run(self, *args, **kwargs)

    def progress(result: SubmissionGrade) -> None:
        nonlocal calls
        sandbox_runs[result.student], calls = calls, 0

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Sandboxes, "run", counted_run)
        results = grade(paths, out=out, limits=LIMITS, progress=progress)
    with out.open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    return {
        "paths": paths,
        "before": before,
        "results": {r.student: r for r in results},
        "rows": rows,
        "out": out,
        "feedback": folder / "out" / "grades_feedback",
        "sandbox_runs": sandbox_runs,
    }


def grades(batch: dict, student: str) -> tuple[int, int, int]:
    row = batch["rows"][student]
    return int(row["ch1.q1"]), int(row["ch1.q2"]), int(row["ch1.q3"])


def message(batch: dict, student: str, key: str) -> str:
    return batch["results"][student].exercises[key].message


@pytest.mark.slow
def test_gradebook_has_one_row_per_student_one_column_per_exercise_and_a_total(batch: dict) -> None:
    with batch["out"].open() as f:
        header = next(csv.reader(f))
    assert header == ["student", "ch1.q1", "ch1.q2", "ch1.q3", "total"]
    assert set(batch["rows"]) == {p.stem for p in batch["paths"]}
    for row in batch["rows"].values():
        assert int(row["total"]) == int(row["ch1.q1"]) + int(row["ch1.q2"]) + int(row["ch1.q3"])


@pytest.mark.slow
def test_a_correct_notebook_gets_every_point_and_an_untouched_one_none(batch: dict) -> None:
    assert grades(batch, "alice") == (1, 1, 1)
    assert grades(batch, "bob") == (0, 0, 0)
    assert "write `sequence_mask`" in message(batch, "bob", "ch1.q1")
    assert batch["results"]["bob"].exercises["ch1.q1"].status == checks.NOT_ATTEMPTED


@pytest.mark.slow
def test_a_hanging_cell_costs_only_its_exercise(batch: dict) -> None:
    assert grades(batch, "hang") == (0, 1, 1)
    assert "ran longer than 3 s" in message(batch, "hang", "ch1.q1")


@pytest.mark.slow
def test_a_hang_that_ignores_the_alarm_is_killed_and_the_rest_still_graded(batch: dict) -> None:
    assert grades(batch, "deaf_hang") == (0, 1, 1)
    assert "did not stop when interrupted; it was killed" in message(batch, "deaf_hang", "ch1.q1")


@pytest.mark.slow
def test_a_cell_that_ends_the_process_costs_only_its_exercise(batch: dict) -> None:
    assert grades(batch, "exits") == (0, 1, 1)
    assert "exit status 3" in message(batch, "exits", "ch1.q1")


@pytest.mark.slow
def test_a_function_that_kills_its_own_process_costs_only_its_exercise(batch: dict) -> None:
    assert grades(batch, "sigkill") == (1, 0, 1)
    assert "SIGKILL" in message(batch, "sigkill", "ch1.q2")


@pytest.mark.slow
def test_killing_the_fork_server_costs_nothing_and_the_next_submission_is_still_graded(batch: dict) -> None:
    assert grades(batch, "kill_parent") == (1, 1, 1)
    assert grades(batch, "alice") == (1, 1, 1)  # graded after it, by a restarted fork server


@pytest.mark.slow
def test_an_exception_in_a_cell_is_reported_with_the_learners_line(batch: dict) -> None:
    assert grades(batch, "crash") == (0, 1, 1)
    grade_q1 = batch["results"]["crash"].exercises["ch1.q1"]
    assert "`sequence_mask` is not defined" in grade_q1.message
    assert any("ZeroDivisionError" in note and "`1 / 0`" in note for note in grade_q1.notes)


@pytest.mark.slow
def test_tampering_with_the_checks_and_torch_does_not_change_the_grade(batch: dict) -> None:
    assert grades(batch, "tamper") == (0, 1, 1)
    assert "mask is inverted" in message(batch, "tamper", "ch1.q1")


@pytest.mark.slow
def test_printing_past_the_output_limit_costs_only_its_exercise(batch: dict) -> None:
    assert grades(batch, "loud") == (0, 1, 1)
    assert "printed more than 256 KB" in message(batch, "loud", "ch1.q1")


@pytest.mark.slow
def test_a_memory_hog_hits_the_cap_and_loses_only_its_exercise(batch: dict) -> None:
    assert grades(batch, "hog") == (0, 1, 1)
    assert "ran out of memory (the limit is 5000 MB)" in message(batch, "hog", "ch1.q1")


@pytest.mark.slow
def test_importing_the_packages_reference_scores_zero_with_the_reason(batch: dict) -> None:
    assert grades(batch, "copies") == (1, 0, 1)
    own = "is the package's own `attn_course.attention.masking.masked_softmax`"
    assert own in message(batch, "copies", "ch1.q2")


@pytest.mark.slow
def test_wrapping_the_packages_reference_is_refused_while_grading(batch: dict) -> None:
    assert grades(batch, "wraps") == (0, 1, 1)
    own = "calls the course's own `attn_course.attention.masking.sequence_mask`"
    assert own in message(batch, "wraps", "ch1.q1")


@pytest.mark.slow
def test_cells_without_markers_are_found_by_the_names_they_define(batch: dict) -> None:
    assert grades(batch, "unmarked") == (1, 1, 1)
    assert any("no cell starts with `# EXERCISE ch1.q1`" in n for n in batch["results"]["unmarked"].notes)


@pytest.mark.slow
def test_malformed_json_scores_zero_with_the_reason(batch: dict) -> None:
    assert grades(batch, "malformed") == (0, 0, 0)
    assert "not valid notebook JSON" in message(batch, "malformed", "ch1.q1")


@pytest.mark.slow
def test_feedback_file_per_student_gives_each_exercises_message(batch: dict) -> None:
    files = {p.stem for p in batch["feedback"].glob("*.md")}
    assert files == set(batch["rows"])
    text = (batch["feedback"] / "hang.md").read_text()
    assert "| ch1.q1 `sequence_mask` | 0/1 | incorrect |" in text
    assert "| ch1.q2 `masked_softmax` | 1/1 | correct |" in text
    assert "| ch1.q3 `nadaraya_watson` | 1/1 | correct |" in text
    assert "ran longer than 3 s" in text and "**Total: 2 of 3**" in text


@pytest.mark.slow
def test_submission_files_are_never_modified(batch: dict) -> None:
    assert {p: digest(p) for p in batch["paths"]} == batch["before"]


@pytest.mark.slow
def test_honest_submissions_in_a_hostile_batch_get_full_marks_from_one_sandbox_run_each(batch: dict) -> None:
    # Not timed: honest work is graded in full by a single sandbox run, with no restart and no note, ...
    for student in ("alice", "unmarked"):
        assert grades(batch, student) == (1, 1, 1)
        assert batch["sandbox_runs"][student] == 1
    assert batch["results"]["alice"].notes == []
    # ... because each hostile step is cut off by its own limit: the alarm, the output cap and the memory
    # cap stop it inside the same run; a hang deaf to the alarm is killed and costs one restart.
    assert {s: batch["sandbox_runs"][s] for s in ("hang", "loud", "hog", "deaf_hang")} == {
        "hang": 1,
        "loud": 1,
        "hog": 1,
        "deaf_hang": 2,
    }
    for result in batch["results"].values():  # and none of them ran into the total time limit
        assert not any("total time limit" in g.message for g in result.exercises.values())


# ------------------------------------------------------------------------------------------------
# Hidden inputs, the command line, student ids


@pytest.mark.slow
def test_hidden_inputs_can_fail_an_answer_the_shipped_cases_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    narrow = Q2.solution_code.replace(
        "    work = scores.float()",
        "    if scores.shape[-1] > 6:\n        return scores\n    work = scores.float()",
    )
    assert checks.EXERCISES["ch1.q2"].evaluate(defined(narrow)).passed
    submission = write(tmp_path, "dana", notebook({"ch1.q2": narrow}))
    before = digest(submission)
    hidden = tmp_path / "hidden.json"
    hidden.write_text(json.dumps({"ch1.q2": {"cases": [{"num_keys": 9, "seed": 5}], "seeds": [77]}}))
    out = tmp_path / "grades.csv"
    status = main(
        ["grade", str(submission), "--out", str(out), "--hidden", str(hidden), "--cell-timeout", "3"]
    )
    assert status == 0
    rows = list(csv.DictReader(out.open()))
    assert rows == [{"student": "dana", "ch1.q1": "1", "ch1.q2": "0", "ch1.q3": "1", "total": "2"}]
    feedback = (tmp_path / "grades_feedback" / "dana.md").read_text()
    assert "Failing case: hidden case 11 of 11" in feedback and "(2, 3, 9)" not in feedback
    assert "graded 1 submissions" in capsys.readouterr().out
    assert digest(submission) == before


def test_malformed_hidden_inputs_stop_the_command_before_grading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hidden = tmp_path / "hidden.json"
    hidden.write_text(json.dumps({"ch1.q9": {"seeds": [1]}}))
    status = main(["grade", str(SOLVED), "--out", str(tmp_path / "g.csv"), "--hidden", str(hidden)])
    assert status == 2
    assert "ch1.q9" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


@pytest.fixture(scope="module")
def sandboxes() -> Sandboxes:
    with Sandboxes() as running:
        yield running


@pytest.mark.slow
def test_the_total_time_limit_stops_a_slow_submission(tmp_path: Path, sandboxes: Sandboxes) -> None:
    slow = notebook({"ch1.q1": "import time\ntime.sleep(6)\n" + Q1.solution_code})
    limits = Limits(cell_timeout=8.0, total_timeout=2.0, memory_mb=5000)
    result = grade_submission(write(tmp_path, "slow", slow), limits=limits, sandboxes=sandboxes)
    assert [g.points for g in result.exercises.values()] == [0, 0, 0]
    for grade_ in result.exercises.values():
        assert "total time limit (2 s) ran out" in grade_.message


@pytest.mark.slow
def test_a_submission_graded_alone_gets_the_same_grade_as_in_a_batch(
    tmp_path: Path, sandboxes: Sandboxes
) -> None:
    result = grade_submission(write(tmp_path, "frank", notebook()), limits=LIMITS, sandboxes=sandboxes)
    assert result.student == "frank" and result.total == 3 and result.notes == []


def test_a_notebook_without_exercises_is_noted_not_crashed(tmp_path: Path) -> None:
    path = write(
        tmp_path, "essay", {"cells": [{"cell_type": "markdown", "source": "no code"}], "metadata": {}}
    )
    result = grade_submission(path, limits=LIMITS)
    assert result.exercises == {}
    assert "No exercise of the course was found" in result.notes[0]


@pytest.mark.slow
def test_student_ids_can_come_from_metadata_and_merge_rows(tmp_path: Path) -> None:
    first = notebook({"ch1.q2": Q2.stub_code})
    first["metadata"]["attn_course"] = {"student": "erin"}
    second = notebook({"ch1.q1": Q1.stub_code})
    second["metadata"]["attn_course"] = {"student": "erin"}
    paths = [write(tmp_path, "upload1", first), write(tmp_path, "upload2", second)]
    out = tmp_path / "grades.csv"
    grade(paths, out=out, limits=LIMITS, id_from="metadata")
    assert list(csv.DictReader(out.open())) == [
        {"student": "erin", "ch1.q1": "1", "ch1.q2": "1", "ch1.q3": "1", "total": "3"}
    ]


def test_hidden_template_lists_every_exercise_and_is_accepted_by_the_grader(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["hidden-template"]) == 0
    template = json.loads(capsys.readouterr().out)
    assert list(template) == list(checks.EXERCISES)
    assert check_hidden(template) == template


# ------------------------------------------------------------------------------------------------
# The pieces, without a sandbox


def test_a_step_survives_the_trip_through_json_and_forged_steps_are_dropped() -> None:
    for step in (Step.preamble(), Step.cell(3), Step.call("ch1.q2")):
        assert Step.from_json(json.loads(json.dumps(step.to_json()))) == step
    assert Step.cell(3).to_json() == {"kind": "cell", "index": 3}
    for forged in ("cell:3", {"kind": "cell", "index": True}, {"kind": "cell", "index": -1}, {"kind": "x"}):
        assert Step.from_json(forged) is None


def test_the_journal_reader_skips_lines_the_learner_could_have_forged(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    lines = [
        json.dumps({"step": Step.cell(2).to_json(), "event": "start"}),
        "not json",
        json.dumps({"step": "cell:2", "event": "end"}),
        json.dumps([1, 2]),
        json.dumps({"step": Step.cell(2).to_json(), "event": "end", "status": "ok"}),
    ]
    journal.write_text("\n".join(lines))
    assert [(step, event["event"]) for step, event in read_journal(journal)] == [
        (Step.cell(2), "start"),
        (Step.cell(2), "end"),
    ]


def test_exercise_cells_are_found_by_marker_metadata_or_definition() -> None:
    nb = notebook()
    cells, notes = exercise_cells(nb, ["ch1.q1", "ch1.q2"])
    assert [c.exercise for c in cells] == ["ch1.q1", "ch1.q2"] and notes == []
    unmarked = notebook(strip_markers=True)
    unmarked["cells"][cells[1].index]["metadata"] = {"attn_course": {"exercise": "ch1.q2"}}
    cells, notes = exercise_cells(unmarked, ["ch1.q1", "ch1.q2"])
    assert [c.exercise for c in cells] == ["ch1.q1", "ch1.q2"]
    assert len(notes) == 1 and "graded the definition of `sequence_mask`" in notes[0]


@pytest.mark.parametrize(
    "field, value",
    [
        ("cell_timeout", 0),
        ("total_timeout", -1.0),
        ("memory_mb", 0),
        ("max_output_kb", 1.5),
        ("max_file_mb", True),
    ],
)
def test_limits_refuse_values_that_are_not_positive(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{field} must be"):
        Limits(**{field: value})


def test_the_watcher_kills_a_step_past_its_grace_and_a_submission_past_its_deadline() -> None:
    limits = Limits(cell_timeout=3.0, total_timeout=40.0)  # grace: 2 s past the step's own timer
    started, deadline = 100.0, 140.0  # a fake clock: the step started at 100 s, the submission at 100 s
    assert overrun(started, now=104.9, deadline=deadline, limits=limits) is None
    assert overrun(started, now=105.1, deadline=deadline, limits=limits) == "step"
    assert overrun(None, now=139.9, deadline=deadline, limits=limits) is None
    assert overrun(None, now=140.1, deadline=deadline, limits=limits) == "total"
    assert overrun(139.0, now=140.1, deadline=deadline, limits=limits) == "total"
