"""Measuring what attention does: how spread out (entropy) each decoder step's weights are, how much of a
sentence's attention piles up on one source position (concentration), and how often its alignment crosses.

    H = attention_entropy(weights, src_valid_lens)            # (batch_size, num_steps), nats
    h = mean_entropy(weights, src_valid_lens, tgt_valid_lens, normalise=True)   # one number in [0, 1]
    c = attention_concentration(weights, src_valid_lens, tgt_valid_lens)       # (batch_size,), in (0, 1]
    d = diagnose(weights, src_valid_lens, tgt_valid_lens)     # Diagnosis(entropy, concentration, verdict)
    r = score_range(weights, src_valid_lens)                  # (batch_size, num_steps): max - min score
    n = alignment_crossings(weights[0], src_len, tgt_len)     # one sentence pair: word-order crossings

An untrained model's weights are close to uniform over the real source tokens (entropy near log of their
number); a trained one's sharpen towards the words it translates. Normalised entropy divides by that
maximum, log(src_valid_len), so sentences of different lengths can be averaged: 1 is uniform, 0 one-hot.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from attn_course.measure.metrics import attention_to_links
from attn_course.validation import check_floating, check_int, check_shape, check_tensor, check_valid_lens


def _check_weights(weights: Tensor) -> Tensor:
    check_floating("weights", weights)
    check_shape("weights", weights, {"batch_size": None, "num_steps": None, "num_keys": None})
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("weights contains NaN, inf or negative values, expected attention weights")
    return weights


def _real_key_lens(p: Tensor, src_valid_lens: Tensor | None) -> Tensor:
    """src_valid_lens on p's device (all num_keys when None); weight on a padded key is an error."""
    batch_size, _, num_keys = p.shape
    if src_valid_lens is None:
        return torch.full((batch_size,), num_keys, device=p.device)
    lens = src_valid_lens.to(p.device)
    padded = torch.arange(num_keys, device=p.device)[None, None] >= lens[:, None, None]
    if (p.masked_fill(~padded, 0) > 0).any():
        raise ValueError("weights puts weight on padded keys (positions >= src_valid_lens): "
                         "the softmax was not masked")
    return lens


def _real_steps(tgt_valid_lens: Tensor | None, batch_size: int, num_steps: int, device: torch.device
                ) -> Tensor:
    """(batch_size, num_steps) bool, True at the decoder steps that produced a real token."""
    if tgt_valid_lens is None:
        return torch.ones(batch_size, num_steps, dtype=torch.bool, device=device)
    check_tensor("tgt_valid_lens", tgt_valid_lens)
    check_valid_lens(tgt_valid_lens, batch_size, None, num_steps, low=0, per_query=False, upper="num_steps",
                     name="tgt_valid_lens")
    return torch.arange(num_steps, device=device)[None] < tgt_valid_lens.to(device)[:, None]


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
    lens = _real_key_lens(p, src_valid_lens)
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
    if tgt_valid_lens is None:
        return float(entropy.mean())
    real = _real_steps(tgt_valid_lens, *entropy.shape, entropy.device)
    if not real.any():
        raise ValueError("tgt_valid_lens sums to 0: there are no decoder steps to average over")
    return float(entropy[real].mean())


def attention_concentration(weights: Tensor, src_valid_lens: Tensor | None = None,
                            tgt_valid_lens: Tensor | None = None) -> Tensor:
    """The largest share of a sentence's attention, summed over its real steps, on one source position.

    weights: (batch_size, num_steps, num_keys), each row a distribution over the keys; src_valid_lens:
    (batch_size,) integer, the real keys (None: all); tgt_valid_lens: (batch_size,) integer, the real
    decoder steps, <eos> included (None: all). Returns (batch_size,) float64:
    max_j sum_{t real} alpha_tj / sum_{t real} sum_j alpha_tj.
    A diagonal alignment spreads the mass evenly (about 1 / src_valid_len); a *lazy* model that sends every
    step to the same token (the final "." or <eos>) puts it all on one column, giving about 1. Uniform rows
    also give 1 / src_valid_len: tell them from a diagonal by their entropy (`diagnose` uses both).
    A sentence without real steps, or whose real steps carry no weight, is refused (its share is 0 / 0).
    """
    _check_weights(weights)
    batch_size, num_steps, _ = weights.shape
    check_valid_lens(src_valid_lens, batch_size, None, weights.shape[-1], low=1, per_query=False,
                     name="src_valid_lens")
    p = weights.detach().to(torch.float64)
    _real_key_lens(p, src_valid_lens)
    real = _real_steps(tgt_valid_lens, batch_size, num_steps, p.device)
    mass = (p * real[..., None]).sum(1)                                       # (batch_size, num_keys)
    total = mass.sum(-1)
    empty = (total <= 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"sentences {empty} have no attention weight on their real decoder steps "
                         "(tgt_valid_lens 0, or all-zero rows): their concentration is 0 / 0")
    return mass.max(-1).values / total


def score_range(weights: Tensor, src_valid_lens: Tensor | None = None) -> Tensor:
    """How far apart each step's scores lie, read back from its weights: max_j e_tj - min_j e_tj.

    weights: (batch_size, num_steps, num_keys), each row a softmax of scores e_tj over the real keys;
    src_valid_lens: (batch_size,) integer, the real keys (None: all). A softmax keeps score differences:
    alpha_tj / alpha_tk = exp(e_tj - e_tk), so the range is log(max_j alpha_tj / min_j alpha_tj) over the
    real keys. Returns (batch_size, num_steps) float64: 0 for uniform rows (and sentences of one key), inf
    for a row with a zero weight on a real key (its scores lie infinitely far apart, or it was not a softmax).
    """
    _check_weights(weights)
    batch_size, _, num_keys = weights.shape
    check_valid_lens(src_valid_lens, batch_size, None, num_keys, low=1, per_query=False,
                     name="src_valid_lens")
    p = weights.detach().to(torch.float64)
    lens = _real_key_lens(p, src_valid_lens)
    padded = torch.arange(num_keys, device=p.device)[None, None] >= lens[:, None, None]
    largest = p.max(-1).values
    smallest = p.masked_fill(padded, float("inf")).min(-1).values
    return largest.log() - smallest.log()


#: `diagnose` calls attention near-uniform (the model has not learned where to look) when the mean
#: normalised entropy of its real steps is at least this: rows within a few per cent of log(src_valid_len).
NEAR_UNIFORM_ENTROPY = 0.9
#: `diagnose` calls attention collapsed (a lazy model staring at one position) when, on average over the
#: sentences, at least this share of a sentence's attention lands on one source position. A diagonal
#: alignment of n words gives about 1/n; 0.6 is above that for every sentence of 2 or more words + <eos>.
COLLAPSED_CONCENTRATION = 0.6
VERDICTS = ("near-uniform", "collapsed", "looking")


class Diagnosis(NamedTuple):
    """`diagnose`'s summary of a batch of attention weights.

    entropy: mean normalised entropy of the real steps, in [0, 1] (1: uniform rows);
    concentration: mean over sentences of `attention_concentration`, in (0, 1] (1: one column);
    verdict: "collapsed" (concentration >= COLLAPSED_CONCENTRATION), else "near-uniform" (entropy >=
    NEAR_UNIFORM_ENTROPY), else "looking" (neither: the steps look at different, chosen positions).
    """

    entropy: float
    concentration: float
    verdict: str


def diagnose(weights: Tensor, src_valid_lens: Tensor | None = None, tgt_valid_lens: Tensor | None = None
             ) -> Diagnosis:
    """Flag attention that has not learned to look (near-uniform) or that stares at one position (collapsed).

    weights: (batch_size, num_steps, num_keys); src_valid_lens, tgt_valid_lens: (batch_size,) integer or
    None, as in `attention_concentration`. Padded steps and keys are left out of both numbers.
    """
    entropy = mean_entropy(weights, src_valid_lens, tgt_valid_lens, normalise=True)
    concentration = float(attention_concentration(weights, src_valid_lens, tgt_valid_lens).mean())
    if concentration >= COLLAPSED_CONCENTRATION:
        verdict = "collapsed"
    elif entropy >= NEAR_UNIFORM_ENTROPY:
        verdict = "near-uniform"
    else:
        verdict = "looking"
    return Diagnosis(entropy, concentration, verdict)


def alignment_crossings(weights: Tensor, src_len: int, tgt_len: int) -> int:
    """How often one sentence pair's argmax alignment crosses: the pairs of target words t1 < t2 whose
    source words come in the other order, a_t1 > a_t2 (two target words on the same source word do not
    cross). 0 for a monotone alignment; an adjective moved after its noun ("a red car" -> "une voiture
    rouge") gives 1; a reversed sentence of n words n (n - 1) / 2: the discordant pairs of Kendall's tau.

    weights: (num_steps, num_keys), num_steps > tgt_len and num_keys > src_len; as
    `attn_course.measure.evaluation.forced_attention` returns it, (tgt_len + 1, src_len + 1): row t is the
    decoder step that predicts target word t, column i is source word i, the last row and column are <eos>.
    They and any padding beyond them are left out: a_t is the argmax of row t < tgt_len over the columns i <
    src_len (`attn_course.measure.metrics.attention_to_links`). Returns a Python int.
    """
    check_shape("weights", weights, {"num_steps": None, "num_keys": None})
    check_int("tgt_len", tgt_len, low=0, high=weights.shape[0] - 1, high_name="num_steps - 1")
    check_int("src_len", src_len, low=1, high=weights.shape[1] - 1, high_name="num_keys - 1")
    links = attention_to_links(weights, src_len=src_len, tgt_len=tgt_len)
    aligned = [src for src, _ in sorted(links, key=lambda link: link[1])]          # a_0, ..., a_{tgt_len-1}
    return sum(a1 > a2 for k, a1 in enumerate(aligned) for a2 in aligned[k + 1 :])
