"""Attention layers: score the keys, mask the padding, weight the values.

Every layer works in two explicit steps, so the key projection is computed once per source batch:

    memory = attention.prepare(keys, values, valid_lens)   # once per source batch
    context, weights = attention.attend(queries, memory)   # at every decoder step; writes no state

`forward(queries, keys, values, valid_lens)` is `attend(queries, prepare(keys, values, valid_lens))`
and also stores the weights in `.attention_weights`, as d2l's layers do. Nothing else is cached on
the module: a Memory is a plain value, so its correctness never depends on the order of calls.
`prepare(..., fast_scores=True)` marks the memory so that additive scores take the form of
`attn_course.attention.fast` (the same numbers, faster on the CPU); decoding and evaluation ask for it.

Luong's four scores are four classes (`LuongDotAttention`, `LuongGeneralAttention`,
`LuongConcatAttention`, `LuongLocationAttention`); `LuongAttention(score, ...)` builds the one named.

Shapes: queries (batch_size, num_queries, query_size), keys (batch_size, num_keys, key_size),
values (batch_size, num_keys, value_size), valid_lens None | (batch_size,) | (batch_size, num_queries)
integer; context (batch_size, num_queries, value_size), weights (batch_size, num_queries, num_keys).

Attention dropout (`dropout`, a probability p in [0, 1), 0 by default): in training mode each weight of
the masked softmax is zeroed with probability p and the others are divided by 1 - p before they weight
the values, as in nn.MultiheadAttention and d2l's layers; in evaluation mode nothing changes. Masked
positions stay exactly 0. The weights a layer returns are the ones before dropout: what the model meant
to look at, which is what a heatmap or `attn_course.measure.diagnostics` should read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from attn_course.attention import fast
from attn_course.attention.masking import masked_softmax_unchecked
from attn_course.attention.scoring import (
    additive_scores_unchecked,
    check_activation,
    dot_scores,
    location_scores,
)
from attn_course.validation import (
    check_floating,
    check_positive_int,
    check_probability,
    check_shape,
    check_valid_lens,
)


class Memory(NamedTuple):
    """What an attention layer needs from one source batch, computed once by `prepare`.

    keys: (batch_size, num_keys, key_size); values: (batch_size, num_keys, value_size);
    valid_lens: None, (batch_size,) or (batch_size, num_queries), integer, on the values' device,
        checked to lie in [0, num_keys];
    projected_keys: the part of the score that depends only on the keys: W_k k (additive),
        W_a k (general), the key half of W_a applied to k (concat), the keys themselves (dot),
        None (location, whose scores ignore the keys);
    fast_scores: whether additive scores (Bahdanau's, Luong's concat) take the form of
        `attn_course.attention.fast`.
    """

    keys: torch.Tensor
    values: torch.Tensor
    valid_lens: torch.Tensor | None
    projected_keys: torch.Tensor | None
    fast_scores: bool = False


class _Attention(nn.Module, ABC):
    """The steps every attention layer shares; subclasses say how keys are projected and scored."""

    def __init__(self, dropout: float, query_size: int | None, key_size: int | None) -> None:
        super().__init__()
        self.query_size, self.key_size = query_size, key_size
        #: Attention dropout on the weights (see the module doc); active in training mode only.
        self.dropout = nn.Dropout(check_probability("dropout", dropout, allow_one=False))
        self.attention_weights: torch.Tensor | None = None
        #: Softmax temperature tau: scores are divided by it before the masked softmax (None: not at all,
        #: the same as 1). Below 1 the weights sharpen, above 1 they spread; the decoders set it from
        #: `ModelConfig.attention_temperature`.
        self.temperature: float | None = None

    def _tempered(self, scores: torch.Tensor) -> torch.Tensor:
        return scores if self.temperature is None else scores / self.temperature

    @abstractmethod
    def _project_keys(self, keys: torch.Tensor) -> torch.Tensor | None:
        """The key-only part of the score, (batch_size, num_keys, *), computed once per source batch."""

    @abstractmethod
    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        """Scores (batch_size, num_queries, num_keys) of the queries against a prepared memory."""

    def _check_num_keys(self, num_keys: int) -> None:
        """A hook for layers that can only attend over a bounded number of keys (location)."""

    def prepare(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        valid_lens: torch.Tensor | None = None,
        *,
        fast_scores: bool = False,
    ) -> Memory:
        """Check one source batch and compute its key projection, once, for every decoder step.

        keys: (batch_size, num_keys, key_size); values: (batch_size, num_keys, value_size);
        valid_lens: None, (batch_size,) or (batch_size, num_queries), integer in [0, num_keys];
        fast_scores: additive scores in `attn_course.attention.fast`'s form (decoding and evaluation).
        Returns: a Memory to pass to `attend` at every step.
        """
        check_floating("keys", keys)
        check_shape("keys", keys, {"batch_size": None, "num_keys": None, "key_size": self.key_size})
        batch_size, num_keys, _ = keys.shape
        check_floating("values", values)
        check_shape("values", values, {"batch_size": batch_size, "num_keys": num_keys, "value_size": None})
        self._check_num_keys(num_keys)
        valid_lens = check_valid_lens(valid_lens, batch_size, None, num_keys, low=0)
        if valid_lens is not None:
            valid_lens = valid_lens.to(values.device)
        return Memory(keys, values, valid_lens, self._project_keys(keys), bool(fast_scores))

    def attend(self, queries: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from any number of queries to a prepared source batch; writes no state.

        queries: (batch_size, num_queries, query_size), num_queries >= 1 (1 for one decoder step,
            all target steps at once for a parallel Luong decoder);
        memory: from `prepare` on the same batch; its valid_lens (batch_size,) serves any num_queries.
        Returns: context (batch_size, num_queries, value_size) = dropout(weights) @ values (dropout acts
            in training mode only), and the weights (batch_size, num_queries, num_keys) before dropout.
        """
        return self._attend(queries, memory, lens_name="memory.valid_lens")

    def scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        """Raw scores before masking and softmax, for callers that shape the weights themselves.

        queries: (batch_size, num_queries, query_size); memory: from `prepare`.
        Returns: (batch_size, num_queries, num_keys), unmasked (local attention windows them first),
            divided by `temperature` when it is set.
        """
        self._check_queries(queries, memory, lens_name="memory.valid_lens")
        return self._tempered(self._scores(queries, memory))

    def _attend(
        self, queries: torch.Tensor, memory: Memory, lens_name: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._check_queries(queries, memory, lens_name)
        weights = masked_softmax_unchecked(self._tempered(self._scores(queries, memory)), memory.valid_lens)
        return torch.bmm(self.dropout(weights), memory.values), weights

    def _check_queries(self, queries: torch.Tensor, memory: Memory, lens_name: str) -> None:
        batch_size, num_keys, _ = memory.values.shape
        if self.query_size is not None:
            size_name, size = "query_size", self.query_size
        else:  # dot product: the queries must match the keys
            size_name, size = "key_size", memory.keys.shape[-1]
        check_floating("queries", queries)
        check_shape("queries", queries, {"batch_size": batch_size, "num_queries": None, size_name: size})
        # The values were checked by prepare; here only the shape, since num_queries is known only now.
        check_valid_lens(
            memory.valid_lens,
            batch_size,
            queries.shape[1],
            num_keys,
            low=0,
            name=lens_name,
            check_values=False,
        )

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        valid_lens: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """d2l's call: attend(queries, prepare(keys, values, valid_lens)); stores `.attention_weights`.

        queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
        values: (batch_size, num_keys, value_size); valid_lens: None, (batch_size,) or
        (batch_size, num_queries), integer in [0, num_keys].
        Returns: context (batch_size, num_queries, value_size). `.attention_weights` becomes the
        weights (batch_size, num_queries, num_keys) before dropout (not detached, like d2l's).
        """
        memory = self.prepare(keys, values, valid_lens)
        context, self.attention_weights = self._attend(queries, memory, lens_name="valid_lens")
        return context


class DotProductAttention(_Attention):
    """Dot-product attention, scaled by 1/sqrt(d) by default (d2l's DotProductAttention).

    Queries and keys must share their feature size d; there are no parameters.
    Luong et al. 2015, sec. 3.1, the "dot" score of eq. (7) (scaled=False); Vaswani et al. 2017, eq. (1)
    (scaled=True).
    """

    def __init__(self, dropout: float = 0.0, scaled: bool = True) -> None:
        super().__init__(dropout, query_size=None, key_size=None)
        self.scaled = scaled

    def extra_repr(self) -> str:
        return f"scaled={self.scaled}"

    def _project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        return dot_scores(queries, memory.projected_keys, scaled=self.scaled)


class AdditiveAttention(_Attention):
    """Additive (Bahdanau) attention: score w_vᵀ tanh(W_q q + W_k k), W_k k computed once in `prepare`.

    Bias-free layers named as in d2l (W_q: query_size -> num_hiddens, W_k: key_size -> num_hiddens,
    w_v: num_hiddens -> 1), so `load_state_dict(d2l_layer.state_dict())` copies d2l's weights.
    A memory prepared with fast_scores=True takes the scores from `fast.additive_scores`, the same numbers
    computed faster on the CPU (tanh only).
    activation: "tanh" (the paper's) or "relu", w_vᵀ relu(W_q q + W_k k) (chapter 10 compares them).
    Bahdanau et al. 2014, eq. (6) and appendix A.1.2.
    """

    def __init__(self, key_size: int, query_size: int, num_hiddens: int, dropout: float = 0.0,
                 activation: str = "tanh") -> None:
        super().__init__(
            dropout, check_positive_int("query_size", query_size), check_positive_int("key_size", key_size)
        )
        check_positive_int("num_hiddens", num_hiddens)
        self.activation = check_activation(activation)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def _project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W_k(keys)

    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        projected_queries = self.W_q(queries)
        if memory.fast_scores and self.activation == "tanh":  # the fast form rewrites tanh; none for relu
            return fast.additive_scores(projected_queries, memory.projected_keys, self.w_v.weight)
        return additive_scores_unchecked(projected_queries, memory.projected_keys, self.w_v.weight,
                                         self.activation)


class _LuongAttention(_Attention):
    """What Luong's scores share: a query and a key size, and the score's name in the layer's repr."""

    score: str  # "dot", "general", "concat" or "location"

    def __init__(self, query_size: int, key_size: int, dropout: float) -> None:
        super().__init__(
            dropout, check_positive_int("query_size", query_size), check_positive_int("key_size", key_size)
        )

    def extra_repr(self) -> str:
        return f"score={self.score!r}"


class LuongDotAttention(_LuongAttention):
    """Luong's "dot" score qᵀk: no parameters, so the queries and keys must share their size.

    Luong et al. 2015, sec. 3.1, "dot", a score of eq. (7) (the paper lists them under it).
    """

    score = "dot"

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size, dropout)
        if query_size != key_size:
            raise ValueError(
                f"score='dot' needs query_size == key_size, got query_size={query_size}, "
                f"key_size={key_size}; score='general' learns a map between different sizes"
            )

    def _project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        return dot_scores(queries, memory.projected_keys)


class LuongGeneralAttention(_LuongAttention):
    """Luong's "general" score qᵀ W_a k, W_a = nn.Linear(key_size, query_size, bias=False).

    W_a k is computed once per source batch. Luong et al. 2015, sec. 3.1, "general", a score of eq. (7).
    """

    score = "general"

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size, dropout)
        self.W_a = nn.Linear(key_size, query_size, bias=False)

    def _project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.W_a(keys)

    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        return dot_scores(queries, memory.projected_keys)


class LuongConcatAttention(_LuongAttention):
    """Luong's "concat" score v_aᵀ tanh(W_a [q; k]): the additive score with W_a split in two.

    W_a = nn.Linear(query_size + key_size, num_hiddens, bias=False), v_a = nn.Linear(num_hiddens, 1,
    bias=False); the key half of W_a is applied once per batch (`scoring.concat_scores` explains the split).
    A memory prepared with fast_scores=True scores with `fast.additive_scores`.
    Luong et al. 2015, sec. 3.1, "concat", a score of eq. (7).
    """

    score = "concat"

    def __init__(self, query_size: int, key_size: int, num_hiddens: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size, dropout)
        check_positive_int("num_hiddens", num_hiddens)
        self.W_a = nn.Linear(query_size + key_size, num_hiddens, bias=False)
        self.v_a = nn.Linear(num_hiddens, 1, bias=False)

    def _project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return F.linear(keys, self.W_a.weight[:, self.query_size :])

    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        projected_queries = F.linear(queries, self.W_a.weight[:, : self.query_size])
        if memory.fast_scores:
            return fast.additive_scores(projected_queries, memory.projected_keys, self.v_a.weight)
        return additive_scores_unchecked(projected_queries, memory.projected_keys, self.v_a.weight)


class LuongLocationAttention(_LuongAttention):
    """Luong's location-based weights softmax(W_a q) over source positions; the keys are ignored.

    W_a = nn.Linear(query_size, max_len, bias=False) (bias-free like the paper's equation; a bias would only
    add a fixed preference per position). Only the keys' count is checked, against max_len; weights past
    each valid length are 0 like every other score's. Luong et al. 2015, eq. (8): a_t = softmax(W_a h_t).
    """

    score = "location"

    def __init__(self, query_size: int, key_size: int, max_len: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size, dropout)
        self.max_len = check_positive_int("max_len", max_len)
        self.W_a = nn.Linear(query_size, max_len, bias=False)

    def _check_num_keys(self, num_keys: int) -> None:
        if num_keys > self.max_len:
            raise ValueError(
                f"keys has num_keys = {num_keys} positions, but score='location' was built with "
                f"max_len = {self.max_len}; build it with max_len >= {num_keys}"
            )

    def _project_keys(self, keys: torch.Tensor) -> None:
        return None  # the scores do not depend on the keys

    def _scores(self, queries: torch.Tensor, memory: Memory) -> torch.Tensor:
        return location_scores(queries, self.W_a.weight, memory.values.shape[1])


LUONG_SCORES: dict[str, type[_LuongAttention]] = {
    "dot": LuongDotAttention,
    "general": LuongGeneralAttention,
    "concat": LuongConcatAttention,
    "location": LuongLocationAttention,
}
"""Luong's scores by name (sec. 3.1), as `LuongAttention` and `LuongDecoder(score=...)` name them."""


def LuongAttention(
    score: str,
    query_size: int,
    key_size: int,
    num_hiddens: int | None = None,
    max_len: int | None = None,
    dropout: float = 0.0,
) -> _LuongAttention:
    """Luong's global attention with the score named: "dot", "general", "concat" or "location".

    Builds the class `LUONG_SCORES[score]` (a function named like a class, so that the chapters' calls
    read like the layers they build). num_hiddens (the output size of W_a) is required by
    "concat" and refused by the others; max_len (the most source positions) is required by "location" and
    refused by the others: a silently ignored argument hides a mistake.
    """
    if score not in LUONG_SCORES:
        raise ValueError(f"score must be one of {', '.join(map(repr, LUONG_SCORES))}, got {score!r}")
    check_positive_int("query_size", query_size)
    check_positive_int("key_size", key_size)
    check_probability("dropout", dropout, allow_one=False)
    if score == "concat" and num_hiddens is None:
        raise ValueError("score='concat' needs num_hiddens (the output size of W_a), got None")
    if score != "concat" and num_hiddens is not None:
        raise ValueError(f"num_hiddens is only used by score='concat', got num_hiddens={num_hiddens!r}")
    if score == "location" and max_len is None:
        raise ValueError("score='location' needs max_len (the most source positions it can score)")
    if score != "location" and max_len is not None:
        raise ValueError(f"max_len is only used by score='location', got max_len={max_len!r}")
    if score == "concat":
        return LuongConcatAttention(query_size, key_size, num_hiddens, dropout)
    if score == "location":
        return LuongLocationAttention(query_size, key_size, max_len, dropout)
    return LUONG_SCORES[score](query_size, key_size, dropout)

