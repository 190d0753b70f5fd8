"""Faster forms of a few package functions, for the decoding path: same results, fewer passes or calls.

The teaching modules keep the plain form, the one that reads like the equation; the decoding functions
(`attn_course.models.decoding`) opt into these explicitly. Each is tested equal to its plain form
(tests/library/attention/test_fast.py); the decoding benchmark (`benchmarks/suites.decoding`) measures what they save.

- `additive_scores`: `scoring.additive_scores` as (2 w_v)ᵀ sigmoid(2x) - sum(w_v), on large float32 CPU
  tensors without autograd; the attention layers use it while `enabled(model)` is on.
- `index_select`: `DecoderState.index_select` copying a tensor that several memory fields share once.
- `to_tokens`: `Vocab.to_tokens` of one list of valid ids, without a call per token.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attn_course.attention.scoring import check_additive_inputs

# Below this many elements (batch x queries x keys x hidden) the tanh form is faster on the CPU: the cost is
# the calls, not the arithmetic. One sentence at a time stays under it, a batch of sentences goes over it;
# re-measure with the decoding benchmark (`benchmarks/suites.decoding`) before moving it.
SIGMOID_FORM_MIN_SIZE = 8192


def additive_scores(projected_queries: Tensor, projected_keys: Tensor, w_v: Tensor) -> Tensor:
    """`scoring.additive_scores` (w_vᵀ tanh(W_q q + W_k k)), taking tanh x = 2 sigmoid(2x) - 1 where it pays.

    Shapes as in `scoring.additive_scores`: projected_queries (batch_size, num_queries, num_hiddens),
    projected_keys (batch_size, num_keys, num_hiddens), w_v (1, num_hiddens);
    returns scores (batch_size, num_queries, num_keys).

    The sum W_q q + W_k k is one (batch_size, num_queries, num_keys, num_hiddens) temporary. In float32 on
    the CPU without autograd (decoding, evaluation) and above SIGMOID_FORM_MIN_SIZE elements, the affine
    part is taken off that large tensor: w_vᵀ tanh(x) = (2 w_v)ᵀ sigmoid(2x) - sum(w_v). That is three
    passes over it (add, double, sigmoid) where 2 sigmoid(2x) - 1 would take five, on the premise that
    torch's CPU sigmoid kernel is faster than its tanh kernel (true on some CPUs, not on all: chapter 8
    times the three forms on the reader's machine); the scores stay within about 1e-6 of the tanh form.
    Everywhere else it is the tanh form, bit for bit: with autograd that is one graph node instead of
    several, on a GPU tanh is fast, in half precision sigmoid(2x) would lose small values to rounding,
    and on a small tensor (one sentence at a time) three calls cost less than five.
    """
    check_additive_inputs(projected_queries, projected_keys, w_v)
    queries, keys = projected_queries.unsqueeze(2), projected_keys.unsqueeze(1)
    if not _sigmoid_form_pays(queries, keys, w_v):
        return F.linear((queries + keys).tanh_(), w_v).squeeze(-1)
    sigmoids = (queries + keys).mul_(2.0).sigmoid_()  # doubled after the sum: no inf - inf
    return F.linear(sigmoids, w_v * 2.0).squeeze(-1).sub_(w_v.sum())


def _sigmoid_form_pays(queries: Tensor, keys: Tensor, w_v: Tensor) -> bool:
    """queries (B, Q, 1, H), keys (B, 1, K, H): large, float32, on the CPU, and no gradient to record."""
    grad = torch.is_grad_enabled() and (queries.requires_grad or keys.requires_grad or w_v.requires_grad)
    size = queries.shape[0] * queries.shape[1] * keys.shape[2] * queries.shape[3]
    return (not grad and size >= SIGMOID_FORM_MIN_SIZE and keys.device.type == "cpu"
            and torch.result_type(queries, keys) == torch.float32)


@contextmanager
def enabled(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, the model's attention layers score with `additive_scores` above; restored after.

    Switches on `fast_scores` in every submodule that has one (`attention.AdditiveAttention` and
    `attention.LuongAttention`, whose "concat" score is additive), and puts back what each had, even
    when the block raises.
    """
    layers = [module for module in model.modules() if hasattr(module, "fast_scores")]
    before = [layer.fast_scores for layer in layers]
    for layer in layers:
        layer.fast_scores = True
    try:
        yield model
    finally:
        for layer, value in zip(layers, before, strict=True):
            layer.fast_scores = value


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
