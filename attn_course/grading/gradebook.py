"""Grade a batch of submissions and write the results: a CSV gradebook and one feedback file per student."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attn_course import checks
from attn_course.grading.identity import ALIASES, Identities, identify
from attn_course.grading.judging import check_hidden, grade_submission
from attn_course.grading.reading import chapters_of, metadata_student, read_notebook
from attn_course.grading.records import ExerciseGrade, Limits, SubmissionGrade
from attn_course.grading.sandbox import Sandboxes


def collect(paths: Iterable[str | Path]) -> list[Path]:
    """Submission files: each path itself, or the .ipynb files anywhere inside a folder (sorted, skipping
    hidden folders such as .ipynb_checkpoints); a file named twice is listed once."""
    found: dict[Path, Path] = {}
    for p in map(Path, paths):
        files = sorted(_notebooks_under(p)) if p.is_dir() else [p]
        for file in files:
            found.setdefault(file.resolve(), file)
    return list(found.values())


def _notebooks_under(folder: Path) -> list[Path]:
    return [
        p for p in folder.rglob("*.ipynb") if not any(s.startswith(".") for s in p.relative_to(folder).parts)
    ]


def _merge(grades: list[SubmissionGrade]) -> dict[str, list[SubmissionGrade]]:
    by_student: dict[str, list[SubmissionGrade]] = {}
    for g in grades:
        by_student.setdefault(g.student, []).append(g)
    return by_student


def _best(submissions: list[SubmissionGrade], key: str) -> ExerciseGrade | None:
    candidates = [s.exercises[key] for s in submissions if key in s.exercises]
    return max(candidates, key=lambda g: g.points) if candidates else None


def write_gradebook(grades: Sequence[SubmissionGrade], columns: Sequence[str], path: str | Path) -> Path:
    """CSV: one row per student, one column per exercise (points; empty if not submitted), and total."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *columns, "total"])
        for student, submissions in sorted(_merge(list(grades)).items()):
            row, total = [student], 0
            for key in columns:
                best = _best(submissions, key)
                row.append("" if best is None else best.points)
                total += 0 if best is None else best.points
            writer.writerow([*row, total])
    return path


def _safe_name(student: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"


def write_feedback(
    student: str, submissions: Sequence[SubmissionGrade], columns: Sequence[str], folder: str | Path
) -> Path:
    """A Markdown file for one student: a table of points, then each exercise's verdict and notes.

    Lists the exercises of `columns` that the student's submissions were graded on.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    graded = [key for key in columns if _best(list(submissions), key) is not None]
    lines = [f"# Feedback for {student}", ""]
    for s in submissions:
        lines.append(f"Submission `{s.path.name}` (sha256 {s.sha256[:12]}), graded in {s.seconds:.1f} s.")
        lines += [f"- {note}" for note in s.notes]
    lines += ["", "| Exercise | Points | Verdict |", "| --- | --- | --- |"]
    verdicts = {checks.PASSED: "correct", checks.NOT_ATTEMPTED: "not attempted"}
    for key in graded:
        best = _best(list(submissions), key)
        lines.append(f"| {key} `{best.name}` | {best.points}/1 | {verdicts.get(best.status, 'incorrect')} |")
    total = sum(_best(list(submissions), key).points for key in graded)
    lines += ["", f"**Total: {total} of {len(graded)}**", ""]
    for key in graded:
        best = _best(list(submissions), key)
        verdict = verdicts.get(best.status, "incorrect").capitalize()
        lines += [
            f"## {key}: {checks.EXERCISES[key].title}",
            "",
            f"**{verdict}.** " + best.message.replace("\n", "  \n"),
            "",
        ]
        lines += [f"- Note: {note}" for note in best.notes]
        if best.notes:
            lines.append("")
    path = folder / f"{_safe_name(student)}.md"
    path.write_text("\n".join(lines))
    return path


def _exercises(
    paths: list[Path], chapters: Sequence[int] | None, limits: Limits
) -> tuple[list[str], dict[Path, list[str]]]:
    """The gradebook's columns and the exercises each submission is graded on."""
    if chapters is not None:
        keys = [e.key for c in chapters for e in checks.chapter(c)]
        return keys, {path: keys for path in paths}
    # each notebook is graded on the chapters it answers, else on those of the batch
    answered = {path: chapters_of(read_notebook(path, limits)[0], path) for path in paths}
    batch = sorted({c for found in answered.values() for c in found})
    per_path = {
        path: [e.key for c in (found or batch) for e in checks.chapter(c)] for path, found in answered.items()
    }
    keys = [k for k in checks.EXERCISES if any(k in v for v in per_path.values())]
    return keys, per_path


def students(paths: Sequence[Path], id_from: str, limits: Limits) -> Identities:
    """Who each file belongs to, by the rule `id_from` (reading the notebooks' metadata if it asks)."""
    metadata = None
    if ALIASES.get(id_from, id_from) == "metadata":
        metadata = {path: metadata_student(read_notebook(path, limits)[0]) for path in paths}
    return identify(paths, id_from, metadata)


def grade(
    paths: Iterable[str | Path],
    *,
    out: str | Path,
    feedback: str | Path | None = None,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
    id_from: str = "auto",
    announce: Callable[[Identities], Any] | None = None,
    progress: Callable[[SubmissionGrade], Any] | None = None,
) -> list[SubmissionGrade]:
    """Grade every submission, write the CSV gradebook to `out` and one Markdown file per student.

    feedback: the folder for the feedback files (default: next to `out`, named after it, e.g.
    grades_feedback/). chapters: the exercises to grade (default: each notebook is graded on the chapters
    its exercise cells belong to, or, if it shows none -- no markers, unreadable -- on the batch's).
    id_from: the rule for student ids, one of `identity.RULES` (see `attn_course.grading.identity`); files
    that one student resubmitted are graded once, the latest; files the rule cannot tell apart raise
    `IdentityError` before anything is graded. announce(identities) is called once, before grading, and
    progress(submission_grade) after each submission (the command line prints them).
    """
    if hidden is not None:
        check_hidden(hidden)
    identities = students(collect(paths), id_from, limits)
    if announce is not None:
        announce(identities)
    paths = list(identities.students)
    keys, per_path = _exercises(paths, chapters, limits)
    results = []
    with Sandboxes() as sandboxes:
        for path in paths:
            student = identities.students[path]
            result = grade_submission(
                path, keys=per_path[path], hidden=hidden, limits=limits, student=student, sandboxes=sandboxes
            )
            result.notes += [
                f"`{old}` was also received; this later submission was graded instead."
                for old, new in identities.superseded.items()
                if new == path
            ]
            results.append(result)
            if progress is not None:
                progress(result)
    out = Path(out)
    write_gradebook(results, keys, out)
    folder = Path(feedback) if feedback is not None else out.with_name(f"{out.stem}_feedback")
    for student, submissions in _merge(results).items():
        write_feedback(student, submissions, keys, folder)
    return results
