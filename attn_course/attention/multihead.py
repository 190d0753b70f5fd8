"""Multi-head attention: h scaled dot-product attentions over learned projections, run side by side.

    attention = MultiHeadAttention(num_hiddens=64, num_heads=4)
    outputs, weights = attention(queries, keys, values, valid_lens, causal=False)

Each head is the course's `DotProductAttention` (chapter 2, Vaswani et al. 2017, eq. 1) with the course's
`masked_softmax` (chapter 1), so a fully masked row gets zero weights, never NaN. Masks are lengths:
`valid_lens` says how many keys each sequence (or each query) may see, and `causal=True` lets query i see
keys 0..i only. Both are per-query valid lengths, min(valid_len, i + 1), which is exactly the form
`masked_softmax` already takes: a causal mask needs no new masking code.

Shapes: queries (batch_size, num_queries, num_hiddens), keys and values (batch_size, num_keys,
num_hiddens); outputs (batch_size, num_queries, num_hiddens), weights (batch_size, num_heads,
num_queries, num_keys).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attn_course.attention.layers import DotProductAttention
from attn_course.validation import (
    check_floating,
    check_positive_int,
    check_probability,
    check_shape,
    check_valid_lens,
)


def split_heads(X: Tensor, num_heads: int) -> Tensor:
    """(batch_size, n, num_hiddens) -> (batch_size * num_heads, n, num_hiddens / num_heads).

    Head k of sequence b is row b * num_heads + k; its features are the k-th slice of num_hiddens / num_heads
    consecutive features (what nn.MultiheadAttention and the paper's concatenation in sec. 3.2.2 assume).
    """
    batch_size, n, num_hiddens = X.shape
    X = X.reshape(batch_size, n, num_heads, num_hiddens // num_heads).transpose(1, 2)
    return X.reshape(batch_size * num_heads, n, num_hiddens // num_heads)


def merge_heads(X: Tensor, num_heads: int) -> Tensor:
    """The inverse of `split_heads`: (batch_size * num_heads, n, d_head) -> (batch_size, n, num_hiddens),
    num_hiddens = num_heads * d_head, i.e. Concat(head_1, ..., head_h) of Vaswani et al. 2017, sec. 3.2.2."""
    _, n, d_head = X.shape
    X = X.reshape(-1, num_heads, n, d_head).transpose(1, 2)
    return X.reshape(X.shape[0], n, num_heads * d_head)


def attention_lens(valid_lens: Tensor | None, batch_size: int, num_queries: int, num_keys: int,
                   causal: bool, device: torch.device) -> Tensor | None:
    """Per-query valid lengths (batch_size, num_queries) combining padding and a causal mask, or None.

    valid_lens: None, (batch_size,) or (batch_size, num_queries), checked by the caller.
    causal: query i may see keys 0..i (needs num_queries == num_keys), so its length is at most i + 1.
    """
    if not causal:
        return valid_lens
    if num_queries != num_keys:
        raise ValueError(f"causal=True needs num_queries == num_keys (self-attention), got num_queries = "
                         f"{num_queries} and num_keys = {num_keys}")
    lens = torch.arange(1, num_queries + 1, device=device).expand(batch_size, num_queries)
    if valid_lens is None:
        return lens
    padding = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    return torch.minimum(lens, padding)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with padding and causal masks (Vaswani et al. 2017, sec. 3.2.2).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o, head_k = Attention(Q W_q^k, K W_k^k, V W_v^k),
    Attention the scaled dot product softmax(q k^T / sqrt(d_head)) v of eq. (1), d_head = num_hiddens / h.
    The h projections W_q^k are the column blocks of one nn.Linear W_q (likewise W_k, W_v), named as in
    d2l; `load_state_dict` from d2l's MultiHeadAttention works, and `attn_course.models.transformer` copies
    them into torch's nn.MultiheadAttention for the tests.
    """

    def __init__(self, num_hiddens: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        check_positive_int("num_hiddens", num_hiddens)
        check_positive_int("num_heads", num_heads)
        check_probability("dropout", dropout, allow_one=False)
        if num_hiddens % num_heads:
            raise ValueError(f"num_hiddens = {num_hiddens} must be a multiple of num_heads = {num_heads} "
                             "(each head gets num_hiddens / num_heads features)")
        self.num_hiddens, self.num_heads = num_hiddens, num_heads
        self.attention = DotProductAttention(dropout, scaled=True)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def extra_repr(self) -> str:
        return f"num_hiddens={self.num_hiddens}, num_heads={self.num_heads}"

    def _check(self, queries: Tensor, keys: Tensor, values: Tensor) -> None:
        check_floating("queries", queries)
        d = self.num_hiddens
        check_shape("queries", queries, {"batch_size": None, "num_queries": None, "num_hiddens": d})
        batch_size = queries.shape[0]
        check_floating("keys", keys)
        check_shape("keys", keys, {"batch_size": batch_size, "num_keys": None, "num_hiddens": d})
        check_floating("values", values)
        check_shape("values", values,
                    {"batch_size": batch_size, "num_keys": keys.shape[1], "num_hiddens": d})

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor, valid_lens: Tensor | None = None,
                causal: bool = False) -> tuple[Tensor, Tensor]:
        """Attend from every query to the keys each may see; returns (outputs, weights).

        queries: (batch_size, num_queries, num_hiddens); keys, values: (batch_size, num_keys, num_hiddens);
        valid_lens: None, (batch_size,) or (batch_size, num_queries), integer in [0, num_keys] (padding);
        causal: query i sees keys 0..i only (self-attention of a decoder; num_queries == num_keys).
        Returns outputs (batch_size, num_queries, num_hiddens) and the weights of every head before
        dropout, (batch_size, num_heads, num_queries, num_keys); a row with no key to see is all zeros.
        """
        self._check(queries, keys, values)
        (batch_size, num_queries, _), num_keys = queries.shape, keys.shape[1]
        valid_lens = check_valid_lens(valid_lens, batch_size, num_queries, num_keys, low=0)
        lens = attention_lens(None if valid_lens is None else valid_lens.to(queries.device),
                              batch_size, num_queries, num_keys, causal, queries.device)
        if lens is not None:
            lens = lens.repeat_interleave(self.num_heads, dim=0)          # one row of lengths per head
        h = self.num_heads
        keys, values = split_heads(self.W_k(keys), h), split_heads(self.W_v(values), h)
        memory = self.attention.prepare(keys, values, lens)
        context, weights = self.attention.attend(split_heads(self.W_q(queries), h), memory)
        outputs = self.W_o(merge_heads(context, h))
        return outputs, weights.reshape(batch_size, h, num_queries, num_keys)
