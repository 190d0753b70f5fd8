"""Chapter 10's exercises, diagnosing attention: `normalised_entropy` (ch10.q1), each decoder step's entropy
over the real keys divided by its largest value, and `concentration` (ch10.q2), the largest share of a
sentence's attention on one source position, over its real decoder steps.

The cases are the weights a decoder produces: a masked softmax of seeded scores (exact zeros on padded keys),
sharp and flat rows, one-key sentences, and padded decoder steps that hold real-looking rows (a decoder
computes attention at every step of the padded batch). The references are `attn_course.diagnostics`.
"""

from __future__ import annotations

from typing import Any

import torch

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import seeded_randn, spec_dtype, spec_generator, spec_lengths, spec_size
from attn_course.masking import masked_softmax


def _weights_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    b, t, s = (spec_size(spec, n) for n in ("batch_size", "num_steps", "num_keys"))
    src_lens = spec_lengths(spec["src_valid_lens"], (b,), s, gen, "src_valid_lens", low=1)
    tgt_lens = spec_lengths(spec["tgt_valid_lens"], (b,), t, gen, "tgt_valid_lens", low=1)
    scores = seeded_randn((b, t, s), gen, torch.float64, spec["scale"])
    weights = masked_softmax(scores, src_lens).to(dtype)
    label = (
        f"weights {(b, t, s)} ({spec['dtype']}, scores of scale {spec['scale']}), src_valid_lens "
        f"{src_lens.tolist()}, tgt_valid_lens {tgt_lens.tolist()}"
    )
    inputs = {"weights": weights, "src_valid_lens": src_lens, "tgt_valid_lens": tgt_lens}
    return Case(label, inputs, spec, "the result")


_DEFAULTS = {
    "seed": 0,
    "batch_size": 3,
    "num_steps": 4,
    "num_keys": 5,
    "scale": 2.0,
    "dtype": "float32",
    "src_valid_lens": "random",
    "tgt_valid_lens": "random",
}


# ---------------------------------------------------------------------------------------------- ch10.q1


def _entropy(inputs: dict[str, Any], *, log=torch.log, denominator: str = "real", zero_log: bool = True,
             sign: float = -1.0, one_key: bool = True, dim: int = -1) -> torch.Tensor:
    """The normalised entropy and its known-wrong variants (the log, the denominator, 0 log 0, the axis)."""
    w, lens = inputs["weights"], inputs["src_valid_lens"]
    logs = torch.where(w > 0, log(w.clamp_min(torch.finfo(w.dtype).tiny)), torch.zeros_like(w)) if zero_log \
        else log(w)
    entropy = sign * (w * logs).sum(dim)
    if denominator == "none":
        return entropy
    keys = torch.full_like(lens, w.shape[-1]) if denominator == "num_keys" else lens
    most = keys.to(w.dtype).log()
    if dim != -1:
        return entropy / most[:, None]
    if one_key:
        safe = most.clamp_min(torch.finfo(w.dtype).tiny)[:, None]
        return torch.where(most[:, None] > 0, entropy / safe, 0.0)
    return entropy / most[:, None]


def _entropy_reference(inputs: dict[str, Any]) -> torch.Tensor:
    package = resolve("attn_course.diagnostics.attention_entropy")
    return package(inputs["weights"], inputs["src_valid_lens"], normalise=True).to(inputs["weights"].dtype)


NORMALISED_ENTROPY = Exercise(
    "ch10.q1",
    "normalised_entropy",
    "Normalised entropy of every decoder step's attention",
    solution='''
def normalised_entropy(weights, src_valid_lens):
    """Each decoder step's entropy over the real source keys, divided by its largest value log(S).

    H_t = -sum_j alpha_tj log alpha_tj (natural log; 0 log 0 counts as 0), divided by log(src_valid_len):
    1 for uniform weights, 0 for a one-hot row. A sentence of one real key has nothing to choose: 0.
    weights: (batch_size, num_steps, num_keys), 0 on the padded keys; src_valid_lens: (batch_size,) long >= 1.
    Returns: (batch_size, num_steps), the dtype of weights.
    """
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))   # never log(0)
    entropy = -(weights * logs).sum(dim=-1)                                      # (batch_size, num_steps)
    most = src_valid_lens.to(weights.dtype).log()[:, None]                       # log S per sentence
    return torch.where(most > 0, entropy / most.clamp_min(1e-30), torch.zeros_like(entropy))
''',
    hint="Entropy sums over the keys of one step, and a weight of exactly 0 must add nothing to it: take "
    "care that no logarithm of 0 is ever used in the sum. Then compare with the most a step could have, "
    "uniform weights over the sentence's real keys only; think about what that maximum is when a sentence "
    "has a single real key.",
    covers="padded keys (exact zeros), sharp and flat rows, sentences of one real key, float32 and float64",
    defaults=_DEFAULTS,
    specs=[
        {"seed": 101, "src_valid_lens": [5, 3, 2]},
        {"seed": 102, "num_keys": 6, "src_valid_lens": [6, 1, 4], "scale": 0.5},
        {"seed": 103, "batch_size": 2, "num_steps": 3, "num_keys": 7, "scale": 8.0, "dtype": "float64",
         "src_valid_lens": [7, 5]},
        {"seed": 104, "batch_size": 4},
    ],
    build=_weights_case,
    call=lambda answer, i: answer(i["weights"], i["src_valid_lens"]),
    reference=_entropy_reference,
    mistakes=[
        Mistake(
            "NaN where a weight is exactly 0: log(0) is -inf and 0 * -inf is NaN. Padded keys have weight 0; "
            "count 0 log 0 as 0 (use the log only where the weight is positive).",
            lambda i: _entropy(i, zero_log=False),
        ),
        Mistake(
            "You divided by log(num_keys), the padded length: the most a step can have is the log of its "
            "sentence's real keys, log(src_valid_lens), so padded keys must not count.",
            lambda i: _entropy(i, denominator="num_keys"),
        ),
        Mistake(
            "Not normalised: that is the entropy in nats; divide by log(src_valid_lens) so that uniform "
            "weights give 1 whatever the sentence's length.",
            lambda i: _entropy(i, denominator="none"),
        ),
        Mistake(
            "log base 2 in the sum but the natural log in the maximum (or the other way round): use one base "
            "for both, and the ratio is the same in any base.",
            lambda i: _entropy(i, log=torch.log2),
        ),
        Mistake(
            "That is the entropy in bits (log base 2), not normalised: divide by the log of the sentence's "
            "real keys, in the same base, so that uniform weights give 1.",
            lambda i: _entropy(i, log=torch.log2, denominator="none"),
        ),
        Mistake(
            "The sign: entropy is -sum alpha log alpha, which is >= 0 because every log of a weight is <= 0.",
            lambda i: _entropy(i, sign=1.0),
        ),
        Mistake(
            "A sentence of one real key gives 0 / log(1) = 0 / 0 = NaN: it has nothing to choose between, so "
            "its normalised entropy is 0.",
            lambda i: _entropy(i, one_key=False),
        ),
        Mistake(
            "You summed over the decoder steps (axis 1): each step's entropy sums over the keys, the last "
            "axis.",
            lambda i: _entropy(i, dim=1),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor|The size of tensor a",
            "src_valid_lens has one length per sentence (batch_size,): give it a step axis to divide the "
            "(batch_size, num_steps) entropies.",
        ),
        ErrorHint(
            r"log\(\): argument 'input'.*must be Tensor|must be real number, not Tensor",
            "math.log works on one number; for a tensor of lengths use the tensor's own log, in a floating "
            "dtype.",
        ),
    ],
    package=["attn_course.diagnostics.attention_entropy", "attn_course.diagnostics.mean_entropy"],
)


# ---------------------------------------------------------------------------------------------- ch10.q2


def _concentration(inputs: dict[str, Any], *, steps: str = "real", share: str = "total",
                   reduce: str = "max") -> torch.Tensor:
    """The concentration and its known-wrong variants (which steps, what it is divided by, max or mean)."""
    w, lens = inputs["weights"], inputs["tgt_valid_lens"]
    real = torch.arange(w.shape[1])[None, :, None] < lens[:, None, None]
    mass = (w * real).sum(1) if steps == "real" else w.sum(1)                       # (batch_size, num_keys)
    if reduce == "argmax":
        return mass.argmax(-1)
    if reduce == "row_peak":  # the mean over real steps of each row's largest weight
        return (w.max(-1).values * real[..., 0]).sum(1) / lens.to(w.dtype)
    top = mass.max(-1).values if reduce == "max" else mass.mean(-1)
    if share == "total":
        return top / mass.sum(-1)
    if share == "num_steps":
        return top / w.shape[1]
    return top


def _concentration_reference(inputs: dict[str, Any]) -> torch.Tensor:
    package = resolve("attn_course.diagnostics.attention_concentration")
    return package(inputs["weights"], None, inputs["tgt_valid_lens"]).to(inputs["weights"].dtype)


CONCENTRATION = Exercise(
    "ch10.q2",
    "concentration",
    "Concentration: the share of a sentence's attention on its most-attended source position",
    solution='''
def concentration(weights, tgt_valid_lens):
    """The largest share of each sentence's attention, over its real decoder steps, on one source position.

    C = max_j sum_{t real} alpha_tj / sum_{t real} sum_j alpha_tj: about 1/S for an alignment that moves along
    the sentence, 1 for a lazy model that sends every step to the same token.
    weights: (batch_size, num_steps, num_keys); tgt_valid_lens: (batch_size,) long >= 1, the real steps
    (the rows of the padded steps hold weights too, and must not count).
    Returns: (batch_size,), the dtype of weights.
    """
    real = torch.arange(weights.shape[1])[None, :, None] < tgt_valid_lens[:, None, None]   # (B, T, 1)
    column_mass = (weights * real).sum(dim=1)                                            # (B, num_keys)
    return column_mass.max(dim=-1).values / column_mass.sum(dim=-1)
''',
    hint="Think in columns: how much attention did each source position receive from the sentence's real "
    "decoder steps? Then compare the best-served position with all the attention those steps gave out. The "
    "padded steps of a batch still carry rows of weights; they are not part of the sentence.",
    covers="padded decoder steps holding real-looking rows, sharp and flat rows, one-step sentences, "
    "float32 and float64",
    defaults=_DEFAULTS,
    specs=[
        {"seed": 111, "tgt_valid_lens": [4, 2, 3]},
        {"seed": 112, "num_steps": 6, "tgt_valid_lens": [1, 6, 3], "scale": 6.0},
        {"seed": 113, "batch_size": 2, "num_keys": 7, "dtype": "float64", "tgt_valid_lens": [2, 4],
         "scale": 0.7},
        {"seed": 114, "batch_size": 4, "num_steps": 5},
    ],
    build=_weights_case,
    call=lambda answer, i: answer(i["weights"], i["tgt_valid_lens"]),
    reference=_concentration_reference,
    mistakes=[
        Mistake(
            "The padded decoder steps were counted: a batch's padded steps still hold rows of weights, so "
            "keep only the steps t < tgt_valid_lens before adding up each column.",
            lambda i: _concentration(i, steps="all"),
        ),
        Mistake(
            "That is the attention the top column received, not its share: divide it by all the attention "
            "of the real steps (one per real step).",
            lambda i: _concentration(i, share="none"),
        ),
        Mistake(
            "You divided by num_steps, the padded number of steps: the share is of the real steps' "
            "attention only.",
            lambda i: _concentration(i, share="num_steps"),
        ),
        Mistake(
            "That is the mean over steps of each row's largest weight (how sharp the rows are): the "
            "concentration adds up each column first, so sharp rows on different words give a low value.",
            lambda i: _concentration(i, reduce="row_peak"),
        ),
        Mistake(
            "You took the mean column (always 1 / num_keys of the mass) where the largest column is needed.",
            lambda i: _concentration(i, reduce="mean"),
        ),
        Mistake(
            "You returned which position is the most attended (an index): return its share of the attention.",
            lambda i: _concentration(i, reduce="argmax"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor|The size of tensor a",
            "tgt_valid_lens has one length per sentence (batch_size,): compare it with the step positions "
            "0..num_steps-1 to get a (batch_size, num_steps) mask, then give it a key axis.",
        ),
    ],
    package=["attn_course.diagnostics.attention_concentration", "attn_course.diagnostics.diagnose"],
)
