"""Exercise checks: `q1.check()`, `q1.hint()` and `q1.solution()` for the notebooks in exercises/.

An exercise asks the learner to write a function (or a class) that the package already has. Its check
runs the learner's code and the package's reference on the same seeded inputs -- several shapes, masks
and dtypes, with edge cases such as a valid length of 0 or a sequence of length 1 -- and, where they
disagree, compares the learner's answer with known-wrong variants of the reference to name the likely
mistake ("softmax over the wrong axis", "s_t where s_{t-1} is needed", ...). A check never raises: an
exception in the learner's code is summarised (type, message, the learner's own line), and an untouched
stub (whose body is ``raise NotImplementedError``) answers "not attempted yet".

    from attn_course import checks
    q1, q2 = checks.chapter(1)
    q1.check()        # finds `sequence_mask` in the notebook, shows the verdict, returns a CheckResult
    q1.hint()
    q1.solution()

A check has three parts, so that a grader can keep the learner's code away from the judge:

1. `Exercise.cases()` builds the inputs (deterministic, from seeded specs; instructors may add hidden ones);
2. `Exercise.attempt(answer, case)` runs the learner's code on one case and returns plain data only
   (tensors, numbers, strings): the output, the tensor inputs as they were afterwards (to catch in-place
   mutation), or a summary of the exception -- the only part that runs learner code;
3. `Exercise.judge(cases, attempts)` compares the attempts with the reference and its mistake variants.

In a notebook, `check()` runs all three in the learner's kernel. `attn_course.grading` runs part 2 in a
sandboxed process and parts 1 and 3 in the grader, so nothing the learner's code does can change a grade.
"""

from __future__ import annotations

import ast
import html
import math
import os
import re
import sys
import sysconfig
import textwrap
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"

_STATUS_TEXT = {PASSED: "Correct", FAILED: "Incorrect", NOT_ATTEMPTED: "Not attempted yet"}
_STATUS_COLOUR = {PASSED: "#2e7d32", FAILED: "#c62828", NOT_ATTEMPTED: "#1565c0"}

_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}

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

    def _rich(self) -> _Rich:
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
        _show(self._rich())


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
    """A known-wrong variant of the reference: if the learner's output equals `variant(inputs)`, say `hint`.

    variant receives a copy of the case's inputs and returns the wrong output, or None where the mistake
    makes no difference (or cannot be made) on these inputs.
    """

    hint: str
    variant: Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class ErrorHint:
    """If the learner's code raised an error whose "Type: message" matches `pattern`, say `hint`."""

    pattern: str
    hint: str


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
        return f"a {type(value).__name__} of {len(value)} items"
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


def _has(what: str) -> str:
    """`what` + "has" or "have": "the weights have", "the result has", "the gradient of the scores has"."""
    words = what.split()
    plural = len(words) > 1 and words[0] == "the" and words[1].endswith("s") and not words[1].endswith("ss")
    return f"{what} {'have' if plural else 'has'}"


def _is(what: str) -> str:
    return _verb(what, "is", "are")


def _verb(what: str, singular: str, plural: str) -> str:
    """`what` followed by the verb form that agrees with it."""
    return f"{what} {plural if _has(what).endswith('have') else singular}"


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.4g}"


def compare(expected: Any, got: Any, names: str | Sequence[str] = "the result") -> str | None:
    """None if `got` matches `expected` (within a dtype's tolerance), else a sentence saying how it differs.

    Tensors must agree in type, shape, dtype and values (NaN only where expected has NaN); tuples and lists
    element by element (either container type is accepted); floats to 1e-6 relative; the rest exactly.
    """
    what = names if isinstance(names, str) else "the result"
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            wanted = ", ".join(names) if not isinstance(names, str) else f"{len(expected)} items"
            return f"{_is(what)} {_describe(got)}, expected {len(expected)} values ({wanted})"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            name = names[i] if not isinstance(names, str) and i < len(names) else f"{what}[{i}]"
            diff = compare(e, g, name)
            if diff is not None:
                return diff
        return None
    if isinstance(expected, torch.Tensor):
        return _compare_tensors(expected, got, what)
    if isinstance(expected, float):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return f"{_is(what)} {_describe(got)}, expected a number"
        if not math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9):
            return f"{_is(what)} {got:.6g}, expected {expected:.6g}"
        return None
    if isinstance(expected, set) and isinstance(got, (list, tuple)):
        return f"{_is(what)} {_describe(got)}, expected a set"
    if type(got) is not type(expected) and not (isinstance(expected, int) and isinstance(got, int)):
        return f"{_is(what)} {_describe(got)}, expected {_describe(expected)}"
    if got != expected:
        return f"{_is(what)} {got!r}, expected {expected!r}"
    return None


def _compare_tensors(expected: torch.Tensor, got: Any, what: str) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{_is(what)} {_describe(got)}, expected a torch.Tensor of shape {tuple(expected.shape)}"
    if got.shape != expected.shape:
        return f"{_has(what)} shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype != expected.dtype:
        e_name, g_name = (str(d).replace("torch.", "") for d in (expected.dtype, got.dtype))
        return f"{_has(what)} dtype {g_name}, expected {e_name} (the dtype of the inputs)"
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
    close = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
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
    paths = {os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            paths.add(path)
    return tuple(os.path.realpath(p) + os.sep for p in paths)


_LIBRARY_DIRS = _library_dirs()


def _is_learner_frame(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return False
    if filename.startswith("<"):
        return True
    return not os.path.realpath(filename).startswith(_LIBRARY_DIRS)


def summarize_exception(exc: BaseException) -> dict[str, str]:
    """type, message (shortened) and where: the learner's own line that led to the error, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_learner_frame(f.filename)]
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
    return bool(frames) and _is_learner_frame(frames[-1].filename)


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
    hint: a nudge shown by `hint()`; covers: what the cases cover, said when the check passes;
    defaults: the spec of a case with every key (hidden cases are merged over it);
    specs: the cases every learner sees; build(spec) -> Case; call(answer, inputs) -> output runs the
    learner's code; reference(inputs) -> output; mistakes and error_hints name wrong answers;
    package: dotted names of the package objects the learner re-implements (refused as answers).
    """

    def __init__(
        self,
        key: str,
        name: str,
        title: str,
        *,
        solution: str,
        hint: str,
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
    ):
        self.key, self.name, self.title = key, name, title
        self.solution_code = textwrap.dedent(solution).strip("\n") + "\n"
        self.write = tuple(write) if write is not None else None
        self.stub_code = _make_stub(self.solution_code, self.write)
        self.hint_text, self.covers = hint, covers
        self.defaults, self.specs = dict(defaults), tuple(dict(s) for s in specs)
        self._build, self._call, self._reference = build, call, reference
        self.mistakes, self.error_hints, self.package = tuple(mistakes), tuple(error_hints), tuple(package)

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
                if isinstance(seed, bool) or not isinstance(seed, int):
                    raise ValueError(f"hidden seeds for {self.key} must be ints, got {seed!r}")
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
        try:
            output = self._call(answer, inputs)
        except NotImplementedError as exc:
            if _raised_by_learner(exc):
                return {"status": NOT_ATTEMPTED}
            return {"status": "error", "error": summarize_exception(exc)}
        except (Exception, SystemExit) as exc:  # the learner's bug, reported in words below
            return {"status": "error", "error": summarize_exception(exc)}
        after = {k: sanitize(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        return {"status": "ok", "output": sanitize(output), "inputs_after": after}

    # -- judging (never runs learner code) -------------------------------------------------------

    def judge(self, cases: Sequence[Case], attempts: Sequence[Mapping[str, Any]]) -> CheckResult:
        """The verdict on the attempts (one per case, as `attempt` returns them)."""
        if len(attempts) != len(cases):
            return self._result(FAILED, f"only {len(attempts)} of {len(cases)} cases were run")
        if attempts and all(a.get("status") == NOT_ATTEMPTED for a in attempts):
            return self._result(NOT_ATTEMPTED, self._not_attempted_message(), 0, len(cases))
        passed, problems = 0, []
        for index, (case, att) in enumerate(zip(cases, attempts, strict=True)):
            problem = self._judge_case(case, att)
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
        # The most specific diagnosis wins: a named mistake, then a known error, then the first difference.
        _, _, problem, case = min(problems, key=lambda p: p[:2])
        return self._result(
            FAILED,
            f"{problem}\nFailing case: {case.label}. ({passed} of {len(cases)} cases pass.)",
            passed,
            len(cases),
        )

    def _judge_case(self, case: Case, att: Mapping[str, Any]) -> tuple[int, str] | None:
        """None if the case passes, else (priority, message): 0 a named mistake, 1 a known error, 2 other."""
        if att.get("status") == "error":
            error = att.get("error") or {}
            text = f"{error.get('type', 'Exception')}: {error.get('message', '')}"
            where = f" at {error['where']}" if error.get("where") else ""
            for eh in self.error_hints:
                if re.search(eh.pattern, text):
                    return 1, f"{eh.hint}\n(Your code raised {text}{where}.)"
            return 2, f"Your code raised {text}{where}."
        if att.get("status") == NOT_ATTEMPTED:
            return 1, (
                "Your code raised NotImplementedError on this case: a branch is still unfinished (the "
                "other cases ran)."
            )
        if att.get("status") != "ok":
            return 2, "The attempt returned nothing that can be judged."
        expected = self._reference(_clone(case.inputs))
        got = att.get("output")
        difference = compare(expected, got, case.names)
        if difference is not None:
            for mistake in self.mistakes:
                try:
                    wrong = mistake.variant(_clone(case.inputs))
                except Exception:  # a variant that cannot run on these inputs does not apply
                    continue
                if wrong is None or compare(expected, wrong, case.names) is None:
                    continue
                if compare(wrong, got, case.names) is None:
                    return 0, mistake.hint
            return 2, difference[0].upper() + difference[1:] + "."
        for name, before in case.inputs.items():
            if isinstance(before, torch.Tensor):
                after = att.get("inputs_after", {}).get(name)
                if (
                    not isinstance(after, torch.Tensor)
                    or after.shape != before.shape
                    or not torch.equal(after.to(before.dtype), before)
                ):
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
            if answer is _resolve(dotted):
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
        _show(result._rich())
        result._suppress_next_display = True
        return result

    def hint(self) -> None:
        """Show a hint."""
        text = f"Hint ({self.key}, `{self.name}`): {self.hint_text}"
        _show(
            _Rich(
                text,
                f'<div style="border-left: 4px solid #f9a825; padding: 2px 10px">'
                f"<b>Hint</b>: {_markdown_to_html(self.hint_text)}</div>",
            )
        )

    def solution(self) -> None:
        """Show the model answer."""
        text = f"Solution ({self.key}):\n{self.solution_code}"
        _show(
            _Rich(
                text,
                f"<b>Solution</b> ({html.escape(self.key)}):<pre>{html.escape(self.solution_code)}</pre>",
                f"**Solution** ({self.key}):\n```python\n{self.solution_code}```",
            )
        )


def _resolve(dotted: str) -> Any:
    """The module or object behind a dotted name, e.g. 'attn_course.masking.sequence_mask'."""
    import importlib

    try:
        return importlib.import_module(dotted)
    except ImportError:
        module, _, attr = dotted.rpartition(".")
        return getattr(importlib.import_module(module), attr, None)


# ----------------------------------------------------------------------------------------------------
# Input builders shared by the exercises


def _generator(spec: Mapping[str, Any]) -> torch.Generator:
    seed = spec["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    return torch.Generator().manual_seed(seed)


def _dtype(spec: Mapping[str, Any], key: str = "dtype") -> torch.dtype:
    name = spec[key]
    if name not in _DTYPES:
        raise ValueError(f"{key} must be one of {sorted(_DTYPES)}, got {name!r}")
    return _DTYPES[name]


def _size(spec: Mapping[str, Any], key: str, low: int = 1) -> int:
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{key} must be an int >= {low}, got {value!r}")
    return value


def _lengths(
    value: Any, shape: tuple[int, ...], num_keys: int, gen: torch.Generator, key: str, low: int = 0
) -> torch.Tensor | None:
    """valid_lens from a spec: None, "random" (uniform in [low, num_keys]) or explicit nested lists."""
    if value is None:
        return None
    if value == "random":
        return torch.randint(low, num_keys + 1, shape, generator=gen)
    lens = torch.tensor(value, dtype=torch.long)
    if tuple(lens.shape) != shape or (lens.numel() and (lens.min() < low or lens.max() > num_keys)):
        raise ValueError(f"{key} must have shape {shape} with values in [{low}, {num_keys}], got {value!r}")
    return lens


def _randn(
    shape: Sequence[int], gen: torch.Generator, dtype: torch.dtype = torch.float32, scale: float = 1.0
) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def _lens_text(lens: torch.Tensor | None) -> str:
    if lens is None:
        return "valid_lens None"
    form = "(batch_size,)" if lens.dim() == 1 else "(batch_size, num_queries)"
    return f"valid_lens {form} = {lens.tolist()}"


def _keep_mask(lens: torch.Tensor | None, num_queries: int, num_keys: int) -> torch.Tensor | None:
    """(batch, num_queries, num_keys) bool, True at real keys; None when nothing is masked."""
    if lens is None:
        return None
    per_query = lens[:, None, None] if lens.dim() == 1 else lens[..., None]
    return (torch.arange(num_keys) < per_query).expand(-1, num_queries, -1)


def _d2l_masked_softmax(
    scores: torch.Tensor, lens: torch.Tensor | None, dim: int = -1, fill: float = -1e6
) -> torch.Tensor:
    """d2l's masked_softmax: fill padded scores with `fill` (in the scores' dtype), softmax over `dim`."""
    if lens is None:
        return F.softmax(scores, dim=dim)
    keep = _keep_mask(lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, fill), dim=dim)


def _finite_masked_softmax(scores: torch.Tensor, lens: torch.Tensor | None, dim: int = -1) -> torch.Tensor:
    """A masked softmax over any axis that fills with the lowest finite value and zeroes padding after."""
    if lens is None:
        return F.softmax(scores, dim=dim)
    keep = _keep_mask(lens, scores.shape[1], scores.shape[2])
    filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return F.softmax(filled, dim=dim) * keep


# ----------------------------------------------------------------------------------------------------
# Chapter 1: masking


def _sequence_mask_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    shape = tuple(spec["shape"])
    if len(shape) < 2 or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in shape):
        raise ValueError(f"shape must be 2+ positive ints (batch_size, maxlen, ...), got {spec['shape']!r}")
    if dtype.is_floating_point:
        X = _randn(shape, gen, dtype)
    else:
        X = torch.randint(1, 100, shape, generator=gen).to(dtype)
    lens = _lengths(spec["valid_len"], shape[:1], shape[1], gen, "valid_len")
    inputs = {"X": X, "valid_len": lens, "value": spec["value"]}
    label = (
        f"X of shape {shape} and dtype {spec['dtype']}, valid_len {lens.tolist()}, value {spec['value']!r}"
    )
    return Case(label, inputs, spec, "the result")


def _sequence_mask_variant(
    keep_rule: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], axis: int = 1, use_value: bool = True
):
    def variant(inputs: dict[str, Any]) -> torch.Tensor:
        X, lens, value = inputs["X"], inputs["valid_len"], inputs["value"]
        positions = torch.arange(X.shape[axis])
        keep = keep_rule(positions[None, :], lens[:, None])  # (batch, length along axis)
        shape = [X.shape[0]] + [1] * (X.dim() - 1)
        shape[axis] = X.shape[axis]
        return X.masked_fill(~keep.reshape(shape), value if use_value else 0)

    return variant


SEQUENCE_MASK = Exercise(
    "ch1.q1",
    "sequence_mask",
    "sequence_mask: blank out the padding of a batch",
    solution='''
def sequence_mask(X, valid_len, value=0):
    """A copy of X with every position at or beyond its row's valid length set to `value`.

    X: (batch_size, maxlen, *rest), any dtype; the mask runs along axis 1 and covers all of *rest.
    valid_len: (batch_size,) integer, each in [0, maxlen].
    Returns: a new tensor shaped and typed like X; X itself is left unchanged.
    """
    keep = torch.arange(X.shape[1], device=X.device)[None, :] < valid_len[:, None]  # (batch_size, maxlen)
    keep = keep.reshape(*keep.shape, *([1] * (X.dim() - 2)))                       # broadcast over *rest
    return X.masked_fill(~keep, value)
''',
    hint="Compare a row of positions `torch.arange(maxlen)` with a column of lengths `valid_len[:, None]`: "
    "position j of row i is real when `j < valid_len[i]`. Reshape that (batch_size, maxlen) mask so it "
    "broadcasts over any trailing axes, and fill with `X.masked_fill(~keep, value)`, which returns a new "
    "tensor (d2l's `X[~mask] = value` writes into the caller's X).",
    covers="2-, 3- and 4-D X; float16/32/64 and int64; valid length 0 and full; maxlen 1; X left unchanged",
    defaults={"seed": 0, "shape": [3, 4], "dtype": "float32", "valid_len": "random", "value": 0},
    specs=[
        {"seed": 1, "shape": [3, 4], "valid_len": [1, 3, 4], "value": 0},
        {"seed": 2, "shape": [2, 5, 3], "valid_len": [2, 5], "value": -1.0},
        {"seed": 3, "shape": [3, 4], "dtype": "int64", "valid_len": [0, 2, 4], "value": -1},
        {"seed": 4, "shape": [2, 1], "dtype": "float64", "valid_len": [1, 0], "value": 0},
        {"seed": 5, "shape": [2, 3, 2, 2], "dtype": "float16", "valid_len": [3, 1], "value": 7},
    ],
    build=_sequence_mask_case,
    call=lambda answer, i: answer(i["X"], i["valid_len"], i["value"]),
    reference=lambda i: _resolve("attn_course.masking.sequence_mask")(i["X"], i["valid_len"], i["value"]),
    mistakes=[
        Mistake(
            "Off by one: you kept one padded position too many. Position `valid_len` itself is already "
            "padding (positions 0 .. valid_len-1 are real), so keep `j < valid_len`, not `j <= valid_len`.",
            _sequence_mask_variant(lambda j, n: j <= n),
        ),
        Mistake(
            "Off by one: you masked the last real position too. Positions 0 .. valid_len-1 are real: "
            "keep `j < valid_len`.",
            _sequence_mask_variant(lambda j, n: j < n - 1),
        ),
        Mistake(
            "The mask is inverted: you blanked the real positions and kept the padding. Keep positions "
            "`j < valid_len`; fill the others.",
            _sequence_mask_variant(lambda j, n: j >= n),
        ),
        Mistake(
            "You masked along the last axis. The sequence axis is axis 1 (X is (batch_size, maxlen, ...)): "
            "a padded position has all of its trailing features masked.",
            lambda i: (
                _sequence_mask_variant(lambda j, n: j < n, axis=i["X"].dim() - 1)(i)
                if i["X"].dim() > 2 and i["X"].shape[-1] != i["X"].shape[1]
                else None
            ),
        ),
        Mistake(
            "The `value` argument was ignored: padded positions must be set to `value`, not to 0.",
            _sequence_mask_variant(lambda j, n: j < n, use_value=False),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"shape mismatch|must match the size|cannot be broadcast|shape .* is invalid",
            "The (batch_size, maxlen) mask does not broadcast against X. For X with trailing axes, "
            "reshape it to (batch_size, maxlen, 1, ..., 1) first.",
        ),
    ],
    package=["attn_course.masking.sequence_mask"],
)


def _masked_softmax_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, q, k = (_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be floating, got {spec['dtype']}")
    scores = _randn((b, q, k), gen, dtype, scale=2.0)
    form = spec["valid_lens"]
    shape = (b, q) if spec["per_query"] else (b,)
    lens = _lengths(form, shape, k, gen, "valid_lens")
    inputs = {"scores": scores, "valid_lens": lens}
    grad = bool(spec["grad"])
    if grad:
        inputs["probe"] = _randn((b, q, k), gen, torch.float32)
    label = f"scores of shape {(b, q, k)} and dtype {spec['dtype']}, {_lens_text(lens)}" + (
        ", with the gradient of the weights" if grad else ""
    )
    names = ("the weights", "the gradient with respect to the scores") if grad else "the weights"
    return Case(label, inputs, spec, names)


def _masked_softmax_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    if "probe" not in inputs:
        return fn(inputs["scores"], inputs["valid_lens"])
    scores = inputs["scores"].requires_grad_(True)
    weights = fn(scores, inputs["valid_lens"])
    (gradient,) = torch.autograd.grad((weights.float() * inputs["probe"]).sum(), scores)
    return weights, gradient


def _masked_softmax_variant(fn: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]):
    """A mistake variant of masked_softmax, gradient cases included."""
    return lambda inputs: _masked_softmax_call(fn, inputs)


MASKED_SOFTMAX = Exercise(
    "ch1.q2",
    "masked_softmax",
    "masked_softmax: a softmax that ignores padding, empty rows included",
    solution='''
def masked_softmax(scores, valid_lens=None):
    """Softmax over the last axis that gives weight exactly 0 to keys beyond each valid length.

    scores: (batch_size, num_queries, num_keys), floating (float16, bfloat16, float32, float64).
    valid_lens: None, (batch_size,) (one length per sequence) or (batch_size, num_queries) (one per query).
    Returns: weights shaped and typed like scores; each row sums to 1, or is all 0 if its valid length is 0.
    """
    work = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    if valid_lens is None:
        return F.softmax(work, dim=-1).to(scores.dtype)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = torch.arange(scores.shape[-1], device=scores.device) < lens  # (batch, 1 or num_queries, num_keys)
    filled = work.masked_fill(~keep, torch.finfo(work.dtype).min)       # finite in every dtype: no NaN
    return (F.softmax(filled, dim=-1) * keep).to(scores.dtype)          # rows of valid length 0 become 0
''',
    hint="Build a boolean mask `keep` of shape (batch_size, num_queries or 1, num_keys) from "
    "`torch.arange(num_keys) < lengths`, for both forms of valid_lens. Fill the masked scores with a very "
    "negative *finite* number (`torch.finfo(dtype).min`, not -inf and not -1e6, which overflows in "
    "float16), take the softmax over the last axis, then multiply by the mask so that a row of valid "
    "length 0 becomes all zeros. Compute float16/bfloat16 in float32 and cast back.",
    covers="valid_lens None, (batch_size,) and (batch_size, num_queries); rows of valid length 0; one key; "
    "float16, bfloat16, float32, float64; finite gradients; scores left unchanged",
    defaults={
        "seed": 0,
        "batch_size": 2,
        "num_queries": 3,
        "num_keys": 5,
        "dtype": "float32",
        "valid_lens": "random",
        "per_query": False,
        "grad": False,
    },
    specs=[
        {"seed": 11, "valid_lens": None},
        {"seed": 12, "valid_lens": [2, 5]},
        {
            "seed": 13,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 4,
            "valid_lens": [[1, 4], [2, 3], [4, 4]],
            "per_query": True,
        },
        {"seed": 14, "num_queries": 2, "num_keys": 6, "valid_lens": [0, 3]},
        {"seed": 15, "num_queries": 1, "num_keys": 1, "dtype": "float64", "valid_lens": [1, 0]},
        {"seed": 16, "dtype": "float16", "valid_lens": [0, 4]},
        {
            "seed": 17,
            "num_queries": 2,
            "num_keys": 4,
            "dtype": "bfloat16",
            "valid_lens": [[0, 4], [3, 1]],
            "per_query": True,
        },
        {"seed": 18, "num_queries": 2, "num_keys": 4, "valid_lens": [0, 3], "grad": True},
    ],
    build=_masked_softmax_case,
    call=_masked_softmax_call,
    reference=_masked_softmax_variant(lambda s, n: _resolve("attn_course.masking.masked_softmax")(s, n)),
    mistakes=[
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the keys must sum to 1, so "
            "normalise over the last axis (`dim=-1`, the keys), not over the queries.",
            _masked_softmax_variant(lambda s, n: _finite_masked_softmax(s, n, dim=1)),
        ),
        Mistake(
            "The mask is not applied: the padded keys still get weight. Use `valid_lens` to fill the "
            "padded scores before the softmax.",
            _masked_softmax_variant(lambda s, n: F.softmax(s, dim=-1)),
        ),
        Mistake(
            "A row whose valid length is 0 came out uniform (1/num_keys everywhere): that is what d2l's "
            "-1e6 fill gives when every key of a row is masked. A row with no real key must attend to "
            "nothing: zero the masked weights after the softmax (e.g. multiply by the mask).",
            _masked_softmax_variant(_d2l_masked_softmax),
        ),
        Mistake(
            "NaN in float16: -1e6 does not fit in float16 (its largest magnitude is 65504), so it became "
            "-inf and a row of valid length 0 softmaxed to NaN, which zeroing cannot undo (NaN x 0 = NaN). "
            "Fill with `torch.finfo(scores.dtype).min`, which fits every dtype.",
            _masked_softmax_variant(
                lambda s, n: (
                    _d2l_masked_softmax(s, n, fill=-math.inf) * _keep_mask(n, s.shape[1], s.shape[2])
                    if n is not None and s.dtype == torch.float16
                    else None
                )
            ),
        ),
        Mistake(
            "A row whose valid length is 0 came out NaN: with -inf in every position the softmax computes "
            "0/0. Fill with a finite number (`torch.finfo(scores.dtype).min`) and zero the masked weights "
            "after the softmax.",
            _masked_softmax_variant(lambda s, n: _d2l_masked_softmax(s, n, fill=-math.inf)),
        ),
        Mistake(
            "You zeroed the padded weights after a softmax over all keys, so the real weights no longer "
            "sum to 1. Mask the scores *before* the softmax (fill them with a very negative number), then "
            "zero the padded weights.",
            _masked_softmax_variant(
                lambda s, n: (
                    F.softmax(s, -1)
                    if n is None
                    else F.softmax(s, -1) * _keep_mask(n, s.shape[1], s.shape[2])
                )
            ),
        ),
        Mistake(
            "For float16/bfloat16 scores, return weights of the same dtype: compute in float32 if you like, "
            "then `.to(scores.dtype)`.",
            _masked_softmax_variant(
                lambda s, n: (
                    _resolve("attn_course.masking.masked_softmax")(s.float(), n)
                    if s.dtype in (torch.float16, torch.bfloat16)
                    else None
                )
            ),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"cannot be converted to type .*Half without overflow",
            "-1e6 does not fit in float16 (its largest magnitude is 65504). Fill with "
            "`torch.finfo(scores.dtype).min`, which fits every dtype.",
        ),
        ErrorHint(
            r"does not require grad|does not have a grad_fn",
            "Your function cuts the gradient (e.g. `.detach()`, `torch.no_grad()`, or building a new "
            "tensor from Python numbers): the weights must stay differentiable with respect to the scores.",
        ),
    ],
    package=["attn_course.masking.masked_softmax", "attn_course.masking._masked_softmax"],
)


# ----------------------------------------------------------------------------------------------------
# Chapter 2: scoring functions


def _attention_case(
    spec: dict[str, Any],
    *,
    values: bool = True,
    names: Any = ("the context", "the weights"),
    scale: float = 1.0,
) -> Case:
    """queries, keys (and values), valid_lens from a spec with the attention vocabulary's sizes."""
    gen, dtype = _generator(spec), _dtype(spec)
    b, q, k = (_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    qs, ks = _size(spec, "query_size"), _size(spec, "key_size")
    inputs: dict[str, Any] = {
        "queries": _randn((b, q, qs), gen, dtype, scale),
        "keys": _randn((b, k, ks), gen, dtype, scale),
    }
    sizes = f"queries {(b, q, qs)}, keys {(b, k, ks)}"
    if values:
        vs = _size(spec, "value_size")
        inputs["values"] = _randn((b, k, vs), gen, dtype)
        sizes += f", values {(b, k, vs)}"
        lens = _lengths(spec["valid_lens"], (b, q) if spec["per_query"] else (b,), k, gen, "valid_lens")
        inputs["valid_lens"] = lens
        sizes += f", {_lens_text(lens)}"
    return Case(f"{sizes}, dtype {spec['dtype']}", inputs, spec, names)


_ATTENTION_DEFAULTS = {
    "seed": 0,
    "batch_size": 2,
    "num_queries": 3,
    "num_keys": 5,
    "query_size": 4,
    "key_size": 4,
    "value_size": 6,
    "dtype": "float32",
    "valid_lens": "random",
    "per_query": False,
}


def _dot_attention(
    inputs: dict[str, Any],
    *,
    divisor: str = "sqrt_d",
    dim: int = -1,
    mask: str = "finite",
    transposed: bool = False,
    weigh: str = "values",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention and its known-wrong variants (divisor, softmax axis, masking, ...)."""
    q, k, lens = inputs["queries"], inputs["keys"], inputs["valid_lens"]
    scores = torch.bmm(k, q.transpose(1, 2)) if transposed else torch.bmm(q, k.transpose(1, 2))
    d = q.shape[-1]
    scores = (
        scores / {"sqrt_d": math.sqrt(d), "d": d, "none": 1.0, "sqrt_keys": math.sqrt(k.shape[1])}[divisor]
    )
    if mask == "none":
        weights = F.softmax(scores, dim=dim)
    elif mask == "d2l":
        weights = _d2l_masked_softmax(scores, lens, dim=dim)
    else:
        weights = _finite_masked_softmax(scores, lens, dim=dim)
    return torch.bmm(weights, inputs[weigh]), weights


def _package_attention(name: str, *args: Any) -> nn.Module:
    return getattr(_resolve("attn_course.attention"), name)(*args).eval()


def _dot_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    attention = _package_attention("DotProductAttention", 0.0, True)
    context = attention(inputs["queries"], inputs["keys"], inputs["values"], inputs["valid_lens"])
    return context, attention.attention_weights


_BMM_HINT = ErrorHint(
    r"Expected size for first two dimensions of batch2|batch1 and batch2 must have|mat1 and mat2 shapes|"
    r"size mismatch|must match the size of tensor",
    "The shapes do not line up. The scores are `queries @ keys.transpose(1, 2)`, shape (batch_size, "
    "num_queries, num_keys); the context is `weights @ values`, shape (batch_size, num_queries, value_size).",
)

_EMPTY_ROW_HINT = (
    "A row whose valid length is 0 came out uniform instead of all zeros: that is d2l's -1e6 "
    "masking. Use `masked_softmax` from chapter 1 (imported in the set-up cell), which gives a "
    "row with no real key zero weight everywhere."
)

SCALED_DOT_PRODUCT = Exercise(
    "ch2.q1",
    "scaled_dot_product_attention",
    "Scaled dot-product attention",
    solution='''
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    """softmax(q kᵀ / sqrt(d)) v over the valid keys (Vaswani et al. 2017, eq. 1; d2l's DotProductAttention).

    queries: (batch_size, num_queries, d); keys: (batch_size, num_keys, d); values: (batch_size, num_keys,
    value_size); valid_lens: None, (batch_size,) or (batch_size, num_queries).
    Returns: context (batch_size, num_queries, value_size), weights (batch_size, num_queries, num_keys).
    """
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)  # (batch_size, num_queries, num_keys)
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
''',
    hint="Three lines: the scores `torch.bmm(queries, keys.transpose(1, 2))` divided by `math.sqrt(d)` "
    "with d "
    "the query/key size (the last axis, not the number of keys); the weights `masked_softmax(scores, "
    "valid_lens)`; the context `torch.bmm(weights, values)`. Return both.",
    covers="valid_lens None, (batch_size,) and (batch_size, num_queries); rows of valid length 0; one key; "
    "d, num_keys and value_size all different; float32 and float64",
    defaults=_ATTENTION_DEFAULTS,
    specs=[
        {"seed": 21, "valid_lens": None},
        {"seed": 22, "valid_lens": [2, 5]},
        {
            "seed": 23,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 4,
            "query_size": 8,
            "key_size": 8,
            "value_size": 3,
            "valid_lens": [[1, 4], [2, 3], [4, 4]],
            "per_query": True,
        },
        {
            "seed": 24,
            "num_queries": 1,
            "num_keys": 1,
            "query_size": 3,
            "key_size": 3,
            "value_size": 2,
            "valid_lens": [1, 0],
        },
        {
            "seed": 25,
            "num_queries": 4,
            "num_keys": 4,
            "query_size": 2,
            "key_size": 2,
            "value_size": 2,
            "dtype": "float64",
            "valid_lens": [0, 3],
        },
    ],
    build=lambda spec: _attention_case(spec, scale=1.5),
    call=lambda answer, i: answer(i["queries"], i["keys"], i["values"], i["valid_lens"]),
    reference=_dot_reference,
    mistakes=[
        Mistake(
            "The scores are not scaled: divide q·k by sqrt(d), d = queries.shape[-1], so that their "
            "spread does not grow with the size of the vectors.",
            lambda i: _dot_attention(i, divisor="none"),
        ),
        Mistake(
            "The scores are divided by d; the scaling is 1/sqrt(d): `/ math.sqrt(d)`.",
            lambda i: _dot_attention(i, divisor="d"),
        ),
        Mistake(
            "You scaled by sqrt(num_keys); d is the size of the query and key vectors, "
            "`queries.shape[-1]`, not the number of keys.",
            lambda i: _dot_attention(i, divisor="sqrt_keys"),
        ),
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the keys must sum to 1 (the "
            "last axis).",
            lambda i: _dot_attention(i, dim=1),
        ),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Pass the scores and valid_lens to "
            "`masked_softmax`.",
            lambda i: _dot_attention(i, mask="none"),
        ),
        Mistake(_EMPTY_ROW_HINT, lambda i: _dot_attention(i, mask="d2l")),
        Mistake(
            "You computed keys · queriesᵀ, a (batch_size, num_keys, num_queries) matrix. The scores are "
            "`queries @ keys.transpose(1, 2)`: one row per query, one column per key.",
            lambda i: _dot_attention(i, transposed=True),
        ),
        Mistake(
            "The context averages the keys; it must average the values: `weights @ values`.",
            lambda i: _dot_attention(i, weigh="keys"),
        ),
    ],
    error_hints=[_BMM_HINT],
    package=["attn_course.attention.DotProductAttention", "attn_course.scoring.dot_scores"],
)


def _additive_case(spec: dict[str, Any]) -> Case:
    case = _attention_case(spec, names=("the contexts", "the weights", "whether attend used W_k"))
    if case.inputs["valid_lens"] is not None and case.inputs["valid_lens"].dim() != 1:
        raise ValueError("AdditiveAttention cases take valid_lens of shape (batch_size,) only")
    gen = _generator(dict(spec, seed=spec["seed"] + 1000))
    ks, qs, h = spec["key_size"], spec["query_size"], _size(spec, "num_hiddens")
    dtype = _dtype(spec)
    params = {
        "W_k.weight": _randn((h, ks), gen, dtype, 0.5),
        "W_q.weight": _randn((h, qs), gen, dtype, 0.5),
        "w_v.weight": _randn((1, h), gen, dtype, 0.5),
    }
    inputs = dict(case.inputs, params=params)
    label = f"{case.label}, num_hiddens {h}, one attend call per query (decoder step)"
    return Case(label, inputs, spec, case.names)


def _additive_call(cls: Any, inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Build the learner's module with the case's weights, prepare once, attend step by step; then check
    whether attend still reads W_k by poisoning it with NaN after prepare."""
    params = inputs["params"]
    (h, ks), qs = params["W_k.weight"].shape, params["W_q.weight"].shape[1]
    attention = cls(ks, qs, h).to(params["W_k.weight"].dtype)
    attention.load_state_dict(params)
    queries = inputs["queries"]
    memory = attention.prepare(inputs["keys"], inputs["values"], inputs["valid_lens"])
    steps = [attention.attend(queries[:, t : t + 1], memory) for t in range(queries.shape[1])]
    contexts, weights = (torch.cat([step[j] for step in steps], 1) for j in (0, 1))
    with torch.no_grad():
        for p in attention.parameters():
            if p is attention.W_k.weight:
                p.fill_(math.nan)
    context, weight = attention.attend(queries[:, :1], memory)
    poisoned = bool(torch.isnan(context).any() or torch.isnan(weight).any())
    return contexts, weights, poisoned and not bool(torch.isnan(contexts).any() or torch.isnan(weights).any())


def _additive_reference(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, bool]:
    params = inputs["params"]
    (h, ks), qs = params["W_k.weight"].shape, params["W_q.weight"].shape[1]
    attention = _package_attention("AdditiveAttention", ks, qs, h).to(params["W_k.weight"].dtype)
    attention.load_state_dict(params)
    memory = attention.prepare(inputs["keys"], inputs["values"], inputs["valid_lens"])
    context, weights = attention.attend(inputs["queries"], memory)
    return context, weights, False


def _additive_variant(
    inputs: dict[str, Any],
    *,
    swap: bool = False,
    tanh: str = "inside",
    dim: int = -1,
    mask: str = "finite",
    uses_wk: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    p = inputs["params"]
    W_q, W_k, w_v = p["W_q.weight"], p["W_k.weight"], p["w_v.weight"]
    q, k, lens = inputs["queries"], inputs["keys"], inputs["valid_lens"]
    if swap:
        W_q, W_k = W_k, W_q
    features = (q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :]
    if tanh == "inside":
        scores = (torch.tanh(features) @ w_v.T).squeeze(-1)
    elif tanh == "outside":
        scores = torch.tanh(features @ w_v.T).squeeze(-1)
    else:
        scores = (features @ w_v.T).squeeze(-1)
    if mask == "none":
        weights = F.softmax(scores, dim=-1)
    elif mask == "d2l":
        weights = _d2l_masked_softmax(scores, lens)
    else:
        weights = _finite_masked_softmax(scores, lens)
    if dim != -1:  # attend sees one query per step, so a softmax over the queries sees one score
        weights = torch.cat(
            [_finite_masked_softmax(scores[:, t : t + 1], lens, dim=1) for t in range(scores.shape[1])], 1
        )
    return torch.bmm(weights, inputs["values"]), weights, uses_wk


ADDITIVE_ATTENTION = Exercise(
    "ch2.q2",
    "AdditiveAttention",
    "Additive attention with the keys projected once",
    solution='''
class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention, score w_vᵀ tanh(W_q q + W_k k), with W_k k computed once per batch.

    memory = attention.prepare(keys, values, valid_lens)   # once per source batch
    context, weights = attention.attend(queries, memory)   # at every decoder step
    Bahdanau et al. 2014, eq. (6); the layer names follow d2l's AdditiveAttention.
    """

    def __init__(self, key_size, query_size, num_hiddens):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def prepare(self, keys, values, valid_lens=None):
        """Once per source batch: project the keys; return what `attend` needs (a tuple will do).

        keys: (batch_size, num_keys, key_size); values: (batch_size, num_keys, value_size);
        valid_lens: None or (batch_size,) integer.
        """
        return self.W_k(keys), values, valid_lens

    def attend(self, queries, memory):
        """At every decoder step, without touching W_k: the keys were projected in `prepare`.

        queries: (batch_size, num_queries, query_size); memory: what `prepare` returned.
        Returns: context (batch_size, num_queries, value_size), weights (batch_size, num_queries, num_keys).
        """
        projected_keys, values, valid_lens = memory
        # (batch, num_queries, 1, num_hiddens) + (batch, 1, num_keys, num_hiddens): every query with every key
        features = torch.tanh(self.W_q(queries)[:, :, None, :] + projected_keys[:, None, :, :])
        weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
        return torch.bmm(weights, values), weights

    def forward(self, queries, keys, values, valid_lens=None):
        return self.attend(queries, self.prepare(keys, values, valid_lens))
''',
    write=("prepare", "attend"),
    hint="In `prepare`, compute `self.W_k(keys)` and return it with the values and valid_lens (a tuple). In "
    "`attend`, project the queries with `self.W_q`, add every query to every projected key by "
    "broadcasting (`[:, :, None, :]` and `[:, None, :, :]` give (batch, num_queries, num_keys, num_hiddens)),"
    " apply tanh, then `self.w_v` and `.squeeze(-1)` for the scores, then `masked_softmax` and "
    "`torch.bmm(weights, values)`.",
    covers="attend called once per decoder step; W_k used only in prepare; valid_lens None and "
    "(batch_size,); "
    "rows of valid length 0; one key; query, key, value and hidden sizes all different; float64",
    defaults=dict(_ATTENTION_DEFAULTS, query_size=3, key_size=5, num_hiddens=7),
    specs=[
        {"seed": 31, "valid_lens": None},
        {"seed": 32, "num_queries": 4, "valid_lens": [3, 0]},
        {
            "seed": 33,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 6,
            "query_size": 4,
            "key_size": 4,
            "value_size": 2,
            "num_hiddens": 5,
            "valid_lens": [6, 1, 4],
        },
        {"seed": 34, "num_queries": 2, "num_keys": 1, "dtype": "float64", "valid_lens": [1, 1]},
    ],
    build=_additive_case,
    call=_additive_call,
    reference=_additive_reference,
    mistakes=[
        Mistake(
            "`attend` uses `self.W_k`: the keys are projected again at every decoder step. Project them "
            "once in `prepare`, put W_k k into the memory, and only read it in `attend`.",
            lambda i: (*_additive_reference(i)[:2], True),
        ),
        Mistake(
            "tanh is missing: the score is w_vᵀ tanh(W_q q + W_k k); without the tanh it is linear in the "
            "query and the key.",
            lambda i: _additive_variant(i, tanh="none"),
        ),
        Mistake(
            "tanh is applied after w_v; it goes inside: w_vᵀ tanh(W_q q + W_k k).",
            lambda i: _additive_variant(i, tanh="outside"),
        ),
        Mistake(
            "W_q and W_k are swapped: W_q projects the queries, W_k the keys.",
            lambda i: (
                _additive_variant(i, swap=True, uses_wk=True)
                if i["params"]["W_q.weight"].shape == i["params"]["W_k.weight"].shape
                else None
            ),
        ),
        Mistake(
            "The mask is not applied: keys beyond valid_lens get weight. Keep valid_lens in the memory and "
            "use `masked_softmax`.",
            lambda i: _additive_variant(i, mask="none"),
        ),
        Mistake(_EMPTY_ROW_HINT, lambda i: _additive_variant(i, mask="d2l")),
        Mistake(
            "The softmax runs over the wrong axis: with one query per step, a softmax over the queries "
            "gives every key weight 1. Normalise over the keys (the last axis).",
            lambda i: _additive_variant(i, dim=1),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor|scores has shape \(\d+, \d+\), expected 3 dimensions",
            "W_q q is (batch, num_queries, num_hiddens) and W_k k is (batch, num_keys, num_hiddens): "
            "to add every query to every key, give them axes to broadcast over, "
            "`[:, :, None, :]` and `[:, None, :, :]`.",
        ),
        ErrorHint(
            r"Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict|size mismatch for",
            "Keep the layers of the given `__init__` (W_k, W_q, w_v, bias-free) unchanged: the check "
            "loads its weights into them.",
        ),
    ],
    package=["attn_course.attention.AdditiveAttention"],
)


def _scores_case(spec: dict[str, Any], weights: Callable[[dict, torch.Generator, torch.dtype], dict]) -> Case:
    case = _attention_case(spec, values=False, names="the scores")
    gen, dtype = _generator(dict(spec, seed=spec["seed"] + 1000)), _dtype(spec)
    extra = weights(spec, gen, dtype)
    shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in extra.items())
    return Case(f"{case.label}, {shapes}", dict(case.inputs, **extra), spec, case.names)


def _general_variant(
    inputs: dict[str, Any],
    *,
    transpose: bool = False,
    ignore: bool = False,
    scale: bool = False,
    softmax: bool = False,
    swap_axes: bool = False,
) -> torch.Tensor | None:
    q, k, W_a = inputs["queries"], inputs["keys"], inputs["W_a"]
    if (transpose or ignore) and q.shape[-1] != k.shape[-1]:
        return None
    projected = k if ignore else k @ (W_a if transpose else W_a.T)  # (batch, num_keys, query_size)
    scores = torch.bmm(q, projected.transpose(1, 2))
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    if softmax:
        scores = F.softmax(scores, dim=-1)
    return scores.transpose(1, 2) if swap_axes else scores


_SOFTMAX_SCORES = (
    "You returned softmax weights; this function returns the raw scores (the masked softmax comes later)."
)
_TRANSPOSED_SCORES = (
    "The scores are transposed: return (batch_size, num_queries, num_keys), one row per query "
    "and one column per key."
)

GENERAL_SCORES = Exercise(
    "ch2.q3",
    "general_scores",
    "Luong's general score qᵀ W_a k",
    solution='''
def general_scores(queries, keys, W_a):
    """Luong's "general" score qᵀ W_a k for every query and key (Luong et al. 2015, eq. 8).

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (query_size, key_size), the weight of nn.Linear(key_size, query_size, bias=False).
    Returns: scores (batch_size, num_queries, num_keys).
    """
    projected_keys = keys @ W_a.T                       # W_a k: (batch_size, num_keys, query_size)
    return torch.bmm(queries, projected_keys.transpose(1, 2))
''',
    hint="Map the keys into the query space first: `W_a k` for every key is `keys @ W_a.T`, shape "
    "(batch_size, "
    "num_keys, query_size). Then it is a plain dot product with the queries: "
    "`torch.bmm(queries, projected_keys.transpose(1, 2))`. No scaling, no softmax.",
    covers="query_size different from key_size and equal to it; one key; float32 and float64",
    defaults=dict(_ATTENTION_DEFAULTS, query_size=4, key_size=6),
    specs=[
        {"seed": 41},
        {"seed": 42, "num_queries": 2, "num_keys": 4, "query_size": 3, "key_size": 3},
        {"seed": 43, "batch_size": 3, "num_queries": 1, "num_keys": 1, "dtype": "float64"},
    ],
    build=lambda spec: _scores_case(
        spec, lambda s, g, d: {"W_a": _randn((s["query_size"], s["key_size"]), g, d)}
    ),
    call=lambda answer, i: answer(i["queries"], i["keys"], i["W_a"]),
    reference=lambda i: _resolve("attn_course.scoring.general_scores")(i["queries"], i["keys"], i["W_a"]),
    mistakes=[
        Mistake(
            "W_a is used untransposed. It is (query_size, key_size), the weight of nn.Linear(key_size, "
            "query_size): W_a k for a batch of keys is `keys @ W_a.T`.",
            lambda i: _general_variant(i, transpose=True),
        ),
        Mistake(
            "W_a is ignored: that is the dot score qᵀk. The general score maps the keys first: qᵀ (W_a k).",
            lambda i: _general_variant(i, ignore=True),
        ),
        Mistake(
            "Luong's general score is not scaled: drop the 1/sqrt(d).",
            lambda i: _general_variant(i, scale=True),
        ),
        Mistake(_SOFTMAX_SCORES, lambda i: _general_variant(i, softmax=True)),
        Mistake(_TRANSPOSED_SCORES, lambda i: _general_variant(i, swap_axes=True)),
    ],
    error_hints=[
        ErrorHint(
            r"mat1 and mat2 shapes|size mismatch|must match the size|Expected size for first two",
            "W_a is (query_size, key_size): W_a k for a batch of keys is `keys @ W_a.T` (batch_size, "
            "num_keys, query_size), which then meets the queries in "
            "`torch.bmm(queries, ....transpose(1, 2))`.",
        ),
    ],
    package=["attn_course.scoring.general_scores"],
)


def _concat_variant(
    inputs: dict[str, Any],
    *,
    order: str = "qk",
    tanh: str = "inside",
    softmax: bool = False,
    swap_axes: bool = False,
) -> torch.Tensor | None:
    q, k, W_a, v_a = inputs["queries"], inputs["keys"], inputs["W_a"], inputs["v_a"]
    qs = q.shape[-1]
    if order == "kq":
        if q.shape[-1] != k.shape[-1]:
            return None
        W_q, W_k = W_a[:, qs:], W_a[:, :qs]
    else:
        W_q, W_k = W_a[:, :qs], W_a[:, qs:]
    features = (q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :]
    if tanh == "inside":
        scores = (torch.tanh(features) @ v_a.T).squeeze(-1)
    elif tanh == "outside":
        scores = torch.tanh(features @ v_a.T).squeeze(-1)
    else:
        scores = (features @ v_a.T).squeeze(-1)
    if softmax:
        scores = F.softmax(scores, dim=-1)
    return scores.transpose(1, 2) if swap_axes else scores


CONCAT_SCORES = Exercise(
    "ch2.q4",
    "concat_scores",
    "Luong's concat score v_aᵀ tanh(W_a [q; k])",
    solution='''
def concat_scores(queries, keys, W_a, v_a):
    """Luong's "concat" score v_aᵀ tanh(W_a [q; k]) for every query and key (Luong et al. 2015, eq. 8).

    queries: (batch_size, num_queries, query_size); keys: (batch_size, num_keys, key_size);
    W_a: (num_hiddens, query_size + key_size); v_a: (1, num_hiddens).
    Returns: scores (batch_size, num_queries, num_keys).
    """
    num_queries, num_keys = queries.shape[1], keys.shape[1]
    pairs = torch.cat([queries[:, :, None, :].expand(-1, -1, num_keys, -1),   # [q; k] for every pair:
                       keys[:, None, :, :].expand(-1, num_queries, -1, -1)],  # (batch, num_queries, num_keys,
                      dim=-1)                                                 #  query_size + key_size)
    return (torch.tanh(pairs @ W_a.T) @ v_a.T).squeeze(-1)
''',
    hint="Pair every query with every key: expand queries to (batch, num_queries, num_keys, query_size) and "
    "keys to (batch, num_queries, num_keys, key_size), then `torch.cat([q, k], dim=-1)` -- query first. "
    "Apply `@ W_a.T`, tanh, `@ v_a.T`, and squeeze the last axis. (Splitting W_a into its query and key "
    "columns avoids building the big tensor: W_a [q; k] = W_a[:, :query_size] q + W_a[:, query_size:] k.)",
    covers="query_size different from key_size and equal to it; one key; float32 and float64",
    defaults=dict(_ATTENTION_DEFAULTS, query_size=3, key_size=5, num_hiddens=4),
    specs=[
        {"seed": 51, "num_queries": 2, "num_keys": 6},
        {"seed": 52, "num_queries": 3, "num_keys": 3, "query_size": 4, "key_size": 4},
        {"seed": 53, "batch_size": 1, "num_queries": 2, "num_keys": 1, "dtype": "float64"},
    ],
    build=lambda spec: _scores_case(
        spec,
        lambda s, g, d: {
            "W_a": _randn((_size(s, "num_hiddens"), s["query_size"] + s["key_size"]), g, d, 0.7),
            "v_a": _randn((1, s["num_hiddens"]), g, d),
        },
    ),
    call=lambda answer, i: answer(i["queries"], i["keys"], i["W_a"], i["v_a"]),
    reference=lambda i: _resolve("attn_course.scoring.concat_scores")(
        i["queries"], i["keys"], i["W_a"], i["v_a"]
    ),
    mistakes=[
        Mistake(
            "The concatenation order is reversed: the score reads [q; k] -- the query first, then the key "
            "-- so the first query_size columns of W_a multiply the query. You built [k; q].",
            lambda i: _concat_variant(i, order="kq"),
        ),
        Mistake(
            "tanh is missing: the score is v_aᵀ tanh(W_a [q; k]).", lambda i: _concat_variant(i, tanh="none")
        ),
        Mistake(
            "tanh is applied after v_a; it goes inside: v_aᵀ tanh(W_a [q; k]).",
            lambda i: _concat_variant(i, tanh="outside"),
        ),
        Mistake(_SOFTMAX_SCORES, lambda i: _concat_variant(i, softmax=True)),
        Mistake(_TRANSPOSED_SCORES, lambda i: _concat_variant(i, swap_axes=True)),
    ],
    error_hints=[
        ErrorHint(
            r"Sizes of tensors must match except in dimension",
            "torch.cat needs both halves shaped alike except in the last axis: expand the queries to "
            "(batch, num_queries, num_keys, query_size) and the keys to (batch, num_queries, num_keys, "
            "key_size) first.",
        ),
        ErrorHint(
            r"mat1 and mat2 shapes|size mismatch|must match the size",
            "W_a is (num_hiddens, query_size + key_size) and v_a is (1, num_hiddens): apply them as "
            "`pairs @ W_a.T` and `... @ v_a.T` on the last axis of the (batch, num_queries, num_keys, "
            "query_size + key_size) pairs.",
        ),
    ],
    package=["attn_course.scoring.concat_scores"],
)


# ----------------------------------------------------------------------------------------------------
# Chapter 3: the seq2seq bottleneck


def _cross_entropy_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, t, v = (_size(spec, n) for n in ("batch_size", "num_steps", "vocab_size"))
    logits = _randn((b, t, v), gen, dtype, 2.0)
    lens = _lengths(spec["tgt_valid_lens"], (b,), t, gen, "tgt_valid_lens", low=1)
    labels = torch.randint(1, v, (b, t), generator=gen)
    padding = torch.arange(t)[None, :] >= lens[:, None]
    if spec["padding_labels"] == "pad":
        labels = labels.masked_fill(padding, 0)
    elif spec["padding_labels"] == "any":  # any id at all, <pad> included
        labels = torch.where(padding, torch.randint(0, v, (b, t), generator=gen), labels)
    else:
        raise ValueError(f"padding_labels must be 'pad' or 'any', got {spec['padding_labels']!r}")
    which = "<pad> (id 0)" if spec["padding_labels"] == "pad" else "arbitrary ids"
    label = (
        f"logits of shape {(b, t, v)} and dtype {spec['dtype']}, tgt_valid_lens {lens.tolist()}, padding "
        f"labels {which}"
    )
    return Case(label, {"logits": logits, "tgt_out": labels, "tgt_valid_lens": lens}, spec, "the loss")


def _token_losses(inputs: dict[str, Any], ignore_pad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(losses (batch, T), real (batch, T) bool) for the cross-entropy variants."""
    logits, labels, lens = inputs["logits"], inputs["tgt_out"], inputs["tgt_valid_lens"]
    losses = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    real = torch.arange(labels.shape[1])[None, :] < lens[:, None]
    if ignore_pad:
        real = labels != 0
    return losses, real


def _cross_entropy_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> torch.Tensor:
        losses, real = _token_losses(inputs, ignore_pad=kind == "ignore_index")
        masked = (losses * real).sum()
        if kind == "unmasked":
            return losses.mean()
        if kind == "all_positions":
            return masked / losses.numel()
        if kind == "per_sentence":
            return ((losses * real).sum(1) / real.sum(1)).mean()
        if kind == "sum":
            return masked
        if kind == "one_more":
            lens = inputs["tgt_valid_lens"]
            extra = torch.arange(losses.shape[1])[None, :] <= lens[:, None]
            return (losses * extra).sum() / extra.sum()
        return masked / real.sum()  # ignore_index: the mask comes from the labels, not the lengths

    return variant


MASKED_CROSS_ENTROPY = Exercise(
    "ch3.q1",
    "masked_cross_entropy",
    "Masked cross-entropy: a loss that ignores padding",
    solution='''
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    """The mean cross-entropy over the real target tokens; padded positions contribute nothing.

    logits: (batch_size, T, vocab_size); tgt_out: (batch_size, T) labels; tgt_valid_lens: (batch_size,),
    the number of real tokens of each sentence (<eos> included).
    Returns: a scalar tensor, the sum of -log p(y_t) over real tokens divided by the number of real tokens.
    """
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")  # (batch_size, T)
    real = torch.arange(tgt_out.shape[1], device=tgt_out.device)[None, :] < tgt_valid_lens[:, None]
    return (losses * real).sum() / real.sum()
''',
    hint="`F.cross_entropy` wants the classes on axis 1: pass `logits.transpose(1, 2)` (batch, vocab, T) and "
    "`reduction='none'` to get one loss per position, (batch, T). Build the mask of real positions from "
    "`tgt_valid_lens` (as `sequence_mask` does), and divide the masked sum by the number of real tokens -- "
    "not by batch_size * T, and not sentence by sentence.",
    covers="padding labels <pad> or arbitrary; sentences of length 1 and without padding; float32 "
    "and float64",
    defaults={
        "seed": 0,
        "batch_size": 3,
        "num_steps": 5,
        "vocab_size": 7,
        "dtype": "float32",
        "tgt_valid_lens": "random",
        "padding_labels": "pad",
    },
    specs=[
        {"seed": 61, "tgt_valid_lens": [5, 2, 3]},
        {"seed": 62, "batch_size": 2, "num_steps": 4, "tgt_valid_lens": [4, 4]},
        {
            "seed": 63,
            "batch_size": 2,
            "num_steps": 6,
            "vocab_size": 5,
            "tgt_valid_lens": [1, 6],
            "dtype": "float64",
        },
        {
            "seed": 64,
            "batch_size": 4,
            "num_steps": 5,
            "tgt_valid_lens": [2, 5, 1, 3],
            "padding_labels": "any",
        },
    ],
    build=_cross_entropy_case,
    call=lambda answer, i: answer(i["logits"], i["tgt_out"], i["tgt_valid_lens"]),
    reference=lambda i: _resolve("attn_course.training.masked_cross_entropy")(
        i["logits"], i["tgt_out"], i["tgt_valid_lens"]
    ),
    mistakes=[
        Mistake(
            "Padding is not masked: the loss averages over every position, padding included. Mask the "
            "positions at or beyond `tgt_valid_lens`.",
            _cross_entropy_variant("unmasked"),
        ),
        Mistake(
            "The masked sum is divided by batch_size * T, padding included; divide by the number of real "
            "tokens, `mask.sum()`, so that the loss does not shrink when a batch has more padding.",
            _cross_entropy_variant("all_positions"),
        ),
        Mistake(
            "You averaged each sentence, then the sentences: a 2-token sentence then weighs as much as a "
            "20-token one. Average over all real tokens of the batch: `(losses * mask).sum() / mask.sum()`.",
            _cross_entropy_variant("per_sentence"),
        ),
        Mistake(
            "You returned the sum over real tokens; the loss is their mean.", _cross_entropy_variant("sum")
        ),
        Mistake(
            "Off by one: position `tgt_valid_len` is already padding (the real tokens are 0 .. len-1).",
            _cross_entropy_variant("one_more"),
        ),
        Mistake(
            "You found the padding from the labels (e.g. `ignore_index=0`), but a padded position's label "
            "can be any id; which positions are real is what `tgt_valid_lens` says.",
            _cross_entropy_variant("ignore_index"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"Expected target size|Expected input batch_size|only batches of spatial targets",
            "`F.cross_entropy` expects the classes on axis 1: logits (batch, vocab, T) with labels "
            "(batch, T), so pass `logits.transpose(1, 2)` (or flatten both to (batch * T, ...)).",
        ),
    ],
    package=["attn_course.training.masked_cross_entropy"],
)


def _final_state_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, s, h = (_size(spec, n) for n in ("batch_size", "num_steps", "num_hiddens"))
    lens = _lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    outputs = _randn((b, s, h), gen, dtype)
    label = f"outputs of shape {(b, s, h)} and dtype {spec['dtype']}, valid_lens {lens.tolist()}"
    return Case(label, {"outputs": outputs, "valid_lens": lens}, spec, "the final states")


def _final_state_reference(inputs: dict[str, Any]) -> torch.Tensor:
    outputs, lens = inputs["outputs"], inputs["valid_lens"]
    return outputs[torch.arange(outputs.shape[0]), lens - 1]


def _masked_mean(inputs: dict[str, Any]) -> torch.Tensor:
    outputs, lens = inputs["outputs"], inputs["valid_lens"]
    real = (torch.arange(outputs.shape[1])[None, :] < lens[:, None]).to(outputs.dtype)
    return (outputs * real[..., None]).sum(1) / real.sum(1, keepdim=True)


FINAL_STATE = Exercise(
    "ch3.q2",
    "final_state",
    "The final state of a padded batch: the context of the bottleneck",
    solution='''
def final_state(outputs, valid_lens):
    """Each sentence's encoder output at its last real position: the fixed context of a seq2seq without
    attention, read without touching the padding.

    outputs: (batch_size, num_steps, num_hiddens), right-padded; valid_lens: (batch_size,), each >= 1.
    Returns: (batch_size, num_hiddens), row i = outputs[i, valid_lens[i] - 1].
    """
    rows = torch.arange(outputs.shape[0], device=outputs.device)
    return outputs[rows, valid_lens - 1]
''',
    hint="Index two axes at once: `outputs[rows, valid_lens - 1]` with `rows = "
    "torch.arange(batch_size)` picks "
    "one position per sentence. The last real position of a sentence of length n is n - 1; `outputs[:, -1]` "
    "is the last *padded* position, which for a short sentence is padding.",
    covers="padded and unpadded sentences, sentences of length 1, float32 and float64",
    defaults={
        "seed": 0,
        "batch_size": 3,
        "num_steps": 5,
        "num_hiddens": 4,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 71, "valid_lens": [5, 2, 3]},
        {"seed": 72, "batch_size": 2, "num_steps": 1, "valid_lens": [1, 1]},
        {
            "seed": 73,
            "batch_size": 4,
            "num_steps": 6,
            "num_hiddens": 3,
            "valid_lens": [1, 6, 4, 2],
            "dtype": "float64",
        },
    ],
    build=_final_state_case,
    call=lambda answer, i: answer(i["outputs"], i["valid_lens"]),
    reference=_final_state_reference,
    mistakes=[
        Mistake(
            "You took the last *padded* position, `outputs[:, -1]`: for a sentence shorter than the batch "
            "that is padding, not its last word. Use each sentence's own `valid_len - 1`.",
            lambda i: i["outputs"][:, -1],
        ),
        Mistake(
            "You averaged the real positions: that is a summary of the sentence, but the bottleneck's "
            "context is the state after its last real token, `outputs[i, valid_len - 1]`.",
            _masked_mean,
        ),
        Mistake(
            "You averaged every position, padding included. The context is the state at the last real "
            "position, `outputs[i, valid_len - 1]`.",
            lambda i: i["outputs"].mean(1),
        ),
        Mistake(
            "You took the first position; the context is the state after the *last* real token.",
            lambda i: i["outputs"][:, 0],
        ),
    ],
    error_hints=[
        ErrorHint(
            r"index \d+ is out of bounds for dimension",
            "Off by one: a sentence of length n has its last real token at position n - 1 (positions "
            "start at 0), so index with `valid_lens - 1`.",
        ),
    ],
)


# ----------------------------------------------------------------------------------------------------
# Chapter 4: Bahdanau's attention decoder


def _gru_params(gen: torch.Generator, dtype: torch.dtype, input_size: int, hidden: int) -> dict[str, Any]:
    scale = 1 / math.sqrt(hidden)
    return {
        "weight_ih": _randn((3 * hidden, input_size), gen, dtype, scale),
        "weight_hh": _randn((3 * hidden, hidden), gen, dtype, scale),
        "bias_ih": _randn((3 * hidden,), gen, dtype, scale),
        "bias_hh": _randn((3 * hidden,), gen, dtype, scale),
    }


def _gru_cell(params: dict[str, torch.Tensor]) -> nn.GRUCell:
    hidden3, input_size = params["weight_ih"].shape
    cell = nn.GRUCell(input_size, hidden3 // 3).to(params["weight_ih"].dtype)
    cell.load_state_dict(params)
    return cell


def _bahdanau_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, t, s = (_size(spec, n) for n in ("batch_size", "num_steps", "num_keys"))
    e, h, enc, a = (_size(spec, n) for n in ("embed_size", "num_hiddens", "enc_size", "attn_hiddens"))
    lens = _lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    inputs = {
        "embedded": _randn((b, t, e), gen, dtype),
        "s_0": _randn((b, h), gen, dtype, 0.5),
        "enc_outputs": _randn((b, s, enc), gen, dtype),
        "valid_lens": lens,
        "attention": {
            "W_k.weight": _randn((a, enc), gen, dtype, 0.5),
            "W_q.weight": _randn((a, h), gen, dtype, 0.5),
            "w_v.weight": _randn((1, a), gen, dtype),
        },
        "rnn": _gru_params(gen, dtype, e + enc, h),
    }
    label = (
        f"{t} steps, batch {b}, embed_size {e}, num_hiddens {h}, {s} source positions of size {enc}, "
        f"valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(
        label,
        inputs,
        spec,
        ("the states", "the contexts", "the weights", "whether the steps re-project the keys"),
    )


def _bahdanau_parts(inputs: dict[str, Any]) -> tuple[nn.Module, nn.GRUCell, Any]:
    """The package's AdditiveAttention with the case's weights, its memory of the source, and the GRU cell."""
    p = inputs["attention"]
    (a, enc), h = p["W_k.weight"].shape, p["W_q.weight"].shape[1]
    attention = _package_attention("AdditiveAttention", enc, h, a).to(p["W_k.weight"].dtype)
    attention.load_state_dict(p)
    memory = attention.prepare(inputs["enc_outputs"], inputs["enc_outputs"], inputs["valid_lens"])
    return attention, _gru_cell(inputs["rnn"]), memory


def _bahdanau_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    """Run the learner's decoder loop; then again with W_k poisoned, to see whether it projects keys again."""
    attention, rnn, memory = _bahdanau_parts(inputs)
    result = fn(inputs["embedded"], inputs["s_0"], memory, attention, rnn)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return result
    with torch.no_grad():
        attention.W_k.weight.fill_(math.nan)
    again = fn(inputs["embedded"], inputs["s_0"], memory, attention, rnn)
    had_nan = any(isinstance(r, torch.Tensor) and bool(torch.isnan(r).any()) for r in result)
    has_nan = any(isinstance(r, torch.Tensor) and bool(torch.isnan(r).any()) for r in again)
    return (*result, has_nan and not had_nan)


def _bahdanau_loop(
    inputs: dict[str, Any],
    *,
    query: str = "previous",
    order: str = "yc",
    once: bool = False,
    shift: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """Bahdanau's decoder over the teacher-forced steps, and its known-wrong variants."""
    attention, rnn, memory = _bahdanau_parts(inputs)
    embedded, s = inputs["embedded"], inputs["s_0"]
    previous_context = embedded.new_zeros(embedded.shape[0], memory.values.shape[-1])
    states, contexts, weights = [], [], []
    first = attention.attend(s[:, None], memory)
    for t in range(embedded.shape[1]):
        if query == "previous":
            context, weight = first if once else attention.attend(s[:, None], memory)
            parts = [embedded[:, t], context[:, 0]]
            new_s = rnn(torch.cat(parts if order == "yc" else parts[::-1], -1), s)
        else:  # attend with the new state, feeding the previous step's context to the GRU
            new_s = rnn(torch.cat([embedded[:, t], previous_context], -1), s)
            context, weight = attention.attend(new_s[:, None], memory)
            previous_context = context[:, 0]
        states.append(s if shift else new_s)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
        s = new_s
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1), False


BAHDANAU_DECODE = Exercise(
    "ch4.q1",
    "bahdanau_decode",
    "Bahdanau's decoder, step by step (query = s_{t-1})",
    solution='''
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    """Run Bahdanau's decoder over T teacher-forced steps (Bahdanau et al. 2014, eqs. 4-6).

    At step t: c_t, alpha_t = attend(s_{t-1}); s_t = GRU([e(y_{t-1}); c_t], s_{t-1}).
    embedded: (batch_size, T, embed_size), the embeddings of <bos>, y_1, ..., y_{T-1};
    s_0: (batch_size, num_hiddens); memory: attention.prepare(annotations, annotations, valid_lens), the keys
    already projected; attention: attn_course's AdditiveAttention; rnn: nn.GRUCell(embed_size + enc_size,
    num_hiddens).
    Returns: states s_1..s_T (batch_size, T, num_hiddens), contexts c_1..c_T (batch_size, T, enc_size),
    weights alpha_1..alpha_T (batch_size, T, num_keys).
    """
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        context, weight = attention.attend(s[:, None, :], memory)          # query: the previous state
        s = rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), s)     # then update the state
        states.append(s)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
''',
    hint="Loop over t. First attend with the state you have, s_{t-1}: `attention.attend(s[:, None, "
    ":], memory)` "
    "(a query axis of size 1) gives the context (batch, 1, enc_size) and the weights (batch, 1, "
    "num_keys). Then "
    "update the state: `s = rnn(torch.cat([embedded[:, t], context[:, 0]], -1), s)`. Collect s_t, c_t and "
    "alpha_t, and stack them along axis 1. Never call `attention(...)` itself: that would project the keys "
    "again.",
    covers="several steps; padded sources and length-1 sources; the keys projected once; float32 and float64",
    defaults={
        "seed": 0,
        "batch_size": 2,
        "num_steps": 4,
        "num_keys": 5,
        "embed_size": 3,
        "num_hiddens": 6,
        "enc_size": 4,
        "attn_hiddens": 5,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 81, "valid_lens": [5, 3]},
        {"seed": 82, "batch_size": 3, "num_steps": 3, "num_keys": 1, "valid_lens": [1, 1, 1]},
        {
            "seed": 83,
            "num_steps": 5,
            "num_keys": 6,
            "embed_size": 4,
            "enc_size": 4,
            "valid_lens": [2, 6],
            "dtype": "float64",
        },
    ],
    build=_bahdanau_case,
    call=_bahdanau_call,
    reference=_bahdanau_loop,
    mistakes=[
        Mistake(
            "The attention at step t uses the new state s_t, where Bahdanau's decoder needs the previous "
            "one, s_{t-1}: attend first (with the state you have), then run the GRU on [e(y_{t-1}); c_t].",
            lambda i: _bahdanau_loop(i, query="current"),
        ),
        Mistake(
            "The GRU's input is [e(y_{t-1}); c_t] -- the embedding first, then the context: the cell's "
            "weights were trained for that order.",
            lambda i: _bahdanau_loop(i, order="cy"),
        ),
        Mistake(
            "The context never changes: it must be recomputed at every step from the current s_{t-1}; "
            "yours is the one from s_0.",
            lambda i: _bahdanau_loop(i, once=True),
        ),
        Mistake(
            "Off by one: the states to return are s_1..s_T, the state after each step; yours start at s_0.",
            lambda i: _bahdanau_loop(i, shift=True),
        ),
        Mistake(
            "The steps project the keys again (e.g. by calling `attention(query, keys, ...)`): the memory "
            "already holds W_k h_j; call `attention.attend(query, memory)` at every step.",
            lambda i: (*_bahdanau_loop(i)[:3], True),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"queries has shape \(\d+, \d+\), expected",
            "`attention.attend` wants queries (batch_size, num_queries, query_size): give the state a "
            "query axis, `s[:, None, :]`.",
        ),
        ErrorHint(
            r"input has inconsistent input_size|Expected hidden size|size mismatch|mat1 and mat2",
            "The GRU cell takes [e(y_{t-1}); c_t] of size embed_size + enc_size and the state s_{t-1} "
            "(batch_size, num_hiddens): squeeze the query axis of the context (`context[:, 0]`) before "
            "concatenating.",
        ),
    ],
    package=["attn_course.decoders.BahdanauDecoder"],
)


def _links_case(spec: dict[str, Any]) -> Case:
    gen = _generator(spec)
    src, tgt = _size(spec, "src_len"), _size(spec, "tgt_len")
    grid = [(i, j) for i in range(src) for j in range(tgt)]
    draw = torch.rand(len(grid), 3, generator=gen).tolist()
    possible = {link for link, (p, _, _) in zip(grid, draw, strict=True) if p < spec["possible_rate"]}
    sure = {link for link, (p, q, _) in zip(grid, draw, strict=True) if link in possible and q < 0.6}
    kind = spec["predicted"]
    if kind == "argmax":  # one source word per target word, like attention_to_links
        picks = torch.randint(0, src, (tgt,), generator=gen).tolist()
        predicted = {(i, j) for j, i in enumerate(picks)}
    elif kind in ("sure", "possible", "empty"):
        predicted = {"sure": set(sure), "possible": set(possible), "empty": set()}[kind]
    else:
        raise ValueError(f"predicted must be 'argmax', 'sure', 'possible' or 'empty', got {kind!r}")
    if not sure and not predicted:
        sure = {(0, 0)}
        possible.add((0, 0))
    label = (
        f"{src} source and {tgt} target words: |A| = {len(predicted)} predicted, |S| = {len(sure)} sure, "
        f"|P| = {len(possible)} possible links"
    )
    return Case(label, {"predicted": predicted, "sure": sure, "possible": possible}, spec, "the AER")


def _aer_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> float | None:
        a, s, p = inputs["predicted"], inputs["sure"], inputs["possible"]
        if kind == "sure_only":
            return 1 - 2 * len(a & s) / (len(a) + len(s))
        if kind == "possible_denominator":
            return 1 - (len(a & s) + len(a & p)) / (len(a) + len(p)) if a or p else None
        if kind == "score":
            return (len(a & s) + len(a & p)) / (len(a) + len(s))
        if kind == "possible_only":
            return 1 - 2 * len(a & p) / (len(a) + len(s))
        if kind == "precision":
            return 1 - len(a & p) / len(a) if a else None
        return None

    return variant


ALIGNMENT_ERROR_RATE = Exercise(
    "ch4.q2",
    "alignment_error_rate",
    "Alignment error rate (AER) against sure and possible links",
    solution='''
def alignment_error_rate(predicted, sure, possible):
    """Och & Ney's alignment error rate (2000, eq. 6), lower is better:
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|).

    predicted (A), sure (S), possible (P): sets of (src_index, tgt_index) links, with S ⊆ P.
    Returns: a float in [0, 1].
    """
    return 1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))
''',
    hint="Sets make it one line: `len(A & S)` counts the predicted links that are sure, `len(A & P)` "
    "those that "
    "are at least possible. A possible-but-not-sure link is never an error and never required, so P appears "
    "only in the numerator and S only in the denominator.",
    covers="argmax alignments, A = S (AER 0), A = P, an empty prediction, sure = possible",
    defaults={"seed": 0, "src_len": 5, "tgt_len": 6, "possible_rate": 0.35, "predicted": "argmax"},
    specs=[
        {"seed": 91},
        {"seed": 92, "src_len": 7, "tgt_len": 5, "predicted": "sure"},
        {"seed": 93, "src_len": 4, "tgt_len": 4, "predicted": "possible", "possible_rate": 0.5},
        {"seed": 94, "src_len": 6, "tgt_len": 3, "predicted": "empty"},
        {"seed": 95, "src_len": 8, "tgt_len": 8, "possible_rate": 0.25},
    ],
    build=_links_case,
    call=lambda answer, i: answer(i["predicted"], i["sure"], i["possible"]),
    reference=lambda i: _resolve("attn_course.metrics.alignment_error_rate")(
        i["predicted"], i["sure"], i["possible"]
    ),
    mistakes=[
        Mistake(
            "You counted only the sure links as correct: a predicted link that is merely possible is not an "
            "error either. The numerator is |A ∩ S| + |A ∩ P|.",
            _aer_variant("sure_only"),
        ),
        Mistake(
            "The denominator is |A| + |S| (the sure links are the ones that must be found), not |A| + |P|.",
            _aer_variant("possible_denominator"),
        ),
        Mistake(
            "You returned the agreement, 1 - AER; AER is an error rate: 0 is a perfect alignment.",
            _aer_variant("score"),
        ),
        Mistake(
            "Both counts in the numerator used P: it is |A ∩ S| + |A ∩ P|, so a sure link counts twice and a "
            "merely possible link once.",
            _aer_variant("possible_only"),
        ),
        Mistake(
            "That is 1 - precision, which ignores the sure links that were missed; AER also divides by "
            "|A| + |S|.",
            _aer_variant("precision"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"unsupported operand type\(s\) for &",
            "The links come as Python sets: use `predicted & sure` for the intersection.",
        ),
    ],
    package=["attn_course.metrics.alignment_error_rate", "attn_course.metrics.corpus_alignment_error_rate"],
)


# ----------------------------------------------------------------------------------------------------
# Chapter 5: Luong's attention


def _location_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, q, qs = (_size(spec, n) for n in ("batch_size", "num_queries", "query_size"))
    max_len, k = _size(spec, "max_len"), _size(spec, "num_keys")
    if k > max_len:
        raise ValueError(f"num_keys must be <= max_len = {max_len}, got {k}")
    lens = _lengths(spec["valid_lens"], (b, q) if spec["per_query"] else (b,), k, gen, "valid_lens")
    inputs = {
        "queries": _randn((b, q, qs), gen, dtype),
        "W_a": _randn((max_len, qs), gen, dtype),
        "num_keys": k,
        "valid_lens": lens,
    }
    label = (
        f"queries {(b, q, qs)}, W_a {(max_len, qs)} (max_len {max_len}), num_keys {k}, {_lens_text(lens)}, "
        f"dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, "the weights")


def _location_reference(inputs: dict[str, Any]) -> torch.Tensor:
    scores = _resolve("attn_course.scoring.location_scores")(
        inputs["queries"], inputs["W_a"], inputs["num_keys"]
    )
    return _resolve("attn_course.masking.masked_softmax")(scores, inputs["valid_lens"])


def _location_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> torch.Tensor:
        scores = inputs["queries"] @ inputs["W_a"].T  # (batch, num_queries, max_len)
        k, lens = inputs["num_keys"], inputs["valid_lens"]
        if kind == "uncut":
            return _finite_masked_softmax(scores, lens)
        if kind == "cut_after":
            return F.softmax(scores, -1)[..., :k]
        scores = scores[..., :k]
        if kind == "unmasked":
            return F.softmax(scores, -1)
        return _finite_masked_softmax(scores, lens, dim=1)  # wrong axis

    return variant


LOCATION_WEIGHTS = Exercise(
    "ch5.q1",
    "location_weights",
    "Luong's location-based attention, masked",
    solution='''
def location_weights(queries, W_a, num_keys, valid_lens=None):
    """Luong's location-based weights a_t = softmax(W_a h_t) over the source positions (Luong et al. 2015,
    eq. 9), cut to the batch's num_keys positions and masked to each valid length.

    queries: (batch_size, num_queries, query_size); W_a: (max_len, query_size), the weight of
    nn.Linear(query_size, max_len, bias=False); num_keys <= max_len: the batch's padded source length;
    valid_lens: None, (batch_size,) or (batch_size, num_queries).
    Returns: weights (batch_size, num_queries, num_keys).
    """
    scores = queries @ W_a[:num_keys].T  # one score per source position: (batch, num_queries, num_keys)
    return masked_softmax(scores, valid_lens)
''',
    hint="The scores do not look at the keys at all: one score per source *position*, `queries @ "
    "W_a.T`. A batch "
    "has only num_keys positions, so keep the first num_keys rows of W_a (`W_a[:num_keys]`), then apply "
    "`masked_softmax` so that positions beyond each valid length get weight 0.",
    covers="num_keys below and equal to max_len; valid_lens None, (batch_size,) and (batch_size, "
    "num_queries); "
    "rows of valid length 0; one key; float32 and float64",
    defaults={
        "seed": 0,
        "batch_size": 2,
        "num_queries": 3,
        "query_size": 4,
        "max_len": 7,
        "num_keys": 5,
        "dtype": "float32",
        "valid_lens": "random",
        "per_query": False,
    },
    specs=[
        {"seed": 101, "valid_lens": [3, 5]},
        {"seed": 102, "num_keys": 7, "valid_lens": None},
        {
            "seed": 103,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 4,
            "per_query": True,
            "valid_lens": [[1, 4], [0, 2], [4, 3]],
        },
        {"seed": 104, "num_queries": 1, "num_keys": 1, "valid_lens": [1, 0], "dtype": "float64"},
    ],
    build=_location_case,
    call=lambda answer, i: answer(i["queries"], i["W_a"], i["num_keys"], i["valid_lens"]),
    reference=_location_reference,
    mistakes=[
        Mistake(
            "The weights cover all max_len positions W_a can score; a batch has only num_keys of them: keep "
            "the first num_keys rows of W_a (`W_a[:num_keys]`).",
            _location_variant("uncut"),
        ),
        Mistake(
            "You normalised over all max_len positions and cut afterwards, so each row's weights do not sum "
            "to 1 and padding is not masked. Cut W_a to num_keys rows first, then `masked_softmax`.",
            _location_variant("cut_after"),
        ),
        Mistake(
            "The mask is not applied: positions beyond valid_lens get weight. Use `masked_softmax(scores, "
            "valid_lens)`.",
            _location_variant("unmasked"),
        ),
        Mistake(
            "The softmax runs over the wrong axis: each query's weights over the source positions must sum "
            "to 1 (the last axis).",
            _location_variant("wrong_axis"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"mat1 and mat2 shapes|size mismatch|must match the size",
            "W_a is (max_len, query_size), the weight of nn.Linear(query_size, max_len): the scores are "
            "`queries @ W_a.T`, one per position.",
        ),
    ],
    package=["attn_course.scoring.location_scores"],
)


def _luong_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, s = _size(spec, "batch_size"), _size(spec, "num_keys")
    e, h, enc = (_size(spec, n) for n in ("embed_size", "num_hiddens", "enc_size"))
    lens = _lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    inputs = {
        "y_emb": _randn((b, e), gen, dtype),
        "h_prev": _randn((b, h), gen, dtype, 0.5),
        "feed": _randn((b, h), gen, dtype, 0.5),
        "enc_outputs": _randn((b, s, enc), gen, dtype),
        "valid_lens": lens,
        "W_a": _randn((h, enc), gen, dtype, 0.5),
        "rnn": _gru_params(gen, dtype, e + h, h),
        "W_c": _randn((h, enc + h), gen, dtype, 1 / math.sqrt(enc + h)),
    }
    label = (
        f"batch {b}, embed_size {e}, num_hiddens {h}, {s} source positions of size {enc}, "
        f"valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, ("h_t", "the attentional state h̃_t", "the weights a_t"))


def _luong_parts(inputs: dict[str, Any]) -> tuple[nn.Module, nn.GRUCell, Any]:
    """The package's LuongAttention ("general") with the case's W_a, its memory, and the GRU cell."""
    h, enc = inputs["W_a"].shape
    attention = _package_attention("LuongAttention", "general", h, enc).to(inputs["W_a"].dtype)
    attention.load_state_dict({"W_a.weight": inputs["W_a"]})
    memory = attention.prepare(inputs["enc_outputs"], inputs["enc_outputs"], inputs["valid_lens"])
    return attention, _gru_cell(inputs["rnn"]), memory


def _luong_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    attention, rnn, memory = _luong_parts(inputs)
    return fn(inputs["y_emb"], inputs["h_prev"], inputs["feed"], memory, attention, rnn, inputs["W_c"])


def _luong_step(
    inputs: dict[str, Any],
    *,
    query: str = "current",
    feed: str = "feed",
    order: str = "ch",
    tanh: bool = True,
    input_order: str = "yf",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of Luong's decoder with input feeding, and its known-wrong variants."""
    attention, rnn, memory = _luong_parts(inputs)
    y, h_prev = inputs["y_emb"], inputs["h_prev"]
    fed = inputs["feed"] if feed == "feed" else h_prev
    h_t = rnn(torch.cat([y, fed] if input_order == "yf" else [fed, y], -1), h_prev)
    context, weights = attention.attend((h_t if query == "current" else h_prev)[:, None], memory)
    pair = [context[:, 0], h_t] if order == "ch" else [h_t, context[:, 0]]
    attentional = torch.cat(pair, -1) @ inputs["W_c"].T
    return h_t, torch.tanh(attentional) if tanh else attentional, weights[:, 0]


LUONG_STEP = Exercise(
    "ch5.q2",
    "luong_step",
    "Luong's attentional state with input feeding",
    solution='''
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    """One step of Luong's decoder with input feeding (Luong et al. 2015, sec. 3 and 3.3).

    h_t = GRU([e(y_{t-1}); h̃_{t-1}], h_{t-1}); c_t, a_t = attend(h_t); h̃_t = tanh(W_c [c_t; h_t]).
    y_emb: (batch_size, embed_size); h_prev: h_{t-1} (batch_size, num_hiddens); feed: h̃_{t-1} (batch_size,
    num_hiddens); memory, attention: a prepared LuongAttention; rnn: nn.GRUCell(embed_size + num_hiddens,
    num_hiddens); W_c: (num_hiddens, enc_size + num_hiddens).
    Returns: h_t and h̃_t (batch_size, num_hiddens), a_t (batch_size, num_keys).
    """
    h_t = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)               # input feeding: h̃_{t-1} joins the input
    context, weights = attention.attend(h_t[:, None, :], memory)       # Luong attends with the *current* h_t
    attentional = torch.tanh(torch.cat([context[:, 0], h_t], dim=-1) @ W_c.T)
    return h_t, attentional, weights[:, 0]
''',
    hint="Three lines, in Luong's order: run the GRU first, on `torch.cat([y_emb, feed], -1)` (input "
    "feeding: "
    "the previous attentional state joins the input); attend with the new state, "
    "`attention.attend(h_t[:, None, :], memory)`; then h̃_t = tanh of `torch.cat([context[:, 0], h_t], -1) @ "
    "W_c.T` -- the context first.",
    covers="enc_size different from num_hiddens; padded and length-1 sources; float32 and float64",
    defaults={
        "seed": 0,
        "batch_size": 2,
        "num_keys": 5,
        "embed_size": 3,
        "num_hiddens": 4,
        "enc_size": 6,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 111, "valid_lens": [5, 2]},
        {"seed": 112, "batch_size": 3, "num_keys": 1, "valid_lens": [1, 1, 1]},
        {
            "seed": 113,
            "num_keys": 6,
            "embed_size": 5,
            "num_hiddens": 5,
            "enc_size": 5,
            "valid_lens": [3, 6],
            "dtype": "float64",
        },
    ],
    build=_luong_case,
    call=_luong_call,
    reference=_luong_step,
    mistakes=[
        Mistake(
            "h̃_t = tanh(W_c [c_t; h_t]): the context comes first. You built [h_t; c_t], so the halves of "
            "W_c meet the wrong vectors.",
            lambda i: _luong_step(i, order="hc"),
        ),
        Mistake(
            "The attention used h_{t-1} where Luong's decoder needs the current state h_t (that is "
            "Bahdanau's order): run the GRU first, then attend with its output.",
            lambda i: _luong_step(i, query="previous"),
        ),
        Mistake(
            "Input feeding feeds the previous *attentional* state h̃_{t-1} (`feed`), not the previous "
            "hidden state h_{t-1}.",
            lambda i: _luong_step(i, feed="h_prev"),
        ),
        Mistake(
            "The GRU's input is [e(y_{t-1}); h̃_{t-1}] -- the embedding first.",
            lambda i: _luong_step(i, input_order="fy"),
        ),
        Mistake("tanh is missing: h̃_t = tanh(W_c [c_t; h_t]).", lambda i: _luong_step(i, tanh=False)),
    ],
    error_hints=[
        ErrorHint(
            r"queries has shape \(\d+, \d+\), expected",
            "`attention.attend` wants queries (batch_size, num_queries, query_size): give h_t a query "
            "axis, `h_t[:, None, :]`.",
        ),
        ErrorHint(
            r"input has inconsistent input_size|Expected hidden size|size mismatch|mat1 and mat2",
            "Check the sizes: the GRU takes [e(y_{t-1}); h̃_{t-1}] (embed_size + num_hiddens), and W_c "
            "takes [c_t; h_t] (enc_size + num_hiddens) with the context's query axis squeezed "
            "(`context[:, 0]`).",
        ),
    ],
    package=["attn_course.decoders.LuongDecoder"],
)


def _local_case(spec: dict[str, Any]) -> Case:
    gen, dtype = _generator(spec), _dtype(spec)
    b, q, s = (_size(spec, n) for n in ("batch_size", "num_queries", "num_keys"))
    window = _size(spec, "window")
    lens = _lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    # p_t = S_i * sigmoid(...): a real position in [0, S_i), as the local-p decoder predicts it.
    centres = lens[:, None].to(dtype) * torch.sigmoid(_randn((b, q), gen, dtype, 2.0))
    inputs = {
        "scores": _randn((b, q, s), gen, dtype, 2.0),
        "centres": centres,
        "window": window,
        "valid_lens": lens,
    }
    label = (
        f"scores {(b, q, s)}, centres {[[round(c, 2) for c in row] for row in centres.tolist()]}, window "
        f"D = {window}, valid_lens {lens.tolist()}, dtype {spec['dtype']}"
    )
    return Case(label, inputs, spec, "the weights")


def _local_weights(
    inputs: dict[str, Any],
    *,
    sigma: str = "half",
    cut: str = "both",
    gaussian: bool = True,
    renormalise: bool = False,
    two: bool = True,
    rounded: bool = False,
) -> torch.Tensor:
    """Local-p weights as LuongDecoder.align computes them, and known-wrong variants."""
    scores, centres, window, lens = (
        inputs["scores"],
        inputs["centres"],
        inputs["window"],
        inputs["valid_lens"],
    )
    if rounded:
        centres = centres.round()
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None] - centres[..., None]  # s - p_t: (batch, queries, keys)
    padding = positions[None, None] >= lens[:, None, None]
    outside = {
        "both": (distance.abs() > window) | padding,
        "padding": padding.expand_as(distance),
        "window": distance.abs() > window,
    }[cut]
    weights = F.softmax(scores.masked_fill(outside, torch.finfo(scores.dtype).min), -1).masked_fill(
        outside, 0.0
    )
    if gaussian:
        s = window / 2 if sigma == "half" else window
        weights = weights * torch.exp(-distance.square() / ((2 if two else 1) * s**2))
    if renormalise:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights


LOCAL_P_WEIGHTS = Exercise(
    "ch5.q3",
    "local_p_weights",
    "Local-p attention: a window and a Gaussian around p_t",
    solution='''
def local_p_weights(scores, centres, window, valid_lens):
    """Luong's local-p weights (Luong et al. 2015, sec. 3.2, eq. 10):
    a_t(s) = align(h_t, h̄_s) * exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2,
    where align is the softmax of the scores inside the window [p_t - D, p_t + D], cut to the real positions,
    and 0 outside. As in the paper, the result is not renormalised.

    scores: (batch_size, num_queries, num_keys); centres: p_t (batch_size, num_queries), real-valued;
    window: D, an int; valid_lens: (batch_size,).
    Returns: weights (batch_size, num_queries, num_keys).
    """
    positions = torch.arange(scores.shape[-1], device=scores.device, dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]             # s - p_t
    outside = (distance.abs() > window) | (positions >= valid_lens[:, None, None])
    filled = scores.masked_fill(outside, torch.finfo(scores.dtype).min)
    align = F.softmax(filled, dim=-1).masked_fill(outside, 0.0)
    sigma = window / 2
    return align * torch.exp(-distance**2 / (2 * sigma**2))
''',
    hint="Compute the distance s - p_t for every position (broadcast `positions[None, None, :]` against "
    "`centres[:, :, None]`). Mask the positions outside the window (|s - p_t| > D) *and* the padding (s >= "
    "valid_len), softmax the remaining scores, zero the masked weights, then multiply by the Gaussian "
    "exp(-(s - p_t)^2 / (2 sigma^2)) with sigma = D / 2. Keep p_t real-valued and do not renormalise.",
    covers="windows of 1, 2 and 3; windows that reach past the start and the end of the sentence; padded and "
    "length-1 sources; float32 and float64",
    defaults={
        "seed": 0,
        "batch_size": 2,
        "num_queries": 3,
        "num_keys": 9,
        "window": 2,
        "dtype": "float32",
        "valid_lens": "random",
    },
    specs=[
        {"seed": 121, "valid_lens": [9, 6]},
        {"seed": 122, "window": 1, "valid_lens": [4, 9]},
        {
            "seed": 123,
            "batch_size": 3,
            "num_queries": 2,
            "num_keys": 12,
            "window": 3,
            "valid_lens": [12, 7, 10],
            "dtype": "float64",
        },
        {"seed": 124, "num_keys": 1, "window": 1, "valid_lens": [1, 1]},
    ],
    build=_local_case,
    call=lambda answer, i: answer(i["scores"], i["centres"], i["window"], i["valid_lens"]),
    reference=_local_weights,
    mistakes=[
        Mistake(
            "sigma is D / 2 (Luong et al. set it empirically); you used sigma = D, a Gaussian twice as wide.",
            lambda i: _local_weights(i, sigma="full"),
        ),
        Mistake(
            "The Gaussian's exponent is -(s - p_t)^2 / (2 sigma^2): the factor 2 is missing.",
            lambda i: _local_weights(i, two=False),
        ),
        Mistake(
            "There is no window: positions further than D from p_t must get weight 0 (mask them before the "
            "softmax), the Gaussian only favours the centre within it.",
            lambda i: _local_weights(i, cut="padding"),
        ),
        Mistake(
            "The window reaches past the end of the sentence: positions at or beyond valid_len are padding "
            "and must be masked too.",
            lambda i: _local_weights(i, cut="window"),
        ),
        Mistake(
            "The Gaussian is missing: that is local-m's window alone; local-p multiplies the windowed "
            "softmax by exp(-(s - p_t)^2 / (2 sigma^2)).",
            lambda i: _local_weights(i, gaussian=False),
        ),
        Mistake(
            "You renormalised after the Gaussian; Luong et al. do not, so the weights sum to at most 1.",
            lambda i: _local_weights(i, renormalise=True),
        ),
        Mistake(
            "p_t was rounded to an integer: it is real-valued, and both the window and the Gaussian use "
            "it as it is.",
            lambda i: _local_weights(i, rounded=True),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"must match the size of tensor",
            "Broadcast the distances: positions (1, 1, num_keys) minus centres (batch_size, num_queries, "
            "1) gives (batch_size, num_queries, num_keys).",
        ),
    ],
    package=["attn_course.decoders.LuongDecoder"],
)


# ----------------------------------------------------------------------------------------------------
# Chapter 6: decoding


class ScriptedState(NamedTuple):
    """The decoding state of a `ScriptedModel`: each sentence's source offsets and the step count."""

    source: torch.Tensor
    step: int

    def index_select(self, index: torch.Tensor) -> ScriptedState:
        return ScriptedState(self.source.index_select(0, index), self.step)


class ScriptedDecoder(nn.Module):
    """A decoder whose logits are a fixed function of the source, the previous token and the step:
    logits_t = transitions[y_{t-1}] + source offsets + steps[t]. Same interface as the course's decoders."""

    has_attention = False

    def __init__(self, transitions: torch.Tensor, steps: torch.Tensor):
        super().__init__()
        self.transitions = nn.Parameter(transitions, requires_grad=False)
        self.steps = nn.Parameter(steps, requires_grad=False)
        self.vocab_size = transitions.shape[0]

    def init_state(self, enc: torch.Tensor) -> ScriptedState:
        return ScriptedState(enc, 0)

    def step(self, y_prev: torch.Tensor, state: ScriptedState) -> tuple[torch.Tensor, ScriptedState, None]:
        t = min(state.step, self.steps.shape[0] - 1)
        logits = self.transitions[y_prev] + state.source + self.steps[t]
        return logits, ScriptedState(state.source, state.step + 1), None


class ScriptedModel(nn.Module):
    """A stand-in for `attn_course.seq2seq.Seq2Seq` with the same decoding interface -- `encode(src,
    src_valid_lens)`, `decoder.init_state(enc)`, `decoder.step(y_prev, state)` -- whose choices are fixed
    by three tables, so that a decoding exercise can be checked exactly and quickly."""

    def __init__(self, source_logits: torch.Tensor, transitions: torch.Tensor, steps: torch.Tensor):
        super().__init__()
        self.source_logits = nn.Parameter(source_logits, requires_grad=False)
        self.decoder = ScriptedDecoder(transitions, steps)

    def encode(self, src: torch.Tensor, src_valid_lens: torch.Tensor) -> torch.Tensor:
        real = (torch.arange(src.shape[1])[None, :] < src_valid_lens[:, None]).to(self.source_logits.dtype)
        return (self.source_logits[src] * real[..., None]).sum(1) / src_valid_lens[:, None]


def _greedy_case(spec: dict[str, Any]) -> Case:
    gen = _generator(spec)
    b, s = _size(spec, "batch_size"), _size(spec, "num_keys")
    v, max_len = _size(spec, "vocab_size", 5), _size(spec, "max_len")
    bos, eos = 1, 2
    lens = _lengths(spec["valid_lens"], (b,), s, gen, "valid_lens", low=1)
    src = torch.randint(3, v, (b, s), generator=gen).masked_fill(torch.arange(s)[None, :] >= lens[:, None], 0)
    steps = torch.zeros(max_len + 2, v)
    steps[:, eos] = (torch.arange(max_len + 2) - max_len / 3) * spec["eos_ramp"]  # <eos> likelier as t grows
    steps[:, [0, bos]] = -1e4  # <pad> and <bos> are never generated
    inputs = {
        "source_logits": _randn((v, v), gen, torch.float32, 1.5),
        "transitions": _randn((v, v), gen, torch.float32, 2.0),
        "steps": steps,
        "src": src,
        "src_valid_lens": lens,
        "bos": bos,
        "eos": eos,
        "max_len": max_len,
    }
    label = (
        f"a batch of {b} sources of lengths {lens.tolist()}, vocabulary {v}, <bos> 1, <eos> 2, "
        f"max_len {max_len}"
    )
    return Case(label, inputs, spec, "the token lists")


def _scripted_model(inputs: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel(inputs["source_logits"], inputs["transitions"], inputs["steps"]).eval()


def _greedy_call(fn: Callable, inputs: dict[str, Any]) -> Any:
    return fn(
        _scripted_model(inputs),
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
    )


def _greedy_reference(inputs: dict[str, Any]) -> list[list[int]]:
    hypotheses = _resolve("attn_course.decoding.greedy_decode")(
        _scripted_model(inputs),
        inputs["src"],
        inputs["src_valid_lens"],
        bos=inputs["bos"],
        eos=inputs["eos"],
        max_len=inputs["max_len"],
    )
    return [h.tokens for h in hypotheses]


def _rollout(inputs: dict[str, Any], steps: int, feed_bos: bool = False) -> list[list[int]]:
    """Greedy choices for `steps` steps, never stopping (and feeding <bos> each step if feed_bos)."""
    model = _scripted_model(inputs)
    with torch.no_grad():
        state = model.decoder.init_state(model.encode(inputs["src"], inputs["src_valid_lens"]))
        y = torch.full((inputs["src"].shape[0],), inputs["bos"])
        tokens = []
        for _ in range(steps):
            logits, state, _ = model.decoder.step(y, state)
            choice = logits.argmax(-1)
            tokens.append(choice)
            y = torch.full_like(choice, inputs["bos"]) if feed_bos else choice
    return torch.stack(tokens, 1).tolist() if tokens else [[] for _ in range(inputs["src"].shape[0])]


def _cut(row: list[int], eos: int, keep_eos: bool = False) -> list[int]:
    return row[: row.index(eos) + keep_eos] if eos in row else row


def _greedy_variant(kind: str):
    def variant(inputs: dict[str, Any]) -> list[list[int]]:
        eos, max_len = inputs["eos"], inputs["max_len"]
        if kind == "eos_kept":
            return [_cut(r, eos, keep_eos=True) for r in _rollout(inputs, max_len)]
        if kind == "no_stop":
            return _rollout(inputs, max_len)
        if kind == "feed_bos":
            return [_cut(r, eos) for r in _rollout(inputs, max_len, feed_bos=True)]
        if kind in ("max_len_minus", "max_len_plus"):
            return [_cut(r, eos) for r in _rollout(inputs, max_len + (1 if kind == "max_len_plus" else -1))]
        rows = _rollout(inputs, max_len)
        ends = [r.index(eos) + 1 if eos in r else max_len for r in rows]
        if kind == "first_stops_all":
            stop = min(ends)
            return [_cut(r[:stop], eos) for r in rows]
        stop = max(ends)  # "all_stop": keeps going after a sentence's <eos>
        return [[token for token in r[:stop] if token != eos] for r in rows]

    return variant


GREEDY_DECODE = Exercise(
    "ch6.q1",
    "greedy_decode",
    "Batched greedy decoding that stops each sentence at its <eos>",
    solution='''
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    """Greedy search for a batch: at every step each unfinished sentence takes its most likely token.

    model: has `encode(src, src_valid_lens)`, `decoder.init_state(enc)` and `decoder.step(y_prev, state)
    -> (logits (batch_size, vocab_size), state, weights)`; src: (batch_size, S);
    src_valid_lens: (batch_size,).
    max_len: the most tokens per sentence, <eos> included.
    Returns: one list of token ids per sentence, without <bos> and <eos>; a sentence stops at its own <eos>.
    """
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos, dtype=torch.long)
    tokens = [[] for _ in range(src.shape[0])]
    finished = [False] * src.shape[0]
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(dim=-1)                          # feed back the model's own choice
        for i, token in enumerate(y.tolist()):
            if not finished[i]:
                finished[i] = token == eos
                if not finished[i]:
                    tokens[i].append(token)
        if all(finished):
            break
    return tokens
''',
    hint="Start from `state = model.decoder.init_state(model.encode(src, src_valid_lens))` and y = <bos> for "
    "every sentence. At each of at most max_len steps: `logits, state, _ = model.decoder.step(y, state)`, "
    "y = the argmax over the vocabulary (fed back at the next step). Keep a `finished` flag per sentence: a "
    "sentence that produced <eos> takes no more tokens (and <eos> itself is not in its list). Stop when all "
    "are finished.",
    covers="sentences that end at different steps, sentences cut by max_len, max_len 1, a batch of one",
    defaults={
        "seed": 0,
        "batch_size": 4,
        "num_keys": 5,
        "vocab_size": 8,
        "max_len": 8,
        "eos_ramp": 1.0,
        "valid_lens": "random",
    },
    specs=[
        {"seed": 133},
        {"seed": 137, "batch_size": 5, "max_len": 10},
        {"seed": 138},
        {"seed": 131, "batch_size": 3, "max_len": 1},
        {"seed": 134, "batch_size": 1, "max_len": 6},
    ],
    build=_greedy_case,
    call=_greedy_call,
    reference=_greedy_reference,
    mistakes=[
        Mistake(
            "The lists end with <eos>: leave it out (the token lists are the words, without <bos> and "
            "<eos>).",
            _greedy_variant("eos_kept"),
        ),
        Mistake(
            "The sentences never stop: each must end at its own <eos>, and take no tokens after it.",
            _greedy_variant("no_stop"),
        ),
        Mistake(
            "Tokens after a sentence's <eos> were kept: once a sentence has produced <eos> it is finished, "
            "even while the others go on.",
            _greedy_variant("all_stop"),
        ),
        Mistake(
            "The whole batch stopped when its first sentence produced <eos>; each sentence must go on until "
            "its own <eos> (or max_len).",
            _greedy_variant("first_stops_all"),
        ),
        Mistake(
            "You fed <bos> at every step; feed back the token the model just chose: y_t becomes the input "
            "of step t + 1.",
            _greedy_variant("feed_bos"),
        ),
        Mistake(
            "Off by one: a sentence without <eos> gets max_len tokens (max_len counts <eos> too); yours got "
            "one fewer.",
            _greedy_variant("max_len_minus"),
        ),
        Mistake(
            "Off by one: a sentence without <eos> gets max_len tokens; yours got one more.",
            _greedy_variant("max_len_plus"),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"argument 'index'|index out of range in self|Expected tensor for argument",
            "Feed the decoder a tensor of token ids of shape (batch_size,), dtype long: "
            "`torch.full((batch_size,), bos, dtype=torch.long)` at the start, then the argmax.",
        ),
    ],
    package=["attn_course.decoding.greedy_decode", "attn_course.decoding.beam_search"],
)


def _beam_case(spec: dict[str, Any]) -> Case:
    gen = _generator(spec)
    b, k, v = _size(spec, "batch_size"), _size(spec, "beam_size"), _size(spec, "vocab_size")
    if k > v:
        raise ValueError(f"beam_size must be <= vocab_size = {v}, got {k}")
    log_probs = F.log_softmax(_randn((b, k, v), gen, torch.float64, 2.0), -1)
    if spec["first_step"]:  # only the first beam is alive: all beams start equal, expand one
        scores = torch.full((b, k), -math.inf, dtype=torch.float64)
        scores[:, 0] = 0.0
    else:
        scores = -torch.rand(b, k, generator=gen, dtype=torch.float64) * 5
    label = (
        f"beam_scores {(b, k)}{' (first step: only beam 0 alive)' if spec['first_step'] else ''}, "
        f"log_probs {(b, k, v)}, beam_size {k}"
    )
    return Case(
        label,
        {"beam_scores": scores, "log_probs": log_probs, "beam_size": k},
        spec,
        ("the scores", "the beams", "the tokens"),
    )


def _beam_step(
    inputs: dict[str, Any],
    *,
    add: bool = True,
    per_beam: bool = False,
    swap: bool = False,
    divide_by_beams: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One beam-search step as attn_course.decoding's beam search takes it, and known-wrong variants."""
    scores, log_probs, k = inputs["beam_scores"], inputs["log_probs"], inputs["beam_size"]
    b, _, v = log_probs.shape
    candidates = scores[:, :, None] + log_probs if add else log_probs
    if per_beam:
        best, tokens = candidates.max(-1)
        return best, torch.arange(k).expand(b, k).clone(), tokens
    top, index = candidates.reshape(b, -1).topk(k, dim=-1)
    if swap:
        return top, index % v, index // v
    return top, index // (k if divide_by_beams else v), index % (k if divide_by_beams else v)


BEAM_STEP = Exercise(
    "ch6.q2",
    "beam_step",
    "One step of beam search: the best continuations over all beams",
    solution='''
def beam_step(beam_scores, log_probs, beam_size):
    """Extend every beam by every token and keep the beam_size best continuations of each sentence.

    beam_scores: (batch_size, beam_size), log P of each live prefix (-inf for an unused beam);
    log_probs: (batch_size, beam_size, vocab_size), log p(next token | prefix) for each beam.
    Returns: the new scores (batch_size, beam_size), best first; for each, the beam it extends and the token
    it adds, both (batch_size, beam_size) long.
    """
    batch_size, _, vocab_size = log_probs.shape
    candidates = (beam_scores[:, :, None] + log_probs).reshape(batch_size, -1)  # (batch, beam_size * vocab)
    scores, index = candidates.topk(beam_size, dim=-1)
    return scores, index // vocab_size, index % vocab_size
''',
    hint="A continuation's score is its prefix's score plus the token's log-probability: "
    "`beam_scores[:, :, None] + log_probs`. Flatten the beams and tokens into one axis of beam_size * "
    "vocab_size candidates per sentence and take `topk(beam_size)`; candidate c extends beam `c // "
    "vocab_size` "
    "with token `c % vocab_size`.",
    covers="the first step (one live beam), later steps, beam size 1, beam_size * vocab_size candidates",
    defaults={"seed": 0, "batch_size": 2, "beam_size": 3, "vocab_size": 7, "first_step": False},
    specs=[
        {"seed": 141},
        {"seed": 142, "vocab_size": 5, "first_step": True},
        {"seed": 143, "beam_size": 1, "vocab_size": 6},
        {"seed": 144, "batch_size": 1, "beam_size": 4, "vocab_size": 4},
    ],
    build=_beam_case,
    call=lambda answer, i: answer(i["beam_scores"], i["log_probs"], i["beam_size"]),
    reference=_beam_step,
    mistakes=[
        Mistake(
            "The prefixes' scores are not added: a continuation's score is log P(prefix) + log p(token | "
            "prefix), `beam_scores[:, :, None] + log_probs`.",
            lambda i: _beam_step(i, add=False),
        ),
        Mistake(
            "You kept each beam's best token; beam search keeps the beam_size best of *all* beam_size * "
            "vocab_size continuations, so one good beam can fill several places.",
            lambda i: _beam_step(i, per_beam=True),
        ),
        Mistake(
            "Beam and token are swapped: candidate c of the flattened (beam, token) grid extends beam "
            "`c // vocab_size` with token `c % vocab_size`.",
            lambda i: _beam_step(i, swap=True),
        ),
        Mistake(
            "Divide by vocab_size, not beam_size, to recover the beam: the flattened index is beam * "
            "vocab_size + token.",
            lambda i: _beam_step(i, divide_by_beams=True),
        ),
    ],
    error_hints=[
        ErrorHint(
            r"selected index k out of range",
            "topk needs all beam_size * vocab_size candidates of a sentence in one axis: flatten with "
            "`.reshape(batch_size, -1)` first.",
        ),
    ],
)


# ----------------------------------------------------------------------------------------------------
# Registry

#: Names every exercise cell of a chapter may use: the grader runs exactly this before the learner's cells.
PREAMBLES: dict[int, str] = {
    1: "import math  # noqa: F401\n\nimport torch  # noqa: F401\n"
    "from torch.nn import functional as F  # noqa: F401\n",
    2: "import math  # noqa: F401\n\nimport torch  # noqa: F401\nfrom torch import nn  # noqa: F401\n"
    "from torch.nn import functional as F  # noqa: F401\n\n"
    "from attn_course.masking import masked_softmax  # noqa: F401\n",
    3: "import torch  # noqa: F401\nfrom torch.nn import functional as F  # noqa: F401\n",
    4: "import math  # noqa: F401\n\nimport torch  # noqa: F401\n",
    5: "import math  # noqa: F401\n\nimport torch  # noqa: F401\n"
    "from torch.nn import functional as F  # noqa: F401\n\n"
    "from attn_course.masking import masked_softmax  # noqa: F401\n",
    6: "import math  # noqa: F401\n\nimport torch  # noqa: F401\n"
    "from torch.nn import functional as F  # noqa: F401\n",
}

_CHAPTERS: dict[int, tuple[Exercise, ...]] = {
    1: (SEQUENCE_MASK, MASKED_SOFTMAX),
    2: (SCALED_DOT_PRODUCT, ADDITIVE_ATTENTION, GENERAL_SCORES, CONCAT_SCORES),
    3: (MASKED_CROSS_ENTROPY, FINAL_STATE),
    4: (BAHDANAU_DECODE, ALIGNMENT_ERROR_RATE),
    5: (LOCATION_WEIGHTS, LUONG_STEP, LOCAL_P_WEIGHTS),
    6: (GREEDY_DECODE, BEAM_STEP),
}

#: Every exercise by key ("ch1.q2"), in course order.
EXERCISES: dict[str, Exercise] = {ex.key: ex for chapter in _CHAPTERS.values() for ex in chapter}


def chapter(number: int) -> tuple[Exercise, ...]:
    """The exercises of a chapter, in order: ``q1, q2 = checks.chapter(1)``."""
    if number not in _CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(_CHAPTERS)}, got {number!r}")
    return _CHAPTERS[number]


def chapters() -> tuple[int, ...]:
    """The chapter numbers that have exercises."""
    return tuple(_CHAPTERS)


__all__ = [
    "EXERCISES",
    "PREAMBLES",
    "Case",
    "CheckResult",
    "ErrorHint",
    "Exercise",
    "Mistake",
    "chapter",
    "chapters",
    "compare",
    "sanitize",
    "summarize_exception",
]
