"""Sinusoidal positional encoding: what tells self-attention, which ignores order, where each token is.

Self-attention is permutation equivariant: shuffle the tokens of a sequence and its outputs are shuffled the
same way, nothing else changes. The Transformer adds a fixed vector per position to each token's embedding
so that "the cat" and "cat the" differ (Vaswani et al. 2017, sec. 3.5).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attn_course.validation import check_floating, check_positive_int, check_probability, check_shape


def sinusoidal_encoding(num_steps: int, num_hiddens: int, *, base: float = 10000.0,
                        dtype: torch.dtype = torch.float32, device: torch.device | None = None) -> Tensor:
    """The positional encodings of positions 0..num_steps-1: (num_steps, num_hiddens).

    Vaswani et al. 2017, sec. 3.5: PE(pos, 2i) = sin(pos / base^(2i / d)), PE(pos, 2i + 1) =
    cos(pos / base^(2i / d)), d = num_hiddens (even), base = 10000: sine in the even columns, cosine in the
    odd ones, interleaved, each pair sharing one frequency, wavelengths from 2 pi to base * 2 pi.
    """
    check_positive_int("num_steps", num_steps)
    check_positive_int("num_hiddens", num_hiddens)
    if num_hiddens % 2:
        raise ValueError(f"num_hiddens must be even (sine and cosine pairs), got {num_hiddens}")
    positions = torch.arange(num_steps, dtype=torch.float64, device=device)[:, None]          # (n, 1)
    frequencies = base ** (-torch.arange(0, num_hiddens, 2, dtype=torch.float64, device=device) / num_hiddens)
    angles = positions * frequencies                                                       # (n, d / 2)
    encoding = torch.stack([angles.sin(), angles.cos()], dim=-1)                           # (n, d / 2, 2)
    return encoding.reshape(num_steps, num_hiddens).to(dtype)


class PositionalEncoding(nn.Module):
    """Adds `sinusoidal_encoding` to a batch of embeddings, then dropout (Vaswani et al. 2017, sec. 3.5).

    X: (batch_size, num_steps, num_hiddens), num_steps <= max_len. Returns X + P[:num_steps], same shape.
    The table P (max_len, num_hiddens) is a buffer: it moves with the module and is never trained.
    """

    def __init__(self, num_hiddens: int, dropout: float = 0.0, max_len: int = 1000) -> None:
        super().__init__()
        check_probability("dropout", dropout, allow_one=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", sinusoidal_encoding(max_len, num_hiddens), persistent=False)

    def forward(self, X: Tensor) -> Tensor:
        check_floating("X", X)
        max_len, num_hiddens = self.P.shape
        check_shape("X", X, {"batch_size": None, "num_steps": None, "num_hiddens": num_hiddens})
        if X.shape[1] > max_len:
            raise ValueError(f"X has num_steps = {X.shape[1]} positions, more than max_len = {max_len}; "
                             f"build PositionalEncoding with max_len >= {X.shape[1]}")
        return self.dropout(X + self.P[: X.shape[1]].to(X.dtype))
