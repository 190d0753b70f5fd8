"""Interactive attention: explore a trained model's weights, and play with the score functions.

Two widgets, both built from ipywidgets and both showing their results as widget *values* (PNG bytes in
an `ipywidgets.Image`, markup in an `ipywidgets.HTML`), never as printed output. So a test can set a
slider and read the result back, a saved notebook keeps the last view, and nbval sees no stray output.

- `AttentionExplorer(model, examples, src_vocab, tgt_vocab)`: pick a sentence (or type one), decode it
  greedily, with beam search or force-decode the reference, and step through the decoder: the current
  target token, its attention row and the source words it looks at are highlighted; overlay the gold
  alignment with the sentence's AER; sharpen or flatten the weights with a temperature; compare two models.
- `ScorePlayground()`: a 2-D query among fixed 2-D keys; dot, scaled-dot, general and additive scores and
  their softmax weights update as the query moves; a toggle masks the padded keys (their weight is exactly 0).

Display either one by making it the last expression of a cell (or `display(widget)`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from attn_course.attention.masking import masked_softmax, softmax_excluding
from attn_course.attention.scoring import additive_scores, dot_scores, general_scores
from attn_course.data.tasks import preprocess_fra_eng
from attn_course.measure.diagnostics import Diagnosis, attention_entropy, diagnose
from attn_course.measure.metrics import CONVENTIONS, alignment_error_rate, attention_to_links
from attn_course.models.decoding import beam_search, greedy_decode
from attn_course.models.modes import eval_mode
from attn_course.validation import check_int, check_number, check_positive_int
from attn_course.view.plot import HIGHLIGHT_COLOR, figure_to_png, heatmap, heatmap_figure, new_figure

#: Resolution of the widgets' figures: 90 dots per inch, shown at exactly that many pixels (no rescaling).
DPI = 90
#: Lets a description like "decoder step" show in full instead of being cut to "decoder s...".
WIDE = {"description_width": "initial"}


def show_figure(image: widgets.Image, fig: Figure) -> None:
    """Put a figure into an Image widget as PNG bytes, shown at its own pixel width (not stretched to fit)."""
    image.value = figure_to_png(fig, dpi=DPI)
    image.width = str(round(fig.get_figwidth() * DPI))


# ---------------------------------------------------------------------------------------------------------
# Temperature


def apply_temperature(
    weights: torch.Tensor | np.ndarray, temperature: float, valid_len: int | None = None
) -> torch.Tensor:
    """Re-normalise attention weights at a softmax temperature: softmax(log(w) / T) over each row.

    weights: (num_steps, num_keys), each row a distribution over the first `valid_len` keys (default all).
    Returns: (num_steps, num_keys) float64; rows sum to 1 over the positions that had weight > 0.

    Since w = softmax(e), log(w) = e - logsumexp(e), and softmax((e - c) / T) = softmax(e / T): this is the
    model's own softmax run at temperature T (Hinton et al. 2015, eq. 1). T = 1 gives the weights back,
    T < 1 sharpens towards the argmax (which never changes), T > 1 flattens towards uniform. Positions
    past `valid_len`, and positions whose weight was exactly 0 (padding, a local-attention window), keep
    weight exactly 0 at every temperature; a row that was all 0 stays all 0.
    """
    check_number("temperature", temperature, low=0, low_open=True)
    w = torch.as_tensor(weights).detach().to("cpu", torch.float64)
    if w.dim() != 2:
        raise ValueError(f"weights has shape {tuple(w.shape)}, expected (num_steps, num_keys)")
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights contains NaN, inf or negative values, expected attention weights")
    num_steps, num_keys = w.shape
    valid_len = num_keys if valid_len is None else valid_len
    check_int("valid_len", valid_len, low=0, high=num_keys, high_name="num_keys")
    # Positions past valid_len and positions of weight exactly 0 are excluded from the softmax (weight 0).
    excluded = (w == 0) | (torch.arange(num_keys) >= valid_len)
    scores = torch.log(w.clamp_min(torch.finfo(torch.float64).tiny)) / temperature
    return softmax_excluding(scores, excluded)


def entropy(row: torch.Tensor | np.ndarray) -> float:
    """Shannon entropy, in nats, of one attention row (num_keys,); 0 * log 0 counts as 0.

    log(num_keys) for uniform weights (the model has not decided), 0 for a one-hot row
    (`attn_course.measure.diagnostics.attention_entropy` for a batch).
    """
    p = torch.as_tensor(row).detach().to("cpu", torch.float64)
    if p.dim() != 1:
        raise ValueError(f"row has shape {tuple(p.shape)}, expected (num_keys,)")
    return float(attention_entropy(p[None, None])[0, 0])


# ---------------------------------------------------------------------------------------------------------
# Score playground

SCORE_NAMES = ("dot", "scaled dot", "general", "additive")

#: The playground's default keys: five 2-D points, spread so every score function ranks them differently.
DEFAULT_KEYS = ((2.0, 0.5), (1.0, 1.8), (-1.2, 1.0), (-1.5, -1.2), (0.6, -2.0))


class ScorePlayground:
    """Move a 2-D query among fixed 2-D keys and watch four scoring functions and their softmax weights.

    keys: (num_keys, 2) key points (default `DEFAULT_KEYS`); W_a: (2, 2) matrix of the general score;
    W_q, W_k: (num_hiddens, 2) and w_v: (1, num_hiddens) of the additive score (default: seeded random).
    valid_len: the keys that are real when the mask toggle is on; the rest are padding.

    Scores, for the query q and each key k (Luong et al. 2015, sec. 3.1, the scores of eq. 7; Bahdanau et
    al. 2014, eq. 6 and appendix A.1.2):
    dot qᵀk, scaled dot qᵀk / sqrt(2), general qᵀ W_a k, additive w_vᵀ tanh(W_q q + W_k k);
    weights = masked_softmax(scores, valid_len) -- the package's own functions, not copies.

    State for code and tests: `scores` and `weights` (dicts from score name to a (num_keys,) array),
    `query` (2,); widgets `query_x`, `query_y`, `mask_toggle`, `valid_len_slider`, `color_by`, `image`,
    `table`; the whole layout is `widget`.
    """

    def __init__(
        self,
        keys: torch.Tensor | Sequence[Sequence[float]] | None = None,
        *,
        query: Sequence[float] = (1.0, 1.0),
        valid_len: int = 3,
        W_a: torch.Tensor | None = None,
        W_q: torch.Tensor | None = None,
        W_k: torch.Tensor | None = None,
        w_v: torch.Tensor | None = None,
        num_hiddens: int = 4,
        seed: int = 0,
    ) -> None:
        self.keys = torch.as_tensor(DEFAULT_KEYS if keys is None else keys, dtype=torch.float64)
        if self.keys.dim() != 2 or self.keys.shape[1] != 2 or self.keys.shape[0] < 2:
            raise ValueError(
                f"keys has shape {tuple(self.keys.shape)}, expected (num_keys, 2) with num_keys >= 2"
            )
        num_keys = self.keys.shape[0]
        check_int("valid_len", valid_len, low=0, high=num_keys, high_name="num_keys")
        if len(query) != 2:
            raise ValueError(f"query has {len(query)} coordinates, expected 2")
        generator = torch.Generator().manual_seed(seed)

        def param(value: torch.Tensor | None, shape: tuple[int, int], name: str) -> torch.Tensor:
            if value is None:
                return torch.randn(shape, generator=generator, dtype=torch.float64)
            value = torch.as_tensor(value, dtype=torch.float64)
            if tuple(value.shape) != shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, expected {shape}")
            return value

        # General: a rotation by 45 degrees, scaled: it prefers keys 45 degrees counter-clockwise of q.
        default_W_a = torch.tensor([[0.8, -0.8], [0.8, 0.8]], dtype=torch.float64)
        self.W_a = param(default_W_a if W_a is None else W_a, (2, 2), "W_a")
        self.W_q = param(W_q, (num_hiddens, 2), "W_q")
        self.W_k = param(W_k, (num_hiddens, 2), "W_k")
        self.w_v = param(w_v, (1, num_hiddens), "w_v")

        self.widget = self._build_controls(query, valid_len)
        self.scores: dict[str, np.ndarray] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.query = np.zeros(2)
        for control in (self.query_x, self.query_y, self.mask_toggle, self.valid_len_slider, self.color_by):
            control.observe(self._on_change, names="value")
        self.update()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _build_controls(self, query: Sequence[float], valid_len: int) -> widgets.VBox:
        """Create the controls and outputs at their initial values; return their layout (none observed)."""
        slider = {"min": -3.0, "max": 3.0, "step": 0.1, "continuous_update": False, "readout_format": ".1f"}
        self.query_x = widgets.FloatSlider(value=float(query[0]), description="query x", style=WIDE, **slider)
        self.query_y = widgets.FloatSlider(value=float(query[1]), description="query y", style=WIDE, **slider)
        self.mask_toggle = widgets.ToggleButton(
            value=False, description="mask padded keys", icon="eye-slash", tooltip="valid_lens on/off"
        )
        self.valid_len_slider = widgets.IntSlider(
            value=valid_len,
            min=0,
            max=self.keys.shape[0],
            description="valid_len",
            style=WIDE,
            continuous_update=False,
        )
        self.color_by = widgets.Dropdown(
            options=SCORE_NAMES, value="dot", description="colour by", style=WIDE
        )
        self.image = widgets.Image(format="png")
        self.table = widgets.HTML()
        controls = widgets.VBox(
            [self.query_x, self.query_y, self.mask_toggle, self.valid_len_slider, self.color_by]
        )
        return widgets.VBox([widgets.HBox([controls, self.table]), self.image])

    def _on_change(self, change: dict) -> None:
        self.update()

    @property
    def valid_len(self) -> int | None:
        """The number of real keys, or None when masking is off (every key counts)."""
        return self.valid_len_slider.value if self.mask_toggle.value else None

    def compute(self, query: Sequence[float]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Scores and masked-softmax weights of every score function for one query (2,); each (num_keys,)."""
        q = torch.as_tensor(query, dtype=torch.float64).reshape(1, 1, 2)
        k = self.keys[None]
        scores = {
            "dot": dot_scores(q, k),
            "scaled dot": dot_scores(q, k, scaled=True),
            "general": general_scores(q, k, self.W_a),
            "additive": additive_scores(q @ self.W_q.T, k @ self.W_k.T, self.w_v),
        }
        lens = None if self.valid_len is None else torch.tensor([self.valid_len])
        weights = {name: masked_softmax(s, lens) for name, s in scores.items()}
        return (
            {name: s[0, 0].numpy() for name, s in scores.items()},
            {name: w[0, 0].numpy() for name, w in weights.items()},
        )

    def update(self) -> None:
        """Recompute the scores and weights from the controls and redraw the figure and the table."""
        self.valid_len_slider.disabled = not self.mask_toggle.value
        self.query = np.array([self.query_x.value, self.query_y.value])
        self.scores, self.weights = self.compute(self.query)
        self.table.value = self._table_html()
        show_figure(self.image, self._figure())

    def _is_padding(self, index: int) -> bool:
        return self.valid_len is not None and index >= self.valid_len

    def _table_html(self) -> str:
        num_keys = self.keys.shape[0]
        head = "".join(f"<th>k{i + 1}{' (pad)' if self._is_padding(i) else ''}</th>" for i in range(num_keys))
        rows = []
        for name in SCORE_NAMES:
            scores = "".join(f"<td>{s:+.2f}</td>" for s in self.scores[name])
            weights = "".join(f"<td><b>{w:.2f}</b></td>" for w in self.weights[name])
            rows.append(f"<tr><th rowspan=2>{name}</th><td>score</td>{scores}</tr>")
            rows.append(f"<tr><td>weight</td>{weights}</tr>")
        return (
            "<table class='attn-scores' style='border-collapse:collapse;font-size:12px'>"
            f"<tr><th></th><th></th>{head}</tr>{''.join(rows)}</table>"
        )

    def _figure(self) -> Figure:
        fig, (plane, bars) = new_figure(10.0, 4.2, ncols=2)
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.92, wspace=0.25)
        chosen = self.weights[self.color_by.value]
        for i, (x, y) in enumerate(self.keys.tolist()):
            if self._is_padding(i):
                plane.scatter(x, y, s=90, marker="x", color="grey")
                plane.annotate(
                    f"k{i + 1} (pad)", (x, y), xytext=(6, 6), textcoords="offset points", color="grey"
                )
            else:
                plane.scatter(x, y, s=80 + 900 * chosen[i], color="tab:red", alpha=0.35 + 0.65 * chosen[i])
                plane.annotate(
                    f"k{i + 1}: {chosen[i]:.2f}", (x, y), xytext=(6, 6), textcoords="offset points"
                )
        plane.annotate(
            "",
            xy=tuple(self.query),
            xytext=(0, 0),
            arrowprops={"arrowstyle": "->", "lw": 2, "color": "tab:blue"},
        )
        plane.text(*self.query, "  query", color="tab:blue", va="center")
        plane.set(
            xlim=(-3.2, 3.2), ylim=(-3.2, 3.2), aspect="equal", xlabel="dimension 1", ylabel="dimension 2"
        )
        plane.axhline(0, color="0.85", lw=0.8, zorder=0)
        plane.axvline(0, color="0.85", lw=0.8, zorder=0)
        plane.set_title(f"keys sized by their {self.color_by.value} weight", fontsize=10)

        num_keys = self.keys.shape[0]
        width = 0.8 / len(SCORE_NAMES)
        for j, name in enumerate(SCORE_NAMES):
            positions = np.arange(num_keys) + (j - (len(SCORE_NAMES) - 1) / 2) * width
            bars.bar(positions, self.weights[name], width=width, label=name)
        bars.set_xticks(
            range(num_keys),
            [f"k{i + 1}" + (" (pad)" if self._is_padding(i) else "") for i in range(num_keys)],
        )
        bars.set(ylim=(0, 1.05), ylabel="softmax weight")
        bars.legend(fontsize=8, loc="upper right")
        bars.set_title("weights per score function (masked keys get exactly 0)", fontsize=10)
        return fig


# ---------------------------------------------------------------------------------------------------------
# Attention explorer

MODES = ("greedy", "beam", "reference")


def default_tokenize(text: str) -> list[str]:
    """Tokenise typed text as the course's data is tokenised: lower case, a space before , . ! ?, split."""
    return preprocess_fra_eng(text).split()


def model_name(model: torch.nn.Module) -> str:
    """A short label for a Seq2Seq model: "Bahdanau", "Luong general", ... (the class name otherwise); a
    model that names itself (`attn_course.models.transformer.HeadView`: its layer and head) by its `label`."""
    if isinstance(getattr(model, "label", None), str):
        return model.label
    kind = getattr(model, "kind", None)
    if kind == "luong":
        return f"Luong {model.decoder.score}"
    return kind.capitalize() if isinstance(kind, str) else type(model).__name__


@dataclass(frozen=True)
class AttentionView:
    """One model's attention on one source sentence, as the explorer shows it.

    src_tokens: the num_keys source labels as the model saw them (unknown words as <unk>, then <eos>).
    tgt_tokens: the num_steps row labels: the token each decoder step produced (or, in "reference" mode,
        the reference token it was trained to produce), <eos> last when the step produced it.
    weights: (num_steps, num_keys) attention, each row a distribution over the source.
    predicted: "reference" mode only: the model's own argmax prediction at each step (else None).
    gold, possible: sure and possible gold links in heatmap coordinates (src_index, row), shifted one row
        down for the "input" convention; None when the rows are not the reference words or there is no gold.
    aer: the sentence's alignment error rate (Och & Ney 2000, eq. 6) when gold is available, else None.
    """

    name: str
    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray
    convention: str
    predicted: list[str] | None = None
    gold: frozenset | None = None
    possible: frozenset | None = None
    aer: float | None = None


def score_view(view: AttentionView, example, convention: str) -> AttentionView:
    """The view with gold links (in heatmap rows) and AER under `convention`, or with none if not scorable.

    Scorable when the example has gold links and the view's rows are its reference words (then <eos>);
    with the "input" convention step t is credited to the word fed at step t, so the gold box of target
    word j is drawn in row j + 1 (metrics.attention_to_links explains both conventions).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention is {convention!r}, expected one of {CONVENTIONS}")
    shift = 1 if convention == "input" else 0
    scorable = (
        example is not None
        and bool(example.possible)
        and view.tgt_tokens[: len(example.tgt)] == list(example.tgt)
        and len(view.tgt_tokens) >= len(example.tgt) + shift
    )
    if not scorable:
        return replace(view, convention=convention, gold=None, possible=None, aer=None)
    src_len = len(view.src_tokens) - 1  # without <eos>
    links = attention_to_links(view.weights, convention=convention, src_len=src_len, tgt_len=len(example.tgt))
    return replace(
        view,
        convention=convention,
        gold=frozenset((i, j + shift) for i, j in example.sure),
        possible=frozenset((i, j + shift) for i, j in example.possible),
        aer=alignment_error_rate(links, example.sure, example.possible),
    )



def _explorable_models(model: torch.nn.Module, compare: torch.nn.Module | None) -> list[torch.nn.Module]:
    """[model] or [model, compare], each checked to be a Seq2Seq whose decoder has attention."""
    models = [model] if compare is None else [model, compare]
    for label, m in zip(("model", "compare"), models, strict=False):
        if not isinstance(m, torch.nn.Module):
            raise ValueError(f"{label} is a {type(m).__name__}, expected a Seq2Seq model (torch.nn.Module)")
        if not getattr(getattr(m, "decoder", None), "has_attention", False):
            raise ValueError(
                f"{label} has no attention (e.g. a PlainDecoder): there are no weights to explore"
            )
    return models


def _dropdown_examples(examples: Sequence) -> list:
    """The examples as a list, checked to be non-empty and to have a source and a target each."""
    examples = list(examples)
    if not examples:
        raise ValueError("examples is empty, expected at least one Example for the dropdown")
    for i, example in enumerate(examples):
        if not (hasattr(example, "src") and hasattr(example, "tgt")):
            raise ValueError(f"examples[{i}] is a {type(example).__name__}, expected an Example (src, tgt)")
    return examples

class AttentionExplorer:
    """Step through a seq2seq model's attention on a sentence, with gold links, temperature and a comparison.

    model: a trained attn_course Seq2Seq with attention (Bahdanau or Luong); compare: optional second model
        shown side by side on the same sentence (same vocabularies).
    examples: attn_course.data.tasks.Example objects for the dropdown (a few dozen; their gold links, if any,
        give the AER). src_vocab, tgt_vocab: the vocabularies the models were trained with.
    names: panel titles (default: "Bahdanau", "Luong general", ...). mode: the initial decoding mode
        ("greedy", "beam" or "reference"); beam_size: the initial beam size (2-16).
    max_len: the longest output decoded (default: twice the source length + 10).
    convention: which target word a step's attention is credited to for the gold boxes and AER, "output"
        (the word the step predicts, the default) or "input" (the word it was fed; Luong et al. 2015's
        reading). "output" fits every decoder of the course: Bahdanau's and the content-based Luong
        variants' AER is far lower under it (measured over seeds in
        attn_course/course/results/luong_variants.json). The explorer's dropdown switches between the two.
    tokenize: how a typed sentence becomes tokens (default: d2l's preprocessing, then whitespace split).

    Modes: "greedy" and "beam" decode the source with attn_course.models.decoding; "reference" force-decodes
    the example's reference translation (teacher forcing), so every row is a reference word and the gold
    alignment can be scored even when the model's own output differs.

    State for code and tests (updated on every change): `views` (one AttentionView per model),
    `shown_weights` (the weights after the temperature, one (num_steps, num_keys) array per model),
    `highlighted_row`, `highlighted_token`, `argmax_source_index`, `argmax_source_word`, `row_entropy`
    and `aer` (all of the first model); `diagnoses`, one `attn_course.measure.diagnostics.Diagnosis` per model
    of the shown weights (mean normalised entropy, concentration, verdict), also shown under each sentence.
    Widgets: `sentence_dropdown`, `sentence_text`, `mode_buttons`, `beam_slider`, `step_slider`,
    `temperature_slider`, `gold_toggle`, `convention_dropdown` ("output" or "input": which word a step's
    attention is credited to), `image` (PNG of the heatmaps), `step_html` (the sentences with the current step
    highlighted), `aer_label`, `status`; layout `widget`.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        examples: Sequence,
        src_vocab,
        tgt_vocab,
        *,
        compare: torch.nn.Module | None = None,
        names: Sequence[str] | None = None,
        mode: str = "greedy",
        beam_size: int = 4,
        max_len: int | None = None,
        convention: str = "output",
        tokenize: Callable[[str], list[str]] = default_tokenize,
    ) -> None:
        self.models = _explorable_models(model, compare)
        self.names = [model_name(m) for m in self.models] if names is None else list(names)
        if len(self.names) != len(self.models):
            raise ValueError(
                f"names has {len(self.names)} entries, expected one per model = {len(self.models)}"
            )
        self.examples = _dropdown_examples(examples)
        if mode not in MODES:
            raise ValueError(f"mode is {mode!r}, expected one of {MODES}")
        if convention not in CONVENTIONS:
            raise ValueError(f"convention is {convention!r}, expected one of {CONVENTIONS}")
        check_int("beam_size", beam_size, low=2, high=16)
        if max_len is not None:
            check_positive_int("max_len", max_len)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.max_len, self.tokenize = max_len, tokenize

        self._build_controls(mode, beam_size, convention)
        self.widget = self._layout()
        # What is shown (see the class docstring), set by decode and render.
        self.views: list[AttentionView] = []
        self.shown_weights: list[np.ndarray] = []
        self.highlighted_row = 0
        self.highlighted_token: str | None = None
        self.argmax_source_index: int | None = None
        self.argmax_source_word: str | None = None
        self.row_entropy: float | None = None
        self.diagnoses: list[Diagnosis] = []
        self.aer: float | None = None
        self._syncing = False
        self._wire()
        self.decode()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # -- construction: controls, layout, wiring -------------------------------------------------------------
    def _build_controls(self, mode: str, beam_size: int, convention: str) -> None:
        """Create every control and output widget, set to the given initial values (nothing observed yet)."""
        options = [(f"{i}: {_shorten(' '.join(e.src), 70)}", i) for i, e in enumerate(self.examples)]
        self.sentence_dropdown = widgets.Dropdown(
            options=options, value=0, description="sentence", layout=widgets.Layout(width="460px")
        )
        self.sentence_text = widgets.Text(
            value=" ".join(self.examples[0].src),
            description="or type",
            placeholder="type a source sentence and press Enter",
            continuous_update=False,
            layout=widgets.Layout(width="460px"),
        )
        self.mode_buttons = widgets.ToggleButtons(
            options=MODES,
            value=mode,
            description="decoding",
            tooltips=["greedy search", "beam search", "force-decode the reference translation"],
            style={"button_width": "90px"},
        )
        self.beam_slider = widgets.IntSlider(
            value=beam_size, min=2, max=16, description="beam size", style=WIDE, continuous_update=False
        )
        self.step_slider = widgets.IntSlider(value=0, min=0, max=0, description="decoder step", style=WIDE)
        self.temperature_slider = widgets.FloatLogSlider(
            value=1.0,
            base=10,
            min=-1,
            max=1,
            step=0.05,
            description="temperature",
            style=WIDE,
            continuous_update=False,
        )
        self.gold_toggle = widgets.Checkbox(value=False, description="gold alignment + AER", indent=False)
        self.convention_dropdown = widgets.Dropdown(
            options=[
                ("output: the word the step predicts", "output"),
                ("input: the word the step was fed", "input"),
            ],
            value=convention,
            description="credit step t's attention to",
            style=WIDE,
            layout=widgets.Layout(width="520px"),
        )
        self.image = widgets.Image(format="png")
        self.step_html = widgets.HTML()
        self.aer_label = widgets.HTML()
        self.status = widgets.HTML()

    def _layout(self) -> widgets.VBox:
        """The controls in rows, then the step view, the AER and status line, and the heatmaps."""
        return widgets.VBox(
            [
                widgets.HBox([self.sentence_dropdown, self.sentence_text]),
                widgets.HBox([self.mode_buttons, self.beam_slider]),
                widgets.HBox([self.step_slider, self.temperature_slider]),
                widgets.HBox([self.gold_toggle, self.convention_dropdown]),
                self.step_html,
                widgets.HBox([self.aer_label, self.status]),
                self.image,
            ]
        )

    def _wire(self) -> None:
        """Observe the controls: a new sentence, mode or beam size decodes again; the rest only redraws."""
        self.sentence_dropdown.observe(self._on_dropdown, names="value")
        self.sentence_text.observe(self._on_decode_change, names="value")
        self.mode_buttons.observe(self._on_decode_change, names="value")
        self.beam_slider.observe(self._on_decode_change, names="value")
        for control in (self.step_slider, self.temperature_slider, self.gold_toggle):
            control.observe(self._on_view_change, names="value")
        self.convention_dropdown.observe(self._on_convention, names="value")

    # -- events --------------------------------------------------------------------------------------------
    def _on_dropdown(self, change: dict) -> None:
        text = " ".join(self.examples[change["new"]].src)
        if self.sentence_text.value == text:
            self.decode()
        else:
            self.sentence_text.value = text  # triggers decode()

    def _on_decode_change(self, change: dict) -> None:
        if not self._syncing:
            self.decode()

    def _on_view_change(self, change: dict) -> None:
        if not self._syncing:
            self.render()

    def _on_convention(self, change: dict) -> None:
        self._score_views()
        self.render()

    def _score_views(self) -> None:
        """Give each view gold links and AER under the chosen convention; enable the gold toggle if any."""
        example, choice = self.example, self.convention_dropdown.value
        self.views = [
            score_view(view, example, choice) for view in self.views
        ]
        has_gold = any(view.gold is not None for view in self.views)
        self._syncing = True
        try:
            self.gold_toggle.disabled = not has_gold
            if not has_gold:
                self.gold_toggle.value = False
        finally:
            self._syncing = False

    # -- decoding ------------------------------------------------------------------------------------------
    @property
    def example(self):
        """The dropdown's example if the text box holds its source sentence, else None (a typed sentence)."""
        example = self.examples[self.sentence_dropdown.value]
        return example if self.tokenize(self.sentence_text.value) == list(example.src) else None

    def decode(self) -> None:
        """Decode the current sentence with every model in the current mode, then redraw from step 0."""
        tokens = self.tokenize(self.sentence_text.value)
        if not tokens:
            self.status.value = (
                "<span style='color:#b00'>type a sentence first (the text box is empty)</span>"
            )
            return
        example = self.example
        messages = []
        mode = self.mode_buttons.value
        if mode == "reference" and example is None:
            messages.append("a typed sentence has no reference translation: decoded greedily instead")
            mode = "greedy"
        unknown = sorted({t for t in tokens if self.src_vocab[t] == self.src_vocab.unk})
        if unknown:
            words = ", ".join(html.escape(w) for w in unknown)
            messages.append(f"not in the training vocabulary, shown as &lt;unk&gt;: {words}")
        self.beam_slider.disabled = mode != "beam"
        self.views = [
            self._view(model, name, tokens, example, mode)
            for model, name in zip(self.models, self.names, strict=True)
        ]
        self._score_views()
        self._syncing = True
        try:
            self.step_slider.max = max(len(view.tgt_tokens) for view in self.views) - 1
            self.step_slider.value = 0
        finally:
            self._syncing = False
        self.status.value = "<br>".join(f"<i>{m}</i>" for m in messages)
        self.render()

    def _view(self, model, name: str, tokens: list[str], example, mode: str) -> AttentionView:
        src_ids = self.src_vocab[tokens] + [self.src_vocab.eos]
        src_labels = [
            t if i != self.src_vocab.unk else "<unk>" for t, i in zip(tokens, src_ids, strict=False)
        ]
        src_labels.append(self.src_vocab.to_tokens(self.src_vocab.eos))
        eos_label = self.tgt_vocab.to_tokens(self.tgt_vocab.eos)
        device = next(model.parameters()).device
        src = torch.tensor([src_ids], device=device)
        src_valid_lens = torch.tensor([len(src_ids)], device=device)
        predicted = None
        with eval_mode(model):
            with torch.no_grad():
                if mode == "reference":
                    tgt_in = torch.tensor(
                        [[self.tgt_vocab.bos, *self.tgt_vocab[list(example.tgt)]]], device=device
                    )
                    logits, attention = model(src, src_valid_lens, tgt_in)
                    weights = attention[0]
                    tgt_labels = [*example.tgt, eos_label]
                    predicted = self.tgt_vocab.to_tokens(logits[0].argmax(-1).tolist())
                else:
                    ids, weights = self._search(model, src, src_valid_lens, mode)
                    tgt_labels = self.tgt_vocab.to_tokens(ids)
                    if weights.shape[0] == len(ids) + 1:  # the step that produced <eos>
                        tgt_labels.append(eos_label)
        weights = weights.detach().to("cpu", torch.float64).numpy()
        return AttentionView(name, src_labels, tgt_labels, weights, self.convention_dropdown.value, predicted)

    def _search(self, model, src: torch.Tensor, src_valid_lens: torch.Tensor, mode: str):
        """Token ids (without <bos>/<eos>) and attention (num_steps, num_keys) of one decoded sentence."""
        max_len = self.max_len or 2 * int(src_valid_lens[0]) + 10
        common = {"bos": self.tgt_vocab.bos, "eos": self.tgt_vocab.eos, "max_len": max_len}
        if mode == "greedy":
            results = greedy_decode(model, src, src_valid_lens, **common)
        else:
            results = beam_search(model, src, src_valid_lens, beam_size=self.beam_slider.value, **common)
        return list(results[0].tokens), results[0].attention

    # -- drawing -------------------------------------------------------------------------------------------
    def render(self) -> None:
        """Redraw the heatmaps, the step view and the AER label for the current step, temperature and gold."""
        step, temperature, show_gold = (
            self.step_slider.value,
            self.temperature_slider.value,
            self.gold_toggle.value,
        )
        self.shown_weights = [apply_temperature(v.weights, temperature).numpy() for v in self.views]
        first, shown = self.views[0], self.shown_weights[0]
        self.highlighted_row = min(step, len(first.tgt_tokens) - 1)
        self.highlighted_token = first.tgt_tokens[self.highlighted_row]
        row = shown[self.highlighted_row]
        self.argmax_source_index = int(row.argmax())
        self.argmax_source_word = first.src_tokens[self.argmax_source_index]
        self.row_entropy = entropy(row)
        self.diagnoses = [diagnose(torch.as_tensor(weights)[None]) for weights in self.shown_weights]
        self.aer = first.aer if show_gold else None
        self.step_html.value = "".join(
            _step_html(view, weights, step, diagnosis)
            for view, weights, diagnosis in zip(self.views, self.shown_weights, self.diagnoses, strict=True)
        )
        self.aer_label.value = self._aer_html(show_gold)
        show_figure(self.image, self._figure(step, temperature, show_gold))

    def _aer_html(self, show_gold: bool) -> str:
        if self.gold_toggle.disabled:
            if self.example is None:
                return "<i>gold alignment: only for sentences from the list</i>"
            if not self.example.possible:
                return "<i>gold alignment: this example has none</i>"
            return "<i>gold alignment: the output differs from the reference; choose 'reference'</i>"
        if not show_gold:
            return "<i>tick 'gold alignment' to score the attention against it (AER)</i>"
        parts = [
            f"{html.escape(v.name)}: <b>AER {v.aer:.2f}</b>"
            if v.aer is not None
            else f"{html.escape(v.name)}: no AER (its output differs from the reference)"
            for v in self.views
        ]
        return (
            "<span class='attn-aer'>" + " &middot; ".join(parts) + " (0 is perfect; lower is better)</span>"
        )

    def _figure(self, step: int, temperature: float, show_gold: bool) -> Figure:
        titles, rows = [], []
        for view, weights in zip(self.views, self.shown_weights, strict=True):
            row = step if step < len(view.tgt_tokens) else None
            lines = [view.name]
            if row is not None:
                best = int(weights[row].argmax())
                word, looked_at = view.tgt_tokens[row], view.src_tokens[best]
                lines.append(f'"{word}" looks at "{looked_at}" ({weights[row, best]:.2f})')
            if temperature != 1.0:
                lines.append(f"temperature {temperature:.2g}")
            if show_gold and view.aer is not None:
                lines.append(f"boxes: gold links, AER {view.aer:.2f}")
                if view.convention == "input":
                    lines.append("(one row down: input convention)")
            titles.append("\n".join(lines))
            rows.append(row)
        fig, axes = heatmap_figure(
            [(v.src_tokens, v.tgt_tokens) for v in self.views],
            title_lines=max(t.count("\n") + 1 for t in titles),
        )
        for ax, view, weights, title, row in zip(
            axes, self.views, self.shown_weights, titles, rows, strict=True
        ):
            heatmap(
                weights,
                view.src_tokens,
                view.tgt_tokens,
                ax=ax,
                title=title,
                gold=view.gold if show_gold else None,
                possible=view.possible if show_gold else None,
                highlight_row=row,
            )
        return fig


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _diagnosis_html(diagnosis: Diagnosis) -> str:
    """The sentence's mean normalised entropy and concentration, and a warning when they flag a problem."""
    flags = {"collapsed": "collapsed on one position: a lazy column",
             "near-uniform": "near-uniform: not looking anywhere in particular"}
    flag = flags.get(diagnosis.verdict)
    return (f"<div class='attn-diagnosis' data-verdict='{diagnosis.verdict}' style='font-size:12px'>"
            f"whole sentence: mean normalised entropy {diagnosis.entropy:.2f} (1: uniform), concentration "
            f"{diagnosis.concentration:.2f} (share of all its attention on one source word)"
            + (f" <b style='color:#b00'>&#9888; {flag}</b>" if flag else "") + "</div>")


def _step_html(view: AttentionView, weights: np.ndarray, step: int,
               diagnosis: Diagnosis | None = None) -> str:
    """The view's target sentence with the current token highlighted, the source shaded by its weights."""
    current = step if step < len(view.tgt_tokens) else None
    target = []
    for t, token in enumerate(view.tgt_tokens):
        css = "attn-tok attn-current" if t == current else "attn-tok"
        style = f"background:{HIGHLIGHT_COLOR};color:white;font-weight:bold;" if t == current else ""
        target.append(
            f"<span class='{css}' data-step='{t}' style='{style}padding:1px 3px'>{html.escape(token)}</span>"
        )
    if current is None:
        source = ["<i>(this model's output ended before this step)</i>"]
        info = ""
    else:
        row = weights[current]
        best = int(row.argmax())
        source = [
            f"<span class='attn-src' title='{w:.3f}' "
            f"style='background:rgba(214,39,40,{w:.3f});padding:1px 3px'>{html.escape(token)}</span>"
            for token, w in zip(view.src_tokens, row, strict=True)
        ]
        info = (
            f"step {current} (of 0&ndash;{len(view.tgt_tokens) - 1}): "
            f"<b>{html.escape(view.tgt_tokens[current])}</b> "
            f"looks most at <b class='attn-argmax'>{html.escape(view.src_tokens[best])}</b> "
            f"({row[best]:.2f}); "
            f"entropy {entropy(row):.2f} nats (uniform: {math.log(len(row)):.2f})"
        )
        if view.predicted is not None:
            info += f"; the model would predict <b>{html.escape(view.predicted[current])}</b> here"
    return (
        f"<div class='attn-view' data-model='{html.escape(view.name)}' style='margin:4px 0'>"
        f"<div><b>{html.escape(view.name)}</b> target: {' '.join(target)}</div>"
        f"<div>source weights: {' '.join(source)}</div>"
        f"<div style='font-size:12px'>{info}</div>"
        + ("" if diagnosis is None else _diagnosis_html(diagnosis)) + "</div>"
    )
