"""Grade one submission: build each exercise's cases, run them in a sandbox, judge what came back.

The cases are built and the attempts judged here, with the grader's own `attn_course_exercises`; only the
sandbox (`attn_course_tools.grading.sandbox`) runs the learner's code, and what it writes back is read with
``torch.load(weights_only=True)`` and treated as untrusted.

What a student reads gives nothing of the grader away: an instructor's hidden case is named by its number
("hidden case 2 of 3"), never by its inputs or anything computed from them (`judge_cases`), and no message
names a folder of the grading machine (`without_local_paths`).
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import re
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

import attn_course_exercises as checks
from attn_course_tools.grading.closure import package_roots
from attn_course_tools.grading.identity import identify
from attn_course_tools.grading.reading import (
    ExerciseCell,
    Submission,
    chapters_of,
    exercise_cells,
    read_submission,
)
from attn_course_tools.grading.records import ExerciseGrade, Limits, Step, SubmissionGrade
from attn_course_tools.grading.sandbox import JobResult, Sandboxes, output_path, run_job

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
    return without_local_paths(_judge_read(submission, student, keys, hidden, limits, sandboxes))


def _judge_read(
    submission: Submission,
    student: str,
    keys: Sequence[str],
    hidden: Mapping[str, Any] | None,
    limits: Limits,
    sandboxes: Sandboxes,
) -> SubmissionGrade:
    """`judge_submission`'s grade, before the grader's folders are taken out of its messages."""
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
    cases = {k: graded_cases(checks.EXERCISES[k], None if hidden is None else hidden.get(k)) for k in keys}
    inputs = {key: [c.inputs for c in key_cases] for key, key_cases in cases.items()}
    with sandboxes.job_folder(inputs) as job_dir:
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
        fished = _zero(
            key,
            f"0 points: {attempts['fished'][:300]}; the course's own answers are off while grading, and "
            f"the exercise is to write `{name}` yourself.",
            notes,
        )
        fished.integrity = f"{key} `{name}`: {attempts['fished'][:300]}"
        return fished
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        return _zero(key, "0 points: the results of the checks could not be read back.", notes)
    try:
        result = judge_cases(exercise, cases, attempts)
    except Exception as exc:  # malformed attempt data can only come from tampering in the sandbox
        return _zero(key, f"0 points: the results of the checks are malformed ({type(exc).__name__}).", notes)
    mistake = None if result.passed else named_mistake(exercise, result.message)
    return ExerciseGrade(key, name, int(result.passed), result.status, result.message, notes, mistake)


def graded_cases(exercise: checks.Exercise, hidden: Mapping[str, Any] | None) -> list[checks.Case]:
    """The cases grading judges `exercise` on: its shipped cases as they are, then the instructor's hidden
    ones (`hidden`: {"seeds": [...], "cases": [...]}, see `check_hidden`), each labelled only by its number,
    "hidden case 2 of 3"."""
    cases = exercise.cases(hidden)
    shipped, extra = cases[: len(exercise.specs)], cases[len(exercise.specs) :]
    return shipped + [
        dataclasses.replace(case, label=f"hidden case {i} of {len(extra)}") for i, case in enumerate(extra, 1)
    ]


#: The end of a failing verdict that shows a hidden case (labelled by `graded_cases`).
_HIDDEN_SHOWN = re.compile(r"\nFailing case: (hidden case \d+ of \d+)\. \(\d+ of \d+ cases pass\.\)$")

#: The count that ends a failing verdict.
_CASES_PASS = re.compile(r"\(\d+ of \d+ cases pass\.\)$")


def judge_cases(
    exercise: checks.Exercise, cases: Sequence[checks.Case], attempts: Sequence[Mapping[str, Any]]
) -> checks.CheckResult:
    """The checks' verdict on the attempts at `cases` (from `graded_cases`), told without a hidden case's
    inputs. Where the verdict shows a hidden case, a failing shipped case is shown instead if there is one;
    else the message keeps only what the hidden inputs do not shape (a known mistake's hint, the type of the
    error raised, a fixed sentence) and names the case by its number."""
    result = exercise.judge(cases, attempts)
    shown = _HIDDEN_SHOWN.search(result.message)
    if shown is None:
        return result
    count = f"({result.cases_passed} of {result.cases_total} cases pass.)"
    shipped = len(exercise.specs)
    own = exercise.judge(cases[:shipped], attempts[:shipped])
    if own.status != checks.PASSED:
        return dataclasses.replace(result, message=_CASES_PASS.sub(count, own.message))
    problem = _hidden_problem(exercise, result.message[: shown.start()])
    message = (
        f"{problem}\nFailing case: {shown[1]}, one of the instructor's hidden cases, whose inputs are not "
        f"shown; every shipped case passes, so think of inputs they do not cover. {count}"
    )
    return dataclasses.replace(result, message=message)


#: Sentences of the checks that a case's inputs do not shape, kept from the sentence's start to its end.
_FIXED = (
    "The result is right, but your code changed its input",
    "The outputs are right, but the gradient does not flow back",
    "The attempt returned nothing that can be judged",
)


def _hidden_problem(exercise: checks.Exercise, problem: str) -> str:
    """What may be said of a failure on a hidden case (`problem`, the checks' words): the hint of the known
    mistake or known error it opens with, the type of the error raised, a fixed sentence, or only that the
    result differs. An error is named only by a built-in type: a class of the learner's could carry a name
    made of the inputs."""
    found = re.search(r"Your code raised (\w+)", problem)
    raised = found and (found[1] if _is_builtin_error(found[1]) else "an exception")
    for hint in [m.hint for m in exercise.mistakes]:
        if problem.startswith(hint):
            return hint
    for error in exercise.error_hints:
        if problem.startswith(error.hint):
            return error.hint + (f"\n(Your code raised {raised} on it.)" if raised else "")
    if raised:
        return f"Your code raised {raised} on it."
    gradient = problem.find("the outputs are right, but the gradient")
    if gradient >= 0:
        problem = "T" + problem[gradient + 1 :]
    return next(
        (problem.split("\n")[0] for fixed in _FIXED if problem.startswith(fixed)),
        "Your result differs from the reference on it.",
    )


def _is_builtin_error(name: str) -> bool:
    """Whether `name` is one of Python's own exception types (ValueError, IndexError, ...)."""
    found = getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def grader_folders() -> list[str]:
    """The grading machine's folders a message could name, longest first: where the course's packages,
    Python and its libraries live, the temporary folder (where the sandboxes work), home and the working
    folder."""
    found = {str(root.parent) for root in package_roots().values()}
    found |= set(sysconfig.get_paths().values()) | {sys.prefix, sys.base_prefix, sys.exec_prefix}
    found |= {tempfile.gettempdir(), os.path.expanduser("~"), os.getcwd()}
    found |= {os.path.realpath(folder) for folder in found}
    return sorted({f.rstrip(os.sep) for f in found} - {""}, key=len, reverse=True)


def scrub_paths(text: str, folders: Sequence[str]) -> str:
    """`text` with each of `folders` (longest first, see `grader_folders`) written as "…", where it stands
    as a whole folder: "…/attn_course/attention/__init__.py"."""
    for folder in folders:
        text = re.sub(r"(?<![\w.-])" + re.escape(folder) + r"(?![\w.-])", "…", text)
    return text


def without_local_paths(grade: SubmissionGrade) -> SubmissionGrade:
    """`grade` with no folder of the grading machine (`grader_folders`) in what the student reads: each
    exercise's message and notes, and the submission's notes."""
    folders = grader_folders()
    exercises = {
        key: dataclasses.replace(
            found,
            message=scrub_paths(found.message, folders),
            notes=[scrub_paths(note, folders) for note in found.notes],
        )
        for key, found in grade.exercises.items()
    }
    notes = [scrub_paths(note, folders) for note in grade.notes]
    return dataclasses.replace(grade, exercises=exercises, notes=notes)


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
