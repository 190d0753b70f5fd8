"""Gradebooks in the CSV forms that Canvas and Moodle import, built from the gradebook's rows.

- Canvas (Grades > Import): the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column
  per assignment, and a ``Points Possible`` line under the header. Each exercise is a column, named
  ``<key> <function>``, or (`Sheet.canvas_column`) one column holds the total, named as the instructor
  asks: the name of an assignment as Canvas's own export writes it (``Assignment 1 (12345)``) fills that
  assignment. Canvas offers to create an assignment for a column it does not know, with the points
  possible given (the course's rules' points). Canvas matches a student by ID (its user id, which Canvas's
  download names carry) or by SIS User ID: the course's id goes there when no Canvas number is known.
- Moodle (an assignment's offline grading worksheet, "Upload grading worksheet"): one line per participant
  with ``Identifier`` (``Participant <id>``, the number in the ``<Full Name>_<id>_assignsubmission_file_``
  folders Moodle's download makes), one ``Grade`` (the total) out of ``Maximum Grade``, and ``Feedback
  comments`` (each exercise's points, the instructor's reasons and the late penalties: the student reads
  them); the other columns of Moodle's worksheet are left empty, and Moodle leaves what is empty alone.
A student without an LMS number keeps the course's id where the number would be, so no row is lost; the
LMS reports the rows it cannot match.
"""

from __future__ import annotations

from collections.abc import Sequence

import attn_course_exercises as checks
from attn_course_tools.grading.records import Row, Score, Sheet, Table, number
from attn_course_tools.grading.rules import Rules

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]

MOODLE_WORKSHEET = [
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
]


def canvas_key(row: Row) -> str:
    """What finds a row of a Canvas import again: Canvas's user id, else the course's id (SIS User ID)."""
    return row.number or row.student


def moodle_key(row: Row) -> str:
    """What finds a row of a Moodle worksheet again: its Identifier."""
    return f"Participant {row.number}" if row.number else row.student


def canvas_table(lines: Sequence[tuple[Row, Score]], sheet: Sheet) -> Table:
    """Canvas's gradebook import: identity columns, then one column per exercise, or the one column
    `sheet.canvas_column` with the total (see the module)."""
    rules = sheet.rules or Rules()
    if sheet.canvas_column is not None:
        names, possible = [sheet.canvas_column], [number(sum(rules.weight(k) for k in sheet.columns))]
    else:
        names = [f"{key} {checks.EXERCISES[key].name}" for key in sheet.columns]
        possible = [number(rules.weight(key)) for key in sheet.columns]
    table = Table([[*CANVAS_IDENTITY, *names], ["Points Possible", "", "", "", "", *possible]])
    for row, score in lines:
        canvas_id, sis_id = (row.number, "") if row.number else ("", row.student)
        if sheet.canvas_column is not None:
            cells = [number(score.total)]
        else:
            earned = [score.marks[key].earned for key in sheet.columns]
            cells = ["" if p is None else number(p) for p in earned]
        table.rows.append((canvas_key(row), [row.name or row.student, canvas_id, sis_id, "", "", *cells]))
    return table


def moodle_table(lines: Sequence[tuple[Row, Score]], sheet: Sheet) -> Table:
    """Moodle's offline grading worksheet: one total grade and a feedback comment per participant."""
    rules = sheet.rules or Rules()
    maximum = number(sum(rules.weight(key) for key in sheet.columns))
    table = Table([list(MOODLE_WORKSHEET)])
    for row, score in lines:
        identifier = moodle_key(row)
        cells = [identifier, row.name or row.student, "", "", number(score.total), maximum, "Yes", "", ""]
        table.rows.append((identifier, [*cells, moodle_comment(row, score)]))
    return table


def moodle_comment(row: Row, score: Score) -> str:
    """The feedback comment of a Moodle worksheet's row, which the student reads: each exercise's points,
    the instructor's reasons, the late penalties."""
    parts = []
    for key, mark in score.marks.items():
        points = "not submitted" if mark.points is None else f"{number(mark.points)}/{number(mark.possible)}"
        reason = f" (set by your instructor: {mark.override.reason})" if mark.override else ""
        parts.append(f"{key} {points}{reason}")
    comment = "; ".join(parts)
    if score.late:
        comment += ". " + " ".join(f"{name}: {sentence}" for name, sentence in score.late.items())
    return f"{row.note}. {comment}" if row.note else comment
