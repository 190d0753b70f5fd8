"""The course's diagrams, rendered in headless Chromium: every label clear of the other labels, of the lines
and arrows, of the edges of the boxes and of the filled shapes it is not written on, and inside the figure;
every arrowhead on a box or in the open, never on another line.

draw.py tags each mark's SVG group (`label`, `box`, `fill`, `arrow`, `line`; a label names the box it is
written on in `data-on`). In the browser every label's box is measured as drawn (the text is paths, so
these are the glyphs' own bounds), and every line, arrow and box edge is sampled along its length, one
point per pixel; a point painted over by an opaque shape drawn later is not seen and does not count. A
label fails when another label's box comes within a pixel of it, when a seen point does (plus half the
line's width), or when it overlaps a filled shape it is not written on. Screenshots of every figure
land under artifacts/test_figures/ (git-ignored).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import chromium
import matplotlib.pyplot as plt
import numpy as np
import pytest

pytestmark = [pytest.mark.slow, chromium.needs_chromium]

FIGURES = Path(__file__).resolve().parents[2] / "notebooks" / "figures"
NAMES = sorted(path.stem for path in FIGURES.glob("*.svg"))
ARTIFACTS = chromium.ARTIFACTS / "test_figures"
CLEARANCE_PX = 1.0  # the least gap between a label and a line's edge or another label
STEP_PX = 1.0  # one sampled point per pixel of every line, arrow and box edge
TIP_PX = 4.0  # an arrowhead this near another line lands on it (draw.py stops arrows 2 pt short)

# Every mark of one inline SVG, in screen pixels and in the order it is painted: the boxes [left, top,
# right, bottom] of the labels and shapes, and the points along each stroked path of the boxes, arrows and
# lines, with half the path's width and, for an arrow with a head, its tip (where its shaft ends).
MEASURE_JS = """(svg) => {
  const bounds = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const marks = {canvas: bounds(svg), labels: [], shapes: [], strokes: []};
  const groups = svg.querySelectorAll("g.label, g.box, g.fill, g.arrow, g.line");
  groups.forEach((g, order) => {
    const kind = g.getAttribute("class");
    if (kind === "label") {
      marks.labels.push({id: g.id, order, text: g.dataset.text, on: g.dataset.on || null, box: bounds(g)});
      return;
    }
    const paths = [...g.querySelectorAll("path")];
    if (kind === "box" || kind === "fill") {
      const style = getComputedStyle(paths[0]);
      const opaque = style.fill !== "none" && !style.fill.startsWith("rgba") && style.fillOpacity === "1"
        && style.opacity === "1" && getComputedStyle(g).opacity === "1";
      const circle = g.dataset.shape === "circle";
      marks.shapes.push({id: g.id, kind, order, box: bounds(g), opaque, circle});
      if (kind === "fill") return;
    }
    const points = [];
    let half = 0, tip = null;
    for (const path of paths) {
      const style = getComputedStyle(path);
      if (style.stroke === "none" || parseFloat(style.strokeWidth) === 0) continue;
      const ctm = path.getScreenCTM();
      half = Math.max(half, parseFloat(style.strokeWidth) * Math.hypot(ctm.a, ctm.b) / 2);
      const length = path.getTotalLength(), n = Math.max(1, Math.ceil(length / STEP));
      for (let i = 0; i <= n; i++) {
        const p = path.getPointAtLength(length * i / n).matrixTransform(ctm);
        points.push([p.x, p.y]);
      }
      if (kind === "arrow" && paths.length > 1 && tip === null) tip = points[points.length - 1];
    }
    marks.strokes.push({id: g.id, kind, order, half, points, tip});
  });
  return marks;
}""".replace("STEP", str(STEP_PX))


def load_draw():
    """notebooks/figures/draw.py as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("course_figures_draw", FIGURES / "draw.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def measure(page, svg: str, screenshot: Path | None = None) -> dict:
    """The marks of `svg` (an SVG file's text) as Chromium draws it, optionally saving a screenshot."""
    inline = svg[svg.index("<svg") :]  # without the XML declaration and doctype
    page.set_content(f"<html><body style='margin:0; background:#ffffff'>{inline}</body></html>")
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.locator("svg").first.screenshot(path=str(screenshot))
    return page.eval_on_selector("svg", MEASURE_JS)


def overlap(a, b, slack=0.25) -> bool:
    """Whether boxes a and b ([left, top, right, bottom]) share more than `slack` pixels each way."""
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def inside(box, outer, slack=0.5) -> bool:
    """Whether `box` lies within `outer` (both [left, top, right, bottom]), give or take `slack` pixels."""
    return all(box[i] >= outer[i] - slack for i in (0, 1)) and all(box[i] <= outer[i] + slack for i in (2, 3))


def near(points: np.ndarray, box, margin: float) -> np.ndarray:
    """Which of `points` (n, 2) lie within `margin` pixels of `box` [left, top, right, bottom]."""
    x, y = points[:, 0], points[:, 1]
    return (x > box[0] - margin) & (x < box[2] + margin) & (y > box[1] - margin) & (y < box[3] + margin)


def seen(stroke: dict, shapes: list[dict]) -> np.ndarray:
    """The points of `stroke` that no opaque shape painted after it covers, (n, 2)."""
    points = np.array(stroke["points"]).reshape(-1, 2)
    for shape in shapes:
        if shape["opaque"] and shape["order"] > stroke["order"] and len(points):
            left, top, right, bottom = shape["box"]
            if shape["circle"]:
                centre, radius = np.array([(left + right) / 2, (top + bottom) / 2]), (right - left) / 2
                covered = np.hypot(*(points - centre).T) < radius - 1
            else:
                covered = near(points, shape["box"], -1.0)
            points = points[~covered]
    return points


def problems(marks: dict) -> list[str]:
    """Every label that touches another label, a line, an arrow, a box edge or a fill not its own, or
    leaves the figure, and every arrowhead on another line: one sentence each, labels named by their text."""
    labels, shapes, found = marks["labels"], marks["shapes"], []
    written_on = {label["on"]: label["text"] for label in labels if label["on"]}

    def name(mark):
        text = written_on.get(mark["id"])
        return f"{mark['kind']} {mark['id']} ({text!r})" if text else f"{mark['kind']} {mark['id']}"

    for a, b in itertools.combinations(labels, 2):
        if overlap(a["box"], b["box"], slack=-CLEARANCE_PX):
            found.append(f"label {a['text']!r} overlaps label {b['text']!r}")
    strokes = [(stroke, seen(stroke, shapes)) for stroke in marks["strokes"]]
    for label in labels:
        for stroke, points in strokes:
            if near(points, label["box"], CLEARANCE_PX + stroke["half"]).any():
                found.append(f"label {label['text']!r} lies on {name(stroke)}")
        for shape in shapes:
            if shape["kind"] == "fill" and shape["id"] != label["on"] and overlap(label["box"], shape["box"]):
                found.append(f"label {label['text']!r} lies on the filled shape {shape['id']}")
        if not inside(label["box"], marks["canvas"]):
            found.append(f"label {label['text']!r} is cut off at the figure's edge")
    for arrow, _ in strokes:
        for other, points in strokes:
            if arrow["tip"] and other["kind"] != "box" and other is not arrow:
                tip = [*arrow["tip"], *arrow["tip"]]
                if near(points, tip, TIP_PX + other["half"]).any():
                    found.append(f"the head of arrow {arrow['id']} lands on {name(other)}")
    return found


@pytest.fixture(scope="module")
def page():
    with chromium.sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


@pytest.mark.parametrize("name", NAMES)
def test_every_label_is_clear_of_lines_boxes_and_other_labels(page, name):
    marks = measure(page, (FIGURES / f"{name}.svg").read_text(encoding="utf-8"), ARTIFACTS / f"{name}.png")
    assert marks["labels"], f"{name}.svg has no tagged labels: redraw it with draw.py"
    assert problems(marks) == [], f"{name}.svg"


def _drawn(draw, build) -> str:
    """The SVG text of the figure `build(draw)` returns, drawn in draw.py's style."""
    with plt.rc_context(draw.STYLE):
        return build(draw).svg()


def _defects(draw):
    """A figure with one of each defect, each label saying which."""
    fig = draw.Figure("defects", 320, 220, "A figure with one of each defect the browser test must catch.")
    fig.box(60, 50, 80, 30, "GRU")
    fig.text(60, 66, "across an edge")
    fig.arrow((20, 120), (300, 120))
    fig.text(150, 120, "on an arrow")
    fig.line((150, 150), (150, 210))
    fig.text(150, 170, "on a line")
    fig.arrow((20, 200), (150, 200))
    fig.text(230, 40, "first")
    fig.text(236, 46, "second")
    fig.rect(250, 150, 50, 30, fc="#4a7ab5")
    fig.text(275, 165, "on a bar")
    fig.text(318, 80, "cut off", ha="left")
    return fig


def _clean(draw):
    """Marks like those above, each label beside its line or inside its box; an arrow hidden behind a box."""
    fig = draw.Figure("clean", 320, 220, "A figure whose every label keeps clear of every other mark.")
    fig.arrow((60, 10), (60, 60), head=False)
    b = fig.box(60, 50, 80, 30, "GRU")
    fig.text(60, 80, "under the box")
    fig.arrow(b.right, (300, 50))
    fig.text(200, 38, "over the arrow")
    fig.line((20, 110), (20, 210))
    fig.text(30, 150, "beside a line", ha="left")
    fig.arrow((20, 200), (150, 200))
    cell = fig.rect(230, 100, 60, 30, fc="#dceaf7", ec="#9a9a9a")
    fig.text(260, 115, "in it", on=cell, size=8)
    fig.rect(250, 150, 50, 30, fc="#4a7ab5")
    fig.text(245, 165, "by a bar", ha="right")
    return fig


def test_the_check_finds_each_kind_of_defect(page):
    found = problems(measure(page, _drawn(load_draw(), _defects)))
    for expected in [
        "label 'across an edge' lies on box box-1 ('GRU')",
        "label 'on an arrow' lies on arrow",
        "label 'on a line' lies on line",
        "the head of arrow arrow-8 lands on line line-6",
        "label 'first' overlaps label 'second'",
        "label 'on a bar' lies on the filled shape",
        "label 'cut off' is cut off at the figure's edge",
    ]:
        assert any(problem.startswith(expected) for problem in found), (expected, found)


def test_the_check_passes_labels_that_keep_clear_and_lines_behind_boxes(page):
    assert problems(measure(page, _drawn(load_draw(), _clean))) == []
