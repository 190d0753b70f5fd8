"""Input checks that speak to a learner: every error names the argument, what was expected and what came.

The checks look only at shapes and dtypes (free), except `check_valid_lens`, which also reads the
lengths themselves (one device sync on GPU). None of them ever broadcasts or converts silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _fmt(shape: Sequence[int | str | None]) -> str:
    """Format a shape (sizes or dimension names) like Python prints a tuple, with `*` for "any size"."""
    parts = ["*" if size is None else str(size) for size in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def check_tensor(name: str, tensor: object) -> torch.Tensor:
    """Raise ValueError unless `tensor` is a torch.Tensor; return it."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    return tensor


def check_floating(name: str, tensor: object) -> torch.Tensor:
    """Raise ValueError unless `tensor` is a floating-point tensor (float16, bfloat16, float32, float64)."""
    check_tensor(name, tensor)
    if not tensor.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")
    return tensor


def check_shape(
    name: str, tensor: object, expected: Mapping[str, int | None] | Sequence[int | None]
) -> torch.Tensor:
    """Raise ValueError unless `tensor` has the expected shape; return it.

    `expected` is either a sequence of sizes or, better for learners, a mapping from dimension names to
    sizes, in order; None means "any size". For example
    ``check_shape("keys", keys, {"batch_size": 4, "num_keys": None, "key_size": 8})`` raises
    ``ValueError("keys has shape (4, 5, 7), expected (batch_size, num_keys, key_size) = (4, *, 8)")``.
    """
    check_tensor(name, tensor)
    if isinstance(expected, Mapping):
        names, sizes = tuple(expected.keys()), tuple(expected.values())
    else:
        names, sizes = None, tuple(expected)
    actual = tuple(tensor.shape)
    if len(actual) == len(sizes) and all(e is None or a == e for a, e in zip(actual, sizes, strict=True)):
        return tensor
    wanted = _fmt(sizes) if names is None else f"{_fmt(names)} = {_fmt(sizes)}"
    raise ValueError(f"{name} has shape {_fmt(actual)}, expected {wanted}")


def check_valid_lens(
    valid_lens: object,
    batch_size: int,
    num_queries: int | None,
    num_keys: int,
    *,
    name: str = "valid_lens",
    check_values: bool = True,
) -> torch.Tensor | None:
    """Raise ValueError unless `valid_lens` is None or integer lengths of a padded batch; return it.

    valid_lens: None, (batch_size,) (one length per sequence, shared by all its queries) or
    (batch_size, num_queries) (one length per query), integer dtype, every value in [0, num_keys].
    `num_queries=None` accepts any second dimension (when the queries are not known yet).
    With `check_values=False` only the shape and dtype are checked (no device sync).

    Float lengths are refused: d2l's masked_softmax accepts them (it compares against a float arange),
    attn_course does not, because a length is a count and 2.5 keys is a bug upstream.
    """
    if valid_lens is None:
        return None
    check_tensor(name, valid_lens)
    if valid_lens.dtype not in _INTEGER_DTYPES:
        raise ValueError(
            f"{name} must hold integer lengths, got dtype {valid_lens.dtype}; "
            f"d2l accepts float lengths, attn_course does not: pass {name}.long()"
        )
    per_sequence = _fmt((batch_size,))
    per_query = _fmt((batch_size, num_queries))
    shape_ok = tuple(valid_lens.shape) == (batch_size,) or (
        valid_lens.dim() == 2
        and valid_lens.shape[0] == batch_size
        and (num_queries is None or valid_lens.shape[1] == num_queries)
    )
    if not shape_ok:
        raise ValueError(
            f"{name} has shape {_fmt(tuple(valid_lens.shape))}, expected (batch_size,) = {per_sequence} "
            f"or (batch_size, num_queries) = {per_query}"
        )
    if check_values and valid_lens.numel() > 0:
        low, high = torch.stack(torch.aminmax(valid_lens)).tolist()  # one sync, not two
        if low < 0 or high > num_keys:
            raise ValueError(
                f"{name} must lie in [0, num_keys] = [0, {num_keys}], got values from {low} to {high}"
            )
    return valid_lens
