"""The encoder-decoder model: an Encoder and one of the decoders, checked to fit each other, built from a
`ModelConfig` (the hyper-parameters a checkpoint records)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from torch import Tensor, nn

from attn_course.models.decoders import LUONG_ALIGNMENTS, BahdanauDecoder, Decoder, LuongDecoder, PlainDecoder
from attn_course.models.encoders import Encoder, EncoderOutput

DECODERS: dict[str, type[Decoder]] = {
    "plain": PlainDecoder,
    "bahdanau": BahdanauDecoder,
    "luong": LuongDecoder,
}
"""The decoder behind each ``kind`` of a `ModelConfig`."""

DECODER_OPTIONS: dict[str, tuple[str, ...]] = {
    "plain": (),
    "bahdanau": ("attn_hiddens", "score_activation", "attention_temperature", "attention_dropout"),
    "luong": ("score", "input_feeding", "attention", "window", "attn_hiddens", "max_len",
              "attention_temperature", "attention_dropout"),
}
"""The `ModelConfig` fields that only some decoders read, by ``kind``."""

DECODER_ARGUMENTS = {"attention": "alignment"}
"""`ModelConfig` fields whose decoder argument has another name: ``attention`` (the name checkpoints and the
stored results record) is `LuongDecoder`'s ``alignment``, since the decoder's ``attention`` is its layer."""


@dataclass(frozen=True)
class ModelConfig:
    """Everything that defines a model's architecture: `Seq2Seq.from_config` builds it, and a checkpoint
    stores ``dataclasses.asdict`` of it to rebuild the model (`attn_course.training.loop.save_checkpoint`).

    kind: "plain" (no attention), "bahdanau" or "luong". The encoder has encoder_hiddens units per
    direction; bidirectional defaults (None) to the paper's choice: True for "bahdanau" (and for "plain", so
    that the baseline differs from it only by attention), False for "luong" (a stacked unidirectional
    encoder). The decoder has decoder_hiddens units (None: encoder_hiddens); the encoder's bridge maps its
    final state to that size. The decoder options (None: the decoder's default) are attn_hiddens
    ("bahdanau", "luong" with the concat score), score_activation ("bahdanau": "tanh" or "relu" in the
    additive score) and, for "luong", score, input_feeding, attention ("global", "local-m" or "local-p": the
    decoder's ``alignment``), window and max_len (see `attn_course.models.decoders.LuongDecoder`); setting one
    that the kind does not read is an error.
    attention_temperature ("bahdanau", "luong"; None: none) divides the attention scores by tau before the
    masked softmax, during training and decoding alike (chapter 9). attention_dropout ("bahdanau", "luong";
    None: 0) drops attention weights with that probability while training (chapter 10).
    """

    kind: str
    src_vocab_size: int
    tgt_vocab_size: int
    embed_size: int = 64
    encoder_hiddens: int = 128
    decoder_hiddens: int | None = None
    num_layers: int = 1
    cell: str = "gru"
    bidirectional: bool | None = None
    dropout: float = 0.0
    src_pad: int = 0
    tgt_pad: int = 0
    attn_hiddens: int | None = None
    score: str | None = None
    input_feeding: bool | None = None
    attention: str | None = None
    window: int | None = None
    max_len: int | None = None
    score_activation: str | None = None
    attention_temperature: float | None = None
    attention_dropout: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in DECODERS:
            raise ValueError(f"kind={self.kind!r}, expected one of {sorted(DECODERS)}")
        for name in dict.fromkeys(name for names in DECODER_OPTIONS.values() for name in names):
            value = getattr(self, name)
            if value is not None and name not in DECODER_OPTIONS[self.kind]:
                readers = sorted(k for k, names in DECODER_OPTIONS.items() if name in names)
                raise ValueError(f"{name}={value!r} is an option of {' and '.join(readers)} models, "
                                 f"got kind={self.kind!r}")
        if self.attention is not None and self.attention not in LUONG_ALIGNMENTS:
            raise ValueError(f"attention={self.attention!r}, expected one of {LUONG_ALIGNMENTS}")

    def decoder_options(self) -> dict[str, Any]:
        """The decoder options that are set, as keyword arguments of the decoder class."""
        return {DECODER_ARGUMENTS.get(name, name): getattr(self, name) for name in DECODER_OPTIONS[self.kind]
                if getattr(self, name) is not None}


class Seq2Seq(nn.Module):
    """An encoder and a decoder: forward(src, src_valid_lens, tgt_in) -> (logits, attention).

    src (batch_size, S) long, src_valid_lens (batch_size,) long, tgt_in (batch_size, T) long;
    logits (batch_size, T, tgt_vocab_size); attention (batch_size, T, S), or None for a PlainDecoder.
    """

    def __init__(self, encoder: Encoder, decoder: Decoder, *, config: ModelConfig | None = None):
        super().__init__()
        kind = next((k for k, cls in DECODERS.items() if type(decoder) is cls), None)
        if not isinstance(encoder, Encoder) or kind is None:
            names = [c.__name__ for c in DECODERS.values()]
            raise ValueError(f"Seq2Seq needs an Encoder and one of {names}, "
                             f"got {type(encoder).__name__} and {type(decoder).__name__}")
        pairs = [("enc_size", encoder.enc_size, decoder.enc_size),
                 ("num_layers", encoder.num_layers, decoder.num_layers),
                 ("cell", encoder.cell, decoder.cell),
                 ("decoder_hiddens / num_hiddens", encoder.decoder_hiddens, decoder.num_hiddens)]
        for name, enc_value, dec_value in pairs:
            if enc_value != dec_value:
                raise ValueError(f"encoder and decoder disagree on {name}: encoder {enc_value!r}, "
                                 f"decoder {dec_value!r}")
        self.encoder, self.decoder, self.kind = encoder, decoder, kind
        #: The config the model was built from (by `from_config`); None when assembled from modules.
        self.config = config

    @classmethod
    def from_config(cls, config: ModelConfig) -> Seq2Seq:
        """A freshly initialised model of the architecture `config` describes."""
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config is a {type(config).__name__}, expected a ModelConfig")
        bidirectional = config.kind != "luong" if config.bidirectional is None else config.bidirectional
        encoder = Encoder(config.src_vocab_size, config.embed_size, config.encoder_hiddens, config.num_layers,
                          cell=config.cell, bidirectional=bidirectional, dropout=config.dropout,
                          pad=config.src_pad, decoder_hiddens=config.decoder_hiddens)
        decoder = DECODERS[config.kind](
            config.tgt_vocab_size, config.embed_size, encoder.decoder_hiddens, config.num_layers,
            enc_size=encoder.enc_size, cell=config.cell, dropout=config.dropout, pad=config.tgt_pad,
            **config.decoder_options())
        return cls(encoder, decoder, config=config)

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> EncoderOutput:
        """src (batch_size, S) long, src_valid_lens (batch_size,) long -> EncoderOutput."""
        return self.encoder(src, src_valid_lens)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor, *,
                fast_scores: bool = False) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits (batch_size, T, tgt_vocab_size) and attention (batch_size, T, S) | None.

        fast_scores: additive attention scores in `attn_course.attention.fast`'s form (the same numbers,
        faster on the CPU without gradients), as the evaluation functions ask.
        """
        return self.decoder(tgt_in, self.encoder(src, src_valid_lens), fast_scores=fast_scores)


def build_model(kind: str, src_vocab_size: int, tgt_vocab_size: int, **sizes_and_options: Any) -> Seq2Seq:
    """Build an encoder-decoder of ``kind`` "plain", "bahdanau" or "luong" with matching sizes.

    The keyword arguments are the other fields of `ModelConfig` (embed_size, encoder_hiddens,
    decoder_hiddens, num_layers, cell, bidirectional, dropout, the decoder options...):
    ``build_model("bahdanau", 30, 40, embed_size=32, encoder_hiddens=64)``.
    """
    known = [f.name for f in fields(ModelConfig)][3:]
    unknown = sorted(set(sizes_and_options) - set(known))
    if unknown:
        raise ValueError(f"build_model got unknown options {unknown}, expected some of {known} (the encoder "
                         "has encoder_hiddens units per direction, the decoder decoder_hiddens)")
    return Seq2Seq.from_config(ModelConfig(kind, src_vocab_size, tgt_vocab_size, **sizes_and_options))
