"""The HTML book and the lecture decks, built as `make book` and `make slides` do, in headless Chromium.

Both are built into a temporary folder, without network where the machine lets the test take it away
(`unshare --net`: the npm packages are fetched first, the builds then run with no network at all), and
served from 127.0.0.1. Every page of the book and every deck is
opened; each must load with no console error, no uncaught exception, no failed or refused request and no
request to anything but that server; its math must be typeset by MathJax without a TeX error. The book's
table of contents lists every chapter and exercise, its search finds a chapter, and the explorer's page shows
the widgets' stored view, whose slider moves without a kernel. A deck starts, steps to its next slide and
carries speaker notes. Every page and every slide reads clean: no code cell shows an `NBVAL` line, no display
equation is wider than its column, no `$` is left in the prose (a formula the parser missed), no code line
runs past its block's edge and every image loads; in the book, no code line wraps to its block's left edge
(a long one scrolls) and no table is wider than its column. The landing page says how to get the course
without a placeholder, and an equation displayed inside a paragraph (chapter 1's Nadaraya–Watson) is typeset
whole. A fixture course (tests/publish_fixture.py) proves it on an equation too wide to fit unscaled, a long
code line and an SVG figure.
Screenshots of every page and deck land under artifacts/test_publish/ (git-ignored).
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import chromium
import publish_fixture
import pytest

from attn_course_tools.publish import book, slides, vendor

pytestmark = [pytest.mark.slow, chromium.needs_chromium]

ROOT = Path(__file__).resolve().parents[3]
NPM_CACHE = ROOT / vendor.NPM_CACHE  # the tarballs `make book` and `make slides` keep
ARTIFACTS = chromium.ARTIFACTS / "test_publish"
CHAPTERS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
EXERCISES = sorted(path.stem for path in (ROOT / "exercises").glob("*.ipynb"))
LOAD_TIMEOUT_MS = 60_000

# What a reader would see go wrong on a page or a slide (`root`, default the page): a list of sentences, empty
# when none. On a book page (`codeWraps` false) a code line must keep its line: one that wraps would start
# again at the block's left edge, where a wrapped comment reads as code; a long one scrolls in its block.
# The decks' template wraps code at the slide's edge instead, so there code must only stay inside its block.
READING_PROBLEMS_JS = """async (options) => {
  const codeWraps = Boolean(options && options.codeWraps), root = (options && options.root) || document;
  const problems = [];
  const shown = element => element.offsetParent !== null;  // not on a deck's other slides
  const images = [...root.querySelectorAll("img")];
  await Promise.all(images.map(img => img.complete ? null
    : new Promise(done => { img.addEventListener("load", done); img.addEventListener("error", done); })));
  for (const img of images)
    if (img.naturalWidth === 0) problems.push(`image did not load: ${img.getAttribute("src")}`);
  for (const cell of root.querySelectorAll("div.cell, .jp-CodeCell"))
    if (cell.innerText.includes("NBVAL")) problems.push(`NBVAL shows: ${cell.innerText.slice(0, 70)}`);
  for (const box of root.querySelectorAll('mjx-container[display="true"]')) {
    if (!shown(box)) continue;
    const column = box.parentElement.clientWidth, text = box.textContent.slice(0, 60);
    if (box.scrollWidth > box.clientWidth + 1 || box.offsetWidth > column + 1)
      problems.push(`equation ${box.scrollWidth}px wide in a ${column}px column: ${text}`);
  }
  // A `$` left in the prose: a formula the markdown parser did not take for math (its text then reads as
  // italic math up to the next `$`). Code, math and scripts may hold one.
  const prose = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {acceptNode: node =>
    node.parentElement.closest("code, pre, script, style, mjx-container, .math, .highlight, textarea")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  for (let node = prose.nextNode(); node; node = prose.nextNode())
    if (node.textContent.includes("$") && shown(node.parentElement))
      problems.push(`a $ shows in the prose: ${node.textContent.trim().slice(0, 70)}`);
  for (const pre of root.querySelectorAll("div.cell pre, .jp-Cell pre")) {
    if (!shown(pre)) continue;
    const text = pre.innerText.slice(0, 60), style = getComputedStyle(pre);
    if (!codeWraps) {
      const height = pre.scrollHeight, kept = pre.style.whiteSpace;
      pre.style.whiteSpace = "pre";  // the block as it would be with every line kept whole
      const unwrapped = pre.scrollHeight;
      pre.style.whiteSpace = kept;
      if (height > unwrapped + 1) problems.push(`a code line wraps to its block's left edge: ${text}`);
    }
    const scrolls = ["auto", "scroll"].includes(style.overflowX);
    if (pre.scrollWidth > pre.clientWidth + 1 && !(scrolls && !codeWraps))
      problems.push(`code runs past its block's edge: ${text}`);
  }
  // A table fits its column, or scrolls inside a box that does (a stepper's weights over a long sentence).
  for (const table of root.querySelectorAll("article table")) {
    const column = table.closest("article").clientWidth, box = table.parentElement.clientWidth;
    const width = Math.round(table.getBoundingClientRect().width), text = table.innerText.slice(0, 60);
    const scrolls = ["auto", "scroll"].includes(getComputedStyle(table.parentElement).overflowX);
    if (shown(table) && (scrolls ? box > column + 1 : width > box + 1 || width > column + 1))
      problems.push(`table ${width}px wide in a ${box}px box, its last columns cut off: ${text}`);
  }
  return problems;
}"""

# The reading problems of every slide of a deck, each shown in turn; the deck is left on its first slide.
DECK_READING_PROBLEMS_JS = (
    """async () => {
  const Reveal = await new Promise(done => require(["reveal.js/dist/reveal.js"], done));
  const readingProblems = """
    + READING_PROBLEMS_JS
    + """;
  const problems = [];
  for (const slide of Reveal.getSlides()) {
    const {h, v} = Reveal.getIndices(slide);
    Reveal.slide(h, v);
    await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    for (const problem of await readingProblems({root: slide, codeWraps: true}))
      problems.push(`slide ${h}/${v}: ${problem}`);
  }
  Reveal.slide(0, 0);
  return problems;
}"""
)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def without_network() -> list[str]:
    """A command prefix that runs a command with no network, or [] where this machine does not allow it."""
    if shutil.which("unshare") is None:
        return []
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    return ["unshare", "--net"] if probe.returncode == 0 else []


class Site(NamedTuple):
    base: str  # the URL of `out`
    out: Path  # book/ and slides/, as make book and make slides build them
    offline: bool  # whether they were built with no network


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The book and the decks, built from the stored outputs, served on 127.0.0.1."""
    out = tmp_path_factory.mktemp("publish")
    for package in vendor.VENDOR:  # the only step that may use the network, once: the tarballs are cached
        vendor.fetch(package, NPM_CACHE)
    offline = without_network()
    commands = [
        ["attn_course_tools.publish.book", "--root", ".", "--out", str(out / "book")],
        ["attn_course_tools.publish.slides", "build", "--root", ".", "--out", str(out / "slides")],
    ]
    for command in commands:  # as make book and make slides run them
        subprocess.run([*offline, sys.executable, "-m", *command], check=True, cwd=ROOT)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=out))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield Site(f"http://127.0.0.1:{server.server_port}/", out, bool(offline))
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser():
    with chromium.sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        yield browser
        browser.close()


class Visit:
    """One page opened in a fresh tab, with everything the page did that the test refuses recorded."""

    def __init__(self, browser, base: str, path: str) -> None:
        self.base, self.problems = base, []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"uncaught exception: {error}"))
        self.page.on("request", self._request)
        self.page.on("requestfailed", lambda request: self.problems.append(f"failed request: {request.url}"))
        self.page.on("response", self._response)
        self.page.goto(base + path, wait_until="networkidle", timeout=LOAD_TIMEOUT_MS)

    def _console(self, message) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text} ({message.location.get('url', '?')})")

    def _request(self, request) -> None:
        if not request.url.startswith((self.base, "data:", "blob:", "about:")):
            self.problems.append(f"request off the machine: {request.url}")

    def _response(self, response) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def typeset(self) -> int:
        """Wait for MathJax to finish; the number of formulas it typeset (0 on a page without MathJax)."""
        if self.page.locator("script[src*='mathjax/tex-chtml.js']").count() == 0:
            return 0
        self.page.wait_for_function(
            "() => window.MathJax && MathJax.version && MathJax.startup.promise", timeout=LOAD_TIMEOUT_MS
        )
        self.page.evaluate("() => MathJax.startup.promise")
        assert self.page.locator("mjx-merror, mjx-container [data-mjx-error]").count() == 0, "a TeX error"
        return self.page.locator("mjx-container").count()

    def read(self) -> None:
        """Record what a reader would see go wrong on the page (typeset it first): READING_PROBLEMS_JS."""
        self.problems += self.page.evaluate(READING_PROBLEMS_JS)

    def read_deck(self) -> None:
        """Record the reading problems of every slide of a started deck (typeset it first)."""
        self.problems += self.page.evaluate(DECK_READING_PROBLEMS_JS)

    def finish(self, screenshot: str) -> None:
        self.page.wait_for_timeout(300)  # late console messages (widgets render after the load event)
        self.page.screenshot(path=str(ARTIFACTS / screenshot))
        self.page.close()
        assert not self.problems, "\n".join(self.problems)


def book_pages(out: Path) -> list[str]:
    pages = sorted(
        str(path.relative_to(out))
        for path in out.rglob("*.html")
        if not path.relative_to(out).parts[0].startswith("_") and "@jupyter-widgets" not in path.parts
    )
    return [page for page in pages if page != "index.html"]  # the root index only redirects to book/index


def test_the_book_and_the_decks_build_with_no_network(site):
    if not site.offline:
        pytest.skip("this machine does not let the test take the network away (unshare --net)")
    assert (site.out / "book" / "book" / "index.html").is_file()
    assert len(list((site.out / "slides").glob("*.slides.html"))) == len(CHAPTERS)


def test_the_book_has_every_chapter_exercise_and_readme_and_no_remote_asset(site):
    out = site.out
    pages = book_pages(out / "book")
    expected = {"README.html", "book/index.html", "search.html"}
    expected |= {f"notebooks/{name}.html" for name in CHAPTERS}
    expected |= {f"exercises/{name}.html" for name in EXERCISES}
    assert expected <= set(pages)
    remote = re.compile(r"<(?:script|link|img|iframe)\b[^>]*(?:src|href)=[\"']?(?:https?:)?//", re.IGNORECASE)
    for page in pages + [f"../slides/{deck.name}" for deck in (out / "slides").glob("*.html")]:
        html = (out / "book" / page).read_text(encoding="utf-8")
        assert not remote.search(html), f"{page} loads something from another host"


def test_every_book_page_loads_offline_without_errors_with_its_math_typeset(site, browser):
    base, out = site.base, site.out
    typeset = {}
    for page in book_pages(out / "book"):
        visit = Visit(browser, base + "book/", page)
        typeset[page] = visit.typeset()
        visit.read()
        visit.finish(f"book_{page.replace('/', '_').removesuffix('.html')}.png")
    assert typeset["notebooks/01_masked_softmax.html"] >= 10
    assert all(typeset[f"notebooks/{name}.html"] > 0 for name in CHAPTERS if name != "00_data"), typeset


def test_the_landing_page_says_how_to_run_the_course_and_lists_every_chapter(site, browser):
    base = site.base
    visit = Visit(browser, base + "book/", "index.html")  # the book's root, which sends the reader on
    page = visit.page
    page.wait_for_url("**/book/book/index.html", timeout=LOAD_TIMEOUT_MS)
    text = page.locator("main").inner_text()
    assert "make lab" in text and re.search(r"[Cc]lone the course.s repository", text)
    commands = "\n".join(page.locator("main pre").all_inner_texts())
    assert commands.startswith("cd attn-course\nmake lab"), commands
    assert not re.search(r"<[^<>\n]+>", commands), f"a placeholder to fill in: {commands}"
    links = page.locator("nav.bd-docs-nav a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    for name in CHAPTERS:
        assert any(link.endswith(f"notebooks/{name}.html") for link in links), f"{name} missing from the TOC"
    for name in EXERCISES:
        assert any(link.endswith(f"exercises/{name}.html") for link in links), f"{name} missing from the TOC"
    visit.finish("landing.png")


# The Nadaraya–Watson formula, written inside a paragraph in chapter 1 and exercise ch1.q3 (MathJax's text).
NADARAYA_WATSON = "α(x,xi)=exp\u2061(−(x−xi)2/2σ2)∑jexp\u2061(−(x−xj)2/2σ2)"


@pytest.mark.parametrize("page", ["notebooks/01_masked_softmax.html", "exercises/ex01_masked_softmax.html"])
def test_an_equation_displayed_inside_a_paragraph_is_typeset_whole_and_the_text_after_it_stays_text(
    site, browser, page
):
    visit = Visit(browser, site.base + "book/", page)
    visit.typeset()
    visit.read()  # among its problems: a `$` left in the prose
    displayed = visit.page.locator('mjx-container[display="true"]').all_text_contents()
    assert any(NADARAYA_WATSON in text for text in displayed), displayed[:3]
    if page.startswith("notebooks/"):
        prose = visit.page.locator("article").inner_text()
        assert "Our data: 50 noisy samples of a smooth function on" in prose
    visit.page.locator('mjx-container[display="true"]').first.scroll_into_view_if_needed()
    visit.finish(f"nadaraya_watson_{page.split('/')[0]}.png")


def test_the_search_finds_a_chapter(site, browser):
    base = site.base
    visit = Visit(browser, base + "book/", "search.html?q=Bahdanau")
    results = visit.page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=LOAD_TIMEOUT_MS)
    hrefs = results.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("04_bahdanau_attention" in href for href in hrefs), hrefs
    visit.finish("search_bahdanau.png")


def test_the_explorer_page_shows_the_widgets_stored_view_and_its_slider_moves_without_a_kernel(site, browser):
    base = site.base
    visit = Visit(browser, base + "book/", "notebooks/07_explore.html")
    page = visit.page
    step_label = page.locator("label", has_text="decoder step")
    slider = page.locator(".jupyter-widgets .widget-slider", has=step_label)
    slider.first.wait_for(timeout=LOAD_TIMEOUT_MS)
    image = page.locator(".jupyter-widgets img.widget-image").first
    image.wait_for(timeout=LOAD_TIMEOUT_MS)
    assert image.evaluate("img => img.complete && img.naturalWidth > 100"), "the stored heatmap did not load"
    readout = slider.first.locator(".widget-readout")
    before = readout.inner_text().strip()
    slider.first.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "([before]) => { const r = document.querySelector('.jupyter-widgets .widget-slider .widget-readout');"
        " return r !== null && r.innerText.trim() !== before; }",
        arg=[before],
        timeout=LOAD_TIMEOUT_MS,
    )
    slider.first.scroll_into_view_if_needed()
    visit.finish("explorer_widgets.png")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_deck_starts_steps_and_carries_speaker_notes_offline(site, browser, chapter):
    base = site.base
    visit = Visit(browser, base + "slides/", f"{chapter}.slides.html")
    page = visit.page
    page.locator(".reveal.ready").wait_for(timeout=LOAD_TIMEOUT_MS)
    visit.typeset()
    visit.read_deck()
    page.wait_for_function("() => location.hash === '#/' || location.hash === ''", timeout=LOAD_TIMEOUT_MS)
    slides_count = page.locator(".reveal .slides > section").count()
    assert slides_count >= 3, f"{chapter}: {slides_count} slides"
    assert page.locator(".reveal aside.notes").count() >= 3, f"{chapter}: no speaker notes"
    title = page.locator(".reveal .slides > section").first.locator("h1")
    assert title.count() == 1 and title.inner_text().strip(), f"{chapter}: the deck opens on no title"
    visit.page.screenshot(path=str(ARTIFACTS / f"slides_{chapter}_title.png"))
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => location.hash === '#/1'", timeout=LOAD_TIMEOUT_MS)
    visit.finish(f"slides_{chapter}_2.png")


def test_the_deck_index_links_every_chapter(site, browser):
    base, out = site.base, site.out
    visit = Visit(browser, base + "slides/", "index.html")
    links = visit.page.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert links == [f"{name}.slides.html" for name in CHAPTERS]
    assert all((out / "slides" / link).is_file() for link in links)
    visit.finish("slides_index.png")


def test_the_speaker_view_shows_the_slide_s_notes_offline(site, browser):
    base = site.base
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    problems = []
    context.on(
        "request",
        lambda request: (
            problems.append(request.url)
            if not request.url.startswith((base, "data:", "blob:", "about:"))
            else None
        ),
    )
    page = context.new_page()
    page.goto(base + "slides/04_bahdanau_attention.slides.html#/1", wait_until="networkidle")
    page.locator(".reveal.ready").wait_for(timeout=LOAD_TIMEOUT_MS)
    with page.expect_popup(timeout=LOAD_TIMEOUT_MS) as opened:
        page.keyboard.press("s")
    speaker = opened.value
    speaker.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    notes = speaker.locator(".speaker-controls-notes .value")
    speaker.wait_for_function(
        "() => { const n = document.querySelector('.speaker-controls-notes .value');"
        " return n !== null && n.innerText.includes('Bahdanau et al. 2014'); }",
        timeout=LOAD_TIMEOUT_MS,
    )
    assert "annotations" in notes.inner_text()  # the section's prose, moved off the slide
    speaker.screenshot(path=str(ARTIFACTS / "slides_speaker_view.png"))
    context.close()
    assert not problems, problems


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    """The fixture course's book and decks (a too-wide equation, an SVG figure), served on 127.0.0.1."""
    out = tmp_path_factory.mktemp("fixture")
    notebooks = publish_fixture.write_course(out / "course")
    assets = vendor.vendor(out / "book-vendor", vendor.BOOK, cache=NPM_CACHE)
    book.run_sphinx(out / "course", out / "book", assets, conf=ROOT / "book")
    slides.build_slides(ROOT, out / "slides", NPM_CACHE, notebooks)  # the checkout's template, these chapters
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=out))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    thread.join()


def test_in_the_book_a_wide_equation_is_scaled_a_long_code_line_scrolls_and_a_figure_loads(
    fixture_site, browser
):
    visit = Visit(browser, fixture_site + "book/", "notebooks/01_fixture.html")
    visit.typeset()
    visit.read()
    equation = visit.page.locator('mjx-container[display="true"]').first
    scale = equation.evaluate("box => box.firstElementChild.style.fontSize")
    assert scale and 60 <= float(scale.rstrip("%")) < 100, f"the equation was not scaled to fit: {scale!r}"
    figure = visit.page.locator("img[src$='fixture_diagram.svg']")
    assert figure.evaluate("img => img.naturalWidth") > 0
    long_line = visit.page.locator("div.cell").nth(2).locator("div.cell_input pre")
    assert "weight_29" in long_line.inner_text()  # the long line, whole and on one line (visit.read)
    scrolls = "pre => pre.scrollWidth > pre.clientWidth && getComputedStyle(pre).overflowX === 'auto'"
    assert long_line.evaluate(scrolls), "the long line should scroll inside its block"
    equation.scroll_into_view_if_needed()
    visit.finish("fixture_book.png")


def test_a_too_wide_equation_and_a_figure_read_clean_on_every_slide_of_a_deck(fixture_site, browser):
    visit = Visit(browser, fixture_site + "slides/", "01_fixture.slides.html")
    visit.page.locator(".reveal.ready").wait_for(timeout=LOAD_TIMEOUT_MS)
    visit.typeset()
    visit.read_deck()
    assert visit.page.locator("img[src='figures/fixture_diagram.svg']").count() == 1
    visit.page.keyboard.press("ArrowRight")
    visit.finish("fixture_deck.png")
