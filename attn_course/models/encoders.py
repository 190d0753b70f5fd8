"""The RNN encoder: embed the source, run a (bi)directional GRU/LSTM over it, bridge to the decoder.

Padding never leaks: the RNN reads a packed sequence, so the final states are taken at each
sentence's own last token and the outputs at padded positions are exactly zero.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attn_course.validation import (
    check_positive_int,
    check_probability,
    check_tensor,
    check_tokens,
    check_valid_lens,
)

RNNState = Tensor | tuple[Tensor, Tensor]
"""A recurrent state: (num_layers, batch_size, num_hiddens) for a GRU, the pair (h, c) for an LSTM."""

CELLS = {"gru": nn.GRU, "lstm": nn.LSTM}


class EncoderOutput(NamedTuple):
    """What the encoder hands to a decoder.

    outputs:    (batch_size, S, enc_size) top-layer annotations h_1..h_S; exactly zero at padded positions.
    state:      the decoder's initial state s_0 (after the bridge): (num_layers, batch_size, decoder_hiddens),
                or the pair (h_0, c_0) of such tensors for an LSTM.
    valid_lens: (batch_size,) long, the number of real source positions of each sentence.
    """

    outputs: Tensor
    state: RNNState
    valid_lens: Tensor


class Encoder(nn.Module):
    """Embedding + GRU/LSTM (optionally bidirectional) over packed sequences, with a bridge to s_0.

    forward(src (batch_size, S) long, src_valid_lens (batch_size,) long) -> EncoderOutput with
    outputs (batch_size, S, enc_size), enc_size = num_hiddens * (2 if bidirectional else 1): num_hiddens
    units per direction. The bridge maps to decoder_hiddens, the decoder's units (default num_hiddens).

    Bidirectional annotations are h_j = [h→_j; h←_j] (Bahdanau et al. 2014, sec. 3.2). The bridge maps
    each layer's final state to the decoder's initial state, s_0 = tanh(W_s [h→_S; h←_1]) — Bahdanau's
    s_0 = tanh(W_s h←_1) (appendix A.2.2), reading the last forward state as well; unidirectional:
    s_0 = tanh(W_s h_S). For an LSTM the cell state gets its own bridge, c_0 = tanh(W_c [c→_S; c←_1]).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int = 1,
        *,
        cell: str = "gru",
        bidirectional: bool = False,
        dropout: float = 0.0,
        pad: int = 0,
        decoder_hiddens: int | None = None,
    ):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell={cell!r}, expected one of {sorted(CELLS)}")
        for name, value in [("vocab_size", vocab_size), ("embed_size", embed_size),
                            ("num_hiddens", num_hiddens), ("num_layers", num_layers)]:
            check_positive_int(name, value)
        check_probability("dropout", dropout, allow_one=False)
        self.cell, self.bidirectional, self.pad = cell, bidirectional, pad
        self.num_hiddens, self.num_layers = num_hiddens, num_layers
        self.num_directions = 2 if bidirectional else 1
        self.enc_size = num_hiddens * self.num_directions
        self.decoder_hiddens = num_hiddens if decoder_hiddens is None else decoder_hiddens
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad)
        self.dropout = nn.Dropout(dropout)
        self.rnn = CELLS[cell](embed_size, num_hiddens, num_layers, batch_first=True,
                               bidirectional=bidirectional, dropout=dropout if num_layers > 1 else 0.0)
        self.bridge = nn.Linear(self.enc_size, self.decoder_hiddens)
        self.bridge_cell = nn.Linear(self.enc_size, self.decoder_hiddens) if cell == "lstm" else None

    def _bridge(self, final: Tensor, linear: nn.Linear) -> Tensor:
        """tanh(W[→; ←]) of the final states: (num_layers * num_directions, B, H) ->
        (num_layers, B, decoder_hiddens)."""
        batch_size = final.shape[1]
        # nn.GRU orders h_n as (layer0 fwd, layer0 bwd, layer1 fwd, ...): group the directions of each layer.
        final = final.view(self.num_layers, self.num_directions, batch_size, self.num_hiddens)
        final = final.permute(0, 2, 1, 3).reshape(self.num_layers, batch_size, self.enc_size)
        return torch.tanh(linear(final))

    def forward(self, src: Tensor, src_valid_lens: Tensor) -> EncoderOutput:
        """Encode a padded batch.

        src: (batch_size, S) long, right-padded; src_valid_lens: (batch_size,) long in [1, S].
        Returns EncoderOutput(outputs (batch_size, S, enc_size), state, valid_lens (batch_size,)).
        """
        check_tokens("src", src)
        batch_size, num_steps = src.shape
        check_tensor("src_valid_lens", src_valid_lens)  # refuses None: every sentence has a length
        check_valid_lens(src_valid_lens, batch_size, None, num_steps, low=1, per_query=False, upper="S",
                         name="src_valid_lens")
        X = self.dropout(self.embedding(src))
        packed = pack_padded_sequence(X, src_valid_lens.cpu(), batch_first=True, enforce_sorted=False)
        packed_outputs, final = self.rnn(packed)
        outputs, _ = pad_packed_sequence(packed_outputs, batch_first=True, total_length=num_steps)
        if self.cell == "lstm":
            h_n, c_n = final
            state: RNNState = (self._bridge(h_n, self.bridge), self._bridge(c_n, self.bridge_cell))
        else:
            state = self._bridge(final, self.bridge)
        return EncoderOutput(outputs, state, src_valid_lens)
