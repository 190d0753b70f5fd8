"""A two-chapter course laid out like the repository, for testing the book and the decks on known content.

Its first chapter has a set-up cell, a cell checked by nbval, a code line far longer than a column, a display
equation wider than a column and an SVG figure from `notebooks/figures/`; the second is an appendix, `12_...`,
that the book's table of contents and the decks must pick up by their glob alone.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

SET_UP = """import math

import torch

from attn_course.training.runtime import get_device, seed_everything

seed_everything(0)
device = get_device()
print("device:", device.type)"""
CHECKED = '# NBVAL_CHECK_OUTPUT\nprint("checked:", 1 + 1)'
LONG_LINE = "long_line_end = " + " + ".join(f"weight_{i}" for i in range(30))
SCORES = " + ".join(rf"\operatorname{{softmax}}(q_{{{i}}} k_{{{i}}}^\top)" for i in range(6))
WIDE_EQUATION = f"$$\n{SCORES}\n$$"  # about 1.3 columns of the book at its default width
FIGURE = "figures/fixture_diagram.svg"
SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="240" height="80" viewBox="0 0 240 80">
  <rect x="10" y="10" width="90" height="60" fill="none" stroke="black"/>
  <text x="20" y="45">encoder</text>
</svg>
"""
INDEX = """# Fixture course

```{toctree}
:caption: Chapters
:glob:

/notebooks/*
```
"""


def stream(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def chapter() -> nbformat.NotebookNode:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("# Chapter 1 — Fixture\n\nA chapter the tests know by heart."),
        code(SET_UP, outputs=[stream("device: cpu\n")]),
        md(f"## 1. Equation and figure\n\nThe scores, summed:\n\n{WIDE_EQUATION}\n\n![A box]({FIGURE})"),
        code(CHECKED, outputs=[stream("checked: 2\n")]),
        code(LONG_LINE + "\nprint(long_line_end)", outputs=[stream("x\n")]),
    ]
    return _notebook(cells)


def appendix() -> nbformat.NotebookNode:
    md = nbformat.v4.new_markdown_cell
    return _notebook([md("# Appendix — Fixture\n\nAn appendix added after the chapters.")])


def _notebook(cells: list) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb  # slide types: the decks' defaults (the set-up cell is skipped)


def write_course(root: Path) -> list[Path]:
    """Write the fixture course under `root` (book/, notebooks/, notebooks/figures/); return its notebooks."""
    (root / "book").mkdir(parents=True)
    (root / "book" / "index.md").write_text(INDEX, encoding="utf-8")
    (root / "notebooks" / "figures").mkdir(parents=True)
    (root / "notebooks" / FIGURE).write_text(SVG, encoding="utf-8")
    paths = [root / "notebooks" / "01_fixture.ipynb", root / "notebooks" / "12_appendix.ipynb"]
    for path, nb in zip(paths, [chapter(), appendix()], strict=True):
        nbformat.write(nb, path)
    return paths
