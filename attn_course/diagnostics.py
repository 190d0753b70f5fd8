"""Measuring what attention does: how spread out (entropy) each decoder step's weights are.

    H = attention_entropy(weights, src_valid_lens)            # (batch_size, num_steps), nats
    h = mean_entropy(weights, src_valid_lens, tgt_valid_lens, normalise=True)   # one number in [0, 1]

An untrained model's weights are close to uniform over the real source tokens (entropy near log of their
number); a trained one's sharpen towards the words it translates. Normalised entropy divides by that
maximum, log(src_valid_len), so sentences of different lengths can be averaged: 1 is uniform, 0 one-hot.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attn_course.validation import check_floating, check_shape, check_tensor, check_valid_lens


def _check_weights(weights: Tensor) -> Tensor:
    check_floating("weights", weights)
    check_shape("weights", weights, {"batch_size": None, "num_steps": None, "num_keys": None})
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("weights contains NaN, inf or negative values, expected attention weights")
    return weights


def attention_entropy(weights: Tensor, src_valid_lens: Tensor | None = None, *, normalise: bool = False
                      ) -> Tensor:
    """Shannon entropy, in nats, of every decoder step's attention weights over the real source tokens.

    weights: (batch_size, num_steps, num_keys), each row a distribution over the keys; src_valid_lens:
    (batch_size,) integer, the real keys of each sentence (None: all num_keys). 0 * log 0 counts as 0.
    Returns (batch_size, num_steps) float64: log(src_valid_len) for uniform weights, 0 for a one-hot row.
    normalise=True divides by log(src_valid_len), giving 1 for uniform rows; a sentence of one real key
    (nothing to choose between) gets 0. Weight on padded keys is an error: masking failed upstream.
    """
    _check_weights(weights)
    batch_size, _, num_keys = weights.shape
    check_valid_lens(src_valid_lens, batch_size, None, num_keys, low=1, per_query=False,
                     name="src_valid_lens")
    p = weights.detach().to(torch.float64)
    if src_valid_lens is not None:
        lens = src_valid_lens.to(p.device)
        padded = torch.arange(num_keys, device=p.device)[None, None] >= lens[:, None, None]
        if (p.masked_fill(~padded, 0) > 0).any():
            raise ValueError("weights puts weight on padded keys (positions >= src_valid_lens): "
                             "the softmax was not masked")
    else:
        lens = torch.full((batch_size,), num_keys, device=p.device)
    entropy = -torch.where(p > 0, p * p.clamp_min(torch.finfo(p.dtype).tiny).log(), 0.0).sum(-1)
    if not normalise:
        return entropy
    most = lens.to(p.dtype).log()[:, None]
    return torch.where(most > 0, entropy / most.clamp_min(torch.finfo(p.dtype).tiny), 0.0)


def mean_entropy(weights: Tensor, src_valid_lens: Tensor | None = None, tgt_valid_lens: Tensor | None = None,
                 *, normalise: bool = False) -> float:
    """The mean of `attention_entropy` over the real decoder steps of a batch (tgt_valid_lens: (batch_size,)
    integer, the steps that produced a real token, <eos> included; None: all num_steps)."""
    entropy = attention_entropy(weights, src_valid_lens, normalise=normalise)
    batch_size, num_steps = entropy.shape
    if tgt_valid_lens is None:
        return float(entropy.mean())
    check_tensor("tgt_valid_lens", tgt_valid_lens)
    check_valid_lens(tgt_valid_lens, batch_size, None, num_steps, low=0, per_query=False, upper="num_steps",
                     name="tgt_valid_lens")
    real = torch.arange(num_steps, device=entropy.device)[None] < tgt_valid_lens.to(entropy.device)[:, None]
    if not real.any():
        raise ValueError("tgt_valid_lens sums to 0: there are no decoder steps to average over")
    return float(entropy[real].mean())
