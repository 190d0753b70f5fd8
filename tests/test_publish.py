"""The book and the decks without a browser: slide metadata, a chapter's slide view, the vendored assets.

tests/test_publish_browser.py builds both and opens every page in headless Chromium.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import nbformat
import pytest

from attn_course import slides, vendor

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}


def markdown(source: str) -> dict:
    return nbformat.v4.new_markdown_cell(source)


def code(source: str, outputs: list | None = None) -> dict:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = outputs or []
    return cell


# ----------------------------------------------------------------------------------------- slide metadata


def test_headings_start_slides_and_other_markdown_sub_slides():
    nb = nbformat.v4.new_notebook(
        cells=[
            markdown("# Chapter"),
            code("import torch"),
            markdown("## 1. A section\n\ntext"),
            code("x = 1"),
            code("y = 2"),
            markdown("### A step"),
            markdown("More prose."),
            code("z = 3"),
        ]
    )
    assert slides.annotate_slides(nb) == 8
    kinds = [cell.metadata["slideshow"]["slide_type"] for cell in nb.cells]
    assert kinds == ["slide", "skip", "slide", "-", "subslide", "subslide", "subslide", "-"]


def test_a_lecturer_s_slide_types_are_kept_and_annotating_twice_changes_nothing():
    nb = nbformat.v4.new_notebook(cells=[markdown("# Chapter"), code("import torch"), code("shown = True")])
    nb.cells[1].metadata["slideshow"] = {"slide_type": "slide"}
    assert slides.annotate_slides(nb) == 2
    assert nb.cells[1].metadata["slideshow"]["slide_type"] == "slide"
    assert slides.annotate_slides(nb) == 0


def test_annotate_file_keeps_the_course_s_notebook_layout(tmp_path):
    path = tmp_path / "chapter.ipynb"
    nb = nbformat.v4.new_notebook(cells=[markdown("# Chapter\n\ntext"), code("x = 1\ny = 2")])
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert slides.annotate_file(path) == 2
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["cells"][0]["metadata"]["slideshow"] == {"slide_type": "slide"}
    assert saved["cells"][1]["source"] == "x = 1\ny = 2"  # the cell itself is untouched
    before = path.read_text(encoding="utf-8")
    assert slides.annotate_file(path) == 0
    assert path.read_text(encoding="utf-8") == before


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda path: path.stem)
def test_every_cell_of_every_chapter_carries_its_slide_type(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    kinds = [cell["metadata"].get("slideshow", {}).get("slide_type") for cell in nb["cells"]]
    missing = "cells without a slide type (python -m attn_course.slides annotate)"
    assert set(kinds) <= SLIDE_TYPES, f"{path.name}: {missing}"
    assert kinds[0] == "slide", f"{path.name}: the title cell should open the deck"
    assert kinds.count("slide") >= 3, f"{path.name}: a deck of {kinds.count('slide')} slides"


# ----------------------------------------------------------------------------------------- the slide view

CELL = """## 2. Training

Same data and the same budget as chapter 3's baseline, so that $c_t$ (the context, e.g. of step 3) is
the only difference. The loss is printed per epoch.

$$
e_{tj} = v_a^\\top \\tanh(W_a s_{t-1} + U_a h_j)

\\alpha_{tj} = \\operatorname{softmax}_j(e_{tj})
$$

- one update per batch
- the learning rate halves at epoch 3

```python
train(model)

evaluate(model)
```

A last paragraph for the notes only."""


def test_the_slide_keeps_heading_lead_equations_lists_and_code_and_the_notes_keep_the_prose():
    shown, notes = slides.split_prose(CELL)
    assert shown.startswith("## 2. Training\n\nSame data and the same budget")
    lead = shown.split("\n\n")[1]
    assert lead.endswith("(the context, e.g. of step 3) is the only difference."), lead
    assert "The loss is printed" not in shown
    assert "\\alpha_{tj}" in shown and "e_{tj} = v_a" in shown  # an equation with a blank line inside
    assert "- the learning rate halves at epoch 3" in shown
    assert "train(model)\n\nevaluate(model)\n```" in shown  # a code block with a blank line inside
    assert "A last paragraph" not in shown
    assert notes.startswith("Same data and the same budget")
    assert "The loss is printed per epoch." in notes
    assert notes.endswith("A last paragraph for the notes only.")
    assert "$$" not in notes and "- one update" not in notes


def test_a_full_stop_inside_inline_math_or_code_does_not_end_the_lead():
    shown, _ = slides.split_prose("Weights $w. T$ and `x. Y` stay together. Then more.")
    assert shown == "Weights $w. T$ and `x. Y` stay together."


def test_a_cell_without_prose_has_no_notes_and_an_image_stays_on_the_slide():
    shown, notes = slides.split_prose("### Figure\n\n![heatmap](figure.png)")
    assert (shown, notes) == ("### Figure\n\n![heatmap](figure.png)", "")


def test_long_outputs_are_trimmed_and_short_ones_kept():
    short = "".join(f"line {i}\n" for i in range(slides.MAX_OUTPUT_LINES))
    assert slides.trim_text(short) == short
    long = "".join(f"line {i}\n" for i in range(40))
    trimmed = slides.trim_text(long).splitlines()
    assert trimmed[: slides.KEPT_OUTPUT_LINES] == [f"line {i}" for i in range(slides.KEPT_OUTPUT_LINES)]
    assert len(trimmed) == slides.KEPT_OUTPUT_LINES + 1
    assert f"{40 - slides.KEPT_OUTPUT_LINES} more lines" in trimmed[-1]


def test_slide_view_moves_prose_to_notes_trims_outputs_and_drops_nbval_marks():
    stream = nbformat.v4.new_output("stream", name="stdout", text="".join(f"{i}\n" for i in range(30)))
    cells = [code("import torch"), markdown(CELL), code("# NBVAL_CHECK_OUTPUT\nprint(1)", [stream])]
    nb = nbformat.v4.new_notebook(cells=cells)
    deck = slides.slide_view(nb)
    kinds = [cell.metadata["slideshow"]["slide_type"] for cell in deck.cells]
    assert kinds == ["skip", "slide", "notes", "-"]
    assert deck.cells[2].source.startswith("Same data")
    assert deck.cells[3].source == "print(1)"
    assert len(deck.cells[3].outputs[0].text.splitlines()) == slides.KEPT_OUTPUT_LINES + 1
    assert nb.cells[1].source == CELL and "NBVAL" in nb.cells[2].source  # the notebook itself is untouched


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda path: path.stem)
def test_every_chapter_deck_has_speaker_notes_and_no_long_output(path):
    deck = slides.slide_view(nbformat.read(path, as_version=4))
    notes = [cell for cell in deck.cells if cell.metadata["slideshow"]["slide_type"] == "notes"]
    assert len(notes) >= 3, f"{path.name}: {len(notes)} speaker notes"
    for cell in deck.cells:
        if cell.cell_type != "code":
            continue
        assert "NBVAL" not in cell.source
        for output in cell.outputs:
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            if output.get("output_type") == "stream" or len(output.get("data", {})) == 1:
                assert len(text.splitlines()) <= slides.MAX_OUTPUT_LINES, f"{path.name}: an untrimmed output"


# ----------------------------------------------------------------------------------------- vendored assets


def fake_package(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, str]:
    """A tarball laid out as npm's (everything under package/) and its sha512 integrity string."""
    tarball = tmp_path / "cache" / "fake-1.0.0.tgz"
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return tarball, vendor.sha512_integrity(tarball)


def test_vendor_unpacks_the_named_folders_without_source_maps(tmp_path):
    files = {"dist/a.js": b"a", "dist/a.js.map": b"{}", "dist/sub/b.css": b"b", "src/c.ts": b"", "x.js": b""}
    tarball, integrity = fake_package(tmp_path, files)
    package = vendor.NpmPackage("fake", "1.0.0", integrity, {"dist": "lib/fake", "x.js": "x.js"})
    out = vendor.vendor(tmp_path / "out", (package,), cache=tarball.parent)
    found = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert found == ["lib/fake/a.js", "lib/fake/sub/b.css", "x.js"]


def test_a_tarball_whose_digest_differs_from_the_pin_is_refused_and_deleted(tmp_path):
    tarball, _ = fake_package(tmp_path, {"dist/a.js": b"tampered"})
    package = vendor.NpmPackage("fake", "1.0.0", "sha512-" + "A" * 86 + "==", {"dist": "fake"})
    with pytest.raises(RuntimeError, match=r"fake-1\.0\.0\.tgz: digest sha512-.*expected sha512-AAAA"):
        vendor.fetch(package, cache=tarball.parent)
    assert not tarball.exists()


def test_every_pinned_package_names_an_exact_version_and_a_sha512_digest():
    for package in vendor.VENDOR:
        assert re.fullmatch(r"\d+\.\d+\.\d+", package.version), package
        assert re.fullmatch(r"sha512-[A-Za-z0-9+/]{86}==", package.integrity), package


def test_the_book_and_deck_templates_name_no_address_off_the_machine():
    book = ROOT / "book"
    for path in [book / "conf.py", *book.rglob("*.j2"), *book.rglob("*.js"), *book.rglob("*.md")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"https?://", text), f"{path.relative_to(ROOT)} names a remote address"
