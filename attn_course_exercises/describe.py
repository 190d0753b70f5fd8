"""Kinds of difference: what a difference that no known mistake explains looks like.

`describe_difference` says of what kind a wrong output's difference from the reference is, where no named
mistake of the exercise matches it: an axis swapped, lost or added; a dtype; NaN or inf where the reference
is finite; the sign; a constant factor; a lower precision's rounding; a shift by one position; rows that do
not sum to 1 along the reference's axis; a softmax of scaled scores; zeros where the reference has none;
every difference at one index of an axis. The check (`core.Exercise.judge`) puts the sentence before where
the difference is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import torch

from attn_course_exercises.outputs import _has, _is, _tolerance, _verb, compare


def describe_difference(
    expected: Any,
    got: Any,
    names: str | Sequence[str] = "the result",
    *,
    inputs: Mapping[str, Any] | None = None,
) -> str | None:
    """What kind of difference `got` shows from `expected`, as one sentence, or None where no kind fits.

    Tensors: a shape that is the expected one with two axes swapped, one axis too long or short, or an axis
    of size 1 lost or added; a dtype other than the one the inputs have (and whether the values are right
    once converted); NaN or inf where the reference is finite (and in which rows); the sign flipped; a
    constant factor; values off by about a lower precision's rounding (float32, float16, bfloat16); the
    reference shifted by one position along an axis; rows that do not sum to 1 where the reference's do
    (and the axis along which they do); a softmax of scores scaled by a constant; non-zero (True) where the
    reference is 0 (False) or the other way round; every difference at one index of an axis (the last
    step, one item of the batch) or on the diagonal. Numbers: the sign, or a simple ratio. Lists: an item
    too many or missing at either end. Several outputs: the first differing output that shows a kind.
    expected, got: sanitized outputs; names: as for `compare`; inputs: the case's inputs, to name the one
    whose dtype the result should keep.
    """
    several = isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list))
    if several and len(expected) == len(got):
        what = names if isinstance(names, str) else "the result"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            name = names[i] if not isinstance(names, str) and i < len(names) else f"item {i} of {what}"
            if compare(e, g, name) is not None:
                kind = describe_difference(e, g, name, inputs=inputs)
                if kind is not None or isinstance(names, str):  # a list's first differing item speaks for it
                    return kind
        return None
    what = names if isinstance(names, str) else "the result"
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor):
        return _tensor_kind(expected, got, what, inputs or {})
    if several:
        return _length_kind(list(expected), list(got), what)
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (expected, got))
    return _number_kind(expected, got, what) if numbers else None


def _tensor_kind(e: torch.Tensor, g: torch.Tensor, what: str, inputs: Mapping[str, Any]) -> str | None:
    """The kind of difference between two tensors (see `describe_difference`)."""
    e, g = e.detach(), g.detach()
    if g.shape != e.shape:
        return _shape_kind(e, g, what)
    if g.dtype != e.dtype:
        return _dtype_kind(e, g, what, inputs)
    if e.is_complex() or e.numel() == 0:
        return None
    if compare(e, g) is None:
        return None
    e64, g64 = e.double(), g.double()
    if e.dtype == torch.bool:
        kinds = (_shift_kind, _zeros_kind, _where_kind)
    elif not e.is_floating_point():  # 0 is an index or a count like any other here, not a masked place
        kinds = (_shift_kind, _where_kind)
    else:
        stray = ~torch.isfinite(g64) & torch.isfinite(e64)
        if bool(stray.any()):
            return _nonfinite_kind(e64, g64, stray, what)
        both = torch.isfinite(e64) & torch.isfinite(g64)  # NaN where the reference has NaN is right
        e64, g64 = torch.where(both, e64, 0.0), torch.where(both, g64, 0.0)
        kinds = (
            _all_zero_kind,
            _sign_kind,
            _factor_kind,
            _precision_kind,
            _shift_kind,
            _sums_kind,
            _temperature_kind,
            _zeros_kind,
            _where_kind,
        )
    for kind in kinds:
        found = kind(e64, g64, what, e.dtype)
        if found is not None:
            return found
    return None


def _near(e: torch.Tensor, g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where `g` is `e` within `dtype`'s tolerance, loosened a little (the learner's arithmetic differs)."""
    rtol, atol = _tolerance(dtype)
    return torch.isclose(g, e, rtol=4 * rtol, atol=4 * atol)


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def _axis(axis: int, ndim: int) -> str:
    """'axis 1', or 'the last axis'."""
    return "the last axis" if ndim > 1 and axis == ndim - 1 else f"axis {axis}"


def _possessive(what: str) -> str:
    return f"{what}'" if _has(what).endswith("have") else f"{what}'s"


def _ratio_name(ratio: float, tol: float, largest: int = 16) -> str:
    """' (= 2/3)', ' (= 1/√2)': `ratio` as a simple fraction or the square root of one, or ''."""
    sign = "-" if ratio < 0 else ""
    plain = Fraction(abs(ratio)).limit_denominator(largest)
    if plain.numerator and abs(float(plain) - abs(ratio)) <= tol * abs(ratio):
        return f" (= {sign}{plain})" if plain.denominator > 1 else ""
    square = Fraction(ratio * ratio).limit_denominator(largest)
    if not square.numerator or abs(float(square) - ratio * ratio) > tol * ratio * ratio:
        return ""
    top, bottom = (_root(n) for n in (square.numerator, square.denominator))
    return f" (= {sign}{top}{'' if square.denominator == 1 else '/' + bottom})"


def _root(n: int) -> str:
    """The square root of a positive integer, as a learner would write it: '3' or '√2'."""
    return str(math.isqrt(n)) if math.isqrt(n) ** 2 == n else f"√{n}"


def _shape_kind(e: torch.Tensor, g: torch.Tensor, what: str) -> str | None:
    """Two axes swapped, an axis of size 1 lost or added, the right values in another shape, one axis a
    position too long or too short."""
    es, gs = tuple(e.shape), tuple(g.shape)
    if len(es) == len(gs) and sorted(es) == sorted(gs):
        swapped = [a for a in range(len(es)) if es[a] != gs[a]]
        if len(swapped) == 2:
            a, b = swapped
            same = g.dtype == e.dtype and compare(e, g.transpose(a, b)) is None
            values = ", and its values are the reference's with those axes swapped" if same else ""
            return (
                f"{_has(what)} the expected shape with axes {a} and {b} swapped{values}: a transpose too "
                "many or missing?"
            )
    for short, long, verb in ((gs, es, "lost"), (es, gs, "gained")):
        for a in range(len(long)):
            if long[a] == 1 and long[:a] + long[a + 1 :] == short:
                return (
                    f"{_has(what)} {verb} an axis of size 1 (axis {a}): a `squeeze()`, a sum or max without "
                    "`keepdim=True`, or an index too many or missing?"
                )
    if g.numel() == e.numel():
        if g.dtype == e.dtype and compare(e, g.reshape(es)) is None:
            return f"{_has(what)} the reference's values, in order, but in another shape: reshape to {es}."
        return (
            f"{_has(what)} the right number of values in another shape: an axis split, merged or squeezed in "
            "the wrong place?"
        )
    if len(es) == len(gs):
        off = [a for a in range(len(es)) if es[a] != gs[a]]
        if len(off) == 1 and abs(es[off[0]] - gs[off[0]]) == 1:
            a = off[0]
            more = "one position too many" if gs[a] > es[a] else "one position too few"
            return f"{_has(what)} {more} along axis {a}: an off-by-one in a length or a range?"
    return None


def _promotion(expected: torch.dtype, got: torch.dtype) -> str:
    """What usually turns a result of dtype `expected` into one of dtype `got`, in words."""
    half = (torch.float16, torch.bfloat16)
    if expected in half and got.is_floating_point and got not in half:
        return "it was computed in a wider dtype and not converted back at the end"
    if expected.is_floating_point and got.is_floating_point:
        wider = torch.finfo(got).bits > torch.finfo(expected).bits
        return "a wider tensor or number was mixed in" if wider else "it was computed in a narrower dtype"
    if expected == torch.bool:
        return "masks were combined with arithmetic (`*`, `+`) or converted, where `&`, `|` and `~` keep bool"
    if got.is_floating_point:
        return "floats were mixed in (a float mask, `.float()`, a Python float such as 1.0 or -1e9)"
    if got == torch.bool:
        return "a comparison (bool) was returned where numbers are expected"
    return "another dtype was mixed in"


def _dtype_kind(e: torch.Tensor, g: torch.Tensor, what: str, inputs: Mapping[str, Any]) -> str:
    """A dtype other than the expected one: which input has the expected dtype, whether the values are right
    once converted, and what usually changes a dtype that way."""
    e_name, g_name = (str(d).replace("torch.", "") for d in (e.dtype, g.dtype))
    source = next((n for n, v in inputs.items() if isinstance(v, torch.Tensor) and v.dtype == e.dtype), None)
    keep = f", the dtype of `{source}`," if source else ""
    try:
        right = compare(e, g.to(e.dtype)) is None
    except (RuntimeError, TypeError):
        right = False
    if right:
        return (
            f"Only the dtype is wrong: the values are right, but {_has(what)} dtype {g_name} where {e_name}"
            f"{keep} is expected: {_promotion(e.dtype, g.dtype)}."
        )
    return (
        f"{_has(what)} dtype {g_name} where {e_name}{keep} is expected, and wrong values too: "
        f"{_promotion(e.dtype, g.dtype)}?"
    )


def _nonfinite_kind(e: torch.Tensor, g: torch.Tensor, stray: torch.Tensor, what: str) -> str:
    """NaN or inf where the reference is finite, and where: whole rows (those the reference leaves at 0?)."""
    nan, inf = int((stray & torch.isnan(g)).sum()), int((stray & torch.isinf(g)).sum())
    found = " and ".join(f"{word} at {n}" for n, word in ((nan, "NaN"), (inf, "inf")) if n)
    text = f"{_has(what)} {found} position{'s' if nan + inf > 1 else ''} where the reference is finite"
    if e.dim() >= 1 and e.shape[-1] > 1 and torch.equal(stray.any(-1), stray.all(-1)):
        rows = stray.all(-1)
        if bool((e[rows] == 0).all()):
            return text + (
                ", filling exactly rows that the reference leaves all 0: rows with nothing to normalise over "
                "(every key masked, a valid length of 0)."
            )
        return text + ", filling whole rows (along the last axis)."
    clause = _where_clause(stray)
    cause = "an exp that overflowed or a division by 0?" if not nan else "0 / 0, inf - inf or 0 * inf?"
    return text + (f", all {clause}" if clause else "") + f": {cause}"


def _all_zero_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """All 0 where the reference is not: for a gradient, none reaches that input."""
    if bool(g.any()) or not bool((e.abs() > _tolerance(dtype)[1]).any()):
        return None
    if what.startswith("the gradient"):
        return (
            f"{_is(what)} 0 everywhere: the result does not depend on that input (not used, or cut off by "
            "`.detach()`, `torch.no_grad()`, `.item()` or a tensor rebuilt from numbers)?"
        )
    return f"{_is(what)} 0 everywhere, and the reference is not: a mask or a factor that zeroes everything?"


def _sign_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    if not bool((e.abs() > _tolerance(dtype)[1]).any()) or not bool(_near(-e, g, dtype).all()):
        return None
    return f"{_is(what)} the reference with its sign flipped: a minus sign missing, or one too many?"


def _factor_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """`got` is the reference times one constant (not 1, not -1): named if it is a simple fraction or root;
    a single number only if it is."""
    energy = float((e * e).sum())
    if energy == 0:
        return None
    factor = float((g * e).sum()) / energy
    if abs(factor - 1) < 1e-3 or abs(factor + 1) < 1e-3 or not bool(_near(factor * e, g, dtype).all()):
        return None
    several = int((e.abs() > _tolerance(dtype)[1]).sum()) > 1
    name = _ratio_name(factor, max(16 * _eps(dtype), 1e-9), 16 if several else 64)
    if not several and not name:
        return None
    return (
        f"{_is(what)} the reference times {factor:.4g}{name}"
        + (", everywhere" if several else "")
        + ": a constant factor too many or missing (a scale, a normalisation, a mean for a sum)?"
    )


def _precision_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """Off by about the rounding error of a narrower dtype than the reference's."""
    scale = float(e.abs().max())
    if scale == 0:
        return None
    relative = float(((g - e).abs() / (e.abs() + 1e-3 * scale)).max())
    narrower = {
        torch.float64: (torch.float32, torch.float16, torch.bfloat16),
        torch.float32: (torch.float16, torch.bfloat16),
        torch.float16: (torch.bfloat16,),
    }.get(dtype, ())
    for lower in narrower:
        if relative <= 4 * _eps(lower):
            name = str(lower).replace("torch.", "")
            return (
                f"{_is(what)} off by at most {relative:.2g} relative, about the rounding error of {name} "
                f"(its eps is {_eps(lower):.2g}): was part of the computation done in {name}? Keep it in "
                f"{str(dtype).replace('torch.', '')} (half precision: in float32, converted back at the end)."
            )
    return None


def _shift_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """`got` is the reference moved one position along an axis (the first or last position aside)."""
    for axis in range(e.dim()):
        n = e.shape[axis]
        if n < 3:
            continue
        for step in (1, -1):
            mine, theirs = g.narrow(axis, max(step, 0), n - 1), e.narrow(axis, max(-step, 0), n - 1)
            if theirs.unique().numel() < 2 or not bool(_near(theirs, mine, dtype).all()):
                continue
            if bool(_near(e.narrow(axis, max(step, 0), n - 1), mine, dtype).all()):
                continue  # the overlap is right as it is: no shift needed to explain it
            later = (
                "later (yours at i + 1 is the reference's at i)"
                if step == 1
                else ("earlier (yours at i is the reference's at i + 1)")
            )
            return (
                f"{_is(what)} the reference shifted one position {later} along {_axis(axis, e.dim())}: an "
                "off-by-one in position (a range from 1, `<` where `<=` is meant, a step too early?)"
            )
    return None


def _normalised_axis(e: torch.Tensor, tol: float) -> int | None:
    """The axis (the last first) along which the reference's lines each sum to 1 or are all 0, or None."""
    if e.dim() < 2 or bool((e < -tol).any()):
        return None
    for axis in reversed(range(e.dim())):
        sums = e.sum(axis)
        ones = (sums - 1).abs() <= tol
        if e.shape[axis] > 1 and bool((ones | (sums.abs() <= tol)).all()) and bool(ones.any()):
            return axis
    return None


def _sums_tol(dtype: torch.dtype) -> float:
    return max(1e-3, 8 * _eps(dtype))


def _sums_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """Lines that do not sum to 1 where the reference's do, and the axis along which they do."""
    tol = _sums_tol(dtype)
    axis = _normalised_axis(e, tol)
    if axis is None:
        return None
    ones = (e.sum(axis) - 1).abs() <= tol
    sums = g.sum(axis)
    if bool(((sums - 1).abs() <= tol)[ones].all()):
        return None
    lines = "rows" if axis == e.dim() - 1 else f"lines along axis {axis}"
    start = f"{_possessive(what)} {lines} do not sum to 1 as the reference's do"
    dim = -1 if axis == e.dim() - 1 else axis
    for other in range(e.dim()):
        ones_there = ((g.sum(other) - 1).abs() <= tol).double().mean()
        if other != axis and e.shape[other] > 1 and float(ones_there) >= 0.5:
            return (
                f"{start}, but along axis {other} they do: a softmax or normalisation over dim={other} "
                f"instead of dim={dim}?"
            )
    if abs(float(g.sum()) - 1) <= tol:
        return f"{start}; the whole tensor sums to 1: divided by the sum of everything instead of each row's?"
    if bool((g == 1).all()):
        return f"{start}: every weight is 1, as a softmax over an axis of size 1 gives."
    low, high = (f"{float(x):.3g}" for x in (sums[ones].min(), sums[ones].max()))
    span = low if low == high else f"{low} .. {high}"
    return f"{start} (yours sum to {span}): normalise each over dim={dim}, after masking."


def _temperature_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """Softmax weights that are the reference's with every score multiplied by one constant: log g = c log e +
    a constant per row, with the same zeros."""
    axis = _normalised_axis(e, _sums_tol(dtype))
    if axis is None:
        return None
    E, G = (t.movedim(axis, -1).reshape(-1, e.shape[axis]) for t in (e, g))
    positive = E > 1e-300
    if not torch.equal(positive, G > 1e-300) or bool((positive.sum(1) == 1).all()):
        return None
    count = positive.sum(1, keepdim=True).clamp_min(1)
    centred = []
    for t in (E, G):
        logs = torch.where(positive, t.clamp_min(1e-300).log(), 0.0)
        centred.append(torch.where(positive, logs - logs.sum(1, keepdim=True) / count, 0.0))
    le, lg = centred
    spread = float((le * le).sum())
    if spread < 1e-6:
        return None
    factor = float((lg * le).sum()) / spread
    off = float((lg - factor * le).abs().max())
    allowed = max(1e-3, 64 * _eps(dtype)) * max(1.0, float(le.abs().max()))
    if abs(factor - 1) < 0.01 or factor <= 0 or off > allowed:
        return None
    return (
        f"{_is(what)} {'sharper' if factor > 1 else 'flatter'} than the reference's, exactly as if every "
        f"score were multiplied by {factor:.4g}{_ratio_name(factor, 1e-3)}: the scores are scaled by a wrong "
        "factor (the square root of the wrong size, a 2 or a σ missing or squared?)"
    )


def _zeros_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    """Non-zero (True) where the reference is 0 (False), or 0 where it is not: masking let through or
    overdone, and where."""
    differ = ~_near(e, g, dtype)
    through, lost = differ & (e == 0), differ & (g == 0) & (e != 0)
    other = differ & ~through & ~lost
    nonzero, zero = ("True", "False") if dtype == torch.bool else ("non-zero", "0")
    if bool(through.any()) and not bool((lost | other).any()):
        return (
            f"{_is(what)} {nonzero} at {_count(through)} where the reference is {zero}{_all(through)}, and "
            "right everywhere else: positions that must be masked (padding, a row with nothing to attend to) "
            "were let through."
        )
    if bool(lost.any()) and not bool((through | other).any()):
        return (
            f"{_is(what)} {zero} at {_count(lost)} where the reference is not{_all(lost)}, and right "
            "everywhere else: real positions were masked too?"
        )
    if bool(through.any()) and bool(other.any()):
        return (
            f"{_is(what)} {nonzero} at {int(through.sum())} of the {_count(e == 0)} where the reference is "
            f"{zero} (masking let through?), and wrong at {_count(other)} more."
        )
    return None


def _count(mask: torch.Tensor) -> str:
    n = int(mask.sum())
    return f"{n} position{'s' * (n != 1)}"


def _all(mask: torch.Tensor) -> str:
    """', all at the last position along axis 1' where every True of `mask` lies in one place, else ''."""
    clause = _where_clause(mask)
    return f", all {clause}" if clause else ""


def _where_clause(mask: torch.Tensor) -> str | None:
    """Where every True of `mask` lies, if in one place: 'on the diagonal ...', 'at the last position along
    axis 1', 'in the last item along axis 0 (one item of the batch)'; None if nowhere in particular."""
    if not bool(mask.any()):
        return None
    if mask.dim() >= 2 and mask.shape[-1] == mask.shape[-2] >= 2:
        eye = torch.eye(mask.shape[-1], dtype=torch.bool)
        if not bool((mask & ~eye).any()):
            return "on the diagonal (i == j of the last two axes)"
    for axis in [*range(1, mask.dim()), 0]:
        size = mask.shape[axis]
        hit = mask.movedim(axis, 0).reshape(size, -1).any(1).nonzero().flatten()
        if size < 2 or len(hit) != 1:
            continue
        k = int(hit[0])
        place = "the last" if k == size - 1 else "the first" if k == 0 else None
        if axis == 0 and mask.dim() > 1:
            return f"in {place or 'item'} {'item' if place else k} along axis 0 (one item of the batch)"
        return f"at {place or 'index'} {'position' if place else k} along {_axis(axis, mask.dim())}"
    return None


def _where_kind(e: torch.Tensor, g: torch.Tensor, what: str, dtype: torch.dtype) -> str | None:
    clause = _where_clause(~_near(e, g, dtype))
    return f"{_verb(what, 'differs', 'differ')} from the reference only {clause}." if clause else None


def _number_kind(e: float, g: float, what: str) -> str | None:
    """A number with its sign flipped, or (a float) a simple ratio of the reference."""
    if e == 0 or not (math.isfinite(e) and math.isfinite(g)):
        return None
    if math.isclose(g, -e, rel_tol=1e-6):
        return f"{_is(what)} the reference with its sign flipped: a minus sign missing, or one too many?"
    if not isinstance(e, float):  # a count or an index: a ratio of two is chance
        return None
    name = _ratio_name(g / e, 1e-6, 64)
    if not name:
        return None
    return (
        f"{_is(what)} the reference times {g / e:.4g}{name}: a constant factor too many or missing (a scale, "
        "a normalisation, a mean for a sum)?"
    )


def _length_kind(e: list[Any], g: list[Any], what: str) -> str | None:
    """A list with one item too many or missing at its start or end, the rest right."""
    if len(g) == len(e) + 1:
        if compare(e, g[1:]) is None:
            return f"{_is(what)} the reference with one item too many at the start (the rest is right)."
        if compare(e, g[:-1]) is None:
            return f"{_is(what)} the reference with one item too many at the end (the rest is right)."
    if len(g) + 1 == len(e):
        if compare(e[1:], g) is None:
            return f"{_is(what)} the reference without its first item (the rest is right)."
        if compare(e[:-1], g) is None:
            return f"{_is(what)} the reference without its last item (the rest is right)."
    return None
