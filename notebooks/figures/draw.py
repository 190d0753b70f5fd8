"""Draw the course's diagrams as SVG files: boxes for modules, arrows for tensors, one style for all.

    python notebooks/figures/draw.py               # redraw every figure next to this file
    python notebooks/figures/draw.py --out DIR     # ... or into DIR

Each `draw_*` function below is one figure, in the order the chapters use them. Coordinates are in
hundredths of an inch, y pointing down (as in SVG), so a figure reads like its code from top to bottom.
Text is drawn as paths (the same glyphs on every machine); the output is byte-for-byte reproducible.
Every mark is tagged in the SVG (see `Figure`), so that tests/notebooks/test_figures_browser.py can check in a
browser that no label touches another label, a line or a box edge.
"""

from __future__ import annotations

import argparse
import io
import math
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402
from matplotlib.path import Path as MplPath  # noqa: E402

#: Recorded in each SVG: the figures are byte-identical only when redrawn by the same matplotlib.
CREATOR = f"notebooks/figures/draw.py (matplotlib {matplotlib.__version__})"

HERE = Path(__file__).resolve().parent

# One palette, one font, one arrow style for every figure.
INK = "#2b2b2b"
MUTED = "#6f6f6f"  # shapes and notes
KINDS = {  # box kind -> (fill, edge)
    "module": ("#dceaf7", "#4a7ab5"),  # a layer with parameters (GRU, W_q, FFN)
    "attention": ("#fde2c4", "#d9822b"),  # scores, softmax, weighted sums
    "state": ("#e2f0d9", "#5a9a45"),  # a tensor: a state, a context, a token
    "input": ("#ffffff", "#8a8a8a"),  # words and plain inputs
    "grey": ("#efefef", "#b0b0b0"),  # what is not used: padding, pruned hypotheses
    "finished": ("#fde2c4", "#d9822b"),
}
HEADS = ["#4a7ab5", "#d9822b", "#5a9a45", "#8e6bb0"]  # one colour per attention head
ACCENT = "#c0392b"
FONT = 11  # points
SMALL = 9
STYLE = {
    "font.family": "DejaVu Sans",
    "mathtext.fontset": "dejavusans",
    "svg.fonttype": "path",
    "svg.hashsalt": "attn-course",
    "path.simplify": False,
}


@dataclass
class Box:
    """A box's centre (x, y) and size; the attachment points of arrows are its edge midpoints. `gid` is the
    id of the shape in the SVG file (its label names it as the shape it sits on)."""

    x: float
    y: float
    w: float
    h: float
    gid: str = ""

    @property
    def top(self):
        return (self.x, self.y - self.h / 2)

    @property
    def bottom(self):
        return (self.x, self.y + self.h / 2)

    @property
    def left(self):
        return (self.x - self.w / 2, self.y)

    @property
    def right(self):
        return (self.x + self.w / 2, self.y)


class Figure:
    """A blank canvas of width x height (hundredths of an inch) with the drawing helpers.

    Every mark is tagged in the SVG file, so that a test can find it: its group gets an id and a class,
    `label` (a text; `data-text` holds the string, `data-on` the id of the box or cell it is written on),
    `box` (a shape with a visible edge: a module, a circle (`data-shape`), a frame, a grid cell), `fill` (a
    shape without one: a bar, a tensor block, a heatmap cell), `arrow` or `line`.
    """

    def __init__(self, name: str, width: float, height: float, title: str):
        self.name, self.title = name, title
        self.fig = plt.figure(figsize=(width / 100, height / 100))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(height, 0)
        self.ax.axis("off")
        self.tags: dict[str, dict[str, str]] = {}

    def _tag(self, artist, role: str, **attributes) -> str:
        """Give `artist` the next id of its role, and remember the attributes its SVG group gets."""
        gid = f"{role}-{len(self.tags) + 1}"
        artist.set_gid(gid)
        self.tags[gid] = {"class": role, **{k: v for k, v in attributes.items() if v}}
        return gid

    def text(self, x, y, s, size=FONT, color=INK, ha="center", va="center", on: Box | None = None, **kw):
        """A label; `on`: the box or cell it is written on (its edges must still keep clear of it)."""
        if not s:
            return
        artist = self.ax.text(x, y, s, size=size, color=color, ha=ha, va=va, **kw)
        self._tag(artist, "label", **{"data-text": s, "data-on": on.gid if on else ""})

    def note(self, x, y, s, ha="center", va="center", size=SMALL, **kw):
        """A shape or a remark: smaller and grey."""
        kw.setdefault("color", MUTED)
        self.text(x, y, s, size=size, ha=ha, va=va, **kw)

    def frame(self, x0, y0, w, h, fc="none", ec="#9a9a9a", lw=1.0, dashed=False, rounding=6, **kw) -> Box:
        """A rounded rectangle from its top-left corner: a module's box, or a frame around a group."""
        patch = FancyBboxPatch(
            (x0, y0),
            w,
            h,
            boxstyle=f"round,pad=0,rounding_size={rounding}",
            fc=fc,
            ec=ec,
            lw=lw,
            ls="--" if dashed else "-",
            **kw,
        )
        self.ax.add_patch(patch)
        return Box(x0 + w / 2, y0 + h / 2, w, h, self._tag(patch, "box"))

    def box(self, x, y, w, h, label="", kind="module", size=FONT, dashed=False, **kw) -> Box:
        fill, edge = KINDS[kind]
        b = self.frame(x - w / 2, y - h / 2, w, h, fc=fill, ec=edge, lw=1.3, dashed=dashed)
        if label:
            self.text(x, y, label, size=size, color=MUTED if kind == "grey" else INK, on=b, **kw)
        return b

    def circle(self, x, y, label="+", r=11, kind="attention", size=FONT) -> Box:
        fill, edge = KINDS[kind]
        patch = Circle((x, y), r, fc=fill, ec=edge, lw=1.3)
        self.ax.add_patch(patch)
        b = Box(x, y, 2 * r, 2 * r, self._tag(patch, "box", **{"data-shape": "circle"}))
        if label:
            self.text(x, y, label, size=size, on=b)
        return b

    def arrow(self, *points, dashed=False, color=INK, head=True, lw=1.3):
        """An arrow along the polyline through `points`, its head at the last one."""
        style = "-|>,head_length=0.7,head_width=0.32" if head else "-"
        patch = FancyArrowPatch(
            path=MplPath(points),
            arrowstyle=style,
            mutation_scale=10,
            color=color,
            lw=lw,
            ls=(0, (4, 3)) if dashed else "-",
            joinstyle="miter",
            capstyle="butt",
        )
        self.ax.add_patch(patch)
        self._tag(patch, "arrow")

    def line(self, *points, color=INK, lw=1.3, dashed=False):
        xs, ys = zip(*points, strict=True)
        (artist,) = self.ax.plot(
            xs, ys, color=color, lw=lw, ls=(0, (4, 3)) if dashed else "-", solid_capstyle="butt"
        )
        self._tag(artist, "line")

    def rect(self, x, y, w, h, fc, ec="none", lw=1.0, **kw) -> Box:
        """A plain rectangle from its top-left corner (grid cells, bars, tensor blocks); a `fill` when its
        edge is invisible (none or white), else a `box`."""
        patch = Rectangle((x, y), w, h, fc=fc, ec=ec, lw=lw, **kw)
        self.ax.add_patch(patch)
        role = "fill" if ec in ("none", "#ffffff") else "box"
        return Box(x + w / 2, y + h / 2, abs(w), abs(h), self._tag(patch, role))

    def svg(self) -> str:
        buffer = io.StringIO()
        self.fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": CREATOR})
        plt.close(self.fig)
        text = buffer.getvalue()
        for gid, attributes in self.tags.items():
            opening = f'<g id="{gid}">'
            if text.count(opening) != 1:
                found = text.count(opening)
                raise RuntimeError(f"{self.name}: expected one group {opening} in the SVG, found {found}")
            extra = "".join(f" {key}={quoteattr(value)}" for key, value in attributes.items())
            text = text.replace(opening, f'<g id="{gid}"{extra}>')
        start = text.index("<svg ")
        end = text.index(">", start) + 1
        opening = text[start:end].replace("<svg ", f'<svg role="img" aria-label={quoteattr(self.title)} ', 1)
        return text[:start] + opening + f"\n <title>{escape(self.title)}</title>" + text[end:]


def labelled(fig: Figure, x, y, symbol, shape=None, ha="left", dy=13):
    """A tensor's symbol and, under it, its shape."""
    fig.text(x, y, symbol, ha=ha)
    if shape:
        fig.note(x, y + dy, shape, ha=ha)


# ---------------------------------------------------------------- chapter 1


def draw_soft_lookup() -> Figure:
    fig = Figure(
        "soft_lookup",
        900,
        390,
        "Attention as a soft lookup: a hard dictionary lookup returns the "
        "value of the one matching key; a soft lookup scores the query against every key, turns the "
        "scores into weights that sum to 1 with a softmax, and returns the weighted sum of the "
        "values.",
    )
    fig.text(140, 22, "hard lookup: a Python dict", size=12)
    fig.text(590, 22, "soft lookup: attention", size=12)
    fig.line((292, 10), (292, 380), color="#d0d0d0")
    # hard lookup: the query equals one key
    fig.box(70, 75, 62, 30, "tea", kind="state")
    fig.note(70, 50, "query")
    for x, name in [(70, "key"), (142, "weight"), (215, "value")]:
        fig.note(x, 118, name)
    for i, (key, value, weight) in enumerate([("I", "je", 0), ("like", "aime", 0), ("tea", "thé", 1)]):
        y = 150 + 46 * i
        fig.box(70, y, 62, 30, key, kind="input")
        fig.box(215, y, 62, 30, value, kind="state" if weight else "grey")
        fig.box(142, y, 36, 30, str(weight), kind="attention" if weight else "input", size=10)
    fig.frame(32, 225, 220, 42, ec=KINDS["attention"][1], lw=1.3, dashed=True, rounding=8)
    fig.text(140, 305, "query == key: one weight 1, the rest 0", size=SMALL)
    fig.text(140, 327, "the answer is the value of the match, 'thé'", size=SMALL)
    # soft lookup: every key gets a weight
    weights = [0.12, 0.46, 0.30, 0.12]
    q = fig.box(350, 185, 44, 34, "$q$", kind="state")
    fig.note(350, 153, "query")
    for x, name in [(440, "keys"), (530, "scores"), (676, r"weights $\alpha_i$"), (790, "values")]:
        fig.note(x, 60, name)
    soft = fig.box(606, 185, 44, 250, "", kind="attention")
    fig.text(606, 185, "softmax over $i$", size=10, rotation=90)
    for i, weight in enumerate(weights):
        y = 90 + 60 * i + (10 if i == 3 else 0)
        name = "m" if i == 3 else str(i + 1)
        k = fig.box(440, y, 50, 32, f"$k_{{{name}}}$", kind="state")
        fig.arrow(q.right, k.left, color=MUTED)
        score = fig.box(530, y, 84, 32, f"$a(q, k_{{{name}}})$", kind="attention", size=10)
        fig.arrow(k.right, score.left)
        fig.arrow(score.right, (soft.left[0], y))
        fig.arrow((soft.right[0], y), (644, y))
        fig.rect(650, y + 14, 52, -56 * weight, fc=KINDS["attention"][1])
        fig.text(676, y + 14 - 56 * weight - 8, f"{weight:.2f}", size=SMALL)
        fig.box(790, y, 50, 32, f"$v_{{{name}}}$", kind="state")
        fig.arrow((708, y), (762, y), color=MUTED)
        fig.text(735, y - 9, r"$\times$", size=SMALL)
    for x in (440, 530, 790):
        fig.text(x, 242, r"$\vdots$", size=10)
    fig.note(676, 325, r"$\alpha_i > 0,\ \sum_i \alpha_i = 1$")
    out = fig.box(790, 350, 110, 34, r"$\sum_i \alpha_i v_i$", kind="state", size=10)
    fig.arrow((790, 296), out.top)
    fig.note(728, 350, "output", ha="right")
    return fig


# long: one figure's coordinates, read top to bottom
def draw_padded_mask() -> Figure:
    valid_lens = [3, 5, 2, 0]
    tokens = [["I", "like", "tea"], ["we", "read", "a", "good", "book"], ["hi", "there"], []]
    weights = [[0.21, 0.47, 0.32], [0.10, 0.35, 0.15, 0.28, 0.12], [0.64, 0.36], []]
    fig = Figure(
        "padded_mask",
        960,
        325,
        "A padded batch of four sentences with valid_lens 3, 5, 2 and 0, "
        "the boolean mask sequence_mask builds from valid_lens, and the weights masked_softmax "
        "returns: "
        "zero on padded positions, each row with a real key summing to 1, and the empty row "
        "all zeros.",
    )
    cell, top = 46, 78
    panels = [
        (30, "a padded batch", "tokens (batch_size, num_keys) = (4, 5)"),
        (340, "sequence_mask: $j$ < valid_lens[$i$]", "mask (batch_size, num_keys), bool"),
        (645, "masked_softmax(scores, valid_lens)", "weights (batch_size, 1, num_keys)"),
    ]
    for x0, heading, shape in panels:
        fig.text(x0 + 2.5 * cell, 22, heading, size=11)
        fig.note(x0 + 2.5 * cell, 44, shape)
    for i in range(4):
        y = top + i * cell
        fig.note(18, y + cell / 2, f"{valid_lens[i]}", ha="right")
        for j in range(5):
            real = j < valid_lens[i]
            fig.rect(30 + j * cell, y, cell, cell, fc="#ffffff" if real else KINDS["grey"][0], ec="#9a9a9a")
            fig.text(
                30 + (j + 0.5) * cell,
                y + cell / 2,
                tokens[i][j] if real else "<pad>",
                size=SMALL if real else 8,
                color=INK if real else MUTED,
            )
            fig.rect(
                340 + j * cell, y, cell, cell, fc=KINDS["module"][1] if real else "#ffffff", ec="#9a9a9a"
            )
            fig.text(
                340 + (j + 0.5) * cell,
                y + cell / 2,
                "True" if real else "False",
                size=8,
                color="#ffffff" if real else MUTED,
            )
            w = weights[i][j] if real else 0.0
            shade = KINDS["attention"][0] if real else "#ffffff"
            fig.rect(645 + j * cell, y, cell, cell, fc=shade, ec="#9a9a9a")
            fig.text(
                645 + (j + 0.5) * cell,
                y + cell / 2,
                f"{w:.2f}" if real else "0",
                size=SMALL,
                color=INK if real else MUTED,
            )
        fig.text(
            885,
            y + cell / 2,
            "sum 1" if valid_lens[i] else "sum 0",
            size=SMALL,
            color=INK if valid_lens[i] else ACCENT,
            ha="left",
        )
    fig.note(4, top - 12, "valid_lens", ha="left")
    for x in (278, 583):
        fig.arrow((x, top + 2 * cell), (x + 50, top + 2 * cell))
    fig.text(
        645 + 2.5 * cell, top + 4 * cell + 20, "empty row (valid_len 0): all zeros,", size=SMALL, color=ACCENT
    )
    fig.text(645 + 2.5 * cell, top + 4 * cell + 38, "not uniform, not NaN", size=SMALL, color=ACCENT)
    fig.note(30 + 2.5 * cell, top + 4 * cell + 20, "padding is a storage trick")
    fig.note(340 + 2.5 * cell, top + 4 * cell + 20, "positions (1, num_keys) < valid_lens (batch_size, 1)")
    return fig


# ---------------------------------------------------------------- chapter 2


def _graph_column(fig: Figure, x, title, formula, steps, inputs, note):
    """One score as a small computation graph, read bottom-up: the inputs, each step, the score.

    A step given as (label, kind, "key") works on the key alone: it sits above the key, and the query's
    arrow passes beside it to the next step.
    """
    fig.text(x, 22, title, size=11)
    fig.text(x, 48, formula, size=11)
    for dx, label in inputs:
        fig.box(x + dx, 390, 46, 30, label, kind="state")
    (query_dx, _), (key_dx, _) = inputs
    below = None  # the box under the next step, None for the inputs
    for i, (label, kind, *key_only) in enumerate(steps):
        y = 325 - 62 * i
        if key_only:
            below = fig.box(x + key_dx, y, 80, 32, label, kind=kind, size=10)
            fig.arrow((x + key_dx, 375), below.bottom)
            continue
        b = fig.box(x, y, 150, 32, label, kind=kind, size=10)
        if below is None:
            for dx, _ in inputs:
                fig.arrow((x + dx, 375), (x + dx * 0.4, b.bottom[1]))
        elif below.x != x:  # the key's own step, and the query from the bottom
            fig.arrow(below.top, (below.x, b.bottom[1]))
            fig.arrow((x + query_dx, 375), (x + query_dx, b.bottom[1]))
        else:
            fig.arrow(below.top, b.bottom)
        below = b
    score = fig.box(x, 90, 70, 28, "score", kind="state", size=10)
    fig.arrow(below.top, score.bottom)
    if note:
        fig.note(x, 422, note, size=8)


# long: one figure's coordinates, read top to bottom
def draw_scoring_functions() -> Figure:
    fig = Figure(
        "scoring_functions",
        900,
        460,
        "Four scoring functions as computation graphs: the scaled "
        "dot product, Bahdanau's additive score, Luong's general score and Luong's concat score, "
        "each turning one query and one key into one score.",
    )
    columns = [
        (
            115,
            "scaled dot product",
            r"$q^\top k\,/\sqrt{d}$",
            [(r"dot: $q^\top k$", "attention"), (r"$\div\ \sqrt{d}$", "attention")],
            [(-35, "$q$"), (35, "$k$")],
            "no parameters; $q$, $k$ of one size $d$",
        ),
        (
            335,
            "additive (Bahdanau)",
            r"$w_v^\top \tanh(W_q q + W_k k)$",
            [("$W_q q\\ +\\ W_k k$", "module"), (r"$\tanh$", "attention"), (r"$w_v^\top\,\cdot$", "module")],
            [(-35, "$q$"), (35, "$k$")],
            "$W_k k$: once per source batch",
        ),
        (
            560,
            "Luong general",
            r"$h_t^\top W_a \bar h_s$",
            [(r"$W_a \bar h_s$", "module", "key"), (r"dot: $h_t^\top (W_a \bar h_s)$", "attention")],
            [(-35, "$h_t$"), (35, r"$\bar h_s$")],
            r"$W_a \bar h_s$: once per source batch",
        ),
        (
            785,
            "Luong concat",
            r"$v_a^\top \tanh(W_a [h_t; \bar h_s])$",
            [
                (r"$[h_t;\ \bar h_s]$", "attention"),
                (r"$W_a\,\cdot$", "module"),
                (r"$\tanh$", "attention"),
                (r"$v_a^\top\,\cdot$", "module"),
            ],
            [(-35, "$h_t$"), (35, r"$\bar h_s$")],
            "= additive with $W_a = [W_q, W_k]$",
        ),
    ]
    for column in columns:
        _graph_column(fig, *column)
    for x in (225, 448, 672):
        fig.line((x, 15), (x, 430), color="#e0e0e0")
    fig.note(
        450,
        450,
        "query ($q$, $h_t$) and key ($k$, $\\bar h_s$) at the bottom, one score per "
        "(query, key) "
        "pair at the top: scores (batch_size, num_queries, num_keys)",
        size=8,
    )
    return fig


def draw_location_score() -> Figure:
    fig = Figure(
        "location_score",
        900,
        490,
        "Luong's location score: a_t = softmax(W_a h_t) gives one score per source position from the "
        "decoder state h_t alone, W_a mapping H numbers to max_len scores; the first S are kept and "
        "masked to the valid length; the annotations are never scored, only averaged as the values of "
        "the context c_t.",
    )
    fig.text(20, 22, r"location (Luong et al. 2015, eq. 8): $a_t = \mathrm{softmax}(W_a h_t)$", ha="left")
    fig.note(20, 44, "the scores come from the query alone: where to look, not what to look for", ha="left")
    h_t = fig.box(150, 420, 50, 32, "$h_t$", kind="state")
    fig.note(182, 420, "query: (batch_size, 1, H)", ha="left")
    w_a = fig.box(150, 350, 120, 32, r"$W_a h_t$", size=10)
    fig.arrow(h_t.top, w_a.bottom)
    fig.note(218, 350, "$W_a$: H numbers to max_len scores", ha="left")
    x0, cell, S = 60, 40, 4  # positions 1..max_len = 6; the first S kept, the last of them padding
    for s in range(6):
        kept = s < S
        fill = KINDS["attention"][0] if kept else KINDS["grey"][0]
        box = fig.rect(x0 + s * cell, 254, cell, 30, fc=fill, ec="#9a9a9a")
        fig.text(x0 + (s + 0.5) * cell, 269, f"{s + 1}", size=SMALL, color=INK if kept else MUTED, on=box)
    fig.arrow(w_a.top, (150, 286))
    for i, line in enumerate(["one score per position", "1 .. max_len (= 6);", "the first S (= 4) kept"]):
        fig.note(x0 + 6 * cell + 10, 254 + 15 * i, line, ha="left")
    soft = fig.box(140, 190, 230, 32, "masked softmax (valid_lens)", kind="attention", size=10)
    fig.arrow((140, 252), soft.bottom)
    fig.line((x0, 130), (x0 + S * cell, 130), color=MUTED, lw=0.8)
    for s, w in enumerate([0.2, 0.7, 0.1, 0.0]):
        fig.rect(x0 + s * cell + 12, 130, 16, -46 * w, fc=KINDS["attention"][1])
    fig.arrow(soft.top, (140, 133))
    fig.note(x0 + 3.5 * cell, 146, "padding: 0", size=8, color=ACCENT)
    fig.text(x0 + S * cell + 12, 100, "$a_t$", size=10, ha="left")
    fig.note(x0 + S * cell + 12, 116, "(batch_size, 1, S)", ha="left", size=8)
    _location_context(fig, (x0 + S * cell + 10, 80))
    return fig


def _location_context(fig: Figure, weights_at):
    """The right half: the annotations, read only as values by the weighted sum c_t."""
    hs = [
        fig.box(x, 420, 50, 32, label, kind="state")
        for x, label in zip(
            [560, 635, 710, 785], [r"$\bar h_1$", r"$\bar h_2$", "$\\cdots$", r"$\bar h_S$"], strict=True
        )
    ]
    fig.note(672, 453, r"annotations $\bar h_s$: (batch_size, S, enc_size)")
    csum = fig.box(672, 80, 220, 38, r"$c_t = \sum_s a_t(s)\, \bar h_s$", kind="attention")
    fig.arrow(weights_at, csum.left)
    fig.arrow(hs[-1].right, (860, 420), (860, 80), csum.right, color=MUTED)
    fig.note(872, 250, "values", rotation=90)
    fig.arrow(csum.bottom, (672, 128))
    fig.note(672, 142, r"to $\tilde h_t = \tanh(W_c[c_t;\ h_t])$")
    fig.note(672, 158, "(batch_size, 1, enc_size)", size=8)
    for i, line in enumerate(
        [
            r"no score reads $\bar h_s$: only their",
            "number S and valid_lens count",
            "",
            "content scores (dot, general, concat)",
            r"compare $h_t$ with every $\bar h_s$",
        ]
    ):
        fig.note(672, 250 + 15 * i, line, size=8 if i > 2 else SMALL)


# ---------------------------------------------------------------- chapter 3


def _encoder_row(fig: Figure, xs, y, labels, kind="state"):
    return [fig.box(x, y, 54, 34, label, kind=kind) for x, label in zip(xs, labels, strict=True)]


def draw_seq2seq_bottleneck() -> Figure:
    fig = Figure(
        "seq2seq_bottleneck",
        900,
        480,
        "An encoder-decoder without attention: the bidirectional "
        "encoder's last states pass through a bridge into one context vector c, which starts the "
        "decoder and is fed to it at every step; the annotations h_1 to h_S are not read.",
    )
    fig.text(190, 20, "encoder", size=12)
    fig.text(680, 20, "decoder", size=12)
    xs = [70, 150, 230, 310]
    enc = _encoder_row(fig, xs, 250, ["$h_1$", "$h_2$", "$\\cdots$", "$h_S$"], kind="grey")
    for x, label in zip(xs, ["$x_1$", "$x_2$", "$\\cdots$", "$x_S$"], strict=True):
        fig.box(x, 390, 46, 30, label, kind="input")
        fig.arrow((x, 375), (x, 267))
    for a, b in zip(enc, enc[1:], strict=False):
        fig.arrow((a.right[0], 244), (b.left[0], 244), color="#9a9a9a")
        fig.arrow((b.left[0], 256), (a.right[0], 256), color="#9a9a9a")
    fig.note(190, 44, r"annotations $h_1, \dots, h_S$ (batch_size, S, 2H),")
    fig.note(190, 60, "grey: not read by the decoder")
    bridge = fig.box(240, 140, 210, 36, r"$\tanh(W_s[\overrightarrow{h}_S;\ \overleftarrow{h}_1])$", size=10)
    fig.arrow(enc[3].top, (bridge.x + 50, bridge.bottom[1]))
    fig.arrow(enc[0].top, (bridge.x - 90, bridge.bottom[1]))
    fig.note(325, 203, r"$\overrightarrow{h}_S$", size=10)
    fig.note(60, 203, r"$\overleftarrow{h}_1$", size=10)
    c = fig.box(400, 140, 44, 36, "$c$", kind="attention")
    fig.arrow(bridge.right, c.left)
    fig.note(400, 110, "(batch_size, H)")
    xs = [540, 640, 740, 840]
    fig.text(452, 236, "$s_0 = c$", size=10)
    dec = _encoder_row(fig, xs, 250, ["$s_1$", "$s_2$", "$\\cdots$", "$s_T$"])
    fig.arrow((c.x, c.bottom[1]), (c.x, 250), (dec[0].left[0], 250))
    for a, b in zip(dec, dec[1:], strict=False):
        fig.arrow(a.right, b.left)
    fig.line(c.right, (xs[-1] - 12, 140), color=KINDS["attention"][1], lw=1.6)
    fig.note(474, 128, "$c$ at every step", size=8)
    ins = ["$e(\\langle bos \\rangle)$", "$e(y_1)$", "$\\cdots$", "$e(y_{T-1})$"]
    for x, b, label, out in zip(xs, dec, ins, ["$y_1$", "$y_2$", "$\\cdots$", "$y_T$"], strict=True):
        fig.arrow((x - 12, 140), (x - 12, b.top[1]), color=KINDS["attention"][1])
        fig.box(x, 390, 84, 30, label, kind="input", size=10)
        fig.arrow((x, 375), b.bottom)
        fig.arrow((x + 12, b.top[1]), (x + 12, 70))
        fig.text(x + 12, 56, out)
    fig.note(690, 430, r"$s_t = \mathrm{GRU}([e(y_{t-1});\ c],\ s_{t-1})$", size=10)
    fig.note(690, 455, r"$p(y_t \mid y_{<t}, x) = \mathrm{softmax}(W_o[s_t;\ c;\ e(y_{t-1})])$", size=10)
    return fig


def _annotation(fig: Figure, x, y, real=True):
    """An annotation h_j = [forward; backward] as two halves side by side (grey zeros at padding)."""
    kind = "module" if real else "grey"
    for dx, arrow in ((-20, r"$\rightarrow$"), (20, r"$\leftarrow$")):
        cell = fig.rect(x + dx - 20, y - 14, 40, 28, fc=KINDS[kind][0], ec=KINDS[kind][1])
        fig.text(x + dx, y, arrow if real else "0", size=SMALL, color=INK if real else MUTED, on=cell)


def draw_bidirectional_bridge() -> Figure:
    fig = Figure(
        "bidirectional_bridge",
        900,
        480,
        "The bidirectional GRU encoder: both directions read the embeddings e(x_j); the forward GRU "
        "runs from x_1 to x_S, the backward GRU from x_S to x_1; each annotation h_j stacks the two "
        "states, padding after the sentence's end is not read, and the bridge "
        "s_0 = tanh(W_s [forward h_S; backward h_1]) starts the decoder.",
    )
    xs, pads = [95, 200, 305, 410], [540, 640]
    ids = ["1", "2", "\\cdots", "S"]
    fwd_y, bwd_y, emb_y, ann_y = 300, 215, 385, 120
    for x, i in zip(xs, ids, strict=True):
        word = fig.box(x, 445, 46, 30, "$\\cdots$" if i == "\\cdots" else f"$x_{{{i}}}$", kind="input")
        label = "$\\cdots$" if i == "\\cdots" else f"$e(x_{{{i}}})$"
        emb = fig.box(x, emb_y, 66, 34, label, kind="state", size=10)
        fig.arrow(word.top, emb.bottom)
        # each direction reads e(x_j): the backward feed passes between two forward states
        fig.arrow((x - 24, emb.top[1]), (x - 24, fwd_y + 17))
        fig.arrow((x + 24, emb.top[1]), (x + 24, bwd_y + 17))
        # the annotation collects both states: the forward one passes between two backward states
        fig.arrow((x - 24, fwd_y - 17), (x - 24, ann_y + 14), color="#9a9a9a")
        fig.arrow((x + 24, bwd_y - 17), (x + 24, ann_y + 14), color="#9a9a9a")
        _annotation(fig, x, ann_y)
        if i != "\\cdots":
            fig.text(x, 152, f"$h_{{{i}}}$", size=10)
    fwd = [
        fig.box(x - 24, fwd_y, 46, 34, "$\\cdots$" if i == "\\cdots" else rf"$\overrightarrow{{h}}_{{{i}}}$")
        for x, i in zip(xs, ids, strict=True)
    ]
    bwd = [
        fig.box(x + 24, bwd_y, 46, 34, "$\\cdots$" if i == "\\cdots" else rf"$\overleftarrow{{h}}_{{{i}}}$")
        for x, i in zip(xs, ids, strict=True)
    ]
    for a, b in zip(fwd, fwd[1:], strict=False):
        fig.arrow(a.right, b.left)
    for a, b in zip(bwd, bwd[1:], strict=False):
        fig.arrow(b.left, a.right)
    fig.note(14, fwd_y, "forward", rotation=90)
    fig.note(14, bwd_y, "backward", rotation=90)
    for x in pads:
        fig.box(x, 445, 64, 30, "<pad>", kind="grey", size=SMALL)
        fig.box(x - 24, fwd_y, 46, 34, "", kind="grey", dashed=True)
        fig.box(x + 24, bwd_y, 46, 34, "", kind="grey", dashed=True)
        _annotation(fig, x, ann_y, real=False)
    fig.note(590, 252, "padding: not read", size=8)
    fig.note(590, 265, "(packed sequences)", size=8)
    fig.note(590, 392, "$e(x_j)$: (batch_size, S, E)", size=8)
    fig.text(250, 28, r"annotations $h_j = [\overrightarrow{h}_j;\ \overleftarrow{h}_j]$", size=11)
    fig.note(250, 50, "(batch_size, S, 2H); zero at padding")
    _bridge(fig, fwd[-1], bwd[0])
    return fig


def _bridge(fig: Figure, last_forward: Box, first_backward: Box):
    """The bridge s_0 = tanh(W_s [forward h_S; backward h_1]), right of the encoder, and s_0 under it."""
    bridge = fig.box(800, 250, 180, 40, r"$\tanh(W_s[\overrightarrow{h}_S;\ \overleftarrow{h}_1])$", size=10)
    right = last_forward.right
    fig.arrow(right, (470, right[1]), (470, 345), (680, 345), (680, 250), bridge.left)
    fig.note(575, 360, r"$\overrightarrow{h}_S$: forward, at the last real word", size=SMALL)
    left = first_backward.left
    fig.arrow(left, (40, left[1]), (40, 80), (800, 80), bridge.top)
    fig.note(600, 68, r"$\overleftarrow{h}_1$: backward, having read all", size=SMALL)
    s0 = fig.box(800, 380, 50, 34, "$s_0$", kind="state")
    fig.arrow(bridge.bottom, s0.top)
    fig.note(800, 414, "(batch_size, H)", size=SMALL)
    fig.note(800, 430, "starts the decoder", size=SMALL)


# ---------------------------------------------------------------- chapter 4


def draw_bahdanau_step() -> Figure:
    fig = Figure(
        "bahdanau_step",
        940,
        545,
        "Left: the decoder without attention reads one fixed vector c = tanh(W_s [forward h_S; "
        "backward h_1]), the bridge of the encoder's last states, at every step. Right: one step of "
        "Bahdanau's decoder: the previous state s_(t-1) scores every annotation h_j, a masked softmax "
        "turns the scores e_tj into weights alpha_tj, the context c_t is their weighted sum, and the GRU "
        "updates the state to s_t, from which y_t is predicted.",
    )
    fig.text(150, 20, "without attention (chapter 3)", size=12)
    fig.text(640, 20, "Bahdanau's decoder, one step", size=12)
    fig.line((305, 10), (305, 530), color="#d0d0d0")
    _plain_decoder_step(fig)
    _bahdanau_decoder_step(fig)
    return fig


def _plain_decoder_step(fig: Figure):
    """Chapter 3's decoder step, left of x = 305: c from the bridge, read at every step."""
    hs = [
        fig.box(x, 505, 46, 30, label, kind="grey")
        for x, label in zip([60, 120, 180, 240], ["$h_1$", "$h_2$", "$\\cdots$", "$h_S$"], strict=True)
    ]
    bridge = fig.box(150, 435, 210, 32, r"$\tanh(W_s[\overrightarrow{h}_S;\ \overleftarrow{h}_1])$", size=9)
    fig.arrow(hs[0].top, (60, bridge.bottom[1]))
    fig.arrow(hs[-1].top, (240, bridge.bottom[1]))
    fig.note(68, 472, r"$\overleftarrow{h}_1$", ha="left", size=SMALL)
    fig.note(232, 472, r"$\overrightarrow{h}_S$", ha="right", size=SMALL)
    c = fig.box(250, 350, 44, 32, "$c$", kind="attention")
    fig.arrow((250, bridge.top[1]), c.bottom)
    fig.note(242, 392, "bridge: $c = s_0$", ha="right", size=SMALL)
    gru = fig.box(150, 260, 90, 40, "GRU")
    fig.arrow(c.top, (250, 260), gru.right)
    fig.note(250, 240, "$c$, every step", size=SMALL)
    s_prev = fig.box(150, 350, 58, 32, "$s_{t-1}$", kind="state")
    fig.arrow(s_prev.top, gru.bottom)
    fig.box(55, 260, 74, 32, "$e(y_{t-1})$", kind="input", size=10)
    fig.arrow((92, 260), gru.left)
    s_t = fig.box(150, 170, 46, 32, "$s_t$", kind="state")
    fig.arrow(gru.top, s_t.bottom)
    out = fig.box(150, 90, 190, 34, r"softmax$(W_o[s_t;\ c;\ e(y_{t-1})])$", kind="attention", size=9)
    fig.arrow(s_t.top, out.bottom)
    fig.arrow(out.top, (150, 45))
    fig.text(150, 36, "$y_t$")


def _bahdanau_decoder_step(fig: Figure):
    """One step of Bahdanau's decoder, right of x = 305, read bottom-up."""
    hx = [560, 635, 710, 785]
    hs = [
        fig.box(x, 485, 50, 32, label, kind="state")
        for x, label in zip(hx, ["$h_1$", "$h_2$", "$\\cdots$", "$h_S$"], strict=True)
    ]
    fig.note(672, 516, "annotations $h_j$ (keys = values): (batch_size, S, 2H)")
    fig.note(672, 531, "$U_a h_j$ is computed once per sentence", size=8)
    score = fig.box(672, 400, 300, 36, r"$e_{tj} = v_a^\top \tanh(W_a s_{t-1} + U_a h_j)$", kind="attention")
    for h in hs:
        fig.arrow(h.top, (h.x, score.bottom[1]))
    s_prev = fig.box(420, 485, 58, 32, "$s_{t-1}$", kind="state")
    fig.note(420, 512, "(batch_size, 1, H)")
    fig.arrow(s_prev.right, (480, 485), (480, 400), score.left)
    fig.note(486, 445, "query", ha="left", size=SMALL)
    soft = fig.box(672, 305, 270, 34, "masked softmax over $j$ (valid_lens)", kind="attention", size=10)
    fig.arrow(score.top, soft.bottom)
    fig.text(682, 345, "$e_t$", size=10, ha="left")
    fig.note(682, 360, "(batch_size, 1, S)", ha="left")
    fig.line((540, 262), (805, 262), color=MUTED, lw=0.8)
    for x, w in zip(hx, [0.15, 0.55, 0.1, 0.2], strict=True):
        fig.rect(x - 8, 262, 16, -44 * w, fc=KINDS["attention"][1])
    fig.text(532, 236, r"$\alpha_{tj}$", size=10, ha="right")
    fig.note(532, 256, "(batch_size, 1, S)", ha="right", size=8)
    csum = fig.box(680, 180, 190, 42, r"$c_t = \sum_j \alpha_{tj} h_j$", kind="attention")
    fig.arrow((672, soft.top[1]), (672, csum.bottom[1]))
    fig.arrow(hs[-1].right, (905, 485), (905, 180), csum.right, color=MUTED)
    fig.note(915, 330, "values", rotation=90)
    gru = fig.box(420, 180, 70, 40, "GRU")
    fig.arrow(csum.left, gru.right)
    fig.text(520, 168, "$c_t$", size=10)
    fig.note(520, 195, "(batch_size, 1, 2H)", size=8)
    fig.arrow(s_prev.top, gru.bottom)
    e_in = fig.box(345, 110, 74, 32, "$e(y_{t-1})$", kind="input", size=10)
    fig.arrow(e_in.bottom, (345, 180), gru.left)
    s_t = fig.box(460, 100, 46, 32, "$s_t$", kind="state")
    fig.arrow((445, gru.top[1]), (445, s_t.bottom[1]))
    fig.note(460, 72, "(batch_size, 1, H)")
    out = fig.box(672, 100, 250, 34, r"softmax$(W_o[s_t;\ c_t;\ e(y_{t-1})])$", kind="attention", size=10)
    fig.arrow(s_t.right, out.left)
    fig.arrow(out.top, (672, 50))
    fig.text(690, 46, "$y_t$")
    fig.note(830, 70, "logits (batch_size, vocab_size)", size=8)


# ---------------------------------------------------------------- chapter 5


def draw_luong_step() -> Figure:
    fig = Figure(
        "luong_step",
        920,
        500,
        "One step of Luong's decoder with input feeding: the GRU reads "
        "e(y_(t-1)) and the previous attentional state, giving h_t; score(h_t, h-bar_s) over every "
        "annotation gives the weights a_t and the context c_t; the attentional state "
        "h-tilde_t = tanh(W_c [c_t; h_t]) predicts y_t and is fed to the next step (dashed).",
    )
    hx = [600, 675, 750, 825]
    hs = [
        fig.box(x, 455, 50, 32, label, kind="state")
        for x, label in zip(hx, [r"$\bar h_1$", r"$\bar h_2$", "$\\cdots$", r"$\bar h_S$"], strict=True)
    ]
    fig.note(712, 488, r"annotations $\bar h_s$: (batch_size, S, enc_size)")
    score = fig.box(
        712, 370, 240, 36, r"score$(h_t, \bar h_s)$, e.g. $h_t^\top W_a \bar h_s$", kind="attention", size=10
    )
    for h in hs:
        fig.arrow(h.top, (h.x, score.bottom[1]))
    soft = fig.box(712, 275, 200, 34, r"$a_t(s) = \mathrm{softmax}_s$ (masked)", kind="attention", size=10)
    fig.arrow(score.top, soft.bottom)
    csum = fig.box(712, 150, 200, 36, r"$c_t = \sum_s a_t(s)\, \bar h_s$", kind="attention")
    fig.arrow(soft.top, csum.bottom)
    labelled(fig, 722, 203, "$a_t$", "(batch_size, 1, S)", dy=16)
    fig.arrow(hs[-1].right, (880, 455), (880, 150), csum.right, color=MUTED)
    fig.note(890, 320, "values", rotation=90)
    # the recurrent part
    gru = fig.box(230, 370, 90, 40, "GRU")
    e_in = fig.box(180, 460, 74, 32, "$e(y_{t-1})$", kind="input", size=10)
    fig.arrow(e_in.top, (180, gru.bottom[1]))
    fig.arrow((300, 470), (270, 470), (270, gru.bottom[1]), dashed=True, color=ACCENT)
    fig.text(305, 470, r"$\tilde h_{t-1}$ from step $t-1$", size=10, color=ACCENT, ha="left")
    h_prev = fig.box(80, 370, 58, 32, "$h_{t-1}$", kind="state")
    fig.arrow(h_prev.right, gru.left)
    h_t = fig.box(230, 270, 46, 32, "$h_t$", kind="state")
    fig.arrow(gru.top, h_t.bottom)
    fig.note(290, 270, "(batch_size, 1, H)", ha="left")
    fig.arrow(h_t.right, (262, 270), (262, 325), (530, 325), (530, 370), score.left)
    fig.note(400, 313, "query $h_t$", size=SMALL)
    attn = fig.box(400, 150, 220, 40, r"$\tilde h_t = \tanh(W_c[c_t;\ h_t])$")
    fig.arrow(csum.left, attn.right)
    fig.text(560, 140, "$c_t$", size=10)
    fig.arrow(h_t.top, (230, 150), attn.left)
    out = fig.box(400, 60, 170, 34, r"softmax$(W_s \tilde h_t)$", kind="attention", size=10)
    fig.arrow(attn.top, out.bottom)
    fig.arrow(out.right, (540, 60))
    fig.text(556, 60, "$y_t$")
    fig.arrow((attn.x - 60, attn.top[1]), (340, 100), (190, 100), dashed=True, color=ACCENT)
    fig.text(184, 100, r"$\tilde h_t$ to step $t+1$", size=10, color=ACCENT, ha="right")
    fig.note(184, 117, "(input feeding)", ha="right", size=SMALL)
    fig.note(20, 30, r"$h_t = \mathrm{GRU}([e(y_{t-1});\ \tilde h_{t-1}],\ h_{t-1})$", ha="left", size=10)
    return fig


def _window_row(fig: Figure, y, p_t, weights, D, label, gaussian):
    """Source positions 0..S-1 as cells, the window [p_t - D, p_t + D] shaded, the weights as bars."""
    S, x0, cell = 12, 60, 60
    xpos = [x0 + (s + 0.5) * cell for s in range(S)]
    lo, hi = p_t - D, p_t + D
    fig.rect(
        x0 + (lo + 0.5) * cell,
        y - 120,
        (hi - lo) * cell,
        150,
        fc="#fff4e8",
        ec=KINDS["attention"][1],
        lw=1.0,
        ls="--",
    )
    for s, x in enumerate(xpos):
        inside = abs(s - p_t) <= D
        fig.rect(x - cell / 2, y, cell, 30, fc=KINDS["state"][0] if inside else "#ffffff", ec="#9a9a9a")
        fig.text(x, y + 15, str(s), size=SMALL, color=INK if inside else MUTED)
    for s, (align, final) in weights.items():
        x = xpos[s]
        if gaussian:
            fig.rect(x - 12, y - 2, 24, -200 * align, fc="none", ec=KINDS["attention"][1], lw=1.0)
        fig.rect(x - 12, y - 2, 24, -200 * final, fc=KINDS["attention"][1])
    px = x0 + (p_t + 0.5) * cell
    fig.line((px, y - 125), (px, y), color=ACCENT, lw=1.2)
    fig.text(px, y - 135, f"$p_t = {p_t:g}$", size=10, color=ACCENT)
    fig.text(x0 + (lo + 0.5) * cell, y + 44, "$p_t - D$", size=SMALL, color=MUTED)
    fig.text(x0 + (hi + 0.5) * cell, y + 44, "$p_t + D$", size=SMALL, color=MUTED)
    fig.text(20, y - 70, label, size=11, ha="left")
    if gaussian:
        sigma = D / 2
        points = [
            (x0 + (s / 10 + 0.5) * cell, y - 2 - 100 * math.exp(-((s / 10 - p_t) ** 2) / (2 * sigma**2)))
            for s in range(int((lo - 0.6) * 10), int((hi + 0.6) * 10) + 1)
        ]
        fig.line(*points, color=ACCENT, lw=1.3)


def draw_local_window() -> Figure:
    fig = Figure(
        "local_window",
        880,
        480,
        "Local attention over source positions 0 to 11 with D = 2: local-m "
        "centres the window on p_t = t, local-p predicts p_t = S sigmoid(v_p^T tanh(W_p h_t)) and "
        "multiplies the softmax inside the window by a Gaussian of width sigma = D/2; positions "
        "outside the window get weight 0.",
    )
    fig.text(
        30,
        20,
        "source positions $s = 0, \\dots, S-1$ ($S = 12$, $D = 2$); weight 0 outside the window "
        "$[p_t - D,\\ p_t + D]$",
        size=10,
        ha="left",
    )
    _window_row(
        fig,
        190,
        4,
        {2: (0.10, 0.10), 3: (0.22, 0.22), 4: (0.38, 0.38), 5: (0.20, 0.20), 6: (0.10, 0.10)},
        2,
        "local-m\n$p_t = t$\n$(t = 4)$",
        gaussian=False,
    )
    gauss = {
        s: (a, a * math.exp(-((s - 6.6) ** 2) / 2))
        for s, a in zip(range(5, 9), [0.15, 0.35, 0.35, 0.15], strict=True)
    }
    _window_row(fig, 420, 6.6, gauss, 2, "local-p", gaussian=True)
    fig.text(20, 386, r"$p_t = S \cdot \mathrm{sigmoid}(v_p^\top \tanh(W_p h_t))$", size=10, ha="left")
    fig.note(
        880 - 18,
        300,
        "outline: softmax inside the window\nfilled: times "
        r"$\exp(-(s - p_t)^2 / 2\sigma^2)$, $\sigma = D/2$"
        "\n(not renormalised)",
        ha="right",
        size=SMALL,
    )
    return fig


# ---------------------------------------------------------------- chapter 6


# long: one figure's coordinates, read top to bottom
def draw_beam_search() -> Figure:
    fig = Figure(
        "beam_search",
        920,
        470,
        "Beam search with beam size 2 over four steps: each hypothesis "
        "carries its log-probability; the two best that do not end in <eos> stay in the beam, the "
        "rest are pruned; hypotheses ending in <eos> among the two best are finished, and the final "
        "choice ranks the finished ones by log P divided by L to the power 0.75.",
    )
    cols = [60, 210, 370, 530, 690]
    nodes = {  # name: (column, y, token, log P, kind)
        "r": (0, 200, "<bos>", 0.0, "state"),
        "le": (1, 120, "le", -0.4, "state"),
        "un": (1, 230, "un", -1.3, "state"),
        "la": (1, 330, "la", -2.1, "grey"),
        "le chat": (2, 70, "chat", -0.9, "state"),
        "le chien": (2, 150, "chien", -2.0, "grey"),
        "un chien": (2, 230, "chien", -1.6, "state"),
        "un chat": (2, 310, "chat", -1.8, "grey"),
        "le chat noir": (3, 40, "noir", -1.5, "state"),
        "le chat eos": (3, 110, "<eos>", -1.7, "finished"),
        "un chien noir": (3, 200, "noir", -2.4, "state"),
        "un chien eos": (3, 280, "<eos>", -3.0, "grey"),
        "le chat noir eos": (4, 40, "<eos>", -2.0, "finished"),
        "le chat noir dort": (4, 110, "dort", -1.9, "grey"),
        "un chien noir eos": (4, 200, "<eos>", -2.7, "grey"),
        "un chien noir dort": (4, 270, "dort", -3.1, "grey"),
    }
    parents = {
        "le": "r",
        "un": "r",
        "la": "r",
        "le chat": "le",
        "le chien": "le",
        "un chien": "un",
        "un chat": "un",
        "le chat noir": "le chat",
        "le chat eos": "le chat",
        "un chien noir": "un chien",
        "un chien eos": "un chien",
        "le chat noir eos": "le chat noir",
        "le chat noir dort": "le chat noir",
        "un chien noir eos": "un chien noir",
        "un chien noir dort": "un chien noir",
    }
    boxes = {}
    for name, (col, y, token, logp, kind) in nodes.items():
        y = y + 40
        pruned = kind == "grey" and name != "le chat noir dort"
        boxes[name] = b = fig.box(cols[col], y, 70, 30, token, kind=kind, size=10, dashed=pruned)
        if name != "r":
            fig.text(
                b.x + 38, y, f"{logp:.1f}", size=SMALL, ha="left", color=MUTED if kind == "grey" else INK
            )
    for child, parent in parents.items():
        kind = nodes[child][4]
        fig.arrow(
            (boxes[parent].right[0] + (30 if parent != "r" else 0), boxes[parent].y),
            boxes[child].left,
            color="#b0b0b0" if kind == "grey" else INK,
        )
    for col, x in enumerate(cols):
        fig.note(x, 20, f"$t = {col}$")
    fig.note(690, 180, "still live when", size=8)
    fig.note(690, 192, "2 have finished:", size=8)
    fig.note(690, 204, "dropped", size=8)
    for x, kind, text in [
        (26, "state", "kept in the beam"),
        (170, "finished", "finished: <eos> among the 2 best"),
        (420, "grey", "pruned"),
    ]:
        fig.box(x, 420, 14, 14, "", kind=kind, dashed=text.startswith("pruned"))
        fig.text(x + 12, 420, text, size=SMALL, ha="left")
    fig.text(
        20,
        450,
        "numbers: $\\log P(y_{1..t} \\mid x)$, the sum of the tokens' log-probabilities",
        size=SMALL,
        ha="left",
    )
    # the final choice
    fig.box(835, 200, 150, 190, "", kind="input")
    fig.text(835, 120, "final choice", size=11)
    fig.note(835, 140, r"$\log P / L^{0.75}$", size=10)
    fig.text(835, 175, "le chat <eos>", size=SMALL)
    fig.text(835, 193, r"$-1.7 / 3^{0.75} = -0.75$", size=SMALL)
    fig.text(835, 235, "le chat noir <eos>", size=SMALL, color=ACCENT)
    fig.text(835, 253, r"$-2.0 / 4^{0.75} = -0.71$", size=SMALL, color=ACCENT)
    fig.text(835, 280, "wins: longer, though\nits raw $\\log P$ is lower", size=8, color=ACCENT)
    return fig


# ---------------------------------------------------------------- chapter 9


def draw_scheduled_sampling() -> Figure:
    fig = Figure(
        "scheduled_sampling",
        900,
        435,
        "Scheduled sampling at one decoder step in training: a coin "
        "that comes up heads with probability epsilon_i feeds the reference word y_(t-1) (teacher "
        "forcing), otherwise the model's own word, the argmax of the previous step's logits; "
        "an inset "
        "shows epsilon_i = k / (k + exp(i / k)) decaying over the updates i.",
    )
    prev = fig.box(100, 300, 120, 40, "step $t-1$")
    arg = fig.box(100, 150, 120, 34, "argmax", kind="attention", size=10)
    fig.arrow(prev.top, arg.bottom)
    fig.text(110, 225, "logits$_{t-1}$", size=10, ha="left")
    own = fig.box(300, 150, 120, 36, r"$\hat y_{t-1}$", kind="state")
    fig.arrow(arg.right, own.left)
    fig.note(300, 178, "the model's own word", size=SMALL)
    fig.note(200, 138, "no gradient", size=8)
    ref = fig.box(300, 60, 120, 36, "$y_{t-1}$", kind="input")
    fig.note(300, 88, "the reference word (teacher forcing)", size=SMALL)
    coin = fig.circle(470, 105, "", r=26, kind="attention")
    fig.text(470, 105, "coin", size=10)
    fig.arrow(ref.right, (430, 60), (453, 86))
    fig.arrow(own.right, (430, 150), (453, 124))
    fig.text(398, 50, r"prob. $\epsilon_i$", size=SMALL, ha="left")
    fig.text(398, 166, r"prob. $1 - \epsilon_i$", size=SMALL, ha="left")
    emb = fig.box(600, 105, 80, 34, r"$e(\cdot)$", kind="module")
    fig.arrow(coin.right, emb.left)
    step = fig.box(600, 210, 120, 40, "step $t$")
    fig.arrow(emb.bottom, step.top)
    fig.arrow(prev.right, step.left)
    fig.note(350, 245, "state", size=SMALL)
    loss = fig.box(800, 210, 140, 36, r"$-\log p(y_t \mid \dots)$", kind="attention", size=10)
    fig.arrow(step.right, loss.left)
    fig.note(695, 196, "logits$_t$", size=SMALL)
    fig.note(800, 238, "trains the prediction", size=8)
    # inset: the inverse sigmoid decay
    k, steps = 50, 190
    x0, y0, w, h = 560, 405, 280, 100
    fig.line((x0, y0 - h - 5), (x0, y0), (x0 + w + 5, y0), color=MUTED, lw=1.0)
    points = [(x0 + w * i / steps, y0 - h * k / (k + math.exp(i / k))) for i in range(steps + 1)]
    fig.line(*points, color=KINDS["attention"][1], lw=1.8)
    fig.note(x0 - 6, y0 - h, "1", ha="right")
    fig.note(x0 - 6, y0, "0", ha="right")
    fig.note(x0 + w, y0 + 12, f"{steps}", size=8)
    fig.note(x0 + w / 2, y0 + 12, "update $i$", size=8)
    fig.text(x0 + w / 2 + 10, y0 - h - 14, r"$\epsilon_i = k\,/\,(k + \exp(i/k))$, $k = 50$", size=10)
    return fig


def _fed_grid(fig: Figure, x0, y0, heading, rows, note):
    """Which word each decoder step t = 0..5 of three sentences reads: <bos> at t = 0, then the reference
    word y_(t-1) ("y") or the model's own word ("m"), as `rows` spell it."""
    cell_w, cell_h = 56, 28
    fig.text(x0 + 3 * cell_w, y0 - 34, heading, size=10)
    for r, row in enumerate(rows):
        y = y0 + r * cell_h
        fig.note(x0 - 8, y + cell_h / 2, f"sentence {r + 1}", ha="right", size=8)
        for t, fed in enumerate("b" + row):
            kind = {"b": "grey", "y": "input", "m": "attention"}[fed]
            box = fig.rect(x0 + t * cell_w, y, cell_w, cell_h, fc=KINDS[kind][0], ec="#9a9a9a")
            label = {"b": "<bos>", "y": "$y_{t-1}$", "m": r"$\hat y_{t-1}$"}[fed]
            fig.text(
                x0 + (t + 0.5) * cell_w,
                y + cell_h / 2,
                label,
                size=8 if fed == "b" else SMALL,
                color=MUTED if fed == "b" else INK,
                on=box,
            )
    fig.note(x0 + 3 * cell_w, y0 + 3 * cell_h + 14, note, size=8)


def _model_word(fig: Figure, x0):
    """What the model's own word is: the argmax of the previous step's softmax, or a word drawn from it."""
    words, probs = ["chat", "chien", "noir", "le"], [0.50, 0.30, 0.15, 0.05]
    fig.text(x0 + 180, 22, "what the model's own word is", size=11)
    fig.note(x0 + 180, 44, r"softmax of step $t-1$'s logits, $P(\cdot \mid h_{t-1})$", size=10)
    base, bar_w, pitch = 190, 40, 62
    fig.line((x0 + 40, base), (x0 + 40 + 4 * pitch, base), color=MUTED, lw=0.8)
    for k, (word, p) in enumerate(zip(words, probs, strict=True)):
        x = x0 + 40 + (k + 0.5) * pitch
        fig.rect(x - bar_w / 2, base, bar_w, -150 * p, fc=KINDS["attention"][1])
        fig.note(x, base - 150 * p - 10, f"{p:.2f}", size=8)
        fig.text(x, base + 14, word, size=SMALL)
    first = x0 + 40 + 0.5 * pitch
    fig.arrow((first, base + 26), (first, 262))
    argmax = fig.box(first, 280, 110, 34, "chat", kind="attention", size=10)
    for i, line in enumerate(['feed="argmax"', "(the default):", "the likeliest word"]):
        fig.note(first, 312 + 13 * i, line, size=8)
    second = x0 + 40 + 3.3 * pitch
    fig.arrow((x0 + 40 + 1.5 * pitch, base + 26), (second, 262))
    sample = fig.box(second, 280, 110, 34, "chien", kind="attention", size=10)
    for i, line in enumerate(['feed="sample"', "(Bengio et al.): drawn,", "here chien (p = 0.30)"]):
        fig.note(second, 312 + 13 * i, line, size=8)
    fig.note(x0 + 180, 360, r"either way $\hat y_{t-1}$ carries no gradient", size=8)
    return argmax, sample


def draw_scheduled_sampling_variants() -> Figure:
    fig = Figure(
        "scheduled_sampling_variants",
        940,
        380,
        "Two choices in scheduled sampling. Left: a coin for every word (Bengio et al., the course's "
        'coin="word") mixes reference words y_(t-1) and the model\'s own words within a sentence; one '
        'coin per sentence (coin="sequence") feeds a whole sentence one way. Right: the model\'s own '
        'word is the argmax of the previous step\'s softmax (feed="argmax") or a word sampled from it '
        '(feed="sample", as in Bengio et al.).',
    )
    fig.text(240, 22, "when the coin is flipped", size=11)
    fig.note(
        240,
        44,
        r"reference $y_{t-1}$ with probability $\epsilon_i$, else the model's $\hat y_{t-1}$",
        size=10,
    )
    for t in range(6):
        fig.note(100 + (t + 0.5) * 56, 92, f"$t = {t}$", size=8)
    _fed_grid(
        fig,
        100,
        104,
        'coin="word" (Bengio et al., default)',
        ["ymyym", "myymy", "yymyy"],
        "a coin for every word: a sentence mixes both",
    )
    _fed_grid(
        fig,
        100,
        266,
        'coin="sequence"',
        ["yyyyy", "mmmmm", "yyyyy"],
        "one coin per sentence, kept for all its words",
    )
    fig.line((470, 10), (470, 360), color="#d0d0d0")
    _model_word(fig, 520)
    return fig


# ---------------------------------------------------------------- chapter 10


def _entropy_and_concentration(weights):
    """Mean normalised entropy of the rows and the largest column share (chapter 10's two numbers)."""
    n = len(weights[0])
    entropies = [-sum(w * math.log(w) for w in row if w > 0) / math.log(n) for row in weights]
    columns = [sum(row[j] for row in weights) for j in range(n)]
    return sum(entropies) / len(entropies), max(columns) / sum(columns)


def draw_attention_patterns() -> Figure:
    # chapter 10's three hand-made patterns: step t looks at word t, every step looks at <eos>, no step
    # has decided
    src = ["the", "dog", "is", "black", "<eos>"]
    tgt = ["le", "chien", "est", "noir", "<eos>"]
    healthy = [[1.0 if j == t else 0.0 for j in range(5)] for t in range(5)]
    frozen = [[0.2] * 5 for _ in range(5)]
    lazy = [[1.0 if j == 4 else 0.0 for j in range(5)] for _ in range(5)]
    fig = Figure(
        "attention_patterns",
        900,
        366,
        "Three attention patterns on one sentence: a healthy model whose step t looks at word t "
        "(entropy 0, concentration 1/S = 0.2), a frozen model with uniform weights (entropy 1), and a "
        "lazy model whose every step looks at <eos> (concentration 1).",
    )
    panels = [
        (95, "healthy: diagonal", healthy, "looking"),
        (395, "frozen: uniform", frozen, "near-uniform"),
        (695, "lazy: <eos>", lazy, "collapsed"),
    ]
    cell = 32
    for x0, name, weights, verdict in panels:
        entropy, concentration = _entropy_and_concentration(weights)
        fig.text(x0 + 2.5 * cell, 20, name, size=12)
        for t, row in enumerate(weights):
            fig.text(x0 - 6, 60 + (t + 0.5) * cell, tgt[t], size=8, ha="right")
            for j, w in enumerate(row):
                fig.rect(x0 + j * cell, 60 + t * cell, cell, cell, fc=_blue(w), ec="#ffffff", lw=1.0)
        for j, word in enumerate(src):
            fig.text(
                x0 + (j + 0.5) * cell, 60 + 5 * cell + 6, word, size=8, ha="right", va="top", rotation=45
            )
        fig.text(
            x0 + 2.5 * cell, 292, f"entropy {entropy:.2f}, concentration {concentration:.2f}", size=SMALL
        )
        fig.text(
            x0 + 2.5 * cell,
            314,
            verdict,
            size=11,
            color=KINDS["finished"][1] if verdict == "looking" else ACCENT,
        )
    fig.note(
        450,
        340,
        "rows: target steps; columns: source positions.  entropy: mean of $H_t / \\log S$ "
        "over steps (1 = uniform, 0 = one word)",
        size=8,
    )
    fig.note(
        450,
        354,
        "concentration: the largest share of all steps' weight on one source column "
        "($1/S$ = spread along the sentence, 1 = one column)",
        size=8,
    )
    return fig


def _weight_rows(fig: Figure, x0, y0, rows, sums, dropped=(), sum_colour=INK):
    """Two rows of attention weights over 5 keys (the last one padding), each with its sum beside it;
    `dropped`: the (row, key) cells dropout set to 0."""
    cell_w, cell_h = 52, 28
    for r, row in enumerate(rows):
        y = y0 + r * cell_h
        fig.note(x0 - 8, y + cell_h / 2, f"query {r + 1}", ha="right", size=8)
        for j, w in enumerate(row):
            is_dropped = (r, j) in dropped
            fill = "#ffffff" if j == 4 else KINDS["grey"][0] if is_dropped else KINDS["attention"][0]
            box = fig.rect(x0 + j * cell_w, y, cell_w, cell_h, fc=fill, ec="#9a9a9a")
            colour = ACCENT if is_dropped else MUTED if j == 4 else INK
            fig.text(
                x0 + (j + 0.5) * cell_w,
                y + cell_h / 2,
                f"{w:.2f}" if w else "0",
                size=SMALL,
                color=colour,
                on=box,
            )
        fig.text(
            x0 + 5 * cell_w + 10,
            y + cell_h / 2,
            f"sum {sums[r]:.2f}",
            size=SMALL,
            ha="left",
            color=sum_colour,
        )


def draw_attention_dropout() -> Figure:
    fig = Figure(
        "attention_dropout",
        940,
        420,
        "Attention dropout: in training, dropout acts on the attention weights after the masked softmax "
        "and before the weighted sum of the values; each weight is dropped with probability p = 0.3 "
        "and the others are divided by 1 - p, so a row no longer sums to 1; the padded key stays 0, the "
        "layer returns the weights before dropout, and in evaluation mode dropout does nothing.",
    )
    weights = [[0.40, 0.30, 0.20, 0.10, 0.0], [0.05, 0.15, 0.50, 0.30, 0.0]]
    used = [[0.0, 0.30 / 0.7, 0.20 / 0.7, 0.10 / 0.7, 0.0], [w / 0.7 for w in weights[1]]]
    x0, middle = 400, 400 + 2.5 * 52
    scores = fig.box(70, 92, 100, 32, "scores", kind="state", size=10)
    soft = fig.box(210, 92, 130, 34, "masked softmax", kind="attention", size=10)
    fig.arrow(scores.right, soft.left)
    fig.note(210, 124, "valid_lens: 4 of 5 keys", size=8)
    fig.arrow(soft.right, (x0 - 62, 92))
    fig.text(middle, 22, r"weights $\alpha$", size=11)
    fig.note(middle, 40, "(batch_size, num_queries, num_keys)", size=8)
    for j in range(5):
        fig.note(x0 + (j + 0.5) * 52, 56, f"key {j}" if j < 4 else "pad", size=8)
    _weight_rows(fig, x0, 64, weights, [1.0, 1.0])
    fig.note(middle, 136, "what the layer returns: heatmaps and diagnose read these", size=8)
    drop = fig.box(middle, 200, 420, 40, "", size=10)
    fig.text(middle, 192, r"dropout, $p = 0.3$ (training mode only)", size=10, on=drop)
    fig.note(
        middle, 209, r"each weight dropped with probability $p$, the rest divided by $1 - p$", size=8, on=drop
    )
    fig.arrow((middle, 148), drop.top)
    fig.arrow(drop.bottom, (middle, 262))
    _weight_rows(
        fig,
        x0,
        266,
        [[round(w, 2) for w in row] for row in used],
        [sum(row) for row in used],
        dropped={(0, 0)},
        sum_colour=ACCENT,
    )
    fig.note(middle, 338, "used for the context in training: rows no longer sum to 1", size=8, color=ACCENT)
    fig.note(middle, 352, "(they do on average); the padded key stays 0", size=8)
    bmm = fig.box(840, 294, 90, 34, r"$\cdot\ V$", kind="attention", size=10)
    fig.arrow((x0 + 5 * 52 + 82, 294), bmm.left)
    fig.arrow((x0 + 5 * 52 + 82, 92), (840, 92), bmm.top, dashed=True, color=MUTED)
    fig.note(850, 170, "eval mode:", size=8, ha="left")
    fig.note(850, 183, r"$\alpha$ as it is", size=8, ha="left")
    out = fig.box(840, 380, 110, 32, "context", kind="state", size=10)
    fig.arrow(bmm.bottom, out.top)
    fig.note(740, 406, "(batch_size, num_queries, value_size)", size=8)
    return fig


def _blue(w):
    """White (0) to the module blue (1), for attention weights."""
    low, high = (255, 255, 255), (0x2F, 0x5D, 0x8A)
    return "#" + "".join(f"{round(a + (b - a) * w):02x}" for a, b in zip(low, high, strict=True))


# ---------------------------------------------------------------- chapter 11


def _tensor(fig: Figure, x, y, w, h, heads, gap=0.0, vertical=False):
    """A tensor block, its feature axis split into one coloured band per head (optionally apart)."""
    n = len(heads)
    for k, colour in enumerate(heads):
        if vertical:
            fig.rect(x, y + k * (h / n + gap), w, h / n, fc=colour, ec="#ffffff", lw=1.0, alpha=0.75)
        else:
            fig.rect(x + k * (w / n + gap), y, w / n, h, fc=colour, ec="#ffffff", lw=1.0, alpha=0.75)


def draw_multihead_split_merge() -> Figure:
    fig = Figure(
        "multihead_split_merge",
        940,
        470,
        "Multi-head attention as reshapes: X of shape (batch_size, n, d) is projected by W_q, W_k "
        "and W_v into Q, K and V; each is reshaped to (batch_size, n, h, d_head) and transposed to "
        "(batch_size, h, n, d_head); the h heads run scaled dot-product attention in parallel; the "
        "result is transposed back, reshaped to (batch_size, n, d) and projected by W_o.",
    )
    fig.text(20, 20, "$d_{head} = d / h$; here $h = 4$ heads, one colour each", size=10, ha="left")
    x_box = fig.box(54, 120, 56, 120, "$X$", kind="state")
    fig.note(62, 196, "(batch_size, n, d)")
    for y, name, out in [(75, "$W_q$", "$Q$"), (120, "$W_k$", "$K$"), (165, "$W_v$", "$V$")]:
        w = fig.box(165, y, 56, 28, name, size=10)
        fig.arrow((x_box.right[0], y), w.left)
        fig.arrow(w.right, (226, y))
        _tensor(fig, 230, y - 14, 100, 28, HEADS)
        fig.text(340, y, out, size=10, ha="left")
    fig.line((352, 61), (360, 61), (360, 179), (352, 179), lw=1.0)
    fig.note(280, 196, "(batch_size, n, d) each")
    fig.arrow((360, 120), (415, 120))
    fig.note(388, 108, "reshape", size=8)
    _tensor(fig, 420, 80, 120, 80, HEADS, gap=10)
    fig.text(495, 64, "$Q$, $K$, $V$ each", size=10)
    fig.note(495, 196, "(batch_size, n, h, $d_{head}$)")
    fig.arrow((575, 120), (640, 120))
    fig.note(607, 95, "transpose", size=8)
    fig.note(607, 109, "(1, 2)", size=8)
    for k, colour in enumerate(HEADS):
        fig.rect(645 + 12 * k, 70 + 12 * k, 40, 60, fc=colour, ec="#ffffff", lw=1.0, alpha=0.75)
    fig.note(700, 196, "(batch_size, h, n, $d_{head}$)")
    fig.note(700, 212, "package: reshape to (batch_size$\\cdot$h, n, $d_{head}$)", size=8)
    # heads in parallel, then back (right to left)
    fig.line((720, 120), (895, 120))
    fig.arrow((895, 120), (895, 304), (876, 304))
    for k, colour in enumerate(HEADS):
        fig.frame(600 + 8 * k, 250 + 8 * k, 250, 60, fc=KINDS["attention"][0], ec=colour, lw=1.5)
    fig.text(749, 304, r"head $k$: $\mathrm{softmax}(Q_k K_k^\top / \sqrt{d_{head}})\, V_k$", size=10)
    fig.note(737, 355, "h heads in parallel; weights (batch_size, h, n, n)")
    fig.arrow((598, 304), (532, 304))
    for k, colour in enumerate(HEADS):
        fig.rect(450 + 12 * k, 262 + 12 * k, 40, 60, fc=colour, ec="#ffffff", lw=1.0, alpha=0.75)
    fig.note(488, 372, "(batch_size, h, n, $d_{head}$)")
    fig.arrow((446, 304), (366, 304))
    fig.note(406, 279, "transpose", size=8)
    fig.note(406, 293, "(1, 2)", size=8)
    _tensor(fig, 210, 264, 120, 80, HEADS, gap=10)
    fig.note(285, 372, "(batch_size, n, h, $d_{head}$)")
    fig.arrow((205, 304), (145, 304))
    fig.note(175, 292, "reshape", size=8)
    _tensor(fig, 40, 264, 100, 80, HEADS)
    fig.note(90, 358, "(batch_size, n, d)")
    fig.note(100, 374, r"$= \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)$", size=8)
    wo = fig.box(90, 430, 60, 30, "$W_o$", size=10)
    fig.arrow((36, 304), (12, 304), (12, 430), wo.left)
    fig.arrow(wo.right, (180, 430))
    fig.text(190, 430, "outputs (batch_size, n, d)", size=10, ha="left")
    return fig


def _mask_grid(fig: Figure, x0, heading, rule, lengths, note):
    """One 5 x 5 mask of a sentence of 3 tokens padded to 5: query i (rows) may see key j (columns) when
    j < lengths[i]; 1 on the keys it sees, a grey 0 on the masked ones; the lengths in a column beside."""
    cell, top = 38, 100
    fig.text(x0 + 2.5 * cell, 20, heading, size=11)
    fig.note(x0 + 2.5 * cell, 42, rule, size=10)
    fig.note(x0 + 2.5 * cell, 66, "key $j$")
    fig.note(x0 - 34, top + 2.5 * cell, "query $i$", rotation=90)
    fig.note(x0 + 5 * cell + 24, 84, "length", size=8)
    for i, length in enumerate(lengths):
        y = top + i * cell
        fig.note(x0 - 10, y + cell / 2, f"{i}", ha="right", color=MUTED if i >= 3 else INK)
        fig.note(x0 + 5 * cell + 24, y + cell / 2, f"{length}", color=INK)
        for j in range(5):
            seen = j < length
            fill = KINDS["module"][1] if seen else KINDS["grey"][0]
            box = fig.rect(x0 + j * cell, y, cell, cell, fc=fill, ec="#ffffff" if seen else "#c8c8c8")
            fig.text(
                x0 + (j + 0.5) * cell,
                y + cell / 2,
                "1" if seen else "0",
                size=SMALL,
                color="#ffffff" if seen else MUTED,
                on=box,
            )
    for j in range(5):
        fig.note(x0 + (j + 0.5) * cell, 86, f"{j}", color=MUTED if j >= 3 else INK)
    fig.note(x0 + 2.5 * cell, top + 5 * cell + 18, note, size=8)


def draw_causal_mask() -> Figure:
    fig = Figure(
        "causal_mask",
        940,
        360,
        "The padding mask and the causal mask of a sentence of 3 tokens padded to 5 positions: with "
        "padding alone every query sees keys 0 to 2; the causal mask lets query i see keys 0 to i, a "
        "lower triangle; together each query sees min(valid_len, i + 1) keys, and the padded queries 3 "
        "and 4 see the 3 real tokens. Masked cells are grey and get weight exactly 0.",
    )
    valid_len = 3
    _mask_grid(fig, 70, "padding mask", r"$j$ < valid_len (= 3)", [valid_len] * 5, "the same for every query")
    _mask_grid(
        fig,
        380,
        "causal mask",
        r"$j \leq i$, i.e. $j < i + 1$",
        [i + 1 for i in range(5)],
        "a lower triangle: no query sees a later key",
    )
    both = [min(valid_len, i + 1) for i in range(5)]
    rule = r"$j < \min(\mathrm{valid\_len},\ i + 1)$"
    _mask_grid(fig, 690, "causal + padding", rule, both, "what masked_softmax is given, one length per query")
    fig.note(
        470,
        342,
        "positions 3 and 4 are padding (grey numbers); 1: the query may attend to the key; "
        "0: masked, its weight exactly 0.  lengths: (batch_size, num_queries)",
        size=8,
    )
    return fig


def _sublayer(fig: Figure, stream_x, y, label, kind="attention", width=190):
    """A pre-norm residual sub-layer x + Sublayer(LN(x)) on the stream at x = stream_x, from height y up.
    Returns the height above its sum and the sub-layer's box."""
    bx = stream_x + 40 + width / 2
    ln = fig.box(bx, y - 24, 52, 24, "LN", size=9)
    fig.arrow((stream_x, y), (bx, y), ln.bottom)
    sub = fig.box(bx, y - 70, width, 36, label, kind=kind, size=9)
    fig.arrow(ln.top, sub.bottom)
    plus = fig.circle(stream_x, y - 110, "+", r=9, kind="state", size=9)
    fig.arrow(sub.top, (bx, y - 110), plus.right)
    fig.arrow((stream_x, y), plus.bottom)
    return y - 110 - 9, sub


def _stack(fig: Figure, sx, labels, tokens):
    """One side of the Transformer, bottom-up: embedding and positions, N pre-norm blocks, the final LN."""
    fig.note(sx, 700, tokens)
    emb = fig.box(sx, 662, 150, 30, r"embedding $\times \sqrt{d}$", kind="module", size=9)
    fig.arrow((sx, 690), emb.bottom)
    plus = fig.circle(sx, 612, "+", r=9, kind="state", size=9)
    fig.arrow(emb.top, plus.bottom)
    pe = fig.box(sx + 150, 612, 130, 28, "positional encoding", kind="input", size=8)
    fig.arrow(pe.left, plus.right)
    y = 612 - 9
    fig.line((sx, y), (sx, y - 20))
    frame_bottom, y = y - 10, y - 20
    subs = []
    for label in labels:
        y, sub = _sublayer(fig, sx, y, label, kind="module" if label.startswith("feed") else "attention")
        subs.append(sub)
        fig.line((sx, y), (sx, y - 14))
        y -= 14
    frame_top = y + 4
    fig.frame(sx - 25, frame_top, 300, frame_bottom - frame_top, dashed=True, rounding=10)
    fig.text(sx + 282, (frame_top + frame_bottom) / 2, r"$N \times$", size=11, ha="left")
    final = fig.box(sx, y - 22, 52, 24, "LN", size=9)
    fig.arrow((sx, y), final.bottom)
    return final, subs


def draw_prenorm_transformer() -> Figure:
    fig = Figure(
        "prenorm_transformer",
        790,
        712,
        "A pre-norm Transformer encoder-decoder: token embeddings "
        "times sqrt(d) plus positional encodings; N encoder blocks of x + SelfAttn(LN(x)) and "
        "x + FFN(LN(x)); N decoder blocks of causal self-attention, cross-attention to the "
        "encoder's "
        "output and FFN, each with LN before and a residual around; a final LN on each side and the "
        "output projection to the vocabulary.",
    )
    ffn = "feed-forward (FFN)\n" + r"$\max(0, xW_1 + b_1)W_2 + b_2$"
    enc_final, _ = _stack(fig, 90, ["multi-head self-attention\n(padding mask)", ffn], "src (batch_size, S)")
    dec_final, dec_subs = _stack(
        fig,
        450,
        [
            "masked self-attention\n(causal + padding mask)",
            "cross-attention\n(K, V: the encoder's memory)",
            ffn,
        ],
        "tgt_in (batch_size, T)",
    )
    fig.text(200, enc_final.y - 90, "encoder", size=12)
    fig.text(560, 20, "decoder", size=12)
    memory_y = enc_final.top[1] - 30
    fig.line(enc_final.top, (90, memory_y))
    fig.text(104, memory_y - 13, "memory", size=10, ha="left")
    fig.note(104, memory_y + 13, "(batch_size, S, d)", ha="left")
    cross = dec_subs[1]
    # the memory hops over the decoder's residual stream (x = 450) into the cross-attention's side
    hop = [(450 - 8 * math.cos(a * math.pi / 8), cross.y - 8 * math.sin(a * math.pi / 8)) for a in range(9)]
    fig.arrow((90, memory_y), (416, memory_y), (416, cross.y), *hop, cross.left, color=ACCENT)
    fig.note(408, cross.y - 14, "K, V", ha="right", size=SMALL, color=ACCENT)
    out = fig.box(450, dec_final.y - 44, 140, 26, "linear to vocab", kind="module", size=9)
    fig.arrow(dec_final.top, out.bottom)
    fig.arrow(out.top, (450, out.top[1] - 22))
    fig.note(450, out.top[1] - 32, "logits (batch_size, T, vocab_size)")
    return fig


# ---------------------------------------------------------------- chapter 12


def _token_row(fig: Figure, x0, y, tokens, width=66, pitch=74, kinds=None) -> list[Box]:
    """A row of token boxes from x0 (the first box's centre), one `pitch` apart."""
    kinds = kinds or ["input"] * len(tokens)
    return [
        fig.box(x0 + k * pitch, y, width, 28, token, kind=kind, size=SMALL)
        for k, (token, kind) in enumerate(zip(tokens, kinds, strict=True))
    ]


def _stage(fig: Figure, y, lines):
    """A stage's name and what it does, in the left margin."""
    for i, line in enumerate(lines):
        fig.text(15, y + 14 * i, line, size=SMALL if i == 0 else 8, color=INK if i == 0 else MUTED, ha="left")


def _group(fig: Figure, boxes: list[Box]) -> Box:
    """A dashed frame around a row of boxes: the sentence they make."""
    left, right = boxes[0].left[0] - 8, boxes[-1].right[0] + 8
    top = boxes[0].top[1] - 8
    return fig.frame(left, top, right - left, boxes[0].h + 16, dashed=True)


def draw_real_pair_pipeline() -> Figure:
    fig = Figure(
        "real_pair_pipeline",
        940,
        500,
        'One real test pair on its way through chapter 12: the line "You\'re creepy. / Tu es sinistre." '
        "of the pair file is tokenized; 'creepy', seen once in the training set, becomes <unk>; the file "
        "holds three French translations of the sentence, and BLEU counts an n-gram of the model's "
        "translation when it is in any of them.",
    )
    _stage(fig, 40, ["a line of the pair file", "English, a tab, French"])
    _stage(fig, 118, ["tatoeba.tokenize", "lower case; punctuation apart;", '"you\'re" stays one token'])
    vocabulary = ["the training vocabulary", "a word seen fewer than 2 times", "there: <unk> (creepy: once)"]
    _stage(fig, 210, vocabulary)
    _stage(fig, 312, ["a model translates it", "(a translation, for example)"])
    src = _group(fig, _token_row(fig, 300, 134, ["you're", "creepy", "."]))
    tgt = _group(fig, _token_row(fig, 600, 134, ["tu", "es", "sinistre", "."]))
    raw = fig.box(520, 46, 560, 32, "You're creepy.   \u21e5   Tu es sinistre.", kind="input", size=10)
    fig.arrow((src.x, raw.bottom[1]), src.top)
    fig.arrow((tgt.x, raw.bottom[1]), tgt.top)
    ids = _group(
        fig,
        _token_row(
            fig, 300, 226, ["you're", "<unk>", ".", "<eos>"], kinds=["state", "attention", "state", "state"]
        ),
    )
    for k in range(3):
        fig.arrow((300 + 74 * k, src.bottom[1]), (300 + 74 * k, ids.top[1]))
    model = fig.box(ids.x, 320, 150, 32, "model, greedy", kind="module", size=10)
    fig.arrow(ids.bottom, model.top)
    hyp = fig.box(ids.x, 400, 190, 30, "vous êtes <unk> .", kind="state", size=10)
    fig.arrow(model.bottom, hyp.top)
    _references(fig, tgt, hyp)
    return fig


def _references(fig: Figure, tgt: Box, hyp: Box):
    """The right lane: every translation of the sentence in the file, and BLEU against all of them."""
    x = tgt.x
    for i, line in enumerate(["tatoeba.reference_sets:", "every translation of the", "sentence in the file"]):
        fig.note(x - 10, 170 + 13 * i, line, ha="right", size=8)
    refs = ["tu es sinistre .", "vous êtes sinistre .", "vous êtes sinistres ."]
    boxes = [fig.box(x, 218 + 30 * i, 200, 26, ref, kind="input", size=SMALL) for i, ref in enumerate(refs)]
    fig.arrow(tgt.bottom, boxes[0].top)
    fig.note(x + 108, 218, "this pair's", ha="left", size=8)
    fig.note(x + 108, 248, "in the file, not", ha="left", size=8)
    fig.note(x + 108, 261, "in the test set", ha="left", size=8)
    bleu = fig.box(x, 400, 300, 50, "", kind="attention")
    fig.text(x, 390, "metrics.multi_reference_bleu", size=10, on=bleu)
    fig.note(x, 410, "an n-gram counts if it is in any reference", size=8, on=bleu, color=INK)
    fig.arrow(boxes[-1].bottom, bleu.top)
    fig.arrow(hyp.right, bleu.left)
    fig.note(x, 446, "against this pair's only: unigrams 1/4, bigrams 0/3", size=8)
    fig.note(x, 460, "against all three: unigrams 3/4, bigrams 1/3", size=8)
    fig.note(x, 476, "<unk> matches no reference", size=8, color=ACCENT)


FIGURES = [
    draw_soft_lookup,
    draw_padded_mask,
    draw_scoring_functions,
    draw_location_score,
    draw_seq2seq_bottleneck,
    draw_bidirectional_bridge,
    draw_bahdanau_step,
    draw_luong_step,
    draw_local_window,
    draw_beam_search,
    draw_scheduled_sampling,
    draw_scheduled_sampling_variants,
    draw_attention_patterns,
    draw_attention_dropout,
    draw_multihead_split_merge,
    draw_causal_mask,
    draw_prenorm_transformer,
    draw_real_pair_pipeline,
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the SVG files into")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(STYLE):
        for draw in FIGURES:
            fig = draw()
            (args.out / f"{fig.name}.svg").write_text(fig.svg(), encoding="utf-8")


if __name__ == "__main__":
    main()
