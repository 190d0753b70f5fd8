"""Debian's headless Chromium for the browser tests, driven by Playwright's Python package.

Playwright's own browser download is never used (it fails offline). The flags keep Chromium from reaching
for Google's services, which this machine's closed network refuses, many requests at a time.
"""

from __future__ import annotations

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
