"""The class report: which exercises the class attempted and solved, and which named mistakes it made.

Written next to the gradebook after every grading run (cached grades carry their mistake's name, so a run
that grades only the new submissions still reports the whole class): ``grades_report.md`` for the teacher,
``grades_report.csv`` for a spreadsheet and ``grades_mistakes.png``, a bar chart of the named mistakes. The
mistakes that the largest share of the class made stand first, each with its message and the chapter
section that teaches the point (`attn_course_tools.grading.sections`).
"""

from __future__ import annotations

import csv
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import attn_course_exercises as checks
from attn_course_tools.grading.gradebook import as_text_cell
from attn_course_tools.grading.records import ExerciseGrade
from attn_course_tools.grading.sections import section

#: The row of failures that no known mistake explains.
OTHER = "(failed, no named mistake)"

#: How many mistakes the report puts first, to re-teach.
RETEACH = 3


class ReportPaths(NamedTuple):
    """Where the class report goes: Markdown, CSV and the bar chart (PNG); the similarity report
    (`attn_course_tools.grading.similarity`) and the integrity report
    (`attn_course_tools.grading.integrity`)."""

    markdown: Path
    csv: Path
    figure: Path
    similarity: Path
    integrity: Path


def report_paths(out: str | Path) -> ReportPaths:
    """The reports' files next to the gradebook `out`: for grades.csv, grades_report.md, grades_report.csv,
    grades_mistakes.png, grades_similarity.md and grades_integrity.md."""
    out = Path(out)
    return ReportPaths(
        out.with_name(f"{out.stem}_report.md"),
        out.with_name(f"{out.stem}_report.csv"),
        out.with_name(f"{out.stem}_mistakes.png"),
        out.with_name(f"{out.stem}_similarity.md"),
        out.with_name(f"{out.stem}_integrity.md"),
    )


@dataclass
class ExerciseSummary:
    """One exercise across the class: who attempted and solved it, and who made each mistake.

    mistakes: {mistake name: students}, most students first, with OTHER for failures no mistake explains;
    messages: {mistake name: the checks' message about it}.
    """

    key: str
    attempted: list[str] = field(default_factory=list)
    solved: list[str] = field(default_factory=list)
    mistakes: dict[str, list[str]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)

    def share(self, mistake: str) -> float:
        """The share of the students who attempted the exercise that made `mistake` (0 if none did)."""
        return len(self.mistakes[mistake]) / len(self.attempted) if self.attempted else 0.0


def attempted(grade: ExerciseGrade) -> bool:
    """Whether the student attempted the exercise: an answer cell that is not the untouched stub."""
    return grade.status != checks.NOT_ATTEMPTED and not grade.message.startswith("No answer found")


def summarise(
    grades: Mapping[str, Mapping[str, ExerciseGrade]], keys: Sequence[str]
) -> list[ExerciseSummary]:
    """Each exercise of `keys` across the class. grades: {student: {exercise key: best grade}}."""
    summaries = []
    for key in keys:
        summary = ExerciseSummary(key)
        for student in sorted(grades):
            grade = grades[student].get(key)
            if grade is None or not attempted(grade):
                continue
            summary.attempted.append(student)
            if grade.points:
                summary.solved.append(student)
                continue
            name = grade.mistake or OTHER
            summary.mistakes.setdefault(name, []).append(student)
            if grade.mistake:
                summary.messages.setdefault(name, grade.message.split("\nFailing case")[0].strip())
        named = sorted((m for m in summary.mistakes if m != OTHER), key=lambda m: -len(summary.mistakes[m]))
        summary.mistakes = {m: summary.mistakes[m] for m in [*named, OTHER] if m in summary.mistakes}
        summaries.append(summary)
    return summaries


def to_reteach(summaries: Sequence[ExerciseSummary], n: int = RETEACH) -> list[tuple[ExerciseSummary, str]]:
    """The `n` named mistakes made by the largest share of those who attempted their exercise (then by
    the most students): what to explain again."""
    found = [(s, m) for s in summaries for m in s.mistakes if m != OTHER]
    return sorted(found, key=lambda sm: (-sm[0].share(sm[1]), -len(sm[0].mistakes[sm[1]])))[:n]


def one_line(text: str) -> str:
    """`text` on one line, as a Markdown list item, a table cell or a chart label needs it: a list inside
    it ("remain:\n- The mask ...") runs on with semicolons, other line breaks become spaces."""
    text = re.sub(r":\s*\n\s*[-*]\s+", ": ", text.strip())
    text = re.sub(r"\s*\n\s*[-*]\s+", "; ", text)
    return re.sub(r"\s*[\r\n]+\s*", " ", text)


def _cell(text: str) -> str:
    """`text` as one cell of a Markdown table: one line, its pipes escaped."""
    return one_line(text).replace("|", "\\|")


def _who(students: Sequence[str]) -> str:
    return ", ".join(one_line(s) for s in students)


def _title(key: str) -> str:
    exercise = checks.EXERCISES[key]
    return f"{key} `{exercise.name}`"


def _markdown_head(
    summaries: Sequence[ExerciseSummary], students: int, seconds: Sequence[float]
) -> list[str]:
    median = f"{statistics.median(seconds):.1f} s" if seconds else "none graded"
    lines = [
        "# Class report",
        "",
        f"{students} students, {len(seconds)} submissions; median time per submission {median}.",
        "",
        "## To re-teach first",
        "",
    ]
    reteach = to_reteach(summaries)
    for rank, (summary, mistake) in enumerate(reteach, 1):
        who = summary.mistakes[mistake]
        lines += [
            f"{rank}. **{_title(summary.key)}: {one_line(mistake)}**: {len(who)} of {len(summary.attempted)} "
            f"who attempted it ({summary.share(mistake):.0%}): {_who(who)}.",
            f"   Taught in {section(summary.key) or 'the chapter'}.",
            f"   > {one_line(summary.messages[mistake])}",
            "",
        ]
    if not reteach:
        lines += ["No named mistake was made.", ""]
    return lines


def _markdown_exercise(summary: ExerciseSummary) -> list[str]:
    exercise = checks.EXERCISES[summary.key]
    lines = [
        f"## {summary.key}: {exercise.title}",
        "",
        f"Attempted by {len(summary.attempted)}, solved by {len(summary.solved)}. "
        f"Taught in {section(summary.key) or 'the chapter'}.",
        "",
    ]
    if summary.mistakes:
        lines += ["| Mistake | Students | Share | Who |", "| --- | ---: | ---: | --- |"]
        for mistake, who in summary.mistakes.items():
            share = f"{summary.share(mistake):.0%}"
            lines.append(f"| {_cell(mistake)} | {len(who)} | {share} | {_cell(', '.join(who))} |")
        lines.append("")
        lines += [f"- **{one_line(m)}**: {one_line(text)}" for m, text in summary.messages.items()]
        lines.append("")
    return lines


def markdown(
    summaries: Sequence[ExerciseSummary], students: int, seconds: Sequence[float], figure: str | None
) -> str:
    """The report as Markdown: what to re-teach, a table of the exercises, the chart, then each exercise's
    mistakes with who made them and the checks' message."""
    lines = _markdown_head(summaries, students, seconds)
    lines += [
        "## Exercises",
        "",
        "| Exercise | Attempted | Solved | Named mistakes | Other failures |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for s in summaries:
        named = sum(len(who) for m, who in s.mistakes.items() if m != OTHER)
        other = len(s.mistakes.get(OTHER, []))
        lines.append(f"| {_title(s.key)} | {len(s.attempted)} | {len(s.solved)} | {named} | {other} |")
    lines.append("")
    if figure is not None:
        lines += [f"![Named mistakes per exercise]({figure})", ""]
    nobody = [s.key for s in summaries if not s.attempted]
    if nobody:
        lines += [
            "## Nobody attempted",
            "",
            *(f"- {_title(k)}: {checks.EXERCISES[k].title}" for k in nobody),
            "",
        ]
    for s in summaries:
        if s.attempted:
            lines += _markdown_exercise(s)
    return "\n".join(lines)


CSV_HEADER = [
    "exercise",
    "function",
    "attempted",
    "solved",
    "mistake",
    "students",
    "share",
    "who",
    "message",
    "section",
]


def csv_rows(summaries: Sequence[ExerciseSummary]) -> list[list[object]]:
    """One row per exercise and mistake (a row with no mistake for an exercise without failures)."""
    rows: list[list[object]] = [CSV_HEADER]
    for s in summaries:
        head = [s.key, checks.EXERCISES[s.key].name, len(s.attempted), len(s.solved)]
        for mistake, who in s.mistakes.items() or [("", [])]:
            share = f"{s.share(mistake):.3f}" if mistake else ""
            message = s.messages.get(mistake, "")
            rows.append([*head, mistake, len(who), share, " ".join(who), message, section(s.key)])
    return rows


def bars(summaries: Sequence[ExerciseSummary]) -> list[tuple[int, str, str]]:
    """The chart's bars, fewest students first: (students, label, exercise key); each label one line of at
    most 70 characters, "<key>: <mistake>"."""
    found = sorted(
        (
            (len(who), one_line(f"{s.key}: {m}"), s.key)
            for s in summaries
            for m, who in s.mistakes.items()
            if m != OTHER
        ),
        key=lambda bar: bar[0],
    )
    return [(count, label if len(label) <= 70 else label[:69] + "…", key) for count, label, key in found]


def draw_mistakes(summaries: Sequence[ExerciseSummary], path: Path) -> Path | None:
    """A horizontal bar chart of the named mistakes (students per mistake), the most frequent at the top;
    None (and no file) when there is none."""
    bars_ = bars(summaries)
    if not bars_:
        path.unlink(missing_ok=True)
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    keys = list(dict.fromkeys(key for _, _, key in bars_))
    colours = {key: plt.get_cmap("tab10")(i % 10) for i, key in enumerate(keys)}
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.35 * len(bars_)))
    labels = [label for _, label, _ in bars_]
    ax.barh(labels, [count for count, _, _ in bars_], color=[colours[key] for _, _, key in bars_])
    ax.set_xlabel("students who made the mistake")
    fig.suptitle("Named mistakes: the longest bars are the points to teach again")
    ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_class_report(
    grades: Mapping[str, Mapping[str, ExerciseGrade]],
    keys: Sequence[str],
    seconds: Sequence[float],
    out: str | Path,
) -> ReportPaths:
    """Write the class report next to the gradebook `out` (see `report_paths`); the paths written (the
    figure's even when no mistake needed it: it is then absent).

    grades: {student: {exercise key: best grade}}; keys: the exercises, in the gradebook's order;
    seconds: the grading time of each submission.
    """
    paths = report_paths(out)
    summaries = summarise(grades, keys)
    figure = draw_mistakes(summaries, paths.figure)
    text = markdown(summaries, len(grades), seconds, None if figure is None else paths.figure.name)
    paths.markdown.write_text(text + "\n", encoding="utf-8")
    with paths.csv.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([map(as_text_cell, row) for row in csv_rows(summaries)])  # students' ids
    return paths
