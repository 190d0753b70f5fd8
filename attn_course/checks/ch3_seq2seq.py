"""Chapter 3's exercises, the seq2seq bottleneck: `masked_cross_entropy` (ch3.q1) and `final_state`
(ch3.q2), the last real encoder state of each padded sentence.

Their references are `attn_course.training.masked_cross_entropy` and `outputs[i, valid_len - 1]`; the
mistakes named include averaging over padding and taking the last column of a padded batch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import (
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


def _token_losses(inputs: dict[str, Any], ignore_pad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(losses (batch, T), real (batch, T) bool) for the cross-entropy variants."""
    logits, labels, lens = inputs["logits"], inputs["tgt_out"], inputs["tgt_valid_lens"]
    losses = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    real = torch.arange(labels.shape[1])[None, :] < lens[:, None]
    if ignore_pad:
        real = labels != 0
    return losses, real


def _cross_entropy_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> torch.Tensor:
        losses, real = _token_losses(inputs, ignore_pad=kind == "ignore_index")
        masked = (losses * real).sum()
        if kind == "unmasked":
            return losses.mean()
        if kind == "all_positions":
            return masked / losses.numel()
        if kind == "per_sentence":
            return ((losses * real).sum(1) / real.sum(1)).mean()
        if kind == "sum":
            return masked
        if kind == "one_less":  # <eos> left out
            lens = inputs["tgt_valid_lens"]
            fewer = torch.arange(losses.shape[1])[None, :] < lens[:, None] - 1
            return (losses * fewer).sum() / fewer.sum() if fewer.any() else None
        if kind == "time_axis":
            logits, labels = inputs["logits"], inputs["tgt_out"]
            picked = F.log_softmax(logits, dim=1).gather(-1, labels[..., None])[..., 0]
            return -(picked * real).sum() / real.sum()
        if kind == "probability":  # softmax without the log
            picked = F.softmax(inputs["logits"], dim=-1).gather(-1, inputs["tgt_out"][..., None])[..., 0]
            return -(picked * real).sum() / real.sum()
        if kind == "one_more":
            lens = inputs["tgt_valid_lens"]
            extra = torch.arange(losses.shape[1])[None, :] <= lens[:, None]
            return (losses * extra).sum() / extra.sum()
        return masked / real.sum()  # ignore_index: the mask comes from the labels, not the lengths

    return variant


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
    hint="First a loss per position, without reduction -- check which axis `F.cross_entropy` expects the "
    "classes on. Then keep only the real positions of each target (from tgt_valid_lens, as in chapter "
    "1), and average over the real tokens of the whole batch: not over batch_size * T, and not "
    "sentence by sentence.",
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
    reference=lambda i: resolve("attn_course.training.masked_cross_entropy")(
        i["logits"], i["tgt_out"], i["tgt_valid_lens"]
    ),
    mistakes=[
        Mistake(
            "Padding is not masked: the loss averages over every position, padding included. Mask the "
            "positions at or beyond `tgt_valid_lens`.",
            _cross_entropy_variant("unmasked"),
        ),
        Mistake(
            "The masked sum is divided by batch_size * T, padding included; divide by the number of real "
            "tokens, `mask.sum()`, so that the loss does not shrink when a batch has more padding.",
            _cross_entropy_variant("all_positions"),
        ),
        Mistake(
            "You averaged each sentence, then the sentences: a 2-token sentence then weighs as much as a "
            "20-token one. Average over all real tokens of the batch: `(losses * mask).sum() / mask.sum()`.",
            _cross_entropy_variant("per_sentence"),
        ),
        Mistake(
            "You returned the sum over real tokens; the loss is their mean.", _cross_entropy_variant("sum")
        ),
        Mistake(
            "Off by one: position `tgt_valid_len` is already padding (the real tokens are 0 .. len-1).",
            _cross_entropy_variant("one_more"),
        ),
        Mistake(
            "You found the padding from the labels (e.g. `ignore_index=0`), but a padded position's label "
            "can be any id; which positions are real is what `tgt_valid_lens` says.",
            _cross_entropy_variant("ignore_index"),
        ),
        Mistake(
            "Off by one: you left out each sentence's last real token, its <eos>. `tgt_valid_lens` counts "
            "<eos>, so the real positions are 0 .. len-1: keep `j < tgt_valid_lens`.",
            _cross_entropy_variant("one_less"),
        ),
        Mistake(
            "The log-softmax runs over the wrong axis: it must normalise over the vocabulary (the last "
            "axis of logits, `dim=-1`), not over the time steps.",
            _cross_entropy_variant("time_axis"),
        ),
        Mistake(
            "You averaged the probabilities p(y_t), not their logarithms: the loss is the mean of "
            "-log p(y_t) (use `F.log_softmax`, or `F.cross_entropy` on the logits).",
            _cross_entropy_variant("probability"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"Expected target size|Expected input batch_size|only batches of spatial targets",
            "`F.cross_entropy` expects the classes on axis 1: logits (batch, vocab, T) with labels "
            "(batch, T), so pass `logits.transpose(1, 2)` (or flatten both to (batch * T, ...)).",
        ),
    ],
    package=["attn_course.training.masked_cross_entropy"],
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


def _final_state_one_past(inputs: dict[str, Any]) -> torch.Tensor | None:
    """outputs[i, valid_lens[i]], where no sentence fills the batch (else that indexing fails)."""
    outputs, lens = inputs["outputs"], inputs["valid_lens"]
    if int(lens.max()) >= outputs.shape[1]:
        return None
    return outputs[torch.arange(outputs.shape[0]), lens]


def _final_state_reference(inputs: dict[str, Any]) -> torch.Tensor:
    outputs, lens = inputs["outputs"], inputs["valid_lens"]
    return outputs[torch.arange(outputs.shape[0]), lens - 1]


def _masked_mean(inputs: dict[str, Any]) -> torch.Tensor:
    outputs, lens = inputs["outputs"], inputs["valid_lens"]
    real = (torch.arange(outputs.shape[1])[None, :] < lens[:, None]).to(outputs.dtype)
    return (outputs * real[..., None]).sum(1) / real.sum(1, keepdim=True)


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
    hint="Each sentence needs the output at its own last real position, which depends on its valid length "
    "(positions count from 0). The tensor's last position is padding for every shorter sentence. "
    "Advanced indexing can pick one position per row, for all rows, in a single expression.",
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
            lambda i: i["outputs"][:, -1],
        ),
        Mistake(
            "You averaged the real positions: that is a summary of the sentence, but the bottleneck's "
            "context is the state after its last real token, `outputs[i, valid_len - 1]`.",
            _masked_mean,
        ),
        Mistake(
            "You averaged every position, padding included. The context is the state at the last real "
            "position, `outputs[i, valid_len - 1]`.",
            lambda i: i["outputs"].mean(1),
        ),
        Mistake(
            "You took the first position; the context is the state after the *last* real token.",
            lambda i: i["outputs"][:, 0],
        ),
        Mistake(_FINAL_OFF_BY_ONE, _final_state_one_past),
        Mistake(
            "`outputs[:, valid_lens - 1]` takes every sentence at every sentence's length, a (batch_size, "
            "batch_size, num_hiddens) tensor: pair row i with its own length, "
            "`outputs[torch.arange(batch_size), valid_lens - 1]`.",
            lambda i: i["outputs"][:, i["valid_lens"] - 1],
        ),
        Mistake(
            "`gather` took one number per sentence: its index must have the shape of what it returns, so "
            "expand it over the features, `index.expand(-1, 1, num_hiddens)`, before `gather(1, index)`.",
            lambda i: i["outputs"].gather(1, (i["valid_lens"] - 1).view(-1, 1, 1)).squeeze(1),
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
