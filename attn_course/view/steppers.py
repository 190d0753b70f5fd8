"""Step-through widgets: a trained model decodes one sentence, and the learner moves one step at a time.

- `DecoderStepper(model, sentence, src_vocab, tgt_vocab)`: greedy decoding with a Bahdanau or Luong decoder
  (chapters 4 and 5). Each step shows the query the decoder scores with (Bahdanau's s_{t-1}, the state
  before the step; Luong's h_t, the state after it), the score of every source word, the masked weights
  (padding gets exactly 0), the context vector, and the word the step chooses.
- `BeamStepper(model, sentence, src_vocab, tgt_vocab, beam_size=2)`: beam search (chapter 6). Each step
  shows the live beams with their log-probabilities, the 2K best continuations and what becomes of each
  (kept as a beam, finished at <eos>, or pruned), and, at the last step, the length-normalised final choice.

Neither widget decodes by itself: both read the records of the package's own searches,
`attn_course.models.decoding.greedy_steps` and `beam_steps`, which `greedy_decode` and `beam_search` run to
the end. So what a widget shows at step t is what the package computed at step t; `stepper.record(t)` gives
it as a value for code and tests. The decoder's scores and context at a step are its attention layer's, on
the step's own query and memory.

Both show their view as the value of an `ipywidgets.HTML` (`stepper.view`), moved by the "◀ back" and
"next ▶" buttons (or `stepper.next()`, `stepper.back()`, `stepper.go(t)`). Display one by making it the last
expression of a cell.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import torch
from torch import Tensor

from attn_course.models.decoders import BahdanauDecoder, LuongDecoder, top_layer
from attn_course.models.decoding import (
    BeamStep,
    Candidate,
    GreedyStep,
    beam_steps,
    best_candidate,
    greedy_steps,
)
from attn_course.models.modes import eval_mode
from attn_course.validation import check_int

#: Background of the weights' cells: red, as opaque as the weight is large (the explorer's shading); the
#: strips of the query and the context use it for numbers above 0, NEGATIVE_RGB (blue) for those below.
WEIGHT_RGB = "214,39,40"
NEGATIVE_RGB = "31,119,180"
#: The tables' spacing, for both steppers' views.
STYLE = ("<style>.attn-stepper table { border-collapse: collapse; margin: 4px 0 }"
         " .attn-stepper td, .attn-stepper th { padding: 2px 5px; white-space: nowrap; text-align: left }"
         "</style>")
#: The colour of a beam step's continuation by what becomes of it.
STATUS_COLOURS = {"kept": "#2ca02c", "finished": "#1f77b4", "pruned": "#999999"}


def _source_tokens(sentence: str | Sequence[str]) -> list[str]:
    """The sentence as tokens: a str is split on whitespace; a list of str is taken as it is."""
    tokens = sentence.split() if isinstance(sentence, str) else sentence
    if isinstance(tokens, Sequence) and tokens and all(isinstance(t, str) for t in tokens):
        return list(tokens)
    raise ValueError(f"sentence is {sentence!r}, expected a non-empty str or list of str tokens")


def _check_vocabs(model: torch.nn.Module, src_vocab, tgt_vocab) -> None:
    """Raise ValueError unless both vocabularies are Vocab-like and the target one fits the decoder."""
    for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        if not all(hasattr(vocab, attr) for attr in ("to_tokens", "eos", "bos", "pad", "unk")):
            raise ValueError(f"{name} is a {type(vocab).__name__}, expected an attn_course.data.tasks.Vocab")
    if len(tgt_vocab) != model.decoder.vocab_size:
        raise ValueError(f"tgt_vocab has {len(tgt_vocab)} tokens, expected the decoder's vocab_size = "
                         f"{model.decoder.vocab_size} (the vocabulary the model was trained with)")


def _encode(tokens: list[str], src_vocab, pad: int, device: torch.device) -> tuple[Tensor, Tensor, list[str]]:
    """src (1, S + pad) with <eos> then `pad` <pad> tokens, its valid length (1,), and the column labels."""
    ids = src_vocab[tokens] + [src_vocab.eos]
    labels = [t if i != src_vocab.unk else "<unk>" for t, i in zip(tokens, ids, strict=False)]
    labels += [src_vocab.to_tokens(src_vocab.eos)] + [src_vocab.to_tokens(src_vocab.pad)] * pad
    src = torch.tensor([ids + [src_vocab.pad] * pad], device=device)
    return src, torch.tensor([len(ids)], device=device), labels


def _device(model: torch.nn.Module) -> torch.device:
    """The device of the model's parameters, where its input must be."""
    return next(model.parameters()).device


class _Stepper:
    """Back and next buttons, a step readout and an HTML view over `num_steps` precomputed steps."""

    def __init__(self, num_steps: int) -> None:
        self.num_steps = num_steps
        self.back_button = widgets.Button(description="◀ back", tooltip="the step before")
        self.next_button = widgets.Button(description="next ▶", tooltip="the step after")
        self.readout = widgets.HTML()
        self.view = widgets.HTML()
        self.back_button.on_click(lambda _: self.back())
        self.next_button.on_click(lambda _: self.next())
        self.widget = widgets.VBox([widgets.HBox([self.back_button, self.next_button, self.readout]),
                                    self.view])
        self.step = 0
        self.go(0)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def go(self, step: int) -> None:
        """Show step `step` (0 for the first, num_steps - 1 for the last) and set the buttons."""
        self.step = check_int("step", step, low=0, high=self.num_steps - 1, high_name="num_steps - 1")
        self.back_button.disabled = self.step == 0
        self.next_button.disabled = self.step == self.num_steps - 1
        self.readout.value = (f"<span class='attn-readout' data-step='{self.step}'>step <b>{self.step + 1}"
                              f"</b> of {self.num_steps}</span>")
        self.view.value = self._html(self.step)

    def next(self) -> None:
        """One step forward; at the last step, nothing changes."""
        self.go(min(self.step + 1, self.num_steps - 1))

    def back(self) -> None:
        """One step back; at the first step, nothing changes."""
        self.go(max(self.step - 1, 0))

    def _html(self, step: int) -> str:
        """The view of step `step`, as HTML (each stepper writes its own)."""
        raise NotImplementedError


def _tokens_html(tokens: Sequence[str], css: str = "attn-tok") -> str:
    """Tokens as escaped <span>s of class `css`, separated by spaces."""
    return " ".join(f"<span class='{css}'>{html.escape(t)}</span>" for t in tokens)


def _vector_html(name: str, vector: Tensor) -> str:
    """A vector as a strip of cells, blue below 0 and red above, each cell's title its value."""
    values = vector.detach().double().cpu()
    top = float(values.abs().max()) or 1.0
    cells = "".join(  # one 3-pixel cell per number
        f"<span title='{v:+.3f}' style='display:inline-block;width:3px;height:14px;background:"
        f"rgba({WEIGHT_RGB if v > 0 else NEGATIVE_RGB},{abs(v) / top:.2f})'></span>" for v in values.tolist())
    size = f"{values.numel()} numbers, norm {float(values.norm()):.2f}"
    return (f"<div class='attn-vector' data-name='{html.escape(name)}'>{name}: "
            f"<span style='border:1px solid #ccc;display:inline-block;line-height:0'>{cells}</span> "
            f"<span style='font-size:11px'>{size}</span></div>")


@dataclass(frozen=True)
class DecoderStep:
    """What one step of greedy decoding computed, for one sentence (S source positions, padding included).

    t: the step, from 0 (the paper's step t + 1). fed: the word fed, y_{t-1} (<bos> first).
    query_name: "s_{t-1}" (Bahdanau: the state before the step) or "h_t" (Luong: the state after the RNN).
    query: (num_hiddens,) the state the scores are computed from.
    scores: (S,) the attention layer's scores before masking (divided by its temperature, if any).
    masked: (S,) bool, the positions left out of the softmax: padding, and for local attention the
        positions outside the window [p_t - D, p_t + D]. Their weight is exactly 0.
    weights: (S,) the step's attention weights, as the search computed them.
    context: (enc_size,) the context vector, the weights applied to the encoder's annotations.
    centre: local attention's window centre p_t, or None for global attention.
    token, word, probability: the word the step chooses (the argmax), its id and p(word | y_<t, x).
    runners_up: the next most likely words, (word, probability), best first.
    target: the words chosen before this step.
    """

    t: int
    fed: str
    query_name: str
    query: Tensor
    scores: Tensor
    masked: Tensor
    weights: Tensor
    context: Tensor
    centre: float | None
    token: int
    word: str
    probability: float
    runners_up: tuple[tuple[str, float], ...]
    target: tuple[str, ...]


def _attention_decoder(model: torch.nn.Module) -> BahdanauDecoder | LuongDecoder:
    """The model's decoder, checked to be Bahdanau's or Luong's (the decoders with a query to show)."""
    decoder = getattr(model, "decoder", None)
    if not isinstance(model, torch.nn.Module) or not isinstance(decoder, (BahdanauDecoder, LuongDecoder)):
        kind = type(decoder).__name__ if decoder is not None else type(model).__name__
        raise ValueError(f"model has a {kind}, expected a Seq2Seq with a BahdanauDecoder or a LuongDecoder "
                         "(attn_course.models.seq2seq.build_model('bahdanau' or 'luong', ...))")
    return decoder


def _replay_attention(decoder: BahdanauDecoder | LuongDecoder, step: GreedyStep
                      ) -> tuple[str, Tensor, Tensor, Tensor, Tensor | None]:
    """The query, scores, context and window centre of a one-sentence step, from the decoder's own layers.

    Bahdanau's step attends with s_{t-1}, the state before it (`BahdanauDecoder._recur`); Luong's with h_t,
    the top layer of the state after its RNN (`LuongDecoder._step`). Returns query_name, query (1, 1, H),
    scores (S,), context (enc_size,) and the centre p_t (1, 1) or None.
    """
    memory = step.state.memory
    if isinstance(decoder, BahdanauDecoder):
        name, query = "s_{t-1}", top_layer(step.state.hidden)[:, None]
        context, _ = decoder.attention.attend(query, memory)
        centre = None
    else:
        name, query = "h_t", top_layer(step.next_state.hidden)[:, None]
        context, _ = decoder.align(query, memory, step.state.step)
        centre = None if decoder.alignment == "global" else decoder.centres(query, step.state.step,
                                                                            memory.valid_lens)
    scores = decoder.attention.scores(query, memory)
    return name, query, scores[0, 0], context[0, 0], centre


def _masked(decoder: BahdanauDecoder | LuongDecoder, num_keys: int, valid_len: int,
            centre: Tensor | None) -> Tensor:
    """(num_keys,) bool: the positions the softmax leaves out (`LuongDecoder.align`'s window rule)."""
    positions = torch.arange(num_keys, dtype=torch.float64)
    masked = positions >= valid_len
    if centre is not None:
        masked |= (positions - float(centre[0, 0])).abs() > decoder.window
    return masked


def decoder_steps(model: torch.nn.Module, src: Tensor, src_valid_lens: Tensor, tgt_vocab, *,
                  max_len: int | None = None) -> list[DecoderStep]:
    """Every step of `greedy_steps` on one sentence, as DecoderStep records.

    src: (1, S) long; src_valid_lens: (1,) long; tgt_vocab: the target Vocab; max_len as greedy_decode's.
    """
    decoder = _attention_decoder(model)
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"src has shape {tuple(src.shape)}, expected (1, S): one sentence")
    records: list[DecoderStep] = []
    with torch.no_grad(), eval_mode(model):
        for step in greedy_steps(model, src, src_valid_lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos,
                                 max_len=max_len):
            records.append(_decoder_record(decoder, step, tgt_vocab, int(src_valid_lens[0]), records))
    return records


def _decoder_record(decoder: BahdanauDecoder | LuongDecoder, step: GreedyStep, tgt_vocab, valid_len: int,
                    before: list[DecoderStep]) -> DecoderStep:
    """One GreedyStep of a one-sentence batch as a DecoderStep; `before`: the records of earlier steps."""
    name, query, scores, context, centre = _replay_attention(decoder, step)
    weights = step.weights[0].float().cpu()
    probabilities = step.log_probs[0].exp().cpu()
    best = probabilities.topk(min(3, probabilities.numel()))
    words = tgt_vocab.to_tokens(best.indices.tolist())
    return DecoderStep(
        t=step.t, fed=tgt_vocab.to_tokens(int(step.fed[0])), query_name=name, query=query[0, 0].cpu(),
        scores=scores.cpu(), masked=_masked(decoder, weights.numel(), valid_len, centre), weights=weights,
        context=context.cpu(), centre=None if centre is None else float(centre[0, 0]),
        token=int(step.tokens[0]), word=tgt_vocab.to_tokens(int(step.tokens[0])),
        probability=float(probabilities[step.tokens[0]]),
        runners_up=tuple((w, float(p)) for w, p in zip(words[1:], best.values[1:].tolist(), strict=True)),
        target=tuple(r.word for r in before),
    )


class DecoderStepper(_Stepper):
    """Step through greedy decoding of one sentence by a Bahdanau or Luong model, one decoder step a click.

    model: a Seq2Seq with a BahdanauDecoder (chapter 4) or a LuongDecoder (chapter 5), trained or not.
    sentence: the source, a str (split on whitespace) or a list of tokens; unknown words become <unk>.
    src_vocab, tgt_vocab: the vocabularies the model was trained with.
    pad: how many <pad> positions follow the sentence's <eos>, as in a batch with a longer sentence
        (default 2), so the masking can be seen: their weight is exactly 0.
    max_len: the most target tokens, <eos> included (default greedy_decode's, 2 S_i + 10).

    The steps are `attn_course.models.decoding.greedy_steps`'s, computed once when the stepper is built;
    `record(t)` is step t's DecoderStep. Widgets: `back_button`, `next_button`, `readout`, `view` (the
    step as HTML: the source and target so far, a table of the scores and weights, the query and context
    as strips of numbers, the word chosen); the layout is `widget`. `step` is the step shown.
    """

    def __init__(self, model: torch.nn.Module, sentence: str | Sequence[str], src_vocab, tgt_vocab, *,
                 pad: int = 2, max_len: int | None = None) -> None:
        self.decoder = _attention_decoder(model)
        _check_vocabs(model, src_vocab, tgt_vocab)
        check_int("pad", pad, low=0)                 # <pad> positions after the sentence
        src, lens, self.source = _encode(_source_tokens(sentence), src_vocab, pad, _device(model))
        self.valid_len = int(lens[0])
        self.records = tuple(decoder_steps(model, src, lens, tgt_vocab, max_len=max_len))
        self.kind = "Bahdanau" if isinstance(self.decoder, BahdanauDecoder) else "Luong"
        super().__init__(len(self.records))

    def record(self, t: int) -> DecoderStep:
        """What step t (0 for the first) computed."""
        return self.records[check_int("t", t, low=0, high=self.num_steps - 1, high_name="num_steps - 1")]

    @property
    def output(self) -> list[str]:
        """The whole greedy translation: every step's word (the last is <eos> when the sentence finished)."""
        return [r.word for r in self.records]

    def _html(self, step: int) -> str:
        """Step `step`: source, target so far, the query, the table of scores and weights, the word chosen."""
        r, i = self.records[step], step + 1                  # i: the step as the papers count, from 1
        target = _tokens_html(r.target) + " <span class='attn-next' style='color:#b00'>▮</span>"
        if self.kind == "Bahdanau":
            symbols, query = ("e<sub>tj</sub>", "α<sub>tj</sub>"), f"s<sub>{i - 1}</sub>"
            when = ("s<sub>t−1</sub>, the decoder state <i>before</i> this step: Bahdanau looks first, then "
                    "reads the fed word")
        else:
            symbols, query = ("score(h<sub>t</sub>, h̄<sub>s</sub>)", "a<sub>t</sub>(s)"), f"h<sub>{i}</sub>"
            when = ("h<sub>t</sub>, the RNN's state <i>after</i> reading the fed word: Luong reads first, "
                    "then looks")
        window = ("" if r.centre is None else
                  f"; window centre p<sub>t</sub> = {r.centre:.2f}, half-width D = {self.decoder.window}")
        return (
            f"{STYLE}<div class='attn-stepper' data-step='{step}' style='font-size:13px'>"
            f"<div>source: {_tokens_html(self.source, 'attn-src')}</div>"
            f"<div>target so far: {target}</div>"
            f"<div style='margin-top:4px'>step t = {i}: fed y<sub>{i - 1}</sub> = "
            f"<b>{html.escape(r.fed)}</b>; query <b class='attn-query'>{query}</b> = {when}{window}.</div>"
            f"{self._table_html(r, symbols)}"
            f"{_vector_html(f'query {query}', r.query)}"
            f"{_vector_html(f'context c<sub>{i}</sub> = Σ weight × annotation', r.context)}"
            f"{_output_html(r, i)}</div>"
        )

    def _table_html(self, r: DecoderStep, symbols: tuple[str, str]) -> str:
        """Source words, their scores and weights, one column per source position; masked ones greyed."""
        head, scores, weights = [], [], []
        for j, (word, score, weight, masked) in enumerate(
                zip(self.source, r.scores.tolist(), r.weights.tolist(), r.masked.tolist(), strict=True)):
            grey = "color:#999;" if masked else ""
            head.append(f"<th style='{grey}text-align:right'>{html.escape(word)}</th>")
            shown = f"<s>{score:+.2f}</s>" if masked else f"{score:+.2f}"
            scores.append(f"<td class='attn-score' data-j='{j}' data-score='{score:.6g}' data-masked="
                          f"'{int(masked)}' style='{grey}text-align:right'>{shown}</td>")
            shade = f"background:rgba({WEIGHT_RGB},{weight:.3f})"
            weights.append(f"<td class='attn-weight' data-j='{j}' data-weight='{weight:.6f}' style='"
                           f"{grey}{shade};text-align:right'>{weight:.2f}</td>")
        why = "padding" if r.centre is None else "padding, or outside the window"
        return (f"<div style='overflow-x:auto'><table class='attn-step-table'>"
                f"<tr><th></th>{''.join(head)}</tr>"
                f"<tr><th>score {symbols[0]}</th>{''.join(scores)}</tr>"
                f"<tr><th>weight {symbols[1]}</th>{''.join(weights)}</tr></table></div>"
                f"<div style='font-size:11px;color:#666'>Struck-out scores are masked ({why}): the softmax "
                "sees −∞ there, so their weight is exactly 0.</div>")


def _output_html(r: DecoderStep, i: int) -> str:
    """The word the step chooses, y_i, its probability and the runners-up."""
    others = ", ".join(f"{html.escape(w)} {p:.2f}" for w, p in r.runners_up)
    return (f"<div class='attn-output' style='margin-top:4px'>chosen word y<sub>{i}</sub> (greedy: the most "
            "likely): "
            f"<b class='attn-word' data-token='{r.token}'>{html.escape(r.word)}</b> "
            f"p = {r.probability:.2f} <span style='color:#666'>(runners-up: {others})</span></div>")


@dataclass(frozen=True)
class BeamOption:
    """One of a beam step's 2K best continuations: the beam it extends, the token, and what becomes of it.

    rank: its place among the continuations (0 best). beam: the live beam k it extends; prefix: that beam's
    words. word, token: what it appends. score: log P of prefix + word. normalised: score / lp(t + 1).
    status: "kept" (a live beam of the next step, number `next_beam`), "finished" (it ends in <eos> among
    the K best: set aside) or "pruned" (dropped).
    """

    rank: int
    beam: int
    prefix: tuple[str, ...]
    word: str
    token: int
    score: float
    normalised: float
    status: str
    next_beam: int | None


@dataclass(frozen=True)
class BeamHypothesis:
    """A hypothesis set aside: its words (without <eos>), log P, length L (<eos> counted when finished),
    log P / lp(L), whether it ended with <eos> (False: cut at max_len), and the step (from 0) that set it
    aside."""

    words: tuple[str, ...]
    score: float
    length: int
    normalised: float
    finished: bool
    step: int


@dataclass(frozen=True)
class BeamRecord:
    """What one step of beam search did, for one sentence.

    t: the step, from 0; the candidates have L = t + 1 tokens. penalty: lp(L).
    beams: the live beams the step extends, (words, log P), one per row k (log P -inf: a row not in use).
    options: the 2K best continuations, best first (BeamOption). set_aside: the hypotheses set aside at
    this step. raw: the package's BeamStep record itself.
    """

    t: int
    penalty: float
    beams: tuple[tuple[tuple[str, ...], float], ...]
    options: tuple[BeamOption, ...]
    set_aside: tuple[BeamHypothesis, ...]
    raw: BeamStep


def beam_records(model: torch.nn.Module, src: Tensor, src_valid_lens: Tensor, tgt_vocab, *, beam_size: int,
                 length_penalty_alpha: float, length_norm: str,
                 max_len: int | None = None) -> tuple[list[BeamRecord], Candidate]:
    """Every step of `beam_steps` on one sentence as BeamRecords, and the Candidate beam_search returns.

    src: (1, S) long; src_valid_lens: (1,) long; the other arguments as beam_search's.
    """
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"src has shape {tuple(src.shape)}, expected (1, S): one sentence")
    steps = list(beam_steps(model, src, src_valid_lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos,
                            max_len=max_len, beam_size=beam_size, length_penalty_alpha=length_penalty_alpha,
                            length_norm=length_norm))
    candidates = [c for step in steps for _, c in step.finished]
    return [_beam_record(step, tgt_vocab) for step in steps], best_candidate(candidates)


def _beam_record(step: BeamStep, tgt_vocab) -> BeamRecord:
    """A one-sentence BeamStep as a BeamRecord: tokens as words, every continuation's status."""
    prefixes = [tuple(tgt_vocab.to_tokens(row)) for row in step.prefixes.tolist()]
    beams = tuple(zip(prefixes, step.prefix_scores[0].tolist(), strict=True))
    kept = step.kept[0].tolist()
    options = []
    for rank, (score, beam, token, finishing) in enumerate(zip(
            step.candidate_scores[0].tolist(), step.candidate_beams[0].tolist(),
            step.candidate_tokens[0].tolist(), step.finishing[0].tolist(), strict=True)):
        status = "finished" if finishing else "kept" if rank in kept else "pruned"
        next_beam = kept.index(rank) if status == "kept" else None
        options.append(BeamOption(rank, beam, prefixes[beam], tgt_vocab.to_tokens(token), token, score,
                                  score / step.penalty, status, next_beam))
    set_aside = tuple(BeamHypothesis(tuple(tgt_vocab.to_tokens(c.tokens)), c.score,
                                     len(c.tokens) + c.finished, c.normalised, c.finished, step.t)
                      for _, c in step.finished)
    return BeamRecord(step.t, step.penalty, beams, tuple(options), set_aside, step)


class BeamStepper(_Stepper):
    """Step through beam search on one sentence, one step a click: beams, candidates, pruning, final choice.

    model: a trained Seq2Seq (any decoder). sentence: a str or a list of tokens. src_vocab, tgt_vocab: the
    model's vocabularies. beam_size: K (default 2: 2K = 4 candidates a step, readable at a glance).
    length_penalty_alpha, length_norm, max_len: as `attn_course.models.decoding.beam_search`'s.

    The steps are `attn_course.models.decoding.beam_steps`'s; `record(t)` is step t's BeamRecord, `final`
    the Candidate `beam_search` returns (best log P / lp(L) among the hypotheses set aside), `hypotheses`
    every hypothesis set aside (BeamHypothesis). Widgets as DecoderStepper's.
    """

    def __init__(self, model: torch.nn.Module, sentence: str | Sequence[str], src_vocab, tgt_vocab, *,
                 beam_size: int = 2, length_penalty_alpha: float = 0.75, length_norm: str = "power",
                 max_len: int | None = None) -> None:
        if not isinstance(model, torch.nn.Module) or not hasattr(model, "decoder"):
            raise ValueError(f"model is a {type(model).__name__}, expected a Seq2Seq model")
        _check_vocabs(model, src_vocab, tgt_vocab)
        check_int("beam_size", beam_size, low=1, high=16)
        src, lens, self.source = _encode(_source_tokens(sentence), src_vocab, 0, _device(model))
        self.beam_size, self.alpha, self.length_norm = beam_size, length_penalty_alpha, length_norm
        records, self.final = beam_records(
            model, src, lens, tgt_vocab, beam_size=beam_size, length_penalty_alpha=length_penalty_alpha,
            length_norm=length_norm, max_len=max_len)
        self.records = tuple(records)
        self.final_words = tuple(tgt_vocab.to_tokens(self.final.tokens))
        self.hypotheses = tuple(h for r in self.records for h in r.set_aside)
        candidates = [c for r in self.records for _, c in r.raw.finished]
        #: which of `hypotheses` is the final choice (the same Candidate object)
        self.final_index = next(i for i, c in enumerate(candidates) if c is self.final)
        super().__init__(len(self.records))

    def record(self, t: int) -> BeamRecord:
        """What step t (0 for the first) did."""
        return self.records[check_int("t", t, low=0, high=self.num_steps - 1, high_name="num_steps - 1")]

    def _html(self, step: int) -> str:
        """Step `step`: the live beams, the continuations and their fate, the hypotheses set aside."""
        r = self.records[step]
        lp = (f"L<sup>α</sup> = {r.t + 1}<sup>{self.alpha:g}</sup>" if self.length_norm == "power"
              else f"((5 + L) / 6)<sup>α</sup> = ((5 + {r.t + 1}) / 6)<sup>{self.alpha:g}</sup>")
        last = step == self.num_steps - 1
        return (
            f"{STYLE}<div class='attn-stepper attn-beam-stepper' data-step='{step}' style='font-size:13px'>"
            f"<div>source: {_tokens_html(self.source, 'attn-src')}</div>"
            f"<div style='margin-top:4px'>step {step + 1}: every live beam is extended by every word; the "
            f"{len(r.options)} best continuations, of length L = {r.t + 1}; lp(L) = {lp} = {r.penalty:.2f}"
            f"</div>{_beams_html(r)}{_options_html(r, self.beam_size, last)}"
            f"{_hypotheses_html(self.hypotheses, step, self.final_index if last else None)}"
            + (_final_html(self.final, self.final_words, self.alpha, self.length_norm) if last else "")
            + "</div>"
        )


def _words(words: Sequence[str]) -> str:
    """A hypothesis' words as escaped text, or "(empty)"."""
    return html.escape(" ".join(words)) if words else "<i>(empty)</i>"


def _beams_html(r: BeamRecord) -> str:
    """The live beams the step extends, with their log P; a row not in use yet says so."""
    rows = "".join(
        f"<tr class='attn-beam' data-k='{k}'><td>{k}</td><td>&lt;bos&gt; {_words(words)}</td>"
        f"<td style='text-align:right'>{score:.3f}</td></tr>" if score != float("-inf") else
        f"<tr class='attn-beam' data-k='{k}' style='color:#999'><td>{k}</td><td colspan=2>not in use yet "
        "(all beams start as &lt;bos&gt;: only beam 0 is extended)</td></tr>"
        for k, (words, score) in enumerate(r.beams))
    return ("<div style='margin-top:4px'><b>live beams</b></div><table style='border-collapse:collapse'>"
            f"<tr><th>k</th><th>prefix</th><th>log P</th></tr>{rows}</table>")


def _options_html(r: BeamRecord, K: int, last: bool) -> str:
    """The step's continuations, best first, and what becomes of each; `last`: the search stops after it."""
    rows = []
    for o in r.options:
        kept = "kept, but the search stops here" if last else f"kept: beam {o.next_beam} of the next step"
        what = {"kept": kept,
                "finished": "finished: set aside (&lt;eos&gt; among the K best)",
                "pruned": "pruned"}[o.status]
        style = f"color:{STATUS_COLOURS[o.status]}"
        if o.status == "pruned":
            style += ";text-decoration:line-through"
        rows.append(
            f"<tr class='attn-candidate' data-rank='{o.rank}' data-status='{o.status}' style='{style}'>"
            f"<td>{o.rank + 1}</td><td>beam {o.beam}: {_words(o.prefix)}</td><td><b>{html.escape(o.word)}"
            f"</b></td><td style='text-align:right' data-score='{o.score:.6f}'>{o.score:.3f}</td>"
            f"<td style='text-align:right'>{o.normalised:.3f}</td><td>{what}</td></tr>")
    return (f"<div style='margin-top:4px'><b>the {len(r.options)} best continuations</b> (2K, K = {K}): "
            "the K best not ending in &lt;eos&gt; become the beams</div>"
            "<table class='attn-candidates' style='border-collapse:collapse'><tr><th>rank</th><th>extends"
            "</th><th>+ word</th><th>log P</th><th>log P / lp(L)</th><th>what happens</th></tr>"
            f"{''.join(rows)}</table>")


def _hypotheses_html(hypotheses: Sequence[BeamHypothesis], step: int, best: int | None) -> str:
    """The hypotheses set aside up to `step`; `best`: the index of the final choice, bold (None: none)."""
    shown = [h for h in hypotheses if h.step <= step]
    if not shown:
        return "<div style='margin-top:4px;color:#666'>no hypothesis has finished yet</div>"
    rows = "".join(
        f"<tr class='attn-hypothesis' {'data-final=1 style=font-weight:bold' if i == best else ''}>"
        f"<td>{_words(h.words)}{'' if h.finished else ' <i>(cut at max_len)</i>'}</td><td>{h.length}</td>"
        f"<td style='text-align:right'>{h.score:.3f}</td><td style='text-align:right'>{h.normalised:.3f}</td>"
        f"<td>step {h.step + 1}</td></tr>" for i, h in enumerate(shown))
    return ("<div style='margin-top:4px'><b>set aside so far</b></div>"
            "<table style='border-collapse:collapse'><tr><th>hypothesis</th><th>L</th><th>log P</th>"
            "<th>log P / lp(L)</th><th>at</th></tr>"
            f"{rows}</table>")


def _final_html(final: Candidate, words: Sequence[str], alpha: float, norm: str) -> str:
    """The final choice: the hypothesis with the best log P / lp(L), and the penalty that ranked it."""
    lp = "L^α" if norm == "power" else "((5 + L) / 6)^α"
    return (f"<div class='attn-final' style='margin-top:6px'>The search ends here. Final choice, the best "
            f"log P / lp(L) with lp(L) = {lp}, α = {alpha:g}: "
            f"<b class='attn-final-words'>{_words(words)}</b> "
            f"(log P {final.score:.3f}, normalised {final.normalised:.3f}).</div>")


__all__ = ["BeamHypothesis", "BeamOption", "BeamRecord", "BeamStepper", "DecoderStep", "DecoderStepper",
           "beam_records", "decoder_steps"]
