"""A class roster: who should have submitted, so that the gradebook has a row for every student on it.

A roster is one of:

- a plain CSV file with one student a line: the id, then optionally the name (``alice,Alice Martin``). An
  optional header line is recognised by its first cell (``student``, ``id``, ...); blank lines and lines
  starting with ``#`` are skipped;
- Canvas's gradebook export (Grades > Export): the header ``Student, ID, SIS User ID, SIS Login ID, Section``
  and the assignments; the roster ids are Canvas's user ids (``ID``), the names its ``Student`` column; the
  ``Points Possible`` line, lines without a student (``Manual Posting``) and Canvas's ``Student, Test`` are
  skipped;
- Moodle's grading worksheet of an assignment (``Identifier, Full name, ...``): the ids are the numbers of
  its ``Participant <id>`` identifiers, and its ``Last modified (submission)`` times are kept (`submitted`);
- Moodle's participants export (a ``Full name`` column, or ``First name`` and ``Last name``, beside Moodle's
  ``Email address``, ``Roles``, ``Groups``...): the ids are the full names of those whose roles include
  Student (`by_name`).

Anything else -- more than two columns, a cell that reads like a column's name where an id should be, a
number where a name should be -- is refused (RosterError names the line), so that a gradebook or an export
of another kind never becomes a roster of nonsense. A roster id matches a submission's student id if they
are equal or, for the ids LMS downloads carry (Canvas's ``<name>_<userid>``, Moodle's ``<Full Name>_<id>``),
if the roster id is the number after the last underscore, or (Moodle's participants) the name before it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from attn_course_tools.grading.identity import IdentityError

_HEADERS = {"student", "students", "id", "student id", "student_id", "user id", "username", "login"}

#: Cells that name a column, never a student: found where an id should be, the file is not a plain roster.
_COLUMN_NAMES = _HEADERS | {
    "name",
    "names",
    "full name",
    "first name",
    "last name",
    "surname",
    "email",
    "email address",
    "identifier",
    "points possible",
    "total",
    "grade",
    "score",
    "section",
    "sis user id",
    "sis login id",
    "roles",
}

_CANVAS = ("Student", "ID", "SIS User ID")
_CANVAS_TEST_STUDENT = {"student, test", "test student"}
_PARTICIPANT = re.compile(r"^Participant (\d+)$")
_FULL_NAMES = (
    "full name",
    "first name / last name",
    "first name / surname",
    "first name / last name / surname",
)
_MOODLE_PARTICIPANTS = {"email address", "roles", "groups", "status", "last access to course"}


class RosterError(ValueError):
    """The roster file cannot be read as a roster: the line and what is wrong with it."""


Lines = list[tuple[int, list[str]]]


@dataclass(frozen=True)
class Roster:
    """The students of a class, in the roster's order, with their names where the roster gives them.

    source: the kind of file it was read from ("plain", "canvas", "moodle worksheet", "moodle
    participants"); submitted: roster id -> the submission time the file gives, as it writes it (Moodle's
    worksheet); by_name: the ids are full names, matching ``<Full Name>_<id>`` by the name.
    """

    ids: tuple[str, ...]
    names: dict[str, str]
    source: str = "plain"
    submitted: dict[str, str] = field(default_factory=dict)
    by_name: bool = False

    @classmethod
    def read(cls, path: str | Path) -> Roster:
        """Read a roster file (see the module's docstring); RosterError names the line of a bad entry."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise RosterError(f"roster {path} cannot be read: {exc}") from exc
        lines: Lines = [
            (number, [c.strip() for c in row])
            for number, row in enumerate(csv.reader(text.splitlines()), start=1)
            if any(c.strip() for c in row) and not row[0].strip().startswith("#")
        ]
        if not lines:
            raise RosterError(f"roster {path} lists no student")
        roster = _reader(lines[0][1])(path, lines)
        if not roster.ids:
            raise RosterError(f"roster {path} lists no student")
        return roster

    def match(self, student: str) -> str | None:
        """The roster id of the student id `student` (equal, or the LMS number it ends with), or None."""
        if student in self.ids:
            return student
        name, _, number = student.rpartition("_")
        if name and number.isdigit() and number in self.ids:
            return number
        if self.by_name and name and number.isdigit() and name in self.ids:
            return name
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


def _reader(header: list[str]) -> Callable[[Path, Lines], Roster]:
    """How to read a roster whose first line is `header`: Canvas's, Moodle's or a plain roster."""
    lowered = [c.lower() for c in header]
    if all(name in header for name in _CANVAS):
        return _canvas
    if header and header[0] == "Identifier" and "Full name" in header:
        return _moodle_worksheet
    named = any(c in _FULL_NAMES for c in lowered) or (
        "first name" in lowered and _surname(lowered) is not None
    )
    if named and _MOODLE_PARTICIPANTS & set(lowered):
        return _moodle_participants
    return _plain


def _surname(lowered: list[str]) -> int | None:
    return next((lowered.index(c) for c in ("last name", "surname") if c in lowered), None)


def _plain(path: Path, lines: Lines) -> Roster:
    """A plain roster: an id a line, optionally a name; anything else is refused (see the module)."""
    ids: list[str] = []
    names: dict[str, str] = {}
    for index, (number, cells) in enumerate(lines):
        where = f"roster {path}, line {number}"
        while cells and not cells[-1]:
            cells = cells[:-1]
        if index == 0 and cells[0].lower() in _HEADERS and len(cells) <= 2:
            continue
        _check_plain(where, cells, path)
        student = cells[0]
        if student in ids:
            raise RosterError(f"{where}: student {student!r} is listed twice")
        ids.append(student)
        if len(cells) > 1 and cells[1]:
            names[student] = cells[1]
    return Roster(tuple(ids), names)


def _check_plain(where: str, cells: list[str], path: Path) -> None:
    """RosterError if a plain roster's line is not an id and an optional name."""
    if len(cells) > 2:
        raise RosterError(
            f"{where} has {len(cells)} columns, but a roster has the student id and optionally a name. "
            "Canvas's gradebook export and Moodle's grading worksheet or participants export are "
            "read as such from their own header; this file is none of them. Give a CSV of id,name lines."
        )
    if not cells[0]:
        raise RosterError(f"{where}: the student id (first column) is empty")
    if cells[0].lower() in _COLUMN_NAMES:
        raise RosterError(
            f"{where}: {cells[0]!r} reads like the name of a column, not a student id; a roster's header, "
            f"if it has one, starts with one of {', '.join(sorted(_HEADERS))}"
        )
    if len(cells) > 1 and _is_number(cells[1]):
        raise RosterError(
            f"{where}: the name {cells[1]!r} is a number; a roster gives each student's id and name (is "
            f"{path.name} a gradebook?)"
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _columns(path: Path, header: list[str], names: Iterable[str]) -> list[int]:
    """The index of each column of `names` in `header`; RosterError naming the missing one."""
    found = []
    for name in names:
        if name not in header:
            raise RosterError(f"roster {path}: the header has no {name!r} column")
        found.append(header.index(name))
    return found


def _add(path: Path, number: int, ids: list[str], student: str, hint: str = "") -> None:
    if student in ids:
        raise RosterError(f"roster {path}, line {number}: student {student!r} is listed twice{hint}")
    ids.append(student)


def _canvas(path: Path, lines: Lines) -> Roster:
    """Canvas's gradebook export: the roster ids are its user ids (see the module)."""
    name_at, id_at, _ = _columns(path, lines[0][1], _CANVAS)
    ids: list[str] = []
    names: dict[str, str] = {}
    for number, cells in lines[1:]:
        cells = cells + [""] * (len(lines[0][1]) - len(cells))
        name, canvas_id = cells[name_at], cells[id_at]
        if name == "Points Possible" or not name or name.lower() in _CANVAS_TEST_STUDENT:
            continue
        if not canvas_id.isdigit():
            raise RosterError(
                f"roster {path}, line {number}: Canvas's ID of {name!r} should be a number, got {canvas_id!r}"
            )
        _add(path, number, ids, canvas_id)
        names[canvas_id] = name
    return Roster(tuple(ids), names, "canvas")


def _moodle_worksheet(path: Path, lines: Lines) -> Roster:
    """Moodle's grading worksheet: the ids are its participant numbers (see the module)."""
    header = lines[0][1]
    identifier_at, name_at = _columns(path, header, ("Identifier", "Full name"))
    time_at = header.index("Last modified (submission)") if "Last modified (submission)" in header else None
    ids: list[str] = []
    names: dict[str, str] = {}
    submitted: dict[str, str] = {}
    for number, cells in lines[1:]:
        cells = cells + [""] * (len(header) - len(cells))
        match = _PARTICIPANT.match(cells[identifier_at])
        if match is None:
            raise RosterError(
                f"roster {path}, line {number}: the Identifier should be 'Participant <number>', "
                f"got {cells[identifier_at]!r}"
            )
        _add(path, number, ids, match[1])
        names[match[1]] = cells[name_at]
        if time_at is not None and cells[time_at] not in ("", "-"):
            submitted[match[1]] = cells[time_at]
    return Roster(tuple(ids), names, "moodle worksheet", submitted)


def _moodle_participants(path: Path, lines: Lines) -> Roster:
    """Moodle's participants export: the ids are the students' full names (see the module)."""
    lowered = [c.lower() for c in lines[0][1]]
    full = next((lowered.index(c) for c in _FULL_NAMES if c in lowered), None)
    first, last = (lowered.index("first name") if "first name" in lowered else None), _surname(lowered)
    roles = lowered.index("roles") if "roles" in lowered else None
    ids: list[str] = []
    hint = (
        ": two participants of one name cannot be told apart by name; give Moodle's grading worksheet "
        "as the roster instead (its participant numbers tell them apart)"
    )
    for number, cells in lines[1:]:
        cells = cells + [""] * (len(lowered) - len(cells))
        if roles is not None and "student" not in cells[roles].lower():
            continue
        name = cells[full] if full is not None else f"{cells[first]} {cells[last]}".strip()
        if not name:
            raise RosterError(f"roster {path}, line {number}: the participant's name is empty")
        _add(path, number, ids, name, hint)
    return Roster(tuple(ids), {}, "moodle participants", by_name=True)
