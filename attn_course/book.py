"""`make book`: the course as a static HTML book, from the notebooks' stored outputs (nothing is executed).

Sphinx with myst-nb, configured in `book/conf.py`: README, the chapters and the exercises, with math, figures,
a table of contents, full-text search, and the widgets' stored state embedded so that the attention explorer
and the playground show without a kernel. Every script and font comes from the build (`attn_course.vendor`).

    python -m attn_course.book --out build/book
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from attn_course.vendor import BOOK, vendor, widget_fonts_beside

ROOT = Path(__file__).resolve().parents[1]
BOOK_CONF = ROOT / "book"


def build_book(out: Path) -> Path:
    """Sphinx + myst-nb over README, the chapters and the exercises, into `out`; returns its index page."""
    assets = vendor(out.parent / (out.name + "-vendor"), BOOK)
    env = {**os.environ, "ATTN_COURSE_VENDOR": str(assets)}
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(BOOK_CONF), "-W", "--keep-going", "-q"]
    command += ["-d", str(out.parent / (out.name + "-doctrees")), str(ROOT), str(out)]
    subprocess.run(command, check=True, env=env, cwd=ROOT)
    _widget_fonts_beside_pages(out, assets)
    (out / "index.html").write_text(_redirect("book/index.html"), encoding="utf-8")
    return out / "index.html"


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
    parser = argparse.ArgumentParser(prog="python -m attn_course.book", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book")
    args = parser.parse_args(argv)
    print(f"book: {build_book(args.out.resolve())}")


if __name__ == "__main__":
    main()
