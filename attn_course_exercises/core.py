"""The machinery every exercise shares: verdicts and their display, cases and mistakes, comparisons.

`CheckResult` is a verdict (shown as HTML, Markdown or text); `Case`, `Mistake` and `ErrorHint` describe one
set of inputs, a known mistake (the wrong code that makes it) and a known error; `sanitize` turns an
attempt's output into plain data and `compare` says in words how it differs from the reference, and
`describe_difference` of what kind the difference is where no known mistake explains it (an axis that does
not sum to 1, padding let through, a shift by one position, a dtype, a lower precision, NaN, a constant
factor, ...); `summarize_exception` reports the learner's own line, telling the learner's frames from the
library's (torch, Python and all of attn_course); `Exercise` ties them together into `cases()`, `attempt()`,
`judge()` and the learner's `check()`, `hint()` and `solution()`.
"""

from __future__ import annotations

import ast
import copy
import html
import importlib.util
import inspect
import math
import os
import re
import sys
import sysconfig
import textwrap
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import CodeType
from typing import Any

import torch

import attn_course
from attn_course.validation import check_int

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"

_STATUS_TEXT = {PASSED: "Correct", FAILED: "Incorrect", NOT_ATTEMPTED: "Not attempted yet"}
_STATUS_COLOUR = {PASSED: "#2e7d32", FAILED: "#c62828", NOT_ATTEMPTED: "#1565c0"}

#: Largest tensor (in elements) and longest list an attempt may hand back for judging.
MAX_ELEMENTS, MAX_ITEMS = 10_000_000, 100_000


# ----------------------------------------------------------------------------------------------------
# Results and their display


def _markdown_to_html(text: str) -> str:
    """Escape `text` for HTML, render `code` spans and keep line breaks."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return escaped.replace("\n", "<br>")


class _Rich:
    """Something to show in a notebook: HTML and Markdown for the front end, plain text elsewhere."""

    def __init__(self, text: str, html_text: str, markdown: str | None = None):
        self.text, self.html, self.markdown = text, html_text, markdown

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {"text/plain": self.text, "text/html": self.html}
        if self.markdown is not None:
            bundle["text/markdown"] = self.markdown
        return bundle

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _show(rich: _Rich) -> None:
    """Display in IPython (HTML with a plain-text fallback); outside IPython, display() prints the text."""
    from IPython.display import display

    display(rich)


@dataclass
class CheckResult:
    """The verdict on one exercise: `passed`, a message in words, and how many cases passed.

    status: "passed", "failed" or "not attempted"; message: what is right or the likely mistake.
    Shown in colour in a notebook; `str(result)` is the plain-text form.
    """

    exercise: str
    name: str
    status: str
    message: str
    cases_passed: int = 0
    cases_total: int = 0
    _suppress_next_display: bool = field(default=False, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def __str__(self) -> str:
        return f"{_STATUS_TEXT[self.status]} ({self.exercise}, {self.name}): {self.message}"

    def rich(self) -> _Rich:
        """The result as IPython shows it: coloured HTML, and the plain text of `str(result)`."""
        colour = _STATUS_COLOUR[self.status]
        body = (
            f'<div style="border-left: 4px solid {colour}; padding: 2px 10px; margin: 2px 0">'
            f'<span style="color: {colour}; font-weight: bold">{_STATUS_TEXT[self.status]}</span> '
            f"<small>({html.escape(self.exercise)}, <code>{html.escape(self.name)}</code>)</small>: "
            f"{_markdown_to_html(self.message)}</div>"
        )
        return _Rich(str(self), body)

    def _ipython_display_(self) -> None:
        # check() has just shown this result; the notebook echoing its return value would show it twice.
        if self._suppress_next_display:
            self._suppress_next_display = False
            return
        _show(self.rich())


# ----------------------------------------------------------------------------------------------------
# Cases, attempts, comparisons


@dataclass(frozen=True)
class Case:
    """One set of inputs for an exercise: `inputs` go to the learner's code, `label` describes them.

    names: what to call the output (a string) or each element of a tuple output, in messages.
    """

    label: str
    inputs: dict[str, Any]
    spec: dict[str, Any]
    names: str | tuple[str, ...] = "the result"


@dataclass(frozen=True)
class Mistake:
    """A known mistake: if the learner's output is the mistake's on the failing cases, say `hint`.

    The convention: write a mistake once, as the wrong code that makes it, `Mistake(hint, wrong=fn)`. `fn` is
    an answer as a learner writes it: the exercise's own signature (a class for a class exercise), this one
    mistake and nothing else wrong, no call to the package objects the exercise re-implements (it is judged
    as an answer, so such a call is refused). It lives beside its exercise in the chapter's module, named for
    the mistake (`mask_inverted`). The check runs it as it runs the learner's code (`Exercise.call`) on a
    copy of each case's inputs; where it raises, the mistake does not apply to that case, so wrong code for a
    mistake that only some inputs allow (half-precision scores, a sentence that needs every step) raises on
    the others. Where it gives the reference's output on a case the learner fails, that case speaks against
    the mistake, as a variant's right output does. The tests submit every `wrong` as an answer and require its
    rejection to start with `hint`, so no copy of a mistake lives in the tests. `variant=` (the older form: a
    function of the inputs returning the wrong output, or None where the mistake cannot be made) still works;
    give exactly one.
    """

    hint: str
    variant: Callable[[dict[str, Any]], Any] | None = None
    wrong: Any = None

    def __post_init__(self) -> None:
        if (self.variant is None) == (self.wrong is None):
            raise ValueError(f"Mistake({self.hint[:40]!r}...) needs exactly one of `wrong` and `variant`")

    @property
    def code(self) -> str | None:
        """The wrong code as a learner reads it (its source), or None for a variant or code without source."""
        if self.wrong is None:
            return None
        source = getattr(self.wrong, "__course_source__", None)
        if source is not None:
            return source
        try:
            return textwrap.dedent(inspect.getsource(self.wrong))
        except (OSError, TypeError):
            return None

    def wrapped(self, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Mistake:
        """This mistake for an exercise whose `call` and reference `wrap` changes (e.g. to add gradients):
        a variant is wrapped alike; wrong code is returned as it is, since it already runs through `call`."""
        return self if self.wrong is not None else Mistake(self.hint, wrap(self.variant))


def edit_of(
    solution: str, name: str, *edits: tuple[str, str], namespace: Mapping[str, Any], rename: str | None = None
) -> Callable[..., Any]:
    """A mistake written as an edit of the model answer: `solution`'s source with each (right, wrong) piece
    replaced (each `right` must occur exactly once), compiled in a copy of `namespace` (the chapter's
    imports), the object it defines as `name` returned, renamed `rename` (the mistake's name) if given. The
    edited source is kept on it as `__course_source__` (what `Mistake.code` shows), so the one model answer
    stays the one copy of the algorithm and a mistake is the few characters that make it."""
    source = textwrap.dedent(solution).strip("\n") + "\n"
    for right, wrong in edits:
        if source.count(right) != 1:
            count = source.count(right)
            raise ValueError(f"{rename or name}: {right!r} occurs {count} times in the solution, not once")
        source = source.replace(right, wrong)
    scope = dict(namespace)
    exec(compile(source, f"<{rename or name}>", "exec"), scope)
    answer = scope[name]
    if rename is not None:
        answer.__name__ = answer.__qualname__ = rename
    answer.__course_source__ = source
    return answer


@dataclass(frozen=True)
class ErrorHint:
    """If the learner's code raised an error whose "Type: message" matches `pattern` (and, when `line` is
    given, whose line in the learner's code matches `line`), say `hint`."""

    pattern: str
    hint: str
    line: str | None = None

    def matches(self, text: str, where: str) -> bool:
        on_line = self.line is None or bool(re.search(self.line, where))
        return on_line and bool(re.search(self.pattern, text))


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


def _library_dirs() -> tuple[str, ...]:
    # The course's code: this package (the exercises' checks) and the library whose functions they check.
    paths = {os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))}
    paths.add(os.path.dirname(os.path.abspath(attn_course.__file__)))
    # The instructor's tools (the grading sandbox runs beside the learner's code) are not the learner's
    # either: found without importing them, and absent where only the learner's library is installed.
    tools = importlib.util.find_spec("attn_course_tools")
    paths.update((tools.submodule_search_locations or []) if tools is not None else [])
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            paths.add(path)
    return tuple(os.path.realpath(p) + os.sep for p in paths)


_LIBRARY_DIRS = _library_dirs()


def is_learner_frame(filename: str) -> bool:
    """Whether a traceback frame of `filename` is the learner's code: a notebook cell or exec'd source, or a
    file outside Python's library, torch and attn_course."""
    if filename.startswith("<frozen"):
        return False
    if filename.startswith("<"):
        return True
    return not os.path.realpath(filename).startswith(_LIBRARY_DIRS)


def summarize_exception(exc: BaseException) -> dict[str, str]:
    """type, message (shortened) and where: the learner's own line that led to the error, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if is_learner_frame(f.filename)]
    where = ""
    if frames:
        frame = frames[-1]
        line = (frame.line or "").strip()
        where = f"line {frame.lineno}" + (f": `{line}`" if line else "")
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(message) > 300:
        message = message[:297] + "..."
    return {"type": type(exc).__name__, "message": message, "where": where}


def _raised_by_learner(exc: BaseException) -> bool:
    """Whether the exception was raised in the learner's own code (not inside torch or the package)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and is_learner_frame(frames[-1].filename)


def _explains(expected: Any, wrong: Any, got: Any, names: str | Sequence[str]) -> bool:
    """Whether a mistake's output `wrong` explains the learner's `got`: equal to it (loosely, since the
    learner's numerics may differ a little from the variant's) in every output the mistake changes. For an
    answer with several outputs, the others may be wrong in another way: the mistake explains its part."""
    several = not isinstance(names, str) and all(isinstance(x, (tuple, list)) for x in (expected, wrong, got))
    if not several or not len(expected) == len(wrong) == len(got):
        return compare(wrong, got, names, loose=10.0) is None
    changed = [i for i, (e, w) in enumerate(zip(expected, wrong, strict=True)) if compare(e, w) is not None]
    return bool(changed) and all(compare(wrong[i], got[i], loose=10.0) is None for i in changed)


def _changed_input(case: Case, att: Mapping[str, Any]) -> str | None:
    """The name of a tensor input the attempt changed in place (its `inputs_after` differ), or None."""
    if att.get("status") != "ok":
        return None
    for name, before in case.inputs.items():
        if isinstance(before, torch.Tensor):
            after = att.get("inputs_after", {}).get(name)
            if (
                not isinstance(after, torch.Tensor)
                or after.shape != before.shape
                or not torch.equal(after.to(before.dtype), before)
            ):
                return name
    return None


def _unexplained(
    problems: Sequence[tuple[int, int, str, Case]],
    cases: Sequence[Case],
    attempts: Sequence[Mapping[str, Any]],
    references: Sequence[Any],
) -> tuple[str, int]:
    """The message and the case to show when no known mistake agrees with every failing case: what differs,
    where and of what kind (`describe_difference`), not a guess. A known error first (an input changed in
    place counts as one); else the first difference whose kind can be told, else the first difference.
    problems: (priority, case index, message, case) of each failing case."""
    ordered = sorted(problems, key=lambda p: p[:2])
    if ordered[0][0] != 2:
        return ordered[0][2], ordered[0][1]
    chosen, kind = ordered[0], None
    # A later case is shown only where the first difference is bare (not a shape, a dtype or a NaN).
    bare = not any(word in chosen[2] for word in (" shape (", " dtype ", " NaN ("))
    for candidate in ordered if bare else ordered[:1]:
        att = attempts[candidate[1]]
        if att.get("status") == "ok":
            output, expected, case = att.get("output"), references[candidate[1]], candidate[3]
            kind = describe_difference(expected, output, case.names, inputs=case.inputs)
            if kind is not None:
                chosen = candidate
                break
    problem = chosen[2] + _pointer(chosen[2]) + _what_differs(cases, attempts, references)
    if kind is not None:
        problem = f"{kind[0].upper()}{kind[1:]}\n{problem}"
    return problem, chosen[1]


def _pointer(problem: str) -> str:
    """Where to look for a difference that no known mistake explains: a NaN or a shape says which lines."""
    if " NaN (" in problem:
        return (
            " NaN comes from 0 / 0, inf - inf or 0 * inf: look for a row with nothing to normalise over, an "
            "`exp` that underflows to 0 or overflows to inf, an -inf fill, or a mask multiplied into an inf."
        )
    if " shape (" in problem:
        return (
            " Look at the line that builds it: an axis dropped (`squeeze()`, a sum or max without "
            "`keepdim=True`), one added, or two swapped?"
        )
    return ""


def _what_differs(
    cases: Sequence[Case], attempts: Sequence[Mapping[str, Any]], references: Sequence[Any]
) -> str:
    """For an answer with several outputs: which of them differ from the reference, on how many of the cases
    that ran, and so which lines to read ("" for a single output)."""
    wrong: dict[str, int] = {}
    right: list[str] = []
    ran = 0
    for case, att, expected in zip(cases, attempts, references, strict=True):
        got = att.get("output")
        several = not isinstance(case.names, str) and isinstance(expected, (tuple, list))
        if att.get("status") != "ok" or not several:
            continue
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return ""
        ran += 1
        for name, e, g in zip(case.names, expected, got, strict=False):
            if compare(e, g, name) is not None:
                wrong[name] = wrong.get(name, 0) + 1
            elif name not in right:
                right.append(name)
    if not wrong:
        return ""
    counts = ", ".join(f"{name} in {n} of {ran}" for name, n in wrong.items())
    fine = [name for name in right if name not in wrong]
    agree = ""
    if fine:
        names = " and ".join(fine)
        agree = f"; {names} {'agree' if len(fine) > 1 else _verb(names, 'agrees', 'agree')[len(names) + 1 :]}"
        agree += " in every case that ran"
    lines = " and ".join(wrong)
    return f"\nWhat differs: {counts} cases that ran{agree}. Read the lines that compute {lines}."


# ----------------------------------------------------------------------------------------------------
# Kinds of difference: what a difference that no known mistake explains looks like


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


# ----------------------------------------------------------------------------------------------------
# Delegation: an answer that calls the package function it is meant to re-implement


def _codes(obj: Any) -> list[CodeType]:
    """The code objects of a function (unwrapped from its decorators) or of every method a class defines."""
    if isinstance(obj, type):
        return [code for value in vars(obj).values() for code in _codes(getattr(value, "__func__", value))]
    code = getattr(inspect.unwrap(obj), "__code__", None) if callable(obj) else None
    return [code] if isinstance(code, CodeType) else []


class _CallWatch:
    """Notes the first call, while the learner's code runs, of one of `watched` ({code object: dotted name of
    the package object it belongs to}), whoever makes it: the learner's code directly or a helper it calls."""

    def __init__(self, watched: Mapping[CodeType, str]):
        self.watched, self.called = watched, None

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and self.called is None:
            self.called = self.watched.get(frame.f_code)

    def __enter__(self) -> _CallWatch:
        self.previous = sys.getprofile()
        if self.watched:
            sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.setprofile(self.previous)


#: The message of a package function switched off in the grading sandbox
#: (attn_course_tools.grading.sandbox_child).
_SWITCHED_OFF = re.compile(r"^(\S+) is switched off while grading")


# ----------------------------------------------------------------------------------------------------
# Exercises


_MISSING = object()


def _make_stub(solution: str, write: Sequence[str] | None) -> str:
    """The solution with the bodies of the functions (or the methods named in `write`) replaced by
    ``raise NotImplementedError``, after their docstrings. Everything else is kept as written."""
    tree = ast.parse(solution)
    lines = solution.splitlines()
    targets = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (write is None or node.name in write):
            targets.append(node)
        elif isinstance(node, ast.ClassDef):
            targets += [m for m in node.body if isinstance(m, ast.FunctionDef) and write and m.name in write]
    for node in sorted(targets, key=lambda n: n.lineno, reverse=True):
        first = node.body[0]
        has_doc = (
            isinstance(first, ast.Expr)
            and isinstance(getattr(first, "value", None), ast.Constant)
            and isinstance(first.value.value, str)
        )
        start = first.end_lineno if has_doc else first.lineno - 1
        indent = " " * first.col_offset
        lines[start : node.end_lineno] = [
            f"{indent}raise NotImplementedError  # replace this line with your code"
        ]
    return "\n".join(lines) + "\n"


class Exercise:
    """One exercise: the learner writes `name`; `check()` compares it with the package's reference.

    key: "ch1.q2" (chapter and question); name: the function or class the learner defines;
    solution: the model answer (Python source, also the body of the solutions notebook's cell);
    write: for a class, the methods the learner writes (the rest of the class is given);
    hint: (nudge, concept, line), the hints `hint()` shows one after another (or a single hint);
    covers: what the cases cover, said when the check passes;
    defaults: the spec of a case with every key (hidden cases are merged over it);
    specs: the cases every learner sees; build(spec) -> Case; call(answer, inputs) -> output runs the
    learner's code; reference(inputs) -> output; mistakes and error_hints name wrong answers;
    package: dotted names of the package objects the learner re-implements: refused as answers, an answer
    that calls one fails, and the grading sandbox switches them off. avoid: other package objects this
    answer may not call (its prompt says to write it without them), though other exercises use them.
    graded: True for graded work (`for_graded_work()`): `solution()` then says that solutions are off.
    """

    graded = False

    def __init__(
        self,
        key: str,
        name: str,
        title: str,
        *,
        solution: str,
        hint: str | Sequence[str],
        covers: str,
        defaults: Mapping[str, Any],
        specs: Sequence[Mapping[str, Any]],
        build: Callable[[dict[str, Any]], Case],
        call: Callable[[Any, dict[str, Any]], Any],
        reference: Callable[[dict[str, Any]], Any],
        mistakes: Sequence[Mistake] = (),
        error_hints: Sequence[ErrorHint] = (),
        write: Sequence[str] | None = None,
        package: Sequence[str] = (),
        avoid: Sequence[str] = (),
    ):
        self.key, self.name, self.title = key, name, title
        self.solution_code = textwrap.dedent(solution).strip("\n") + "\n"
        self.write = tuple(write) if write is not None else None
        self.stub_code = _make_stub(self.solution_code, self.write)
        self.hints = (hint,) if isinstance(hint, str) else tuple(hint)
        if not self.hints or not all(isinstance(h, str) and h.strip() for h in self.hints):
            raise ValueError(f"{key}: hint must be a non-empty string or a sequence of them, got {hint!r}")
        self.covers, self._hints_shown = covers, 0
        self.defaults, self.specs = dict(defaults), tuple(dict(s) for s in specs)
        self._build, self._call, self._reference = build, call, reference
        self.mistakes, self.error_hints, self.package = tuple(mistakes), tuple(error_hints), tuple(package)
        self.avoid = tuple(avoid)
        self._watched: dict[CodeType, str] | None = None

    def __repr__(self) -> str:
        return f"<exercise {self.key}: {self.title} (write `{self.name}`)>"

    @property
    def marker(self) -> str:
        """The comment that starts the learner's cell; the grader finds the cell by it."""
        return f"# EXERCISE {self.key}"

    # -- cases -----------------------------------------------------------------------------------

    def cases(self, hidden: Mapping[str, Any] | None = None) -> list[Case]:
        """The cases to check, in order: the shipped specs, then the hidden ones (for grading).

        hidden: {"seeds": [...], "cases": [{...}, ...]}: every shipped spec again with each extra seed,
        and extra specs merged over `defaults` (keys must be among the defaults' keys).
        """
        specs = [dict(self.defaults, **s) for s in self.specs]
        if hidden:
            unknown = set(hidden) - {"seeds", "cases"}
            if unknown:
                raise ValueError(
                    f"hidden inputs for {self.key} have keys {sorted(unknown)}, "
                    "expected only 'seeds' and 'cases'"
                )
            for seed in hidden.get("seeds", ()):
                check_int(f"a hidden seed for {self.key}", seed)
                specs += [dict(self.defaults, **dict(s, seed=seed)) for s in self.specs]
            for extra in hidden.get("cases", ()):
                wrong = set(extra) - set(self.defaults)
                if wrong:
                    raise ValueError(
                        f"a hidden case for {self.key} has keys {sorted(wrong)}, "
                        f"expected keys among {sorted(self.defaults)}"
                    )
                specs.append(dict(self.defaults, **extra))
        cases = []
        for spec in specs:
            try:
                cases.append(self._build(spec))
            except (ValueError, RuntimeError, TypeError, IndexError) as exc:
                raise ValueError(f"cannot build a case for {self.key} from {spec}: {exc}") from exc
        return cases

    # -- running the learner's code (the only part that touches it) ------------------------------

    def attempt(self, answer: Any, case: Case) -> dict[str, Any]:
        """Run the learner's `answer` on one case; return plain data only.

        {"status": "ok", "output": ..., "inputs_after": {name: tensor}} or {"status": "error", "error":
        {"type", "message", "where"}} or {"status": "not attempted"} (the stub's NotImplementedError).
        """
        inputs = _clone(case.inputs)
        watch = _CallWatch(self.watched_calls())
        result = self._run(answer, inputs, watch)
        if watch.called is not None:  # plain data: the dotted name of the package object it called
            result["calls"] = watch.called
        return result

    def call(self, answer: Any, inputs: dict[str, Any]) -> Any:
        """Run `answer` (a learner's function or class) on `inputs` as the check does; its raw output."""
        return self._call(answer, inputs)

    def reference(self, inputs: dict[str, Any]) -> Any:
        """The reference output on `inputs` (computed by the package's own implementation)."""
        return self._reference(inputs)

    def mistake_output(self, mistake: Mistake, inputs: dict[str, Any]) -> Any:
        """What `mistake` gives on `inputs`: its wrong code run as an answer, or its variant's output."""
        if mistake.wrong is not None:
            return sanitize(self.call(mistake.wrong, inputs))
        return mistake.variant(inputs)

    def _run(self, answer: Any, inputs: dict[str, Any], watch: _CallWatch) -> dict[str, Any]:
        try:
            with watch:
                output = self.call(answer, inputs)
        except NotImplementedError as exc:
            if _raised_by_learner(exc):
                return {"status": NOT_ATTEMPTED}
            return {"status": "error", "error": summarize_exception(exc)}
        except (Exception, SystemExit) as exc:  # the learner's bug, reported in words below
            return {"status": "error", "error": summarize_exception(exc)}
        after = {k: sanitize(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        return {"status": "ok", "output": sanitize(output), "inputs_after": after}

    def watched_calls(self) -> dict[CodeType, str]:
        """{code object: dotted name} of the package objects in `package` and `avoid`, whose calls
        `attempt` notes."""
        if self._watched is None:
            self._watched = {
                code: dotted for dotted in (*self.package, *self.avoid) for code in _codes(resolve(dotted))
            }
        return self._watched

    def _delegation(self, attempts: Sequence[Mapping[str, Any]]) -> str | None:
        """The dotted name of a package object the answer called on some case (noted by `attempt`, or refused
        by the grading sandbox), or None."""
        for att in attempts:
            if isinstance(att.get("calls"), str):
                return att["calls"]
            found = _SWITCHED_OFF.match(str((att.get("error") or {}).get("message", "")))
            if att.get("status") == "error" and found:
                return found.group(1)
        return None

    # -- judging (never runs learner code) -------------------------------------------------------

    def judge(self, cases: Sequence[Case], attempts: Sequence[Mapping[str, Any]]) -> CheckResult:
        """The verdict on the attempts (one per case, as `attempt` returns them)."""
        if len(attempts) != len(cases):
            return self._result(FAILED, f"only {len(attempts)} of {len(cases)} cases were run")
        if attempts and all(a.get("status") == NOT_ATTEMPTED for a in attempts):
            return self._result(NOT_ATTEMPTED, self._not_attempted_message(), 0, len(cases))
        called = self._delegation(attempts)
        if called is not None:
            whose = "the course's own" if called.startswith("attn_course") else "the library function"
            return self._result(
                FAILED,
                f"Your `{self.name}` calls {whose} `{called}`: the exercise is to write it "
                "yourself, without calling it (or a function built on it).",
                0,
                len(cases),
            )
        passed, problems, references = 0, [], []
        for index, (case, att) in enumerate(zip(cases, attempts, strict=True)):
            expected = self.reference(_clone(case.inputs)) if att.get("status") == "ok" else None
            references.append(expected)
            problem = self._judge_case(case, att, expected)
            if problem is None:
                passed += 1
            else:
                problems.append((problem[0], index, problem[1], case))
        if not problems:
            return self._result(
                PASSED,
                f"`{self.name}` agrees with the reference on all {len(cases)} cases ({self.covers}).",
                passed,
                len(cases),
            )
        matches = [
            self._matching_mistakes(case, att, expected)
            for case, att, expected in zip(cases, attempts, references, strict=True)
        ]
        named = self._diagnosis(matches)
        if named is not None:
            hint, index = named
            problem = self.mistakes[hint].hint
        else:
            problem, index = _unexplained(problems, cases, attempts, references)
        case = cases[index]
        changed = next(filter(None, map(_changed_input, cases, attempts)), None)  # on any case
        if changed is not None and not problem.startswith("The result is right"):
            problem += (
                f"\nYour code also changed its input `{changed}` in place: the caller's tensor must stay "
                "as it was (build a new tensor: `masked_fill`, `torch.where`)."
            )
        return self._result(
            FAILED,
            f"{problem}\nFailing case: {case.label}. ({passed} of {len(cases)} cases pass.)",
            passed,
            len(cases),
        )

    def _matching_mistakes(self, case: Case, att: Mapping[str, Any], expected: Any) -> dict[int, str] | None:
        """How each known mistake fares on this case: "hit" if the case fails and the learner's output is the
        mistake's; "part" if it is the mistake's in every output the mistake changes, but another output is
        wrong too; "miss" if the case fails otherwise (the mistake gives another output, or a variant gives
        the right one); "passed" if the learner got the case right where the mistake would show; absent if
        the mistake cannot be made here (its code raises, its variant gives None), or if it makes no
        difference to a case the learner got right. None when the
        attempt gave no output to compare (it raised)."""
        if att.get("status") != "ok":
            return None
        got = att.get("output")
        right_here = compare(expected, got, case.names) is None
        found: dict[int, str] = {}
        for index, mistake in enumerate(self.mistakes):
            try:
                wrong = self.mistake_output(mistake, _clone(case.inputs))
            except Exception:  # a mistake that cannot be made on these inputs does not apply
                continue
            if wrong is None:
                continue
            shows = compare(expected, wrong, case.names) is not None
            if right_here:
                if shows:
                    found[index] = "passed"
            elif not shows or not _explains(expected, wrong, got, case.names):
                found[index] = "miss"
            else:
                found[index] = "hit" if compare(wrong, got, case.names, loose=10.0) is None else "part"
        return found

    def _diagnosis(self, matches: Sequence[dict[int, str] | None]) -> tuple[int, int] | None:
        """The known mistake the failing cases agree on, and the case to show: (mistake, case) or None.

        The rule: a mistake is named only if its output is the learner's on at least one failing case and on
        every failing case that gave an output and where the mistake can be made (see `_matching_mistakes`);
        cases that raised count neither way; a case where it explains only some of several wrong outputs
        counts for it. Among such mistakes, one that is the only match of some case wins (that case is
        shown), then the one that explains the whole output on the most cases, then the one with the most
        matching cases less the cases the learner got right where it would show, then the first listed.
        Otherwise None: the message then says what differs, and where, instead of guessing.
        """
        hits: dict[int, list[int]] = {}
        alone: dict[int, list[int]] = {}
        missed: set[int] = set()
        passed: dict[int, int] = {}
        whole: dict[int, int] = {}
        for n, found in enumerate(matches):
            matched = [i for i, how in (found or {}).items() if how in ("hit", "part")]
            for i in matched:
                whole[i] = whole.get(i, 0) + (found[i] == "hit")
            missed |= {i for i, how in (found or {}).items() if how == "miss"}
            for i, how in (found or {}).items():
                passed[i] = passed.get(i, 0) + (how == "passed")
            for i in matched:
                hits.setdefault(i, []).append(n)
                if len(matched) == 1:
                    alone.setdefault(i, []).append(n)
        agreed = [i for i in hits if i not in missed]
        if not agreed:
            return None
        ranks = {i: (i in alone, whole.get(i, 0), len(hits[i]) - passed.get(i, 0), -i) for i in agreed}
        best = max(agreed, key=ranks.__getitem__)
        return best, (alone.get(best) or hits[best])[0]

    def _judge_case(self, case: Case, att: Mapping[str, Any], expected: Any) -> tuple[int, str] | None:
        """None if the case passes, else (priority, message): 1 a known error, 2 other."""
        if att.get("status") == "error":
            error = att.get("error") or {}
            text = f"{error.get('type', 'Exception')}: {error.get('message', '')}"
            where = f" at {error['where']}" if error.get("where") else ""
            for eh in self.error_hints:
                if eh.matches(text, error.get("where", "")):
                    return 1, f"{eh.hint}\n(Your code raised {text}{where}.)"
            return 2, f"Your code raised {text}{where}."
        if att.get("status") == NOT_ATTEMPTED:
            return 1, (
                "Your code raised NotImplementedError on this case: a branch is still unfinished (the "
                "other cases ran)."
            )
        if att.get("status") != "ok":
            return 2, "The attempt returned nothing that can be judged."
        difference = compare(expected, att.get("output"), case.names)
        if difference is not None and difference.startswith("the gradient"):
            difference += (
                ": the outputs are right, but the gradient does not flow back as it should. Look for what "
                "cuts or bends it: `.detach()`, `torch.no_grad()`, `.item()`, a tensor rebuilt from numbers"
            )
        if difference is not None:
            return 2, difference[0].upper() + difference[1:] + "."
        name = _changed_input(case, att)
        if name is not None:
            return 0, (
                f"The result is right, but your code changed its input `{name}` in place (e.g. "
                f"`{name}[mask] = ...`, `masked_fill_`, `+=`); the caller's tensor must stay as "
                "it was: build a new tensor instead (`masked_fill`, `torch.where`)."
            )
        return None

    def _not_attempted_message(self) -> str:
        return (
            f"write `{self.name}` in the cell that starts with `{self.marker}`, run that cell, then run "
            f"this check again. Stuck? Try `{self.key.split('.')[1]}.hint()`."
        )

    def _result(self, status: str, message: str, passed: int = 0, total: int = 0) -> CheckResult:
        return CheckResult(self.key, self.name, status, message, passed, total)

    def evaluate(self, answer: Any, hidden: Mapping[str, Any] | None = None) -> CheckResult:
        """Check `answer` in this process (what `check()` does, without displaying anything)."""
        for dotted in self.package:
            if answer is resolve(dotted):
                return self._result(
                    FAILED,
                    f"that is the package's own `{dotted}`; the exercise is to write `{self.name}` yourself.",
                )
        cases = self.cases(hidden)
        return self.judge(cases, [self.attempt(answer, case) for case in cases])

    # -- the learner's three calls ---------------------------------------------------------------

    def check(self, answer: Any = _MISSING) -> CheckResult:
        """Check the learner's answer (by default the notebook's `name`); show and return the verdict."""
        try:
            if answer is _MISSING:
                answer = sys._getframe(1).f_globals.get(self.name, _MISSING)
            if answer is _MISSING:
                result = self._result(
                    FAILED,
                    f"`{self.name}` is not defined yet: run the cell that starts "
                    f"with `{self.marker}`, then run this check again.",
                )
            else:
                result = self.evaluate(answer)
        except Exception as exc:  # a check must never raise in a notebook; say what happened instead
            summary = summarize_exception(exc)
            result = self._result(
                FAILED, f"the check itself could not run ({summary['type']}: {summary['message']})."
            )
        _show(result.rich())
        result._suppress_next_display = True
        return result

    @property
    def hint_text(self) -> str:
        """The first hint, the nudge."""
        return self.hints[0]

    def next_hint(self) -> tuple[int, str]:
        """The hint the next `hint()` shows, as (level, text), and move on: the first call nudges, the second
        names the concept, the third points at the line; after the last, the last again."""
        level = min(self._hints_shown, len(self.hints) - 1)
        self._hints_shown += 1
        return level + 1, self.hints[level]

    def hint(self) -> None:
        """Show a hint: each call a stronger one (see `next_hint`)."""
        level, body = self.next_hint()
        count = f" {level} of {len(self.hints)}" if len(self.hints) > 1 else ""
        more = level < len(self.hints)
        after = f" (call `{self.key.split('.')[1]}.hint()` again for a stronger one)" if more else ""
        text = f"Hint{count} ({self.key}, `{self.name}`): {body}{after}"
        _show(
            _Rich(
                text,
                f'<div style="border-left: 4px solid #f9a825; padding: 2px 10px">'
                f"<b>Hint{count}</b>: {_markdown_to_html(body)}{html.escape(after)}</div>",
            )
        )

    def for_graded_work(self) -> Exercise:
        """This exercise for graded work: the same check and hint, no model answer (`solution()` says so)."""
        graded = copy.copy(self)
        graded.graded, graded.solution_code = True, ""
        return graded

    def solution(self) -> None:
        """Show the model answer (in graded work, a line saying that solutions are off)."""
        if self.graded:
            text = (
                f"Solutions are off for graded work ({self.key}): `{self.key.split('.')[1]}.check()` says "
                f"what is wrong and `{self.key.split('.')[1]}.hint()` gives a nudge."
            )
            _show(_Rich(text, f"<b>Solution</b>: {_markdown_to_html(text)}", text))
            return
        text = f"Solution ({self.key}):\n{self.solution_code}"
        _show(
            _Rich(
                text,
                f"<b>Solution</b> ({html.escape(self.key)}):<pre>{html.escape(self.solution_code)}</pre>",
                f"**Solution** ({self.key}):\n```python\n{self.solution_code}```",
            )
        )


def resolve(dotted: str) -> Any:
    """The module or object behind a dotted name, e.g. 'attn_course.attention.masking.sequence_mask'."""
    import importlib

    try:
        return importlib.import_module(dotted)
    except ImportError:
        module, _, attr = dotted.rpartition(".")
        return getattr(importlib.import_module(module), attr, None)
