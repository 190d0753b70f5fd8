"""A Parsons problem and a find-the-bug drill in a browser: the widgets in a real JupyterLab, and the static
fallbacks the book shows.

In JupyterLab (the test's own, `chromium.Lab`) a notebook shows chapter 6's beam
step as a Parsons problem and one of chapter 1's drills. The test clicks a distractor into the program and
presses Check (the verdict names the distractor's mistake), removes it, clicks the model's lines in with the
first one last and moves it to the top, presses Check and reads "Correct"; then it picks the drill's planted
mistake, presses Check and reads "Right". The static HTML of both (what the book shows) is opened in
Chromium: the answer stays hidden until its <details> summary is clicked. Screenshots land under
artifacts/test_practice_browser/ (git-ignored).

Needs Debian's Chromium at /usr/bin/chromium and Playwright's Python package.
"""

from __future__ import annotations

import time
from pathlib import Path

import chromium
import nbformat
import pytest

from attn_course_exercises.drills import drill
from attn_course_exercises.parsons import parsons

pytestmark = [pytest.mark.slow, chromium.needs_chromium]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = chromium.ARTIFACTS / "test_practice_browser"
WIDGET_TIMEOUT_MS = 180_000  # kernel start and the course's imports on a busy machine
PROBLEM, CHAPTER, K = "ch6.q2", 1, 0


def _notebook() -> nbformat.NotebookNode:
    code = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(
        cells=[
            code(
                f'from attn_course_exercises.parsons import parsons\nproblem = parsons("{PROBLEM}")\nproblem'
            ),
            code(f"from attn_course_exercises.drills import drill\nd = drill({CHAPTER}, {K})\nd"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _solve_the_parsons_problem(page, problem) -> None:
    board = page.locator(".jp-OutputArea-output .widget-vbox.attn-parsons")
    feedback = board.locator(".attn-parsons-feedback")
    line = lambda n: board.locator(f'button.attn-parsons-line[title="line {n}"]')  # noqa: E731
    # A distractor first: the verdict names its line and its mistake.
    distractor = problem.distractors[0]
    line(distractor).click()
    board.locator("button.attn-parsons-check").click()
    feedback.get_by_text(f"Line {distractor}").wait_for(timeout=60_000)
    assert problem.lines[distractor].mistake.hint.split("`")[0][:30] in feedback.inner_text()
    page.screenshot(path=str(ARTIFACTS / "lab_parsons_distractor.png"), full_page=True)
    board.locator("button.attn-parsons-remove").first.click()
    # The model's lines, the first one last, then moved to the top with its up arrow.
    first, *rest = problem.model_order
    for number in [*rest, first]:
        line(number).click()
    page.wait_for_function(
        "n => document.querySelectorAll('.attn-parsons-row').length === n", arg=len(problem.model_order)
    )
    for position in range(len(rest), 0, -1):
        board.locator("button.attn-parsons-up").nth(position).click()
        page.wait_for_timeout(300)
    board.locator("button.attn-parsons-check").click()
    feedback.get_by_text("Correct").wait_for(timeout=60_000)
    shown = [r.inner_text().strip() for r in board.locator(".attn-parsons-row pre").all()]
    assert shown == [problem.lines[n].text.strip() for n in problem.model_order]


def test_in_jupyterlab_a_parsons_problem_is_clicked_into_order_and_a_drill_is_answered(tmp_path, capsys):
    problem, d = parsons(PROBLEM), drill(CHAPTER, K)
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    nbformat.write(_notebook(), root / "practice.ipynb")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    lab = chromium.Lab(root, home)
    try:
        lab.wait_until_ready()
        with chromium.sync_playwright() as playwright:
            browser = chromium.launch(playwright)
            page = browser.new_page(viewport={"width": 1300, "height": 1400})
            try:
                page.goto(lab.url("practice.ipynb"))
                chromium.run_all(page, WIDGET_TIMEOUT_MS)
                page.locator(".jp-OutputArea-output .attn-drill").wait_for(timeout=WIDGET_TIMEOUT_MS)
                # JupyterLab ranks the widgets above the HTML: no static <details> is shown
                assert page.locator(".jp-OutputArea-output details").count() == 0
                _solve_the_parsons_problem(page, problem)
                page.screenshot(path=str(ARTIFACTS / "lab_parsons_correct.png"), full_page=True)

                box = page.locator(".jp-OutputArea-output .widget-vbox.attn-drill")
                box.scroll_into_view_if_needed()
                box.locator(".widget-radio-box label").nth(d.right).click()
                box.locator("button.attn-drill-check").click()
                box.locator(".attn-drill-feedback").get_by_text("Right.").wait_for(timeout=60_000)
                assert "What the check says" in box.locator(".attn-drill-feedback").inner_text()
                box.screenshot(path=str(ARTIFACTS / "lab_drill_right.png"))
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
        print(f"\n[browser test] practice widgets answered in {time.perf_counter() - start:.1f} s")


def test_the_static_html_hides_each_answer_until_its_summary_is_clicked():
    problem, d = parsons(PROBLEM), drill(CHAPTER, K)
    shown = {
        "parsons": (problem.fallback_html(), "One right order"),
        "drill": (d.fallback_html(), "The planted mistake is"),
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium.sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            for name, (body, answer) in shown.items():
                page.set_content(f"<html><body>{body}</body></html>")
                assert not page.get_by_text(answer).first.is_visible()
                page.screenshot(path=str(ARTIFACTS / f"static_{name}_before_click.png"), full_page=True)
                page.locator("summary").click()
                page.get_by_text(answer).first.wait_for(state="visible", timeout=10_000)
                page.screenshot(path=str(ARTIFACTS / f"static_{name}_after_click.png"), full_page=True)
        finally:
            browser.close()
