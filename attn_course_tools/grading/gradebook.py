"""Write a class's grades: a gradebook (the course's CSV, or Canvas's or Moodle's import format) and one
feedback file per student; the last stage of the pipeline (`attn_course_tools.grading.pipeline`)."""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attn_course import checks
from attn_course_tools.grading.lms import canvas_table, moodle_table
from attn_course_tools.grading.records import ExerciseGrade, Row, SubmissionGrade, best
from attn_course_tools.grading.roster import Roster

__all__ = [
    "FORMATS",
    "Row",
    "best",
    "course_table",
    "feedback_names",
    "feedback_text",
    "gradebook_rows",
    "write_feedback",
    "write_gradebook",
]


def _merge(grades: Sequence[SubmissionGrade], rows: Mapping[str, str]) -> dict[str, list[SubmissionGrade]]:
    by_row: dict[str, list[SubmissionGrade]] = {}
    for g in grades:
        by_row.setdefault(rows.get(g.student, g.student), []).append(g)
    return by_row


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


#: The gradebook formats: the course's CSV, Canvas's gradebook import and Moodle's grading worksheet.
FORMATS: dict[str, Callable[[Sequence[Row], Sequence[str], bool], list[list[Any]]]] = {
    "csv": course_table,
    "canvas": canvas_table,
    "moodle": moodle_table,
}
