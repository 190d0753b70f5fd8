"""The encoder-decoder model: an Encoder and one of the decoders, checked to fit each other."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from attn_course.decoders import BahdanauDecoder, Decoder, LuongDecoder, PlainDecoder
from attn_course.encoders import Encoder, EncoderOutput

DECODERS: dict[str, type[Decoder]] = {
    "plain": PlainDecoder,
    "bahdanau": BahdanauDecoder,
    "luong": LuongDecoder,
}
"""The decoder behind each ``kind`` of `build_model` (and of a checkpoint's config)."""


class Seq2Seq(nn.Module):
    """An encoder and a decoder: forward(src, src_valid_lens, tgt_in) -> (logits, attention).

    src (batch_size, S) long, src_valid_lens (batch_size,) long, tgt_in (batch_size, T) long;
    logits (batch_size, T, tgt_vocab_size); attention (batch_size, T, S), or None for a PlainDecoder.
    """

    def __init__(self, encoder: Encoder, decoder: Decoder):
        super().__init__()
        kind = next((k for k, cls in DECODERS.items() if type(decoder) is cls), None)
        if not isinstance(encoder, Encoder) or kind is None:
            names = [c.__name__ for c in DECODERS.values()]
            raise ValueError(f"Seq2Seq needs an Encoder and one of {names}, "
                             f"got {type(encoder).__name__} and {type(decoder).__name__}")
        pairs = [("enc_size", encoder.enc_size, decoder.enc_size),
                 ("num_layers", encoder.num_layers, decoder.num_layers),
                 ("cell", encoder.cell, decoder.cell),
                 ("dec_hiddens / num_hiddens", encoder.dec_hiddens, decoder.num_hiddens)]
        for name, enc_value, dec_value in pairs:
            if enc_value != dec_value:
                raise ValueError(f"encoder and decoder disagree on {name}: encoder {enc_value!r}, "
                                 f"decoder {dec_value!r}")
        self.encoder, self.decoder, self.kind = encoder, decoder, kind

    @property
    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild the model (without weights): plain Python values."""
        return {"kind": self.kind, "encoder": dict(self.encoder.hparams),
                "decoder": dict(self.decoder.hparams)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Seq2Seq:
        """A freshly initialised model from `config` (as returned by the ``config`` property)."""
        if not isinstance(config, dict) or set(config) != {"kind", "encoder", "decoder"}:
            keys = sorted(config) if isinstance(config, dict) else type(config).__name__
            raise ValueError(f"config has keys {keys}, expected ['decoder', 'encoder', 'kind']")
        if config["kind"] not in DECODERS:
            raise ValueError(f"config['kind'] is {config['kind']!r}, expected one of {sorted(DECODERS)}")
        return cls(Encoder(**config["encoder"]), DECODERS[config["kind"]](**config["decoder"]))

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> EncoderOutput:
        """src (batch_size, S) long, src_valid_lens (batch_size,) long -> EncoderOutput."""
        return self.encoder(src, src_valid_lens)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits (batch_size, T, tgt_vocab_size) and attention (batch_size, T, S) | None."""
        return self.decoder(tgt_in, self.encoder(src, src_valid_lens))


def build_model(
    kind: str,
    src_vocab_size: int,
    tgt_vocab_size: int,
    *,
    embed_size: int = 64,
    num_hiddens: int = 128,
    num_layers: int = 1,
    cell: str = "gru",
    bidirectional: bool | None = None,
    dec_hiddens: int | None = None,
    dropout: float = 0.0,
    src_pad: int = 0,
    tgt_pad: int = 0,
    **decoder_options: Any,
) -> Seq2Seq:
    """Build an encoder-decoder of ``kind`` "plain", "bahdanau" or "luong" with matching sizes.

    bidirectional defaults to the paper's choice: True for "bahdanau" (and for "plain", so that the
    baseline differs from it only by attention), False for "luong" (a stacked unidirectional encoder).
    The decoder has dec_hiddens units (default num_hiddens); the encoder's bridge maps to that size.
    decoder_options go to the decoder: e.g. attn_hiddens (bahdanau, luong concat), and for luong
    score, input_feeding, attention, window, max_len (see `LuongDecoder`).
    """
    if kind not in DECODERS:
        raise ValueError(f"kind={kind!r}, expected one of {sorted(DECODERS)}")
    if bidirectional is None:
        bidirectional = kind != "luong"
    encoder = Encoder(src_vocab_size, embed_size, num_hiddens, num_layers, cell=cell,
                      bidirectional=bidirectional, dropout=dropout, pad=src_pad, dec_hiddens=dec_hiddens)
    decoder = DECODERS[kind](tgt_vocab_size, embed_size, encoder.dec_hiddens, num_layers,
                             enc_size=encoder.enc_size, cell=cell, dropout=dropout, pad=tgt_pad,
                             **decoder_options)
    return Seq2Seq(encoder, decoder)
