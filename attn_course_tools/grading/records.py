"""The values the grader's modules hand each other: a submission's limits, a sandbox step, the grades, the
gradebook's rows and what each row scores under the course's rules (`Mark`, `Score`), and the table a
gradebook's form makes of them (`Sheet`, `Table`).

`Step` is the one thing that crosses the sandbox's boundary both ways (in the job the grader writes, in the
journal the sandbox writes back): `Step.to_json` and `Step.from_json` are its only serialisation.
`SubmissionGrade.to_json` and `from_json` are how the grade cache (`attn_course_tools.grading.cache`) stores
one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attn_course.validation import check_int, check_number, check_positive_int

if TYPE_CHECKING:
    from attn_course_tools.grading.rules import Override, Rules


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Seconds, megabytes, kilobytes as the names say.

    cell_timeout: each exercise cell, and each call of the learner's code on one case;
    total_timeout: the whole submission, restarts included;
    memory_mb: the sandbox's address space (RLIMIT_AS), which must leave room for what importing torch maps;
    max_output_kb: what one cell or call may print; max_file_mb: the largest file the sandbox may write;
    max_notebook_mb: the largest notebook file the grader reads.
    """

    cell_timeout: float = 10.0
    total_timeout: float = 120.0
    memory_mb: int = 6144
    max_output_kb: int = 1024
    max_file_mb: int = 64
    max_notebook_mb: int = 50

    def __post_init__(self) -> None:
        check_number("cell_timeout", self.cell_timeout, low=0, low_open=True)
        check_number("total_timeout", self.total_timeout, low=0, low_open=True)
        check_positive_int("memory_mb", self.memory_mb)
        check_positive_int("max_output_kb", self.max_output_kb)
        check_positive_int("max_file_mb", self.max_file_mb)
        check_positive_int("max_notebook_mb", self.max_notebook_mb)


StepKind = Literal["preamble", "cell", "call"]


@dataclass(frozen=True)
class Step:
    """One timed step of a sandbox run: the chapter's set-up imports ("preamble"), one exercise cell
    ("cell", with its 0-based index in the notebook), or the calls of one exercise's function on its cases
    ("call", with the exercise's key). Use `Step.preamble()`, `Step.cell(index)`, `Step.call(key)`."""

    kind: StepKind
    index: int | None = None
    key: str | None = None

    @classmethod
    def preamble(cls) -> Step:
        return cls("preamble")

    @classmethod
    def cell(cls, index: int) -> Step:
        return cls("cell", index=check_int("index", index, low=0))

    @classmethod
    def call(cls, key: str) -> Step:
        return cls("call", key=key)

    def to_json(self) -> dict[str, Any]:
        """The step as JSON data: {"kind": "cell", "index": 3}, {"kind": "call", "key": "ch1.q1"}, ..."""
        data: dict[str, Any] = {"kind": self.kind}
        if self.kind == "cell":
            data["index"] = self.index
        elif self.kind == "call":
            data["key"] = self.key
        return data

    @classmethod
    def from_json(cls, data: object) -> Step | None:
        """The step `to_json` wrote; None for anything else (the journal is written where learner code runs,
        so it may hold anything)."""
        if not isinstance(data, dict):
            return None
        kind = data.get("kind")
        if kind == "preamble":
            return cls.preamble()
        if kind == "cell":
            try:
                return cls.cell(data.get("index"))
            except ValueError:
                return None
        if kind == "call" and isinstance(data.get("key"), str):
            return cls.call(data["key"])
        return None


@dataclass
class ExerciseGrade:
    """One exercise of one submission: points (0 or 1), the verdict in words, and notes for the instructor.

    mistake: the name of the known mistake (or known error) the checks recognised, None if none was named
    (see `attn_course_tools.grading.judging.mistake_names`); the class report counts them.
    integrity: for the instructor only, never in the student's feedback: why this exercise is an integrity
    case (the learner's code reached for the course's own answers: fishing in the interpreter, opening the
    course's source files), with the evidence; None if it is not one. The integrity report lists them.
    """

    key: str
    name: str
    points: int
    status: str
    message: str
    notes: list[str] = field(default_factory=list)
    mistake: str | None = None
    integrity: str | None = None


@dataclass
class SubmissionGrade:
    """One notebook: who, what each exercise got, and anything that went wrong while grading it.

    notes: what the student reads about the whole notebook; cached: whether this grade was read from the
    grade cache instead of graded in this run; instructor_notes: what only the instructor reads (the
    gradebook's notes), about this run (e.g. the full paths of the files it superseded): never cached.
    """

    path: Path
    student: str
    sha256: str
    exercises: dict[str, ExerciseGrade]
    notes: list[str]
    seconds: float
    cached: bool = False
    instructor_notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(g.points for g in self.exercises.values())

    def to_json(self) -> dict[str, Any]:
        """What the grade says about the notebook's content: everything but its path, student and `cached`,
        which belong to the run that reads it back."""
        return {
            "sha256": self.sha256,
            "exercises": [asdict(g) for g in self.exercises.values()],
            "notes": list(self.notes),
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path, student: str) -> SubmissionGrade:
        """The grade `to_json` wrote, for the file `path` of `student`; marked `cached`."""
        exercises = {g["key"]: ExerciseGrade(**g) for g in data["exercises"]}
        notes, seconds = list(data["notes"]), data["seconds"]
        return cls(path, student, data["sha256"], exercises, notes, seconds, cached=True)


def best(submissions: Sequence[SubmissionGrade], key: str) -> ExerciseGrade | None:
    """The best grade of exercise `key` among one student's submissions, or None if none answers it."""
    found = best_of(submissions, key)
    return None if found is None else found[1]


def best_of(
    submissions: Sequence[SubmissionGrade],
    key: str,
    value: Callable[[SubmissionGrade, ExerciseGrade], Any] | None = None,
) -> tuple[SubmissionGrade, ExerciseGrade] | None:
    """(the submission, its grade) of the best attempt at exercise `key` among one student's submissions,
    or None if none answers it. value(submission, grade): what "best" maximises (default: the points); of
    equal ones the first counts."""
    candidates = [(s, s.exercises[key]) for s in submissions if key in s.exercises]
    rank = value or (lambda s, g: g.points)
    return max(candidates, key=lambda sg: rank(*sg)) if candidates else None


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


@dataclass(frozen=True)
class Mark:
    """One exercise of one gradebook row, as the gradebook and the feedback show it.

    key: the exercise; possible: what it is worth (the rules' points, 1 by default); points: what the row
    earns on it before any late penalty (the attempt's points times `possible`, or the instructor's
    override), None if no file answers it; grade, file: the attempt that counts and the file it is in
    (None if none); others: how many more of the student's files answer it; factor: the late factor of
    `file` (1 if on time); override: the instructor's points, if any.
    """

    key: str
    possible: float
    points: float | None = None
    grade: ExerciseGrade | None = None
    file: SubmissionGrade | None = None
    others: int = 0
    factor: float = 1.0
    override: Override | None = None

    @property
    def earned(self) -> float | None:
        """The points after the late penalty, None if not answered."""
        return None if self.points is None else self.points * self.factor


@dataclass(frozen=True)
class Score:
    """What one gradebook row scores: each exercise's `Mark`, and the late sentence of each late file
    ({file name: sentence})."""

    marks: dict[str, Mark]
    late: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """The points earned, after the late penalties."""
        return sum(m.earned or 0.0 for m in self.marks.values())

    @property
    def lost(self) -> float:
        """The points the late penalties took off."""
        return sum((m.points or 0.0) - (m.earned or 0.0) for m in self.marks.values())

    @property
    def possible(self) -> float:
        """The most the exercises are worth together."""
        return sum(m.possible for m in self.marks.values())


@dataclass(frozen=True)
class Sheet:
    """What shapes a gradebook besides its rows: the exercise columns, whether a roster gave the rows (a name
    and a note column), the course's rules if the instructor gave some (a points-possible line and a late
    column), and Canvas's one total column (`canvas_column`, its name), if asked for."""

    columns: tuple[str, ...]
    with_roster: bool = False
    rules: Rules | None = None
    canvas_column: str | None = None


@dataclass
class Table:
    """A gradebook as its lines: the head (the header, and a points-possible line where the form has one),
    then one line per row with the key that finds the row again (the student id, or the LMS's id)."""

    head: list[list[Any]]
    rows: list[tuple[str, list[Any]]] = field(default_factory=list)


def number(value: float) -> int | float:
    """Points as a gradebook writes them: a whole number without a decimal point, else two decimals."""
    rounded = round(value, 2)
    return int(rounded) if rounded == int(rounded) else rounded
