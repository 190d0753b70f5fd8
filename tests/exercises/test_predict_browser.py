"""A predict-then-see question in a browser: the widget in a real JupyterLab, and the <details> in the book.

In JupyterLab (the test's own, `chromium.Lab`) a one-cell notebook asks chapter 1's
first question; the test picks an option, clicks Check and sees the verdict and every option's explanation
appear, and that JupyterLab showed the widget, not the static fallback. For the book, Sphinx builds a
one-notebook course with the course's own book/conf.py; its page must show the question's <details>, not
the widget it also carries, while a widget without HTML of its own (as the explorer is) still shows as a
widget; in Chromium the answer stays hidden until the summary is clicked. Screenshots land under
artifacts/test_predict_browser/ (git-ignored).

Needs Debian's Chromium at /usr/bin/chromium and Playwright's Python package.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import chromium
import nbformat
import pytest

from attn_course_exercises import predict
from attn_course_tools.publish import book

pytestmark = [pytest.mark.slow, chromium.needs_chromium]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = chromium.ARTIFACTS / "test_predict_browser"
WIDGET_TIMEOUT_MS = 180_000  # kernel start and the course's imports on a busy machine
KEY = "ch1.p1"


def _plain(text: str) -> str:
    """A question's text as the browser shows it: backticks become <code>, which reads without them."""
    return text.replace("`", "")


def _notebook(cells: list) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def test_in_jupyterlab_check_shows_the_verdict_and_every_explanation(tmp_path, capsys):
    question = predict.ask(KEY)
    wrong = next(i for i in range(len(question.options)) if i != question.answer)
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    source = f'from attn_course_exercises.predict import ask\nask("{KEY}")'
    nbformat.write(_notebook([nbformat.v4.new_code_cell(source)]), root / "question.ipynb")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    lab = chromium.Lab(root, home)
    try:
        lab.wait_until_ready()
        with chromium.sync_playwright() as playwright:
            browser = chromium.launch(playwright)
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            try:
                page.goto(lab.url("question.ipynb"))
                chromium.run_all(page, WIDGET_TIMEOUT_MS)
                widget = page.locator(".jp-OutputArea-output .widget-vbox.attn-predict")
                widget.wait_for(timeout=WIDGET_TIMEOUT_MS)
                # JupyterLab ranks the widget above the HTML: the static <details> is not shown
                assert page.locator(".jp-OutputArea-output details").count() == 0
                assert _plain(question.prompt) in widget.inner_text()
                assert not any(_plain(why) in widget.inner_text() for _, why in question.options)

                widget.locator(".widget-radio-box label").nth(wrong).click()
                widget.locator("button", has_text="Check").click()
                page.wait_for_function(
                    "() => document.querySelector('.attn-predict-right') !== null", timeout=60_000
                )
                shown = widget.inner_text()
                assert "Not quite." in shown and "(your answer)" in shown
                for text, why in question.options:
                    assert _plain(text) in shown and _plain(why) in shown
                assert _plain(question.reveal) in shown
                page.screenshot(path=str(ARTIFACTS / "lab_after_check.png"), full_page=True)
            except BaseException:
                page.screenshot(path=str(ARTIFACTS / "lab_failure.png"), full_page=True)
                with capsys.disabled():
                    print(f"\n[browser test] failed; screenshot under {ARTIFACTS}\n{lab.log_tail()}")
                raise
            finally:
                browser.close()
    finally:
        lab.stop()
    with capsys.disabled():
        print(f"\n[browser test] JupyterLab question checked in {time.perf_counter() - start:.1f} s")


def _output(data: dict) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("display_data", data=data)


def _book_course(root: Path) -> None:
    """A course of one notebook: a question's output as a kernel stores it, and a widget without HTML."""
    import ipywidgets as widgets

    question = predict.ask(KEY)
    bundle = dict(question._repr_mimebundle_())
    bundle[predict.WIDGET_VIEW] = question.widget()._repr_mimebundle_()[predict.WIDGET_VIEW]
    slider = widgets.IntSlider(value=3, description="decoder step")
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = _notebook(
        [
            md("# Questions\n\nA question, then a widget of the kind the explorer shows."),
            code(f'ask("{KEY}")', outputs=[_output(bundle)]),
            code("slider", outputs=[_output(slider._repr_mimebundle_())]),
        ]
    )
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": widgets.Widget.get_manager_state()}
    (root / "book").mkdir(parents=True)
    (root / "book" / "index.md").write_text(
        "# Fixture course\n\n```{toctree}\n:glob:\n\n/notebooks/*\n```\n", encoding="utf-8"
    )
    (root / "notebooks").mkdir()
    nbformat.write(nb, root / "notebooks" / "01_questions.ipynb")


def test_the_book_shows_the_details_with_the_answer_hidden_until_clicked(tmp_path, capsys):
    question = predict.ask(KEY)
    source, out, assets = tmp_path / "course", tmp_path / "book", tmp_path / "assets"
    _book_course(source)
    assets.mkdir()
    start = time.perf_counter()
    book.run_sphinx(source, out, assets, conf=ROOT / "book")
    built = time.perf_counter() - start
    page_path = out / "notebooks" / "01_questions.html"
    html = page_path.read_text(encoding="utf-8")
    cells = re.split(r'<div class="cell[ "]', html)[1:]
    asked, slider = cells[0], cells[1]
    assert "<details>" in asked and predict.WIDGET_VIEW not in asked, (
        "the question shows its HTML, not a widget"
    )
    assert predict.WIDGET_VIEW in slider, "a widget without HTML still shows its stored view"

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    why = _plain(question.options[question.answer][1])
    with chromium.sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.goto(page_path.as_uri())
            details = page.locator("details").first
            assert _plain(question.prompt) in page.locator(".attn-predict").first.inner_text()
            assert details.get_attribute("open") is None
            assert not page.get_by_text(why).first.is_visible()
            page.screenshot(path=str(ARTIFACTS / "book_before_click.png"), full_page=True)
            details.locator("summary").click()
            page.get_by_text(why).first.wait_for(state="visible", timeout=10_000)
            for _, other in question.options:
                assert page.get_by_text(_plain(other)).first.is_visible()
            page.screenshot(path=str(ARTIFACTS / "book_after_click.png"), full_page=True)
        finally:
            browser.close()
    with capsys.disabled():
        print(f"\n[browser test] book page built in {built:.1f} s; screenshots under {ARTIFACTS}")
