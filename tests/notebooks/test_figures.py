"""The course's diagrams: every SVG is there, well-formed, titled and tagged for the browser test, and is what
draw.py draws today."""

from __future__ import annotations

import ast
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import pytest

FIGURES = Path(__file__).resolve().parents[2] / "notebooks" / "figures"
DRAW = FIGURES / "draw.py"
SVG = "{http://www.w3.org/2000/svg}"
EXPECTED = [
    "soft_lookup",
    "padded_mask",
    "scoring_functions",
    "location_score",
    "seq2seq_bottleneck",
    "bidirectional_bridge",
    "bahdanau_step",
    "luong_step",
    "local_window",
    "beam_search",
    "scheduled_sampling",
    "scheduled_sampling_variants",
    "attention_patterns",
    "attention_dropout",
    "multihead_split_merge",
    "causal_mask",
    "prenorm_transformer",
    "real_pair_pipeline",
]
#: The roles draw.py tags every mark with (tests/notebooks/test_figures_browser.py finds them by these).
ROLES = {"label", "box", "fill", "arrow", "line"}


@pytest.mark.parametrize("name", EXPECTED)
def test_figure_is_a_titled_svg_of_reasonable_size(name):
    path = FIGURES / f"{name}.svg"
    assert path.exists(), f"{path} is missing: run `make figures`"
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    assert root.get("viewBox") and root.get("width"), f"{name}.svg has no viewBox or width"
    title = root.find(f"{SVG}title")
    assert title is not None and len(title.text or "") > 40, f"{name}.svg needs a <title> describing it"
    assert root.get("aria-label") == title.text
    assert path.stat().st_size < 150_000


@pytest.mark.parametrize("name", EXPECTED)
def test_every_mark_is_tagged_for_the_browser_test(name):
    groups = ET.parse(FIGURES / f"{name}.svg").getroot().iter(f"{SVG}g")
    untagged = [g.get("id") for g in groups if g.get("id", "").startswith(("text_", "patch_", "line2d_"))]
    assert untagged == ["patch_1"], f"{name}.svg: only the background may be untagged, found {untagged}"
    tagged = [g for g in ET.parse(FIGURES / f"{name}.svg").getroot().iter(f"{SVG}g") if g.get("class")]
    assert {g.get("class") for g in tagged} <= ROLES
    labels = [g for g in tagged if g.get("class") == "label"]
    assert labels and all(g.get("data-text") for g in labels), f"{name}.svg: labels without data-text"
    ids = {g.get("id") for g in tagged}
    strays = [g.get("data-on") for g in labels if g.get("data-on") and g.get("data-on") not in ids]
    assert strays == [], f"{name}.svg: labels written on marks that are not there"


def test_no_stray_svg_files():
    assert sorted(p.stem for p in FIGURES.glob("*.svg")) == sorted(EXPECTED)


def test_draw_reproduces_the_committed_figures_byte_for_byte(tmp_path):
    drawn_with = f"(matplotlib {matplotlib.__version__})"
    if drawn_with not in (FIGURES / f"{EXPECTED[0]}.svg").read_text(encoding="utf-8"):
        pytest.skip(f"the figures were drawn by another matplotlib than this {drawn_with}: `make figures`")
    subprocess.run([sys.executable, str(DRAW), "--out", str(tmp_path)], check=True, timeout=300)
    for name in EXPECTED:
        drawn = (tmp_path / f"{name}.svg").read_bytes()
        assert drawn == (FIGURES / f"{name}.svg").read_bytes(), f"{name}.svg is stale: run `make figures`"


def test_draw_does_not_import_the_course_package():
    tree = ast.parse(DRAW.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "attn_course" for name in imported), imported
