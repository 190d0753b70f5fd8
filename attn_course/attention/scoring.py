"""Attention scoring functions: how well each query matches each key, before the masked softmax.

Pure functions of tensors (weights are passed in), one per equation in the papers, so a chapter can
compare them side by side. The attention modules in `attn_course.attention.layers` call these same functions;
they split off the key-only half of each score so that it is computed once per source batch.

Shapes throughout: queries (batch_size, num_queries, query_size), keys (batch_size, num_keys, key_size),
scores (batch_size, num_queries, num_keys).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from attn_course.validation import check_floating, check_shape

#: The nonlinearity of the additive score: Bahdanau's tanh, or ReLU (an experiment of chapter 10).
ADDITIVE_ACTIVATIONS = ("tanh", "relu")


def check_activation(activation: object) -> str:
    """Raise ValueError unless `activation` is one of ADDITIVE_ACTIVATIONS; return it."""
    if activation not in ADDITIVE_ACTIVATIONS:
        raise ValueError(f"activation={activation!r}, expected one of {ADDITIVE_ACTIVATIONS}")
    return activation


def _check_queries_keys(queries: torch.Tensor, keys: torch.Tensor, same_size: bool = False) -> None:
    """Both 3-D floating tensors of one batch; with same_size, keys must have the queries' feature size."""
    check_floating("queries", queries)
    check_shape("queries", queries, {"batch_size": None, "num_queries": None, "query_size": None})
    check_floating("keys", keys)
    batch_size, _, query_size = queries.shape
    if same_size:
        check_shape("keys", keys, {"batch_size": batch_size, "num_keys": None, "query_size": query_size})
    else:
        check_shape("keys", keys, {"batch_size": batch_size, "num_keys": None, "key_size": None})


def dot_scores(queries: torch.Tensor, keys: torch.Tensor, scaled: bool = False) -> torch.Tensor:
    """Dot product of every query with every key, optionally divided by sqrt(d).

    queries: (batch_size, num_queries, d); keys: (batch_size, num_keys, d), the same d.
    Returns: scores (batch_size, num_queries, num_keys).

    Luong et al. 2015, sec. 3.1, "dot": score(h_t, h̄_s) = h_tᵀ h̄_s, a score of eq. (7). With scaled=True,
    Vaswani et al. 2017, eq. (1): qᵀk / sqrt(d), computed exactly as d2l's DotProductAttention does
    (division after the bmm).
    """
    _check_queries_keys(queries, keys, same_size=True)
    scores = torch.bmm(queries, keys.transpose(1, 2))
    return scores / math.sqrt(queries.shape[-1]) if scaled else scores


def general_scores(queries: torch.Tensor, keys: torch.Tensor, W_a: torch.Tensor) -> torch.Tensor:
    """Bilinear score qᵀ W_a k: a learned map from key space to query space, then a dot product.

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (query_size, key_size) (the weight of nn.Linear(key_size, query_size, bias=False)).
    Returns: scores (batch_size, num_queries, num_keys).

    Luong et al. 2015, sec. 3.1, "general": score(h_t, h̄_s) = h_tᵀ W_a h̄_s, a score of eq. (7). Computed as
    dot_scores(queries, W_a k): the projected keys W_a k do not depend on the query, so
    LuongAttention.prepare computes them once per source batch.
    """
    _check_queries_keys(queries, keys)
    check_floating("W_a", W_a)
    check_shape("W_a", W_a, {"query_size": queries.shape[-1], "key_size": keys.shape[-1]})
    return dot_scores(queries, F.linear(keys, W_a))


def check_additive_inputs(
    projected_queries: torch.Tensor, projected_keys: torch.Tensor, w_v: torch.Tensor
) -> None:
    """Raise ValueError unless additive_scores' arguments fit: floating, one batch, one num_hiddens."""
    check_floating("projected_queries", projected_queries)
    check_shape(
        "projected_queries", projected_queries, {"batch_size": None, "num_queries": None, "num_hiddens": None}
    )
    batch_size, _, num_hiddens = projected_queries.shape
    check_floating("projected_keys", projected_keys)
    check_shape(
        "projected_keys",
        projected_keys,
        {"batch_size": batch_size, "num_keys": None, "num_hiddens": num_hiddens},
    )
    check_floating("w_v", w_v)
    check_shape("w_v", w_v, {"1": 1, "num_hiddens": num_hiddens})


def additive_scores(
    projected_queries: torch.Tensor, projected_keys: torch.Tensor, w_v: torch.Tensor, activation: str = "tanh"
) -> torch.Tensor:
    """Additive (MLP) score w_vᵀ tanh(W_q q + W_k k) from already-projected queries and keys.

    projected_queries: (batch_size, num_queries, num_hiddens), i.e. W_q q;
    projected_keys: (batch_size, num_keys, num_hiddens), i.e. W_k k (computed once per source batch);
    w_v: (1, num_hiddens) (the weight of nn.Linear(num_hiddens, 1, bias=False)).
    Returns: scores (batch_size, num_queries, num_keys).

    Bahdanau et al. 2014, eq. (6) with appendix A.1.2: e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j), where d2l
    names W_a -> W_q, U_a -> W_k, v_a -> w_v. Builds a (batch_size, num_queries, num_keys, num_hiddens)
    tensor, as d2l does: additive attention costs num_hiddens times more memory than dot-product.
    (`attn_course.attention.fast.additive_scores` is the same score in a form that decoding on the CPU runs
    faster.)
    activation="relu" puts max(0, x) in place of tanh: unbounded, and zero for every negative feature.
    """
    check_additive_inputs(projected_queries, projected_keys, w_v)
    return additive_scores_unchecked(projected_queries, projected_keys, w_v, check_activation(activation))


def additive_scores_unchecked(
    projected_queries: torch.Tensor, projected_keys: torch.Tensor, w_v: torch.Tensor, activation: str = "tanh"
) -> torch.Tensor:
    """additive_scores without the checks, for callers that validated once (attention layers, fast form)."""
    # (B, Q, 1, H) + (B, 1, K, H): every query against every key. The nonlinearity in place: the sum is the
    # largest tensor here, and nothing else needs it.
    features = projected_queries.unsqueeze(2) + projected_keys.unsqueeze(1)
    features = features.tanh_() if activation == "tanh" else features.relu_()
    return F.linear(features, w_v).squeeze(-1)  # w_vᵀ ...: (B, Q, K)


def concat_scores(
    queries: torch.Tensor, keys: torch.Tensor, W_a: torch.Tensor, v_a: torch.Tensor
) -> torch.Tensor:
    """Concat score v_aᵀ tanh(W_a [q; k]): a one-hidden-layer MLP on the query and key side by side.

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (num_hiddens, query_size + key_size); v_a: (1, num_hiddens).
    Returns: scores (batch_size, num_queries, num_keys).

    Luong et al. 2015, sec. 3.1, "concat": score(h_t, h̄_s) = v_aᵀ tanh(W_a [h_t; h̄_s]), a score of eq. (7).
    Since
    W_a [q; k] = W_a[:, :query_size] q + W_a[:, query_size:] k, this is additive_scores with W_a split in
    two: the concatenation (batch_size, num_queries, num_keys, query_size + key_size) is never built,
    and the key half is what LuongAttention.prepare projects once.
    """
    _check_queries_keys(queries, keys)
    query_size, key_size = queries.shape[-1], keys.shape[-1]
    check_floating("W_a", W_a)
    check_shape("W_a", W_a, {"num_hiddens": None, "query_size + key_size": query_size + key_size})
    projected_queries = F.linear(queries, W_a[:, :query_size])
    projected_keys = F.linear(keys, W_a[:, query_size:])
    return additive_scores(projected_queries, projected_keys, v_a)


def location_scores(queries: torch.Tensor, W_a: torch.Tensor, num_keys: int) -> torch.Tensor:
    """Location-based score W_a q: one score per source *position*, from the query alone.

    queries: (batch_size, num_queries, query_size); W_a: (max_len, query_size) (the weight of
    nn.Linear(query_size, max_len, bias=False)); num_keys <= max_len: the source positions to keep.
    Returns: scores (batch_size, num_queries, num_keys), rows 0..num_keys-1 of W_a applied to each query.

    Luong et al. 2015, eq. (8): a_t = softmax(W_a h_t). The keys play no part: the model learns *where*
    to look, not *what* to look for. Positions past num_keys are padding for every sequence and are cut.
    """
    check_floating("queries", queries)
    check_shape("queries", queries, {"batch_size": None, "num_queries": None, "query_size": None})
    check_floating("W_a", W_a)
    check_shape("W_a", W_a, {"max_len": None, "query_size": queries.shape[-1]})
    if not 0 <= num_keys <= W_a.shape[0]:
        raise ValueError(f"num_keys must lie in [0, max_len] = [0, {W_a.shape[0]}], got {num_keys}")
    return F.linear(queries, W_a[:num_keys])
