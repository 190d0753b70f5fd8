"""Chapter 1's exercise on attention as a soft lookup: Nadaraya–Watson attention pooling (ch1.q3).

The exercise is an `Exercise` with its cases (num_queries equal to num_keys and not, a single key, a very
wide and a very narrow kernel, queries so far from every key that exp of every score underflows, float32
and float64), its reference `attn_course.attention.lookup.nadaraya_watson`, and the learner's likely
mistakes, each written as the wrong code that makes it (`nw_no_minus`, ...): the softmax over the queries,
no minus sign, 2σ² written as σ² or 2σ, exp without normalising or without subtracting the max, keys and
queries swapped, the two results swapped or one missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from attn_course.validation import check_number
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course_exercises.inputs import seeded_randn, spec_dtype, spec_generator, spec_size

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


# The mistakes of ch1.q3, each written as a learner writes it.


def nw_softmax_over_queries(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=0)
    return weights, weights @ values


def nw_divided_by_total(queries, keys, values, sigma):
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    weights = kernel / kernel.sum()
    return weights, weights @ values


def nw_keys_by_queries(queries, keys, values, sigma):
    weights = F.softmax(-((keys[:, None] - queries[None, :]) ** 2) / (2 * sigma**2), dim=0)
    return weights, values @ weights


def nw_keys_by_queries_last_axis(queries, keys, values, sigma):
    weights = F.softmax(-((keys[:, None] - queries[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights, values @ weights


def nw_no_minus(queries, keys, values, sigma):
    weights = F.softmax((queries[:, None] - keys[None, :]) ** 2 / (2 * sigma**2), dim=-1)
    return weights, weights @ values


def nw_no_minus_naive_exp(queries, keys, values, sigma):
    kernel = torch.exp((queries[:, None] - keys[None, :]) ** 2 / (2 * sigma**2))
    weights = kernel / kernel.sum(dim=-1, keepdim=True)
    return weights, weights @ values


def nw_no_half(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / sigma**2, dim=-1)
    return weights, weights @ values


def nw_sigma_not_squared(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma), dim=-1)
    return weights, weights @ values


def nw_precedence(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / 2 * sigma**2, dim=-1)
    return weights, weights @ values


def nw_cdist_not_squared(queries, keys, values, sigma):
    weights = F.softmax(-torch.cdist(queries[:, None], keys[:, None]) / (2 * sigma**2), dim=-1)
    return weights, weights @ values


def nw_exp_unnormalised(queries, keys, values, sigma):
    weights = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    return weights, weights @ values


def nw_exp_over_sum(queries, keys, values, sigma):
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    weights = kernel / kernel.sum(dim=-1, keepdim=True)
    return weights, weights @ values


def nw_exp_over_sum_plus_epsilon(queries, keys, values, sigma):
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    weights = kernel / (kernel.sum(dim=-1, keepdim=True) + 1e-12)
    return weights, weights @ values


def nw_sum_without_keepdim(queries, keys, values, sigma):
    scores = -((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2)
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    weights = e / e.sum(dim=1)
    return weights, weights @ values


def nw_max_without_keepdim(queries, keys, values, sigma):
    scores = -((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2)
    e = torch.exp(scores - scores.max(dim=1).values)
    weights = e / e.sum(dim=1, keepdim=True)
    return weights, weights @ values


def nw_squeezed(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1).squeeze()
    return weights, (weights * values).sum(dim=-1)


def nw_mean_of_weighted_values(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights, (weights * values).mean(dim=-1)


def nw_averages_keys(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights, weights @ keys


def nw_predictions_first(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights @ values, weights


def nw_only_predictions(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights @ values


def nw_only_weights(queries, keys, values, sigma):
    return F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)


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
    hint=(
        "Which (query, key) pairs need a score, and how could you get the table of all of them in one "
        "expression? Along which of its axes is each query's set of weights normalised?",
        "Attention pooling with a Gaussian kernel: the score is minus the squared distance over 2σ², the "
        "weights are a softmax over the keys (a softmax subtracts each row's max, so a query far from "
        "every key stays finite), and each prediction is the weighted sum of the values.",
        "The scores line: the queries as a column minus the keys as a row, squared, negated, divided by "
        "the whole 2σ² in parentheses. Then one softmax over the last axis, and the predictions as a "
        "matrix product of the weights with the values.",
    ),
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
            wrong=nw_softmax_over_queries,
        ),
        Mistake(
            "You divided by the sum over the whole (num_queries, num_keys) table, so the table sums to 1 "
            "instead of each row: normalise each query's row over the keys on its own.",
            wrong=nw_divided_by_total,
        ),
        Mistake(
            "Keys and queries are swapped: your weights are (num_keys, num_queries). Put one row per query "
            "and one column per key, so that the weights are (num_queries, num_keys).",
            wrong=nw_keys_by_queries,
        ),
        Mistake(
            "Keys and queries are swapped: your scores are (num_keys, num_queries), so the softmax over "
            "their last axis normalised over the queries. Put one row per query and one column per key, "
            "and normalise over the keys.",
            wrong=nw_keys_by_queries_last_axis,
        ),
        Mistake(_NO_MINUS, wrong=nw_no_minus),
        Mistake(
            _NO_MINUS + " (And exp of a large positive score overflows to inf: inf / inf is NaN.)",
            wrong=nw_no_minus_naive_exp,
        ),
        Mistake(
            "The score is missing the 1/2: divide the squared distance by 2σ², not by σ².",
            wrong=nw_no_half,
        ),
        Mistake(
            "You divided by 2σ, not by 2σ²: σ is the kernel's width (a standard deviation), and it is "
            "squared in the score.",
            wrong=nw_sigma_not_squared,
        ),
        Mistake(
            "The score was multiplied by σ² instead of divided by it: in Python `a / 2 * b` means "
            "`(a / 2) * b`, so put the whole denominator, 2σ², in parentheses.",
            wrong=nw_precedence,
        ),
        Mistake(
            "You used the distance |x - x_i|, not its square: the Gaussian kernel's score is minus the "
            "*squared* distance over 2σ² (note that `torch.cdist` returns distances, not squared ones).",
            wrong=nw_cdist_not_squared,
        ),
        Mistake(
            "The weights are not normalised: exp of the scores must be divided by its sum over the keys "
            "(which is what a softmax does), so that each query's weights sum to 1.",
            wrong=nw_exp_unnormalised,
        ),
        Mistake(
            "NaN for a query far from every key: exp of every score underflowed to 0, and 0 / 0 is NaN. "
            "A softmax subtracts each row's largest score before `exp` (`F.softmax` does), so the nearest "
            "key gets the weight: use it, or subtract the row's max yourself.",
            wrong=nw_exp_over_sum,
        ),
        Mistake(
            "The weights of a query far from every key came out 0 instead of summing to 1: exp of every "
            "score underflowed to 0, and the epsilon in the denominator turns 0 / 0 into 0 rather than "
            "fixing it. Subtract each row's largest score before `exp` (as `F.softmax` does): the nearest "
            "key then gets the weight.",
            wrong=nw_exp_over_sum_plus_epsilon,
        ),
        Mistake(
            "The sum over the keys lost its axis: without `keepdim=True`, `e.sum(dim=1)` has shape "
            "(num_queries,), and dividing the (num_queries, num_keys) table by it divides each *column* by "
            "a row's sum (or fails when num_queries != num_keys). Keep the axis: `e.sum(dim=1, "
            "keepdim=True)`.",
            wrong=nw_sum_without_keepdim,
        ),
        Mistake(
            "The max over the keys lost its axis: without `keepdim=True`, `scores.max(dim=1).values` has "
            "shape (num_queries,), and subtracting it from the (num_queries, num_keys) table shifts each "
            "*column* by a row's max (or fails when num_queries != num_keys). Keep the axis: `keepdim=True`.",
            wrong=nw_max_without_keepdim,
        ),
        Mistake(
            "With a single key (or a single query) your weights lost an axis: `squeeze()` without a dim "
            "drops every axis of size 1. The weights stay (num_queries, num_keys) whatever the sizes.",
            wrong=nw_squeezed,
        ),
        Mistake(
            "You averaged the weighted values, dividing by num_keys a second time: the weights already sum "
            "to 1, so the prediction is the weighted *sum* of the values.",
            wrong=nw_mean_of_weighted_values,
        ),
        Mistake(
            "The predictions average the keys; they must average the values (the training targets).",
            wrong=nw_averages_keys,
        ),
        Mistake(
            "The two results are in the wrong order: return `(weights, predictions)`, the weights first.",
            wrong=nw_predictions_first,
        ),
        Mistake(
            "You returned only the predictions: return both, `(weights, predictions)`.",
            wrong=nw_only_predictions,
        ),
        Mistake(
            "You returned only the weights: return both, `(weights, predictions)`, where the predictions "
            "are the weighted averages of the values.",
            wrong=nw_only_weights,
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
