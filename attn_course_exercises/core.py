"""The machinery every exercise shares: verdicts and their display, cases and mistakes, judging.

`CheckResult` is a verdict (shown as HTML, Markdown or text); `Case`, `Mistake` and `ErrorHint` describe one
set of inputs, a known mistake (the wrong code that makes it, often an `edit_of` the model answer) and a
known error; `summarize_exception` reports the learner's own line, telling the learner's frames from the
library's (torch, Python and all of attn_course); `Exercise` ties them together into `cases()`,
`attempt()`, `judge()` and the learner's `check()`, `hint()` and `solution()`. What an attempt hands back
and how it differs from the reference in words is `attn_course_exercises.outputs` (`sanitize`, `compare`);
of what kind a difference no known mistake explains is, `attn_course_exercises.describe`
(`describe_difference`).
"""

from __future__ import annotations

import ast
import copy
import html
import importlib.util
import inspect
import os
import re
import sys
import sysconfig
import textwrap
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import torch

import attn_course
from attn_course.validation import check_int
from attn_course_exercises.describe import describe_difference
from attn_course_exercises.outputs import _clone, _verb, compare, sanitize

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"

_STATUS_TEXT = {PASSED: "Correct", FAILED: "Incorrect", NOT_ATTEMPTED: "Not attempted yet"}
_STATUS_COLOUR = {PASSED: "#2e7d32", FAILED: "#c62828", NOT_ATTEMPTED: "#1565c0"}


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
