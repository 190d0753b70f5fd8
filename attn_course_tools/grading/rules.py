"""A course's rules for turning checked exercises into a grade: each exercise's points, the due date, the late
penalty and each student's extension (`Rules`, read from a small TOML file), the instructor's manual
overrides (`Override`), and when each submission was handed in (`parse_time`, `read_times`, `canvas_late`).

A rules file (every key optional)::

    due = 2025-03-14T23:59:00+01:00     # or a local time with `timezone`, or a date (the end of that day)
    timezone = "Europe/Paris"           # for dates and times written without an offset
    [late]
    per_day = 0.1                       # the share of the points lost per day late, or part of a day
    cap = 0.5                           # the most that lateness can cost
    [points]
    "ch1.q2" = 2                        # an exercise left out is worth 1 point
    [extensions]
    dan = 2025-03-17T23:59:00+01:00     # dan's own due date

Where submissions come from an LMS, its layout says little about when: Canvas's download names mark a late
file (``<name>_LATE_<userid>_...``) but give no time, Moodle's give none, and the modification time of an
unzipped file says when it was unzipped or copied as often as when it was handed in, so it is never used.
Times come from the instructor (`read_times`: Canvas's and Moodle's submission pages show them) or from
Moodle's grading worksheet given as the roster (its "Last modified (submission)" column).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any

import attn_course_exercises as checks

__all__ = ["Override", "Rules", "canvas_late", "parse_time", "read_overrides", "read_times"]

#: The keys of a rules file; the tables among them, with the keys allowed inside (None: any).
_KEYS = ("due", "timezone", "late", "points", "extensions")
_TABLES: dict[str, set[str] | None] = {"late": {"per_day", "cap"}, "points": None, "extensions": None}

#: Moodle's way of writing a time in its grading worksheet (English), with and without the day's name.
_MOODLE_TIMES = ("%A, %d %B %Y, %I:%M %p", "%d %B %Y, %I:%M %p")


@dataclass(frozen=True)
class Rules:
    """A course's rules (see the module's docstring); `Rules()` is the default: 1 point an exercise, no
    due date, nothing lost for lateness.

    points: exercise key -> points (a key left out is worth 1); due: the due date, timezone-aware, or None;
    per_day: the share of an exercise's points lost per day late (or part of a day), in [0, 1]; cap: the
    most that can be lost, in [0, 1]; extensions: student id -> their own due date, timezone-aware;
    zone: the time zone of times written without an offset (the rules' `timezone`, else the due date's).
    """

    points: Mapping[str, float] = field(default_factory=dict)
    due: datetime | None = None
    per_day: float = 0.0
    cap: float = 0.0
    extensions: Mapping[str, datetime] = field(default_factory=dict)
    zone: tzinfo | None = None

    def __post_init__(self) -> None:
        for name in ("per_day", "cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        for key, value in self.points.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"points[{key!r}] must be a number >= 0, got {value!r}")
        dates = {"due": self.due, **{f"extensions[{s!r}]": d for s, d in self.extensions.items()}}
        for name, value in dates.items():
            if value is not None and (not isinstance(value, datetime) or value.utcoffset() is None):
                raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
        if self.zone is None and self.due is not None:
            object.__setattr__(self, "zone", self.due.tzinfo)

    @classmethod
    def load(cls, path: str | Path) -> Rules:
        """Read a rules file (see the module's docstring); ValueError names the file, the line and the key
        of anything wrong."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"rules {path} cannot be read: {exc}") from exc
        try:
            data = _toml(text)
        except ValueError as exc:  # tomllib's message names the line and column
            raise ValueError(f"rules {path}: not a TOML file: {exc}") from exc
        try:
            return _rules(data)
        except _KeyError as exc:
            line = _line_of(text, exc.key)
            raise ValueError(f"rules {path}{f', line {line}' if line else ''}: {exc.message}") from None

    def weight(self, key: str) -> float:
        """The points exercise `key` is worth (1 where the rules do not say)."""
        return float(self.points.get(key, 1.0))

    def due_for(self, student: str) -> datetime | None:
        """The due date of `student`: their extension, else the course's."""
        return self.extensions.get(student, self.due)

    def late(self, student: str, submitted: datetime | None) -> tuple[float, str | None]:
        """(the factor to multiply points by, in [1 - cap, 1]; the sentence for the student's feedback, None
        if on time or if the due date or the submission time is unknown). `submitted` must be
        timezone-aware."""
        due = self.due_for(student)
        if due is None or submitted is None:
            return 1.0, None
        if submitted.utcoffset() is None:
            raise ValueError(f"submitted must be a timezone-aware datetime, got {submitted!r}")
        if submitted <= due:
            return 1.0, None
        days = math.ceil((submitted - due) / timedelta(days=1))
        lost = round(min(self.cap, self.per_day * days), 10)
        whose = "your extended due date" if student in self.extensions else "the due date"
        when = (
            f"Handed in {days} day{'s' if days != 1 else ''} late ({_when(submitted, due)}; "
            f"{whose} was {_when(due, due)})"
        )
        if lost == 0:
            return 1.0, f"{when}; no points are taken off for it."
        rule = f"{self.per_day:.0%} a day or part of a day, at most {self.cap:.0%}"
        return 1.0 - lost, f"{when}: {lost:.0%} of its points are taken off ({rule})."

    def zoned(self, moment: datetime, what: str) -> datetime:
        """`moment` with the rules' time zone if it has none; ValueError naming `what` if there is none."""
        if moment.utcoffset() is not None:
            return moment
        if self.zone is None:
            raise ValueError(
                f"{what} {moment.isoformat(sep=' ')} has no time zone: write it with an offset "
                '(+01:00), or give the rules file a timezone (timezone = "Europe/Paris")'
            )
        return moment.replace(tzinfo=self.zone)


def _when(moment: datetime, due: datetime) -> str:
    """A time as a student reads it, in the time zone of the due date."""
    local = moment.astimezone(due.tzinfo)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname() or ''}".strip()


class _KeyError(ValueError):
    """A bad value in a rules file: the key to find its line by, and what is wrong."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key, self.message = key, message


def _toml(text: str) -> dict[str, Any]:
    """The TOML `text` as data (tomllib, or tomli before Python 3.11); ValueError if it is not TOML."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError as exc:
            raise ValueError(
                "reading a rules file needs Python 3.11 or later (or the tomli package)"
            ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from exc


def _line_of(text: str, key: str) -> int | None:
    """The line of `text` where `key` is set (a table's key, "extensions.dan", by its own name), or None."""
    section, _, inner = key.partition(".")
    name = inner if section in _KEYS and inner else key
    pattern = re.compile(rf"^\s*[\"']?{re.escape(name)}[\"']?\s*=")
    return next((n for n, line in enumerate(text.splitlines(), 1) if pattern.match(line)), None)


def _rules(data: dict[str, Any]) -> Rules:
    """The rules a TOML file's `data` gives; _KeyError on a bad key or value."""
    for key, value in data.items():
        if key not in _KEYS:
            raise _KeyError(key, f"unknown key {key!r}; the keys are {', '.join(_KEYS)}")
        if key in _TABLES and not isinstance(value, dict):
            raise _KeyError(key, f"{key} must be a table ([{key}]), got {value!r}")
        allowed = _TABLES.get(key)
        for inner in value if allowed is not None else ():
            if inner not in allowed:
                raise _KeyError(
                    inner, f"unknown key {key}.{inner}; the keys are {', '.join(sorted(allowed))}"
                )
    zone = _zone(data["timezone"]) if "timezone" in data else None
    due = _moment(data["due"], "due", zone) if "due" in data else None
    late = data.get("late", {})
    per_day, cap = (_share(late, name) for name in ("per_day", "cap"))
    if "cap" not in late:
        cap = 1.0 if per_day else 0.0
    if per_day and due is None:
        raise _KeyError("per_day", "late.per_day is set, but there is no due date (due = ...)")
    extensions = {str(s): _moment(d, f"extensions.{s}", zone) for s, d in data.get("extensions", {}).items()}
    points = {key: _points(key, value) for key, value in data.get("points", {}).items()}
    return Rules(points, due, per_day, cap, extensions, zone or (due.tzinfo if due else None))


def _zone(name: object) -> tzinfo:
    """The time zone named `name` ("Europe/Paris"); _KeyError if there is none of that name."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise _KeyError(
            "timezone", f'timezone {name!r} is not a time zone name (e.g. "Europe/Paris")'
        ) from None


def _moment(value: object, key: str, zone: tzinfo | None) -> datetime:
    """A due date of the rules file: a datetime (with an offset, or local in `zone`), a date (the end of that
    day) or an ISO string; _KeyError otherwise."""
    if isinstance(value, str):
        try:
            value = _iso(value)
        except ValueError:
            raise _KeyError(
                key, f"{key} must be a date and time (2025-03-14T23:59:00+01:00), got {value!r}"
            ) from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time(23, 59, 59))
    if not isinstance(value, datetime):
        raise _KeyError(key, f"{key} must be a date and time (2025-03-14T23:59:00+01:00), got {value!r}")
    if value.utcoffset() is None:
        if zone is None:
            raise _KeyError(
                key,
                f"{key} = {value.isoformat()} has no time zone: add an offset (+01:00) or a line "
                'timezone = "Europe/Paris"',
            )
        value = value.replace(tzinfo=zone)
    return value


def _share(table: dict[str, Any], name: str) -> float:
    value = table.get(name, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise _KeyError(name, f"late.{name} must be a share in [0, 1] (0.1 for 10%), got {value!r}")
    return float(value)


def _points(key: str, value: object) -> float:
    if key not in checks.EXERCISES:
        raise _KeyError(key, f'points: {key!r} is not an exercise of the course (e.g. "ch1.q2")')
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise _KeyError(key, f"points.{key} must be a number >= 0, got {value!r}")
    return float(value)


def _iso(text: str) -> datetime:
    """An ISO 8601 date and time; a trailing Z means UTC (which Python 3.10's fromisoformat refuses)."""
    text = text.strip()
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)


def parse_time(text: str, rules: Rules, what: str = "the time") -> datetime:
    """When a submission was handed in, from an ISO 8601 time (2025-03-14T18:02:00+01:00) or Moodle's
    (``Friday, 14 March 2025, 6:02 PM``); a time without an offset is in the rules' time zone. ValueError
    names `what` and the text."""
    try:
        moment = _iso(text)
    except ValueError:
        moment = None
        for form in _MOODLE_TIMES:
            try:
                moment = datetime.strptime(text.strip(), form)
                break
            except ValueError:
                continue
    if moment is None:
        raise ValueError(
            f"{what} {text!r} is not a time: write it as 2025-03-14T18:02:00+01:00 (or as Moodle writes it)"
        )
    return rules.zoned(moment, what)


def read_times(path: str | Path, rules: Rules) -> dict[str, datetime]:
    """{student id: when they handed in} from a CSV file with the header ``student,submitted``; the student
    is the id the layout gives or the roster's. ValueError names the line of a bad entry."""
    path = Path(path)
    found: dict[str, datetime] = {}
    for number, row in _csv_rows(path, ("student", "submitted"), "times"):
        student = row["student"].strip()
        if not student:
            raise ValueError(f"times {path}, line {number}: the student is empty")
        if student in found:
            raise ValueError(f"times {path}, line {number}: student {student!r} is listed twice")
        found[student] = parse_time(row["submitted"], rules, f"times {path}, line {number}: the time")
    return found


@dataclass(frozen=True)
class Override:
    """The instructor's own points for one exercise of one student, and why (the student reads it)."""

    student: str
    exercise: str
    points: float
    reason: str


def read_overrides(path: str | Path, rules: Rules | None = None) -> tuple[Override, ...]:
    """The overrides of a CSV file with the header ``student,exercise,points,reason``: points between 0 and
    what the exercise is worth under `rules`. ValueError names the line of a bad entry; whether each
    student has a row in the gradebook is checked where the rows are known (`pipeline.grade`)."""
    path, rules = Path(path), rules or Rules()
    found: dict[tuple[str, str], Override] = {}
    for number, row in _csv_rows(path, ("student", "exercise", "points", "reason"), "overrides"):
        where = f"overrides {path}, line {number}"
        student, key, reason = (row[k].strip() for k in ("student", "exercise", "reason"))
        if not student:
            raise ValueError(f"{where}: the student is empty")
        if key not in checks.EXERCISES:
            raise ValueError(f"{where}: {key!r} is not an exercise of the course (e.g. ch1.q2)")
        try:
            points = float(row["points"])
        except ValueError:
            raise ValueError(f"{where}: points must be a number, got {row['points']!r}") from None
        if not 0 <= points <= rules.weight(key):
            raise ValueError(
                f"{where}: points of {key} must be between 0 and {rules.weight(key):g}, got {points:g}"
            )
        if not reason:
            raise ValueError(f"{where}: the reason is empty (the student reads it in their feedback)")
        if (student, key) in found:
            raise ValueError(f"{where}: {student} {key} is overridden twice")
        found[student, key] = Override(student, key, points, reason)
    return tuple(found.values())


def _csv_rows(path: Path, columns: tuple[str, ...], what: str) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file whose header has `columns`; ValueError if it cannot be read or
    lacks one of them."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} {path} cannot be read: {exc}") from exc
    reader = csv.DictReader(lines)
    header = [h.strip().lower() for h in reader.fieldnames or []]
    missing = [c for c in columns if c not in header]
    if missing:
        raise ValueError(
            f"{what} {path}: the first line must name the columns {', '.join(columns)}; "
            f"{', '.join(missing)} is missing (found {', '.join(header) or 'nothing'})"
        )
    reader.fieldnames = header
    rows = []
    for row in reader:
        if all(not (v or "").strip() for k, v in row.items() if k is not None):
            continue
        if row.get(None):
            raise ValueError(f"{what} {path}, line {reader.line_num}: more cells than the header has columns")
        rows.append((reader.line_num, {k: (v or "") for k, v in row.items()}))
    return rows


_CANVAS_LATE = re.compile(r"^.+?_LATE_\d+_\d+_.+$")


def canvas_late(path: Path) -> bool:
    """Whether the Canvas download name of `path` marks it late (``<name>_LATE_<userid>_...``)."""
    return _CANVAS_LATE.match(path.stem) is not None
