"""Chapter 1's exercise on attention as a soft lookup: Nadaraya–Watson attention pooling (ch1.q3).

The exercise is an `Exercise` with its cases (num_queries equal to num_keys and not, a single key, a very
wide and a very narrow kernel, queries so far from every key that exp of every score underflows, float32
and float64), its reference `attn_course.attention.lookup.nadaraya_watson`, and the known-wrong variants that name a
learner's likely mistake: the softmax over the queries, no minus sign, 2σ² written as σ² or 2σ, exp without
normalising or without subtracting the max, keys and queries swapped, the two results swapped or one missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from attn_course.checks.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course.checks.inputs import seeded_randn, spec_dtype, spec_generator, spec_size
from attn_course.validation import check_number

_NAMES = ("the weights", "the predictions")


def _lookup_case(spec: dict[str, Any]) -> Case:
    gen, dtype = spec_generator(spec), spec_dtype(spec)
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be floating, got {spec['dtype']}")
    num_queries, num_keys = spec_size(spec, "num_queries"), spec_size(spec, "num_keys")
    sigma = check_number("sigma", spec["sigma"], low=0, low_open=True)
    span = check_number("span", spec["span"], low=0, low_open=True)
    offset = check_number("offset", spec["offset"])
    # Drawn in float64 and cast, so a case holds the same numbers in every dtype.
    keys = (torch.rand(num_keys, generator=gen, dtype=torch.float64) * span).to(dtype)
    queries = (torch.rand(num_queries, generator=gen, dtype=torch.float64) * span + offset).to(dtype)
    values = seeded_randn((num_keys,), gen, dtype, scale=2.0) + 1
    inputs = {"queries": queries, "keys": keys, "values": values, "sigma": sigma}
    label = (
        f"queries ({num_queries},), keys ({num_keys},), values ({num_keys},), sigma {sigma:g}, "
        f"dtype {spec['dtype']}"
    )
    if offset:
        nearest = (queries[:, None] - keys[None, :]).abs().min().item()
        label += f", every query at least {nearest:.0f} from every key"
    return Case(label, inputs, spec, _NAMES)


def _call(fn: Callable, inputs: dict[str, Any]) -> Any:
    return fn(inputs["queries"], inputs["keys"], inputs["values"], inputs["sigma"])


def _pooling(
    *,
    score: str = "right",
    normalise: str = "softmax",
    layout: str = "queries_by_keys",
    pool: str = "sum",
    returns: str = "both",
) -> Callable[[dict[str, Any]], Any]:
    """A variant of Nadaraya–Watson pooling with one thing done the way a learner might get it wrong."""

    def variant(inputs: dict[str, Any]) -> Any:
        q, k, v, sigma = inputs["queries"], inputs["keys"], inputs["values"], inputs["sigma"]
        diff = q[:, None] - k[None, :] if layout == "queries_by_keys" else k[:, None] - q[None, :]
        scores = {
            "right": -(diff**2) / (2 * sigma**2),
            "no_minus": diff**2 / (2 * sigma**2),
            "no_half": -(diff**2) / sigma**2,
            "sigma_not_squared": -(diff**2) / (2 * sigma),
            "precedence": -(diff**2) / 2 * sigma**2,
            "distance": -diff.abs() / (2 * sigma**2),
        }[score]
        if normalise == "softmax":
            weights = F.softmax(scores, dim=-1)
        elif normalise == "first_axis":
            weights = F.softmax(scores, dim=0)
        elif normalise == "whole":
            weights = torch.exp(scores) / torch.exp(scores).sum()
        elif normalise == "none":
            weights = torch.exp(scores)
        elif normalise == "epsilon":  # naive, with an epsilon that turns 0 / 0 into 0
            weights = torch.exp(scores) / (torch.exp(scores).sum(dim=-1, keepdim=True) + 1e-12)
        elif normalise in ("sum_no_keepdim", "max_no_keepdim"):  # runs on a square table only
            if scores.shape[0] != scores.shape[1]:
                return None
            top = scores.max(dim=-1, keepdim=normalise == "sum_no_keepdim").values
            e = torch.exp(scores - top)
            weights = e / e.sum(dim=-1, keepdim=normalise == "max_no_keepdim")
        else:  # "naive": exp / sum over the keys, without subtracting the max
            weights = torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)
        if layout == "keys_by_queries":  # the (num_keys, num_queries) weights, pooled over their first axis
            predictions = v @ weights
        elif pool == "mean":
            predictions = (weights * v).mean(dim=-1)
        elif pool == "keys":
            predictions = weights @ k
        else:
            predictions = weights @ v
        if returns == "squeezed":  # squeeze() drops the key axis of a single key (or the query axis)
            if 1 not in weights.shape:
                return None
            weights = weights.squeeze()
            return weights, (weights * v).sum(dim=-1)
        return {
            "both": (weights, predictions),
            "swapped": (predictions, weights),
            "predictions": predictions,
            "weights": weights,
        }[returns]

    return variant


_NO_MINUS = (
    "The minus sign is missing: your weights favour the *farthest* keys. The score is minus the squared "
    "distance over 2σ², so the nearer a key, the higher its score."
)

NADARAYA_WATSON = Exercise(
    "ch1.q3",
    "nadaraya_watson",
    "nadaraya_watson: attention pooling with a Gaussian kernel",
    solution='''
def nadaraya_watson(queries, keys, values, sigma):
    """Nadaraya–Watson kernel regression as attention pooling.

    queries: (num_queries,) floating; keys and values: (num_keys,), same dtype; sigma: a number > 0.
    Returns: (weights, predictions): weights (num_queries, num_keys), each row summing to 1 over the keys,
    where weights[i, j] is the softmax over j of -(queries[i] - keys[j])**2 / (2 * sigma**2);
    predictions (num_queries,), the weighted average of the values for each query.
    """
    scores = -((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2)  # (num_queries, num_keys)
    weights = F.softmax(scores, dim=-1)   # over the keys; it subtracts the row's max, so no 0 / 0
    return weights, weights @ values
''',
    hint="Build the table of every (query, key) difference at once: give the queries an axis of their own "
    "and the keys another, and broadcasting does the rest. Each row (one query) is then normalised over "
    "the keys, never over the queries. Watch the score: a nearer key must score higher, and the whole "
    "denominator 2σ² belongs under the squared difference. Finally, a query far from every key makes every "
    "exponential underflow to 0; a softmax that subtracts the row's largest score first does not.",
    covers="num_queries equal to num_keys and not; a single key; a very wide kernel (weights near uniform, "
    "predictions near the mean of the values) and a very narrow one (near the nearest key's value); queries "
    "far from every key; float32 and float64; inputs left unchanged",
    defaults={
        "seed": 0,
        "num_queries": 5,
        "num_keys": 7,
        "sigma": 0.5,
        "dtype": "float32",
        "span": 5.0,
        "offset": 0.0,
    },
    specs=[
        {"seed": 21, "num_queries": 6, "num_keys": 9, "sigma": 0.5},
        {"seed": 22, "num_queries": 4, "num_keys": 4, "sigma": 0.3, "dtype": "float64"},
        {"seed": 23, "num_queries": 3, "num_keys": 1, "sigma": 0.8},
        {"seed": 24, "num_queries": 5, "num_keys": 8, "sigma": 100.0},
        {"seed": 25, "num_queries": 6, "num_keys": 10, "sigma": 0.01, "dtype": "float64"},
        {"seed": 26, "num_queries": 4, "num_keys": 6, "sigma": 0.5, "offset": 40.0},
        {"seed": 27, "num_queries": 3, "num_keys": 5, "sigma": 0.7, "offset": -60.0, "dtype": "float64"},
        {"seed": 28, "num_queries": 30, "num_keys": 40, "sigma": 0.25},
        {"seed": 29, "num_queries": 1, "num_keys": 3, "sigma": 1.5, "dtype": "float64"},
    ],
    build=_lookup_case,
    call=_call,
    reference=lambda i: _call(resolve("attn_course.attention.lookup.nadaraya_watson"), i),
    mistakes=[
        Mistake(
            "The softmax ran over the queries: each query's weights over the keys must sum to 1, so "
            "normalise each row of the (num_queries, num_keys) scores over the keys (the last axis).",
            _pooling(normalise="first_axis"),
        ),
        Mistake(
            "You divided by the sum over the whole (num_queries, num_keys) table, so the table sums to 1 "
            "instead of each row: normalise each query's row over the keys on its own.",
            _pooling(normalise="whole"),
        ),
        Mistake(
            "Keys and queries are swapped: your weights are (num_keys, num_queries). Put one row per query "
            "and one column per key, so that the weights are (num_queries, num_keys).",
            _pooling(layout="keys_by_queries", normalise="first_axis"),
        ),
        Mistake(
            "Keys and queries are swapped: your scores are (num_keys, num_queries), so the softmax over "
            "their last axis normalised over the queries. Put one row per query and one column per key, "
            "and normalise over the keys.",
            _pooling(layout="keys_by_queries"),
        ),
        Mistake(_NO_MINUS, _pooling(score="no_minus")),
        Mistake(_NO_MINUS + " (And exp of a large positive score overflows to inf: inf / inf is NaN.)",
                _pooling(score="no_minus", normalise="naive")),
        Mistake(
            "The score is missing the 1/2: divide the squared distance by 2σ², not by σ².",
            _pooling(score="no_half"),
        ),
        Mistake(
            "You divided by 2σ, not by 2σ²: σ is the kernel's width (a standard deviation), and it is "
            "squared in the score.",
            _pooling(score="sigma_not_squared"),
        ),
        Mistake(
            "The score was multiplied by σ² instead of divided by it: in Python `a / 2 * b` means "
            "`(a / 2) * b`, so put the whole denominator, 2σ², in parentheses.",
            _pooling(score="precedence"),
        ),
        Mistake(
            "You used the distance |x - x_i|, not its square: the Gaussian kernel's score is minus the "
            "*squared* distance over 2σ² (note that `torch.cdist` returns distances, not squared ones).",
            _pooling(score="distance"),
        ),
        Mistake(
            "The weights are not normalised: exp of the scores must be divided by its sum over the keys "
            "(which is what a softmax does), so that each query's weights sum to 1.",
            _pooling(normalise="none"),
        ),
        Mistake(
            "NaN for a query far from every key: exp of every score underflowed to 0, and 0 / 0 is NaN. "
            "A softmax subtracts each row's largest score before `exp` (`F.softmax` does), so the nearest "
            "key gets the weight: use it, or subtract the row's max yourself.",
            _pooling(normalise="naive"),
        ),
        Mistake(
            "The weights of a query far from every key came out 0 instead of summing to 1: exp of every "
            "score underflowed to 0, and the epsilon in the denominator turns 0 / 0 into 0 rather than "
            "fixing it. Subtract each row's largest score before `exp` (as `F.softmax` does): the nearest "
            "key then gets the weight.",
            _pooling(normalise="epsilon"),
        ),
        Mistake(
            "The sum over the keys lost its axis: without `keepdim=True`, `e.sum(dim=1)` has shape "
            "(num_queries,), and dividing the (num_queries, num_keys) table by it divides each *column* by "
            "a row's sum (or fails when num_queries != num_keys). Keep the axis: `e.sum(dim=1, "
            "keepdim=True)`.",
            _pooling(normalise="sum_no_keepdim"),
        ),
        Mistake(
            "The max over the keys lost its axis: without `keepdim=True`, `scores.max(dim=1).values` has "
            "shape (num_queries,), and subtracting it from the (num_queries, num_keys) table shifts each "
            "*column* by a row's max (or fails when num_queries != num_keys). Keep the axis: `keepdim=True`.",
            _pooling(normalise="max_no_keepdim"),
        ),
        Mistake(
            "With a single key (or a single query) your weights lost an axis: `squeeze()` without a dim "
            "drops every axis of size 1. The weights stay (num_queries, num_keys) whatever the sizes.",
            _pooling(returns="squeezed"),
        ),
        Mistake(
            "You averaged the weighted values, dividing by num_keys a second time: the weights already sum "
            "to 1, so the prediction is the weighted *sum* of the values.",
            _pooling(pool="mean"),
        ),
        Mistake(
            "The predictions average the keys; they must average the values (the training targets).",
            _pooling(pool="keys"),
        ),
        Mistake(
            "The two results are in the wrong order: return `(weights, predictions)`, the weights first.",
            _pooling(returns="swapped"),
        ),
        Mistake(
            "You returned only the predictions: return both, `(weights, predictions)`.",
            _pooling(returns="predictions"),
        ),
        Mistake(
            "You returned only the weights: return both, `(weights, predictions)`, where the predictions "
            "are the weighted averages of the values.",
            _pooling(returns="weights"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"size of tensor a \(\d+\) must match the size of tensor b",
            "A sum or max over the keys lost its axis: without `keepdim=True` it has shape (num_queries,), "
            "which does not line up with the (num_queries, num_keys) table (and divides the columns, not "
            "the rows, when the two sizes are equal). Keep the axis with `keepdim=True`.",
            line=r"\.(sum|max|amax|logsumexp|mean)\((?![^)]*keepdim)",
        ),
        ErrorHint(
            r"size of tensor a \(\d+\) must match the size of tensor b",
            "queries and keys have different lengths, so subtracting them element by element fails: "
            "make the queries a column and the keys a row, and broadcasting builds the "
            "(num_queries, num_keys) table of differences.",
        ),
        ErrorHint(
            r"size mismatch|shapes cannot be multiplied|inconsistent tensor size",
            "The weights (num_queries, num_keys) and the values (num_keys,) must meet on the keys axis: "
            "each prediction sums a row of weights times the values.",
        ),
    ],
    package=["attn_course.attention.lookup.nadaraya_watson"],
)
