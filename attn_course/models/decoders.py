"""Decoders that share one interface: no attention (the bottleneck), Bahdanau's, and Luong's.

Every decoder offers

    logits, attention = decoder(tgt_in, enc)           # teacher forcing over all target steps
    state = decoder.init_state(enc)                    # before the first inference step
    logits, state, weights = decoder.step(y_prev, state)

with tgt_in (batch_size, T) long, logits (batch_size, T, vocab_size), attention (batch_size, T, S) — row t
is the attention of the step fed y_{t-1} that predicts y_t — or None for the PlainDecoder. The encoder's
annotations are projected once per batch (`attention.prepare` in `init_state`); each step only attends.
Each decoder writes its equations once, in `_step`. `Decoder.forward` runs `step` at every target step; a
decoder's own forward runs the same pieces over all steps at once where they need not wait for each other
(the plain decoder, Bahdanau's output layer, Luong's without input feeding). `fast_scores=True` (decoding,
evaluation) prepares the memory for the additive scores of `attn_course.attention.fast`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attn_course.attention.layers import AdditiveAttention, LuongAttention, Memory
from attn_course.attention.masking import softmax_excluding
from attn_course.models.encoders import CELLS, EncoderOutput, RNNState
from attn_course.validation import (
    check_number,
    check_positive_int,
    check_probability,
    check_shape,
    check_tokens,
)

LUONG_ALIGNMENTS = ("global", "local-m", "local-p")


class DecoderState(NamedTuple):
    """Everything a decoder carries from one step to the next; a plain value, never stored on the module.

    hidden:         (num_layers, batch_size, num_hiddens), or the pair (h, c) for an LSTM.
    memory:         the prepared attention memory of the source batch (None for the PlainDecoder).
    feed:           PlainDecoder: the fixed context c (batch_size, num_hiddens); LuongDecoder with input
                    feeding: the previous attentional state h̃_{t-1} (batch_size, num_hiddens); else None.
    step:           how many steps were taken (t of the next step, 0-based; local-m's p_t = t).
    src_valid_lens: (batch_size,) long, real source positions of each sentence.
    """

    hidden: RNNState
    memory: Memory | None
    feed: Tensor | None
    step: int
    src_valid_lens: Tensor

    def index_select(self, index: Tensor) -> DecoderState:
        """Keep, repeat or reorder the sentences ``index`` (n,) long: for beams and finished sentences.

        Each memory field is copied, keys that are also the values too
        (`attn_course.attention.fast.index_select` copies a shared tensor once).
        """
        hidden = (tuple(h.index_select(1, index) for h in self.hidden) if isinstance(self.hidden, tuple)
                  else self.hidden.index_select(1, index))
        memory = None if self.memory is None else type(self.memory)(
            *(f.index_select(0, index) if isinstance(f, Tensor) else f for f in self.memory))
        feed = None if self.feed is None else self.feed.index_select(0, index)
        return DecoderState(hidden, memory, feed, self.step, self.src_valid_lens.index_select(0, index))


def _temperature(value: float | None) -> float | None:
    """attention_temperature tau, checked: None (scores as they are) or a number > 0 dividing the scores."""
    return None if value is None else check_number("attention_temperature", value, low=0, low_open=True)


def _attention_dropout(value: float) -> float:
    """attention_dropout p, checked: a probability in [0, 1) of dropping each attention weight."""
    return check_probability("attention_dropout", value, allow_one=False)


def top_layer(hidden: RNNState) -> Tensor:
    """The top layer's hidden state (batch_size, num_hiddens) of a GRU state or an LSTM (h, c) pair."""
    return (hidden[0] if isinstance(hidden, tuple) else hidden)[-1]


class Decoder(nn.Module, ABC):
    """What all decoders share: embedding, GRU/LSTM, sizes, checks, and a step loop for teacher forcing."""

    has_attention = True

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int, *,
                 enc_size: int, rnn_input_size: int, cell: str, dropout: float, pad: int):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell={cell!r}, expected one of {sorted(CELLS)}")
        for name, value in [("vocab_size", vocab_size), ("embed_size", embed_size),
                            ("num_hiddens", num_hiddens), ("num_layers", num_layers), ("enc_size", enc_size)]:
            check_positive_int(name, value)
        check_probability("dropout", dropout, allow_one=False)
        self.vocab_size, self.embed_size, self.num_hiddens = vocab_size, embed_size, num_hiddens
        self.num_layers, self.enc_size, self.cell, self.pad = num_layers, enc_size, cell, pad
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad)
        self.dropout = nn.Dropout(dropout)
        self.rnn = CELLS[cell](rnn_input_size, num_hiddens, num_layers, batch_first=True,
                               dropout=dropout if num_layers > 1 else 0.0)

    def _check_enc(self, enc: EncoderOutput) -> None:
        """Raise ValueError unless ``enc`` fits this decoder (feature sizes, layers, cell)."""
        outputs, state, valid_lens = enc
        batch_size = outputs.shape[0]
        check_shape("enc.outputs", outputs, {"batch_size": None, "S": None, "enc_size": self.enc_size})
        if isinstance(state, tuple) != (self.cell == "lstm"):
            kind = "an LSTM (h, c) pair" if isinstance(state, tuple) else "a tensor"
            raise ValueError(f"enc.state is {kind}, expected the state of a {self.cell.upper()} decoder")
        for h in state if isinstance(state, tuple) else (state,):
            sizes = {"num_layers": self.num_layers, "batch_size": batch_size, "num_hiddens": self.num_hiddens}
            check_shape("enc.state", h, sizes)
        check_shape("enc.valid_lens", valid_lens, {"batch_size": batch_size})

    @abstractmethod
    def init_state(self, enc: EncoderOutput, *, fast_scores: bool = False) -> DecoderState:
        """The state before the first step, from the encoder's output (checked against this decoder).

        fast_scores: the attention memory scores with `attn_course.attention.fast` (decoding, evaluation).
        """

    def step(self, y_prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState, Tensor | None]:
        """One step: y_prev (batch_size,) long -> logits (batch_size, vocab_size), next state,
        attention weights (batch_size, S) or None."""
        check_tokens("y_prev", y_prev, state.src_valid_lens.shape[0], ndim=1)
        return self._step(y_prev, state)

    @abstractmethod
    def _step(self, y_prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState, Tensor | None]:
        """`step` on a checked y_prev: the decoder's equations, written once."""

    def _embed(self, tokens: Tensor) -> Tensor:
        return self.dropout(self.embedding(tokens))

    def forward(self, tgt_in: Tensor, enc: EncoderOutput, *,
                fast_scores: bool = False) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: feed tgt_in[:, t] at step t and collect every step's logits and attention.

        tgt_in: (batch_size, T) long (<bos> y_1 ... y_{T-1}); enc: EncoderOutput of the source batch;
        fast_scores: as in `init_state`.
        Returns: logits (batch_size, T, vocab_size), attention (batch_size, T, S) or None.
        Here one `step` after another; a decoder whose steps need not all wait for the one before overrides
        it with the same pieces run over all steps at once (the same numbers).
        """
        state = self._teacher_forcing_state(tgt_in, enc, fast_scores)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_weights = self._step(tgt_in[:, t], state)
            logits.append(step_logits)
            weights.append(step_weights)
        attention = torch.stack(weights, 1) if self.has_attention else None
        return torch.stack(logits, 1), attention

    def _teacher_forcing_state(self, tgt_in: Tensor, enc: EncoderOutput, fast_scores: bool) -> DecoderState:
        """The state before the first step, after checking enc and then tgt_in (batch_size, T) long."""
        state = self.init_state(enc, fast_scores=fast_scores)
        check_tokens("tgt_in", tgt_in, enc.outputs.shape[0], ndim=2)
        return state


class PlainDecoder(Decoder):
    """The no-attention baseline: one fixed context vector c for the whole target (the bottleneck).

    c is the top layer of the encoder's bridged final state, c = tanh(W h_S) (Cho et al. 2014, appendix A:
    "c = tanh(V h_N)"); it also starts the decoder, s_0 = c. Every step reads it:
    s_t = RNN([e(y_{t-1}); c], s_{t-1}), logits_t = W_o [s_t; c; e(y_{t-1})] — the same output layer as
    the BahdanauDecoder, so that attention is the only difference between the two.
    Teacher forcing runs the RNN over all target steps in one call (c does not change).
    """

    has_attention = False

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1, *,
                 enc_size: int, cell: str = "gru", dropout: float = 0.0, pad: int = 0):
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, enc_size=enc_size,
                         rnn_input_size=embed_size + num_hiddens, cell=cell, dropout=dropout, pad=pad)
        self.output = nn.Linear(2 * num_hiddens + embed_size, vocab_size)

    def init_state(self, enc: EncoderOutput, *, fast_scores: bool = False) -> DecoderState:
        """The initial state: s_0, and the fixed context c = top layer of enc.state (batch_size, H).

        fast_scores: accepted like every decoder's; there are no attention scores to compute faster.
        """
        self._check_enc(enc)
        return DecoderState(enc.state, None, top_layer(enc.state), 0, enc.valid_lens)

    def _step(self, y_prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState, None]:
        """One step. y_prev: (batch_size,) long. Returns logits (batch_size, vocab_size), state, None."""
        logits, hidden = self._decode(self._embed(y_prev)[:, None], state)
        return logits[:, 0], state._replace(hidden=hidden, step=state.step + 1), None

    def forward(self, tgt_in: Tensor, enc: EncoderOutput, *,
                fast_scores: bool = False) -> tuple[Tensor, None]:
        """Teacher forcing in one RNN call: c does not change, so no step waits for another's output.

        tgt_in: (batch_size, T) long. Returns logits (batch_size, T, vocab_size), None.
        """
        state = self._teacher_forcing_state(tgt_in, enc, fast_scores)
        return self._decode(self._embed(tgt_in), state)[0], None

    def _decode(self, embedded: Tensor, state: DecoderState) -> tuple[Tensor, RNNState]:
        """s_t = RNN([e(y_{t-1}); c], s_{t-1}) and logits_t = W_o [s_t; c; e(y_{t-1})] for T steps.

        embedded: e(y_{t-1}) (batch_size, T, embed_size). Returns logits (batch_size, T, vocab_size) and the
        hidden state after the last step.
        """
        context = state.feed[:, None].expand(-1, embedded.shape[1], -1)    # c at every step: (B, T, H)
        outputs, hidden = self.rnn(torch.cat([embedded, context], -1), state.hidden)
        return self.output(self.dropout(torch.cat([outputs, context, embedded], -1))), hidden


class BahdanauDecoder(Decoder):
    """Bahdanau et al. 2014's decoder: attend with the previous state s_{t-1}, then update the state.

    Per step (sec. 3.1 and appendix A.2.2, with the encoder's bridge giving s_0):
        c_t = sum_j alpha_tj h_j, alpha_t = softmax_j(v_aᵀ tanh(W_a s_{t-1} + U_a h_j))  (eqs. 5-6, A.1.2)
        s_t = GRU([e(y_{t-1}); c_t], s_{t-1})                       (s_i = f(s_{i-1}, y_{i-1}, c_i), sec. 3.1)
        logits_t = W_o [s_t; c_t; e(y_{t-1})]                                   (g(y_{i-1}, s_i, c_i), eq. 4)
    The output layer is a single Linear over the inputs eq. 4 gives g, not the paper's maxout deep output
    (appendix A.2.2, whose formula reads s_{i-1} where eq. 4 has s_i): one fewer hidden layer.
    U_a h_j is computed once per batch (attention.prepare in init_state). score_activation="relu" swaps
    the score's tanh for a ReLU (`attn_course.attention.layers.AdditiveAttention`). attention_temperature tau
    (optional, > 0) divides the scores before the softmax: alpha_t = softmax_j(e_tj / tau).
    attention_dropout p (in [0, 1), default 0) drops the weights alpha_tj before they form c_t, in training
    mode only (`attn_course.attention.layers`); the attention the decoder returns is alpha_t before dropout.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1, *,
                 enc_size: int, attn_hiddens: int | None = None, score_activation: str = "tanh",
                 cell: str = "gru", dropout: float = 0.0, pad: int = 0,
                 attention_temperature: float | None = None, attention_dropout: float = 0.0):
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, enc_size=enc_size,
                         rnn_input_size=embed_size + enc_size, cell=cell, dropout=dropout, pad=pad)
        self.attention = AdditiveAttention(enc_size, num_hiddens, attn_hiddens or num_hiddens,
                                           activation=score_activation,
                                           dropout=_attention_dropout(attention_dropout))
        self.attention.temperature = _temperature(attention_temperature)
        self.output = nn.Linear(num_hiddens + enc_size + embed_size, vocab_size)

    def init_state(self, enc: EncoderOutput, *, fast_scores: bool = False) -> DecoderState:
        """s_0 from the encoder's bridge, and the memory of annotations with U_a h_j projected once."""
        self._check_enc(enc)
        memory = self.attention.prepare(enc.outputs, enc.outputs, enc.valid_lens, fast_scores=fast_scores)
        return DecoderState(enc.state, memory, None, 0, enc.valid_lens)

    def _step(self, y_prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState, Tensor]:
        """One step. y_prev: (batch_size,) long.

        Returns logits (batch_size, vocab_size), the next state, weights alpha_t (batch_size, S).
        """
        embedded = self._embed(y_prev)[:, None]                              # (B, 1, E)
        outputs, hidden, context, weights = self._recur(embedded, state.hidden, state.memory)
        logits = self._output(outputs, context, embedded)
        return logits[:, 0], state._replace(hidden=hidden, step=state.step + 1), weights[:, 0]

    def forward(self, tgt_in: Tensor, enc: EncoderOutput, *,
                fast_scores: bool = False) -> tuple[Tensor, Tensor]:
        """Teacher forcing. tgt_in: (batch_size, T) long. Returns logits (B, T, V), attention (B, T, S).

        The recursion s_{t-1} -> c_t -> s_t runs step by step; embedding and output layer once over all steps
        (the same numbers as `step` T times).
        """
        state = self._teacher_forcing_state(tgt_in, enc, fast_scores)
        embedded = self._embed(tgt_in)                                       # (B, T, E)
        hidden, outputs, contexts, weights = state.hidden, [], [], []
        for t in range(tgt_in.shape[1]):
            output, hidden, context, step_weights = self._recur(embedded[:, t : t + 1], hidden, state.memory)
            outputs.append(output)
            contexts.append(context)
            weights.append(step_weights)
        return self._output(torch.cat(outputs, 1), torch.cat(contexts, 1), embedded), torch.cat(weights, 1)

    def _recur(self, embedded: Tensor, hidden: RNNState, memory: Memory
               ) -> tuple[Tensor, RNNState, Tensor, Tensor]:
        """c_t from s_{t-1}, then s_t = GRU([e(y_{t-1}); c_t], s_{t-1}) (eqs. 5-6 and sec. 3.1).

        embedded: e(y_{t-1}) (batch_size, 1, embed_size); hidden: s_{t-1}. Returns the top layer of s_t
        (batch_size, 1, num_hiddens), s_t, c_t (batch_size, 1, enc_size) and alpha_t (batch_size, 1, S).
        """
        context, weights = self.attention.attend(top_layer(hidden)[:, None], memory)
        outputs, hidden = self.rnn(torch.cat([embedded, context], -1), hidden)
        return outputs, hidden, context, weights

    def _output(self, outputs: Tensor, contexts: Tensor, embedded: Tensor) -> Tensor:
        """logits_t = W_o [s_t; c_t; e(y_{t-1})] (eq. 4) for any number of steps: (B, T, *) -> (B, T, V)."""
        return self.output(self.dropout(torch.cat([outputs, contexts, embedded], -1)))


class LuongDecoder(Decoder):
    """Luong et al. 2015's decoder: run the RNN first, then attend with the current state h_t.

    Per step:
        h_t = RNN(x_t, h_{t-1}),  x_t = [e(y_{t-1}); h̃_{t-1}] with input feeding (sec. 3.3), else e(y_{t-1})
        a_t = align(h_t, h̄_s) with score in {dot, general, concat, location}      (eqs. 7-8)
        c_t = sum_s a_t(s) h̄_s
        h̃_t = tanh(W_c [c_t; h_t])                                                  (eq. 5)
        logits_t = W_s h̃_t                                                           (eq. 6)
    alignment="global" attends over the whole source. Local attention (sec. 3.2) attends within the window
    [p_t - D, p_t + D] (D = ``window``), cut to the sentence's real positions (0-based):
      - "local-m": p_t = t, clamped to the last real position; a_t = softmax of the scores in the window;
      - "local-p": p_t = S_i · sigmoid(v_pᵀ tanh(W_p h_t)), S_i the sentence's valid source length (eq. 9);
        a_t(s) = align(h_t, h̄_s) · exp(-(s - p_t)² / (2σ²)), σ = D/2 (eq. 10), align being the softmax
        within the window. As in the paper, the Gaussian-weighted a_t is not renormalised (it sums to <= 1).
    Without input feeding, teacher forcing runs the RNN over all target steps in one call and attends for
    all of them in one batched call; with it, h̃_{t-1} feeds step t, so steps run one at a time.
    `self.attention` is the score's layer (`attn_course.attention.layers.LuongAttention`); `self.alignment`
    names how it is applied ("global", "local-m" or "local-p").
    attention_temperature tau (optional, > 0) divides the scores before the softmax (local windows too).
    attention_dropout p (in [0, 1), default 0) drops the weights a_t before they form c_t, in training mode
    only (local windows too); the attention the decoder returns is a_t before dropout.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1, *,
                 enc_size: int, score: str = "general", input_feeding: bool = True, alignment: str = "global",
                 window: int = 10, attn_hiddens: int | None = None, max_len: int | None = None,
                 cell: str = "gru", dropout: float = 0.0, pad: int = 0,
                 attention_temperature: float | None = None, attention_dropout: float = 0.0):
        if alignment not in LUONG_ALIGNMENTS:
            raise ValueError(f"alignment={alignment!r}, expected one of {LUONG_ALIGNMENTS}")
        check_positive_int("window", window)  # D, the half-width of the window [p_t - D, p_t + D]
        if score == "dot" and num_hiddens != enc_size:
            raise ValueError(f"score='dot' needs num_hiddens == enc_size, got num_hiddens={num_hiddens}, "
                             f"enc_size={enc_size} (a bidirectional encoder doubles enc_size)")
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, enc_size=enc_size,
                         rnn_input_size=embed_size + (num_hiddens if input_feeding else 0), cell=cell,
                         dropout=dropout, pad=pad)
        self.score, self.input_feeding, self.alignment, self.window = score, input_feeding, alignment, window
        concat_hiddens = (attn_hiddens or num_hiddens) if score == "concat" else None
        self.attention = LuongAttention(score, num_hiddens, enc_size, num_hiddens=concat_hiddens,
                                        max_len=max_len if score == "location" else None,
                                        dropout=_attention_dropout(attention_dropout))
        self.attention.temperature = _temperature(attention_temperature)
        self.W_c = nn.Linear(enc_size + num_hiddens, num_hiddens, bias=False)
        self.W_s = nn.Linear(num_hiddens, vocab_size)
        if alignment == "local-p":
            self.W_p = nn.Linear(num_hiddens, num_hiddens, bias=False)
            self.v_p = nn.Linear(num_hiddens, 1, bias=False)

    def init_state(self, enc: EncoderOutput, *, fast_scores: bool = False) -> DecoderState:
        """h_0 from the encoder's bridge, h̃_0 = 0 (with input feeding), and the prepared memory."""
        self._check_enc(enc)
        memory = self.attention.prepare(enc.outputs, enc.outputs, enc.valid_lens, fast_scores=fast_scores)
        feed = enc.outputs.new_zeros(enc.outputs.shape[0], self.num_hiddens) if self.input_feeding else None
        return DecoderState(enc.state, memory, feed, 0, enc.valid_lens)

    def centres(self, queries: Tensor, first_step: int, src_valid_lens: Tensor) -> Tensor:
        """Window centres p_t (batch_size, num_queries) float for the states h_t of steps first_step, ...

        queries: (batch_size, num_queries, num_hiddens); src_valid_lens: (batch_size,) long.
        local-m: p_t = min(t, S_i - 1); local-p: p_t = S_i · sigmoid(v_pᵀ tanh(W_p h_t)) (Luong eq. 9).
        """
        lens = src_valid_lens.to(queries.device, queries.dtype)[:, None]
        if self.alignment == "local-m":
            steps = torch.arange(first_step, first_step + queries.shape[1], device=queries.device)
            return torch.minimum(steps.to(queries.dtype)[None], lens - 1)
        return lens * torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries)))).squeeze(-1)

    def align(self, queries: Tensor, memory: Memory, first_step: int) -> tuple[Tensor, Tensor]:
        """Attend from the current states h_t of steps first_step, first_step + 1, ... (eqs. 7-10).

        queries: (batch_size, num_queries, num_hiddens). Returns context (batch_size, num_queries, enc_size)
        and weights a_t (batch_size, num_queries, S), exactly 0 outside the window and past the valid length.
        """
        if self.alignment == "global":
            return self.attention.attend(queries, memory)
        # Local attention needs the raw scores, to mask them to a two-sided window before the softmax.
        scores = self.attention.scores(queries, memory)                      # (B, Q, S)
        centres = self.centres(queries, first_step, memory.valid_lens)       # (B, Q)
        positions = torch.arange(scores.shape[-1], device=scores.device, dtype=scores.dtype)
        distance = positions[None, None] - centres[..., None]                # s - p_t: (B, Q, S)
        outside = (distance.abs() > self.window) | (positions >= memory.valid_lens[:, None, None])
        weights = softmax_excluding(scores, outside)
        if self.alignment == "local-p":
            sigma = self.window / 2
            weights = weights * torch.exp(-distance.square() / (2 * sigma**2))
        return torch.bmm(self.attention.dropout(weights), memory.values), weights

    def _attentional(self, outputs: Tensor, memory: Memory, first_step: int) -> tuple[Tensor, Tensor, Tensor]:
        """outputs h_t (B, Q, H) -> logits (B, Q, V), h̃_t (B, Q, H), weights (B, Q, S)."""
        context, weights = self.align(outputs, memory, first_step)
        attentional = torch.tanh(self.W_c(torch.cat([context, outputs], -1)))
        return self.W_s(self.dropout(attentional)), attentional, weights

    def _step(self, y_prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState, Tensor]:
        """One step. y_prev: (batch_size,) long.

        Returns logits (batch_size, vocab_size), the next state (h_t; h̃_t if feeding), a_t (batch_size, S).
        """
        inputs = self._embed(y_prev)[:, None]                                # (B, 1, E)
        if self.input_feeding:
            inputs = torch.cat([inputs, state.feed[:, None]], -1)
        outputs, hidden = self.rnn(inputs, state.hidden)                     # h_t: (B, 1, H)
        logits, attentional, weights = self._attentional(outputs, state.memory, state.step)
        feed = attentional[:, 0] if self.input_feeding else None
        next_state = DecoderState(hidden, state.memory, feed, state.step + 1, state.src_valid_lens)
        return logits[:, 0], next_state, weights[:, 0]

    def forward(self, tgt_in: Tensor, enc: EncoderOutput, *,
                fast_scores: bool = False) -> tuple[Tensor, Tensor]:
        """Teacher forcing. tgt_in: (batch_size, T) long. Returns logits (B, T, V), attention (B, T, S).

        With input feeding, step by step (h̃_{t-1} feeds step t). Without it no step waits for another: one
        RNN call over all T steps and one batched attention call, the same numbers as `step` T times.
        """
        if self.input_feeding:
            return super().forward(tgt_in, enc, fast_scores=fast_scores)
        state = self._teacher_forcing_state(tgt_in, enc, fast_scores)
        outputs, _ = self.rnn(self._embed(tgt_in), state.hidden)             # h_1..h_T: (B, T, H)
        logits, _, weights = self._attentional(outputs, state.memory, 0)
        return logits, weights
