"""Faster forms of a few package functions, for the decoding path: same results, fewer passes or calls.

The teaching modules keep the plain form, the one that reads like the equation; the decoding and evaluation
functions opt into these explicitly. Each is tested equal to its plain form
(tests/library/attention/test_fast.py); the decoding benchmark (`benchmarks/suites.decoding`) measures what
they save, and its results (benchmarks/results/) say by how much.

- `additive_scores`: `scoring.additive_scores` as (2 w_v)ᵀ sigmoid(2x) - sum(w_v) where `sigmoid_form_pays`;
  an attention layer scores with it when its memory was prepared with ``fast_scores=True``
  (`attn_course.attention.layers`), as greedy and beam search and the evaluation functions prepare it.
- `index_select`: `DecoderState.index_select` copying a tensor that several memory fields share once.
- `to_tokens`: `Vocab.to_tokens` of one list of valid ids, without a call per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from attn_course.attention.scoring import additive_scores_unchecked, check_additive_inputs

# Below this many elements (batch x queries x keys x hidden) the tanh form is the faster one: the cost is the
# calls, not the arithmetic. One sentence at a time stays under it, a batch of sentences goes over it;
# re-measure with the decoding benchmark (`benchmarks/suites.decoding`) before moving it.
SIGMOID_FORM_MIN_SIZE = 8192


def additive_scores(projected_queries: Tensor, projected_keys: Tensor, w_v: Tensor) -> Tensor:
    """`scoring.additive_scores` (w_vᵀ tanh(W_q q + W_k k)), taking tanh x = 2 sigmoid(2x) - 1 where it pays.

    Shapes as in `scoring.additive_scores`: projected_queries (batch_size, num_queries, num_hiddens),
    projected_keys (batch_size, num_keys, num_hiddens), w_v (1, num_hiddens);
    returns scores (batch_size, num_queries, num_keys).

    The sum W_q q + W_k k is one (batch_size, num_queries, num_keys, num_hiddens) temporary. Where
    `sigmoid_form_pays`, the affine part is taken off that large tensor:
    w_vᵀ tanh(x) = (2 w_v)ᵀ sigmoid(2x) - sum(w_v), three passes over it (add, double, sigmoid) where
    2 sigmoid(2x) - 1 would take five, on the premise that torch's CPU sigmoid kernel is faster than its
    tanh kernel (true on some CPUs, not on all: chapter 8 times the three forms on the reader's machine);
    the scores differ from the tanh form by float32 rounding. Everywhere else it is
    `scoring.additive_scores` itself, bit for bit.
    """
    check_additive_inputs(projected_queries, projected_keys, w_v)
    if not sigmoid_form_pays(projected_queries, projected_keys, w_v):
        return additive_scores_unchecked(projected_queries, projected_keys, w_v)
    sums = projected_queries.unsqueeze(2) + projected_keys.unsqueeze(1)       # (B, Q, K, H)
    sigmoids = sums.mul_(2.0).sigmoid_()  # doubled after the sum: no inf - inf
    return F.linear(sigmoids, w_v * 2.0).squeeze(-1).sub_(w_v.sum())


def sigmoid_form_pays(projected_queries: Tensor, projected_keys: Tensor, w_v: Tensor) -> bool:
    """Whether `additive_scores` takes its sigmoid form: float32 on the CPU, no gradient to record, and a sum
    tensor of at least SIGMOID_FORM_MIN_SIZE elements.

    projected_queries (batch_size, num_queries, num_hiddens), projected_keys (batch_size, num_keys,
    num_hiddens), w_v (1, num_hiddens). Why each condition: with autograd the tanh form is one graph node
    instead of several; on a GPU tanh is fast; in half precision sigmoid(2x) would lose small values to
    rounding; on a small tensor (one sentence at a time) three calls cost less than five.
    """
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (projected_queries, projected_keys, w_v))
    batch_size, num_queries, num_hiddens = projected_queries.shape
    size = batch_size * num_queries * projected_keys.shape[1] * num_hiddens
    return (not grad and size >= SIGMOID_FORM_MIN_SIZE and projected_keys.device.type == "cpu"
            and torch.result_type(projected_queries, projected_keys) == torch.float32)


def select_rows(fields: Sequence[Any], index: Tensor) -> list[Any]:
    """Each tensor field's rows ``index`` (dim 0); other fields as they are. A tensor held by several
    fields (keys that are also the values, dot attention's keys that are their own projection) is
    copied once and stays shared, where selecting field by field would copy it for each."""
    selected: dict[int, Tensor] = {}
    for field in fields:
        if isinstance(field, Tensor) and id(field) not in selected:
            selected[id(field)] = field.index_select(0, index)
    return [selected[id(f)] if isinstance(f, Tensor) else f for f in fields]


def index_select(state: Any, index: Tensor) -> Any:
    """``state.index_select(index)``, with the rows of its attention memory taken by `select_rows`.

    state: a `decoders.DecoderState` (or any state with an index_select method; one without a memory
    is left to that method); index: (n,) long, the rows to keep, repeat or reorder.
    """
    memory = getattr(state, "memory", None)
    if memory is None:
        return state.index_select(index)
    rest = state._replace(memory=None).index_select(index)
    return rest._replace(memory=type(memory)(*select_rows(memory, index)))


def to_tokens(vocab: Any, indices: Any) -> Any:
    """``vocab.to_tokens(indices)``; a list (or tuple) of valid int ids is looked up in one comprehension.

    vocab: a `data.Vocab`. Anything else (tensors, nested lists, a bad id, whose error the vocabulary
    raises) goes to ``vocab.to_tokens``.
    """
    if isinstance(indices, (list, tuple)) and set(map(type, indices)) <= {int} and (
            not indices or (min(indices) >= 0 and max(indices) < len(vocab.idx_to_token))):
        return [vocab.idx_to_token[i] for i in indices]
    return vocab.to_tokens(indices)
