"""The chapters read as a textbook: a drawn diagram where each mechanism is introduced, sources a reader can
look up, and the course's test machinery (bars, margins, run counts, CPU kernels, threads, nbval) kept out
of the reader's way, in the appendix that explains it; no cell of a chapter, exercise or solution carries an
instruction to a tool (nbval's markers are cell tags, ruff's exceptions live in pyproject.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
APPENDIX = ROOT / "notebooks" / "13_how_this_course_checks_itself.ipynb"
READING = [path for path in CHAPTERS if path != APPENDIX]
NOTEBOOKS = [*CHAPTERS, *sorted(ROOT.glob("exercises/*.ipynb")), *sorted(ROOT.glob("solutions/*.ipynb"))]
#: A line a learner would read past: nbval's comment markers (NBVAL_CHECK_OUTPUT, ...), a linter's noqa.
TOOL_COMMENT = re.compile(r"#\s*(NBVAL_\w*|PYTEST_VALIDATE_\w*|noqa\b)", re.IGNORECASE)
#: A source no reader can look up: the notes the course was first written from.
PRIVATE_SOURCE = re.compile(r"\bseed[- ]articles?\b", re.IGNORECASE)
#: Words that only make sense to the course's test harness. Chapter 8, about speed, may talk of kernels
#: and threads; no chapter but the appendix talks of bars, margins, run counts, nbval or robustness.
HARNESS = re.compile(
    r"\b(bars?|margins?|nbval|NBVAL_\w+|robustness|portability|ATEN_CPU_CAPABILITY|avx2|avx512|claim lines?"
    r"|claims?\.check|(\d+|over|in all|all|every|the) runs|runs of the matrix)\b",
    re.IGNORECASE,
)
MACHINE = re.compile(r"\b(CPU kernels?|threads?)\b", re.IGNORECASE)
CLAIM_LINE = re.compile(r"^claim [\w.]+ = ", re.MULTILINE)
IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)")
#: A diagram where the mechanism is introduced, in every chapter that introduces one.
DIAGRAM_CHAPTERS = ("01", "02", "03", "04", "05", "06", "09", "10", "11")


def markdown(path: Path) -> str:
    cells = nbformat.read(path, as_version=4).cells
    return "\n\n".join(cell.source for cell in cells if cell.cell_type == "markdown")


def sentences(text: str) -> list[str]:
    """The prose's sentences and list items, with code blocks and formulas taken out."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.DOTALL)
    text = re.sub(r"\$[^$]*\$", "x", text)  # \bar in a formula is not a bar
    parts = re.split(r"(?<=[.!?])\s+|\n\s*(?:[-*]|\d+\.)\s+|\n\n", text)
    return [part for part in parts if part.strip()]


def harness_share(path: Path) -> tuple[float, list[str]]:
    """The share of a chapter's prose words that stand in sentences about the test harness, and those."""
    prose = markdown(path)
    pattern = [HARNESS] if path.name.startswith("08_") else [HARNESS, MACHINE]
    found = [s for s in sentences(prose) if any(p.search(s) for p in pattern)]
    return sum(len(s.split()) for s in found) / len(prose.split()), found


def test_the_harness_words_are_found_and_formulas_are_not():
    assert harness_share_of("It clears its bar over 30 runs on every CPU kernel. Attention is a lookup.")
    assert not harness_share_of("The score is $h_t^\\top \\bar h_s$, and a progress line counts batches.")


def harness_share_of(text: str) -> bool:
    return any(HARNESS.search(s) or MACHINE.search(s) for s in sentences(text))


@pytest.mark.parametrize("path", READING, ids=lambda p: p.name)
def test_harness_talk_is_at_most_2_percent_of_a_chapters_prose(path):
    share, found = harness_share(path)
    assert share <= 0.02, f"{path.name}: {share:.1%} of the prose is about the test harness: {found}"


@pytest.mark.parametrize("path", READING, ids=lambda p: p.name)
def test_no_chapter_prints_a_claim_line(path):
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            text = output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
            assert not CLAIM_LINE.search(text), f"{path.name}: {text[:200]}"


def test_the_appendix_explains_the_harness_and_shows_the_measured_table():
    prose = markdown(APPENDIX)
    for word in ("bar", "margin", "CPU kernels", "threads", "nbval", "make robustness", "nbval-check-output"):
        assert word in prose, word
    cells = nbformat.read(APPENDIX, as_version=4).cells
    assert any("text/html" in output.get("data", {}) for cell in cells for output in cell.get("outputs", []))


def tool_comments(source: str) -> list[str]:
    """The lines of a cell's source that speak to a tool rather than to the reader."""
    return [line.strip() for line in source.splitlines() if TOOL_COMMENT.search(line)]


def test_tool_comments_are_found_and_teaching_comments_are_not():
    source = "# NBVAL_CHECK_OUTPUT\nimport math  # noqa: F401\nx = 1  #noqa\n# nbval-skip"
    assert tool_comments(source) == ["# NBVAL_CHECK_OUTPUT", "import math  # noqa: F401", "x = 1  #noqa"]
    assert tool_comments("# the weights sum to 1 (no query attends to <pad>)\nprint(weights)") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_cell_carries_an_nbval_marker_or_a_noqa_comment(path):
    found = [
        (index, line)
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells)
        if cell.cell_type == "code" or path != APPENDIX  # the appendix may name the markers it explains
        for line in tool_comments(cell.source)
    ]
    assert found == [], f"{path.name}: (cell, line) of tool comments; use nbval's cell tags, ruff's config"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_chapter_cites_a_source_a_reader_cannot_look_up(path):
    cells = nbformat.read(path, as_version=4).cells
    found = [index for index, cell in enumerate(cells) if PRIVATE_SOURCE.search(cell.source)]
    assert found == [], f"{path.name}: cells {found} cite a seed article; cite the paper or tutorial itself"


def diagrams(path: Path) -> list[tuple[str, str]]:
    """(alt text, file) of every SVG diagram a chapter's markdown shows."""
    return [(m["alt"], m["src"]) for m in IMAGE.finditer(markdown(path)) if m["src"].endswith(".svg")]


def test_every_mechanism_chapter_shows_a_diagram_and_there_are_at_least_12():
    shown = {path.name[:2]: diagrams(path) for path in READING}
    assert [chapter for chapter in DIAGRAM_CHAPTERS if not shown.get(chapter)] == []
    assert len({src for found in shown.values() for _, src in found}) >= 12


@pytest.mark.parametrize("path", READING, ids=lambda p: p.name)
def test_every_diagram_exists_and_has_alt_text(path):
    for alt, src in diagrams(path):
        assert (path.parent / src).is_file(), f"{path.name} shows {src}, which does not exist"
        assert len(alt.split()) >= 5, f"{path.name}: {src} needs an alt text that says what it shows"
