"""The widgets and the static heatmap, headless: set controls as a learner would, read the result back.

Most explorer tests use a *scripted* model: a real nn.Module with the Seq2Seq interface (encode,
decoder.init_state / step, teacher-forced forward) whose step t translates source word t word by word and
puts `PEAK` of its attention on that word. So every expected highlight, argmax word and AER is known in
advance, and the real attn_course.models.decoding searches run on it. One test runs a real (untrained) model.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import nn

from attn_course.data.tasks import Example, TranslationDataset, Vocab, bucketed_loader, toy_translation
from attn_course.models.seq2seq import build_model
from attn_course.training.loop import TrainConfig, train
from attn_course.view.plot import LiveLoss, heatmap, loss_figure
from attn_course.view.widgets import (
    DEFAULT_KEYS,
    AttentionExplorer,
    ScorePlayground,
    apply_temperature,
    entropy,
)

PEAK = 0.6
WORDS = ["a", "b", "c", "d", "e"]


class ScriptedState(NamedTuple):
    src: torch.Tensor
    valid_lens: torch.Tensor
    step: int

    def index_select(self, index: torch.Tensor) -> ScriptedState:
        return ScriptedState(
            self.src.index_select(0, index), self.valid_lens.index_select(0, index), self.step
        )


class ScriptedDecoder(nn.Module):
    """Step t attends PEAK to source position min(t, <eos>) and emits that word's upper-case translation."""

    has_attention = True

    def __init__(self, src_vocab: Vocab, tgt_vocab: Vocab, score: str) -> None:
        super().__init__()
        self.vocab_size, self.score = len(tgt_vocab), score
        table = torch.full((len(src_vocab),), tgt_vocab.unk)
        for word in WORDS:
            table[src_vocab[word]] = tgt_vocab[word.upper()]
        table[src_vocab.eos] = tgt_vocab.eos
        self.register_buffer("table", table)

    def init_state(self, enc: tuple[torch.Tensor, torch.Tensor]) -> ScriptedState:
        return ScriptedState(enc[0], enc[1], 0)

    def row(self, src: torch.Tensor, valid_lens: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        batch_size, num_keys = src.shape
        position = torch.clamp(valid_lens - 1, max=t)  # the word t, or <eos> once the words are used up
        valid = torch.arange(num_keys)[None] < valid_lens[:, None]
        rest = (1 - PEAK) / torch.clamp(valid_lens - 1, min=1)
        weights = torch.where(valid, rest[:, None], torch.zeros(()))
        weights[torch.arange(batch_size), position] = torch.where(valid_lens > 1, PEAK, 1.0)
        logits = torch.full((batch_size, self.vocab_size), -10.0)
        logits[torch.arange(batch_size), self.table[src[torch.arange(batch_size), position]]] = 10.0
        return logits, weights

    def step(self, y_prev: torch.Tensor, state: ScriptedState):
        logits, weights = self.row(state.src, state.valid_lens, state.step)
        return logits, state._replace(step=state.step + 1), weights


class ScriptedModel(nn.Module):
    def __init__(self, src_vocab: Vocab, tgt_vocab: Vocab, kind: str = "bahdanau", score: str = "general"):
        super().__init__()
        self.kind = kind
        self.decoder = ScriptedDecoder(src_vocab, tgt_vocab, score)
        self.unused = nn.Parameter(torch.zeros(1))  # so the model has a device

    def encode(self, src: torch.Tensor, src_valid_lens: torch.Tensor):
        return src, src_valid_lens

    def forward(self, src: torch.Tensor, src_valid_lens: torch.Tensor, tgt_in: torch.Tensor):
        rows = [self.decoder.row(src, src_valid_lens, t) for t in range(tgt_in.shape[1])]
        return torch.stack([r[0] for r in rows], 1), torch.stack([r[1] for r in rows], 1)


def diagonal(n: int) -> set[tuple[int, int]]:
    return {(i, i) for i in range(n)}


@pytest.fixture
def vocabs() -> tuple[Vocab, Vocab]:
    return Vocab(WORDS), Vocab([w.upper() for w in WORDS])


@pytest.fixture
def examples() -> list[Example]:
    return [
        Example(["a", "b", "c"], ["A", "B", "C"], diagonal(3), diagonal(3)),  # word by word: AER 0
        Example(["d", "e"], ["E", "D"], {(1, 0), (0, 1)}, {(1, 0), (0, 1)}),  # crossed: model output differs
        Example(["b", "a", "e", "d"], ["B", "A", "E", "D"]),  # no gold links
    ]


@pytest.fixture
def explorer(vocabs, examples) -> AttentionExplorer:
    return AttentionExplorer(ScriptedModel(*vocabs), examples, *vocabs)


# --------------------------------------------------------------------------------------------- loss curves


def test_loss_figure_draws_one_point_per_epoch_on_a_fixed_axis():
    fig = loss_figure([3.0, 2.0], [3.5, 2.5, 1.0][:2], epochs=4, title="training")
    (ax,) = fig.axes
    train_line, val_line = ax.get_lines()
    assert list(train_line.get_xdata()) == [1, 2] and list(train_line.get_ydata()) == [3.0, 2.0]
    assert list(val_line.get_ydata()) == [3.5, 2.5]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "validation"]
    assert ax.get_xlim() == (0.5, 4.5) and ax.get_title() == "training"
    with pytest.raises(ValueError, match=r"train_loss has a non-finite value: \[1.0, nan\]"):
        loss_figure([1.0, float("nan")])
    with pytest.raises(ValueError, match="epochs must be an int >= 1, got 0"):
        loss_figure([1.0], epochs=0)


def test_live_loss_redraws_one_display_in_place_after_every_epoch(monkeypatch):
    import IPython.display

    shown = []

    class Handle:
        def update(self, image):
            shown.append(("update", image))

    def display(image, display_id):
        assert display_id is True
        shown.append(("display", image))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())   # as in a notebook's kernel
    examples = toy_translation(16, min_len=3, max_len=5, seed=0)
    src_vocab, tgt_vocab = Vocab([e.src for e in examples]), Vocab([e.tgt for e in examples])
    loader = bucketed_loader(TranslationDataset(examples, src_vocab, tgt_vocab), 8, seed=0)
    model = build_model("bahdanau", len(src_vocab), len(tgt_vocab), embed_size=4, encoder_hiddens=4)
    live = LiveLoss(epochs=3)
    history = train(model, loader, TrainConfig(epochs=3), val_loader=loader, device="cpu", progress=False,
                    callback=live)
    assert [kind for kind, _ in shown] == ["display", "update", "update"]
    train_line, val_line = live.figure.axes[0].get_lines()
    assert list(train_line.get_ydata()) == history.train_loss
    assert list(val_line.get_ydata()) == history.val_loss
    assert all(isinstance(image, IPython.display.Image) and image.data.startswith(b"\x89PNG")
               for _, image in shown)                      # an image view whatever matplotlib's backend


def test_live_loss_displays_nothing_outside_ipython(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *args, **kwargs: shown.append(args))
    live = LiveLoss()
    fig = live.draw([2.0, 1.0], [2.5, 1.5])
    assert live.figure is fig and shown == []


# --------------------------------------------------------------------------------------------- plot.heatmap


def test_heatmap_labels_axes_with_tokens_and_leaves_no_pyplot_figure_open():
    before = plt.get_fignums()
    fig = heatmap(torch.full((2, 3), 1 / 3), ["x", "y", "<eos>"], ["Y", "<eos>"], title="look here")
    assert isinstance(fig, Figure)
    (ax, *_) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "<eos>"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Y", "<eos>"]
    assert ax.get_title() == "look here"
    assert plt.get_fignums() == before


def test_heatmap_draws_one_box_per_gold_link_and_outlines_the_highlighted_row():
    fig = heatmap(np.eye(3), list("abc"), list("ABC"), gold={(0, 0), (1, 1)}, possible={(1, 1), (2, 1)})
    boxes = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert len(boxes) == 3  # (1, 1) is sure, so drawn once
    styles = sorted(b.get_linestyle() for b in boxes)
    assert styles == ["-", "-", "--"]
    (dashed,) = [b for b in boxes if b.get_linestyle() == "--"]
    assert dashed.get_xy() == pytest.approx((2 - 0.4, 1 - 0.4))  # column = src_index, row = tgt_index
    fig = heatmap(np.eye(3), list("abc"), list("ABC"), highlight_row=2)
    assert fig.axes[0].get_yticklabels()[2].get_fontweight() == "bold"
    assert fig.axes[0].get_yticklabels()[1].get_fontweight() == "normal"


def test_heatmap_draws_on_a_given_axes():
    fig, ax = plt.subplots()
    try:
        assert heatmap(np.eye(2), ["a", "b"], ["A", "B"], ax=ax, colorbar=False) is fig
        assert len(ax.images) == 1
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"src_tokens": ["a", "b"]}, "src_tokens has 2 tokens, expected one per column of weights = 3"),
        ({"tgt_tokens": "A B"}, "tgt_tokens is a string"),
        ({"gold": {(3, 0)}}, "gold contains the link (3, 0), outside"),
        ({"highlight_row": 2}, "highlight_row is 2, expected a row in [0, num_steps) = [0, 2)"),
        ({"weights": np.full((2, 3), np.nan)}, "weights contains NaN or inf"),
        ({"weights": np.ones(3)}, "weights has shape (3,), expected (num_steps, num_keys)"),
    ],
)
def test_heatmap_rejects_bad_input_naming_the_argument(kwargs, message):
    args = {"weights": np.ones((2, 3)) / 3, "src_tokens": ["a", "b", "c"], "tgt_tokens": ["A", "B"], **kwargs}
    with pytest.raises(ValueError) as error:
        heatmap(args.pop("weights"), args.pop("src_tokens"), args.pop("tgt_tokens"), **args)
    assert message in str(error.value)


# --------------------------------------------------------------------------------------------- temperature


def test_temperature_one_gives_the_weights_back():
    weights = torch.softmax(torch.randn(4, 6, dtype=torch.float64), -1)
    torch.testing.assert_close(apply_temperature(weights, 1.0), weights)


def test_lower_temperature_sharpens_keeps_argmax_and_zeros():
    weights = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.8, 0.0]], dtype=torch.float64)
    entropies = []
    for temperature in (10.0, 2.0, 1.0, 0.5, 0.1):
        sharpened = apply_temperature(weights, temperature)
        torch.testing.assert_close(sharpened.sum(-1), torch.ones(2, dtype=torch.float64))
        assert (sharpened[:, 3] == 0).all()
        assert sharpened.argmax(-1).tolist() == [0, 2]
        entropies.append(entropy(sharpened[0]))
    assert all(a > b for a, b in zip(entropies, entropies[1:], strict=False))
    assert entropies[0] < math.log(3)  # never flatter than uniform over the 3 attended positions


def test_temperature_masks_positions_past_valid_len_and_keeps_empty_rows_empty():
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    sharpened = apply_temperature(weights, 0.5, valid_len=2)
    assert sharpened[0].tolist() == [0.5, 0.5, 0.0, 0.0]
    assert sharpened[1].tolist() == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.ones((2, 2)) / 2, 0.0), "temperature must be a finite number > 0, got 0.0"),
        ((np.ones((2, 2)) / 2, math.inf), "temperature must be a finite number > 0, got inf"),
        ((np.ones(2) / 2, 1.0), "weights has shape (2,), expected (num_steps, num_keys)"),
        ((np.ones((2, 2)) / 2, 1.0, 3), "valid_len must be an int in [0, num_keys] = [0, 2], got 3"),
        ((-np.ones((2, 2)), 1.0), "negative"),
    ],
)
def test_temperature_rejects_bad_input(args, message):
    with pytest.raises(ValueError) as error:
        apply_temperature(*args)
    assert message in str(error.value)


# --------------------------------------------------------------------------------------------- explorer


def test_explorer_starts_on_the_first_sentence_at_step_zero(explorer):
    view = explorer.views[0]
    assert explorer.sentence_text.value == "a b c"
    assert view.src_tokens == ["a", "b", "c", "<eos>"]
    assert view.tgt_tokens == ["A", "B", "C", "<eos>"]
    assert (explorer.step_slider.min, explorer.step_slider.max, explorer.step_slider.value) == (0, 3, 0)
    assert (explorer.highlighted_row, explorer.highlighted_token, explorer.argmax_source_word) == (
        0,
        "A",
        "a",
    )
    assert bytes(explorer.image.value).startswith(b"\x89PNG")


def test_step_slider_moves_the_highlighted_row_token_argmax_word_and_picture(explorer):
    seen_images = {bytes(explorer.image.value)}
    for step, (target, source) in enumerate([("A", "a"), ("B", "b"), ("C", "c"), ("<eos>", "<eos>")]):
        explorer.step_slider.value = step
        assert explorer.highlighted_row == step
        assert explorer.highlighted_token == target
        assert explorer.argmax_source_word == source
        assert explorer.argmax_source_index == step
        current = f"class='attn-tok attn-current' data-step='{step}'"
        assert current in explorer.step_html.value
        assert f"class='attn-argmax'>{source.replace('<', '&lt;').replace('>', '&gt;')}</b>" in (
            explorer.step_html.value
        )
        seen_images.add(bytes(explorer.image.value))
    assert len(seen_images) == 4  # the highlight moved in the picture too


def test_dropdown_switches_sentence_and_resets_the_step(explorer, examples):
    explorer.step_slider.value = 2
    explorer.sentence_dropdown.value = 2
    assert explorer.sentence_text.value == "b a e d"
    assert explorer.views[0].tgt_tokens == ["B", "A", "E", "D", "<eos>"]
    assert explorer.step_slider.value == 0 and explorer.step_slider.max == 4
    explorer.step_slider.value = 1
    assert (explorer.highlighted_token, explorer.argmax_source_word) == ("A", "a")


def test_gold_toggle_shows_aer_zero_for_a_perfect_word_by_word_alignment(explorer):
    assert not explorer.gold_toggle.disabled
    assert explorer.aer is None and "tick 'gold alignment'" in explorer.aer_label.value
    explorer.gold_toggle.value = True
    assert explorer.aer == 0.0
    assert "AER 0.00" in explorer.aer_label.value
    assert explorer.views[0].gold == frozenset(diagonal(3))
    explorer.gold_toggle.value = False
    assert explorer.aer is None


def test_gold_needs_the_reference_rows_then_scores_a_crossed_alignment_as_all_wrong(explorer):
    explorer.sentence_dropdown.value = 1  # d e -> E D, but the scripted model outputs D E
    assert explorer.views[0].tgt_tokens == ["D", "E", "<eos>"]
    assert explorer.gold_toggle.disabled
    assert "choose 'reference'" in explorer.aer_label.value
    explorer.mode_buttons.value = "reference"
    assert explorer.views[0].tgt_tokens == ["E", "D", "<eos>"]
    assert explorer.views[0].predicted == ["D", "E", "<eos>"]
    assert "would predict <b>D</b>" in explorer.step_html.value
    explorer.gold_toggle.value = True
    assert explorer.aer == 1.0  # step 0 looks at d, the gold says e: every link is wrong
    explorer.sentence_dropdown.value = 0
    assert explorer.gold_toggle.value and explorer.aer == 0.0


def test_example_without_links_disables_the_gold_toggle(explorer):
    explorer.gold_toggle.value = True
    explorer.sentence_dropdown.value = 2
    assert explorer.gold_toggle.disabled and not explorer.gold_toggle.value
    assert explorer.aer is None
    assert "this example has none" in explorer.aer_label.value


def test_temperature_slider_lowers_the_entropy_of_the_highlighted_row(explorer):
    explorer.step_slider.value = 1
    entropies = []
    for temperature in (10.0, 1.0, 0.3, 0.1):
        explorer.temperature_slider.value = temperature
        entropies.append(explorer.row_entropy)
        assert explorer.argmax_source_word == "b"
    assert all(a > b for a, b in zip(entropies, entropies[1:], strict=False))
    expected = -(PEAK * math.log(PEAK) + 3 * (1 - PEAK) / 3 * math.log((1 - PEAK) / 3))
    assert entropies[1] == pytest.approx(expected)
    assert explorer.shown_weights[0][1, 1] > 0.99  # T = 0.1: nearly one-hot


def test_typed_sentence_shows_unknown_words_as_unk_and_has_no_gold(explorer):
    explorer.mode_buttons.value = "reference"
    explorer.sentence_text.value = "A zorglub, c"
    view = explorer.views[0]
    assert view.src_tokens == ["a", "<unk>", "<unk>", "c", "<eos>"]  # "," is not in the vocabulary either
    assert "zorglub" in explorer.status.value and "&lt;unk&gt;" in explorer.status.value
    assert "decoded greedily instead" in explorer.status.value
    assert explorer.example is None and explorer.gold_toggle.disabled
    assert "only for sentences from the list" in explorer.aer_label.value


def test_beam_mode_uses_beam_search_and_enables_the_beam_slider(explorer):
    assert explorer.beam_slider.disabled
    explorer.mode_buttons.value = "beam"
    assert not explorer.beam_slider.disabled
    assert explorer.views[0].tgt_tokens == ["A", "B", "C", "<eos>"]
    explorer.beam_slider.value = 3
    assert explorer.views[0].tgt_tokens == ["A", "B", "C", "<eos>"]


def test_comparison_shows_both_models_and_scores_both_under_the_chosen_convention(vocabs, examples):
    bahdanau = ScriptedModel(*vocabs)
    luong = ScriptedModel(*vocabs, kind="luong", score="general")
    explorer = AttentionExplorer(bahdanau, examples, *vocabs, compare=luong)
    assert [v.name for v in explorer.views] == ["Bahdanau", "Luong general"]
    assert explorer.step_html.value.count("class='attn-view'") == 2
    explorer.gold_toggle.value = True
    bahdanau_view, luong_view = explorer.views
    assert bahdanau_view.gold == luong_view.gold == frozenset(diagonal(3))
    assert bahdanau_view.aer == luong_view.aer == 0.0
    explorer.convention_dropdown.value = "input"               # step t credited to the word fed
    bahdanau_view, luong_view = explorer.views
    assert bahdanau_view.gold == luong_view.gold == frozenset({(0, 1), (1, 2), (2, 3)})
    assert "Bahdanau: <b>AER 1.00</b>" in explorer.aer_label.value
    assert "Luong general: <b>AER 1.00</b>" in explorer.aer_label.value


def test_explorer_rejects_bad_arguments(vocabs, examples):
    model = ScriptedModel(*vocabs)
    with pytest.raises(ValueError, match="examples is empty"):
        AttentionExplorer(model, [], *vocabs)
    with pytest.raises(ValueError, match="mode is 'sampling', expected one of"):
        AttentionExplorer(model, examples, *vocabs, mode="sampling")
    with pytest.raises(ValueError, match="names has 1 entries, expected one per model = 2"):
        AttentionExplorer(model, examples, *vocabs, compare=model, names=["only one"])
    with pytest.raises(ValueError, match="convention is 'auto', expected one of"):
        AttentionExplorer(model, examples, *vocabs, convention="auto")
    plain = build_model("plain", len(vocabs[0]), len(vocabs[1]), embed_size=4, encoder_hiddens=4)
    with pytest.raises(ValueError, match="model has no attention"):
        AttentionExplorer(plain, examples, *vocabs)


def test_explorer_runs_real_models_in_every_mode():
    examples = toy_translation(12, min_len=3, max_len=6, seed=0)
    src_vocab, tgt_vocab = Vocab([e.src for e in examples]), Vocab([e.tgt for e in examples])
    kwargs = {"embed_size": 8, "encoder_hiddens": 8}
    bahdanau = build_model("bahdanau", len(src_vocab), len(tgt_vocab), **kwargs)
    luong = build_model("luong", len(src_vocab), len(tgt_vocab), score="general", **kwargs)
    explorer = AttentionExplorer(bahdanau, examples[:3], src_vocab, tgt_vocab, compare=luong, max_len=8)
    for mode in ("greedy", "beam", "reference"):
        explorer.mode_buttons.value = mode
        for view in explorer.views:
            assert view.weights.shape == (len(view.tgt_tokens), len(examples[0].src) + 1)
            np.testing.assert_allclose(view.weights.sum(-1), 1.0, rtol=1e-5)
    explorer.gold_toggle.value = True  # reference rows: the toy corpus has gold links
    assert not explorer.gold_toggle.disabled
    assert all(0.0 <= v.aer <= 1.0 for v in explorer.views)
    assert bahdanau.training and luong.training  # decoding left the models' modes alone


def test_explorer_shows_a_transformer_averaged_and_through_one_head():
    from attn_course.models.transformer import HeadView, Transformer, TransformerConfig

    examples = toy_translation(12, min_len=3, max_len=6, seed=0)
    src_vocab, tgt_vocab = Vocab([e.src for e in examples]), Vocab([e.tgt for e in examples])
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), num_hiddens=8, num_heads=2,
                                          ffn_hiddens=16, num_layers=2))
    explorer = AttentionExplorer(model, examples[:3], src_vocab, tgt_vocab, compare=HeadView(model, head=1),
                                 max_len=8, mode="reference")
    assert explorer.names == ["Transformer", "Transformer, layer 1, head 1"]
    example = examples[0]
    src = torch.tensor([src_vocab[example.src] + [src_vocab.eos]])
    tgt_in = torch.tensor([[tgt_vocab.bos, *tgt_vocab[example.tgt]]])
    heads = model.cross_attention(src, torch.tensor([src.shape[1]]), tgt_in)[-1, 0]      # (heads, T, S)
    np.testing.assert_allclose(explorer.views[0].weights, heads.mean(0).double().numpy(), atol=1e-6)
    np.testing.assert_allclose(explorer.views[1].weights, heads[1].double().numpy(), atol=1e-6)
    for mode in ("greedy", "beam"):
        explorer.mode_buttons.value = mode
        first, second = explorer.views
        assert first.tgt_tokens == second.tgt_tokens          # one model: the same translation, two views
        np.testing.assert_allclose(second.weights.sum(-1), 1.0, rtol=1e-5)


# --------------------------------------------------------------------------------------------- playground


def test_playground_scores_follow_each_formula_and_weights_are_their_softmax():
    playground = ScorePlayground(query=(1.0, -0.5))
    keys = torch.tensor(DEFAULT_KEYS, dtype=torch.float64)
    q = torch.tensor([1.0, -0.5], dtype=torch.float64)
    np.testing.assert_allclose(playground.scores["dot"], (keys @ q).numpy())
    np.testing.assert_allclose(playground.scores["scaled dot"], (keys @ q / math.sqrt(2)).numpy())
    np.testing.assert_allclose(playground.scores["general"], (keys @ playground.W_a.T @ q).numpy())
    additive = torch.tanh(q @ playground.W_q.T + keys @ playground.W_k.T) @ playground.w_v[0]
    np.testing.assert_allclose(playground.scores["additive"], additive.numpy())
    for name, scores in playground.scores.items():
        np.testing.assert_allclose(playground.weights[name], torch.softmax(torch.tensor(scores), 0).numpy())


def test_moving_the_query_changes_scores_weights_and_picture():
    playground = ScorePlayground()
    before = {name: w.copy() for name, w in playground.weights.items()}
    image = bytes(playground.image.value)
    playground.query_x.value = -2.0
    assert playground.query.tolist() == [-2.0, 1.0]
    assert all(not np.allclose(before[name], playground.weights[name]) for name in before)
    assert bytes(playground.image.value) != image
    # the query now points left: the dot product prefers the leftmost key k4 over k1
    assert playground.weights["dot"][3] > playground.weights["dot"][0]


def test_mask_toggle_gives_padded_keys_exactly_zero_weight():
    playground = ScorePlayground(valid_len=3)
    assert playground.valid_len_slider.disabled
    assert all((w > 0).all() for w in playground.weights.values())
    playground.mask_toggle.value = True
    assert not playground.valid_len_slider.disabled
    for weights in playground.weights.values():
        assert weights[3] == 0.0 and weights[4] == 0.0
        assert weights[:3].sum() == pytest.approx(1.0)
    assert "k4 (pad)" in playground.table.value
    playground.valid_len_slider.value = 1
    assert all(w.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0] for w in playground.weights.values())
    playground.valid_len_slider.value = 0
    assert all((w == 0).all() for w in playground.weights.values())


def test_playground_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"keys has shape \(3, 3\), expected \(num_keys, 2\)"):
        ScorePlayground(keys=torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"valid_len must be an int in \[0, num_keys\] = \[0, 5\], got 9"):
        ScorePlayground(valid_len=9)
    with pytest.raises(ValueError, match=r"W_a has shape \(3, 3\), expected \(2, 2\)"):
        ScorePlayground(W_a=torch.eye(3))


def test_every_model_is_scored_with_the_output_convention_unless_asked_otherwise(vocabs, examples):
    """Luong's decoder too: the course's Luong models look at the word they predict (AER 0.08-0.14 under
    "output" against 0.89-0.96 under "input" in attn_course/course/results/luong_variants.json)."""
    luong = build_model("luong", len(vocabs[0]), len(vocabs[1]), embed_size=4, encoder_hiddens=4)
    bahdanau = build_model("bahdanau", len(vocabs[0]), len(vocabs[1]), embed_size=4, encoder_hiddens=4)
    shown = AttentionExplorer(luong, examples, *vocabs, compare=bahdanau, mode="reference")
    shown.gold_toggle.value = True
    assert [view.convention for view in shown.views] == ["output", "output"]
    assert shown.views[0].gold == frozenset(examples[0].sure)          # boxes in the rows of the words
    asked = AttentionExplorer(luong, examples, *vocabs, mode="reference", convention="input")
    assert asked.convention_dropdown.value == "input" and asked.views[0].convention == "input"
    assert asked.views[0].gold == frozenset((i, j + 1) for i, j in examples[0].sure)


def test_convention_dropdown_rescores_and_shifts_the_gold_boxes(explorer):
    explorer.gold_toggle.value = True
    assert explorer.views[0].convention == "output" and explorer.aer == 0.0
    explorer.convention_dropdown.value = "input"
    assert explorer.views[0].convention == "input"
    assert explorer.views[0].gold == frozenset({(0, 1), (1, 2), (2, 3)})
    assert explorer.aer == 1.0  # the word-by-word model looks at word t while fed word t - 1
    assert "AER 1.00" in explorer.aer_label.value
    explorer.convention_dropdown.value = "output"
    assert explorer.aer == 0.0


# ------------------------------------------------------------------------------- the sentence's diagnosis
class LazyDecoder(ScriptedDecoder):
    """Translates like ScriptedDecoder but every step attends only to <eos>: a lazy column."""

    def row(self, src: torch.Tensor, valid_lens: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        logits, _ = super().row(src, valid_lens, t)
        return logits, nn.functional.one_hot(valid_lens - 1, src.shape[1]).to(torch.float32)


def test_explorer_shows_each_sentences_entropy_and_concentration_and_flags_a_lazy_model(vocabs, examples):
    lazy = ScriptedModel(*vocabs)
    lazy.decoder = LazyDecoder(*vocabs, "general")
    explorer = AttentionExplorer(ScriptedModel(*vocabs), examples, *vocabs, compare=lazy,
                                 names=["diagonal", "lazy"], mode="reference")
    looking, collapsed = explorer.diagnoses
    # "a b c <eos>", four steps each on its own word with weight PEAK: a quarter of the mass per column
    assert looking.verdict == "looking" and looking.concentration == pytest.approx(0.25)
    row = torch.tensor([PEAK] + [(1 - PEAK) / 3] * 3, dtype=torch.float64)
    assert looking.entropy == pytest.approx(float(-(row * row.log()).sum() / math.log(4)))
    assert collapsed == (0.0, 1.0, "collapsed")
    html = explorer.step_html.value
    assert html.count("class='attn-diagnosis'") == 2 and "concentration 0.25" in html
    assert "data-verdict='collapsed'" in html and html.count("collapsed on one position") == 1
    explorer.temperature_slider.value = 10.0             # flattened towards uniform: the flag follows
    assert explorer.diagnoses[0].verdict == "near-uniform"
    assert "not looking anywhere" in explorer.step_html.value
