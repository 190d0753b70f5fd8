"""A class roster: who should have submitted, so that the gradebook has a row for every student on it.

A roster is a CSV file with one student a line: the id, then optionally the name (``alice,Alice Martin``).
An optional header line is recognised by its first cell (``student``, ``id``, ...); blank lines and lines
starting with ``#`` are skipped. A roster id matches a submission's student id if they are equal or, for
the ids LMS downloads carry (Canvas's ``<name>_<userid>``, Moodle's ``<Full Name>_<id>``), if the roster id
is the number after the last underscore: a roster exported from the LMS lists those numbers.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from attn_course_tools.grading.identity import IdentityError

_HEADERS = {"student", "students", "id", "student id", "student_id", "user id", "username", "login"}


class RosterError(ValueError):
    """The roster file cannot be read as a roster: the line and what is wrong with it."""


@dataclass(frozen=True)
class Roster:
    """The students of a class, in the roster's order, with their names where the roster gives them."""

    ids: tuple[str, ...]
    names: dict[str, str]

    @classmethod
    def read(cls, path: str | Path) -> Roster:
        """Read a roster file (see the module's docstring); RosterError names the line of a bad entry."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise RosterError(f"roster {path} cannot be read: {exc}") from exc
        ids: list[str] = []
        names: dict[str, str] = {}
        for number, row in enumerate(csv.reader(lines), start=1):
            cells = [c.strip() for c in row]
            if not any(cells) or cells[0].startswith("#"):
                continue
            if number == 1 and cells[0].lower() in _HEADERS:
                continue
            student = cells[0]
            if not student:
                raise RosterError(f"roster {path}, line {number}: the student id (first column) is empty")
            if student in ids:
                raise RosterError(f"roster {path}, line {number}: student {student!r} is listed twice")
            ids.append(student)
            if len(cells) > 1 and cells[1]:
                names[student] = cells[1]
        if not ids:
            raise RosterError(f"roster {path} lists no student")
        return cls(tuple(ids), names)

    def match(self, student: str) -> str | None:
        """The roster id of the student id `student` (equal, or the LMS number it ends with), or None."""
        if student in self.ids:
            return student
        number = student.rsplit("_", 1)[-1]
        if "_" in student and number.isdigit() and number in self.ids:
            return number
        return None

    def assign(self, students: Iterable[str]) -> dict[str, str]:
        """Each submission's student id -> its row in the gradebook: the roster id it matches, or itself.

        Raises IdentityError (before anything is graded) if two different students match one roster id:
        their grades would otherwise be merged into one row.
        """
        rows: dict[str, str] = {}
        claimed: dict[str, list[str]] = {}
        for student in sorted(set(students)):
            row = self.match(student)
            rows[student] = row if row is not None else student
            if row is not None:
                claimed.setdefault(row, []).append(student)
        clashes = {row: found for row, found in claimed.items() if len(found) > 1}
        if clashes:
            listed = "\n".join(f"  roster id {row!r}: {', '.join(found)}" for row, found in clashes.items())
            raise IdentityError(
                f"two or more students match one roster id, so their grades would share a row; nothing "
                f"was graded:\n{listed}\nCorrect the roster or the submissions' names."
            )
        return rows

    def missing(self, rows: Iterable[str]) -> list[str]:
        """The roster ids with no row among `rows` (nothing was submitted), in the roster's order."""
        present = set(rows)
        return [student for student in self.ids if student not in present]
