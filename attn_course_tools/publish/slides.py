"""`make slides`: a reveal.js lecture deck per chapter, from the notebooks' stored outputs.

nbconvert's reveal.js exporter with the template in `book/slides/`, applied to `slide_view(chapter)`: the
chapter as the book shows it (`attn_course_tools.publish.book.reading_view`), its cells under their
`slideshow` metadata (committed in the notebooks; `annotate_slides` gives a cell without one its default),
narrative prose moved into speaker notes, long outputs trimmed. The images its markdown names (e.g.
`figures/*.svg`) are copied beside the decks at the same relative path. Every script and font comes from the
build (`attn_course_tools.publish.vendor`), so the decks run offline.

    python -m attn_course_tools.publish.slides build --root . --out build/slides
    python -m attn_course_tools.publish.slides annotate notebooks/*.ipynb

`--root` is the course's checkout (by default the current directory): the decks are made of its notebooks/,
with the template and scripts of its book/ folder.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
from pathlib import Path

import nbformat

from attn_course_tools.checkout import add_root_option, parsed_checkout
from attn_course_tools.publish.book import HIDE_INPUT, reading_view
from attn_course_tools.publish.vendor import NPM_CACHE, SLIDES, add_cache_option, vendor, widget_fonts_beside

#: Where, in the checkout's book/ folder, the decks' nbconvert template and the MathJax start-up script lie.
TEMPLATE = Path("slides")
MATHJAX_STARTUP = Path("static") / "mathjax-startup.js"

HEADING = re.compile(r"^(#{1,6})\s")


def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def default_slide_type(cell: dict, previous: dict | None, first_code: bool) -> str:
    """The slide type a cell gets when it has none: one idea per slide.

    A `#`/`##` heading starts a slide, any other markdown cell a sub-slide (one step of the argument); a
    code cell continues its markdown's slide, or starts a sub-slide after another code cell; the chapter's
    set-up cell (its first code cell: imports and seeds) is skipped.
    """
    if cell["cell_type"] == "markdown":
        match = HEADING.match(_source(cell))
        return "slide" if match and len(match.group(1)) <= 2 else "subslide"
    if first_code:
        return "skip"
    return "subslide" if previous is not None and previous["cell_type"] == "code" else "-"


def annotate_slides(nb: dict) -> int:
    """Give every cell without `slideshow` metadata its `default_slide_type`; returns how many were given one.

    `nb` is a notebook as JSON or as nbformat reads it. Types already set (by a lecturer, in JupyterLab's
    property inspector) are kept.
    """
    changed, previous, seen_code = 0, None, False
    for cell in nb["cells"]:
        is_code = cell["cell_type"] == "code"
        slideshow = cell.setdefault("metadata", {}).setdefault("slideshow", {})
        if "slide_type" not in slideshow:
            slideshow["slide_type"] = default_slide_type(cell, previous, first_code=is_code and not seen_code)
            changed += 1
        seen_code = seen_code or is_code
        previous = cell
    return changed


def annotate_file(path: Path) -> int:
    """`annotate_slides` on a notebook file, rewritten in the course's JSON layout only if a cell changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = annotate_slides(nb)
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


MAX_OUTPUT_LINES = 12
KEPT_OUTPUT_LINES = 8


def split_prose(markdown: str) -> tuple[str, str]:
    """(what the slide shows, the speaker notes) of one markdown cell.

    The slide keeps the heading, displayed equations, lists, tables, images, quotes and code blocks, and the
    first sentence of the prose as its lead; the notes hold every prose paragraph in full. Blocks are those
    of the markdown parser, so a blank line inside a code block or an equation does not split it.
    """
    shown, prose = [], []
    for kind, text in _blocks(markdown):
        (prose if kind == "paragraph" and not text.lstrip().startswith("![") else shown).append(text)
    if prose:
        position = 1 if shown and HEADING.match(shown[0]) else 0
        shown.insert(position, _first_sentence(prose[0]))
    return "\n\n".join(shown), "\n\n".join(prose)


def figures_apart(shown: str) -> tuple[str, str]:
    """(the slide without its images, the images) of a slide's markdown; a slide of images only keeps them."""
    blocks = [text for _, text in _blocks(shown)]
    figures = [text for text in blocks if text.lstrip().startswith("![")]
    rest = [text for text in blocks if not text.lstrip().startswith("![")]
    if not rest or not figures:
        return shown, ""
    return "\n\n".join(rest), "\n\n".join(figures)


def _blocks(markdown: str) -> list[tuple[str, str]]:
    """The top-level blocks of `markdown`: (kind, source text), kind being e.g. "paragraph" or "fence"."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    lines = markdown.splitlines()
    parser = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)
    blocks = []
    for token in parser.parse(markdown):
        if token.level == 0 and token.nesting >= 0 and token.map is not None:
            start, end = token.map
            blocks.append((token.type.removesuffix("_open"), "\n".join(lines[start:end]).strip("\n")))
    return blocks


def _first_sentence(paragraph: str) -> str:
    """The paragraph up to its first full stop or colon before a space and a capital (not in math or code)."""
    text = " ".join(paragraph.split())
    in_math = in_code = False
    for i, char in enumerate(text):
        if char == "$" and not in_code:
            in_math = not in_math
        elif char == "`" and not in_math:
            in_code = not in_code
        elif char in ".:" and not (in_math or in_code) and re.match(r" [A-Z]", text[i + 1 : i + 3]):
            return text[: i + 1]
    return text


def trim_text(text: str, limit: int = MAX_OUTPUT_LINES, keep: int = KEPT_OUTPUT_LINES) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    return "\n".join(lines[:keep] + [f"⋮ {len(lines) - keep} more lines: see the chapter in the book"]) + "\n"


def slide_view(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of a chapter as its deck shows it: `reading_view`, prose in speaker notes, outputs trimmed."""
    deck = reading_view(nb)
    annotate_slides(deck)
    cells = []
    for cell in deck.cells:
        kind = cell.metadata.slideshow["slide_type"]
        if cell.cell_type == "markdown" and kind not in ("notes", "skip"):
            shown, notes = split_prose(cell.source)
            cell.source, figures = figures_apart(shown)
            cells.append(cell)
            if notes:
                notes_metadata = {"slideshow": {"slide_type": "notes"}}
                cells.append(nbformat.v4.new_markdown_cell(notes, metadata=notes_metadata))
            if figures:  # a diagram gets a sub-slide of its own, at full size
                figure_metadata = {"slideshow": {"slide_type": "subslide"}}
                cells.append(nbformat.v4.new_markdown_cell(figures, metadata=figure_metadata))
            continue
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                _trim_output(output)
        cells.append(cell)
    deck.cells = cells
    return deck


#: A live widget's view: in a deck (no kernel) an output that also carries its own HTML (a predict-then-see
#: question) shows that HTML, with the answer behind a click, not a widget whose buttons do nothing.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _trim_output(output: dict) -> None:
    data = output.get("data", {})
    if WIDGET_VIEW in data and "text/html" in data:
        del data[WIDGET_VIEW]
    if output.get("output_type") == "stream":
        output["text"] = trim_text(output["text"])
    elif "text/plain" in output.get("data", {}) and len(output["data"]) == 1:
        output["data"]["text/plain"] = trim_text(output["data"]["text/plain"])


def build_slides(root: Path, out: Path, npm_cache: Path, notebooks: list[Path] | None = None) -> list[Path]:
    """A reveal.js deck per chapter of the checkout `root` in `out`, assets and an index page beside them;
    returns the decks.

    The chapters are every `notebooks/*.ipynb` of `root`, in the order of their names, unless `notebooks`
    says. The scripts the decks load come from the tarballs in `npm_cache` (fetched if missing).
    """
    out.mkdir(parents=True, exist_ok=True)
    widget_fonts_beside(out, vendor(out, SLIDES, cache=npm_cache))
    return write_decks(out, notebooks or sorted((root / "notebooks").glob("*.ipynb")), root / "book")


def write_decks(out: Path, notebooks: list[Path], book_folder: Path) -> list[Path]:
    """The decks of `notebooks`, the images they show and the index page, into `out`; returns the decks.

    `book_folder` is the checkout's book/, which holds the decks' template and MathJax start-up script. The
    scripts they load are `build_slides`' job (a deck opened without them shows no slides).
    """
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(book_folder / MATHJAX_STARTUP, out / MATHJAX_STARTUP.name)
    exporter = _exporter(book_folder / TEMPLATE)
    decks, titles = [], []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        copy_images(nb, path.parent, out)
        body, _ = exporter.from_notebook_node(slide_view(nb))
        deck = out / (path.stem + ".slides.html")
        deck.write_text(body, encoding="utf-8")
        decks.append(deck)
        titles.append(_title(nb) or path.stem)
    (out / "index.html").write_text(_deck_index(decks, titles), encoding="utf-8")
    return decks


def _exporter(template: Path):
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    config = Config()
    config.SlidesExporter.update(
        extra_template_basedirs=[str(template.parent)],
        template_name=template.name,
        reveal_url_prefix="reveal.js",
        reveal_theme="white",
        reveal_transition="none",
        reveal_number="c/t",
        require_js_url="require.js",
        mathjax_url="mathjax/tex-chtml.js",
        widget_renderer_url="@jupyter-widgets/html-manager/dist/embed-amd.js",
        jupyter_widgets_base_url="./",  # where a widget module the embedder lacks would come from: here
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    # The cell tags the book honours (myst-nb's), honoured in the decks too.
    config.TagRemovePreprocessor.update(
        enabled=True,
        remove_input_tags={HIDE_INPUT},
        remove_all_outputs_tags={"remove-output"},
        remove_cell_tags={"remove-cell"},
    )
    return SlidesExporter(config=config)


IMG_SRC = re.compile(r"<img\b[^>]*?\bsrc=[\"']([^\"']+)[\"']", re.IGNORECASE)
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)  # http:, data:, attachment:, ...


def local_images(markdown: str) -> list[str]:
    """The image files a markdown cell shows, as written: `![alt](figures/x.svg)` or `<img src=...>`."""
    from markdown_it import MarkdownIt

    sources = []
    for token in MarkdownIt("commonmark").parse(markdown):
        for child in token.children or []:
            if child.type == "image":
                sources.append(child.attrGet("src"))
        if token.type in ("html_block", "inline"):
            sources += IMG_SRC.findall(token.content)
    return [src for src in sources if src and not REMOTE.match(src)]


def copy_images(nb: nbformat.NotebookNode, folder: Path, out: Path) -> None:
    """Copy the images the markdown of `nb` (a notebook in `folder`) shows to the same relative path in `out`.

    A deck lies in `out` as its notebook lies in `folder`, so its relative image paths then resolve.
    """
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for src in local_images(cell.source):
            relative = Path(src.split("?")[0].split("#")[0])
            image = (folder / relative).resolve()
            if relative.is_absolute() or not image.is_relative_to(folder.resolve()):
                raise ValueError(f"image {src!r}: expected a path inside the notebook's folder {folder}")
            if not image.is_file():
                raise FileNotFoundError(f"image {src!r}: no file {image}")
            target = out / image.relative_to(folder.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(image, target)


def _deck_index(decks: list[Path], titles: list[str]) -> str:
    items = [
        f'<li><a href="{deck.name}">{html.escape(title)}</a></li>'
        for deck, title in zip(decks, titles, strict=True)
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<link rel="icon" href="data:,"><title>attn-course: lecture decks</title></head><body>'
        "<h1>attn-course: lecture decks</h1><p>One deck per chapter. Press <kbd>S</kbd> for the speaker view"
        " (notes, next slide, timer), <kbd>Esc</kbd> for the overview.</p>"
        f"<ul>{''.join(items)}</ul></body></html>\n"
    )


def _title(nb: nbformat.NotebookNode) -> str | None:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return None


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line, and its `build` command's parser (which reports a wrong `--root`)."""
    parser = argparse.ArgumentParser(
        prog="python -m attn_course_tools.publish.slides", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="a deck per chapter")
    add_root_option(build)
    build.add_argument("--out", type=Path, help="the decks' folder (default: build/slides under --root)")
    add_cache_option(build)
    annotate = commands.add_parser("annotate", help="give cells without slide metadata their default type")
    annotate.add_argument("notebooks", nargs="+", type=Path)
    return parser, build


def main(argv: list[str] | None = None) -> None:
    parser, build = _parser()
    args = parser.parse_args(argv)
    if args.command == "build":
        root = parsed_checkout(build, args.root, "book", "notebooks")
        out = (args.out or root / "build" / "slides").resolve()
        decks = build_slides(root, out, (args.npm_cache or root / NPM_CACHE).resolve())
        print(f"slides: {len(decks)} decks, {out / 'index.html'}")
    else:
        for path in args.notebooks:
            print(f"{path}: {annotate_file(path)} cells given a slide type")


if __name__ == "__main__":
    main()
