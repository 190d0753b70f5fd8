"""Grade a class's submissions and write the results: a gradebook (the course's CSV, or Canvas's or Moodle's
import format) and one feedback file per student."""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attn_course import checks
from attn_course_tools.grading.batch import Task, grade_many
from attn_course_tools.grading.cache import GradeCache
from attn_course_tools.grading.identity import ALIASES, Identities, identify
from attn_course_tools.grading.judging import check_hidden
from attn_course_tools.grading.lms import canvas_table, moodle_table
from attn_course_tools.grading.reading import chapters_of, metadata_student, read_notebook
from attn_course_tools.grading.records import ExerciseGrade, Limits, SubmissionGrade
from attn_course_tools.grading.report import write_class_report
from attn_course_tools.grading.roster import Roster
from attn_course_tools.grading.similarity import answer_sources, write_similarity_report


def collect(paths: Iterable[str | Path]) -> list[Path]:
    """Submission files: each path itself, or the .ipynb files anywhere inside a folder (sorted, skipping
    hidden folders such as .ipynb_checkpoints); a file named twice is listed once."""
    found: dict[Path, Path] = {}
    for p in map(Path, paths):
        files = sorted(_notebooks_under(p)) if p.is_dir() else [p]
        for file in files:
            found.setdefault(file.resolve(), file)
    return list(found.values())


def _notebooks_under(folder: Path) -> list[Path]:
    return [
        p for p in folder.rglob("*.ipynb") if not any(s.startswith(".") for s in p.relative_to(folder).parts)
    ]


def _merge(grades: Sequence[SubmissionGrade], rows: Mapping[str, str]) -> dict[str, list[SubmissionGrade]]:
    by_row: dict[str, list[SubmissionGrade]] = {}
    for g in grades:
        by_row.setdefault(rows.get(g.student, g.student), []).append(g)
    return by_row


def best(submissions: Sequence[SubmissionGrade], key: str) -> ExerciseGrade | None:
    """The best grade of exercise `key` among one student's submissions, or None if none answers it."""
    candidates = [s.exercises[key] for s in submissions if key in s.exercises]
    return max(candidates, key=lambda g: g.points) if candidates else None


@dataclass
class Row:
    """One student's line of the gradebook.

    student: the roster's id where the student is on it, else the id the layout gave; name: the roster's
    name ('' if none); submissions: the grades of the student's files; note: "no submission" for a roster
    student who sent nothing, "not on the roster" for a student the roster does not list, else '';
    number: the LMS's own number for the student (Canvas's user id, Moodle's participant id), where the
    roster's id or the Canvas or Moodle layout gives it, else None.
    """

    student: str
    name: str
    submissions: list[SubmissionGrade]
    note: str
    number: str | None = None

    def points(self, key: str) -> int | None:
        """Points of exercise `key`: None if no submission answers it, 0 if the student sent nothing."""
        found = best(self.submissions, key)
        if found is None:
            return 0 if self.note == "no submission" else None
        return found.points


def gradebook_rows(
    grades: Sequence[SubmissionGrade], roster: Roster | None = None, rule: str | None = None
) -> list[Row]:
    """The gradebook's rows: every roster student in the roster's order (those who sent nothing too),
    then the other students in alphabetical order; without a roster, every student in alphabetical order.
    rule: the student-id rule of the batch (`Identities.rule`); "canvas" and "moodle" ids carry the LMS's
    number, `<name>_<number>`."""
    if roster is None:
        merged = _merge(grades, {})
        rows = [Row(student, "", merged[student], "") for student in sorted(merged)]
    else:
        merged = _merge(grades, roster.assign(g.student for g in grades))
        rows = [
            Row(s, roster.names.get(s, ""), merged.get(s, []), "" if s in merged else "no submission")
            for s in roster.ids
        ]
        rows += [Row(s, "", merged[s], "not on the roster") for s in sorted(set(merged) - set(roster.ids))]
    for row in rows:
        # an LMS id, <name>_<number>: the row's own, else that of its submissions (a roster of numbers)
        ids = [row.student, *(s.student for s in row.submissions)] if rule in ("canvas", "moodle") else []
        lms = next((m for m in map(_LMS_ID.match, ids) if m is not None), None)
        if roster is not None and row.student in roster.ids and row.student.isdigit():
            row.number = row.student
        elif lms is not None:
            row.number = lms["number"]
        if lms is not None and not row.name:
            row.name = lms["name"]
    return rows


_LMS_ID = re.compile(r"^(?P<name>.+)_(?P<number>\d+)$")


def write_gradebook(
    grades: Sequence[SubmissionGrade],
    columns: Sequence[str],
    path: str | Path,
    *,
    roster: Roster | None = None,
    rule: str | None = None,
    format: str = "csv",
) -> Path:
    """Write the gradebook of `grades` on the exercises `columns` to `path`, in the format `format`
    (one of FORMATS; see `attn_course_tools.grading.lms` for Canvas's and Moodle's). roster, rule: see
    `gradebook_rows`."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = FORMATS[format](gradebook_rows(grades, roster, rule), columns, roster is not None)
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    return path


def course_table(rows: Sequence[Row], columns: Sequence[str], with_roster: bool) -> list[list[Any]]:
    """The course's own CSV: student, one column per exercise (points; empty if not submitted) and total;
    with a roster also the name and a note ("no submission", "not on the roster")."""
    if with_roster:
        table: list[list[Any]] = [["student", "name", *columns, "total", "note"]]
    else:
        table = [["student", *columns, "total"]]
    for row in rows:
        points = [row.points(key) for key in columns]
        total = sum(p for p in points if p is not None)
        cells = ["" if p is None else p for p in points]
        if with_roster:
            table.append([row.student, row.name, *cells, total, row.note])
        else:
            table.append([row.student, *cells, total])
    return table


def feedback_text(grade: ExerciseGrade) -> str:
    """What a student reads about one exercise: the verdict, the checks' message, the notes (Markdown)."""
    verdict = _VERDICTS.get(grade.status, "incorrect").capitalize()
    lines = [f"**{verdict}.** " + grade.message.replace("\n", "  \n")]
    if grade.notes:
        lines += ["", *(f"- Note: {note}" for note in grade.notes)]
    return "\n".join(lines)


_VERDICTS = {checks.PASSED: "correct", checks.NOT_ATTEMPTED: "not attempted"}


def _safe_name(student: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"


def feedback_names(students: Iterable[str]) -> dict[str, str]:
    """Each student's feedback file name: the id with only safe characters; where two ids would give one
    name (``a b`` and ``a_b``), each is followed by a digest of its id, so that none overwrites another."""
    students = sorted(set(students))
    safe = {s: _safe_name(s) for s in students}
    taken: dict[str, int] = {}
    for name in safe.values():
        taken[name.lower()] = taken.get(name.lower(), 0) + 1  # one file on a case-insensitive disk too
    return {
        s: name if taken[name.lower()] == 1 else f"{name}-{hashlib.sha256(s.encode()).hexdigest()[:8]}"
        for s, name in safe.items()
    }


def write_feedback(
    student: str,
    submissions: Sequence[SubmissionGrade],
    columns: Sequence[str],
    folder: str | Path,
    name: str | None = None,
) -> Path:
    """A Markdown file for one student: a table of points, then each exercise's verdict and notes.

    Lists the exercises of `columns` that the student's submissions were graded on. name: the file's name
    without .md (default: the student id with only safe characters; see `feedback_names`).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    graded = {key: best(submissions, key) for key in columns if best(submissions, key) is not None}
    lines = [f"# Feedback for {student}", ""]
    for s in submissions:
        lines.append(f"Submission `{s.path.name}` (sha256 {s.sha256[:12]}).")
        lines += [f"- {note}" for note in s.notes]
    lines += ["", "| Exercise | Points | Verdict |", "| --- | --- | --- |"]
    for key, grade_ in graded.items():
        verdict = _VERDICTS.get(grade_.status, "incorrect")
        lines.append(f"| {key} `{grade_.name}` | {grade_.points}/1 | {verdict} |")
    total = sum(g.points for g in graded.values())
    lines += ["", f"**Total: {total} of {len(graded)}**", ""]
    for key, grade_ in graded.items():
        lines += [f"## {key}: {checks.EXERCISES[key].title}", "", feedback_text(grade_), ""]
    path = folder / f"{name or _safe_name(student)}.md"
    path.write_text("\n".join(lines))
    return path


def exercise_columns(
    paths: list[Path], chapters: Sequence[int] | None, limits: Limits
) -> tuple[list[str], dict[Path, list[str]]]:
    """The gradebook's columns and the exercises each submission is graded on."""
    if chapters is not None:
        keys = [e.key for c in chapters for e in checks.chapter(c)]
        return keys, {path: keys for path in paths}
    # each notebook is graded on the chapters it answers, else on those of the batch
    answered = {path: chapters_of(read_notebook(path, limits)[0], path) for path in paths}
    batch = sorted({c for found in answered.values() for c in found})
    per_path = {
        path: [e.key for c in (found or batch) for e in checks.chapter(c)] for path, found in answered.items()
    }
    keys = [k for k in checks.EXERCISES if any(k in v for v in per_path.values())]
    return keys, per_path


def students(paths: Sequence[Path], id_from: str, limits: Limits) -> Identities:
    """Who each file belongs to, by the rule `id_from` (reading the notebooks' metadata if it asks)."""
    metadata = None
    if ALIASES.get(id_from, id_from) == "metadata":
        metadata = {path: metadata_student(read_notebook(path, limits)[0]) for path in paths}
    return identify(paths, id_from, metadata)


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
    id_from: the rule for student ids, one of `identity.RULES` (see `attn_course_tools.grading.identity`); files
    that one student resubmitted are graded once, the latest; files the rule cannot tell apart raise
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
    identities = students(collect(paths), id_from, limits)
    if roster is not None:
        roster.assign(identities.students.values())  # IdentityError now, before any grading
    if announce is not None:
        announce(identities)
    paths = list(identities.students)
    keys, per_path = exercise_columns(paths, chapters, limits)
    tasks = [Task(p, identities.students[p], tuple(per_path[p]), hidden, limits) for p in paths]
    results = grade_many(
        tasks,
        jobs=jobs,
        cache=None if cache is None else GradeCache(cache),
        force=force,
        progress=progress,
    )
    for result in results:
        result.notes += [
            f"`{old}` was also received; this later submission was graded instead."
            for old, new in identities.superseded.items()
            if new == result.path
        ]
    out = Path(out)
    write_gradebook(results, keys, out, roster=roster, rule=identities.rule, format=format)
    folder = Path(feedback) if feedback is not None else out.with_name(f"{out.stem}_feedback")
    rows = [row for row in gradebook_rows(results, roster, identities.rule) if row.submissions]
    names = feedback_names(row.student for row in rows)
    for row in rows:
        write_feedback(row.student, row.submissions, keys, folder, names[row.student])
    best_grades = {row.student: {k: best(row.submissions, k) for k in keys} for row in rows}
    best_grades = {s: {k: g for k, g in found.items() if g is not None} for s, found in best_grades.items()}
    paths = write_class_report(best_grades, keys, [r.seconds for r in results], out)
    answers = answer_sources({row.student: row.submissions for row in rows}, limits)
    write_similarity_report(answers, len(rows), paths.similarity)
    return results


#: The gradebook formats: the course's CSV, Canvas's gradebook import and Moodle's grading worksheet.
FORMATS: dict[str, Callable[[Sequence[Row], Sequence[str], bool], list[list[Any]]]] = {
    "csv": course_table,
    "canvas": canvas_table,
    "moodle": moodle_table,
}
