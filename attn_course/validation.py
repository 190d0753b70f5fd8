"""Every input check of the package, in one place: errors name the argument, what was expected and what came.

Numbers (`check_int`, `check_number`, `check_probability`) refuse bool, which Python counts as an int.
Tensors (`check_tensor`, `check_floating`, `check_shape`, `check_tokens`) look only at shapes and dtypes,
which is free; `check_valid_lens` also reads the lengths themselves (one device sync on GPU), and its
lower bound is always explicit: attention accepts an empty row (0), an encoder does not (1).
None of them ever broadcasts or converts silently.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import torch

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _fmt(shape: Sequence[int | str | None]) -> str:
    """Format a shape (sizes or dimension names) like Python prints a tuple, with `*` for "any size"."""
    parts = ["*" if size is None else str(size) for size in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _interval(
    low: float | None, high: float | str | None, low_open: bool = False, high_open: bool = False
) -> str:
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high}"
    return ""


def check_int(
    name: str, value: object, *, low: int | None = None, high: int | None = None, high_name: str | None = None
) -> int:
    """Raise ValueError unless `value` is an int (not a bool) in [low, high]; return it.

    ``check_int("beam_size", 0, low=1)`` raises ``ValueError("beam_size must be an int >= 1, got 0")``;
    `high_name` says where the upper bound comes from:
    ``check_int("valid_len", 3, low=0, high=2, high_name="num_keys")`` raises
    ``ValueError("valid_len must be an int in [0, num_keys] = [0, 2], got 3")``.
    NumPy integers are accepted (they come out of arrays and JSON readers) and returned as int.
    """
    where = _interval(low, high)
    if high_name is not None and high is not None:
        where = f"{_interval(low, high_name)} ={_interval(low, high).removeprefix(' in')}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int{where}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an int{where}, got {value!r}")
    return int(value)


def check_positive_int(name: str, value: object) -> int:
    """Raise ValueError unless `value` is an int >= 1 (a size, a count of steps); return it."""
    return check_int(name, value, low=1)


def check_number(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Raise ValueError unless `value` is a finite real number (not a bool) in the given interval; return it.

    `low_open` / `high_open` exclude the bound itself: a temperature is
    ``check_number("temperature", t, low=0, low_open=True)``, i.e. in (0, inf).
    """
    where = _interval(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number{where}, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        raise ValueError(f"{name} must be a finite number{where}, got {value!r}")
    return float(value)


def check_probability(name: str, value: object, *, allow_zero: bool = True, allow_one: bool = True) -> float:
    """Raise ValueError unless `value` is a probability in [0, 1] (ends excluded on request); return it.

    A dropout rate is ``check_probability("dropout", p, allow_one=False)``, in [0, 1).
    """
    return check_number(name, value, low=0, high=1, low_open=not allow_zero, high_open=not allow_one)


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


def check_tokens(name: str, tokens: object, batch_size: int | None = None, *, ndim: int = 2) -> torch.Tensor:
    """Raise ValueError unless `tokens` is an integer tensor of token ids; return it.

    ndim=2: a batch of sequences, (batch_size, num_steps); ndim=1: one token per sentence, (batch_size,),
    as a decoder step takes them. `batch_size` None accepts any number of rows.
    """
    check_tensor(name, tokens)
    names = ("batch_size", "num_steps")[:ndim]
    sizes = (batch_size, None)[:ndim]
    if tokens.dim() != ndim or (batch_size is not None and tokens.shape[0] != batch_size):
        shape = _fmt(tuple(tokens.shape))
        raise ValueError(f"{name} has shape {shape}, expected {_fmt(names)} = {_fmt(sizes)}")
    if tokens.dtype not in _INTEGER_DTYPES:
        raise ValueError(f"{name} has dtype {tokens.dtype}, expected an integer dtype (token ids)")
    return tokens


def check_valid_lens(
    valid_lens: object,
    batch_size: int,
    num_queries: int | None,
    num_keys: int,
    *,
    low: int,
    per_query: bool = True,
    upper: str = "num_keys",
    name: str = "valid_lens",
    check_values: bool = True,
) -> torch.Tensor | None:
    """Raise ValueError unless `valid_lens` is None or integer lengths of a padded batch; return it.

    valid_lens: None, (batch_size,) (one length per sequence, shared by all its queries) or
    (batch_size, num_queries) (one length per query), integer dtype, every value in [low, num_keys].
    `low` is 0 for attention (a row may have no keys: it gets zero weights) and 1 for an encoder's source
    lengths (a sentence has at least one token). `num_queries=None` accepts any second dimension (when the
    queries are not known yet); `per_query=False` accepts only the per-sequence form (batch_size,).
    `upper` names the largest length in errors: "num_keys" for attention, the padded length elsewhere.
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
    query_shape = _fmt((batch_size, num_queries))
    shape_ok = tuple(valid_lens.shape) == (batch_size,) or (
        per_query
        and valid_lens.dim() == 2
        and valid_lens.shape[0] == batch_size
        and (num_queries is None or valid_lens.shape[1] == num_queries)
    )
    if not shape_ok:
        either = "" if not per_query else f" or (batch_size, num_queries) = {query_shape}"
        raise ValueError(
            f"{name} has shape {_fmt(tuple(valid_lens.shape))}, "
            f"expected (batch_size,) = {per_sequence}{either}"
        )
    if check_values and valid_lens.numel() > 0:
        smallest, largest = torch.stack(torch.aminmax(valid_lens)).tolist()  # one sync, not two
        if smallest < low or largest > num_keys:
            raise ValueError(
                f"{name} must lie in [{low}, {upper}] = [{low}, {num_keys}], "
                f"got values from {smallest} to {largest}"
            )
    return valid_lens
