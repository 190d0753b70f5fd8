"""Chapter 9's exercises, training dynamics: the inverse-sigmoid decay of scheduled sampling (ch9.q1) and the
inputs of one scheduled-sampling step, gold or predicted per sentence (ch9.q2).

Each exercise is an `Exercise` with its cases, its reference in `attn_course.training`, and the known-wrong
variants that name a learner's likely mistake.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import seeded_randn, spec_generator


# ---------------------------------------------------------------------------------------------------- q1
def _decay_case(spec: dict[str, Any]) -> Case:
    steps, k = [int(s) for s in spec["steps"]], float(spec["k"])
    if spec["seed"]:                      # a hidden seed adds three steps drawn over the whole fall
        steps += torch.randint(0, int(20 * k) + 1, (3,), generator=spec_generator(spec)).tolist()
    return Case(f"k = {k:g}, steps {steps}", {"steps": steps, "k": k}, spec, "the ratios, one per step")


def _decay_call(answer: Any, inputs: dict[str, Any]) -> list[Any]:
    """The learner's ratio at every step; a one-number tensor (torch.exp in place of math.exp) is read out."""
    ratios = [answer(step, inputs["k"]) for step in inputs["steps"]]
    return [float(r) if isinstance(r, torch.Tensor) and r.numel() == 1 else r for r in ratios]


def _decay_variant(formula):
    """A wrong formula of (step, k), applied to every step of the case (None where it overflows)."""

    def variant(inputs: dict[str, Any]) -> list[float] | None:
        try:
            return [formula(step, inputs["k"]) for step in inputs["steps"]]
        except (OverflowError, ZeroDivisionError):
            return None

    return variant


def _reference_decay(inputs: dict[str, Any]) -> list[float]:
    decay = resolve("attn_course.training.inverse_sigmoid_decay")
    return [decay(step, k=inputs["k"]) for step in inputs["steps"]]


INVERSE_SIGMOID = Exercise(
    "ch9.q1",
    "inverse_sigmoid_decay",
    "Scheduled sampling's inverse-sigmoid decay of the teacher-forcing ratio",
    solution='''
def inverse_sigmoid_decay(step, k):
    """The probability eps_i of feeding the gold previous word at training step i (0-based), k >= 1:
    eps_i = k / (k + exp(i / k))   (Bengio et al. 2015, sec. 2.4).

    Starts just below 1 (k / (k + 1)), stays high for about k log k steps, then falls towards 0.
    Returns a float in (0, 1); for very large i, exp overflows: the ratio is then 0.
    """
    ratio = step / k
    if ratio > 700:                      # math.exp overflows a little past 709
        return 0.0
    return k / (k + math.exp(ratio))
''',
    hint="Write eps_i exactly as the paper does, with i / k inside the exponential and k on both sides "
    "of the fraction; check your function at i = 0 (a value just below 1) and for a huge i, where the "
    "exponential no longer fits in a float.",
    covers="k = 1, 5 and 100; the first step; steps far past the fall, where exp(i / k) overflows",
    defaults={"seed": 0, "k": 10.0, "steps": [0, 1, 10, 50]},
    specs=[
        {"k": 10.0, "steps": [0, 1, 5, 10, 23, 50, 100]},
        {"k": 1.0, "steps": [0, 1, 2, 5]},
        {"k": 100.0, "steps": [0, 100, 460, 1000, 2000]},
        {"k": 5.0, "steps": [0, 3, 8, 20, 100000]},
    ],
    build=_decay_case,
    call=_decay_call,
    reference=_reference_decay,
    mistakes=[
        Mistake(
            "You returned 1 - eps_i, the probability of feeding the model's own prediction; eps_i, the "
            "teacher-forcing ratio, starts near 1 and decays.",
            _decay_variant(lambda i, k: 1 - k / (k + math.exp(i / k))),
        ),
        Mistake(
            "The exponent is i / k, not i: without dividing by k the ratio collapses after a few steps, "
            "whatever k is.",
            _decay_variant(lambda i, k: k / (k + math.exp(i))),
        ),
        Mistake(
            "The denominator is k + exp(i / k), not 1 + exp(i / k): with 1 the ratio starts above 1, which "
            "is not a probability.",
            _decay_variant(lambda i, k: k / (1 + math.exp(i / k))),
        ),
        Mistake(
            "That is a plain sigmoid of -i / k, 1 / (1 + exp(i / k)), which starts at 0.5: the k in the "
            "numerator and the denominator keeps the ratio near 1 for the first steps.",
            _decay_variant(lambda i, k: 1 / (1 + math.exp(i / k))),
        ),
        Mistake(
            "Your ratio rises with the steps, 1 / (1 + exp(-i / k)), a sigmoid that goes up: the teacher-"
            "forcing ratio must start near 1 and decay, k / (k + exp(i / k)).",
            _decay_variant(lambda i, k: 1 / (1 + math.exp(-i / k))),
        ),
        Mistake(
            "The exponent's sign is flipped: exp(-i / k) makes the ratio rise towards 1 instead of decaying.",
            _decay_variant(lambda i, k: k / (k + math.exp(-i / k))),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"OverflowError",
            "math.exp overflows past about exp(709): for a step that far beyond k, the ratio is 0 to every "
            "digit a float has. Return 0.0 there (or use a function that gives inf instead of raising).",
        ),
    ],
    package=["attn_course.training.inverse_sigmoid_decay", "attn_course.training.Decay"],
)


# ---------------------------------------------------------------------------------------------------- q2
def _mix_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    batch_size, vocab_size, ratio = int(spec["batch_size"]), int(spec["vocab_size"]), float(spec["ratio"])
    logits = seeded_randn((batch_size, vocab_size), gen, torch.float32, scale=3.0)
    gold = torch.randint(0, vocab_size, (batch_size,), generator=gen)
    coins = torch.rand(batch_size, generator=gen)
    if spec["coins"] == "edge":                      # a coin exactly at the ratio, and one at 0
        coins[0], coins[-1] = ratio, 0.0
    inputs = {"gold": gold, "prev_logits": logits, "ratio": ratio, "coins": coins}
    label = (f"batch of {batch_size}, vocabulary of {vocab_size}, ratio {ratio:g}, coins "
             f"{[round(c, 2) for c in coins.tolist()]}")
    return Case(label, inputs, spec, "the tokens to feed")


def _mix_call(fn: Any, inputs: dict[str, Any]) -> Any:
    return fn(inputs["gold"], inputs["prev_logits"], inputs["ratio"], inputs["coins"])


def _reference_mix(inputs: dict[str, Any]) -> torch.Tensor:
    """The rule of `attn_course.training.scheduled_sampling_logits`, with the case's coins."""
    gold, logits, ratio, coins = inputs["gold"], inputs["prev_logits"], inputs["ratio"], inputs["coins"]
    return torch.where(coins < ratio, gold, logits.argmax(-1))


def _mix_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> Any:
        gold, logits, ratio, coins = inputs["gold"], inputs["prev_logits"], inputs["ratio"], inputs["coins"]
        predicted = logits.argmax(-1)
        if kind == "inverted":
            return torch.where(coins >= ratio, gold, predicted)
        if kind == "at_most":
            return torch.where(coins <= ratio, gold, predicted)
        if kind == "one_coin":
            return gold.clone() if bool(coins[0] < ratio) else predicted
        if kind == "values":
            return torch.where(coins < ratio, gold.to(logits.dtype), logits.max(-1).values)
        if kind == "batch_axis":
            if logits.shape[0] != logits.shape[1]:
                return None
            return torch.where(coins < ratio, gold, logits.argmax(0))
        return None

    return variant


MIX_INPUTS = Exercise(
    "ch9.q2",
    "scheduled_inputs",
    "One scheduled-sampling step: feed the gold word or the model's own, sentence by sentence",
    solution='''
def scheduled_inputs(gold, prev_logits, ratio, coins):
    """The words to feed the decoder at one step of scheduled sampling (Bengio et al. 2015, sec. 2.3).

    gold: (batch_size,) long, the reference previous words y_{t-1}; prev_logits: (batch_size, vocab_size),
    the previous step's logits; ratio: the teacher-forcing ratio eps in [0, 1]; coins: (batch_size,) floats
    drawn uniformly from [0, 1), one per sentence. Sentence b is fed gold[b] when coins[b] < ratio (with
    probability eps), else the model's own guess, the argmax of prev_logits[b].
    Returns: (batch_size,) long.
    """
    predicted = prev_logits.argmax(dim=-1)                    # (batch_size,), no gradient flows through it
    return torch.where(coins < ratio, gold, predicted)
''',
    hint="Every sentence has its own coin, so decide for the whole batch at once with an element-wise choice "
    "between two (batch_size,) tensors, using the coin rule of the prompt exactly (think about a coin of "
    "0 at ratio 0). The model's guess is an index into the vocabulary, taken along the right axis of the "
    "logits. Build a new tensor; do not write into gold.",
    covers="ratios 0, 0.5 and 1; a coin equal to the ratio; a coin of 0 at ratio 0; a square batch (as many "
    "sentences as words); gold left unchanged",
    defaults={"seed": 0, "batch_size": 6, "vocab_size": 9, "ratio": 0.5, "coins": "random"},
    specs=[
        {"seed": 1},
        {"seed": 2, "batch_size": 8, "vocab_size": 8, "ratio": 0.3},
        {"seed": 3, "ratio": 0.0, "coins": "edge"},
        {"seed": 4, "batch_size": 5, "vocab_size": 12, "ratio": 1.0},
        {"seed": 5, "batch_size": 7, "ratio": 0.6, "coins": "edge"},
        {"seed": 6, "batch_size": 1, "vocab_size": 4, "ratio": 0.5},
    ],
    build=_mix_case,
    call=_mix_call,
    reference=_reference_mix,
    mistakes=[
        Mistake(
            "The coin test is inverted: you fed the gold word when coins >= ratio, that is with probability "
            "1 - eps. Feed gold where `coins < ratio`.",
            _mix_variant("inverted"),
        ),
        Mistake(
            "`coins <= ratio` feeds the gold word at ratio 0 when a coin is exactly 0; with `coins < ratio`, "
            "ratio 0 never feeds it and ratio 1 always does.",
            _mix_variant("at_most"),
        ),
        Mistake(
            "One coin decided for the whole batch: each sentence has its own coin, `coins[b]`, so some "
            "sentences get the gold word and others their own guess at the same step.",
            _mix_variant("one_coin"),
        ),
        Mistake(
            "You fed the largest logit's value, not its index: the model's guess is the word "
            "`prev_logits.argmax(dim=-1)`, a long tensor.",
            _mix_variant("values"),
        ),
        Mistake(
            "The argmax ran over the batch (axis 0): each sentence's guess is the argmax over the "
            "vocabulary, the last axis of prev_logits.",
            _mix_variant("batch_axis"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"The size of tensor a \(\d+\) must match the size of tensor b",
            "Shapes do not line up: gold and coins are (batch_size,), and the guess must be too, one word "
            "per sentence, taken over the vocabulary axis of prev_logits.",
        ),
    ],
    package=["attn_course.training.scheduled_sampling_logits"],
)
