"""Find and read submissions without running them: the files, the notebook's JSON (each file read once),
exercise cells, chapters, metadata's student."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attn_course_exercises as checks
from attn_course_tools.grading.records import Limits

_MARKER = re.compile(r"^\s*#\s*EXERCISE\s+(ch\d+\.q\d+)\b", re.MULTILINE)
_FILENAME_CHAPTER = re.compile(r"ex0*(\d+)")


@dataclass
class ExerciseCell:
    """A code cell that answers an exercise: its 0-based index in the notebook, its source, the exercise."""

    index: int
    source: str
    exercise: str


@dataclass(frozen=True)
class Submission:
    """One submission file, read once: the grader's modules pass this value along and never open the file
    again.

    path: the file; notebook: its JSON, or None if it cannot be graded; problem: why not, or None;
    sha256: the digest of the bytes read (of no bytes where the file was not read: too large, unreadable);
    read: whether its bytes were read (only then is its grade remembered by the grade cache).
    """

    path: Path
    notebook: dict | None
    problem: str | None
    sha256: str
    read: bool


def read_submission(path: str | Path, limits: Limits) -> Submission:
    """Read the file at `path` once, without running anything in it (see `Submission`)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limits.max_notebook_mb * 2**20:
            why = f"the file is {size / 2**20:.0f} MB, more than the {limits.max_notebook_mb} MB limit"
            return Submission(path, None, why, hashlib.sha256(b"").hexdigest(), False)
        raw = path.read_bytes()
    except OSError as exc:
        why = f"the file cannot be read ({exc.strerror or exc})"
        return Submission(path, None, why, hashlib.sha256(b"").hexdigest(), False)
    notebook, problem = _parse(raw)
    return Submission(path, notebook, problem, hashlib.sha256(raw).hexdigest(), True)


def _parse(raw: bytes) -> tuple[dict | None, str | None]:
    """(notebook, None), or (None, why the bytes are not a notebook)."""
    try:
        notebook = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not valid notebook JSON: not UTF-8 text ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"not valid notebook JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None, "not a Jupyter notebook: the JSON has no list of cells"
    return notebook, None


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


def _source(cell: Any) -> str | None:
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return source if isinstance(source, str) else None


def _defines(source: str, name: str) -> bool:
    """Whether the code defines `name` at top level (def, class or assignment), read without running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return True
    return False


def exercise_cells(notebook: dict, keys: Sequence[str]) -> tuple[list[ExerciseCell], list[str]]:
    """The cells to run, in notebook order, and notes on how they were found."""
    cells, notes, found = [], [], set()
    sources = [(i, _source(c), c) for i, c in enumerate(notebook["cells"])]
    for i, source, cell in sources:
        if source is None:
            continue
        match = _MARKER.search(source)
        meta = (
            cell.get("metadata", {}).get("attn_course", {}) if isinstance(cell.get("metadata"), dict) else {}
        )
        key = match.group(1) if match else meta.get("exercise") if isinstance(meta, dict) else None
        if key in keys:
            cells.append(ExerciseCell(i, source, key))
            found.add(key)
    for key in keys:
        if key in found:
            continue
        name = checks.EXERCISES[key].name
        for i, source, _ in sources:
            if source is not None and _defines(source, name):
                cells.append(ExerciseCell(i, source, key))
                notes.append(
                    f"{key}: no cell starts with `# EXERCISE {key}`; graded the definition of "
                    f"`{name}` in cell {i + 1}"
                )
                found.add(key)
    cells.sort(key=lambda c: c.index)
    return cells, notes


def chapters_of(notebook: dict | None, path: Path) -> list[int]:
    """The chapters a submission answers: from its markers, else its metadata, else its file name."""
    found: set[int] = set()
    if notebook is not None:
        for cell in notebook["cells"]:
            source = _source(cell)
            if source:
                found.update(int(m.group(1)[2 : m.group(1).index(".")]) for m in _MARKER.finditer(source))
        meta = notebook.get("metadata", {})
        chapter = (
            meta.get("attn_course", {}).get("chapter")
            if isinstance(meta, dict) and isinstance(meta.get("attn_course"), dict)
            else None
        )
        if not found and isinstance(chapter, int):
            found.add(chapter)
    if not found:
        match = _FILENAME_CHAPTER.search(path.stem)
        if match:
            found.add(int(match.group(1)))
    return sorted(c for c in found if c in checks.chapters())


def metadata_student(notebook: dict | None) -> str | None:
    """The student the notebook's metadata names (metadata.attn_course.student), or None."""
    meta = notebook.get("metadata", {}) if notebook is not None else None
    value = (
        meta.get("attn_course", {}).get("student")
        if isinstance(meta, dict) and isinstance(meta.get("attn_course"), dict)
        else None
    )
    return value.strip() if isinstance(value, str) and value.strip() else None
