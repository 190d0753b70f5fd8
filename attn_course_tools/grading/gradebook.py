"""Write a class's grades: the gradebook (the course's CSV, or Canvas's or Moodle's import format), its notes
for the instructor and one feedback file per student; the last stage of the pipeline
(`attn_course_tools.grading.pipeline`).

What a row scores (`score`): each exercise's best attempt among the student's files (the file that counted
is named where several answer it), worth the points the course's rules give it, less the late penalty of
the file it came from, unless the instructor's override sets it: those points stand as given (`Marking`).
A gradebook is written whole (`write_gradebook`) or some students' lines are replaced and every other
line kept byte for byte (`update_gradebook`); either way the file is replaced at once, never left half
written. What a student reads names no folder, only file names, and none of the notes meant for the
instructor (`for_student`): those go to the gradebook's notes (`write_notes`, ``grades_notes.csv``).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import attn_course_exercises as checks
from attn_course_tools.grading.lms import (
    CANVAS_IDENTITY,
    MOODLE_WORKSHEET,
    canvas_key,
    canvas_table,
    moodle_key,
    moodle_table,
)
from attn_course_tools.grading.records import (
    ExerciseGrade,
    Mark,
    Row,
    Score,
    Sheet,
    SubmissionGrade,
    Table,
    best,
    best_of,
    number,
)
from attn_course_tools.grading.roster import Roster
from attn_course_tools.grading.rules import Override, Rules

__all__ = [
    "FORMATS",
    "GradebookError",
    "Marking",
    "Row",
    "best",
    "course_table",
    "feedback_names",
    "feedback_text",
    "for_student",
    "gradebook_rows",
    "read_gradebook",
    "score",
    "update_gradebook",
    "write_feedback",
    "write_gradebook",
    "write_notes",
    "write_table",
]


class GradebookError(ValueError):
    """The gradebook cannot be written as asked (it would lose rows, it is not a gradebook, another run holds
    it, ...): what is wrong and what to do. Raised before anything is graded where it can be."""


@dataclass(frozen=True)
class Marking:
    """How a row's points become its grade: the course's rules (None: none given, 1 point an exercise and no
    due date), the instructor's overrides, and when each student handed in (student id or roster id ->
    time, timezone-aware)."""

    rules: Rules | None = None
    overrides: tuple[Override, ...] = ()
    times: Mapping[str, datetime] = field(default_factory=dict)

    def submitted(self, ids: Sequence[str]) -> datetime | None:
        """When the student of `ids` (their ids, the row's first) handed in, if known."""
        return next((self.times[s] for s in ids if s in self.times), None)

    def override(self, ids: Sequence[str], key: str) -> Override | None:
        """The instructor's override of exercise `key` for the student of `ids`, if any."""
        return next((o for o in self.overrides if o.exercise == key and o.student in ids), None)


# ------------------------------------------------------------------------------------------------
# Rows and what they score


def _merge(grades: Sequence[SubmissionGrade], rows: Mapping[str, str]) -> dict[str, list[SubmissionGrade]]:
    by_row: dict[str, list[SubmissionGrade]] = {}
    for g in grades:
        by_row.setdefault(rows.get(g.student, g.student), []).append(g)
    return by_row


def planned_rows(students: Iterable[str], roster: Roster | None = None, rule: str | None = None) -> list[Row]:
    """The gradebook's rows for the student ids `students`, before anything is graded (no submissions):
    see `gradebook_rows`."""
    students = sorted(set(students))
    placeholders = [SubmissionGrade(Path(), s, "", {}, [], 0.0) for s in students]
    rows = gradebook_rows(placeholders, roster, rule)
    for row in rows:
        row.submissions = []
    return rows


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


def row_ids(row: Row) -> list[str]:
    """Every id the student of `row` goes by: the row's, then those of their files."""
    return list(dict.fromkeys([row.student, *(s.student for s in row.submissions)]))


def _attempted(grade: ExerciseGrade) -> bool:
    return grade.status != checks.NOT_ATTEMPTED and not grade.message.startswith("No answer found")


def score(row: Row, columns: Sequence[str], marking: Marking | None = None) -> Score:
    """What `row` scores on the exercises `columns` under `marking` (see the module's docstring). Of several
    files answering an exercise, the one earning most after its late penalty counts (then one attempted
    rather than left as the stub, then the first)."""
    marking = marking or Marking()
    rules, ids = marking.rules or Rules(), row_ids(row)
    extension = next((s for s in ids if s in rules.extensions), row.student)
    late = {
        id(s): rules.late(extension, marking.submitted([row.student, s.student])) for s in row.submissions
    }
    marks = {}
    for key in columns:
        possible = rules.weight(key)
        found = best_of(
            row.submissions,
            key,
            lambda s, g: (g.points * late[id(s)][0], _attempted(g)),  # noqa: B023
        )
        others = sum(key in s.exercises for s in row.submissions) - 1
        override = marking.override(ids, key)
        points = None if found is None else found[1].points * possible
        if points is None and row.note == "no submission":
            points = 0.0
        if override is not None:
            points = override.points
        file, grade = found if found is not None else (None, None)
        factor = late[id(file)][0] if file is not None and override is None else 1.0  # an override stands
        marks[key] = Mark(key, possible, points, grade, file, max(others, 0), factor, override)
    sentences = {s.path.name: late[id(s)][1] for s in row.submissions if late[id(s)][1] is not None}
    return Score(marks, sentences)


def scored(
    grades: Sequence[SubmissionGrade],
    columns: Sequence[str],
    roster: Roster | None = None,
    rule: str | None = None,
    marking: Marking | None = None,
) -> list[tuple[Row, Score]]:
    """Each gradebook row (`gradebook_rows`) with what it scores (`score`)."""
    return [(row, score(row, columns, marking)) for row in gradebook_rows(grades, roster, rule)]


# ------------------------------------------------------------------------------------------------
# The gradebook's forms


def course_table(lines: Sequence[tuple[Row, Score]], sheet: Sheet) -> Table:
    """The course's own CSV: student, one column per exercise (points; empty if not submitted) and total;
    with a roster also the name and a note ("no submission", "not on the roster"); with the course's rules
    a ``points possible`` line under the header (each exercise's points and the most in all) and a ``late
    penalty`` column (the points lost, negative), the total being the exercises' points plus it."""
    columns, rules = list(sheet.columns), sheet.rules
    name, note = (["name"], ["note"]) if sheet.with_roster else ([], [])
    late = ["late penalty"] if rules is not None else []
    table = Table([["student", *name, *columns, *late, "total", *note]])
    if rules is not None:
        possible = [number(rules.weight(key)) for key in columns]
        blank = [""] * len(name)
        table.head.append(["points possible", *blank, *possible, "", number(sum(possible)), *blank])
    for row, marks in lines:
        points = [marks.marks[key].points for key in columns]
        cells = ["" if p is None else number(p) for p in points]
        penalty = [number(-marks.lost) if marks.lost else 0] if rules is not None else []
        named, noted = ([row.name], [row.note]) if sheet.with_roster else ([], [])
        table.rows.append((row.student, [row.student, *named, *cells, *penalty, number(marks.total), *noted]))
    return table


#: The gradebook formats: the course's CSV, Canvas's gradebook import and Moodle's grading worksheet.
FORMATS: dict[str, Callable[[Sequence[tuple[Row, Score]], Sheet], Table]] = {
    "csv": course_table,
    "canvas": canvas_table,
    "moodle": moodle_table,
}

#: What finds a row again in each format, from the row (writing) and from the line's cells (reading).
ROW_KEYS: dict[str, Callable[[Row], str]] = {
    "csv": lambda r: r.student,
    "canvas": canvas_key,
    "moodle": moodle_key,
}
_CELL_KEYS: dict[str, Callable[[list[str]], str]] = {
    "csv": lambda cells: cells[0],
    "canvas": lambda cells: cells[1] or cells[2],
    "moodle": lambda cells: cells[0],
}


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")


def write_gradebook(
    grades: Sequence[SubmissionGrade],
    columns: Sequence[str],
    path: str | Path,
    *,
    roster: Roster | None = None,
    rule: str | None = None,
    format: str = "csv",
    marking: Marking | None = None,
    canvas_column: str | None = None,
) -> Path:
    """Write the gradebook of `grades` on the exercises `columns` to `path`, in the format `format`
    (one of FORMATS; see `attn_course_tools.grading.lms` for Canvas's and Moodle's), replacing the file at
    once. roster, rule: see `gradebook_rows`; marking: see `Marking`; canvas_column: Canvas's one column
    with the total, named so (format "canvas" only)."""
    _check_format(format)
    sheet = make_sheet(columns, roster, marking, format, canvas_column)
    return write_table(path, FORMATS[format](scored(grades, columns, roster, rule, marking), sheet))


def write_table(path: str | Path, table: Table) -> Path:
    """Write the gradebook `table` to `path`, replacing the file at once."""
    return _replace_file(Path(path), _csv_text([*table.head, *(cells for _, cells in table.rows)]).encode())


def make_sheet(
    columns: Sequence[str],
    roster: Roster | None,
    marking: Marking | None,
    format: str,
    canvas_column: str | None,
) -> Sheet:
    """The `Sheet` of a gradebook; ValueError if `canvas_column` is asked of another format than Canvas's."""
    if canvas_column is not None and format != "canvas":
        raise ValueError(f"canvas_column is for the canvas format, got format {format!r}")
    if canvas_column is not None and not canvas_column.strip():
        raise ValueError("canvas_column must name the column, got an empty name")
    return Sheet(tuple(columns), roster is not None, marking.rules if marking else None, canvas_column)


#: How a cell starts that a spreadsheet reads as a formula: a student who names a folder
#: ``=HYPERLINK("https://...")`` would otherwise put a live formula into the instructor's gradebook.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_text_cell(value: Any) -> Any:
    """`value` as a spreadsheet shows it, never as a formula: text that starts as one does (or that would be
    read back as such, "'=...") gets a ' before it, which spreadsheets show as text (OWASP's advice for CSV
    injection); numbers, and text that reads as a number ("-1.5"), are left as they are. `from_text_cell`
    undoes it."""
    if not isinstance(value, str) or not value.lstrip("'").startswith(_FORMULA_STARTS):
        return value
    try:
        number = float(value)
    except ValueError:
        return "'" + value
    return value if math.isfinite(number) else "'" + value


def from_text_cell(cell: str) -> str:
    """The value `as_text_cell` wrote as `cell`."""
    quoted = cell.startswith("'") and cell.lstrip("'").startswith(_FORMULA_STARTS)
    return cell[1:] if quoted else cell


def _csv_text(lines: Iterable[Sequence[Any]], terminator: str = "\r\n") -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=terminator).writerows([map(as_text_cell, line) for line in lines])
    return buffer.getvalue()


def _replace_file(path: Path, data: bytes) -> Path:
    """Write `data` to `path` through a temporary file beside it, so that `path` is never half written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def gradebook_lock(path: str | Path) -> Iterator[None]:
    """Hold the gradebook `path` for one run (a hidden ``.<name>.lock`` beside it): a second run on it at
    the same time stops with GradebookError instead of writing over the first's work. Where the system
    has no file locks (Windows), nothing is held."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ModuleNotFoundError:  # pragma: no cover - Windows
        yield
        return
    with path.with_name(f".{path.name}.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GradebookError(
                f"another grading run is writing {path}; nothing was graded. Wait for it to finish."
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------------
# An existing gradebook: what it holds, and replacing some of its lines


@dataclass
class Existing:
    """A gradebook on disk, as `read_gradebook` found it: its format, its head (the header and any
    points-possible line, as cells), and each line's text (the row's key, None for the head)."""

    path: Path
    format: str
    head: list[list[str]]
    lines: list[tuple[str | None, str]]
    prefix: str = ""

    @property
    def keys(self) -> list[str]:
        """The keys of its rows (see `ROW_KEYS`), in its order."""
        return [key for key, _ in self.lines if key is not None]

    @property
    def columns(self) -> list[str]:
        """The exercises it has a column for (none for Moodle's worksheet or Canvas's total column)."""
        header = self.head[0] if self.format == "csv" else self.head[0][len(CANVAS_IDENTITY) :]
        found = [cell.split(" ", 1)[0] for cell in header] if self.format == "canvas" else header
        return [key for key in found if key in checks.EXERCISES] if self.format != "moodle" else []


def _records(text: str) -> list[tuple[list[str], str]]:
    """(cells, exact text) of each line of a CSV text (a quoted cell may span lines)."""
    pending: list[str] = []

    def lines() -> Iterator[str]:
        for line in io.StringIO(text, newline=""):
            pending.append(line)
            yield line

    records = []
    for cells in csv.reader(lines()):
        records.append(([from_text_cell(cell) for cell in cells], "".join(pending)))
        pending.clear()
    return records


def _format_of(header: list[str]) -> str | None:
    if header[:1] == ["student"] and "total" in header:
        return "csv"
    if header[: len(CANVAS_IDENTITY)] == CANVAS_IDENTITY:
        return "canvas"
    return "moodle" if header == MOODLE_WORKSHEET else None


def read_gradebook(path: str | Path) -> Existing | None:
    """The gradebook at `path` (see `Existing`), None if there is no file or it is empty; GradebookError if
    it is not a gradebook this command writes."""
    path = Path(path)
    try:
        raw = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise GradebookError(
            f"{path} exists but cannot be read as a gradebook ({exc}); nothing was graded"
        ) from None
    prefix = "\ufeff" if raw.startswith("\ufeff") else ""
    records = [r for r in _records(raw[len(prefix) :]) if r[0]]
    if not records:
        return None
    format = _format_of(records[0][0])
    if format is None:
        raise GradebookError(
            f"{path} exists and is not a gradebook this command writes (its first line is "
            f"{','.join(records[0][0])[:80]!r}); nothing was graded. Choose another --out, or pass --replace "
            "to write over it."
        )
    second = records[1][0][:1] if len(records) > 1 else []
    heads = 2 if second in (["points possible"], ["Points Possible"]) else 1
    lines = [(None, text) for _, text in records[:heads]]
    lines += [(_CELL_KEYS[format](cells + ["", "", ""]), text) for cells, text in records[heads:]]
    return Existing(path, format, [cells for cells, _ in records[:heads]], lines, prefix)


def check_not_shrinking(existing: Existing, rows: Sequence[Row]) -> None:
    """GradebookError if writing `rows` over `existing` would drop a row it has."""
    kept = {ROW_KEYS[existing.format](row) for row in rows}
    dropped = [key for key in existing.keys if key not in kept]
    if dropped:
        raise GradebookError(
            f"{existing.path} has {len(existing.keys)} students' rows; this run would write {len(rows)} "
            f"({_listed([row.student for row in rows])}) and drop {len(dropped)} of them "
            f"({_listed(dropped)}); nothing was graded. To regrade some students and keep "
            "the others' rows, pass --only STUDENT (repeatable); to write a new gradebook over it, pass "
            "--replace, or choose another --out."
        )


def _listed(names: Sequence[str], most: int = 8) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def check_updatable(existing: Existing, format: str, head: Sequence[Sequence[Any]]) -> None:
    """GradebookError if some rows of `existing` cannot be replaced by lines of the form `format` whose
    head is `head` (another format, other columns, other points)."""
    if existing.format != format:
        raise GradebookError(
            f"{existing.path} is a {existing.format} gradebook; updating some of its rows needs the same "
            f"form: pass --format {existing.format}; nothing was graded"
        )
    wanted = [[str(cell) for cell in line] for line in head]
    if existing.head != wanted:
        raise GradebookError(
            f"{existing.path} has other columns than this run would write "
            f"({','.join(existing.head[0])[:100]} against {','.join(wanted[0])[:100]}); nothing was graded. "
            "Updating some rows keeps the columns: give the same --rules, --roster, --chapter and "
            "--canvas-column as the run that wrote it, or "
            "regrade the class with --replace."
        )


def update_gradebook(existing: Existing, table: Table) -> Path:
    """Replace the lines of `existing` whose rows `table` has by the table's lines, append the table's other
    rows, and keep every other line byte for byte (see `check_updatable`)."""
    check_updatable(existing, existing.format, table.head)
    terminator = (
        "\n" if existing.lines[0][1].endswith("\n") and not existing.lines[0][1].endswith("\r\n") else "\r\n"
    )
    new = dict(table.rows)
    texts = []
    for key, text in existing.lines:
        texts.append(_csv_text([new.pop(key)], terminator) if key in new else text)
    if texts and not texts[-1].endswith(("\n", "\r")):
        texts[-1] += terminator
    texts += [_csv_text([cells], terminator) for key, cells in table.rows if key in new]
    return _replace_file(existing.path, (existing.prefix + "".join(texts)).encode())


# ------------------------------------------------------------------------------------------------
# Notes for the instructor


#: A note of the judge meant for the instructor alone (what to check by hand): never in the feedback.
_INSTRUCTOR_ONLY = re.compile(r"check by hand", re.IGNORECASE)

NOTES_HEADER = ["student", "exercise", "note"]


def instructor_only(note: str) -> bool:
    """Whether `note`, a note of an exercise's grade, is for the instructor alone."""
    return _INSTRUCTOR_ONLY.search(note) is not None


def notes_path(out: str | Path) -> Path:
    """The gradebook's notes beside the gradebook `out`: grades_notes.csv for grades.csv."""
    out = Path(out)
    return out.with_name(f"{out.stem}_notes.csv")


def instructor_notes(row: Row, marks: Score) -> list[list[str]]:
    """The notes of one row for the instructor, [student, exercise ('' for the whole row), note]: the file
    each exercise counted from where several answer it, overrides, late penalties, what to check by hand,
    integrity cases, and the run's notes on the row's files (superseded files, with their paths)."""
    found = [[row.student, "", note] for s in row.submissions for note in s.instructor_notes]
    found += [[row.student, "", f"{name}: {sentence}"] for name, sentence in marks.late.items()]
    for key, mark in marks.marks.items():
        if mark.others and mark.file is not None:
            tried = ", ".join(
                f"{s.path.name} {number(s.exercises[key].points * mark.possible)}"
                for s in row.submissions
                if key in s.exercises
            )
            found.append(
                [row.student, key, f"counted {mark.file.path.name} (the files that answer it: {tried})"]
            )
        if mark.override is not None:
            was = (
                ""
                if mark.grade is None
                else f" (the checks gave {number(mark.grade.points * mark.possible)})"
            )
            found.append(
                [row.student, key, f"set by the instructor to {number(mark.override.points)} of "
                 f"{number(mark.possible)}{was}: {mark.override.reason}"]
            )  # fmt: skip
        if mark.grade is not None:
            found += [[row.student, key, note] for note in mark.grade.notes if instructor_only(note)]
            if mark.grade.integrity:
                found.append([row.student, key, f"integrity: {mark.grade.integrity}"])
    return found


def write_notes(lines: Sequence[tuple[Row, Score]], path: str | Path, existing: bool = False) -> Path:
    """Write the instructor's notes of `lines` to `path` (see `instructor_notes`). existing: keep the notes
    of the students `lines` does not hold, byte for byte (a run that regrades only some students)."""
    path = Path(path)
    notes = [note for row, marks in lines for note in instructor_notes(row, marks)]
    if not existing or not path.exists():
        return _replace_file(path, _csv_text([NOTES_HEADER, *notes]).encode())
    students = {row.student for row, _ in lines}
    records = _records(path.read_bytes().decode("utf-8"))
    kept = [
        text for i, (cells, text) in enumerate(records) if i == 0 or cells[:1] and cells[0] not in students
    ]
    return _replace_file(path, ("".join(kept) + _csv_text(notes)).encode())


# ------------------------------------------------------------------------------------------------
# The student's feedback


_VERDICTS = {checks.PASSED: "correct", checks.NOT_ATTEMPTED: "not attempted"}

#: A path of the grading machine: a folder then more, from the root, home or a drive; its last part is kept.
_PATH = re.compile(r"(?<![\w.)\]}>])(?:~|[A-Za-z]:)?[\\/](?:[^\s'\"`<>|\\/]+[\\/])+([^\s'\"`<>|\\/]*)")


def for_student(text: str, paths: Iterable[Path] = ()) -> str:
    """`text` as a student may read it: each of `paths` (the files graded, as given) and any absolute path
    written as its file name alone."""
    for path in sorted({str(p) for p in paths if str(p) not in ("", ".")}, key=len, reverse=True):
        text = text.replace(path, Path(path).name)
    return _PATH.sub(lambda m: m[1] or m[0].rstrip("/\\").rsplit("/", 1)[-1].rsplit("\\", 1)[-1], text)


def feedback_text(grade: ExerciseGrade, mark: Mark | None = None, paths: Iterable[Path] = ()) -> str:
    """What a student reads about one exercise (Markdown): the instructor's override, the verdict, the checks'
    message, the file that counted, the notes; never a local path (`for_student`) nor a note for the
    instructor alone (`instructor_only`), nor the grade's integrity case. mark: the exercise in the
    student's gradebook row (`score`); paths: the student's files, as given."""
    paths = list(paths)
    verdict = _VERDICTS.get(grade.status, "incorrect").capitalize()
    lines = []
    if mark is not None and mark.override is not None:
        checked = f"the checks gave {number(grade.points * mark.possible)}"
        lines += [_set_only(mark).replace(" points.)", f" points; {checked}.)"), ""]
    lines.append(f"**{verdict}.** " + for_student(grade.message, paths).replace("\n", "  \n"))
    notes = [f"- Note: {for_student(note, paths)}" for note in grade.notes if not instructor_only(note)]
    if mark is not None and mark.others and mark.file is not None:
        notes.insert(
            0,
            f"- Counted: your attempt in `{mark.file.path.name}`; {mark.others + 1} of your files answer "
            "this exercise, and the best one counts.",
        )
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


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
    *,
    marks: Score | None = None,
) -> Path:
    """A Markdown file for one student: their files, a table of points, the total, then each exercise's
    verdict and notes (see `feedback_text`).

    Lists the exercises of `columns` that the student's submissions were graded on (or the instructor set).
    name: the file's name without .md (default: the student id with only safe characters; see
    `feedback_names`); marks: what the student's row scores (`score`; default: 1 point an exercise).
    """
    marks = marks or score(Row(student, "", list(submissions), ""), columns)
    paths = [s.path for s in submissions]
    shown = {k: m for k, m in marks.marks.items() if m.grade is not None or m.override is not None}
    lines = [f"# Feedback for {student}", ""]
    for s in submissions:
        lines.append(f"Submission `{s.path.name}` (sha256 {s.sha256[:12]}).")
        lines += [f"- {for_student(note, paths)}" for note in s.notes]
        if s.path.name in marks.late:
            lines.append(f"- Late: {marks.late[s.path.name]}")
    lines += ["", "| Exercise | Points | Verdict |", "| --- | --- | --- |"]
    for key, mark in shown.items():
        verdict = "set by your instructor" if mark.override else _VERDICTS.get(mark.grade.status, "incorrect")
        lines.append(
            f"| {key} `{checks.EXERCISES[key].name}` | {number(mark.points or 0)}/{number(mark.possible)} | "
            f"{verdict} |"
        )
    possible = number(sum(m.possible for m in shown.values()))
    earned = sum(m.earned or 0 for m in shown.values())
    lost = sum((m.points or 0) - (m.earned or 0) for m in shown.values())
    after = f" ({number(lost)} taken off for lateness)" if lost else ""
    lines += ["", f"**Total: {number(earned)} of {possible}**{after}", ""]
    for key, mark in shown.items():
        text = feedback_text(mark.grade, mark, paths) if mark.grade is not None else _set_only(mark)
        lines += [f"## {key}: {checks.EXERCISES[key].title}", "", text, ""]
    path = Path(folder) / f"{name or _safe_name(student)}.md"
    return _replace_file(path, "\n".join(lines).encode())


def _set_only(mark: Mark) -> str:
    """The feedback of an exercise no file answers but the instructor set."""
    assert mark.override is not None
    return (
        f"**Set by your instructor: {for_student(mark.override.reason)}** ({number(mark.override.points)} of "
        f"{number(mark.possible)} points.)"
    )
