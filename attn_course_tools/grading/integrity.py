"""The integrity report: for the instructor, each student something flagged, with the evidence.

Written next to the gradebook after every grading run (``grades_integrity.md``, `report.report_paths`). It
opens with whether the submissions ran in the OS-level jail, then lists, student by student, every flag:
each answer that looks copied from a classmate or from the course's own code (`similarity`, with the
matching lines side by side: the student's on the left, the classmate's or the course file's and line on
the right), and each exercise the grader found reaching for the course's own answers while grading
(`ExerciseGrade.integrity`, with the file and the grader's words). A student with nothing flagged is not
listed. The report is the instructor's alone: nothing in it reaches a student's feedback or changes a grade.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import attn_course_exercises as checks
from attn_course_tools.grading.records import SubmissionGrade
from attn_course_tools.grading.similarity import COURSE, THRESHOLD, Pair, side_by_side

#: What the report says when the grader did not say whether the submissions ran in the OS-level jail.
JAIL_UNKNOWN = "not reported: the grader did not say whether the submissions ran in it."


class Flag(NamedTuple):
    """One flag of one student: the exercise, a heading that says what was found, and the evidence."""

    key: str
    heading: str
    evidence: list[str]


def _order(key: str) -> int:
    """Where exercise `key` stands in the course (unknown keys last)."""
    return list(checks.EXERCISES).index(key) if key in checks.EXERCISES else len(checks.EXERCISES)


def _text(text: str) -> str:
    """Text from a submission (a name, a path, the grader's words about learner code) made safe to show in
    Markdown: one line, no HTML, no table cell broken."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "&#124;")


def _title(key: str) -> str:
    name = checks.EXERCISES[key].name if key in checks.EXERCISES else "?"
    return f"{key} `{name}`"


def _similarity_flag(pair: Pair, student: str) -> Flag:
    """The flag `pair` raises for `student`, one of its students, with the lines side by side (theirs on
    the left)."""
    on_second = student in pair.second_students
    if pair.second == COURSE:
        heading = f"{_title(pair.key)}: {pair.score:.2f} of the answer is found in {COURSE}"
    else:
        others = [s for s in pair.first_students + pair.second_students if s != student]
        what = "the same code as" if pair.same_code else "similar to"
        heading = f"{_title(pair.key)}: {what} {_text(', '.join(others))} ({pair.score:.2f})"
    return Flag(pair.key, heading, side_by_side(pair, swap=on_second))


def similarity_flags(pairs: Sequence[Pair]) -> dict[str, list[Flag]]:
    """{student: the flags the similar pairs (`similarity.similar_pairs`) raise for them}."""
    flags: dict[str, list[Flag]] = {}
    for pair in pairs:
        for student in pair.first_students + pair.second_students:
            flags.setdefault(student, []).append(_similarity_flag(pair, student))
    return flags


def _grading_flag(submission: SubmissionGrade, key: str, text: str) -> Flag:
    """The flag of exercise `key` of `submission`, which the grader marked as an integrity case: `text`."""
    quoted = [f"> {_text(line)}" if line.strip() else ">" for line in text.splitlines()]
    evidence = [f"In <code>{_text(str(submission.path))}</code>, while grading:", "", *quoted]
    return Flag(key, f"{_title(key)}: reached for the course's own answers", evidence)


def grading_flags(submissions: Mapping[str, Sequence[SubmissionGrade]]) -> dict[str, list[Flag]]:
    """{student: a flag for each exercise of each of their submissions that the grader marked as an
    integrity case}. submissions: {student: their graded submissions}."""
    flags: dict[str, list[Flag]] = {}
    for student, graded in submissions.items():
        for submission in graded:
            for key, grade in submission.exercises.items():
                if grade.integrity is not None:
                    flags.setdefault(student, []).append(_grading_flag(submission, key, grade.integrity))
    return flags


def markdown(
    submissions: Mapping[str, Sequence[SubmissionGrade]],
    pairs: Sequence[Pair],
    jail_note: str | None = None,
    threshold: float = THRESHOLD,
) -> str:
    """The integrity report. submissions: {student: graded submissions}; pairs: the similar pairs found
    among their answers (`similarity.similar_pairs` at `threshold`); jail_note: whether the submissions
    ran in the OS-level jail, in the grader's words (None: not said)."""
    flags = similarity_flags(pairs)
    for student, found in grading_flags(submissions).items():
        flags.setdefault(student, []).extend(found)
    lines = [
        "# Integrity report",
        "",
        f"**OS-level jail:** {jail_note or JAIL_UNKNOWN}",
        "",
        f"{len(submissions)} students graded; {len(flags)} with something flagged. Flagged: answers scoring "
        f"{threshold:.2f} or more against a classmate's or {COURSE} (the similarity report lists them by "
        "exercise), and exercises whose code reached for the course's own answers while it was graded. "
        "Each flag is a reason to look, not a verdict: nothing here changes a grade or reaches a student.",
        "",
    ]
    if not flags:
        return "\n".join([*lines, "Nothing flagged.", ""])
    for student in sorted(flags):
        lines += [f"## {_text(student)}", ""]
        for flag in sorted(flags[student], key=lambda f: _order(f.key)):
            lines += [f"### {flag.heading}", "", *flag.evidence, ""]
    return "\n".join(lines)


def write_integrity_report(
    submissions: Mapping[str, Sequence[SubmissionGrade]],
    pairs: Sequence[Pair],
    path: str | Path,
    *,
    jail_note: str | None = None,
) -> Path:
    """Write the integrity report (`markdown`) to `path`. submissions: {student: graded submissions};
    pairs: `similarity.similar_pairs` of their answers; jail_note: a sentence saying whether (and how)
    the submissions ran in the OS-level jail, None if the grader did not say."""
    path = Path(path)
    path.write_text(markdown(submissions, pairs, jail_note) + "\n", encoding="utf-8")
    return path
