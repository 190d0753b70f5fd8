"""Chapter 10's exercises, diagnosing attention from its weights alone: the mean normalised entropy of a
batch's real decoder steps (ch10.q1), the mean concentration of its sentences (ch10.q2), and the verdict on a
model from both, healthy, frozen or lazy (ch10.q3).

Every case is one generated set of sentences of one kind -- healthy (each step peaks on its own word), frozen
(near-uniform rows) or lazy (every step on <eos>) -- shown five ways: [0] as a decoder gives it (float32, rows
summing to 1, zeros on the padding), [1] with leftovers on the padded keys and steps (an unmasked softmax),
[2] with every real row scaled by its own positive factor, [3] in float16 and [4] in bfloat16. The learner's
function runs on each; the output is the five results, so a message says which presentation differs. The
references are `attn_course.measure.diagnostics` on the rows cleaned and normalised over the real keys; each
mistake is written as the wrong answer that makes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import Any

import torch

from attn_course_exercises.ch9_dynamics import TENSOR_NUMBER_HINT, no_tensor_numbers
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course_exercises.inputs import spec_generator, spec_lengths, spec_size

_PACKAGE = [
    "attn_course.measure.diagnostics.attention_entropy",
    "attn_course.measure.diagnostics.mean_entropy",
    "attn_course.measure.diagnostics.attention_concentration",
    "attn_course.measure.diagnostics.diagnose",
]
_VIEWS = ("as given", "leftovers on the padding", "rows rescaled", "float16", "bfloat16")
_VERDICTS = {"looking": "healthy", "near-uniform": "frozen", "collapsed": "lazy"}
#: The dtype each presentation's number is compared in: a half-precision view's result is judged to its
#: dtype's tolerance, so an answer computed in that dtype passes as long as it is not NaN.
_OUT_DTYPES = (torch.float32, torch.float32, torch.float32, torch.float16, torch.bfloat16)


def _names(what: str) -> tuple[str, ...]:
    """`what` of each presentation, for messages: "the mean concentration of [3] float16"."""
    return tuple(f"{what} of [{i}] {view}" for i, view in enumerate(_VIEWS))


def _as_output(results: list[Any]) -> tuple[Any, ...]:
    """Five results as the check compares them: verdicts as they are, numbers as 0-dim tensors."""
    if any(isinstance(r, str) for r in results):
        return tuple(results)
    return tuple(torch.tensor(float(r), dtype=d) for r, d in zip(results, _OUT_DTYPES, strict=True))


# ----------------------------------------------------------------------------------------------------
# The weight sets


def _real_masks(src: torch.Tensor, tgt: torch.Tensor, num_steps: int, num_keys: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch, num_steps, 1) real steps and (batch, 1, num_keys) real keys, bool."""
    steps = torch.arange(num_steps)[None, :, None] < tgt[:, None, None]
    keys = torch.arange(num_keys)[None, None, :] < src[:, None, None]
    return steps, keys


def _scores(kind: str, gen: torch.Generator, steps: int, keys: int) -> torch.Tensor:
    """The scores (steps, keys) of one sentence of `kind`, float64."""
    noise = torch.randn(steps, keys, generator=gen, dtype=torch.float64)
    if kind == "frozen":
        return 0.05 * noise
    if kind == "lazy":
        scores = 0.5 * noise
        scores[:, -1] += 4.0                                            # <eos>, the last real key
        return scores
    centre = torch.linspace(keys - 1, 0, steps, dtype=torch.float64)    # reversed order, as in a reversal
    position = torch.arange(keys, dtype=torch.float64)
    return -1.5 * (position[None] - centre[:, None]) ** 2 + 0.3 * noise


def _views(clean: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, gen: torch.Generator
           ) -> list[torch.Tensor]:
    """The five presentations of clean float64 weights (rows summing to 1, zeros on the padding)."""
    batch, num_steps, num_keys = clean.shape
    real_steps, real_keys = _real_masks(src, tgt, num_steps, num_keys)
    leftover = 0.6 + 0.2 * torch.rand(batch, 1, 1, generator=gen, dtype=torch.float64)
    first_pad = torch.arange(num_keys)[None, None, :] == src[:, None, None]
    junk = clean * (1 - leftover) + leftover * first_pad * real_steps         # real rows: weight on a pad
    junk = torch.where(real_steps, junk, torch.zeros_like(junk))
    junk[..., 0] += (~real_steps[..., 0]).double()                            # padded steps: one-hot on key 0
    factors = torch.exp(torch.empty(batch, num_steps, 1, dtype=torch.float64).uniform_(-3.0, -0.7,
                                                                                        generator=gen))
    scaled = clean * factors
    return [clean.float(), junk.float(), scaled.float(), clean.half(), clean.bfloat16()]


def _set_builder(names: str | tuple[str, ...]) -> Callable[[dict[str, Any]], Case]:
    """The case builder of an exercise whose output is called `names`."""
    return lambda spec: _set_case(spec, names)


def _set_case(spec: dict[str, Any], names: str | tuple[str, ...]) -> Case:
    gen, kind = spec_generator(spec), spec["kind"]
    if kind not in ("healthy", "frozen", "lazy"):
        raise ValueError(f"kind must be 'healthy', 'frozen' or 'lazy', got {kind!r}")
    batch = spec_size(spec, "batch_size")
    most_keys, most_steps = spec_size(spec, "num_keys"), spec_size(spec, "num_steps")
    src = spec_lengths(spec["src_valid_lens"], (batch,), most_keys, gen, "src_valid_lens",
                       low=spec_size(spec, "min_keys"))
    tgt = spec_lengths(spec["tgt_valid_lens"], (batch,), most_steps, gen, "tgt_valid_lens",
                       low=spec_size(spec, "min_steps"))
    num_steps, num_keys = int(tgt.max()) + 1, int(src.max()) + 1          # every sentence has padding
    clean = torch.zeros(batch, num_steps, num_keys, dtype=torch.float64)
    for b, (s, t) in enumerate(zip(src.tolist(), tgt.tolist(), strict=True)):
        clean[b, :t, :s] = torch.softmax(_scores(kind, gen, t, s), dim=-1)
    views = _views(clean, src, tgt, gen)
    label = (f"{batch} sentences of {kind} attention, weights {tuple(clean.shape)}, src_valid_lens "
             f"{src.tolist()}, tgt_valid_lens {tgt.tolist()}; shown five ways: "
             + ", ".join(f"[{i}] {name}" for i, name in enumerate(_VIEWS)))
    return Case(label, {"views": views, "src_valid_lens": src, "tgt_valid_lens": tgt}, spec, names)


def _cleaned(weights: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """float64 weights with the padded steps and keys zeroed, each real row divided by its total over the
    real keys: what the package's diagnostics expect."""
    real_steps, real_keys = _real_masks(src, tgt, *weights.shape[1:])
    w = weights.double() * real_steps * real_keys
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp_min(1e-300), w)


def _each_view(summary: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    """A function of one presentation, applied to all five (`_as_output`)."""

    def run(inputs: dict[str, Any]) -> Any:
        src, tgt = inputs["src_valid_lens"], inputs["tgt_valid_lens"]
        return _as_output([summary(view, src, tgt, index) for index, view in enumerate(inputs["views"])])

    return run


def _learner_call(name: str) -> Callable[[Any, dict[str, Any]], Any]:
    """Run the learner's function on every presentation; numbers must be Python numbers."""

    def call(answer: Any, inputs: dict[str, Any]) -> Any:
        src, tgt = inputs["src_valid_lens"], inputs["tgt_valid_lens"]
        results = []
        for view in inputs["views"]:
            result = no_tensor_numbers(answer(view, src, tgt), name)
            if isinstance(result, str):
                results.append(result)
            elif isinstance(result, Real) and not isinstance(result, bool):
                results.append(float(result))
            else:
                raise TypeError(f"{name} returned {type(result).__name__}, expected a Python float or str")
        return _as_output(results)

    return call


# ---------------------------------------------------------------------------------------------- ch10.q1


# The mistakes of ch10.q1 to ch10.q3, each written as a learner writes it. The helpers are the parts such an
# answer gets right: the real steps and keys, each real row made a distribution over the real keys, each
# step's entropy divided by log(src_valid_len) (0 for one key), and chapter 10's rule.
def _real(weights, src_valid_lens, tgt_valid_lens):
    positions = torch.arange(max(weights.shape[1:]), device=weights.device)
    steps = positions[None, : weights.shape[1]] < tgt_valid_lens[:, None]
    keys = positions[None, None, : weights.shape[2]] < src_valid_lens[:, None, None]
    return steps, keys


def _distributions(w, keys):
    w = torch.where(keys, w.double(), 0.0)
    return w / w.sum(-1, keepdim=True).clamp_min(1e-300)


def _normalised(h, src_valid_lens):
    most = src_valid_lens.double().log()[:, None]
    return torch.where(most > 0, h / most.clamp_min(1e-300), 0.0)


def _rule(h, c):
    if c >= 0.6:
        return "lazy"
    return "frozen" if h >= 0.9 else "healthy"


def _entropy(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)
    return _normalised(-torch.special.xlogy(p, p).sum(-1), src_valid_lens)[steps].mean().item()


def entropy_rows_as_given(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = torch.where(keys, weights.double(), 0.0)
    return _normalised(-torch.special.xlogy(p, p).sum(-1), src_valid_lens)[steps].mean().item()


def entropy_padded_keys(weights, src_valid_lens, tgt_valid_lens):
    steps, _ = _real(weights, src_valid_lens, tgt_valid_lens)
    p = weights.double() / weights.double().sum(-1, keepdim=True).clamp_min(1e-300)
    return _normalised(-torch.special.xlogy(p, p).sum(-1), src_valid_lens)[steps].mean().item()


def entropy_padded_steps(weights, src_valid_lens, tgt_valid_lens):
    _, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)
    return _normalised(-torch.special.xlogy(p, p).sum(-1), src_valid_lens).mean().item()


def entropy_over_log_num_keys(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)
    return (-torch.special.xlogy(p, p).sum(-1) / math.log(weights.shape[-1]))[steps].mean().item()


def entropy_not_normalised(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)
    return (-torch.special.xlogy(p, p).sum(-1))[steps].mean().item()


def entropy_per_sentence(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)
    h = _normalised(-torch.special.xlogy(p, p).sum(-1), src_valid_lens) * steps
    return (h.sum(1) / steps.sum(1)).mean().item()


def entropy_one_key_nan(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)
    return (-torch.special.xlogy(p, p).sum(-1) / src_valid_lens.double().log()[:, None])[steps].mean().item()


def entropy_epsilon_in_half(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    w = torch.where(keys, weights, 0.0)                             # still in the weights' own dtype
    p = w / w.sum(-1, keepdim=True)
    h = -(p * torch.log(p + 1e-12)).sum(-1).double()
    return _normalised(h, src_valid_lens)[steps].mean().item()


def _entropy_reference(view: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, index: int) -> float:
    mean_entropy = resolve("attn_course.measure.diagnostics.mean_entropy")
    return mean_entropy(_cleaned(view, src, tgt), src, tgt, normalise=True)


_DEFAULTS = {"seed": 0, "kind": "healthy", "batch_size": 4, "num_keys": 9, "num_steps": 9, "min_keys": 4,
             "min_steps": 3, "src_valid_lens": "random", "tgt_valid_lens": "random"}


MEAN_ENTROPY = Exercise(
    "ch10.q1",
    "mean_normalised_entropy",
    "How undecided is the attention? The mean normalised entropy of a batch's real decoder steps",
    solution='''
def mean_normalised_entropy(weights, src_valid_lens, tgt_valid_lens):
    """The mean, over every real decoder step of the batch, of the step's entropy over its sentence's real
    keys divided by log(src_valid_len): 1 for uniform rows, 0 for one-hot rows (0 log 0 = 0; a sentence of
    one real key counts 0). Each real row is first divided by its total over the real keys.

    weights: (batch_size, num_steps, num_keys), non-negative, any floating dtype; padded keys
    (>= src_valid_lens) and padded steps (>= tgt_valid_lens) may hold anything and are ignored;
    src_valid_lens, tgt_valid_lens: (batch_size,) long >= 1. Returns a Python float.
    """
    w = weights.double()                                                    # half precision: no log(0) NaN
    steps = torch.arange(w.shape[1], device=w.device)[None, :] < tgt_valid_lens[:, None]      # (B, T)
    keys = torch.arange(w.shape[2], device=w.device)[None, None, :] < src_valid_lens[:, None, None]
    w = torch.where(keys, w, 0.0)
    p = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-300)                   # each row a distribution
    entropy = -torch.where(p > 0, p * p.clamp_min(1e-300).log(), 0.0).sum(dim=-1)              # (B, T)
    most = src_valid_lens.double().log()[:, None]                           # log S, 0 for one key
    normalised = torch.where(most > 0, entropy / most.clamp_min(1e-300), 0.0)
    return normalised[steps].mean().item()
''',
    hint="Work row by row: make each real row a distribution over its sentence's real keys before anything "
    "else, and keep every logarithm away from a weight of 0, in a precision where small weights are not 0. "
    "The mean is over all the real steps of the batch, each counted once; the padding never enters.",
    covers="healthy, frozen and lazy sets; leftovers on the padded keys and steps; rows that do not sum "
           "to 1; "
    "float16 and bfloat16; a sentence of one real key; sentences of different lengths",
    defaults=_DEFAULTS,
    specs=[
        {"seed": 201, "tgt_valid_lens": [9, 3, 5, 4]},
        {"seed": 202, "kind": "frozen", "batch_size": 3, "src_valid_lens": [8, 1, 5], "min_keys": 1},
        {"seed": 203, "kind": "lazy", "batch_size": 5},
        {"seed": 204, "batch_size": 2, "num_keys": 12, "num_steps": 12, "src_valid_lens": [12, 6],
         "tgt_valid_lens": [3, 12]},
    ],
    build=_set_builder(_names("the mean normalised entropy")),
    call=_learner_call("mean_normalised_entropy"),
    reference=_each_view(_entropy_reference),
    mistakes=[
        Mistake("The rows were used as they are: a real row need not sum to 1 over the real keys (leftovers "
                "on the padding, a scale factor), and -sum p log p is an entropy only for a distribution. "
                "Divide each real row by its total over the real keys first.",
                wrong=entropy_rows_as_given),
        Mistake("The padded keys counted: a row's leftovers on positions >= src_valid_lens are not part "
                "of the "
                "sentence. Keep only the real keys, then make the row a distribution over them.",
                wrong=entropy_padded_keys),
        Mistake("The padded decoder steps counted in the mean: average over the steps t < "
                "tgt_valid_lens only.",
                wrong=entropy_padded_steps),
        Mistake("You divided by log(num_keys), the padded width: the most a step can have is the log of its "
                "sentence's real keys, log(src_valid_lens).",
                wrong=entropy_over_log_num_keys),
        Mistake("Not normalised: that is the entropy in nats; divide each step's entropy by "
                "log(src_valid_lens) "
                "so that uniform rows give 1 whatever the sentence's length.",
                wrong=entropy_not_normalised),
        Mistake("You averaged per sentence, then over sentences: the mean is over all the real steps of the "
                "batch, each step counted once (a long sentence weighs more).",
                wrong=entropy_per_sentence),
        Mistake("A sentence of one real key gives 0 / log(1) = 0 / 0 = NaN: it has nothing to choose "
                "between, "
                "so its steps count 0.",
                wrong=entropy_one_key_nan),
        Mistake("NaN on the half-precision weights: in float16 and bfloat16 a tiny epsilon such as "
                "1e-12 is 0, "
                "so log(w + eps) is still log(0) where w is 0. Compute in float64 (or float32), and use the "
                "log only where the weight is positive.",
                wrong=entropy_epsilon_in_half),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(r"expected a Python float", "Return one Python float: the mean over the batch's real "
                                              "steps."),
        ErrorHint(r"Expected all tensors to be on the same device",
                  "A tensor was made on another device than the weights: create new tensors on "
                  "the weights' device."),
    ],
    package=_PACKAGE,
)


# ---------------------------------------------------------------------------------------------- ch10.q2


def _top_share(p):
    column = p.sum(1)                                                   # (batch, num_keys)
    return column.max(-1).values / column.sum(-1)


def _concentration(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    return _top_share(_distributions(weights, keys & steps[..., None])).mean().item()


def concentration_padded_steps(weights, src_valid_lens, tgt_valid_lens):
    _, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    return _top_share(_distributions(weights, keys)).mean().item()


def concentration_padded_keys(weights, src_valid_lens, tgt_valid_lens):
    steps, _ = _real(weights, src_valid_lens, tgt_valid_lens)
    return _top_share(_distributions(weights, steps[..., None])).mean().item()


def concentration_rows_as_given(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    return _top_share(torch.where(keys & steps[..., None], weights.double(), 0.0)).mean().item()


def concentration_row_peaks(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    peaks = _distributions(weights, keys & steps[..., None]).max(-1).values
    return ((peaks * steps).sum(1) / tgt_valid_lens).mean().item()


def concentration_over_num_steps(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    column = _distributions(weights, keys & steps[..., None]).sum(1)
    return (column.max(-1).values / weights.shape[1]).mean().item()


def concentration_pooled(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    column = _distributions(weights, keys & steps[..., None]).sum(1)
    return (column.max(-1).values.sum() / column.sum()).item()


def _concentration_reference(view: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, index: int) -> float:
    concentration = resolve("attn_course.measure.diagnostics.attention_concentration")
    return float(concentration(_cleaned(view, src, tgt), src, tgt).mean())


MEAN_CONCENTRATION = Exercise(
    "ch10.q2",
    "mean_concentration",
    "Is the attention lazy? The mean concentration of a batch's sentences",
    solution='''
def mean_concentration(weights, src_valid_lens, tgt_valid_lens):
    """The mean, over the sentences of the batch, of the largest share of a sentence's attention that one
    source position receives: C = max_j sum_{t real} p_tj / sum_{t real} sum_{j real} p_tj, where p is each
    real row divided by its total over the real keys (1/S for a diagonal alignment, 1 for a lazy model).

    weights: (batch_size, num_steps, num_keys), non-negative, any floating dtype; padded keys
    (>= src_valid_lens) and padded steps (>= tgt_valid_lens) may hold anything and are ignored;
    src_valid_lens, tgt_valid_lens: (batch_size,) long >= 1. Returns a Python float.
    """
    w = weights.double()
    steps = torch.arange(w.shape[1], device=w.device)[None, :, None] < tgt_valid_lens[:, None, None]
    keys = torch.arange(w.shape[2], device=w.device)[None, None, :] < src_valid_lens[:, None, None]
    w = torch.where(steps & keys, w, 0.0)
    p = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-300)                   # padded steps stay 0
    column = p.sum(dim=1)                                                   # (B, num_keys)
    return (column.max(dim=-1).values / column.sum(dim=-1)).mean().item()
''',
    hint="Think in columns: how much of a sentence's attention did each real source position receive from "
    "the sentence's real steps, once every real row is a distribution over the real keys? Compare the "
    "best-served position with all of it, sentence by sentence, then average the sentences.",
    covers="healthy, frozen and lazy sets; leftovers on the padded keys and steps; rows that do not sum "
           "to 1; "
    "float16 and bfloat16; sentences of different lengths",
    defaults=_DEFAULTS,
    specs=[
        {"seed": 211, "tgt_valid_lens": [9, 3, 5, 4]},
        {"seed": 212, "kind": "lazy", "batch_size": 3},
        {"seed": 213, "kind": "frozen", "batch_size": 5},
        {"seed": 214, "batch_size": 3, "num_keys": 12, "num_steps": 12, "min_keys": 1, "min_steps": 1,
         "src_valid_lens": [12, 6, 2],
         "tgt_valid_lens": [2, 12, 7]},
    ],
    build=_set_builder(_names("the mean concentration")),
    call=_learner_call("mean_concentration"),
    reference=_each_view(_concentration_reference),
    mistakes=[
        Mistake("The padded decoder steps counted: their rows hold weights too, so keep only the steps "
                "t < tgt_valid_lens before adding up each column.",
                wrong=concentration_padded_steps),
        Mistake("The padded keys counted: a leftover column at a position >= src_valid_lens is not a source "
                "word; keep only the real keys, and make each real row a distribution over them.",
                wrong=concentration_padded_keys),
        Mistake("The rows were used as they are: a real row need not sum to 1 over the real keys, so a "
                "row with "
                "more mass weighs more in the columns. Divide each real row by its total first.",
                wrong=concentration_rows_as_given),
        Mistake("That is the mean over steps of each row's largest weight (how sharp the rows are): the "
                "concentration adds up each column first, so sharp rows on different words give a low value.",
                wrong=concentration_row_peaks),
        Mistake("You divided by num_steps, the padded number of steps: the share is of the sentence's real "
                "steps' attention only.",
                wrong=concentration_over_num_steps),
        Mistake("The batch was pooled (all the top columns over all the attention): the concentration is a "
                "share per sentence, then the mean over the sentences.",
                wrong=concentration_pooled),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(r"expected a Python float",
                  "Return one Python float: the mean over the batch's sentences of each one's "
                  "concentration."),
        ErrorHint(r"Expected all tensors to be on the same device",
                  "A tensor was made on another device than the weights: create new tensors on "
                  "the weights' device."),
    ],
    package=_PACKAGE,
)


# ---------------------------------------------------------------------------------------------- ch10.q3


def _diagnosis_reference(view: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, index: int) -> str:
    diagnose = resolve("attn_course.measure.diagnostics.diagnose")
    return _VERDICTS[diagnose(_cleaned(view, src, tgt), src, tgt).verdict]


_PADDED_STEPS_VERDICT = ("The padded decoder steps changed the verdict: their rows hold leftovers, so "
                         "use only "
                         "the steps t < tgt_valid_lens.")


def diagnosis_entropy_alone(weights, src_valid_lens, tgt_valid_lens):
    return "frozen" if _entropy(weights, src_valid_lens, tgt_valid_lens) >= 0.9 else "healthy"


def diagnosis_concentration_alone(weights, src_valid_lens, tgt_valid_lens):
    return "lazy" if _concentration(weights, src_valid_lens, tgt_valid_lens) >= 0.6 else "healthy"


def diagnosis_swapped(weights, src_valid_lens, tgt_valid_lens):
    h = _entropy(weights, src_valid_lens, tgt_valid_lens)
    c = _concentration(weights, src_valid_lens, tgt_valid_lens)
    if c >= 0.6:
        return "frozen"
    return "lazy" if h >= 0.9 else "healthy"


def diagnosis_in_the_packages_words(weights, src_valid_lens, tgt_valid_lens):
    h = _entropy(weights, src_valid_lens, tgt_valid_lens)
    c = _concentration(weights, src_valid_lens, tgt_valid_lens)
    if c >= 0.6:
        return "collapsed"
    return "near-uniform" if h >= 0.9 else "looking"


def diagnosis_padded_steps(weights, src_valid_lens, tgt_valid_lens):
    return _rule(entropy_padded_steps(weights, src_valid_lens, tgt_valid_lens),
                 concentration_padded_steps(weights, src_valid_lens, tgt_valid_lens))


def diagnosis_padded_steps_in_the_columns(weights, src_valid_lens, tgt_valid_lens):
    return _rule(_entropy(weights, src_valid_lens, tgt_valid_lens),
                 concentration_padded_steps(weights, src_valid_lens, tgt_valid_lens))


def diagnosis_padded_keys(weights, src_valid_lens, tgt_valid_lens):
    return _rule(entropy_padded_keys(weights, src_valid_lens, tgt_valid_lens),
                 concentration_padded_keys(weights, src_valid_lens, tgt_valid_lens))


def diagnosis_rows_as_given(weights, src_valid_lens, tgt_valid_lens):
    return _rule(entropy_rows_as_given(weights, src_valid_lens, tgt_valid_lens),
                 concentration_rows_as_given(weights, src_valid_lens, tgt_valid_lens))


def diagnosis_epsilon_in_half(weights, src_valid_lens, tgt_valid_lens):
    return _rule(entropy_epsilon_in_half(weights, src_valid_lens, tgt_valid_lens),
                 _concentration(weights, src_valid_lens, tgt_valid_lens))


DIAGNOSIS = Exercise(
    "ch10.q3",
    "diagnose_attention",
    "Healthy, frozen or lazy? A model's attention diagnosed from its weights",
    solution='''
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    """"healthy", "frozen" (near-uniform rows: attention that has not learned to look) or "lazy" (most of
    every sentence's attention on one position), from the weights of a batch as in ch10.q1 and ch10.q2.

    Thresholds from chapter 10: lazy when the mean concentration is at least 0.6 (far above the 1/S of an
    alignment), else frozen when the mean normalised entropy is at least 0.9, else healthy.
    weights: (batch_size, num_steps, num_keys), non-negative, any floating dtype, the padding ignored;
    src_valid_lens, tgt_valid_lens: (batch_size,) long >= 1. Returns a str.
    """
    w = weights.double()
    steps = torch.arange(w.shape[1], device=w.device)[None, :, None] < tgt_valid_lens[:, None, None]
    keys = torch.arange(w.shape[2], device=w.device)[None, None, :] < src_valid_lens[:, None, None]
    w = torch.where(steps & keys, w, 0.0)
    p = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-300)                  # real rows: distributions
    column = p.sum(dim=1)
    concentration = (column.max(dim=-1).values / column.sum(dim=-1)).mean().item()
    entropy = -torch.special.xlogy(p, p).sum(dim=-1)                        # (B, T), 0 on padded steps
    most = src_valid_lens.double().log()[:, None]
    normalised = torch.where(most > 0, entropy / most.clamp_min(1e-300), 0.0)
    mean_entropy = normalised[steps[..., 0]].mean().item()
    if concentration >= 0.6:
        return "lazy"
    return "frozen" if mean_entropy >= 0.9 else "healthy"
''',
    hint="One number alone cannot separate the three: think about which of them a lazy model and a "
         "frozen one "
    "each push to an extreme, and what a healthy model's two numbers look like in chapter 10's tables. Your "
    "two functions above (or the same computations) give the numbers; the padding, the rows' scale and the "
    "dtype must not change the verdict.",
    covers="healthy, frozen and lazy sets of 3 to 6 sentences; leftovers on the padded keys and steps; rows "
    "that do not sum to 1; float16 and bfloat16; sentences of very different lengths",
    defaults=dict(_DEFAULTS, batch_size=5),
    specs=[
        {"seed": 221, "kind": "healthy", "tgt_valid_lens": [9, 3, 4, 3, 4]},
        {"seed": 222, "kind": "frozen", "tgt_valid_lens": [9, 3, 4, 3, 4]},
        {"seed": 223, "kind": "lazy"},
        {"seed": 224, "kind": "healthy", "batch_size": 3, "num_keys": 12, "num_steps": 12},
        {"seed": 225, "kind": "frozen", "batch_size": 6},
        {"seed": 226, "kind": "lazy", "batch_size": 4, "min_steps": 2, "tgt_valid_lens": [9, 2, 3, 2]},
    ],
    build=_set_builder(tuple(name.replace(" of [", " on [") for name in _names("the verdict"))),
    call=_learner_call("diagnose_attention"),
    reference=_each_view(_diagnosis_reference),
    mistakes=[
        Mistake("A verdict from the entropy alone: a lazy model's rows are sharp too (every step is sure, of "
                "the same word), so low entropy cannot tell lazy from healthy; the concentration can.",
                wrong=diagnosis_entropy_alone),
        Mistake("A verdict from the concentration alone: uniform rows spread the attention as evenly as a "
                "moving alignment (1/S on the diagonal), so it cannot tell frozen from healthy; the entropy "
                "can.",
                wrong=diagnosis_concentration_alone),
        Mistake("Frozen and lazy are swapped: frozen attention is near uniform (high entropy), lazy "
                "attention "
                "piles onto one position (high concentration).",
                wrong=diagnosis_swapped),
        Mistake("Those are the package's words (looking, near-uniform, collapsed): answer with 'healthy', "
                "'frozen' or 'lazy'.",
                wrong=diagnosis_in_the_packages_words),
        Mistake(_PADDED_STEPS_VERDICT, wrong=diagnosis_padded_steps),
        Mistake(_PADDED_STEPS_VERDICT, wrong=diagnosis_padded_steps_in_the_columns),
        Mistake("The padded keys changed the verdict: leftovers on positions >= src_valid_lens are not "
                "source "
                "words; use only the real keys, and make each real row a distribution over them.",
                wrong=diagnosis_padded_keys),
        Mistake("Rows that do not sum to 1 changed the verdict: divide each real row by its total over "
                "the real "
                "keys before measuring it.",
                wrong=diagnosis_rows_as_given),
        Mistake("The half-precision weights changed the verdict (a NaN entropy: log(0) where a tiny epsilon "
                "rounds to 0 in float16 and bfloat16): compute in float64 or float32.",
                wrong=diagnosis_epsilon_in_half),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(r"expected a Python float or str",
                  'Return one of the three words "healthy", "frozen" or "lazy", as a str.'),
        ErrorHint(r"Expected all tensors to be on the same device",
                  "A tensor was made on another device than the weights: create new tensors on "
                  "the weights' device."),
        ErrorHint(r"NameError: name '(mean_normalised_entropy|mean_concentration)' is not defined",
                  "Your diagnosis calls a function of ch10.q1 or ch10.q2 that is not defined: run its cell "
                  "first (the grader runs every exercise cell of the notebook, in order)."),
    ],
    package=_PACKAGE,
)
