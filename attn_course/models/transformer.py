"""A small Transformer encoder-decoder (Vaswani et al. 2017) with the course's Seq2Seq interface.

    model = Transformer(TransformerConfig(src_vocab_size, tgt_vocab_size, num_hiddens=64, num_heads=4))
    logits, attention = model(src, src_valid_lens, tgt_in)       # like Seq2Seq: training.train works
    hyps = decoding.greedy_decode(model, src, src_valid_lens, bos=..., eos=...)   # and so does decoding

Every block is pre-norm: x + Sublayer(LayerNorm(x)), where the paper's post-norm is
LayerNorm(x + Sublayer(x)). Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture")
show that post-norm's gradients near the output are large at initialisation, hence the paper's learning-rate
warm-up, while pre-norm's are well-behaved and train without one; `attn_course.training.loop.train` has no
warm-up.

In training the decoder runs all target positions at once (the causal mask hides the future). For
inference `init_state`/`step` give the decoder the interface `attn_course.models.decoding` drives: a step
re-runs the decoder on the prefix decoded so far (no key/value cache: simple, and cheap at course sizes).
The attention a Seq2Seq-style caller sees is the last decoder layer's cross-attention, averaged over heads;
`cross_attention` returns every layer and head, and `HeadView` shows one head to the attention explorer.
`attention_maps` returns all three kinds of every layer and head: the encoder's self-attention, the
decoder's causal self-attention and the cross-attention (the figures of d2l sec. 11.7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attn_course.attention.multihead import MultiHeadAttention
from attn_course.attention.positional import PositionalEncoding
from attn_course.models.modes import eval_mode
from attn_course.validation import (
    check_int,
    check_positive_int,
    check_probability,
    check_tensor,
    check_tokens,
    check_valid_lens,
)


@dataclass(frozen=True)
class TransformerConfig:
    """The architecture: num_layers encoder and decoder blocks of width num_hiddens, num_heads heads,
    a position-wise feed-forward layer of ffn_hiddens units, at most max_len positions per sequence."""

    src_vocab_size: int
    tgt_vocab_size: int
    num_hiddens: int = 64
    num_heads: int = 4
    ffn_hiddens: int = 128
    num_layers: int = 2
    dropout: float = 0.0
    max_len: int = 256
    src_pad: int = 0
    tgt_pad: int = 0

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "num_hiddens", "num_heads", "ffn_hiddens",
                     "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        check_probability("dropout", self.dropout, allow_one=False)
        if self.num_hiddens % self.num_heads or self.num_hiddens % 2:
            raise ValueError(f"num_hiddens = {self.num_hiddens} must be even and a multiple of num_heads = "
                             f"{self.num_heads}")


def _feed_forward(config: TransformerConfig) -> nn.Sequential:
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, at every position alike (Vaswani et al. 2017, eq. 2)."""
    return nn.Sequential(nn.Linear(config.num_hiddens, config.ffn_hiddens), nn.ReLU(),
                         nn.Linear(config.ffn_hiddens, config.num_hiddens))


class EncoderBlock(nn.Module):
    """Self-attention over the source, then the feed-forward layer, each as x + Sublayer(LayerNorm(x))."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        d = config.num_hiddens
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attention = MultiHeadAttention(d, config.num_heads, config.dropout)
        self.ffn, self.dropout = _feed_forward(config), nn.Dropout(config.dropout)

    def forward(self, X: Tensor, valid_lens: Tensor) -> Tensor:
        """X (batch_size, S, num_hiddens), valid_lens (batch_size,) -> (batch_size, S, num_hiddens)."""
        Y = self.norm1(X)
        X = X + self.dropout(self.attention(Y, Y, Y, valid_lens)[0])
        return X + self.dropout(self.ffn(self.norm2(X)))


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder's outputs, feed-forward; pre-norm residuals."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        d = config.num_hiddens
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attention = MultiHeadAttention(d, config.num_heads, config.dropout)
        self.cross_attention = MultiHeadAttention(d, config.num_heads, config.dropout)
        self.ffn, self.dropout = _feed_forward(config), nn.Dropout(config.dropout)

    def forward(self, X: Tensor, memory: TransformerMemory) -> tuple[Tensor, Tensor]:
        """X (batch_size, T, num_hiddens) -> same shape, and the cross-attention (batch_size, h, T, S)."""
        Y = self.norm1(X)
        X = X + self.dropout(self.self_attention(Y, Y, Y, causal=True)[0])
        Y = self.norm2(X)
        context, weights = self.cross_attention(Y, memory.outputs, memory.outputs, memory.valid_lens)
        X = X + self.dropout(context)
        return X + self.dropout(self.ffn(self.norm3(X))), weights


class _Embedding(nn.Module):
    """Token embedding times sqrt(num_hiddens) (Vaswani et al. 2017, sec. 3.4), plus the positions."""

    def __init__(self, vocab_size: int, config: TransformerConfig, pad: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.num_hiddens, padding_idx=pad)
        # N(0, 1 / num_hiddens), so that the scaled embedding has entries of about the size of the sinusoid's;
        # with nn.Embedding's N(0, 1) the positions would be drowned by sqrt(num_hiddens).
        nn.init.normal_(self.embedding.weight, std=config.num_hiddens ** -0.5)
        with torch.no_grad():
            self.embedding.weight[pad].zero_()
        self.positions = PositionalEncoding(config.num_hiddens, config.dropout, config.max_len)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.positions(self.embedding(tokens) * math.sqrt(self.embedding.embedding_dim))


class TransformerMemory(NamedTuple):
    """The encoder's output: outputs (batch_size, S, num_hiddens), valid_lens (batch_size,) long."""

    outputs: Tensor
    valid_lens: Tensor


class TransformerEncoder(nn.Module):
    """Embedding + positions, num_layers `EncoderBlock`s, a final LayerNorm (pre-norm needs one)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.embed = _Embedding(config.src_vocab_size, config, config.src_pad)
        self.blocks = nn.ModuleList(EncoderBlock(config) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(config.num_hiddens)

    def forward(self, src: Tensor, src_valid_lens: Tensor) -> TransformerMemory:
        """src (batch_size, S) long, src_valid_lens (batch_size,) long in [1, S] -> TransformerMemory."""
        check_tokens("src", src)
        check_tensor("src_valid_lens", src_valid_lens)
        check_valid_lens(src_valid_lens, src.shape[0], None, src.shape[1], low=1, per_query=False,
                         upper="S", name="src_valid_lens")
        lens = src_valid_lens.to(src.device)
        X = self.embed(src)
        for block in self.blocks:
            X = block(X, lens)
        return TransformerMemory(self.norm(X), lens)


class TransformerState(NamedTuple):
    """What greedy and beam search carry between steps: the encoder's memory and the tokens fed so far.

    enc_outputs (batch_size, S, num_hiddens); src_valid_lens (batch_size,); tokens (batch_size, t) long.
    """

    enc_outputs: Tensor
    src_valid_lens: Tensor
    tokens: Tensor

    def index_select(self, index: Tensor) -> TransformerState:
        """Keep, repeat or reorder the sentences ``index`` (n,) long (finished sentences, beams)."""
        return TransformerState(*(t.index_select(0, index) for t in self))


class TransformerDecoder(nn.Module):
    """Embedding + positions, num_layers `DecoderBlock`s, LayerNorm, a linear layer to the vocabulary."""

    has_attention = True

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.vocab_size = config.tgt_vocab_size
        self.embed = _Embedding(config.tgt_vocab_size, config, config.tgt_pad)
        self.blocks = nn.ModuleList(DecoderBlock(config) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(config.num_hiddens)
        self.output = nn.Linear(config.num_hiddens, config.tgt_vocab_size)

    def run(self, tgt_in: Tensor, memory: TransformerMemory) -> tuple[Tensor, Tensor]:
        """All target positions at once: logits (batch_size, T, vocab_size) and every cross-attention
        weight, (num_layers, batch_size, num_heads, T, S). tgt_in: (batch_size, T) long."""
        check_tokens("tgt_in", tgt_in, memory.outputs.shape[0])
        X, weights = self.embed(tgt_in), []
        for block in self.blocks:
            X, layer_weights = block(X, memory)
            weights.append(layer_weights)
        return self.output(self.norm(X)), torch.stack(weights)

    def forward(self, tgt_in: Tensor, memory: TransformerMemory) -> tuple[Tensor, Tensor]:
        """Teacher forcing: logits (batch_size, T, vocab_size), attention (batch_size, T, S) (the last
        layer's cross-attention averaged over heads)."""
        logits, weights = self.run(tgt_in, memory)
        return logits, weights[-1].mean(1)

    def init_state(self, memory: TransformerMemory) -> TransformerState:
        """The state before the first step: no token fed yet."""
        tokens = memory.valid_lens.new_zeros(memory.outputs.shape[0], 0)
        return TransformerState(memory.outputs, memory.valid_lens, tokens)

    def step_weights(self, y_prev: Tensor, state: TransformerState
                     ) -> tuple[Tensor, TransformerState, Tensor]:
        """One step: logits (batch_size, vocab_size), the next state, and every layer and head's weights of
        this step, (num_layers, batch_size, num_heads, S). y_prev: (batch_size,) long."""
        check_tokens("y_prev", y_prev, state.tokens.shape[0], ndim=1)
        tokens = torch.cat([state.tokens, y_prev[:, None].to(state.tokens.device)], dim=1)
        logits, weights = self.run(tokens, TransformerMemory(state.enc_outputs, state.src_valid_lens))
        return logits[:, -1], state._replace(tokens=tokens), weights[:, :, :, -1]

    def step(self, y_prev: Tensor, state: TransformerState) -> tuple[Tensor, TransformerState, Tensor]:
        """One step for `attn_course.models.decoding`: logits, next state, attention (batch_size, S) (last
        layer, averaged over heads)."""
        logits, state, weights = self.step_weights(y_prev, state)
        return logits, state, weights[-1].mean(1)


class Transformer(nn.Module):
    """The encoder-decoder: forward(src, src_valid_lens, tgt_in) -> (logits, attention), like `Seq2Seq`.

    src (batch_size, S) long, src_valid_lens (batch_size,) long, tgt_in (batch_size, T) long;
    logits (batch_size, T, tgt_vocab_size); attention (batch_size, T, S), the last decoder layer's
    cross-attention averaged over heads (row t: the step that predicts y_t, as in `Seq2Seq`).
    """

    kind = "transformer"

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"config is a {type(config).__name__}, expected a TransformerConfig")
        self.config = config
        self.encoder, self.decoder = TransformerEncoder(config), TransformerDecoder(config)

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> TransformerMemory:
        return self.encoder(src, src_valid_lens)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        return self.decoder(tgt_in, self.encoder(src, src_valid_lens))

    @torch.no_grad()
    def cross_attention(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> Tensor:
        """Every cross-attention weight under teacher forcing: (num_layers, batch_size, num_heads, T, S)."""
        return self.decoder.run(tgt_in, self.encoder(src, src_valid_lens))[1]


class AttentionMaps(NamedTuple):
    """Every attention weight of a Transformer under teacher forcing, one tensor per kind:

    encoder_self (num_layers, batch_size, num_heads, S, S): source position i (row) attending to j (column);
    decoder_self (num_layers, batch_size, num_heads, T, T): causal, zero above the diagonal;
    cross (num_layers, batch_size, num_heads, T, S): as `Transformer.cross_attention` returns it.
    """

    encoder_self: Tensor
    decoder_self: Tensor
    cross: Tensor


@torch.no_grad()
def attention_maps(model: Transformer, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> AttentionMaps:
    """Run `model` once with teacher forcing, in evaluation mode, and return its attention of every kind.

    src (batch_size, S) long, src_valid_lens (batch_size,) long in [1, S], tgt_in (batch_size, T) long.
    Returns `AttentionMaps` (weights before dropout, as `MultiHeadAttention` returns them); the model's
    mode is restored afterwards. The weights are read by forward hooks on each `MultiHeadAttention`,
    removed again even if the forward pass raises: the model keeps no trace of the call.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model is a {type(model).__name__}, expected a Transformer")
    modules = {
        "encoder_self": [block.attention for block in model.encoder.blocks],
        "decoder_self": [block.self_attention for block in model.decoder.blocks],
        "cross": [block.cross_attention for block in model.decoder.blocks],
    }
    found: dict[tuple[str, int], Tensor] = {}           # keyed by place, not by the order of calls

    def keep(kind: str, layer: int):
        def hook(module: nn.Module, inputs: tuple, output: tuple[Tensor, Tensor]) -> None:
            found[kind, layer] = output[1]
        return hook

    handles = [module.register_forward_hook(keep(kind, layer))
               for kind, layers in modules.items() for layer, module in enumerate(layers)]
    try:
        with eval_mode(model):
            model(src, src_valid_lens, tgt_in)
    finally:
        for handle in handles:
            handle.remove()
    return AttentionMaps(*(torch.stack([found[kind, layer] for layer in range(len(layers))])
                           for kind, layers in modules.items()))


def _select(weights: Tensor, layer: int, head: int | None) -> Tensor:
    """weights (num_layers, batch_size, num_heads, ...) -> (batch_size, ...): one head, or their mean."""
    per_head = weights[layer]
    return per_head.mean(1) if head is None else per_head[:, head]


class _HeadDecoder(nn.Module):
    """A TransformerDecoder whose `step` and `forward` report one layer's head (or the heads' mean)."""

    has_attention = True

    def __init__(self, decoder: TransformerDecoder, layer: int, head: int | None) -> None:
        super().__init__()
        self.decoder, self.layer, self.head = decoder, layer, head
        self.vocab_size = decoder.vocab_size

    def init_state(self, memory: TransformerMemory) -> TransformerState:
        return self.decoder.init_state(memory)

    def step(self, y_prev: Tensor, state: TransformerState) -> tuple[Tensor, TransformerState, Tensor]:
        logits, state, weights = self.decoder.step_weights(y_prev, state)
        return logits, state, _select(weights, self.layer, self.head)

    def forward(self, tgt_in: Tensor, memory: TransformerMemory) -> tuple[Tensor, Tensor]:
        logits, weights = self.decoder.run(tgt_in, memory)
        return logits, _select(weights, self.layer, self.head)


class HeadView(nn.Module):
    """The Transformer seen through one cross-attention head, for the attention explorer (and decoding).

    head: 0..num_heads-1, or None for the mean over heads; layer: the decoder layer (default the last).
    Behaves like the model (same logits, same translations) except that the attention it reports, from
    `forward` (batch_size, T, S) and from `decoder.step` (batch_size, S), is that head's. `label` names it.
    """

    kind = "transformer"

    def __init__(self, model: Transformer, head: int | None = None, layer: int = -1) -> None:
        super().__init__()
        if not isinstance(model, Transformer):
            raise ValueError(f"model is a {type(model).__name__}, expected a Transformer")
        num_heads, num_layers = model.config.num_heads, model.config.num_layers
        if head is not None:
            check_int("head", head, low=0, high=num_heads - 1, high_name="num_heads - 1")
        check_int("layer", layer, low=-num_layers, high=num_layers - 1, high_name="num_layers - 1")
        self.model, self.head, self.layer = model, head, layer
        self.decoder = _HeadDecoder(model.decoder, layer, head)
        which = "heads averaged" if head is None else f"head {head}"
        self.label = f"Transformer, layer {layer % num_layers}, {which}"

    def encode(self, src: Tensor, src_valid_lens: Tensor) -> TransformerMemory:
        return self.model.encode(src, src_valid_lens)

    def forward(self, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        return self.decoder(tgt_in, self.model.encode(src, src_valid_lens))
