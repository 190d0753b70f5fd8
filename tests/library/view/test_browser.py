"""The attention explorer in a real JupyterLab, driven by headless Chromium from the keyboard.

The test starts its own JupyterLab (`chromium.Lab`: 127.0.0.1, a free port, a random token, its
directories in a temporary folder), opens a notebook that shows an AttentionExplorer, runs all cells from
the Run menu, focuses the decoder-step slider, presses ArrowRight, and checks that the page changed: the
slider reads 1, the highlighted target token in the step view is the next word, and the heatmap image was
replaced. A screenshot is saved under artifacts/test_browser/ (git-ignored) and its path printed.

Needs Debian's Chromium at /usr/bin/chromium (`apt-get install chromium`) and Playwright from PyPI (only
its Python driver: Playwright's own browser download is never used). Skipped only when Chromium is absent.
"""

from __future__ import annotations

import time

import chromium
import nbformat
import pytest

ARTIFACTS = chromium.ARTIFACTS / "test_browser"
WIDGET_TIMEOUT_MS = 180_000  # kernel start + imports + a tiny model on a busy CI machine

# The notebook the browser runs: a random-initialised tiny model is enough, since the test is about the
# widget plumbing (kernel -> widget state -> DOM -> keyboard -> kernel -> DOM), not about translations.
# "reference" mode force-decodes the reference, so there are always len(target) + 1 >= 4 decoder steps.
NOTEBOOK_CELLS = [
    "import torch\n"
    "from attn_course.data.tasks import build_vocabs, toy_translation\n"
    "from attn_course.models.seq2seq import build_model\n"
    "from attn_course.view.widgets import AttentionExplorer\n"
    "torch.manual_seed(0)\n"
    "examples = toy_translation(6, min_len=4, max_len=6, seed=0)\n"
    "src_vocab, tgt_vocab = build_vocabs(examples)\n"
    'model = build_model("bahdanau", len(src_vocab), len(tgt_vocab), embed_size=8, encoder_hiddens=8)',
    'explorer = AttentionExplorer(model, examples, src_vocab, tgt_vocab, mode="reference")\nexplorer',
]

pytestmark = [pytest.mark.slow, chromium.needs_chromium]


def test_step_slider_moves_from_the_keyboard_in_jupyterlab(tmp_path, capsys):
    timings = {}
    start = time.perf_counter()
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "explorer.ipynb")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "explorer_after_arrow_right.png"

    lab = chromium.Lab(root, home)
    try:
        lab.wait_until_ready()
        timings["server start"] = time.perf_counter() - start
        with chromium.sync_playwright() as playwright:
            browser = chromium.launch(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                page.goto(lab.url("explorer.ipynb"))
                page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
                timings["page load"] = time.perf_counter() - start

                chromium.run_all(page, WIDGET_TIMEOUT_MS)
                timings["run all requested"] = time.perf_counter() - start
                current = page.locator(".attn-current")
                current.first.wait_for(timeout=WIDGET_TIMEOUT_MS)
                image = page.locator(".widget-image").first
                image.wait_for(timeout=WIDGET_TIMEOUT_MS)
                timings["run all cells"] = time.perf_counter() - start
                first_token, first_src = current.first.inner_text(), image.get_attribute("src")
                target_tokens = page.locator(".attn-tok").all_inner_texts()
                assert current.count() == 1 and current.first.get_attribute("data-step") == "0"
                assert len(target_tokens) >= 4 and first_token == target_tokens[0]

                slider = page.locator(".widget-slider", has=page.locator("label", has_text="decoder step"))
                handle = slider.locator(".noUi-handle")
                assert handle.get_attribute("aria-valuenow") in ("0", "0.0")
                handle.focus()
                page.keyboard.press("ArrowRight")
                page.wait_for_function(
                    "([token]) => { const c = document.querySelector('.attn-current');"
                    " return c !== null && c.getAttribute('data-step') === '1'; }",
                    arg=[first_token],
                    timeout=60_000,
                )
                page.wait_for_function(
                    "([src]) => { const i = document.querySelector('.widget-image');"
                    " return i !== null && i.getAttribute('src') !== src; }",
                    arg=[first_src],
                    timeout=60_000,
                )
                timings["keyboard step"] = time.perf_counter() - start
                assert current.first.inner_text() == target_tokens[1]
                assert slider.locator(".widget-readout").inner_text().strip() == "1"
                assert float(handle.get_attribute("aria-valuenow")) == 1.0
            except BaseException:
                failure = ARTIFACTS / "explorer_failure.png"
                page.screenshot(path=str(failure), full_page=True)
                with capsys.disabled():
                    print(f"\n[browser test] failed; screenshot: {failure}\n{lab.log_tail()}")
                raise
            else:
                page.screenshot(path=str(screenshot), full_page=True)
            finally:
                browser.close()
    finally:
        lab.stop()
    timings["total"] = time.perf_counter() - start
    with capsys.disabled():
        steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
        print(f"\n[browser test] screenshot: {screenshot}\n[browser test] cumulative: {steps}")
    assert lab.process.returncode is not None  # the server is gone
