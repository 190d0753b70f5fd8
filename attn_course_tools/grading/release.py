"""The release for graded work: the exercise notebooks with the model answers switched off, for students.

    paths = build_release("release/", exercises="exercises/", chapters=[1, 2])

Each notebook of the course's exercises folder is written as it is -- prose, exercise cells with their
`# EXERCISE` markers, check cells, hints, metadata, so that `attn-course grade` finds and grades the cells
as usual -- with three changes: the set-up cell asks for graded mode (`checks.chapter(N, graded=True)`,
whose `solution()` says that solutions are off), the `# qK.solution()` lines are removed, and stored
outputs are cleared. A README.md for the instructor goes with them.

Graded mode is a switch in the set-up cell rather than a flag in the notebook's metadata: a kernel cannot
reliably find the notebook it runs in, while the set-up cell is plain code anyone can read. It keeps honest
learners from revealing answers by accident; the guarantee is the grader's: in its sandbox no exercise has
a model answer (`attn_course_tools.grading.sandbox_child`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import attn_course_exercises as checks

_CHAPTER = re.compile(r"ex0*(\d+)")
_SETUP = re.compile(r"checks\.chapter\((\d+)\)")
_SOLUTION_LINE = re.compile(r"^\s*#?\s*q\d+\.solution\(\)\s*$")
_SOLUTION_PROSE = "`qK.hint()` gives a nudge, `qK.solution()` shows a model answer."
_GRADED_PROSE = "`qK.hint()` gives a nudge; model answers are off for graded work."


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def graded_notebook(notebook: dict) -> dict:
    """The notebook for graded work (a new dict): graded set-up, no `qK.solution()` lines, no outputs, and no
    stored widget state (a practice widget's state holds the lines of a model answer)."""
    cells = []
    for cell in json.loads(json.dumps(notebook))["cells"]:
        source = _source(cell)
        if cell["cell_type"] == "code":
            source = _SETUP.sub(r"checks.chapter(\1, graded=True)", source)
            source = "\n".join(line for line in source.split("\n") if not _SOLUTION_LINE.match(line))
            cell["outputs"], cell["execution_count"] = [], None
            if not source.strip():
                continue
        else:
            source = source.replace(_SOLUTION_PROSE, _GRADED_PROSE)
        cell["source"] = source.splitlines(True)
        cells.append(cell)
    copied = json.loads(json.dumps(notebook))
    metadata = {key: value for key, value in copied.get("metadata", {}).items() if key != "widgets"}
    return dict(copied, cells=cells, metadata=metadata)


def _readme(names: Sequence[str]) -> str:
    listed = "\n".join(f"- `{name}`" for name in names)
    return f"""# Exercise notebooks for graded work

Written by `attn-course release`. Hand these notebooks to the students:

{listed}

They are the course's exercise notebooks with the model answers switched off: the set-up cell calls
`checks.chapter(N, graded=True)`, so `qK.solution()` only says that solutions are off, and the
`# qK.solution()` lines are gone. Checks (`qK.check()`) and hints (`qK.hint()`) work as usual.

Grade the returned notebooks with `attn-course grade SUBMISSIONS... --out grades.csv` (or build a
Gradescope autograder with `attn-course gradescope`). The grader runs only the `# EXERCISE` cells, so
students must keep each cell's first line. In its sandbox every exercise's model answer is blanked and
the checks' references refuse calls before any student cell runs, so a cell that runs a solution
(`exec(checks.EXERCISES["ch1.q1"].solution_code)`) scores 0.

Graded mode hides the answers from honest students; it cannot stop a determined one who reads the installed
package's source (the model answers live in `attn_course_exercises/`). Keep `solutions/` out of the release,
and use hidden inputs (`attn-course hidden-template`) so that hard-coded outputs fail.
"""


def build_release(
    out: str | Path, chapters: Sequence[int] | None = None, *, exercises: str | Path
) -> list[Path]:
    """Write the graded notebooks of `chapters` (default: all) and a README.md to `out`; return the notebooks.

    Reads the notebooks from the course's exercises folder `exercises`: FileNotFoundError if it does not
    exist, ValueError if it holds none of the chapters' notebooks.
    """
    folder = Path(exercises)
    if not folder.is_dir():
        raise FileNotFoundError(f"the exercises folder {folder} does not exist")
    wanted = sorted(set(chapters or checks.chapters()))
    for chapter in wanted:
        checks.chapter(chapter)  # ValueError for a chapter without exercises
    sources = [p for p in sorted(folder.glob("ex*.ipynb")) if int(_CHAPTER.match(p.name)[1]) in wanted]
    if not sources:
        raise ValueError(f"no exercise notebooks for chapters {wanted} in {folder}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sources:
        target = out / path.name
        notebook = graded_notebook(json.loads(path.read_text(encoding="utf-8")))
        target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    (out / "README.md").write_text(_readme([p.name for p in written]), encoding="utf-8")
    return written
