"""Gradebooks in the CSV forms that Canvas and Moodle import, built from the gradebook's rows.

- Canvas (Grades > Import): the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column
  per assignment, and a ``Points Possible`` line under the header. Each exercise is a column, named
  ``<key> <function>``; Canvas offers to create an assignment for a column it does not know, with the points
  possible given. Canvas matches a student by ID (its user id, which Canvas's download names carry) or
  by SIS User ID: the course's id goes there when no Canvas number is known.
- Moodle (an assignment's offline grading worksheet, "Upload grading worksheet"): one line per participant
  with ``Identifier`` (``Participant <id>``, the number in the ``<Full Name>_<id>_assignsubmission_file_``
  folders Moodle's download makes), one ``Grade`` (the total) out of ``Maximum Grade``, and ``Feedback
  comments``; the other columns of Moodle's worksheet are left empty, and Moodle leaves what is empty alone.
A student without an LMS number keeps the course's id where the number would be, so no row is lost; the
LMS reports the rows it cannot match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attn_course import checks
from attn_course_tools.grading.records import Row

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


def canvas_table(rows: Sequence[Row], columns: Sequence[str], with_roster: bool) -> list[list[Any]]:
    """Canvas's gradebook import: identity columns, then one column per exercise (see the module)."""
    names = [f"{key} {checks.EXERCISES[key].name}" for key in columns]
    table: list[list[Any]] = [
        [*CANVAS_IDENTITY, *names],
        ["Points Possible", "", "", "", "", *(1 for _ in columns)],
    ]
    for row in rows:
        canvas_id, sis_id = (row.number, "") if row.number else ("", row.student)
        points = [row.points(key) for key in columns]
        table.append(
            [row.name or row.student, canvas_id, sis_id, "", "", *("" if p is None else p for p in points)]
        )
    return table


def moodle_table(rows: Sequence[Row], columns: Sequence[str], with_roster: bool) -> list[list[Any]]:
    """Moodle's offline grading worksheet: one total grade and a feedback comment per participant."""
    table: list[list[Any]] = [MOODLE_WORKSHEET]
    for row in rows:
        identifier = f"Participant {row.number}" if row.number else row.student
        points = {key: row.points(key) for key in columns}
        total = sum(p for p in points.values() if p is not None)
        comments = "; ".join(
            f"{key} {'not submitted' if p is None else f'{p}/1'}" for key, p in points.items()
        )
        if row.note:
            comments = f"{row.note}. {comments}"
        table.append(
            [identifier, row.name or row.student, "", "", total, len(columns), "Yes", "", "", comments]
        )
    return table
