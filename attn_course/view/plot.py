"""Static figures of attention: a token-labelled heatmap, with gold links and a highlighted decoder step.

`heatmap` is the one figure the course draws everywhere: rows are decoder steps (target tokens), columns
are source positions, a cell's colour is the weight that step gives that source word. It draws on the Axes
you pass, or on a new Figure it returns (shown once when it is the last expression of a notebook cell; it
is never left open in pyplot, so drawing many figures in a loop leaks nothing). The widgets in
`attn_course.view.widgets` draw the same figure and send it to the browser as PNG bytes (`figure_to_png`).

For training, `loss_figure` draws the per-epoch loss curves and `LiveLoss` is a `train` callback that
redraws them in place after every epoch.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from attn_course.data.tasks import Link
from attn_course.validation import check_positive_int

#: Colours the course uses for overlays: gold links and the highlighted decoder step.
SURE_COLOR = "#1f77b4"
POSSIBLE_COLOR = "#17becf"
HIGHLIGHT_COLOR = "#2ca02c"


def as_matrix(
    weights: torch.Tensor | np.ndarray | Sequence[Sequence[float]], name: str = "weights"
) -> np.ndarray:
    """A finite 2-D float64 NumPy copy of an attention matrix (torch tensors are detached and moved to CPU).

    weights: (num_steps, num_keys). Raises ValueError for other ranks or for NaN/inf entries.
    """
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().to("cpu", torch.float64).numpy()
    matrix = np.array(weights, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"{name} has shape {matrix.shape}, expected (num_steps, num_keys)")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} contains NaN or inf, expected finite attention weights")
    return matrix


def _check_tokens(name: str, tokens: Sequence[str], expected: int, what: str) -> list[str]:
    if isinstance(tokens, str):
        raise ValueError(f"{name} is a string, expected a list of tokens (e.g. sentence.split())")
    tokens = [str(t) for t in tokens]
    if len(tokens) != expected:
        raise ValueError(f"{name} has {len(tokens)} tokens, expected one per {what} = {expected}")
    return tokens


def _check_links(name: str, links: Iterable[Link], num_steps: int, num_keys: int) -> set[Link]:
    result = set()
    for link in links:
        if not (isinstance(link, tuple) and len(link) == 2):
            raise ValueError(f"{name} contains {link!r}, expected (src_index, tgt_index) pairs")
        src_index, tgt_index = (int(i) for i in link)
        if not (0 <= src_index < num_keys and 0 <= tgt_index < num_steps):
            raise ValueError(
                f"{name} contains the link {link}, outside the heatmap's (num_keys, num_steps) = "
                f"({num_keys}, {num_steps}) grid"
            )
        result.add((src_index, tgt_index))
    return result


def new_figure(width: float, height: float, *, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    """A Figure with `ncols` side-by-side Axes, not registered with pyplot (nothing to close, nothing leaks).

    For widgets, which turn it into PNG bytes with `figure_to_png`. Margins are fixed (no layout engine,
    which would draw the figure twice): leave room for labels with `fig.subplots_adjust` if needed.
    """
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


# Inches per heatmap cell, per tick-label character (10 pt DejaVu Sans, with a margin), and the room a
# colour bar and its label take to the right of a heatmap.
CELL_WIDTH, CELL_HEIGHT, CHAR_WIDTH, COLORBAR_ROOM = 0.42, 0.36, 0.085, 1.05


def heatmap_figure(
    panels: Sequence[tuple[Sequence[str], Sequence[str]]],
    *,
    title_lines: int = 1,
    colorbar: bool = True,
    pyplot: bool = False,
) -> tuple[Figure, list[Axes]]:
    """A Figure with one Axes per heatmap, side by side, sized so that every token label fits.

    panels: one (src_tokens, tgt_tokens) pair per heatmap (its x and y tick labels).
    title_lines: the most lines a panel title has. colorbar: leave room for `heatmap`'s colour bar.
    pyplot: create the figure through pyplot (then closed at once), so that a notebook's inline backend
        shows it when it is returned; otherwise a bare Figure, for `figure_to_png`.
    The layout is computed here, in inches, from the number and length of the labels: no layout engine,
    so a figure is drawn once (a widget redraws on every slider move).
    """
    if not panels:
        raise ValueError("panels is empty, expected one (src_tokens, tgt_tokens) pair per heatmap")
    cell_w = min(CELL_WIDTH, 11.0 / max(len(src) for src, _ in panels) / len(panels))
    cell_h = min(CELL_HEIGHT, 11.0 / max(len(tgt) for _, tgt in panels))
    geometry = []  # per panel: (left margin, axes width) in inches
    for src, tgt in panels:
        left = 0.45 + CHAR_WIDTH * max((len(str(t)) for t in tgt), default=1)
        geometry.append((left, max(cell_w * len(src), 1.2)))
    right = COLORBAR_ROOM if colorbar else 0.25
    bottom = 0.55 + 0.75 * CHAR_WIDTH * max((len(str(t)) for src, _ in panels for t in src), default=1)
    top = 0.15 + 0.19 * max(title_lines, 1)
    height = max(cell_h * len(tgt) for _, tgt in panels)
    height = max(height, 1.0)
    fig_w = sum(left + w + right for left, w in geometry)
    fig_h = bottom + height + top
    if pyplot:
        fig = plt.figure(figsize=(fig_w, fig_h))
        # Created through pyplot so the inline backend knows how to show it, then closed at once: the
        # caller owns the only reference, and the figure shows exactly once when returned from a cell.
        plt.close(fig)
    else:
        fig = Figure(figsize=(fig_w, fig_h))
        FigureCanvasAgg(fig)
    axes, x = [], 0.0
    for (_, tgt), (left, w) in zip(panels, geometry, strict=True):
        h = max(cell_h * len(tgt), 1.0)
        rect = [(x + left) / fig_w, (bottom + height - h) / fig_h, w / fig_w, h / fig_h]
        axes.append(fig.add_axes(rect))
        x += left + w + right
    return fig, axes


def figure_to_png(fig: Figure, dpi: int = 90) -> bytes:
    """The figure as PNG bytes (for an ipywidgets.Image, or to save without pyplot)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


# long: only through its keyword arguments and their documentation; the drawing is four helpers below.
def heatmap(
    weights: torch.Tensor | np.ndarray,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    gold: Iterable[Link] | None = None,
    possible: Iterable[Link] | None = None,
    highlight_row: int | None = None,
    cmap: str = "Reds",
    vmin: float = 0.0,
    vmax: float | None = 1.0,
    colorbar: bool = True,
    annotate: bool = False,
    xlabel: str = "source (keys)",
    ylabel: str = "target (decoder steps)",
) -> Figure:
    """Draw an attention matrix as a heatmap with the source tokens on the x axis and the target tokens on y.

    weights: (num_steps, num_keys) tensor or array; row t is decoder step t's attention over the source.
    src_tokens: num_keys labels (include "<eos>" if the matrix has an <eos> column).
    tgt_tokens: num_steps labels, the token each step produced (or was fed, if you label rows that way).
    gold: sure gold links (src_index, tgt_index) into those token lists, drawn as solid boxes; possible:
        possible-only links, drawn as dashed boxes (links in both are drawn as sure). A link is drawn at
        row tgt_index, column src_index, so the rows must be labelled by the target words the links use.
    highlight_row: a decoder step to outline (and whose label is set in bold).
    vmin, vmax: the colour scale; the default [0, 1] makes matrices comparable (vmax=None: the matrix max).
    annotate: write each weight in its cell (readable up to ~15 x 15).
    ax: the Axes to draw on; if None a new Figure is made (not left open in pyplot).
    Returns: the Figure drawn on.
    """
    matrix = as_matrix(weights)
    num_steps, num_keys = matrix.shape
    src_labels = _check_tokens("src_tokens", src_tokens, num_keys, "column of weights")
    tgt_labels = _check_tokens("tgt_tokens", tgt_tokens, num_steps, "row of weights")
    sure = _check_links("gold", gold or (), num_steps, num_keys)
    maybe = _check_links("possible", possible or (), num_steps, num_keys) - sure
    if highlight_row is not None and not 0 <= highlight_row < num_steps:
        raise ValueError(
            f"highlight_row is {highlight_row}, expected a row in [0, num_steps) = [0, {num_steps})"
        )
    if ax is None:
        title_lines = 1 if title is None else title.count("\n") + 1
        _, (ax,) = heatmap_figure(
            [(src_labels, tgt_labels)], title_lines=title_lines, colorbar=colorbar, pyplot=True
        )
    fig = ax.get_figure()

    image = ax.imshow(matrix, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(num_keys), src_labels, rotation=60, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(num_steps), tgt_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title, fontsize=10)
    if colorbar:
        _draw_colorbar(ax, image)
    _draw_links(ax, sure, maybe)
    if highlight_row is not None:
        _draw_highlight(ax, highlight_row, num_keys)
    if annotate:
        _annotate(ax, matrix, matrix.max() if vmax is None else vmax)
    return fig


def _draw_colorbar(ax: Axes, image: AxesImage) -> None:
    """A colour bar 0.15 inch wide, 0.1 inch right of the heatmap: an inset, it takes no room from it."""
    fig = ax.get_figure()
    ax_width = max(ax.get_position().width * fig.get_figwidth(), 1e-3)
    cax = ax.inset_axes([1 + 0.1 / ax_width, 0.0, 0.15 / ax_width, 1.0])
    fig.colorbar(image, cax=cax, label="attention weight")


def _draw_links(ax: Axes, sure: set[Link], possible: set[Link]) -> None:
    """A box in the cell of each gold link (src_index, tgt_index): solid if sure, dashed if possible."""
    for links, style in ((sure, "-"), (possible, "--")):
        color = SURE_COLOR if style == "-" else POSSIBLE_COLOR
        for src_index, tgt_index in links:
            corner = (src_index - 0.4, tgt_index - 0.4)
            ax.add_patch(Rectangle(corner, 0.8, 0.8, fill=False, lw=1.6, ls=style, ec=color))


def _draw_highlight(ax: Axes, row: int, num_keys: int) -> None:
    """Outline one row across its num_keys cells and set its label in bold."""
    corner = (-0.5, row - 0.5)
    ax.add_patch(Rectangle(corner, num_keys, 1, fill=False, lw=2.5, ec=HIGHLIGHT_COLOR, clip_on=False))
    label = ax.get_yticklabels()[row]
    label.set_fontweight("bold")
    label.set_color(HIGHLIGHT_COLOR)


def _annotate(ax: Axes, matrix: np.ndarray, top: float) -> None:
    """Each weight written in its cell, in white on the cells darker than 0.6 of the colour scale's top."""
    for (row, col), value in np.ndenumerate(matrix):
        color = "white" if value > 0.6 * top else "black"
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=color)


# ------------------------------------------------------------------------------------------------ training
def loss_figure(train_loss: Sequence[float], val_loss: Sequence[float] = (), *, epochs: int | None = None,
                title: str | None = None) -> Figure:
    """Per-epoch training and validation loss (cross-entropy per real target token) on a new Figure.

    train_loss, val_loss: one value per epoch so far (History.train_loss / val_loss); epochs: the planned
    number of epochs, to fix the x-axis while training is under way. The Figure is not left in pyplot.
    """
    for name, values in (("train_loss", train_loss), ("val_loss", val_loss)):
        if not all(np.isfinite(float(v)) for v in values):
            raise ValueError(f"{name} has a non-finite value: {list(values)}")
    if epochs is not None:
        check_positive_int("epochs", epochs)
    fig, (ax,) = new_figure(5, 3)
    fig.subplots_adjust(left=0.15, bottom=0.17, right=0.97, top=0.88)
    last = max(len(train_loss), len(val_loss), epochs or 0, 1)
    if train_loss:
        ax.plot(range(1, len(train_loss) + 1), train_loss, "o-", color="C0", label="train")
    if val_loss:
        ax.plot(range(1, len(val_loss) + 1), val_loss, "s-", color="C1", label="validation")
    ax.set(xlabel="epoch", ylabel="cross-entropy per token (nats)", xlim=(0.5, last + 0.5),
           xticks=list(range(1, last + 1)))
    if title is not None:
        ax.set_title(title, fontsize=10)
    if train_loss or val_loss:
        ax.legend()
    return fig


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:                                       # pragma: no cover - IPython is a dependency
        return False
    return get_ipython() is not None


class LiveLoss:
    """A `train` callback that redraws the loss curves after every epoch, in place, in a notebook.

        live = LiveLoss(epochs=4, title="Bahdanau attention")
        train(model, loader, TrainConfig(epochs=4), val_loader=val_loader, callback=live)

    The figure sits in one output of the cell (a PNG image in an IPython display handle) and grows epoch
    by epoch; outside IPython nothing is displayed. `figure` is the latest Figure; `draw(train_loss,
    val_loss)` draws a finished record the same way (a model loaded from a checkpoint, say). It never
    stops training.
    """

    def __init__(self, *, epochs: int | None = None, title: str | None = None) -> None:
        self.epochs, self.title = epochs, title
        self.figure: Figure | None = None
        self._handle = None

    def __call__(self, epoch: int, history, model=None) -> None:
        self.draw(history.train_loss, history.val_loss)

    def draw(self, train_loss: Sequence[float], val_loss: Sequence[float] = ()) -> Figure:
        """Draw (or redraw in place) the curves of train_loss and val_loss; returns the Figure."""
        self.figure = loss_figure(train_loss, val_loss, epochs=self.epochs, title=self.title)
        if _in_ipython():
            from IPython.display import Image, display

            # PNG bytes, not the Figure: a Figure made without pyplot has no image view until the inline
            # backend has been set up, which may not have happened yet when training starts.
            image = Image(data=figure_to_png(self.figure, dpi=100), format="png")
            if self._handle is None:
                self._handle = display(image, display_id=True)
            else:
                self._handle.update(image)
        return self.figure
