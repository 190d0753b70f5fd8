"""Attention as a soft lookup: Nadaraya–Watson kernel regression, the attention pooling chapter 1 opens with.

A query is compared with every key by the Gaussian kernel's exponent; the softmax of a query's scores over
the keys gives its weights, and its prediction is the weighted average of the values. With a fixed width
nothing is learned; the parametric form learns the one number of the score, its width, by gradient descent
on the training pairs (d2l's parametric attention pooling). Chapter 2 replaces the hand-made score with
learned ones and keeps the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from attn_course.validation import check_floating, check_number, check_positive_int, check_shape


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


def parametric_nadaraya_watson(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    w: torch.Tensor | float,
    *,
    leave_one_out: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Nadaraya–Watson regression whose kernel width is a parameter w (sigma = 1 / |w|): weights, predictions.

    queries, keys, values: as `nadaraya_watson`.
    w: a number or a 0-dim floating tensor (it may require grad: the weights are differentiable in w), != 0.
    leave_one_out: the queries are the keys themselves (num_queries == num_keys), and query i may not attend
        to key i; without that, a training point that sees its own value is fitted best by w -> infinity,
        the nearest-neighbour limit that copies the noise.
    Returns: (weights, predictions): weights (num_queries, num_keys), rows >= 0 summing to 1 (0 on the
        diagonal with leave_one_out); predictions (num_queries,).

    d2l (release 0.17, §10.2.4, "Parametric Attention Pooling"):
    f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i, which is `nadaraya_watson` with sigma = 1 / |w|.
    """
    _check(queries, keys, values)
    w = _check_width(w)
    if leave_one_out and queries.shape[0] != keys.shape[0]:
        raise ValueError(
            f"leave_one_out needs the keys as queries: queries has shape {tuple(queries.shape)}, expected "
            f"(num_keys,) = ({keys.shape[0]},)"
        )
    scores = -(((queries[:, None] - keys[None, :]) * w) ** 2) / 2  # (num_queries, num_keys)
    if leave_one_out:
        itself = torch.eye(keys.shape[0], dtype=torch.bool, device=keys.device)
        scores = scores.masked_fill(itself, -torch.inf)
    weights = F.softmax(scores, dim=-1)
    return weights, weights @ values


@dataclass(frozen=True)
class WidthFit:
    """What `fit_width` learned: the parameter w, its width sigma = 1 / |w|, and the loss before each step."""

    w: float
    losses: list[float]

    @property
    def sigma(self) -> float:
        return 1 / abs(self.w)


def fit_width(
    keys: torch.Tensor, values: torch.Tensor, *, w: float = 1.0, lr: float = 0.2, steps: int = 200
) -> WidthFit:
    """Learn the kernel's w by gradient descent (SGD on the whole training set) on the training pairs.

    keys, values: (num_keys,), the training inputs and targets, num_keys >= 2, one floating dtype.
    w: where w starts (sigma = 1 / |w|), != 0; lr: SGD's learning rate, > 0; steps: updates, >= 1.
    The loss is d2l's: the summed squared error of `parametric_nadaraya_watson` at the training inputs,
    each predicted from the other pairs (leave_one_out). Draws no random numbers. Returns a `WidthFit`.
    """
    _check(keys, keys, values)
    if keys.shape[0] < 2:
        raise ValueError(f"keys has shape {tuple(keys.shape)}, expected (num_keys,) with num_keys >= 2: "
                         "leaving one out needs another key")
    w = _check_width(w)
    lr = check_number("lr", lr, low=0, low_open=True)
    steps = check_positive_int("steps", steps)
    keys, values = keys.detach(), values.detach()
    param = torch.tensor(w, dtype=keys.dtype, device=keys.device, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=lr)
    losses = []
    for _ in range(steps):
        predictions = parametric_nadaraya_watson(keys, keys, values, param, leave_one_out=True)[1]
        loss = ((predictions - values) ** 2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return WidthFit(w=param.item(), losses=losses)


def _check_width(w: torch.Tensor | float) -> torch.Tensor | float:
    if isinstance(w, torch.Tensor):
        if w.dim() != 0 or not w.is_floating_point():
            raise ValueError(
                f"w has shape {tuple(w.shape)} and dtype {w.dtype}, expected a 0-dim floating tensor"
            )
        if not torch.isfinite(w) or w == 0:
            raise ValueError(f"w must be a finite number != 0, got {w.item()!r}")
        return w
    w = check_number("w", w)
    if w == 0:
        raise ValueError("w must be a finite number != 0, got 0 (sigma = 1 / |w|)")
    return w
