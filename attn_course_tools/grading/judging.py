"""Grade one submission: build each exercise's cases, run them in a sandbox, judge what came back.

The cases are built and the attempts judged here, with the grader's own `attn_course.checks`; only the
sandbox (`attn_course_tools.grading.sandbox`) runs the learner's code, and what it writes back is read with
``torch.load(weights_only=True)`` and treated as untrusted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from attn_course import checks
from attn_course_tools.grading.identity import identify
from attn_course_tools.grading.reading import (
    ExerciseCell,
    Submission,
    chapters_of,
    exercise_cells,
    read_submission,
)
from attn_course_tools.grading.records import ExerciseGrade, Limits, Step, SubmissionGrade
from attn_course_tools.grading.sandbox import JobResult, Sandboxes, job_folder, output_path, run_job

_MEMORY_ERROR = re.compile(r"MemoryError|can't allocate memory|out of memory|Cannot allocate memory")


def _preamble(keys: Iterable[str]) -> str:
    chapters = sorted({int(k[2 : k.index(".")]) for k in keys})
    lines: list[str] = []
    for chapter in chapters:
        for line in checks.PREAMBLES[chapter].splitlines():
            if line.strip() and line not in lines:
                lines.append(line)
    return "\n".join(lines) + "\n"


def check_hidden(hidden: Any) -> dict[str, Any]:
    """Validate an instructor's hidden inputs: {exercise key: {"seeds": [...], "cases": [...]}}."""
    if not isinstance(hidden, dict):
        raise ValueError(
            f"hidden inputs must be a JSON object keyed by exercise, got {type(hidden).__name__}"
        )
    for key, extra in hidden.items():
        if key not in checks.EXERCISES:
            raise ValueError(
                f"hidden inputs name the exercise {key!r}, expected one of {list(checks.EXERCISES)}"
            )
        checks.EXERCISES[key].cases(extra)  # raises ValueError naming the exercise if malformed
    return hidden


def grade_submission(
    path: str | Path,
    *,
    keys: Sequence[str] | None = None,
    hidden: Mapping[str, Any] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
    student: str | None = None,
    sandboxes: Sandboxes | None = None,
) -> SubmissionGrade:
    """Grade one notebook file with the master checks; never raises for anything the submission does.

    Reads the file once (`read_submission`), then `judge_submission`. keys: the exercises to grade
    (default: every exercise of the chapters the notebook answers). hidden: extra cases per exercise (see
    `check_hidden`). student: the student id (default: what `identify` gives this file alone, e.g. its name
    without .ipynb; a batch is identified as a whole). sandboxes: a running `Sandboxes` to reuse across
    submissions (default: one just for this call).
    """
    path = Path(path)
    student = student if student is not None else identify([path]).students[path]
    submission = read_submission(path, limits)
    if keys is None:
        keys = [e.key for c in chapters_of(submission.notebook, path) for e in checks.chapter(c)]
    return judge_submission(submission, student, keys, hidden=hidden, limits=limits, sandboxes=sandboxes)


def judge_submission(
    submission: Submission,
    student: str,
    keys: Sequence[str],
    *,
    hidden: Mapping[str, Any] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
    sandboxes: Sandboxes | None = None,
) -> SubmissionGrade:
    """Grade a submission already read on the exercises `keys`: run its exercise cells in a sandbox and
    judge what comes back. Never raises for anything the submission does; hidden, limits, sandboxes: see
    `grade_submission`."""
    if sandboxes is None:
        with Sandboxes() as own:
            return judge_submission(submission, student, keys, hidden=hidden, limits=limits, sandboxes=own)
    started = time.monotonic()
    path, digest, keys = submission.path, submission.sha256, list(keys)
    if submission.problem is not None:
        why = f"Not graded: {submission.problem}."
        grades = {k: _zero(k, why) for k in keys}
        return SubmissionGrade(path, student, digest, grades, [why], time.monotonic() - started)
    if not keys:
        notes = ["No exercise of the course was found in this notebook (no `# EXERCISE` cell)."]
        return SubmissionGrade(path, student, digest, {}, notes, time.monotonic() - started)
    cells, notes = exercise_cells(submission.notebook, keys)
    grades = _grade_cells(sandboxes, cells, keys, hidden, limits)
    return SubmissionGrade(path, student, digest, grades, notes, time.monotonic() - started)


def _zero(key: str, message: str, notes: Sequence[str] = ()) -> ExerciseGrade:
    return ExerciseGrade(key, checks.EXERCISES[key].name, 0, checks.FAILED, message, list(notes))


def _grade_cells(
    sandboxes: Sandboxes,
    cells: list[ExerciseCell],
    keys: list[str],
    hidden: Mapping[str, Any] | None,
    limits: Limits,
) -> dict[str, ExerciseGrade]:
    cases = {k: checks.EXERCISES[k].cases(None if hidden is None else hidden.get(k)) for k in keys}
    with job_folder({key: [c.inputs for c in key_cases] for key, key_cases in cases.items()}) as job_dir:
        run = run_job(sandboxes, job_dir, _preamble(keys), cells, keys, limits)
        return {
            key: _judge(key, cases[key], [c for c in cells if c.exercise == key], run, job_dir, limits)
            for key in keys
        }


def _judge(
    key: str,
    cases: list[checks.Case],
    cells: list[ExerciseCell],
    run: JobResult,
    job_dir: Path,
    limits: Limits,
) -> ExerciseGrade:
    """The grade of one exercise: its cells' fate in the sandbox first, then the attempts of its calls."""
    exercise = checks.EXERCISES[key]
    if run.broken is not None:
        return _zero(key, f"Not graded: {run.broken}.")
    if not cells:
        return _zero(
            key,
            f"No answer found: no cell starts with `{exercise.marker}` and no cell defines "
            f"`{exercise.name}`.",
        )
    notes: list[str] = []
    for cell in cells:
        failed = _judge_cell(cell, run, limits, notes)
        if failed is not None:
            return _zero(key, failed)
    call = Step.call(key)
    if call in run.fatal:
        return _zero(key, f"0 points: calling `{exercise.name}` {run.fatal[call]}.", notes)
    return _judge_attempts(exercise, cases, output_path(job_dir, key), limits, notes)


def _judge_cell(cell: ExerciseCell, run: JobResult, limits: Limits, notes: list[str]) -> str | None:
    """Why the exercise scores 0 because of how its cell ran, or None (adding to `notes` what to look at)."""
    step, where = Step.cell(cell.index), f"its cell (cell {cell.index + 1})"
    if step in run.fatal:
        return f"0 points: running {where} {run.fatal[step]}."
    event = run.ended.get(step, {})
    status = event.get("status")
    if status == "timeout":
        return f"0 points: {where} ran longer than {limits.cell_timeout:g} s and was stopped."
    if status == "output":
        return f"0 points: {where} printed more than {limits.max_output_kb} KB."
    if status == "error":
        error = event.get("error") or {}
        if _MEMORY_ERROR.search(f"{error.get('type')}: {error.get('message')}"):
            return f"0 points: {where} ran out of memory (the limit is {limits.memory_mb} MB)."
        at = f" at {error['where']}" if error.get("where") else ""
        notes.append(f"cell {cell.index + 1} raised {error.get('type')}: {error.get('message')}{at}")
    if re.search(r"\bimportlib\b|\breload\b", cell.source):
        notes.append(
            f"cell {cell.index + 1} uses importlib/reload: check by hand that it does not bring back "
            "a package function the exercise asks the learner to write"
        )
    return None


def _judge_attempts(
    exercise: checks.Exercise, cases: list[checks.Case], output: Path, limits: Limits, notes: list[str]
) -> ExerciseGrade:
    """Judge the attempts the sandbox saved in `output` with the grader's own checks."""
    key, name = exercise.key, exercise.name
    if not output.exists():
        return _zero(
            key,
            f"Not graded: the submission's total time limit ({limits.total_timeout:g} s) ran out "
            "before this exercise was checked.",
            notes,
        )
    try:
        attempts = torch.load(output, weights_only=True)
    except Exception as exc:  # forged or truncated results: whatever it is, it is not a valid attempt
        return _zero(
            key, f"0 points: the results of the checks could not be read back ({type(exc).__name__}).", notes
        )
    if isinstance(attempts, dict) and attempts.get("missing"):
        extra = f" ({notes[0]})" if notes else ""
        return _zero(key, f"`{name}` is not defined after running its cell{extra}.", notes)
    if isinstance(attempts, dict) and isinstance(attempts.get("copied"), str):
        return _zero(
            key,
            f"0 points: `{name}` is the package's own `{attempts['copied']}`; the "
            f"exercise is to write it yourself.",
            notes,
        )
    if isinstance(attempts, dict) and isinstance(attempts.get("fished"), str):
        return _zero(
            key,
            f"0 points: {attempts['fished'][:300]}; the course's own answers are off while grading, and "
            f"the exercise is to write `{name}` yourself.",
            notes,
        )
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        return _zero(key, "0 points: the results of the checks could not be read back.", notes)
    try:
        result = exercise.judge(cases, attempts)
    except Exception as exc:  # malformed attempt data can only come from tampering in the sandbox
        return _zero(key, f"0 points: the results of the checks are malformed ({type(exc).__name__}).", notes)
    mistake = None if result.passed else named_mistake(exercise, result.message)
    return ExerciseGrade(key, name, int(result.passed), result.status, result.message, notes, mistake)


def _sentence(hint: str) -> str:
    """The first sentence of a hint (a period after "e.g" or "i.e" does not end it)."""
    return re.split(r"(?<!e\.g)(?<!i\.e)[.!?](?:\s|$)", hint.strip(), maxsplit=1)[0].strip()


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:79].rstrip() + "…"


def mistake_names(exercise: checks.Exercise) -> dict[str, str]:
    """{hint: name} of an exercise's known mistakes and known errors, each named by its hint's first clause
    ("The softmax runs over the wrong axis"), or its first sentence where two share the clause ("Off by one:
    you masked the last real position too"), numbered where two would still share a name."""
    hints = list(dict.fromkeys([m.hint for m in exercise.mistakes] + [e.hint for e in exercise.error_hints]))
    clauses = [_sentence(h).split(": ")[0] for h in hints]
    firsts = [
        _short(clause if clauses.count(clause) == 1 else _sentence(hint))
        for hint, clause in zip(hints, clauses, strict=True)
    ]
    return {
        hint: f"{first} ({firsts[: i + 1].count(first)})" if firsts.count(first) > 1 else first
        for i, (hint, first) in enumerate(zip(hints, firsts, strict=True))
    }


def named_mistake(exercise: checks.Exercise, message: str) -> str | None:
    """The name of the known mistake or error a failing verdict's `message` opens with, else None."""
    found = [hint for hint in mistake_names(exercise) if message.startswith(hint)]
    return mistake_names(exercise)[max(found, key=len)] if found else None
