"""What an attempt hands back, and how it differs from the reference, in words.

`sanitize` turns an attempt's output into plain data (tensors, numbers, strings, lists, tuples, dicts; what
cannot be judged becomes a marker saying why), `_clone` copies a case's inputs for each run, and `compare`
says in one sentence how an output differs from the reference (type, shape, dtype, values within the dtype's
tolerance, NaN where the reference has none), naming the output as the exercise names it ("the weights
have ...", "the final state has ...").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

#: Largest tensor (in elements) and longest list an attempt may hand back for judging.
MAX_ELEMENTS, MAX_ITEMS = 10_000_000, 100_000


def _clone(value: Any) -> Any:
    """A deep copy of inputs: tensors cloned, containers rebuilt, everything else shared."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(_clone(v) for v in value)
    return value


def _opaque(kind: str, detail: str = "") -> dict[str, str]:
    return {"__opaque__": kind, "detail": detail}


def _is_opaque(value: Any) -> bool:
    return isinstance(value, dict) and "__opaque__" in value


def sanitize(value: Any, depth: int = 0) -> Any:
    """The learner's output as plain data -- tensors, numbers, strings, lists, tuples, dicts -- to judge.

    Tensor subclasses become plain CPU tensors (detached); numpy scalars become Python numbers; anything
    else (a numpy array, a module, a generator, ...) becomes a marker naming its type, so the judge can
    say "returned a numpy.ndarray, expected a torch.Tensor". Nothing of the learner's survives but data.
    """
    if depth > 6:
        return _opaque("deeply nested container")
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized:
            return _opaque(f"{value.layout} tensor")
        if value.numel() > MAX_ELEMENTS:
            return _opaque("tensor", f"with {value.numel()} elements, too many to compare")
        return torch.Tensor.as_subclass(value.detach(), torch.Tensor).to("cpu").clone()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if kind.startswith("numpy.") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if isinstance(value, (list, tuple, set, frozenset)):
        if len(value) > MAX_ITEMS:
            return _opaque(type(value).__name__, f"with {len(value)} items, too many to compare")
        items = [sanitize(v, depth + 1) for v in value]
        if isinstance(value, (set, frozenset)):
            return set(items) if all(isinstance(i, (int, str, tuple)) for i in items) else items
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value) and len(value) <= MAX_ITEMS:
        return {k: sanitize(v, depth + 1) for k, v in value.items()}
    shape = getattr(value, "shape", None)
    return _opaque(kind, f"of shape {tuple(shape)}" if isinstance(shape, tuple) else "")


def _describe(value: Any) -> str:
    """A few words on a (sanitized) value, for messages: 'a tensor of shape (2, 3) and dtype float32'."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {str(value.dtype).replace('torch.', '')}"
    if _is_opaque(value):
        return f"a {value['__opaque__']} {value['detail']}".rstrip()
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} item{'' if len(value) == 1 else 's'}"
    return f"the {type(value).__name__} {value!r}"


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing results computed in `dtype` by two correct implementations."""
    return {torch.float16: (1e-2, 2e-3), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-5)}.get(
        dtype, (1e-7, 1e-9)
    )


def _index(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


#: Words that end the noun phrase of an output's name ("the gradient *with* respect to ...").
_PHRASE_ENDS = {"with", "of", "to", "fed", "at", "for", "in", "on", "from", "by", "you", "your"}


def _has(what: str) -> str:
    """`what` + "has" or "have": "the weights have", "the final states have", "the result has", "the gradient
    of the scores has", "the centres p_t have" (the noun before a preposition, symbols after it aside)."""
    words = what.split()
    phrase = []
    for word in words[1:] if words[:1] == ["the"] else []:
        if word in _PHRASE_ENDS:
            break
        phrase.append(word)
    nouns = [w for w in phrase if len(w) > 2 and w.replace("-", "").isalpha() and w.isascii()]
    plural = bool(nouns) and nouns[-1].endswith("s") and not nouns[-1].endswith(("ss", "sis"))
    return f"{what} {'have' if plural else 'has'}"


def _is(what: str) -> str:
    return _verb(what, "is", "are")


def _verb(what: str, singular: str, plural: str) -> str:
    """`what` followed by the verb form that agrees with it."""
    return f"{what} {plural if _has(what).endswith('have') else singular}"


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.4g}"


def compare(
    expected: Any, got: Any, names: str | Sequence[str] = "the result", *, loose: float = 1.0
) -> str | None:
    """None if `got` matches `expected` (within a dtype's tolerance), else a sentence saying how it differs.

    Tensors must agree in type, shape, dtype and values (NaN only where expected has NaN); tuples and lists
    element by element (either container type is accepted); floats to 1e-6 relative; the rest exactly.
    loose: a factor on the tolerances of floating tensors and numbers (for matching a known mistake).
    """
    what = names if isinstance(names, str) else "the result"
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            if isinstance(names, str):
                items = "1 item" if len(expected) == 1 else f"{len(expected)} items"
                return f"{_is(what)} {_describe(got)}, expected {items}"
            return f"{_is(what)} {_describe(got)}, expected {len(expected)} values ({', '.join(names)})"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            name = names[i] if not isinstance(names, str) and i < len(names) else f"item {i} of {what}"
            diff = compare(e, g, name, loose=loose)
            if diff is not None:
                return diff
        return None
    if isinstance(expected, torch.Tensor):
        return _compare_tensors(expected, got, what, loose)
    if isinstance(expected, float):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return f"{_is(what)} {_describe(got)}, expected a number"
        if not math.isclose(got, expected, rel_tol=1e-6 * loose, abs_tol=1e-9 * loose):
            return f"{_is(what)} {got:.6g}, expected {expected:.6g}"
        return None
    if isinstance(expected, set) and isinstance(got, (list, tuple)):
        return f"{_is(what)} {_describe(got)}, expected a set"
    if type(got) is not type(expected) and not (isinstance(expected, int) and isinstance(got, int)):
        return f"{_is(what)} {_describe(got)}, expected {_describe(expected)}"
    if got != expected:
        return f"{_is(what)} {got!r}, expected {expected!r}"
    return None


def _compare_tensors(expected: torch.Tensor, got: Any, what: str, loose: float = 1.0) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{_is(what)} {_describe(got)}, expected a torch.Tensor of shape {tuple(expected.shape)}"
    if got.shape != expected.shape:
        return f"{_has(what)} shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype != expected.dtype:
        e_name, g_name = (str(d).replace("torch.", "") for d in (expected.dtype, got.dtype))
        why = " (compute in the inputs' floating dtype)" if expected.is_floating_point() else ""
        return f"{_has(what)} dtype {g_name}, expected {e_name}{why}"
    if not expected.is_floating_point():
        wrong = (got != expected).flatten().nonzero()
        if wrong.numel() == 0:
            return None
        i = _index(int(wrong[0]), expected.shape)
        return (
            f"{_verb(what, 'differs', 'differ')} at {wrong.numel()} of {expected.numel()} positions, "
            f"e.g. at index {i}: "
            f"expected {expected[i].item()}, got {got[i].item()}"
        )
    e, g = expected.double(), got.double()
    stray_nan = (torch.isnan(g) & ~torch.isnan(e)).flatten().nonzero()
    if stray_nan.numel():
        i = _index(int(stray_nan[0]), expected.shape)
        return (
            f"{_verb(what, 'contains', 'contain')} NaN ({stray_nan.numel()} values), "
            f"e.g. at index {i} where {_fmt(e[i].item())} "
            "was expected"
        )
    rtol, atol = _tolerance(expected.dtype)
    close = torch.isclose(g, e, rtol=rtol * loose, atol=atol * loose, equal_nan=True)
    if bool(close.all()):
        return None
    error = torch.where(close, torch.zeros_like(e), (g - e).abs().nan_to_num(nan=math.inf))
    i = _index(int(error.flatten().argmax()), expected.shape)
    return (
        f"{_verb(what, 'differs', 'differ')} from the reference at {int((~close).sum())} of {close.numel()} "
        "positions "
        f"(e.g. at index {i}: expected {_fmt(e[i].item())}, got {_fmt(g[i].item())})"
    )
