"""Grade a class, one pipeline: collect the files, read each once, identify whose it is, judge it in a
sandbox, write the gradebook, the feedback and the reports.

Each stage is a module of its own (`reading`, `identity`, `batch` with `judging` and `sandbox`, then
`gradebook`, `report` and `similarity`); this one only hands each the values the one before produced. A
submission file is read once, by `reading.read_submission`; every later stage works on that `Submission`.

Before anything is graded, the run is checked against the gradebook already at `out`: a run that would
drop rows it has stops (unless told to replace it). A run for some students only (`only`) must fit its
columns: their rows are replaced and every other line kept byte for byte, only their feedback is written,
and the class and similarity reports are left as they are (they need the whole class). The course's rules,
overrides and submission times are applied when the gradebook is written, so they hold for cached grades
too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attn_course_exercises as checks
from attn_course_tools.grading import jail
from attn_course_tools.grading.batch import Task, grade_many
from attn_course_tools.grading.cache import GradeCache
from attn_course_tools.grading.gradebook import (
    FORMATS,
    Existing,
    GradebookError,
    Marking,
    check_not_shrinking,
    check_updatable,
    feedback_names,
    gradebook_lock,
    make_sheet,
    notes_path,
    planned_rows,
    read_gradebook,
    scored,
    update_gradebook,
    write_feedback,
    write_notes,
    write_table,
)
from attn_course_tools.grading.identity import ALIASES, Identities, IdentityError, identify
from attn_course_tools.grading.integrity import write_integrity_report
from attn_course_tools.grading.judging import check_hidden
from attn_course_tools.grading.reading import (
    Submission,
    chapters_of,
    collect,
    metadata_student,
    read_submission,
)
from attn_course_tools.grading.records import Limits, Row, Score, Sheet, SubmissionGrade
from attn_course_tools.grading.report import write_class_report
from attn_course_tools.grading.roster import Roster
from attn_course_tools.grading.rules import canvas_late
from attn_course_tools.grading.similarity import answer_sources, similar_pairs, write_similarity_report


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


@dataclasses.dataclass
class Plan:
    """A run, settled before anything is graded: the files read, whose they are (the files to grade), the
    exercise columns and each file's exercises, the gradebook's shape, its rows, and the gradebook to
    update (a run for some students only)."""

    submissions: dict[Path, Submission]
    identities: Identities
    keys: list[str]
    per_path: dict[Path, list[str]]
    sheet: Sheet
    rows: set[str]
    existing: Existing | None


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
    marking: Marking | None = None,
    only: Sequence[str] = (),
    replace: bool = False,
    canvas_column: str | None = None,
) -> list[SubmissionGrade]:
    """Grade every submission, write the gradebook to `out`, its notes for the instructor beside it
    (`gradebook.notes_path`), one Markdown file per student, and next to `out` the class report
    (`attn_course_tools.grading.report`), the similarity report (`attn_course_tools.grading.similarity`)
    and the integrity report (`attn_course_tools.grading.integrity`).

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

    marking: rules, overrides, times (`gradebook.Marking`). replace: write over a gradebook at `out` that
    this run would shrink (else GradebookError before grading). only: the student (or roster) ids to regrade
    alone, from `paths`, in the gradebook at `out` (see the module). canvas_column: Canvas's total column.
    """
    _check_arguments(hidden, format, only, replace)
    marking, out = marking or Marking(), Path(out)
    with gradebook_lock(out):
        plan = _plan(
            paths, out, chapters, limits, id_from, roster, format, marking, only, replace, canvas_column
        )
        if announce is not None:
            announce(plan.identities)
        students = plan.identities.students
        tasks = [
            Task(plan.submissions[p], s, tuple(plan.per_path[p]), hidden, limits) for p, s in students.items()
        ]
        cached = None if cache is None else GradeCache(cache)
        results = grade_many(tasks, jobs=jobs, cache=cached, force=force, progress=progress)
        _note_run(results, plan.identities, roster, marking)
        _write(results, plan, out, feedback, roster, format, marking, bool(only))
    return results


def _check_arguments(
    hidden: Mapping[str, Any] | None, format: str, only: Sequence[str], replace: bool
) -> None:
    """ValueError naming the argument of `grade` that is wrong; JailError where the jail is required
    (ATTN_COURSE_JAIL=require) and does not work: both before anything is graded."""
    jail.status()
    if hidden is not None:
        check_hidden(hidden)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if only and replace:
        raise ValueError("only and replace cannot be combined: only updates some rows, replace writes all")


def _plan(
    paths: Iterable[str | Path],
    out: Path,
    chapters: Sequence[int] | None,
    limits: Limits,
    id_from: str,
    roster: Roster | None,
    format: str,
    marking: Marking,
    only: Sequence[str],
    replace: bool,
    canvas_column: str | None,
) -> Plan:
    """Everything settled before grading; IdentityError, GradebookError or ValueError if the run cannot go
    ahead as asked."""
    submissions = read_all(collect(paths), limits)
    identities = _identities(submissions, id_from, only, roster)
    row_of = roster.assign(identities.students.values()) if roster is not None else {}
    existing = None if replace else read_gradebook(out)
    if only and existing is None:
        raise GradebookError(
            f"only some students were asked for (--only), but {out} holds no gradebook to update; nothing "
            "was graded. Grade the class first."
        )
    graded = [submissions[p] for p in identities.students]
    keys, per_path = exercise_columns(graded, chapters)
    if only and existing is not None and existing.columns:
        keys = existing.columns
        per_path = {p: [k for k in found if k in keys] for p, found in per_path.items()}
    sheet = make_sheet(keys, roster, marking, format, canvas_column)
    rows = planned_rows(identities.students.values(), roster, identities.rule)
    wanted = {row_of.get(s, s) for s in identities.students.values()}
    if only:
        rows = [row for row in rows if row.student in wanted]
    _check_marking(marking, rows, identities, keys, roster, existing)
    if existing is not None and only:
        check_updatable(existing, format, FORMATS[format]([], sheet).head)
    elif existing is not None:
        check_not_shrinking(existing, rows)
    kept = existing if only else None
    return Plan(submissions, identities, keys, per_path, sheet, {r.student for r in rows}, kept)


def _identities(
    submissions: Mapping[Path, Submission], id_from: str, only: Sequence[str], roster: Roster | None
) -> Identities:
    """Each file's student (see `students`); with `only`, the files of those students alone. Where the
    layout `auto` picks gives none of them their files, but every file's folder is named after one (their
    own folder given alone), the folder rule is taken. GradebookError names a student of `only` whom no
    file belongs to."""
    identities = students(submissions, id_from)
    if not only:
        return identities

    def chosen(student: str) -> str | None:
        """The id of `only` that names `student` (itself, its roster id, or its LMS id's name), or None."""
        names = {student, roster.match(student) if roster else None}
        name, _, number = student.rpartition("_")
        if identities.rule in ("canvas", "moodle") and number.isdigit():
            names.add(name)
        return next((o for o in only if o in names), None)

    if id_from == "auto" and not any(map(chosen, identities.students.values())):
        try:
            by_folder = students(submissions, "folder")
        except IdentityError:
            by_folder = None
        if by_folder is not None and all(chosen(s) for s in by_folder.students.values()):
            identities = dataclasses.replace(by_folder, auto=True)
    found = {p: s for p, s in identities.students.items() if chosen(s)}
    missing = [o for o in only if o not in {chosen(s) for s in found.values()}]
    if missing:
        everyone = sorted(set(identities.students.values()))
        raise GradebookError(
            f"no file among those given belongs to {', '.join(missing)} (student ids "
            f"{identities.summary()[0].split(': ', 1)[1]}: {', '.join(everyone[:10]) or 'none'}"
            f"{' ...' if len(everyone) > 10 else ''}); nothing was graded. Give their files (or the class's "
            "folder), or choose the rule with --id-from."
        )
    superseded = {old: new for old, new in identities.superseded.items() if new in found}
    return dataclasses.replace(identities, students=found, superseded=superseded)


def _check_marking(
    marking: Marking,
    rows: Sequence[Row],
    identities: Identities,
    keys: Sequence[str],
    roster: Roster | None,
    existing: Existing | None,
) -> None:
    """GradebookError if an override names a student or an exercise this gradebook does not have, or (with
    a roster) an extension names a student not on it: a typo would otherwise change nobody's grade."""
    known = {r.student for r in rows} | set(identities.students.values()) | set(roster.ids if roster else ())
    everyone = known | set(existing.keys if existing is not None else ())
    problems = []
    for o in marking.overrides:
        if o.student not in everyone:
            problems.append(f"the override of {o.exercise} for {o.student!r}: no such student")
        elif o.student in known and o.exercise not in keys:
            problems.append(
                f"the override of {o.exercise} for {o.student!r}: the gradebook has no column for it"
            )
    if roster is not None and marking.rules is not None:
        problems += [
            f"the extension of {s!r}: not on the roster" for s in marking.rules.extensions if s not in known
        ]
    if problems:
        listed = "\n".join(f"  {p}" for p in problems)
        raise GradebookError(
            f"the course's files name what this gradebook does not have; nothing was graded:\n{listed}\n"
            "Correct the overrides or rules file (a student is named by the id the gradebook gives, or the "
            "roster's)."
        )


def _note_run(
    results: Sequence[SubmissionGrade], identities: Identities, roster: Roster | None, marking: Marking
) -> None:
    """Add this run's notes to its grades: the files a resubmission superseded (file names for the student,
    paths for the instructor), and a Canvas file marked late whose time nobody gave."""
    for result in results:
        for old, new in identities.superseded.items():
            if new == result.path:
                result.notes.append(
                    f"`{old.name}` was also received; this later submission was graded instead."
                )
                result.instructor_notes.append(f"superseded {old} (graded {new}, the later)")
        ids = [roster.match(result.student) or result.student, result.student] if roster else [result.student]
        due = marking.rules is not None and marking.rules.due is not None
        if (
            identities.rule == "canvas"
            and due
            and canvas_late(result.path)
            and marking.submitted(ids) is None
        ):
            result.instructor_notes.append(
                f"Canvas marks {result.path.name} late, but its download gives no time: no late penalty was "
                "applied; give its time with --times to apply one"
            )


def _feedback_names(rows: Sequence[Row], folder: Path, only: bool) -> dict[str, str]:
    """Each row's feedback file name (`feedback_names`); regrading some students only, a name whose file
    already holds another student's feedback gets the digest that a run of the whole class gives it."""
    names = feedback_names(row.student for row in rows)
    if only:
        for student, name in names.items():
            existing = folder / f"{name}.md"
            if existing.exists() and not existing.read_text(encoding="utf-8").startswith(
                f"# Feedback for {student}\n"
            ):
                names[student] = feedback_names([student, f"{student}\0"])[student]
    return names


def _jail_note() -> str:
    """How the submissions ran, for the integrity report's first line."""
    status = jail.status()
    return "every submission ran in bubblewrap's jail." if status.jailed else str(status.notice)


def _write(
    results: Sequence[SubmissionGrade],
    plan: Plan,
    out: Path,
    feedback: str | Path | None,
    roster: Roster | None,
    format: str,
    marking: Marking,
    only: bool,
) -> None:
    """The pipeline's last stage: the gradebook and its notes, each student's feedback, the class and
    similarity reports (not when only some students were regraded: those need the whole class)."""
    lines = scored(results, plan.keys, roster, plan.identities.rule, marking)
    if only:
        lines = [(row, marks) for row, marks in lines if row.student in plan.rows]
    table = FORMATS[format](lines, plan.sheet)
    if plan.existing is not None:
        update_gradebook(plan.existing, table)
    else:
        write_table(out, table)
    write_notes(lines, notes_path(out), existing=only)
    folder = Path(feedback) if feedback is not None else out.with_name(f"{out.stem}_feedback")
    sent: list[tuple[Row, Score]] = [(row, marks) for row, marks in lines if row.submissions]
    names = _feedback_names([row for row, _ in sent], folder, only)
    for row, marks in sent:
        write_feedback(row.student, row.submissions, plan.keys, folder, names[row.student], marks=marks)
    if only:
        return
    best_grades = {
        row.student: {k: m.grade for k, m in marks.marks.items() if m.grade is not None}
        for row, marks in sent
    }
    paths = write_class_report(best_grades, plan.keys, [r.seconds for r in results], out)
    notebooks = {path: s.notebook for path, s in plan.submissions.items()}
    graded = {row.student: row.submissions for row, _ in sent}
    pairs = similar_pairs(answer_sources(graded, notebooks))
    write_similarity_report(pairs, len(sent), paths.similarity)
    write_integrity_report(graded, pairs, paths.integrity, jail_note=_jail_note())
