"""Chapter 3's exercises, the seq2seq bottleneck: `masked_cross_entropy` (ch3.q1), `final_state` (ch3.q2),
the last real encoder state of each padded sentence, and `BiEncoder` (ch3.q3), a bidirectional GRU over a
packed batch with the bridge to the decoder's initial state.

Their references are `attn_course.training.loop.masked_cross_entropy`, `outputs[i, valid_len - 1]` and
`attn_course.models.encoders.Encoder`. Each mistake named is written once, as the wrong code a learner writes
(`ce_unmasked`, `EncoderUnpacked`, ...): averaging over padding, taking the last column of a padded batch,
running the GRU over the padding, and more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course_exercises.inputs import (
    seeded_randn,
    spec_dtype,
    spec_generator,
    spec_lengths,
    spec_size,
    with_gradients,
)


def _cross_entropy_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, t, v = (spec_size(spec, n) for n in ("batch_size", "num_steps", "vocab_size"))
    logits = seeded_randn((b, t, v), gen, dtype, 2.0)
    lens = spec_lengths(spec["tgt_valid_lens"], (b,), t, gen, "tgt_valid_lens", low=1)
    labels = torch.randint(1, v, (b, t), generator=gen)
    padding = torch.arange(t)[None, :] >= lens[:, None]
    if spec["padding_labels"] == "pad":
        labels = labels.masked_fill(padding, 0)
    elif spec["padding_labels"] == "any":  # any id at all, <pad> included
        labels = torch.where(padding, torch.randint(0, v, (b, t), generator=gen), labels)
    else:
        raise ValueError(f"padding_labels must be 'pad' or 'any', got {spec['padding_labels']!r}")
    which = "<pad> (id 0)" if spec["padding_labels"] == "pad" else "arbitrary ids"
    label = (
        f"logits of shape {(b, t, v)} and dtype {spec['dtype']}, tgt_valid_lens {lens.tolist()}, padding "
        f"labels {which}"
    )
    return Case(label, {"logits": logits, "tgt_out": labels, "tgt_valid_lens": lens}, spec, "the loss")


# The mistakes of ch3.q1, each written as a learner writes it.


def token_losses(logits, tgt_out, tgt_valid_lens):
    """Each position's loss and whether it is real, as a learner computes them (three mistakes use it)."""
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    return losses, mask


def ce_unmasked(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out)


def ce_over_all_positions(logits, tgt_out, tgt_valid_lens):
    losses, mask = token_losses(logits, tgt_out, tgt_valid_lens)
    return (losses * mask).sum() / losses.numel()


def ce_per_sentence(logits, tgt_out, tgt_valid_lens):
    losses, mask = token_losses(logits, tgt_out, tgt_valid_lens)
    return ((losses * mask).sum(1) / tgt_valid_lens).mean()


def ce_sum(logits, tgt_out, tgt_valid_lens):
    losses, mask = token_losses(logits, tgt_out, tgt_valid_lens)
    return (losses * mask).sum()


def ce_keeps_one_padded(logits, tgt_out, tgt_valid_lens):
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = torch.arange(tgt_out.shape[1])[None, :] <= tgt_valid_lens[:, None]
    return (losses * mask).sum() / mask.sum()


def ce_ignore_index(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=0)


def ce_drops_eos(logits, tgt_out, tgt_valid_lens):
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None] - 1
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * real).sum() / real.sum()


def ce_log_softmax_over_time(logits, tgt_out, tgt_valid_lens):
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    picked = F.log_softmax(logits, dim=1).gather(-1, tgt_out[..., None])[..., 0]
    return -(picked * real).sum() / real.sum()


def ce_probabilities(logits, tgt_out, tgt_valid_lens):
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    p = F.softmax(logits, dim=-1).gather(-1, tgt_out[..., None])[..., 0]
    return -(p * real).sum() / real.sum()


MASKED_CROSS_ENTROPY = Exercise(
    "ch3.q1",
    "masked_cross_entropy",
    "Masked cross-entropy: a loss that ignores padding",
    solution='''
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    """The mean cross-entropy over the real target tokens; padded positions contribute nothing.

    logits: (batch_size, T, vocab_size); tgt_out: (batch_size, T) labels; tgt_valid_lens: (batch_size,),
    the number of real tokens of each sentence (<eos> included).
    Returns: a scalar tensor, the sum of -log p(y_t) over real tokens divided by the number of real tokens.
    """
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")  # (batch_size, T)
    real = torch.arange(tgt_out.shape[1], device=tgt_out.device)[None, :] < tgt_valid_lens[:, None]
    return (losses * real).sum() / real.sum()
''',
    hint=(
        "Which positions of each target sentence are real, and which should not count at all? What do you "
        "divide the summed loss by, so that it is a mean over real tokens only?",
        "A masked mean: one loss per position (no reduction), a mask of the real positions built from "
        "tgt_valid_lens (chapter 1's sequence mask), and the sum of the masked losses over the number of "
        "real tokens in the whole batch. `F.cross_entropy` wants the classes on axis 1.",
        "First line: `F.cross_entropy` on the logits with their last two axes swapped, and `reduction` "
        "set to none. Second: the mask of real positions, as in `sequence_mask`. Return line: the masked "
        "losses summed, over the mask's sum.",
    ),
    covers="padding labels <pad> or arbitrary; sentences of length 1 and without padding; float32 "
    "and float64; the gradient",
    defaults={
        "seed": 0,
        "grad": False,
        "batch_size": 3,
        "num_steps": 5,
        "vocab_size": 7,
        "dtype": "float32",
        "tgt_valid_lens": "random",
        "padding_labels": "pad",
    },
    specs=[
        {"seed": 61, "tgt_valid_lens": [5, 2, 3]},
        {"seed": 62, "batch_size": 2, "num_steps": 4, "tgt_valid_lens": [4, 4]},
        {
            "seed": 63,
            "batch_size": 2,
            "num_steps": 6,
            "vocab_size": 5,
            "tgt_valid_lens": [1, 6],
            "dtype": "float64",
        },
        {
            "seed": 64,
            "batch_size": 4,
            "num_steps": 5,
            "tgt_valid_lens": [2, 5, 1, 3],
            "padding_labels": "any",
        },
        {"seed": 164, "grad": True},
    ],
    build=_cross_entropy_case,
    call=lambda answer, i: answer(i["logits"], i["tgt_out"], i["tgt_valid_lens"]),
    reference=lambda i: resolve("attn_course.training.loop.masked_cross_entropy")(
        i["logits"], i["tgt_out"], i["tgt_valid_lens"]
    ),
    mistakes=[
        Mistake(
            "Padding is not masked: the loss averages over every position, padding included. Mask the "
            "positions at or beyond `tgt_valid_lens`.",
            wrong=ce_unmasked,
        ),
        Mistake(
            "The masked sum is divided by batch_size * T, padding included; divide by the number of real "
            "tokens, `mask.sum()`, so that the loss does not shrink when a batch has more padding.",
            wrong=ce_over_all_positions,
        ),
        Mistake(
            "You averaged each sentence, then the sentences: a 2-token sentence then weighs as much as a "
            "20-token one. Average over all real tokens of the batch: `(losses * mask).sum() / mask.sum()`.",
            wrong=ce_per_sentence,
        ),
        Mistake("You returned the sum over real tokens; the loss is their mean.", wrong=ce_sum),
        Mistake(
            "Off by one: position `tgt_valid_len` is already padding (the real tokens are 0 .. len-1).",
            wrong=ce_keeps_one_padded,
        ),
        Mistake(
            "You found the padding from the labels (e.g. `ignore_index=0`), but a padded position's label "
            "can be any id; which positions are real is what `tgt_valid_lens` says.",
            wrong=ce_ignore_index,
        ),
        Mistake(
            "Off by one: you left out each sentence's last real token, its <eos>. `tgt_valid_lens` counts "
            "<eos>, so the real positions are 0 .. len-1: keep `j < tgt_valid_lens`.",
            wrong=ce_drops_eos,
        ),
        Mistake(
            "The log-softmax runs over the wrong axis: it must normalise over the vocabulary (the last "
            "axis of logits, `dim=-1`), not over the time steps.",
            wrong=ce_log_softmax_over_time,
        ),
        Mistake(
            "You averaged the probabilities p(y_t), not their logarithms: the loss is the mean of "
            "-log p(y_t) (use `F.log_softmax`, or `F.cross_entropy` on the logits).",
            wrong=ce_probabilities,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"Expected target size|Expected input batch_size|only batches of spatial targets",
            "`F.cross_entropy` expects the classes on axis 1: logits (batch, vocab, T) with labels "
            "(batch, T), so pass `logits.transpose(1, 2)` (or flatten both to (batch * T, ...)).",
        ),
    ],
    package=["attn_course.training.loop.masked_cross_entropy"],
)
with_gradients(MASKED_CROSS_ENTROPY, ("logits",))


def _final_state_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, s, h = (spec_size(spec, n) for n in ("batch_size", "num_steps", "num_hiddens"))
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    outputs = seeded_randn((b, s, h), gen, dtype)
    label = f"outputs of shape {(b, s, h)} and dtype {spec['dtype']}, valid_lens {lens.tolist()}"
    return Case(label, {"outputs": outputs, "valid_lens": lens}, spec, "the final states")


_FINAL_OFF_BY_ONE = (
    "Off by one: a sentence of length n has its last real token at position n - 1 (positions start at 0), "
    "so index with `valid_lens - 1`."
)


def _final_state_reference(inputs: dict[str, Any]) -> torch.Tensor:
    outputs, lens = inputs["outputs"], inputs["valid_lens"]
    return outputs[torch.arange(outputs.shape[0]), lens - 1]


# The mistakes of ch3.q2, each written as a learner writes it.


def state_last_padded(outputs, valid_lens):
    return outputs[:, -1]


def state_longest_end(outputs, valid_lens):
    return outputs[:, int(valid_lens.max()) - 1]


def state_mean(outputs, valid_lens):
    mask = torch.arange(outputs.shape[1])[None, :] < valid_lens[:, None]
    return (outputs * mask[..., None]).sum(1) / valid_lens[:, None]


def state_mean_with_padding(outputs, valid_lens):
    return outputs.mean(dim=1)


def state_first(outputs, valid_lens):
    return outputs[:, 0]


def state_off_by_one(outputs, valid_lens):
    return outputs[torch.arange(outputs.shape[0]), valid_lens]


def state_every_length(outputs, valid_lens):
    return outputs[:, valid_lens - 1]


def state_gather_unexpanded(outputs, valid_lens):
    return outputs.gather(1, (valid_lens - 1).view(-1, 1, 1)).squeeze(1)


FINAL_STATE = Exercise(
    "ch3.q2",
    "final_state",
    "The final state of a padded batch: the context of the bottleneck",
    solution='''
def final_state(outputs, valid_lens):
    """Each sentence's encoder output at its last real position: the fixed context of a seq2seq without
    attention, read without touching the padding.

    outputs: (batch_size, num_steps, num_hiddens), right-padded; valid_lens: (batch_size,), each >= 1.
    Returns: (batch_size, num_hiddens), row i = outputs[i, valid_lens[i] - 1].
    """
    rows = torch.arange(outputs.shape[0], device=outputs.device)
    return outputs[rows, valid_lens - 1]
''',
    hint=(
        "Where does each sentence's last real word sit in the padded tensor, and is it the same position "
        "for every sentence of the batch?",
        "Advanced indexing picks one position per sentence: index axis 0 with one row number per sentence "
        "and axis 1 with one position per sentence, and you get one vector per sentence. Positions count "
        "from 0, so a sentence of length n ends at n - 1.",
        "One return line: index `outputs` with two index tensors of length batch_size, an arange over the "
        "batch and the lengths minus one (not a `:` on axis 0, which pairs every sentence with every "
        "length).",
    ),
    covers="padded and unpadded sentences, sentences of length 1, float32 and float64; "
    "no sentence at full length; the gradient",
    defaults={
        "seed": 0,
        "grad": False,
        "batch_size": 3,
        "num_steps": 5,
        "num_hiddens": 4,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 71, "valid_lens": [5, 2, 3]},
        {"seed": 72, "batch_size": 2, "num_steps": 1, "valid_lens": [1, 1]},
        {
            "seed": 73,
            "batch_size": 4,
            "num_steps": 6,
            "num_hiddens": 3,
            "valid_lens": [1, 6, 4, 2],
            "dtype": "float64",
        },
        {"seed": 174, "valid_lens": [4, 1, 2], "grad": True},
    ],
    build=_final_state_case,
    call=lambda answer, i: answer(i["outputs"], i["valid_lens"]),
    reference=_final_state_reference,
    mistakes=[
        Mistake(
            "You took the last *padded* position, `outputs[:, -1]`: for a sentence shorter than the batch "
            "that is padding, not its last word. Use each sentence's own `valid_len - 1`.",
            wrong=state_last_padded,
        ),
        Mistake(
            "You took every sentence at the longest sentence's end (`valid_lens.max() - 1`): a shorter "
            "sentence is padding there. Use each sentence's own last position, `valid_len - 1`, row by row.",
            wrong=state_longest_end,
        ),
        Mistake(
            "You averaged the real positions: that is a summary of the sentence, but the bottleneck's "
            "context is the state after its last real token, `outputs[i, valid_len - 1]`.",
            wrong=state_mean,
        ),
        Mistake(
            "You averaged every position, padding included. The context is the state at the last real "
            "position, `outputs[i, valid_len - 1]`.",
            wrong=state_mean_with_padding,
        ),
        Mistake(
            "You took the first position; the context is the state after the *last* real token.",
            wrong=state_first,
        ),
        Mistake(_FINAL_OFF_BY_ONE, wrong=state_off_by_one),
        Mistake(
            "`outputs[:, valid_lens - 1]` takes every sentence at every sentence's length, a (batch_size, "
            "batch_size, num_hiddens) tensor: pair row i with its own length, "
            "`outputs[torch.arange(batch_size), valid_lens - 1]`.",
            wrong=state_every_length,
        ),
        Mistake(
            "`gather` took one number per sentence: its index must have the shape of what it returns, so "
            "expand it over the features, `index.expand(-1, 1, num_hiddens)`, before `gather(1, index)`.",
            wrong=state_gather_unexpanded,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"out of bounds for dimension 0",
            "You indexed the batch axis (axis 0) with positions: the positions are axis 1, "
            "`outputs[torch.arange(batch_size), valid_lens - 1]`.",
        ),
        ErrorHint(
            r"index \d+ is out of bounds for dimension",
            _FINAL_OFF_BY_ONE,
        ),
    ],
)
with_gradients(FINAL_STATE, ("outputs",))


def _encoder_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, s, v = (spec_size(spec, n) for n in ("batch_size", "num_steps", "vocab_size"))
    e, h, d = (spec_size(spec, n) for n in ("embed_size", "num_hiddens", "decoder_hiddens"))
    lens = spec_lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    src = torch.randint(1, v, (b, s), generator=gen).masked_fill(torch.arange(s)[None, :] >= lens[:, None], 0)
    scale = 1 / math.sqrt(h)
    params = {"embedding.weight": seeded_randn((v, e), gen, dtype)}
    for suffix in ("l0", "l0_reverse"):
        params[f"rnn.weight_ih_{suffix}"] = seeded_randn((3 * h, e), gen, dtype, scale)
        params[f"rnn.weight_hh_{suffix}"] = seeded_randn((3 * h, h), gen, dtype, scale)
        params[f"rnn.bias_ih_{suffix}"] = seeded_randn((3 * h,), gen, dtype, scale)
        params[f"rnn.bias_hh_{suffix}"] = seeded_randn((3 * h,), gen, dtype, scale)
    params["bridge.weight"] = seeded_randn((d, 2 * h), gen, dtype, 1 / math.sqrt(h))
    params["bridge.bias"] = seeded_randn((d,), gen, dtype, 0.5)
    inputs = {"src": src, "valid_lens": lens, "params": params}
    names: tuple[str, ...] = ("the outputs", "s_0")
    if spec["grad"]:
        inputs["probe"] = seeded_randn((b, s, 2 * h), gen, dtype)
        names += ("the gradient of the embedding",)
    label = (
        f"src {(b, s)} with valid_lens {lens.tolist()}, vocab_size {v}, embed_size {e}, num_hiddens {h} per "
        f"direction, decoder_hiddens {d}, dtype {spec['dtype']}"
        + (", with a gradient" if spec["grad"] else "")
    )
    return Case(label, inputs, spec, names)


def _encoder_run(forward: Callable, module: nn.Module, inputs: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """forward(module, src, valid_lens) -> (outputs, s_0), and the gradient of the embedding if the case has a
    probe: d/dE of sum(outputs * probe) + sum(s_0)."""
    module.load_state_dict(inputs["params"])
    outputs, s_0 = forward(module, inputs["src"], inputs["valid_lens"])
    if "probe" not in inputs:
        return outputs, s_0
    loss = (outputs * inputs["probe"]).sum() + s_0.sum()
    (gradient,) = torch.autograd.grad(loss, module.embedding.weight)
    return outputs, s_0, gradient


def _encoder_sizes(inputs: dict[str, Any]) -> tuple[int, int, int, int]:
    (v, e), (d, two_h) = inputs["params"]["embedding.weight"].shape, inputs["params"]["bridge.weight"].shape
    return v, e, two_h // 2, d


def _encoder_call(cls: Any, inputs: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    module = cls(*_encoder_sizes(inputs)).to(inputs["params"]["bridge.weight"].dtype)
    return _encoder_run(lambda m, src, lens: m(src, lens), module, inputs)


def _package_encoder(inputs: dict[str, Any]) -> nn.Module:
    v, e, h, d = _encoder_sizes(inputs)
    encoder = resolve("attn_course.models.encoders.Encoder")(v, e, h, bidirectional=True, decoder_hiddens=d)
    return encoder.to(inputs["params"]["bridge.weight"].dtype).eval()


def _encoder_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    def forward(
        encoder: nn.Module, src: torch.Tensor, lens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        enc = encoder(src, lens)
        return enc.outputs, enc.state

    return _encoder_run(forward, _package_encoder(inputs), inputs)


# The mistakes of ch3.q3, each written as a learner writes it: a forward on the given __init__.


class EncoderBase(nn.Module):
    """The given __init__ of ch3.q3 and the packing a learner writes; each mistake below writes its own
    forward."""

    def __init__(self, vocab_size, embed_size, num_hiddens, decoder_hiddens):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=0)
        self.rnn = nn.GRU(embed_size, num_hiddens, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * num_hiddens, decoder_hiddens)

    def packed(self, src, valid_lens, **kwargs):
        packed = pack_padded_sequence(
            self.embedding(src),
            valid_lens,
            batch_first=True,
            enforce_sorted=kwargs.get("enforce_sorted", False),
        )
        packed_outputs, h_n = self.rnn(packed)
        length = kwargs.get("total_length", src.shape[1])
        outputs, _ = pad_packed_sequence(packed_outputs, batch_first=True, total_length=length)
        return outputs, h_n


class EncoderUnpacked(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.rnn(self.embedding(src))
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1))).unsqueeze(0)


class EncoderUnpackedZeroed(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.rnn(self.embedding(src))
        real = torch.arange(src.shape[1])[None, :, None] < valid_lens[:, None, None]
        return outputs.masked_fill(~real, 0), torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))[None]


class EncoderShortOutputs(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens, total_length=None)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))[None]


class EncoderBridgeLastColumn(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(outputs[:, -1]))[None]


class EncoderBridgeLastWord(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(outputs[torch.arange(src.shape[0]), valid_lens - 1]))[None]


class EncoderBridgeFirstPosition(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(outputs[:, 0, :]))[None]


class EncoderBackwardFirst(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[-1], h_n[-2]], -1)))[None]


class EncoderReshapedStates(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(h_n.reshape(src.shape[0], -1)))[None]


class EncoderNoTanh(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, self.bridge(torch.cat([h_n[0], h_n[1]], -1))[None]


class EncoderNoLayerAxis(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))


BI_ENCODER = Exercise(
    "ch3.q3",
    "BiEncoder",
    "The bidirectional encoder over a padded batch: packing and the bridge",
    solution='''
class BiEncoder(nn.Module):
    """A bidirectional GRU encoder that never reads padding, with a bridge to the decoder's initial state.

    Annotations h_j = [h→_j; h←_j] (Bahdanau et al. 2014, sec. 3.2); the bridge s_0 = tanh(W_s [h→_S; h←_1])
    reads each direction's final state: the forward GRU's after the sentence's last real word, the backward
    GRU's after its first word (Bahdanau's s_0 = tanh(W_s h←_1), appendix A.2.2, with h→_S as well).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, decoder_hiddens):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=0)
        self.rnn = nn.GRU(embed_size, num_hiddens, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * num_hiddens, decoder_hiddens)

    def forward(self, src, valid_lens):
        """src: (batch_size, S) token ids, right-padded with 0; valid_lens: (batch_size,), each in [1, S], in
        any order. Returns outputs (batch_size, S, 2 * num_hiddens), exactly 0 at padded positions, and s_0
        (1, batch_size, decoder_hiddens): one layer, as nn.GRU wants its initial state.
        """
        X = self.embedding(src)
        packed = pack_padded_sequence(X, valid_lens.cpu(), batch_first=True, enforce_sorted=False)
        packed_outputs, h_n = self.rnn(packed)    # h_n: (2, batch_size, num_hiddens), [forward; backward]
        outputs, _ = pad_packed_sequence(packed_outputs, batch_first=True, total_length=src.shape[1])
        final = torch.cat([h_n[0], h_n[1]], dim=-1)                    # [h→_S; h←_1]: (batch_size, 2 * H)
        return outputs, torch.tanh(self.bridge(final))[None]
''',
    write=("forward",),
    hint=(
        "If the GRU reads the padding, where does its backward direction start for a short sentence? How "
        "could you hand the GRU each sentence's true length?",
        "Packing: `pack_padded_sequence` tells the GRU each sentence's length (lengths on the CPU, in any "
        "order with `enforce_sorted=False`), and `pad_packed_sequence` restores (batch_size, S, 2 * H) "
        "outputs with 0 at the padding. h_n then holds each direction's state at the sentence's own end.",
        "After the GRU on the packed batch, pad back with `total_length` set to the batch's width S; put "
        "h_n's two rows side by side along the features (forward first); then the bridge, its tanh, and a "
        "leading layer axis of size 1 give s_0.",
    ),
    covers="no sentence of the batch at full length; lengths in no particular order; a sentence of length 1; "
    "decoder_hiddens different from num_hiddens; the gradient of the embedding; float32 and float64",
    defaults={
        "seed": 0,
        "batch_size": 3,
        "num_steps": 6,
        "vocab_size": 11,
        "embed_size": 4,
        "num_hiddens": 3,
        "decoder_hiddens": 3,
        "dtype": "float32",
        "valid_lens": "random",
        "grad": False,
    },
    specs=[
        {"seed": 81, "valid_lens": [4, 2, 5]},
        {"seed": 82, "batch_size": 4, "num_steps": 5, "decoder_hiddens": 5, "valid_lens": [1, 3, 2, 3]},
        {"seed": 83, "batch_size": 2, "num_steps": 4, "valid_lens": [2, 4], "dtype": "float64"},
        {"seed": 84, "num_steps": 7, "decoder_hiddens": 2, "valid_lens": [3, 6, 4], "grad": True},
    ],
    build=_encoder_case,
    call=_encoder_call,
    reference=_encoder_reference,
    mistakes=[
        Mistake(
            "The GRU ran over the padding: the outputs at padded positions are not 0, and the backward "
            "direction started on padding instead of on each sentence's last word. Pack the batch with "
            "`pack_padded_sequence(X, valid_lens.cpu(), batch_first=True, enforce_sorted=False)`.",
            wrong=EncoderUnpacked,
        ),
        Mistake(
            "The outputs at padded positions are 0, but the GRU still ran over the padding: its backward "
            "direction started on padding, so every backward state and the final states differ. Zeroing "
            "afterwards cannot undo that; pack the batch with `pack_padded_sequence` before the GRU.",
            wrong=EncoderUnpackedZeroed,
        ),
        Mistake(
            "The outputs stop at the longest sentence of the batch: pass `total_length=src.shape[1]` to "
            "`pad_packed_sequence` so that they keep the batch's S positions.",
            wrong=EncoderShortOutputs,
        ),
        Mistake(
            "The bridge read `outputs[:, -1]`, the last *padded* position: for a sentence shorter than the "
            "batch that is padding. Feed it the GRU's final states, h_n, which packing takes at each "
            "sentence's own end.",
            wrong=EncoderBridgeLastColumn,
        ),
        Mistake(
            "The bridge read the outputs at each sentence's last word: right for the forward direction, but "
            "there the backward GRU has read a single word. Its final state h←_1 is the one after the "
            "*first* word: take both from h_n, `torch.cat([h_n[0], h_n[1]], -1)`.",
            wrong=EncoderBridgeLastWord,
        ),
        Mistake(
            "The bridge read the outputs at the first position: right for the backward direction (h←_1), but "
            "there the forward GRU has read a single word. Take both final states from h_n.",
            wrong=EncoderBridgeFirstPosition,
        ),
        Mistake(
            "The directions are swapped: the bridge takes [h→_S; h←_1], forward first -- `torch.cat([h_n[0], "
            "h_n[1]], -1)`, as the annotations [h→_j; h←_j] are built.",
            wrong=EncoderBackwardFirst,
        ),
        Mistake(
            "h_n has shape (2, batch_size, H), directions first: `h_n.reshape(batch_size, -1)` mixes the "
            "sentences of the batch. Concatenate the two directions instead, `torch.cat([h_n[0], h_n[1]], "
            "-1)` (or `h_n.transpose(0, 1).reshape(batch_size, -1)`).",
            wrong=EncoderReshapedStates,
        ),
        Mistake("tanh is missing: s_0 = tanh(W_s [h→_S; h←_1]).", wrong=EncoderNoTanh),
        Mistake(
            "s_0 has no layer axis: the decoder's nn.GRU wants its initial state as (num_layers, batch_size, "
            "decoder_hiddens), here (1, batch_size, decoder_hiddens): add it with `[None]`.",
            wrong=EncoderNoLayerAxis,
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must be sorted in decreasing order|enforce_sorted",
            "The lengths of a batch come in any order: pass `enforce_sorted=False` to "
            "`pack_padded_sequence` (it sorts the batch and puts the results back in the original order).",
        ),
        ErrorHint(
            r"mat1 and mat2 shapes cannot be multiplied|size mismatch",
            "The bridge takes both directions' final states side by side, (batch_size, 2 * num_hiddens): "
            "`torch.cat([h_n[0], h_n[1]], -1)`.",
        ),
        ErrorHint(
            r"Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict",
            "Keep the layers of the given `__init__` (embedding, rnn, bridge) unchanged: the check loads its "
            "weights into them.",
        ),
    ],
    package=["attn_course.models.encoders.Encoder"],
)
