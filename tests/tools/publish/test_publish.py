"""The book and the decks without a browser: what a page shows of a notebook, slide metadata, a chapter's
slide view, the images beside the decks, the vendored assets, and the book built from a fixture course.

tests/tools/publish/test_publish_browser.py builds both and opens every page in headless Chromium.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import nbformat
import publish_fixture
import pytest

from attn_course_tools.publish import book, slides, vendor

ROOT = Path(__file__).resolve().parents[3]
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}


def markdown(source: str) -> dict:
    return nbformat.v4.new_markdown_cell(source)


def code(source: str, outputs: list | None = None, tags: list[str] | None = None) -> dict:
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {})
    cell.outputs = outputs or []
    return cell


# ------------------------------------------------------------------------- what a page shows of a notebook


def tags(cell: dict) -> list[str]:
    return cell.metadata.get("tags", [])


@pytest.mark.parametrize(
    "source",
    [
        publish_fixture.SET_UP,
        "import torch\nfrom torch import nn",
        "import torch\n\nSEED = course_seed()\nseed_everything(SEED)\natol = 1e-5 if cpu else 1e-3",
    ],
)
def test_imports_then_seeding_make_a_set_up_cell(source):
    assert book.is_set_up_cell(source)


@pytest.mark.parametrize(
    "source",
    [
        "x = torch.ones(3)",  # no import
        "import torch\n\ndef f(x):\n    return x",  # a definition teaches
        "import torch\n\nfor i in range(3):\n    print(i)",
        "import pandas as pd\n\nresults = load()\nprint(len(results))",  # loads and shows results: no seeding
        "%matplotlib inline\nimport torch",  # IPython syntax
    ],
)
def test_a_cell_that_does_more_than_set_up_is_not_a_set_up_cell(source):
    assert not book.is_set_up_cell(source)


def test_reading_view_drops_nbval_tags_and_hides_only_the_set_up_cell_s_input():
    checked = code('print("checked:", 1 + 1)', tags=["nbval-check-output"])
    ignored = code("x = 1\nprint(x)", tags=["remove-output", "nbval-ignore-output"])  # a reader's tag stays
    set_up = code(publish_fixture.SET_UP)
    nb = nbformat.v4.new_notebook(cells=[markdown("# Chapter"), set_up, checked, ignored])
    nb.cells.append(code("import torch\nseed_everything(1)"))  # a later import cell stays shown
    view = book.reading_view(nb)
    assert tags(view.cells[1]) == ["remove-input"]
    assert [tags(cell) for cell in view.cells[2:]] == [[], ["remove-output"], []]
    assert "tags" not in view.cells[2].metadata
    assert [cell.source for cell in view.cells[2:4]] == [checked.source, ignored.source]
    assert tags(nb.cells[2]) == ["nbval-check-output"] and "tags" not in nb.cells[1].metadata  # untouched
    exercise = book.reading_view(nb, chapter=False)
    assert [tags(cell) for cell in exercise.cells[1:4]] == [[], [], ["remove-output"]]


def test_reading_view_drops_nbval_s_older_comment_lines_too():
    marked = code("x = 1\n  # NBVAL_IGNORE_OUTPUT\nprint(x)")
    nb = nbformat.v4.new_notebook(cells=[code("# NBVAL_CHECK_OUTPUT\nprint(2)"), marked])
    assert [cell.source for cell in book.reading_view(nb).cells] == ["print(2)", "x = 1\nprint(x)"]


def test_a_first_code_cell_that_teaches_stays_shown():
    teaching = code("import torch\n\ndef f(x):\n    return x")
    nb = nbformat.v4.new_notebook(cells=[teaching, code("import math")])
    assert [tags(cell) for cell in book.reading_view(nb).cells] == [[], []]


@pytest.mark.parametrize("path", CHAPTERS + EXERCISES, ids=lambda path: path.stem)
def test_no_page_shows_an_nbval_mark_and_a_chapter_s_set_up_imports_are_hidden(path):
    chapter = path.parent.name == "notebooks"
    view = book.reading_view(nbformat.read(path, as_version=4), chapter=chapter)
    cells = [cell for cell in view.cells if cell.cell_type == "code"]
    assert not [cell.source for cell in cells if "NBVAL" in cell.source]
    assert not [tag for cell in cells for tag in tags(cell) if tag in book.NBVAL_TAGS]
    hidden = [i for i, cell in enumerate(cells) if "remove-input" in tags(cell)]
    first_sets_up = book.is_set_up_cell(cells[0].source) if cells else False
    assert hidden == ([0] if chapter and first_sets_up else []), f"{path.name}: input hidden in {hidden}"


def test_the_chapters_that_open_with_imports_and_seeding_hide_them():
    first_cells = {
        path.stem: next(cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")
        for path in CHAPTERS
    }
    seeded = [name for name, cell in first_cells.items() if "seed_everything(" in cell.source]
    assert len(seeded) >= 12, seeded
    assert all(book.is_set_up_cell(first_cells[name].source) for name in seeded)


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
    missing = "cells without a slide type (python -m attn_course_tools.publish.slides annotate)"
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


def test_a_diagram_beside_prose_gets_a_sub_slide_of_its_own_after_the_notes():
    source = "## A step\n\nThe query is $s_{t-1}$. It scores every $h_j$.\n\n![step](figures/step.svg)"
    deck = slides.slide_view(nbformat.v4.new_notebook(cells=[code("import torch"), markdown(source)]))
    kinds = [cell.metadata["slideshow"]["slide_type"] for cell in deck.cells]
    assert kinds == ["skip", "slide", "notes", "subslide"]
    assert "![" not in deck.cells[1].source and deck.cells[3].source == "![step](figures/step.svg)"
    assert slides.figures_apart("![only](a.svg)") == ("![only](a.svg)", "")


def test_long_outputs_are_trimmed_and_short_ones_kept():
    short = "".join(f"line {i}\n" for i in range(slides.MAX_OUTPUT_LINES))
    assert slides.trim_text(short) == short
    long = "".join(f"line {i}\n" for i in range(40))
    trimmed = slides.trim_text(long).splitlines()
    assert trimmed[: slides.KEPT_OUTPUT_LINES] == [f"line {i}" for i in range(slides.KEPT_OUTPUT_LINES)]
    assert len(trimmed) == slides.KEPT_OUTPUT_LINES + 1
    assert f"{40 - slides.KEPT_OUTPUT_LINES} more lines" in trimmed[-1]


def test_a_deck_shows_a_question_s_own_html_not_its_dead_widget_and_keeps_a_plain_widget():
    view = {"model_id": "m", "version_major": 2, "version_minor": 0}
    question = {"text/plain": "q", "text/html": "<details>answer</details>", slides.WIDGET_VIEW: view}
    slider = {"text/plain": "IntSlider()", slides.WIDGET_VIEW: view}
    nb = nbformat.v4.new_notebook()
    for data in (question, slider):
        cell = nbformat.v4.new_code_cell("x")
        cell.outputs = [nbformat.v4.new_output("execute_result", data=dict(data), execution_count=1)]
        nb.cells.append(cell)
    shown = [cell.outputs[0]["data"] for cell in slides.slide_view(nb).cells if cell.cell_type == "code"]
    assert slides.WIDGET_VIEW not in shown[0] and shown[0]["text/html"] == "<details>answer</details>"
    assert shown[1][slides.WIDGET_VIEW] == view


def test_slide_view_moves_prose_to_notes_trims_outputs_and_drops_nbval_tags():
    stream = nbformat.v4.new_output("stream", name="stdout", text="".join(f"{i}\n" for i in range(30)))
    cells = [code("import torch"), markdown(CELL), code("print(1)", [stream], tags=["nbval-check-output"])]
    nb = nbformat.v4.new_notebook(cells=cells)
    deck = slides.slide_view(nb)
    kinds = [cell.metadata["slideshow"]["slide_type"] for cell in deck.cells]
    assert kinds == ["skip", "slide", "notes", "-"]
    assert deck.cells[2].source.startswith("Same data")
    assert deck.cells[3].source == "print(1)" and tags(deck.cells[3]) == []
    assert len(deck.cells[3].outputs[0].text.splitlines()) == slides.KEPT_OUTPUT_LINES + 1
    assert nb.cells[1].source == CELL and tags(nb.cells[2]) == ["nbval-check-output"]  # the notebook is kept


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda path: path.stem)
def test_every_chapter_deck_has_speaker_notes_and_no_long_output(path):
    deck = slides.slide_view(nbformat.read(path, as_version=4))
    notes = [cell for cell in deck.cells if cell.metadata["slideshow"]["slide_type"] == "notes"]
    assert len(notes) >= 3, f"{path.name}: {len(notes)} speaker notes"
    for cell in deck.cells:
        if cell.cell_type != "code":
            continue
        assert "NBVAL" not in cell.source and not set(tags(cell)) & book.NBVAL_TAGS
        for output in cell.outputs:
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            if output.get("output_type") == "stream" or len(output.get("data", {})) == 1:
                assert len(text.splitlines()) <= slides.MAX_OUTPUT_LINES, f"{path.name}: an untrimmed output"


# ------------------------------------------------------------------------------ the fixture course's pages


def test_the_images_a_cell_shows_from_files_are_found_and_remote_ones_left_alone():
    source = (
        "![a](figures/a.svg) and `![not](code.svg)`\n\n<img src='figures/b.svg' width=200>\n\n"
        "![web](https://example.org/c.png) ![inline](data:image/png;base64,AAAA) ![att](attachment:d.png)"
    )
    assert slides.local_images(source) == ["figures/a.svg", "figures/b.svg"]


def test_an_image_missing_or_outside_the_notebook_s_folder_stops_the_deck_build(tmp_path):
    missing = nbformat.v4.new_notebook(cells=[markdown("![a](figures/missing.svg)")])
    with pytest.raises(FileNotFoundError, match=r"image 'figures/missing.svg': no file .*missing\.svg"):
        slides.copy_images(missing, tmp_path, tmp_path / "out")
    outside = nbformat.v4.new_notebook(cells=[markdown("![a](../elsewhere.svg)")])
    with pytest.raises(ValueError, match=r"image '../elsewhere.svg': expected a path inside the notebook's"):
        slides.copy_images(outside, tmp_path, tmp_path / "out")


@pytest.fixture(scope="module")
def fixture_course(tmp_path_factory) -> list[Path]:
    return publish_fixture.write_course(tmp_path_factory.mktemp("course"))


def test_a_deck_shows_its_figures_and_every_chapter_but_no_nbval_line_or_set_up(fixture_course, tmp_path):
    decks = slides.write_decks(tmp_path, fixture_course, ROOT / "book")
    assert [deck.name for deck in decks] == ["01_fixture.slides.html", "12_appendix.slides.html"]
    html = decks[0].read_text(encoding="utf-8")
    assert f'src="{publish_fixture.FIGURE}"' in html
    assert (tmp_path / publish_fixture.FIGURE).read_text(encoding="utf-8") == publish_fixture.SVG
    assert "NBVAL" not in html and "checked" in html
    assert "seed_everything" not in html  # the set-up cell is skipped
    assert '"12_appendix.slides.html"' in (tmp_path / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow  # Sphinx in a subprocess, about 10 s of CPU
def test_the_book_shows_figures_and_the_appendix_but_no_nbval_line_or_set_up(fixture_course, tmp_path):
    source = fixture_course[0].parents[1]
    (tmp_path / "assets").mkdir()
    book.run_sphinx(source, tmp_path / "book", tmp_path / "assets", conf=ROOT / "book")
    page = (tmp_path / "book" / "notebooks" / "01_fixture.html").read_text(encoding="utf-8")
    assert "NBVAL" not in page and "checked" in page
    cell_start = r'<div class="cell[ "]'
    cells = re.findall(cell_start + rf".*?(?={cell_start}|<section|</section>)", page, re.DOTALL)
    set_up = cells[0]
    assert "tag_remove-input" in set_up and "cell_input" not in set_up and "device: cpu" in set_up
    assert "seed_everything" not in page
    assert all("cell_input" in cell for cell in cells[1:]), "only the set-up cell's input is hidden"
    images = re.findall(r'<img[^>]*src="([^"]+)"', page)
    svg = [src for src in images if src.endswith("fixture_diagram.svg")]
    assert svg, images
    copied = (tmp_path / "book" / "notebooks" / svg[0]).resolve()
    assert copied.read_text(encoding="utf-8") == publish_fixture.SVG
    index = (tmp_path / "book" / "book" / "index.html").read_text(encoding="utf-8")
    assert index.index("01_fixture.html") < index.index("12_appendix.html")


# ----------------------------------------------------------------------------------- the command lines


@pytest.mark.parametrize(
    "argv",
    [
        [book.main],
        [book.main, "--root", "{tmp}"],
        [slides.main, "build"],
        [slides.main, "build", "--root", "{tmp}", "--out", "{tmp}/decks"],
    ],
    ids=["book", "book --root", "slides", "slides --root"],
)
def test_a_folder_that_is_not_the_checkout_stops_the_build_and_names_the_option(
    argv, tmp_path, monkeypatch, capsys
):
    (tmp_path / "notebooks").mkdir()  # the chapters but not the book's configuration
    monkeypatch.chdir(tmp_path)  # --root defaults to the current directory
    main, *args = argv
    with pytest.raises(SystemExit) as stopped:
        main([arg.format(tmp=tmp_path) for arg in args])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and "--root: " in error and "holds no book/" in error, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notebooks"]  # nothing built, nothing fetched


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
