"""Chapter 10's exercises, diagnosing attention from its weights alone: the mean normalised entropy of a
batch's real decoder steps (ch10.q1), the mean concentration of its sentences (ch10.q2), the verdict on a
model from both, healthy, frozen or lazy, with thresholds the learner chooses (ch10.q3), and a prediction
written down before measuring three batches where one number, or a mean, misleads (ch10.q4).

Every case of ch10.q1 to ch10.q3 is one generated set of sentences of one kind -- healthy (each step peaks
on its own word), sharp (each step nearly one-hot on its own word), frozen (near-uniform rows), lazy (every
step on <eos>) or stuck (every step nearly one-hot on one word that is not <eos>) -- shown five ways: [0] as a
decoder gives it (float32, rows summing to 1, zeros on the padding), [1] with leftovers on the padded keys
and steps (an unmasked softmax), [2] with every real row scaled by its own positive factor, [3] in float16 and
[4] in bfloat16. The learner's function runs on each; the output is the five results, so a message says which
presentation differs. Every number is judged to float32's precision, half-precision presentations included:
an answer computed in float16 or bfloat16 is off in the third digit, and is named so. The references are
`attn_course.measure.diagnostics` on the rows cleaned and normalised over the real keys; each mistake is
written as the wrong answer that makes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import torch

from attn_course_exercises.ch9_dynamics import TENSOR_NUMBER_HINT, no_tensor_numbers
from attn_course_exercises.core import (
    FAILED,
    Case,
    CheckResult,
    ErrorHint,
    Exercise,
    Mistake,
    compare,
    edit_of,
    resolve,
)
from attn_course_exercises.inputs import spec_generator, spec_lengths, spec_size

_PACKAGE = [
    "attn_course.measure.diagnostics.attention_entropy",
    "attn_course.measure.diagnostics.mean_entropy",
    "attn_course.measure.diagnostics.attention_concentration",
    "attn_course.measure.diagnostics.diagnose",
]
_VIEWS = ("as given", "leftovers on the padding", "rows rescaled", "float16", "bfloat16")
#: The dtype of each presentation's weights.
_VIEW_DTYPES = (torch.float32, torch.float32, torch.float32, torch.float16, torch.bfloat16)
_VERDICTS = {"looking": "healthy", "near-uniform": "frozen", "collapsed": "lazy"}
#: The verdict each kind of generated set must get.
KINDS = {"healthy": "healthy", "sharp": "healthy", "frozen": "frozen", "lazy": "lazy", "stuck": "lazy"}
_KIND_WORDS = {
    "healthy": "healthy attention",
    "sharp": "sharp healthy attention (rows nearly one-hot, each on its own word)",
    "frozen": "frozen attention",
    "lazy": "lazy attention (on <eos>)",
    "stuck": "lazy attention stuck on one word that is not <eos> (rows nearly one-hot)",
}
#: The dtype every presentation's number is compared in: float32's precision, so that an answer computed in
#: half precision (three digits) is told apart from one computed in float32 or float64 from the same weights.
_OUT_DTYPES = (torch.float32,) * len(_VIEWS)


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
    if kind == "stuck":  # one word, not <eos>, for every step
        scores = 0.5 * noise
        scores[:, int(torch.randint(0, max(keys - 1, 1), (), generator=gen))] += 30.0
        return scores
    centre = torch.linspace(keys - 1, 0, steps, dtype=torch.float64)  # reversed order, as in a reversal
    position = torch.arange(keys, dtype=torch.float64)
    if kind == "sharp":  # a strict alignment, learned
        return -40.0 * (position[None] - centre[:, None].round()) ** 2 + 0.3 * noise
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
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
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
    label = (
        f"{batch} sentences of {_KIND_WORDS[kind]}, weights {tuple(clean.shape)}, src_valid_lens "
        f"{src.tolist()}, tgt_valid_lens {tgt.tolist()}; shown five ways: "
        + ", ".join(f"[{i}] {name}" for i, name in enumerate(_VIEWS))
    )
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


class Presentations(Exercise):
    """ch10.q1 and ch10.q2: an Exercise whose precision mistakes (`precision`: (mistake, the dtype it computes
    each presentation in) pairs, the mistakes listed among `mistakes` too) are named by their rounding.

    An answer computed in half precision is off by its rounding, which no two implementations share, so its
    output never equals the mistake's to float32's precision. Where no known mistake explains a failure, a
    precision mistake is named when, on every case that ran, each presentation the answer gets wrong is one
    the mistake computes in half precision, and there agrees with the reference to that dtype's precision.
    """

    def __init__(self, *args: Any, precision: Sequence[tuple[Mistake, Sequence[torch.dtype]]],
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.precision = tuple((mistake, tuple(dtypes)) for mistake, dtypes in precision)

    def judge(self, cases: Sequence[Case], attempts: Sequence[Mapping[str, Any]]) -> CheckResult:
        """Exercise.judge, with a failure no known mistake explains read as rounding where it is one."""
        result = super().judge(cases, attempts)
        named = any(result.message.startswith(m.hint + "\n") for m in self.mistakes)
        if result.status != FAILED or named or not all(a.get("status") == "ok" for a in attempts):
            return result
        for mistake, dtypes in self.precision:
            shown = self._rounding_case(dtypes, cases, attempts)
            if shown is not None:
                message = (f"{mistake.hint}\nFailing case: {cases[shown].label}. ({result.cases_passed} of "
                           f"{result.cases_total} cases pass.)")
                return self._result(FAILED, message, result.cases_passed, result.cases_total)
        return result

    def _rounding_case(self, dtypes: Sequence[torch.dtype], cases: Sequence[Case],
                       attempts: Sequence[Mapping[str, Any]]) -> int | None:
        """The first failing case if computing each presentation in `dtypes` explains every failing case."""
        shown = None
        for index, (case, att) in enumerate(zip(cases, attempts, strict=True)):
            expected, got = self.reference(_clone_inputs(case)), att["output"]
            if not (isinstance(got, tuple) and len(got) == len(expected)):
                return None
            for i in _differing(expected, got):
                half = dtypes[i] in (torch.float16, torch.bfloat16)
                if not half or compare(expected[i].to(dtypes[i]), got[i].to(dtypes[i])) is not None:
                    return None
                shown = index if shown is None else shown
        return shown


def _differing(expected: Sequence[Any], output: Sequence[Any]) -> list[int]:
    """The presentations whose result in `output` differs from the expected one (float32's precision)."""
    return [i for i, (e, o) in enumerate(zip(expected, output, strict=True)) if compare(e, o) is not None]


def _clone_inputs(case: Case) -> dict[str, Any]:
    """A copy of a case's inputs that an answer may change without changing the case."""
    return {
        k: [v.clone() for v in value]
        if isinstance(value, list)
        else value.clone()
        if isinstance(value, torch.Tensor)
        else value
        for k, value in case.inputs.items()
    }


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


def entropy_without_the_zero_guard(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys)  # float64: no precision lost
    return _normalised(-(p * p.log()).sum(-1), src_valid_lens)[steps].mean().item()


def entropy_in_the_weights_dtype(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    w = torch.where(keys, weights, 0.0)  # float16 stays float16
    p = w / w.sum(-1, keepdim=True)
    h = -torch.special.xlogy(p, p).sum(-1)
    most = src_valid_lens.log().to(h.dtype)[:, None]
    return torch.where(most > 0, h / most.clamp_min(1e-3), 0.0)[steps].mean().item()


def entropy_in_bfloat16(weights, src_valid_lens, tgt_valid_lens):
    return entropy_in_the_weights_dtype(weights.bfloat16(), src_valid_lens, tgt_valid_lens)


def _entropy_reference(view: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, index: int) -> float:
    mean_entropy = resolve("attn_course.measure.diagnostics.mean_entropy")
    return mean_entropy(_cleaned(view, src, tgt), src, tgt, normalise=True)


_DEFAULTS = {"seed": 0, "kind": "healthy", "batch_size": 4, "num_keys": 9, "num_steps": 9, "min_keys": 4,
             "min_steps": 3, "src_valid_lens": "random", "tgt_valid_lens": "random"}


_OWN_DTYPE_HINT = (
    "Your results on the half-precision weights ([3] float16, [4] bfloat16) are off in the "
    "third digit, the others right: you computed in the weights' own dtype. bfloat16 keeps 8 "
    "bits of precision and float16 11, so every division, log and sum rounds to about three "
    "digits. Convert the weights to float32 or float64 before computing."
)
_BFLOAT16_HINT = (
    "Every result is off in the third digit: you computed in bfloat16, which keeps 8 bits of "
    "precision (about three digits), so every division, log and sum rounds. Compute in float32 "
    "or float64, whatever dtype the weights come in."
)
_ALL_BFLOAT16 = (torch.bfloat16,) * len(_VIEWS)
_ENTROPY_IN_THE_WEIGHTS_DTYPE = Mistake(_OWN_DTYPE_HINT, wrong=entropy_in_the_weights_dtype)
_ENTROPY_IN_BFLOAT16 = Mistake(_BFLOAT16_HINT, wrong=entropy_in_bfloat16)


MEAN_ENTROPY = Presentations(
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
    hint=(
        "Work row by row: make each real row a distribution over its sentence's real keys before anything "
        "else, and keep every logarithm away from a weight of 0, in a precision where small weights are not "
        "0. The mean is over all the real steps of the batch, each counted once; the padding never enters.",
        "Entropy is defined for a distribution, with 0 log 0 = 0: a weight of exactly 0 (a padded key you "
        "zeroed, a one-hot row, a weight that underflowed) adds nothing, yet its log is minus infinity, and "
        "0 times minus infinity is NaN. Half precision keeps 8 to 11 bits: a sum or a log computed in it is "
        "off in the third digit. And a sentence of one real key has log 1 = 0 to divide by: its steps "
        "count 0.",
        "Convert the weights to float64 first; zero the padded keys; divide each row by its total; take "
        "p log p only where p is positive (torch.special.xlogy does that); divide by the log of the "
        "sentence's real keys where it is above 0; average over the real steps only.",
    ),
    covers="healthy, sharp (nearly one-hot), frozen and lazy sets; leftovers on the padded keys and steps; "
    "rows that do not sum to 1; float16 and bfloat16, judged to float32's precision; a sentence of one real "
    "key; sentences of different lengths",
    defaults=_DEFAULTS,
    specs=[
        {"seed": 201, "tgt_valid_lens": [9, 3, 5, 4]},
        {"seed": 202, "kind": "frozen", "batch_size": 3, "src_valid_lens": [8, 1, 5], "min_keys": 1},
        {"seed": 203, "kind": "lazy", "batch_size": 5},
        {
            "seed": 204,
            "batch_size": 2,
            "num_keys": 12,
            "num_steps": 12,
            "src_valid_lens": [12, 6],
            "tgt_valid_lens": [3, 12],
        },
        {"seed": 205, "kind": "sharp", "batch_size": 3},
    ],
    build=_set_builder(_names("the mean normalised entropy")),
    call=_learner_call("mean_normalised_entropy"),
    reference=_each_view(_entropy_reference),
    mistakes=[
        Mistake(
            "The rows were used as they are: a real row need not sum to 1 over the real keys (leftovers "
            "on the padding, a scale factor), and -sum p log p is an entropy only for a distribution. "
            "Divide each real row by its total over the real keys first.",
            wrong=entropy_rows_as_given,
        ),
        Mistake(
            "The padded keys counted: a row's leftovers on positions >= src_valid_lens are not part "
            "of the "
            "sentence. Keep only the real keys, then make the row a distribution over them.",
            wrong=entropy_padded_keys,
        ),
        Mistake(
            "The padded decoder steps counted in the mean: average over the steps t < tgt_valid_lens only.",
            wrong=entropy_padded_steps,
        ),
        Mistake(
            "You divided by log(num_keys), the padded width: the most a step can have is the log of its "
            "sentence's real keys, log(src_valid_lens).",
            wrong=entropy_over_log_num_keys,
        ),
        Mistake(
            "Not normalised: that is the entropy in nats; divide each step's entropy by "
            "log(src_valid_lens) "
            "so that uniform rows give 1 whatever the sentence's length.",
            wrong=entropy_not_normalised,
        ),
        Mistake(
            "You averaged per sentence, then over sentences: the mean is over all the real steps of the "
            "batch, each step counted once (a long sentence weighs more).",
            wrong=entropy_per_sentence,
        ),
        Mistake(
            "A sentence of one real key gives 0 / log(1) = 0 / 0 = NaN: it has nothing to choose "
            "between, "
            "so its steps count 0.",
            wrong=entropy_one_key_nan,
        ),
        Mistake(
            "NaN on the half-precision weights: in float16 and bfloat16 a tiny epsilon such as "
            "1e-12 is 0, "
            "so log(w + eps) is still log(0) where w is 0. Compute in float64 (or float32), and use the "
            "log only where the weight is positive.",
            wrong=entropy_epsilon_in_half,
        ),
        Mistake(
            "NaN from 0 log 0: where a weight is exactly 0 (the padded keys you zeroed, a one-hot row, a "
            "weight that underflowed), log 0 is minus infinity and 0 times minus infinity is NaN, in any "
            "dtype. The entropy's convention is 0 log 0 = 0: take the log only where the weight is "
            "positive (torch.special.xlogy does that).",
            wrong=entropy_without_the_zero_guard,
        ),
        _ENTROPY_IN_THE_WEIGHTS_DTYPE,
        _ENTROPY_IN_BFLOAT16,
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
    precision=[(_ENTROPY_IN_THE_WEIGHTS_DTYPE, _VIEW_DTYPES), (_ENTROPY_IN_BFLOAT16, _ALL_BFLOAT16)],
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


def concentration_in_the_weights_dtype(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    w = torch.where(keys & steps[..., None], weights, 0.0)  # float16 stays float16
    column = (w / w.sum(-1, keepdim=True).clamp_min(1e-3)).sum(1)
    return (column.max(-1).values / column.sum(-1)).mean().item()


def concentration_in_bfloat16(weights, src_valid_lens, tgt_valid_lens):
    return concentration_in_the_weights_dtype(weights.bfloat16(), src_valid_lens, tgt_valid_lens)


def _concentration_reference(view: torch.Tensor, src: torch.Tensor, tgt: torch.Tensor, index: int) -> float:
    concentration = resolve("attn_course.measure.diagnostics.attention_concentration")
    return float(concentration(_cleaned(view, src, tgt), src, tgt).mean())


_CONCENTRATION_IN_THE_WEIGHTS_DTYPE = Mistake(_OWN_DTYPE_HINT, wrong=concentration_in_the_weights_dtype)
_CONCENTRATION_IN_BFLOAT16 = Mistake(_BFLOAT16_HINT, wrong=concentration_in_bfloat16)


MEAN_CONCENTRATION = Presentations(
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
    hint=(
        "Think in columns: how much of a sentence's attention did each real source position receive from the "
        "sentence's real steps, once every real row is a distribution over the real keys? Compare the "
        "best-served position with all of it, sentence by sentence, then average the sentences.",
        "A share is a ratio of the sentence's own numbers: the largest column's total over the total of all "
        "its real columns, which is its number of real steps once each row sums to 1. Padded steps and keys "
        "hold leftovers that are no part of the sentence, and half precision rounds every sum to about three "
        "digits.",
        "Convert to float64; zero everything outside the real steps and the real keys; divide each row by "
        "its total; add up over the steps to get each key's column; divide the largest column by the sum of "
        "the columns, per sentence; return the mean over the sentences.",
    ),
    covers="healthy, frozen, lazy and stuck (one word, not <eos>) sets; leftovers on the padded keys and "
    "steps; rows that do not sum to 1; float16 and bfloat16, judged to float32's precision; sentences of "
    "different lengths",
    defaults=_DEFAULTS,
    specs=[
        {"seed": 211, "tgt_valid_lens": [9, 3, 5, 4]},
        {"seed": 212, "kind": "lazy", "batch_size": 3},
        {"seed": 213, "kind": "frozen", "batch_size": 5},
        {
            "seed": 214,
            "batch_size": 3,
            "num_keys": 12,
            "num_steps": 12,
            "min_keys": 1,
            "min_steps": 1,
            "src_valid_lens": [12, 6, 2],
            "tgt_valid_lens": [2, 12, 7],
        },
        {"seed": 215, "kind": "stuck", "batch_size": 3},
    ],
    build=_set_builder(_names("the mean concentration")),
    call=_learner_call("mean_concentration"),
    reference=_each_view(_concentration_reference),
    mistakes=[
        Mistake(
            "The padded decoder steps counted: their rows hold weights too, so keep only the steps "
            "t < tgt_valid_lens before adding up each column.",
            wrong=concentration_padded_steps,
        ),
        Mistake(
            "The padded keys counted: a leftover column at a position >= src_valid_lens is not a source "
            "word; keep only the real keys, and make each real row a distribution over them.",
            wrong=concentration_padded_keys,
        ),
        Mistake(
            "The rows were used as they are: a real row need not sum to 1 over the real keys, so a "
            "row with "
            "more mass weighs more in the columns. Divide each real row by its total first.",
            wrong=concentration_rows_as_given,
        ),
        Mistake(
            "That is the mean over steps of each row's largest weight (how sharp the rows are): the "
            "concentration adds up each column first, so sharp rows on different words give a low value.",
            wrong=concentration_row_peaks,
        ),
        Mistake(
            "You divided by num_steps, the padded number of steps: the share is of the sentence's real "
            "steps' attention only.",
            wrong=concentration_over_num_steps,
        ),
        Mistake(
            "The batch was pooled (all the top columns over all the attention): the concentration is a "
            "share per sentence, then the mean over the sentences.",
            wrong=concentration_pooled,
        ),
        _CONCENTRATION_IN_THE_WEIGHTS_DTYPE,
        _CONCENTRATION_IN_BFLOAT16,
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
    precision=[
        (_CONCENTRATION_IN_THE_WEIGHTS_DTYPE, _VIEW_DTYPES),
        (_CONCENTRATION_IN_BFLOAT16, _ALL_BFLOAT16),
    ],
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


def diagnosis_sharp_taken_for_lazy(weights, src_valid_lens, tgt_valid_lens):
    h = _entropy(weights, src_valid_lens, tgt_valid_lens)
    if h < 0.1:  # "too sure to be healthy"
        return "lazy"
    return _rule(h, _concentration(weights, src_valid_lens, tgt_valid_lens))


def diagnosis_lazy_on_eos_only(weights, src_valid_lens, tgt_valid_lens):
    steps, keys = _real(weights, src_valid_lens, tgt_valid_lens)
    p = _distributions(weights, keys & steps[..., None])
    last = torch.arange(weights.shape[-1])[None, :] == src_valid_lens[:, None] - 1
    on_eos = (p * last[:, None, :]).sum((1, 2)) / steps.sum(1)
    if on_eos.mean() >= 0.5:
        return "lazy"
    return "frozen" if _entropy(weights, src_valid_lens, tgt_valid_lens) >= 0.9 else "healthy"


DIAGNOSIS = Exercise(
    "ch10.q3",
    "diagnose_attention",
    "Healthy, frozen or lazy? A model's attention diagnosed from its weights",
    solution='''
def diagnose_attention(weights, src_valid_lens, tgt_valid_lens):
    """"healthy", "frozen" (near-uniform rows: attention that has not learned to look) or "lazy" (most of
    every sentence's attention on one position), from the weights of a batch as in ch10.q1 and ch10.q2.

    Choose the rule and its thresholds yourself, from what chapter 10 measured, and justify each threshold
    in a comment beside it. weights: (batch_size, num_steps, num_keys), non-negative, any floating dtype,
    the padding ignored; src_valid_lens, tgt_valid_lens: (batch_size,) long >= 1. Returns a str.
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
    # Concentration first: sharp rows may be healthy or lazy, only the columns tell. Chapter 10's healthy
    # models reached about 0.3 to 0.4, its lazy one 1, and a strict alignment of S positions gives 1/S (at
    # most 1/3 with <eos>): 0.6 leaves a wide margin on both sides.
    if concentration >= 0.6:
        return "lazy"
    # Then entropy, which alone tells uniform rows from a moving alignment (their concentrations are alike):
    # untrained and frozen models measured 0.98 to 1, healthy ones about 0.4, so 0.9 flags rows within a
    # few per cent of uniform and nothing that has learned to look.
    return "frozen" if mean_entropy >= 0.9 else "healthy"
''',
    hint=(
        "One number alone cannot separate the three: think about which of them a lazy model and a frozen one "
        "each push to an extreme, and what a healthy model's two numbers look like in chapter 10's tables.",
        "A lazy model's rows can be as sharp as a healthy one's (entropy near 0 for both): what differs is "
        "that they all pick the same column, which only the concentration sees. A frozen model's "
        "concentration is about 1/S, like a moving alignment's: only the entropy tells those two apart. Read "
        "the concentration first, then the entropy.",
        "Two thresholds, each with a margin on both sides of what chapter 10 measured: one on the "
        "concentration, well above a healthy model's and well below a lazy one's; one on the entropy, well "
        "above a healthy model's and just below a frozen one's. Compute both as in Q1 and Q2, so that the "
        "padding, the rows' scale and the dtype change nothing.",
    ),
    covers="healthy, frozen and lazy sets of 3 to 6 sentences, and sets whose rows are nearly one-hot: a "
    "sharp alignment (healthy) and attention stuck on one word that is not <eos> (lazy); leftovers on the "
    "padded keys and steps; rows that do not sum to 1; float16 and bfloat16; sentences of very different "
    "lengths",
    defaults=dict(_DEFAULTS, batch_size=5),
    specs=[
        {"seed": 221, "kind": "healthy", "tgt_valid_lens": [9, 3, 4, 3, 4]},
        {"seed": 222, "kind": "frozen", "tgt_valid_lens": [9, 3, 4, 3, 4]},
        {"seed": 223, "kind": "lazy"},
        {"seed": 224, "kind": "healthy", "batch_size": 3, "num_keys": 12, "num_steps": 12},
        {"seed": 225, "kind": "frozen", "batch_size": 6},
        {"seed": 226, "kind": "lazy", "batch_size": 4, "min_steps": 2, "tgt_valid_lens": [9, 2, 3, 2]},
        {"seed": 227, "kind": "sharp"},
        {"seed": 228, "kind": "stuck", "batch_size": 4},
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
        Mistake(
            "The padded keys changed the verdict: leftovers on positions >= src_valid_lens are not "
            "source "
            "words; use only the real keys, and make each real row a distribution over them.",
            wrong=diagnosis_padded_keys,
        ),
        Mistake(
            "Rows that do not sum to 1 changed the verdict: divide each real row by its total over "
            "the real "
            "keys before measuring it.",
            wrong=diagnosis_rows_as_given,
        ),
        Mistake(
            "The half-precision weights changed the verdict (a NaN entropy: log(0) where a tiny epsilon "
            "rounds to 0 in float16 and bfloat16): compute in float64 or float32.",
            wrong=diagnosis_epsilon_in_half,
        ),
        Mistake(
            "Very low entropy is not laziness: a model that has learned a sharp alignment has nearly "
            "one-hot rows too, each on a different word. Whether the steps all pick the same word is the "
            "concentration's question; the entropy cannot answer it.",
            wrong=diagnosis_sharp_taken_for_lazy,
        ),
        Mistake(
            "Your rule looks for laziness on <eos> only (the last real key): a lazy model may stare at "
            "any one position, the first word, a full stop. The concentration takes the best-served "
            "column, wherever it is.",
            wrong=diagnosis_lazy_on_eos_only,
        ),
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


# ---------------------------------------------------------------------------------------------- ch10.q4
#: The batches of ch10.q4, by the names the learner's predictions use.
PREDICTION_BATCHES = ("sharp diagonal", "one word", "half frozen, half lazy")
#: How far a predicted number may be from the measured one and still count as right.
_CLOSE = 0.1
_PREDICTION_NAMES = (
    "the entropy you predicted",
    "the concentration you predicted",
    "the verdict you predicted",
)


def prediction_batches() -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The three batches of ch10.q4, {name: (weights, src_valid_lens, tgt_valid_lens)}: float64 weights
    (batch_size, 9, 9), 8 real positions (7 words and <eos>) and 8 real steps per sentence, zeros on the
    padding, every real row summing to 1.

    "sharp diagonal": 4 sentences, step t all on position t; "one word": 4 sentences, every step all on
    the first word; "half frozen, half lazy": 6 sentences, the first three with uniform rows, the last three
    with every step all on <eos>.
    """
    size = 8
    diagonal = torch.eye(size, dtype=torch.float64)
    first, eos = torch.zeros(size, size, dtype=torch.float64), torch.zeros(size, size, dtype=torch.float64)
    first[:, 0], eos[:, -1] = 1.0, 1.0
    uniform = torch.full((size, size), 1 / size, dtype=torch.float64)

    def batch(sentences: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        weights = torch.zeros(len(sentences), size + 1, size + 1, dtype=torch.float64)
        weights[:, :size, :size] = torch.stack(sentences)
        lens = torch.full((len(sentences),), size, dtype=torch.long)
        return weights, lens, lens.clone()

    return {
        "sharp diagonal": batch([diagonal] * 4),
        "one word": batch([first] * 4),
        "half frozen, half lazy": batch([uniform] * 3 + [eos] * 3),
    }


def _prediction_case(spec: dict[str, Any]) -> Case:
    """A case of ch10.q4: one batch, with what the package's diagnose measures on it (spec["seed"] unused)."""
    name = spec["batch"]
    if name not in PREDICTION_BATCHES:
        raise ValueError(f"batch must be one of {list(PREDICTION_BATCHES)}, got {name!r}")
    weights, src, tgt = prediction_batches()[name]
    found = resolve("attn_course.measure.diagnostics.diagnose")(weights, src, tgt)
    inputs = {
        "batch": name,
        "weights": weights,
        "src_valid_lens": src,
        "tgt_valid_lens": tgt,
        "measured": [found.entropy, found.concentration],
    }
    return Case(f"the batch {name!r}", inputs, spec, _PREDICTION_NAMES)


def _closeness(guess: Any, measured: float, what: str) -> str:
    """Where a predicted number lies from the measured one, in words the check compares."""
    if isinstance(guess, bool) or not isinstance(guess, Real):
        raise TypeError(f"predictions gave the {what} as {type(guess).__name__}, expected a Python float")
    if guess > 1 or guess < 0:
        return f"outside 0 to 1, where every {what} lies"
    if abs(guess - measured) <= _CLOSE:
        return f"within {_CLOSE} of the measured {measured:.2f}"
    side = "above" if guess > measured else "below"
    return f"more than {_CLOSE} {side} the measured {measured:.2f}"


def _prediction_call(answer: Any, inputs: dict[str, Any]) -> tuple[str, str, Any]:
    """The answer's prediction for the case's batch, its numbers placed against the measured ones."""
    made = answer()
    if not isinstance(made, dict):
        raise TypeError(f"predictions returned {type(made).__name__}, expected a dict")
    if inputs["batch"] not in made:
        raise ValueError(f"predictions has no entry for the batch {inputs['batch']!r}; it has {sorted(made)}")
    guess = no_tensor_numbers(made[inputs["batch"]], "predictions")
    if not isinstance(guess, (tuple, list)) or len(guess) != 3:
        raise TypeError(
            f"predictions gave {guess!r} for {inputs['batch']!r}, expected (entropy, concentration, verdict)"
        )
    entropy, concentration = inputs["measured"]
    return (
        _closeness(guess[0], entropy, "normalised entropy"),
        _closeness(guess[1], concentration, "concentration"),
        guess[2],
    )


def _reference_prediction(inputs: dict[str, Any]) -> tuple[str, str, str]:
    """A prediction that is the measurement: the package's `diagnose` on the batch."""
    found = resolve("attn_course.measure.diagnostics.diagnose")(
        inputs["weights"], inputs["src_valid_lens"], inputs["tgt_valid_lens"]
    )
    return (
        _closeness(found.entropy, found.entropy, "normalised entropy"),
        _closeness(found.concentration, found.concentration, "concentration"),
        _VERDICTS[found.verdict],
    )


_PREDICTION_SOLUTION = '''
def predictions():
    """Your predictions for the three batches above, written down before you measure them: for each, its
    mean normalised entropy, its mean concentration, and the verdict chapter 10's diagnose gives it
    ("healthy", "frozen" or "lazy"). Returns {"sharp diagonal": (entropy, concentration, verdict), "one
    word": (...), "half frozen, half lazy": (...)}, two Python floats and a str for each batch.
    """
    # A one-hot row has entropy 0 wherever it points. The columns differ: on the diagonal each of the 8
    # positions gets one step (1/8); when every step is on one word, that word gets them all (1).
    # The mix: as many steps at entropy 1 as at 0 average 0.5; concentrations of 1/8 and 1 average 0.5625.
    # Both means sit below diagnose's thresholds, so it says healthy, though no sentence of it is.
    return {
        "sharp diagonal": (0.0, 0.125, "healthy"),
        "one word": (0.0, 1.0, "lazy"),
        "half frozen, half lazy": (0.5, 0.5625, "healthy"),
    }
'''


def _predicted(name: str, right: str, wrong: str) -> Any:
    """A wrong prediction, written as an edit of the model answer."""
    return edit_of(
        _PREDICTION_SOLUTION, "predictions", (right, wrong), namespace={"torch": torch}, rename=name
    )


_DIAGONAL, _ONE_WORD = '"sharp diagonal": (0.0, 0.125, "healthy")', '"one word": (0.0, 1.0, "lazy")'
_MIX = '"half frozen, half lazy": (0.5, 0.5625, "healthy")'
_HALVES_HINT = (
    "A mean gives each half its share: three sentences whose steps all have entropy 1 and three "
    "whose steps all have 0 average 0.5; concentrations of 1/8 and 1 average 0.56. Neither half "
    "decides the batch's means, and that is how a mean can hide two broken kinds."
)
_MIX_VERDICT_HINT = (
    "Your numbers are right, but diagnose reads only the batch's two means, and both sit "
    "under its thresholds (the concentration below the collapse threshold, the entropy "
    "below the near-uniform one): it says healthy, though no sentence of the batch is. A "
    "mean hides a mix; read the numbers sentence by sentence before you trust a verdict "
    "from means."
)
predicted_sharp_diagonal_lazy = _predicted(
    "predicted_sharp_diagonal_lazy", _DIAGONAL, '"sharp diagonal": (0.0, 0.9, "lazy")'
)
predicted_one_word_healthy = _predicted(
    "predicted_one_word_healthy", _ONE_WORD, '"one word": (0.0, 0.125, "healthy")'
)
predicted_mix_lazy_half = _predicted(
    "predicted_mix_lazy_half", _MIX, '"half frozen, half lazy": (0.1, 0.95, "lazy")'
)
predicted_mix_frozen_half = _predicted(
    "predicted_mix_frozen_half", _MIX, '"half frozen, half lazy": (0.95, 0.15, "frozen")'
)
predicted_mix_lazy = _predicted("predicted_mix_lazy", _MIX, '"half frozen, half lazy": (0.5, 0.5625, "lazy")')
predicted_mix_frozen = _predicted(
    "predicted_mix_frozen", _MIX, '"half frozen, half lazy": (0.5, 0.5625, "frozen")'
)
predicted_entropy_in_nats = _predicted(
    "predicted_entropy_in_nats", _MIX, '"half frozen, half lazy": (1.04, 0.5625, "healthy")'
)
predicted_in_the_packages_words = _predicted(
    "predicted_in_the_packages_words", _MIX, '"half frozen, half lazy": (0.5, 0.5625, "looking")'
)


PREDICTIONS = Exercise(
    "ch10.q4",
    "predictions",
    "Predict, then measure: three batches where one number, or a mean, misleads",
    solution=_PREDICTION_SOLUTION,
    hint=(
        "Reason from what each number measures, not from chapter 10's tables: the entropy looks at one row "
        "at a time, the concentration at one sentence's columns, and diagnose at the means over the batch.",
        "A one-hot row has entropy 0 whether it sits on its own word or on everyone's word; a column that "
        "takes every step of a sentence takes all of its attention. A mean over a batch adds its parts in "
        "proportion: half the steps at 1 and half at 0 average one half, whatever each step looks like.",
        "For each batch write the entropy first (how sure is each step?), then the concentration (does one "
        "column take every step?), then read the two means against the chapter's two thresholds in the "
        "order diagnose reads them: the concentration, then the entropy.",
    ),
    covers="the sharp diagonal and the one-word batch share an entropy of 0, and only the concentration "
    "tells them apart; the half frozen, half lazy batch has means where a healthy model's lie, though none "
    "of its sentences is healthy: a mean hides a mix, so read the numbers sentence by sentence",
    defaults={"seed": 0, "batch": "sharp diagonal"},
    specs=[{"batch": name} for name in PREDICTION_BATCHES],
    build=_prediction_case,
    call=_prediction_call,
    reference=_reference_prediction,
    mistakes=[
        Mistake(
            "The sharp diagonal is healthy: its rows are one-hot, entropy 0, but each on a different "
            "word, so each column gets one step and the concentration is 1/8. Sharp is not lazy: the "
            "entropy cannot tell a decided model from a stuck one.",
            wrong=predicted_sharp_diagonal_lazy,
        ),
        Mistake(
            "Every step of the one-word batch sits on the same column: that column takes all of each "
            "sentence's attention, concentration 1, lazy. Its entropy is 0, exactly as the sharp "
            "diagonal's: low entropy alone cannot tell the two apart.",
            wrong=predicted_one_word_healthy,
        ),
        Mistake(_HALVES_HINT, wrong=predicted_mix_lazy_half),
        Mistake(_HALVES_HINT, wrong=predicted_mix_frozen_half),
        Mistake(_MIX_VERDICT_HINT, wrong=predicted_mix_lazy),
        Mistake(_MIX_VERDICT_HINT, wrong=predicted_mix_frozen),
        Mistake(
            "An entropy above 1 is in nats (a uniform row over 8 positions has log 8 = 2.08): chapter "
            "10's entropy is normalised, divided by log S, so that a uniform row gives 1 and a one-hot "
            "row 0.",
            wrong=predicted_entropy_in_nats,
        ),
        Mistake(
            "Those are the package's words: answer with 'healthy', 'frozen' or 'lazy' (diagnose's "
            "'looking' is 'healthy', 'near-uniform' 'frozen', 'collapsed' 'lazy').",
            wrong=predicted_in_the_packages_words,
        ),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(
            r"has no entry for the batch",
            "Return a dict with an entry for every batch: the three names exactly as the prompt spells "
            "them, each mapped to (entropy, concentration, verdict).",
        ),
        ErrorHint(
            r"expected \(entropy, concentration, verdict\)|expected a Python float",
            "Each entry is a tuple of three: the mean normalised entropy and the mean concentration, "
            "Python floats, and the verdict, a str.",
        ),
        ErrorHint(
            r"expected a dict",
            "Return a dict {batch name: (entropy, concentration, verdict)}, one entry per batch.",
        ),
    ],
    avoid=_PACKAGE,
)
