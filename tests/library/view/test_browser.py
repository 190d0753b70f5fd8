"""The attention explorer in a real JupyterLab, driven by headless Chromium from the keyboard.

The test starts its own JupyterLab on 127.0.0.1 (a free port, a random token, runtime/config/data
directories in a temporary folder), opens a notebook that shows an AttentionExplorer, runs all cells from
the Run menu, focuses the decoder-step slider, presses ArrowRight, and checks that the page changed: the
slider reads 1, the highlighted target token in the step view is the next word, and the heatmap image was
replaced. A screenshot is saved under artifacts/test_browser/ (git-ignored) and its path printed.

Needs Debian's Chromium at /usr/bin/chromium (`apt-get install chromium`) and Playwright from PyPI (only
its Python driver: Playwright's own browser download is never used). Skipped only when Chromium is absent.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import chromium
import nbformat
import pytest

ARTIFACTS = chromium.ARTIFACTS / "test_browser"
SERVER_START_TIMEOUT_S = 120
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port: int, token: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        body = response.read()
    return json.loads(body) if body else None


class Lab:
    """A JupyterLab server of our own: isolated directories, started and stopped by the test."""

    def __init__(self, root: Path, home: Path) -> None:
        self.port, self.token = free_port(), secrets.token_hex(16)
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        # No news or update checks: nothing leaves the machine, and no toast covers the page.
        settings = home / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        command = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
        ]
        if os.geteuid() == 0:
            command.append("--allow-root")
        self.log_path = home / "jupyterlab.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_until_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"JupyterLab exited with code {self.process.returncode}:\n{self.log_tail()}")
            try:
                api(self.port, self.token, "/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        pytest.fail(f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S} s:\n{self.log_tail()}")

    def url(self, notebook: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{notebook}?token={self.token}"

    def stop(self) -> None:
        """Shut the kernels and the server down through the API; terminate, then kill, if it lingers."""
        try:
            if self.process.poll() is None:
                for kernel in api(self.port, self.token, "/api/kernels") or []:
                    api(self.port, self.token, f"/api/kernels/{kernel['id']}", method="DELETE")
                api(self.port, self.token, "/api/shutdown", method="POST")
                self.process.wait(timeout=20)
        except (urllib.error.URLError, ConnectionError, TimeoutError, subprocess.TimeoutExpired):
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(timeout=10)
        finally:
            self._log.close()


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

    lab = Lab(root, home)
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

                # Run All only once the kernel is up: JupyterLab drops a run request sent while it starts.
                page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(
                    timeout=WIDGET_TIMEOUT_MS
                )
                timings["kernel idle"] = time.perf_counter() - start
                page.locator(".jp-Notebook").first.click()
                page.locator(".lm-MenuBar-item", has_text="Run").first.click()
                page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
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
