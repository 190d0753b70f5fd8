"""`make book`: the course as a static HTML book, from the notebooks' stored outputs (nothing is executed).

Sphinx with myst-nb, configured in `book/conf.py`: README, the chapters, the exercises and the guides for
instructors and maintainers, with math, figures, a table of contents, full-text search, and the widgets'
stored state embedded so that the attention explorer and the playground show without a kernel. Every script
and font comes from the build (`attn_course_tools.publish.vendor`). Each notebook is shown as `reading_view`
gives it (the decks start from the same view): none of nbval's cell tags (`nbval-check-output`, ...), and a
chapter's set-up cell (imports and seeding) shows only what it printed.

    python -m attn_course_tools.publish.book --root . --out build/book

`--root` is the course's checkout (by default the current directory): the book is made of its README,
notebooks/, exercises/ and guides (docs/, ARCHITECTURE.md), configured by its book/ folder.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

from attn_course_tools.checkout import add_root_option, parsed_checkout
from attn_course_tools.publish.vendor import BOOK, NPM_CACHE, add_cache_option, vendor, widget_fonts_beside

#: nbval's instructions to the test run, as the cell tags it reads (nbval.plugin's `metadata_tags`): under
#: `--nbval-lax` only a cell tagged `nbval-check-output` has its stored output compared with a fresh run.
NBVAL_TAGS = frozenset({"nbval-check-output", "nbval-ignore-output", "nbval-skip", "nbval-raises-exception"})
#: The same instructions in nbval's older form, a comment line (`# NBVAL_CHECK_OUTPUT`); the course's
#: notebooks use the tags (tests/notebooks/test_textbook.py), a lecturer's own notebook may still hold these.
NBVAL_MARK = re.compile(r"^[ \t]*#[ \t]*NBVAL_\w*[^\n]*(?:\n|\Z)", re.MULTILINE)
HIDE_INPUT = "remove-input"  # the cell tag myst-nb (and the decks' exporter) honours: output shown, code not
SET_UP_STATEMENTS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Expr)
# attn_course.training.runtime's: what a chapter's set-up cell calls after its imports
SEEDING = "seed_everything"


def without_nbval_marks(source: str) -> str:
    """A code cell's source without nbval's `# NBVAL_...` comment lines."""
    return NBVAL_MARK.sub("", source)


def without_nbval_tags(cell: nbformat.NotebookNode) -> None:
    """Drop nbval's tags from a cell's metadata (in place); a cell left with no tag keeps no `tags` list."""
    tags = cell.metadata.get("tags")
    if tags is None:
        return
    kept = [tag for tag in tags if tag not in NBVAL_TAGS]
    if kept:
        cell.metadata["tags"] = kept
    else:
        del cell.metadata["tags"]


def is_set_up_cell(source: str) -> bool:
    """Whether a code cell only sets a chapter up: its imports, then perhaps seeding and plain settings.

    Such a cell imports, holds only imports, assignments and calls (no definition, loop or branch), and is
    nothing but imports unless it calls `seed_everything`: a first cell that loads and prints results is read.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax (magics): not a plain set-up cell
        return False
    imports = [statement for statement in tree.body if isinstance(statement, (ast.Import, ast.ImportFrom))]
    if not imports or not all(isinstance(statement, SET_UP_STATEMENTS) for statement in tree.body):
        return False
    return len(imports) == len(tree.body) or SEEDING in _called_names(tree)


def _called_names(tree: ast.AST) -> set[str]:
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return {getattr(func, "id", None) or getattr(func, "attr", None) for func in calls}


def reading_view(nb: nbformat.NotebookNode, chapter: bool = True) -> nbformat.NotebookNode:
    """A copy of a notebook as the book and the decks show it; the notebook itself is untouched.

    Code cells lose nbval's tags (and its older `# NBVAL_...` comment lines). In a chapter, the first code
    cell, if `is_set_up_cell`, is tagged `remove-input`: its imports are hidden and what it printed (e.g.
    "device: cpu") stays.
    """
    view = copy.deepcopy(nb)
    code_cells = [cell for cell in view.cells if cell.cell_type == "code"]
    for cell in code_cells:
        without_nbval_tags(cell)
        cell.source = without_nbval_marks(cell.source)
    if chapter and code_cells and is_set_up_cell(code_cells[0].source):
        tags = code_cells[0].metadata.setdefault("tags", [])
        if HIDE_INPUT not in tags:
            tags.append(HIDE_INPUT)
    return view


def read_for_book(app, docname: str, source: list[str]) -> None:
    """Sphinx's `source-read` hook: a notebook is parsed as its `reading_view` (chapters: `notebooks/`)."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = nbformat.reads(source[0], as_version=4)
    view = reading_view(nb, chapter=docname.startswith("notebooks/"))
    source[0] = nbformat.writes(view)


def build_book(root: Path, out: Path, npm_cache: Path) -> Path:
    """Sphinx + myst-nb over the pages of the checkout `root` (README, chapters, exercises, guides), into
    `out`; returns its index page. The scripts the pages load come from the tarballs in `npm_cache` (fetched
    if missing)."""
    assets = vendor(out.parent / (out.name + "-vendor"), BOOK, cache=npm_cache)
    run_sphinx(root, out, assets, conf=root / "book")
    _widget_fonts_beside_pages(out, assets)
    (out / "index.html").write_text(_redirect("book/index.html"), encoding="utf-8")
    return out / "index.html"


def run_sphinx(source: Path, out: Path, assets: Path, conf: Path) -> None:
    """Sphinx over the repository (or a folder laid out like it) at `source`, configured by the folder `conf`
    (the checkout's book/, with conf.py), its scripts and fonts from `assets`.

    Every page is read again (`-E`): how a notebook is shown lives in this module, which Sphinx does not
    watch, so a page it kept from the last build could show an older view.
    """
    env = {**os.environ, "ATTN_COURSE_VENDOR": str(assets)}
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(conf), "-E", "-W", "--keep-going"]
    command += ["-q", "-d", str(out.parent / (out.name + "-doctrees")), str(source), str(out)]
    subprocess.run(command, check=True, env=env, cwd=source)


def _widget_fonts_beside_pages(out: Path, assets: Path) -> None:
    pages = [page for page in out.rglob("*.html") if "embed-amd.js" in page.read_text(encoding="utf-8")]
    for folder in {page.parent for page in pages}:
        widget_fonts_beside(folder, assets)


def _redirect(target: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0; url={target}"><link rel="icon" href="data:,">'
        "<title>attn-course</title></head>"
        f'<body><a href="{target}">attn-course</a></body></html>\n'
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m attn_course_tools.publish.book", description=__doc__.splitlines()[0]
    )
    add_root_option(parser)
    parser.add_argument("--out", type=Path, help="the book's folder (default: build/book under --root)")
    add_cache_option(parser)
    args = parser.parse_args(argv)
    root = parsed_checkout(parser, args.root, "book", "notebooks")
    out = (args.out or root / "build" / "book").resolve()
    print(f"book: {build_book(root, out, (args.npm_cache or root / NPM_CACHE).resolve())}")


if __name__ == "__main__":
    main()
