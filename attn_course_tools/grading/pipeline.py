"""Grade a class, one pipeline: collect the files, read each once, identify whose it is, judge it in a
sandbox, write the gradebook, the feedback and the reports.

Each stage is a module of its own (`reading`, `identity`, `batch` with `judging` and `sandbox`, then
`gradebook`, `report` and `similarity`); this one only hands each the values the one before produced. A
submission file is read once, by `reading.read_submission`; every later stage works on that `Submission`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attn_course import checks
from attn_course_tools.grading.batch import Task, grade_many
from attn_course_tools.grading.cache import GradeCache
from attn_course_tools.grading.gradebook import (
    FORMATS,
    feedback_names,
    gradebook_rows,
    write_feedback,
    write_gradebook,
)
from attn_course_tools.grading.identity import ALIASES, Identities, identify
from attn_course_tools.grading.judging import check_hidden
from attn_course_tools.grading.reading import (
    Submission,
    chapters_of,
    collect,
    metadata_student,
    read_submission,
)
from attn_course_tools.grading.records import Limits, SubmissionGrade, best
from attn_course_tools.grading.report import write_class_report
from attn_course_tools.grading.roster import Roster
from attn_course_tools.grading.similarity import answer_sources, write_similarity_report


def read_all(paths: Iterable[Path], limits: Limits) -> dict[Path, Submission]:
    """Each file read once: {path: its `Submission`}, in the order of `paths`."""
    return {path: read_submission(path, limits) for path in paths}


def students(submissions: Mapping[Path, Submission], id_from: str) -> Identities:
    """Who each file belongs to, by the rule `id_from` (from the notebooks' metadata if it asks)."""
    metadata = None
    if ALIASES.get(id_from, id_from) == "metadata":
        metadata = {path: metadata_student(s.notebook) for path, s in submissions.items()}
    return identify(list(submissions), id_from, metadata)


def exercise_columns(
    submissions: Sequence[Submission], chapters: Sequence[int] | None
) -> tuple[list[str], dict[Path, list[str]]]:
    """The gradebook's columns and the exercises each submission is graded on: those of `chapters`, else
    each notebook's own chapters, else (no markers, unreadable) those of the batch."""
    if chapters is not None:
        keys = [e.key for c in chapters for e in checks.chapter(c)]
        return keys, {s.path: keys for s in submissions}
    answered = {s.path: chapters_of(s.notebook, s.path) for s in submissions}
    batch = sorted({c for found in answered.values() for c in found})
    per_path = {
        path: [e.key for c in (found or batch) for e in checks.chapter(c)] for path, found in answered.items()
    }
    keys = [k for k in checks.EXERCISES if any(k in v for v in per_path.values())]
    return keys, per_path


def grade(
    paths: Iterable[str | Path],
    *,
    out: str | Path,
    feedback: str | Path | None = None,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
    id_from: str = "auto",
    roster: Roster | None = None,
    format: str = "csv",
    jobs: int = 1,
    cache: str | Path | None = None,
    force: bool = False,
    announce: Callable[[Identities], Any] | None = None,
    progress: Callable[[SubmissionGrade], Any] | None = None,
) -> list[SubmissionGrade]:
    """Grade every submission, write the gradebook to `out`, one Markdown file per student, and next to
    `out` the class report (`attn_course_tools.grading.report`) and the similarity report
    (`attn_course_tools.grading.similarity`).

    feedback: the folder for the feedback files (default: next to `out`, named after it, e.g.
    grades_feedback/). chapters: the exercises to grade (default: each notebook is graded on the chapters
    its exercise cells belong to, or, if it shows none -- no markers, unreadable -- on the batch's).
    id_from: the rule for student ids, one of `identity.RULES` (see `attn_course_tools.grading.identity`);
    files that one student resubmitted are graded once, the latest; files the rule cannot tell apart raise
    `IdentityError` before anything is graded. roster: the class (`Roster`): each student on it gets a row,
    and two students matching one roster id raise `IdentityError` before grading. format: a key of FORMATS.
    jobs: submissions graded at once (`batch.grade_many`). cache: a folder of remembered grades
    (`attn_course_tools.grading.cache`), None for none; force: regrade even what the cache remembers.
    announce(identities) is called once, before grading, and progress(submission_grade) after each
    submission (the command line prints them).
    """
    if hidden is not None:
        check_hidden(hidden)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    submissions = read_all(collect(paths), limits)
    identities = students(submissions, id_from)
    if roster is not None:
        roster.assign(identities.students.values())  # IdentityError now, before any grading
    if announce is not None:
        announce(identities)
    graded = [submissions[p] for p in identities.students]
    keys, per_path = exercise_columns(graded, chapters)
    tasks = [Task(s, identities.students[s.path], tuple(per_path[s.path]), hidden, limits) for s in graded]
    cached = None if cache is None else GradeCache(cache)
    results = grade_many(tasks, jobs=jobs, cache=cached, force=force, progress=progress)
    for result in results:
        result.notes += [
            f"`{old}` was also received; this later submission was graded instead."
            for old, new in identities.superseded.items()
            if new == result.path
        ]
    _write(results, submissions, keys, Path(out), feedback, roster, identities.rule, format)
    return results


def _write(
    results: Sequence[SubmissionGrade],
    submissions: Mapping[Path, Submission],
    keys: Sequence[str],
    out: Path,
    feedback: str | Path | None,
    roster: Roster | None,
    rule: str,
    format: str,
) -> None:
    """The pipeline's last stage: the gradebook, each student's feedback, the class and similarity reports."""
    write_gradebook(results, keys, out, roster=roster, rule=rule, format=format)
    folder = Path(feedback) if feedback is not None else out.with_name(f"{out.stem}_feedback")
    rows = [row for row in gradebook_rows(results, roster, rule) if row.submissions]
    names = feedback_names(row.student for row in rows)
    for row in rows:
        write_feedback(row.student, row.submissions, keys, folder, names[row.student])
    best_grades = {row.student: {k: best(row.submissions, k) for k in keys} for row in rows}
    best_grades = {s: {k: g for k, g in found.items() if g is not None} for s, found in best_grades.items()}
    paths = write_class_report(best_grades, keys, [r.seconds for r in results], out)
    notebooks = {path: s.notebook for path, s in submissions.items()}
    answers = answer_sources({row.student: row.submissions for row in rows}, notebooks)
    write_similarity_report(answers, len(rows), paths.similarity)
