"""Grade many submissions: several at once, each still in its own limited sandbox, remembering earlier grades.

With ``jobs > 1`` the submissions are shared among worker processes (spawned, so each starts clean), each
with its own fork server of sandboxes; the grades are the same as with one job, in the same order, because
every submission is graded alone from its own content, with cases built from fixed seeds. A worker is the
grader's side only: it builds cases and judges, and never runs a line of learner code. If a worker dies
anyway (something killed it), the submissions it had not finished are graded again one by one, each in a
fresh worker, so only a submission that kills its worker every time loses its points, with the reason; if
no worker can start at all (an unguarded script, see `_workers_start`), they are graded in this process.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import attn_course_exercises as checks
from attn_course.validation import check_positive_int
from attn_course_tools.grading.cache import GradeCache
from attn_course_tools.grading.judging import judge_submission
from attn_course_tools.grading.reading import Submission
from attn_course_tools.grading.records import ExerciseGrade, Limits, SubmissionGrade
from attn_course_tools.grading.sandbox import Sandboxes


def default_jobs() -> int:
    """The cores this process may run on: `attn-course grade`'s default for --jobs."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Task:
    """One submission to grade: the submission as read, its student, the exercises, the hidden inputs and
    the limits."""

    submission: Submission
    student: str
    keys: tuple[str, ...]
    hidden: Mapping[str, Any] | None
    limits: Limits

    @property
    def path(self) -> Path:
        return self.submission.path


def _grade(task: Task, sandboxes: Sandboxes) -> SubmissionGrade:
    return judge_submission(
        task.submission, task.student, task.keys, hidden=task.hidden, limits=task.limits, sandboxes=sandboxes
    )


#: A worker process's fork server, started by `_start_worker` and closed when the worker exits.
_worker_sandboxes: Sandboxes | None = None


def _start_worker() -> None:
    global _worker_sandboxes
    torch.set_num_threads(1)  # the checks' tensors are tiny: more threads only add overhead
    _worker_sandboxes = Sandboxes()
    multiprocessing.util.Finalize(_worker_sandboxes, _worker_sandboxes.close, exitpriority=10)


def _grade_in_worker(task: Task) -> SubmissionGrade:
    return _grade(task, _worker_sandboxes)


def _pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker
    )


def _lost(task: Task) -> SubmissionGrade:
    """The grade of a submission whose grading worker died every time it was graded."""
    why = "Not graded: the grader's worker process was killed while grading this submission, twice."
    grades = {
        k: ExerciseGrade(k, checks.EXERCISES[k].name, 0, checks.FAILED, why) for k in task.keys
    }
    return SubmissionGrade(task.path, task.student, task.submission.sha256, grades, [why], 0.0)


def _graded(tasks: dict[int, Task], jobs: int) -> Iterator[tuple[int, SubmissionGrade]]:
    """(index, grade) of every task, in the order they finish."""
    if jobs == 1 or len(tasks) <= 1:
        with Sandboxes() as sandboxes:
            for i, task in tasks.items():
                yield i, _grade(task, sandboxes)
        return
    left = dict(tasks)
    try:
        with _pool(min(jobs, len(tasks))) as pool:
            futures = {pool.submit(_grade_in_worker, task): i for i, task in tasks.items()}
            for future in as_completed(futures):
                i = futures[future]
                result = future.result()
                del left[i]
                yield i, result
        return
    except BrokenProcessPool:
        pass
    if not _workers_start():
        warnings.warn(
            "attn_course_tools.grading: worker processes cannot start here (a script that grades with "
            "jobs > 1 needs `if __name__ == '__main__':` around its code); grading the rest in this process",
            RuntimeWarning,
            stacklevel=3,
        )
        yield from _graded(left, 1)
        return
    for i, task in left.items():  # a worker died: the unfinished ones again, each in a worker of its own
        try:
            with _pool(1) as pool:
                result = pool.submit(_grade_in_worker, task).result()
        except BrokenProcessPool:
            result = _lost(task)
        yield i, result


def _ready() -> bool:
    return True


def _workers_start() -> bool:
    """Whether a fresh worker process starts and answers (it does not where the main module, re-imported
    by each spawned worker, starts grading again unguarded)."""
    try:
        with _pool(1) as pool:
            return pool.submit(_ready).result()
    except BrokenProcessPool:
        return False


def grade_many(
    tasks: Sequence[Task],
    *,
    jobs: int = 1,
    cache: GradeCache | None = None,
    force: bool = False,
    progress: Callable[[SubmissionGrade], Any] | None = None,
) -> list[SubmissionGrade]:
    """Grade every task with `jobs` processes at once; the grades in the order of `tasks`.

    cache: remembered grades; a task whose entry exists is not graded again (unless `force`), and every
    new grade is stored. progress(grade) is called in this process as each one is known (cached first).
    """
    check_positive_int("jobs", jobs)
    results: dict[int, SubmissionGrade] = {}
    todo: dict[int, Task] = {}
    entries: dict[int, tuple[str, str]] = {}
    for i, task in enumerate(tasks):
        digest = task.submission.sha256 if task.submission.read else ""
        if cache is not None and digest:
            entries[i] = (cache.key(digest, task.keys, task.hidden, task.limits), digest)
            found = None if force else cache.load(entries[i][0], task.path, task.student, digest)
            if found is not None:
                results[i] = found
                if progress is not None:
                    progress(found)
                continue
        todo[i] = task
    for i, result in _graded(todo, jobs):
        if i in entries:
            cache.store(entries[i][0], result, entries[i][1])
        results[i] = result
        if progress is not None:
            progress(result)
    return [results[i] for i in range(len(tasks))]
