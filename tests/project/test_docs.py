"""The guides: their measured tables are what `attn_course_tools.docs` writes from the results on record, and
every relative link in README, ARCHITECTURE and docs/ leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from attn_course_tools import docs

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A Markdown link or image, `[text](target)` / `![alt](target)`, outside code.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def relative_links(text: str) -> list[str]:
    """The link targets of Markdown `text` that point into the repository (no scheme, no bare anchor),
    with their `#anchor`; links inside code blocks and code spans are not links."""
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    targets = [match[1] for match in LINK.finditer(prose)]
    return [unquote(t) for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of Markdown `text`: lower case, punctuation dropped, spaces as
    hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", FENCE.sub("", text), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_relative_links_finds_links_and_images_but_not_urls_anchors_or_code():
    text = (
        "See [the guide](docs/maintainers.md#tests), ![a picture](docs/layers.svg), [a site](https://x.org),"
        " [a section](#tests), `[not](a-link.md)` and\n```\n[nor](this.md)\n```\n"
    )
    assert relative_links(text) == ["docs/maintainers.md#tests", "docs/layers.svg"]


def test_anchors_are_githubs_heading_ids():
    assert anchors("# How it works\n## Claims that hold, on any machine\n```\n# not a heading\n```\n") == {
        "how-it-works",
        "claims-that-hold-on-any-machine",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_that_exists_and_to_a_heading_it_names(page: Path):
    broken = []
    for link in relative_links(page.read_text(encoding="utf-8")):
        path, _, anchor = link.partition("#")
        target = page.parent / path
        if not target.exists():
            broken.append(link)
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text(encoding="utf-8")):
            broken.append(link)
    assert broken == [], f"{page.relative_to(ROOT)} links to files or headings that do not exist: {broken}"


def test_readme_is_the_learners_page_of_at_most_150_lines_and_links_both_guides():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    assert {"docs/instructors.md", "docs/maintainers.md", "ARCHITECTURE.md"} <= set(relative_links(readme))


def test_readme_keeps_the_tatoeba_attribution():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "Tatoeba project" in readme and "Creative Commons Attribution 2.0 France" in readme


def test_the_guides_tables_are_what_the_generator_writes_from_the_results():
    assert docs.stale_pages(ROOT) == [], "run python -m attn_course_tools.docs and commit the pages"


def test_every_page_with_a_generated_region_is_one_the_generator_writes():
    pages = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in PAGES}
    assert [name for name, text in pages.items() if "<!-- generated:" in text] == list(docs.PAGES)


def test_the_generator_fills_a_region_and_keeps_the_text_around_it():
    page = "before\n<!-- generated: robustness -->\nstale\n<!-- end generated -->\nafter\n"
    written = docs.render(page, ROOT)
    assert written.startswith("before\n<!-- generated: robustness -->\n| claim | bar |")
    assert written.endswith("|\n<!-- end generated -->\nafter\n") and "stale" not in written
    assert docs.render(written, ROOT) == written


def test_the_generator_refuses_a_region_it_does_not_know():
    with pytest.raises(ValueError, match="no such region"):
        docs.render("<!-- generated: nonsense -->\n<!-- end generated -->\n", ROOT)


def test_a_stale_page_is_named(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").symlink_to(ROOT / "benchmarks")
    (tmp_path / "docs" / "maintainers.md").write_text(
        "<!-- generated: bench-table -->\nold figures\n<!-- end generated -->\n", encoding="utf-8"
    )
    assert docs.stale_pages(tmp_path) == ["docs/maintainers.md"]
