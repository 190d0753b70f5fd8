"""Find-the-bug drills: a function with one of the course's named mistakes planted in it, what it gave on one
of the check's cases, and four diagnoses to choose from.

    import attn_course_exercises as checks
    from attn_course_exercises.drills import drill
    d = drill(checks.chapter(1))     # or drill(1); the cell's last line shows it
    d.answer(2)                      # the text form: the number of the diagnosis you pick

A drill is a named mistake of one of the chapter's exercises whose wrong code (`Mistake.code`) reads as a
learner's cell: the function under the exercise's name, with the course's helpers it calls written out above
it (a helper that is itself a named mistake, or that takes switches, disqualifies the drill), every other name
from the chapter's preamble. The code shown is the code run. The diagnoses are the mistake's hint and three
other mistakes' hints of the same exercise (of the chapter where it has fewer), shuffled; after the pick,
the learner sees whether it was right and what the exercise's check says about the code. Drills are drawn
from the registry, so every chapter has them; `drill(chapter)` picks one (seeded), `drill(chapter, k)` the
k-th. In graded work (exercises from `checks.chapter(N, graded=True)`) a drill shows only a note.

A drill displays as text/plain, a static text/html fallback (the answer behind a <details> click: what the
book shows) and, in a live kernel, an ipywidgets view. Everything runs in the learner's kernel; nothing is
sent anywhere.
"""

from __future__ import annotations

import ast
import builtins
import html
import inspect
import random
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from attn_course_exercises import EXERCISES, PREAMBLES, chapters
from attn_course_exercises import chapter as chapter_exercises
from attn_course_exercises.bug_hunt import BugHunt
from attn_course_exercises.core import CheckResult, Exercise, Mistake, compare, sanitize
from attn_course_exercises.parsons import (
    WIDGET_VIEW,
    _copy,
    _in_kernel,
    _inline,
    _Off,
    _parsed,
    strip_comments,
)

#: How many diagnoses a drill offers (the right one among them).
OPTIONS = 4


@dataclass(frozen=True)
class Planted:
    """A drill's mistake: the exercise, the named mistake, and `source`, the code shown and run (the course's
    helpers it calls first, then the function or class under the exercise's name)."""

    exercise: Exercise
    mistake: Mistake
    source: str


# ----------------------------------------------------------------------------------------------------
# Which mistakes make a drill


def _free_names(source: str) -> set[str]:
    """The names `source` reads but never binds (nor are they builtins)."""
    loaded, bound = set(), set(dir(builtins))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


def _raises(source: str) -> bool:
    """Whether the code raises on purpose (a mistake's way of saying it cannot be made on some inputs)."""
    return any(isinstance(node, ast.Raise) for node in ast.walk(ast.parse(source)))


def _has_switches(obj: Any) -> bool:
    """Whether a helper takes switches (keyword-only or True/False arguments): a helper that makes many
    mistakes at once, which a drill cannot show as one."""
    functions = [obj] if inspect.isfunction(obj) else [v for v in vars(obj).values() if inspect.isfunction(v)]
    for function in functions:
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind == parameter.KEYWORD_ONLY or isinstance(parameter.default, bool):
                return True
    return False


def _without_docstrings(source: str) -> str:
    """`source` without the docstrings of its functions and classes (a helper's docstring speaks of the
    checks, not of the code)."""
    lines = source.splitlines()
    doomed: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str) and len(node.body) > 1:
                    doomed.update(range(first.lineno - 1, first.end_lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in doomed) + "\n"


@cache
def _mistake_objects() -> frozenset[int]:
    """The ids of every named mistake's wrong code: a helper that is one is itself a mistake."""
    return frozenset(id(m.wrong) for ex in EXERCISES.values() for m in ex.mistakes if m.wrong is not None)


def _helpers(source: str, scope: dict[str, Any], given: set[str], depth: int = 0) -> list[str] | None:
    """The sources of the course's helpers `source` needs, dependencies first (found in `scope`, the wrong
    code's module), or None if a name cannot be given: unknown, not the course's, a named mistake, a helper
    with switches, or a helper that raises on purpose."""
    out: list[str] = []
    for name in sorted(_free_names(source) - given):
        helper = scope.get(name)
        plain = inspect.isfunction(helper) or inspect.isclass(helper)
        if (
            depth > 4
            or not plain
            or not getattr(helper, "__module__", "").startswith("attn_course_exercises")
        ):
            return None
        if id(helper) in _mistake_objects() or _has_switches(helper):
            return None
        try:
            text = _without_docstrings(strip_comments(textwrap.dedent(inspect.getsource(helper))))
        except (OSError, TypeError):
            return None
        below = _helpers(text, scope, given | {name}, depth + 1)
        if below is None or _raises(text):
            return None
        given = given | {name}
        out += [h for h in below if h not in out] + [text]
    return out


def _scope(wrong: Any) -> dict[str, Any]:
    """The names the wrong code's module (or, for code compiled from the model answer, its namespace) has."""
    found = getattr(wrong, "__globals__", None)
    return found if found is not None else vars(sys.modules[wrong.__module__])


def _preamble_names(chapter: int) -> set[str]:
    namespace: dict[str, Any] = {}
    exec(PREAMBLES[chapter], namespace)
    return set(namespace)


def _planted_source(exercise: Exercise, mistake: Mistake, given: set[str]) -> str | None:
    """The drill's code for `mistake` (see `Planted`), or None if it does not read as a learner's cell."""
    code = mistake.code
    if _parsed(code) is None or _raises(code):
        return None
    name = getattr(mistake.wrong, "__name__", "")
    code = re.sub(rf"^(def|class) {re.escape(name)}\b", rf"\1 {exercise.name}", code, count=1, flags=re.M)
    tree = ast.parse(code)
    top = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    if exercise.name not in top:
        return None
    helpers = _helpers(code, _scope(mistake.wrong), given | set(top))
    if helpers is None:
        return None
    return "\n\n".join([*[h.rstrip("\n") for h in helpers], code.rstrip("\n")]) + "\n"


def _exercises(chapter: Any) -> tuple[int, tuple[Exercise, ...]]:
    """(chapter number, its exercises) from a chapter number or a sequence of one chapter's exercises."""
    if isinstance(chapter, int) and not isinstance(chapter, bool):
        if chapter not in chapters():
            raise ValueError(f"chapter must be one of {list(chapters())}, got {chapter!r}")
        return chapter, chapter_exercises(chapter)
    if isinstance(chapter, Sequence) and chapter and all(isinstance(e, Exercise) for e in chapter):
        numbers = {int(e.key[2:].split(".")[0]) for e in chapter}
        if len(numbers) == 1:
            return numbers.pop(), tuple(chapter)
    raise ValueError(
        "chapter must be a chapter number or the exercises of one chapter (checks.chapter(N)), "
        f"got {chapter!r}"
    )


def planted(chapter: int | Sequence[Exercise]) -> list[Planted]:
    """The chapter's drills in course order: every named mistake of its exercises (not its bug hunts, which
    are drills already) whose wrong code reads as a learner's cell."""
    number, exercises = _exercises(chapter)
    given = _preamble_names(number)
    found = []
    for exercise in exercises:
        if isinstance(exercise, BugHunt):
            continue
        for mistake in exercise.mistakes:
            source = _planted_source(exercise, mistake, given)
            if source is not None:
                found.append(Planted(exercise, mistake, source))
    return found


def run_planted(item: Planted) -> Any:
    """The function (or class) the drill's code defines, defined as the grader runs a learner's cell: after
    the chapter's preamble."""
    namespace: dict[str, Any] = {}
    exec(PREAMBLES[int(item.exercise.key[2:].split(".")[0])], namespace)
    exec(compile(item.source, f"<drill {item.exercise.key}>", "exec"), namespace)
    return namespace[item.exercise.name]


# ----------------------------------------------------------------------------------------------------
# What the planted code gave


def _values(tensor: torch.Tensor, limit: int = 10) -> str:
    """A 0-d or 1-d tensor's values, briefly: [0.25, 0.75, 0, ...]."""
    if tensor.dim() == 0:
        return _number(tensor.item())
    items = [_number(x) for x in tensor[:limit].tolist()]
    return "[" + ", ".join(items) + (", ...]" if tensor.numel() > limit else "]")


def _number(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _brief(value: Any) -> str:
    """A value as a learner's cell would show it, cut short."""
    if isinstance(value, torch.Tensor):
        kind = str(value.dtype).replace("torch.", "")
        return f"a tensor of shape {tuple(value.shape)}, {kind}" + (
            f": {_values(value)}" if value.dim() < 2 else ""
        )
    text = _number(value) if isinstance(value, float) else repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _row(expected: torch.Tensor, got: torch.Tensor) -> tuple[int, ...]:
    """Where two tensors of one shape first differ: the index of that row (all axes but the last)."""
    e, g = expected.double(), got.double()
    close = torch.isclose(g, e, rtol=1e-3, atol=1e-5, equal_nan=True)
    wrong = (~close).flatten().nonzero()
    flat = int(wrong[0]) if wrong.numel() else 0
    index = []
    for size in reversed(expected.shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))[:-1]


def _shown(name: str, expected: Any, got: Any) -> str:
    """What differs, as returned-against-expected lines (a tensor's first differing row)."""
    same_shape = (
        isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor) and got.shape == expected.shape
    )
    if same_shape and expected.dtype == got.dtype and expected.dim() >= 1:
        row = _row(expected, got)
        where = f", row {row if len(row) > 1 else row[0]}" if row else ""
        return f"{name}{where}:\n  returned {_values(got[row])}\n  expected {_values(expected[row])}"
    return f"{name}:\n  returned {_brief(got)}\n  expected {_brief(expected)}"


def _difference(expected: Any, got: Any, names: str | tuple[str, ...]) -> str:
    """The first output that differs, shown briefly."""
    several = isinstance(names, tuple) and all(isinstance(v, (tuple, list)) for v in (expected, got))
    if several and len(got) == len(expected):
        for name, e, g in zip(names, expected, got, strict=False):
            if compare(e, g, name) is not None:
                return _shown(name, e, g)
    return _shown(names if isinstance(names, str) else "the result", expected, got)


def first_failure(exercise: Exercise, answer: Any) -> str | None:
    """What `answer` gave on the first of the exercise's cases where it is wrong, against what was expected,
    as a few lines of text; None if it is right on every case."""
    for case in exercise.cases():
        expected = exercise.reference(_copy(case.inputs))
        inputs = _copy(case.inputs)
        try:
            got = sanitize(exercise.call(answer, inputs))
        except Exception as exc:  # the planted code raised: that is what the learner would see
            return f"On the case {case.label}, it raised {type(exc).__name__}: {exc}"
        if compare(expected, got, case.names) is not None:
            shown = textwrap.indent(_difference(expected, got, case.names), "  ")
            return f"On the case {case.label}:\n{shown}"
        for name, before in case.inputs.items():
            after = inputs.get(name)
            if isinstance(before, torch.Tensor) and not (
                isinstance(after, torch.Tensor) and after.equal(before)
            ):
                return f"On the case {case.label}, the result is right but `{name}` was changed in place."
    return None


# ----------------------------------------------------------------------------------------------------
# The drill


@dataclass(frozen=True)
class Verdict:
    """The verdict on a diagnosis: `correct`, and the text (and HTML) saying so, with the check's message."""

    correct: bool
    text: str
    html: str

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": self.html}

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _options(item: Planted, exercises: Sequence[Exercise], rng: random.Random) -> tuple[tuple[str, ...], int]:
    """OPTIONS distinct hints, shuffled, and the index of the planted mistake's: the others from the same
    exercise's mistakes, then the chapter's."""
    right = item.mistake.hint
    own = [m.hint for m in item.exercise.mistakes]
    rest = [m.hint for e in exercises if e is not item.exercise for m in e.mistakes]
    others = list(dict.fromkeys(h for h in own if h != right))
    if len(others) < OPTIONS - 1:
        others += [h for h in dict.fromkeys(rest) if h != right and h not in others]
    options = [right, *rng.sample(others, min(OPTIONS - 1, len(others)))]
    rng.shuffle(options)
    return tuple(options), options.index(right)


class Drill:
    """One find-the-bug drill: `planted` (the exercise, the mistake and the code), `failure` (what the code
    gave on the check's first case it fails), `options` (the diagnoses, numbered from 0), `right` (the index
    of the planted mistake's), `check` (the exercise's verdict on the code); `answer(choice)` judges a pick.

    chapter: the chapter number; k: which of the chapter's `count` drills this is.
    """

    def __init__(self, chapter: int, k: int, count: int, item: Planted, exercises: Sequence[Exercise]):
        self.chapter, self.k, self.count, self.planted = chapter, k, count, item
        self.options, self.right = _options(item, exercises, random.Random(f"drill {chapter} {k}"))
        answer = run_planted(item)
        failure = first_failure(item.exercise, answer)
        if failure is None:
            raise ValueError(
                f"drill {k} of chapter {chapter} ({item.exercise.key}) passes every case: no drill"
            )
        self.failure = failure
        self.check: CheckResult = item.exercise.evaluate(answer)

    @property
    def name(self) -> str:
        return self.planted.exercise.name

    def answer(self, choice: int) -> Verdict:
        """The verdict on diagnosis `choice` (its number, from 0), with the check's message for the code."""
        if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < len(self.options):
            raise ValueError(
                f"choice must be a diagnosis' number in 0..{len(self.options) - 1}, got {choice!r}"
            )
        correct = choice == self.right
        head = "Right" if correct else f"Not quite: you chose ({choice})"
        text = (
            f"{head}. The planted mistake is ({self.right}): {self.options[self.right]}\n\n"
            f"What the check says about this code ({self.planted.exercise.key}):\n{self.check}"
        )
        colour = "#1a7f37" if correct else "#b35900"
        body = f'<p style="color:{colour}"><strong>{html.escape(head)}.</strong></p>{self._answer_html()}'
        return Verdict(correct, text, body)

    def _answer_html(self) -> str:
        return (
            f"<p><strong>The planted mistake is ({self.right}):</strong> "
            f"{_inline(self.options[self.right])}</p>"
            f"<p>What the check says about this code:</p>{self.check.rich().html}"
        )

    def _intro(self) -> str:
        ex = self.planted.exercise
        return (
            f"Find the bug (`drill({self.chapter}, {self.k})`, one of chapter {self.chapter}'s {self.count} "
            f"drills): this `{self.name}` ({ex.key}) has one known mistake planted in it. Below are the code "
            "and what it gave on one of the check's cases. Which mistake is it?"
        )

    def plain(self) -> str:
        """The drill as plain text: the code, what it gave, the numbered diagnoses, how to answer."""
        options = [f"  ({i}) {text}" for i, text in enumerate(self.options)]
        how = (
            "To answer in text, call the drill's answer(k), k the number of your diagnosis, e.g. "
            f"d.answer(2); drill({self.chapter}, k) shows another."
        )
        return "\n".join([self._intro(), "", self.planted.source, self.failure, "", *options, how])

    def fallback_html(self) -> str:
        """The static view: the code, what it gave, the diagnoses, and the answer inside <details>."""
        items = "".join(f"<li>{_inline(text)}</li>" for text in self.options)
        return (
            f'<div class="attn-drill" data-key="{self.planted.exercise.key}"><p>{_inline(self._intro())}</p>'
            f"<pre>{html.escape(self.planted.source)}</pre>"
            f"<pre style='margin-top: 10px'>{html.escape(self.failure)}</pre>"
            f'<ol start="0">{items}</ol><p>In a live notebook, pick one and press Check; or call the '
            "drill's <code>answer(k)</code> with the number of your diagnosis.</p>"
            f"<details><summary>Show the answer</summary>{self._answer_html()}</details></div>"
        )

    def widget(self):
        """The ipywidgets view: the code, what it gave, the diagnoses to pick from, Check and the verdict."""
        import ipywidgets as widgets

        intro = widgets.HTML(
            f"{_STYLE}<p>{_inline(self._intro())}</p><pre>{html.escape(self.planted.source)}</pre>"
            f"<pre style='margin-top: 10px'>{html.escape(self.failure)}</pre>"
        )
        labels = [(f"({i}) {text.replace('`', '')}", i) for i, text in enumerate(self.options)]
        choice = widgets.RadioButtons(options=labels, index=None, layout=widgets.Layout(width="auto"))
        button = widgets.Button(description="Check", button_style="primary", icon="check")
        button.add_class("attn-drill-check")
        feedback = widgets.HTML()
        feedback.add_class("attn-drill-feedback")

        def on_check(_=None) -> None:
            if choice.value is None:
                feedback.value = "<p>Pick a diagnosis first.</p>"
                return
            feedback.value = self.answer(choice.value).html

        button.on_click(on_check)
        box = widgets.VBox([intro, choice, button, feedback])
        box.add_class("attn-drill")
        return box

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": self.plain(), "text/html": self.fallback_html()}
        if _in_kernel():
            bundle[WIDGET_VIEW] = self.widget()._repr_mimebundle_()[WIDGET_VIEW]
        return bundle

    def __repr__(self) -> str:
        return self.plain()


_STYLE = """<style>
.attn-drill .widget-radio-box label { height: auto !important; line-height: 1.4 !important;
  white-space: normal; display: flex; align-items: flex-start; padding: 3px 0; }
.attn-drill .widget-radio-box input { flex: none; order: -1; margin: 3px 6px 0 0; }
</style>"""


def _pick(chapter: int, count: int, seed: int) -> int:
    """The drill `drill(chapter)` shows: one of `count`, drawn with `seed`."""
    return random.Random(f"drill {chapter} {seed}").randrange(count)


def drill(chapter: int | Sequence[Exercise], k: int | None = None, *, seed: int = 0) -> Drill | Any:
    """A find-the-bug drill of `chapter` (its number, or its exercises: `checks.chapter(N)`): the k-th of its
    drills (from 0), or one picked by `seed` when k is None."""
    number, exercises = _exercises(chapter)
    if any(exercise.graded for exercise in exercises):
        return _Off(
            f"Find-the-bug drills are off for graded work (chapter {number}): their code is close to "
            "the model answers."
        )
    found = planted(exercises)
    if not found:
        raise ValueError(
            f"chapter {number} has no drill: none of its mistakes is written as a learner's code"
        )
    if k is None:
        k = _pick(number, len(found), seed)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(found):
        raise ValueError(f"k must be a drill's number in 0..{len(found) - 1} (chapter {number}), got {k!r}")
    return Drill(number, k, len(found), found[k], exercises)


__all__ = ["OPTIONS", "Drill", "Planted", "Verdict", "drill", "first_failure", "planted", "run_planted"]
