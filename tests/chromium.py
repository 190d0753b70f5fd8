"""Debian's headless Chromium for the browser tests, driven by Playwright's Python package, and a JupyterLab
of the test's own for the tests that drive widgets in it (`Lab`, `run_all`).

Playwright's own browser download is never used (it fails offline). The flags keep Chromium from reaching
for Google's services, which this machine's closed network refuses, many requests at a time.
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

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)"
)


def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright's Python package: pip install playwright")
    return sync_playwright()


def launch(playwright):
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)


# ------------------------------------------------------------------------------------------------
# A JupyterLab of the test's own

SERVER_START_TIMEOUT_S = 120


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


def run_all(page, timeout_ms: int) -> None:
    """In the notebook `page` shows, run every cell from the Run menu, once the kernel is up (JupyterLab
    drops a run request sent while it starts)."""
    page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=timeout_ms)
    page.locator(".jp-Notebook").first.click()
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
