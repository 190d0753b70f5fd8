"""Attention as a soft lookup: Nadaraya–Watson kernel regression, the attention pooling chapter 1 opens with.

A query is compared with every key by a fixed score, the Gaussian kernel's exponent; the softmax of a
query's scores over the keys gives its weights, and its prediction is the weighted average of the values.
Nothing is learned: chapter 2 replaces the hand-made score with learned ones and keeps the rest.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from attn_course.validation import check_floating, check_number, check_shape


def nadaraya_watson(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, sigma: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian-kernel regression as attention pooling: the weights over the keys, and the predictions.

    queries: (num_queries,) floating, the inputs to predict at.
    keys: (num_keys,), the training inputs, num_keys >= 1; values: (num_keys,), the training targets.
        All three share one floating dtype (and device).
    sigma: the kernel's width, a number > 0; small sigma, sharp weights (nearest neighbour in the limit),
        large sigma, flat weights (the mean of the values in the limit).
    Returns: (weights, predictions): weights (num_queries, num_keys), each row >= 0 and summing to 1;
        predictions (num_queries,), each the weighted average of the values.

    Nadaraya (1964) and Watson (1964); d2l §11.2:
    f(x) = sum_i alpha(x, x_i) y_i,  alpha(x, x_i) = softmax_i(-(x - x_i)^2 / (2 sigma^2)).
    The normalised Gaussian kernel *is* that softmax. Computed as a softmax (which subtracts each row's
    largest score before `exp`), a query far from every key still gets finite weights -- all of it on the
    nearest key -- where exp(score) / sum exp(score) underflows to 0 / 0.
    """
    _check(queries, keys, values)
    sigma = check_number("sigma", sigma, low=0, low_open=True)
    scores = -((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2)  # (num_queries, num_keys)
    weights = F.softmax(scores, dim=-1)  # over the keys: one row per query
    return weights, weights @ values


def _check(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
    check_floating("queries", queries)
    check_shape("queries", queries, {"num_queries": None})
    check_floating("keys", keys)
    check_shape("keys", keys, {"num_keys": None})
    if keys.shape[0] == 0:
        raise ValueError("keys has shape (0,), expected (num_keys,) with num_keys >= 1: a lookup needs a key")
    check_shape("values", values, {"num_keys": keys.shape[0]})
    for name, tensor in (("keys", keys), ("values", values)):
        if tensor.dtype != queries.dtype:
            raise ValueError(
                f"{name} has dtype {tensor.dtype}, expected the dtype of queries, {queries.dtype}"
            )
