"""Parsons problems: an exercise's model answer cut into lines and shuffled, with a few tempting wrong lines
from its named mistakes mixed in, for the learner to put in order.

    from attn_course_exercises.parsons import parsons
    problem = parsons(q2)          # q2 from the set-up cell, or its key "ch1.q2"; shown as a cell's last line
    problem.answer([3, 0, 5, 1])   # the text form: the numbers of the lines shown, in your order

The learner's program is the given code (the signature and docstring) followed by the lines chosen, in the
order chosen, each indented as given (Ericson et al.'s Parsons problems give the indentation too). The
exercise's own check judges it, so any correct order passes, not only the model's. A distractor is a line of
a named mistake's wrong code (`Mistake.code`) that is not in the model answer and that, in place of the model
line it most resembles, makes exactly that mistake on the check's cases; the tempting ones (closest to a
model line) are taken. A program that uses one is told which line and which mistake (its hint).

A problem displays as three things at once: text/plain, a static text/html fallback (the numbered lines,
with the answer behind a <details> click: what the book shows), and, in a live kernel, an ipywidgets view
(lines to click into your program, moved up and down or removed, and a Check button). Everything runs in
the learner's kernel; nothing is sent anywhere or kept beyond the session.
"""

from __future__ import annotations

import ast
import difflib
import html
import io
import random
import re
import textwrap
import tokenize
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attn_course_exercises import EXERCISES, PREAMBLES
from attn_course_exercises.core import FAILED, CheckResult, Exercise, Mistake, compare, sanitize

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

#: The exercises the course asks as Parsons problems, each with the method to order (of a class) or None.
PROBLEMS: dict[str, str | None] = {"ch1.q2": None, "ch2.q2": "attend", "ch4.q1": None, "ch6.q2": None}

#: How alike (difflib's ratio) a mistake's line and a model line must be for the one to tempt in place of the
#: other.
MIN_SIMILARITY = 0.5


@dataclass(frozen=True)
class Line:
    """One line to place: `text`, indented as it sits in the program (a statement written over several lines
    is one Line); for a distractor, `mistake`, the named mistake it makes, and `replaces`, the index of the
    model line it stands in for (both None for a line of the model answer)."""

    text: str
    mistake: Mistake | None = None
    replaces: int | None = None

    @property
    def distractor(self) -> bool:
        return self.mistake is not None


# ----------------------------------------------------------------------------------------------------
# Cutting a model answer into lines


def strip_comments(source: str) -> str:
    """`source` without its comments: a line that held only a comment is dropped, strings stay as written."""
    lines = source.splitlines()
    emptied = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col].rstrip()
            emptied.update([row - 1] if not lines[row - 1] else [])
    return "\n".join(line for i, line in enumerate(lines) if i not in emptied) + "\n"


def _target(tree: ast.Module, name: str, method: str | None) -> ast.FunctionDef:
    """The function whose body is ordered: the top-level `name`, or its method `method` (a class exercise)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            if method is None and isinstance(node, ast.FunctionDef):
                return node
            for item in getattr(node, "body", []) if method is not None else []:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    where = f"a method {method!r} of {name!r}" if method else f"a function {name!r}"
    raise ValueError(f"the model answer has no {where} to cut into lines")


def _statements(function: ast.FunctionDef) -> list[ast.stmt]:
    """The function's body without its docstring."""
    body = function.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return body[1:]
    return body


def _blocks(statements: Sequence[ast.stmt], lines: Sequence[str]) -> list[str]:
    """One text per line to place: a simple statement whole (all its lines), a compound one (if, for, while,
    with) its header line(s) then its body's blocks, an `else:` before the else-body's blocks."""
    out: list[str] = []
    for node in statements:
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With)):
            out.append("\n".join(lines[node.lineno - 1 : node.body[0].lineno - 1]))
            out += _blocks(node.body, lines)
            orelse = getattr(node, "orelse", [])
            is_elif = len(orelse) == 1 and lines[orelse[0].lineno - 1].lstrip().startswith("elif")
            if orelse and not is_elif:
                out.append(lines[orelse[0].lineno - 2])
            out += _blocks(orelse, lines)
        else:
            out.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    return out


def _functions(tree: ast.Module, method: str | None) -> list[ast.FunctionDef]:
    """The functions of a mistake's code whose lines may tempt: its top-level functions, or the methods
    named `method` of its classes."""
    if method is None:
        return [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    return [
        item
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef) and item.name == method
    ]


def _parsed(source: str | None) -> ast.Module | None:
    """`source` parsed, or None when there is no source or it is not a whole module (a lambda's line)."""
    try:
        return ast.parse(source) if source is not None else None
    except SyntaxError:
        return None


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _cut(exercise: Exercise, method: str | None) -> tuple[str, list[str], str]:
    """The model answer as (the given code before the lines, the lines in order, the given code after)."""
    source = strip_comments(exercise.solution_code)
    lines = source.splitlines()
    function = _target(ast.parse(source), exercise.name, method)
    statements = _statements(function)
    if not statements:
        raise ValueError(f"{exercise.key}: the model answer's {function.name!r} has no lines to order")
    head = "\n".join(lines[: statements[0].lineno - 1])
    tail = "\n".join(lines[function.end_lineno :])
    return head, _blocks(statements, lines), tail


# ----------------------------------------------------------------------------------------------------
# Distractors: lines of the named mistakes' code that make their mistake in place of a model line


def _copy(value: Any) -> Any:
    """A deep copy of a case's inputs: tensors cloned, containers rebuilt, everything else shared."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(_copy(v) for v in value)
    return value


def define(exercise: Exercise, source: str) -> Any:
    """What `source` defines as the exercise's name, run after the chapter's preamble (as the grader runs a
    learner's cell); raises SyntaxError if it does not compile, KeyError if it defines no such name."""
    namespace: dict[str, Any] = {}
    exec(PREAMBLES[int(exercise.key[2:].split(".")[0])], namespace)
    exec(compile(source, f"<{exercise.key} program>", "exec"), namespace)
    return namespace[exercise.name]


class _Trial:
    """Runs programs on the exercise's cases, to tell whether a program makes a given named mistake."""

    def __init__(self, exercise: Exercise):
        self.exercise, self.cases = exercise, exercise.cases()
        self.references = [exercise.reference(_copy(case.inputs)) for case in self.cases]
        self._wrong: dict[tuple[int, int], Any] = {}

    def _mistake_output(self, mistake: Mistake, index: int) -> Any:
        key = (id(mistake), index)
        if key not in self._wrong:
            try:
                self._wrong[key] = self.exercise.mistake_output(mistake, _copy(self.cases[index].inputs))
            except Exception:  # the mistake cannot be made on these inputs
                self._wrong[key] = None
        return self._wrong[key]

    def makes(self, source: str, mistake: Mistake) -> bool:
        """Whether the program `source` is wrong on some case, and on every case where it is wrong gives the
        output `mistake`'s code gives (a program that raises, or does not compile, makes no named mistake)."""
        try:
            answer = define(self.exercise, source)
        except Exception:
            return False
        wrong_cases = 0
        for index, (case, expected) in enumerate(zip(self.cases, self.references, strict=True)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = sanitize(self.exercise.call(answer, _copy(case.inputs)))
            except Exception:
                return False
            if compare(expected, got, case.names) is None:
                continue
            wrong = self._mistake_output(mistake, index)
            if wrong is None or compare(wrong, got, case.names, loose=10.0) is not None:
                return False
            wrong_cases += 1
        return wrong_cases > 0


def _candidates(exercise: Exercise, method: str | None, model: Sequence[str]) -> list[tuple]:
    """(similarity, text, mistake, index of the model line it would replace), most similar first: every line
    of every mistake's code that is not a model line, paired with its two closest model lines."""
    known = {_norm(text) for text in model}
    found = []
    for mistake in exercise.mistakes:
        tree = _parsed(mistake.code)
        if tree is None:
            continue
        code = strip_comments(mistake.code)
        lines = code.splitlines()
        for function in _functions(ast.parse(code), method):
            for text in _blocks(_statements(function), lines):
                if _norm(text) in known:
                    continue
                ratios = [difflib.SequenceMatcher(None, _norm(text), _norm(m)).ratio() for m in model]
                for i in sorted(range(len(model)), key=lambda i: -ratios[i])[:2]:
                    if ratios[i] >= MIN_SIMILARITY:
                        found.append((ratios[i], text, mistake, i))
    return sorted(found, key=lambda c: -c[0])


def find_distractors(exercise: Exercise, method: str | None, count: int) -> list[Line]:
    """Up to `count` distractors, the most tempting first, each from another mistake: a mistake's line that,
    in place of the model line it resembles (and at that line's indentation), makes that mistake. Each model
    line gets one before any gets a second, so that the distractors tempt at different places."""
    head, model, tail = _cut(exercise, method)
    candidates = _candidates(exercise, method, model)
    trial, chosen, tried = None, [], {}
    for spread in (True, False):
        for _, text, mistake, replaces in candidates:
            placed = textwrap.indent(textwrap.dedent(text), _indent(model[replaces]))
            taken = any(line.mistake is mistake or _norm(line.text) == _norm(placed) for line in chosen)
            crowded = spread and any(line.replaces == replaces for line in chosen)
            if len(chosen) == count or taken or crowded:
                continue
            key = (placed, replaces, id(mistake))
            if key not in tried:
                trial = trial or _Trial(exercise)
                body = [*model[:replaces], placed, *model[replaces + 1 :]]
                tried[key] = trial.makes("\n".join([head, *body, tail]) + "\n", mistake)
            if tried[key]:
                chosen.append(Line(placed, mistake, replaces))
    return chosen


# ----------------------------------------------------------------------------------------------------
# The problem


def _shuffled(n: int, rng: random.Random) -> list[int]:
    """A seeded permutation of range(n) other than the identity (when n > 1)."""
    order = list(range(n))
    while n > 1 and order == sorted(order):
        rng.shuffle(order)
    return order


class ParsonsProblem:
    """The lines of `exercise`'s model answer (of its method `method`, for a class), shuffled (seeded by
    `seed`) with up to `distractors` distractor lines; `answer(order)` judges the learner's order.

    lines: the lines as shown, numbered from 0; model_order: the numbers of the model's lines, in order (one
    right answer); given, after: the code given before and after the lines.
    """

    def __init__(self, exercise: Exercise, method: str | None = None, *, distractors: int = 3, seed: int = 0):
        if isinstance(distractors, bool) or not isinstance(distractors, int) or not 0 <= distractors <= 5:
            raise ValueError(f"distractors must be an int in 0..5, got {distractors!r}")
        self.exercise, self.method = exercise, method
        self.given, model, self.after = _cut(exercise, method)
        found = find_distractors(exercise, method, distractors)
        every = [Line(text) for text in model] + found
        order = _shuffled(len(every), random.Random(f"parsons {exercise.key} {seed}"))
        self.lines: tuple[Line, ...] = tuple(every[i] for i in order)
        self.model_order: tuple[int, ...] = tuple(order.index(i) for i in range(len(model)))

    @property
    def distractors(self) -> tuple[int, ...]:
        """The numbers of the distractor lines."""
        return tuple(i for i, line in enumerate(self.lines) if line.distractor)

    def _checked(self, order: Any) -> list[int]:
        """`order` as a list of line numbers; ValueError naming `order` for anything else."""
        n = len(self.lines)
        if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
            raise ValueError(f"order must be a list of line numbers (0..{n - 1}), got {order!r}")
        seen: dict[int, int] = {}
        for position, number in enumerate(order):
            if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < n:
                raise ValueError(f"order[{position}] is {number!r}, but the lines are numbered 0..{n - 1}")
            if number in seen:
                raise ValueError(
                    f"order uses line {number} twice (order[{seen[number]}] and order[{position}]): "
                    "each line goes in at most once"
                )
            seen[number] = position
        return list(order)

    def program(self, order: Sequence[int]) -> str:
        """The program `order` makes: the given code, the lines in that order, the code given after."""
        chosen = [self.lines[i].text for i in self._checked(order)]
        return "\n".join(part for part in [self.given, *chosen, self.after] if part) + "\n"

    def answer(self, order: Sequence[int]) -> CheckResult:
        """Judge the program made of the lines numbered in `order`, in that order: a distractor is named
        with its mistake; otherwise the exercise's own check judges the program."""
        numbers = self._checked(order)
        used = [i for i in numbers if self.lines[i].distractor]
        if used:
            return self._result("\n".join(self._distractor_note(i) for i in used))
        try:
            answer = define(self.exercise, self.program(numbers))
        except SyntaxError as exc:
            where = f" at line {exc.lineno} of the program" if exc.lineno else ""
            return self._result(
                f"Python cannot read the program in this order: {type(exc).__name__}: {exc.msg}{where}. "
                "Look at the lines that end in `:`: each needs its indented lines right after it."
            )
        except Exception as exc:  # a program whose definition fails to run: say so, as a check would
            return self._result(f"The program could not be run: {type(exc).__name__}: {exc}")
        try:
            return self.exercise.evaluate(answer)
        except Exception as exc:  # a check never raises in a notebook
            return self._result(f"the check itself could not run ({type(exc).__name__}: {exc}).")

    def _distractor_note(self, number: int) -> str:
        line = self.lines[number]
        return (
            f"Line {number}, `{line.text.strip()}`, is a distractor: it makes a known mistake. "
            f"{line.mistake.hint}"
        )

    def _result(self, message: str) -> CheckResult:
        return CheckResult(self.exercise.key, self.exercise.name, FAILED, message)

    # -- display ---------------------------------------------------------------------------------

    def _task(self) -> str:
        extra = len(self.distractors)
        some = f" {extra} of the lines are distractors (known mistakes) that belong nowhere." if extra else ""
        return f"Put the lines in order after the given code; each is indented as it goes.{some}"

    def _intro(self) -> str:
        return f"Parsons problem ({self.exercise.key}, `{self.exercise.name}`): {self._task()}"

    def plain(self) -> str:
        """The problem as plain text: the given code, the numbered lines, and how to answer."""
        width = len(str(len(self.lines) - 1))
        numbered = [
            f"{i:>{width}} | {line.text.replace(chr(10), chr(10) + ' ' * width + ' | ')}"
            for i, line in enumerate(self.lines)
        ]
        return "\n".join(
            [
                self._intro(),
                "Given:",
                self.given,
                "Lines:",
                *numbered,
                *(["Given after them:", self.after] if self.after else []),
                "To answer in text, call the problem's answer([...]) with the numbers of the lines you use, "
                "in order, e.g. problem.answer([3, 0, 5]).",
            ]
        )

    def fallback_html(self) -> str:
        """The static view: the given code, the numbered lines, and the answer inside <details>."""
        items = "".join(
            f'<li><pre class="attn-parsons-code" style="margin: 0">{html.escape(line.text)}</pre></li>'
            for line in self.lines
        )
        after = f"<p>Given after them:</p><pre>{html.escape(self.after)}</pre>" if self.after else ""
        notes = "".join(
            f"<li>line {i}, <code>{html.escape(self.lines[i].text.strip())}</code>: "
            f"{_inline(self.lines[i].mistake.hint)}</li>"
            for i in self.distractors
        )
        notes = f"<p>The distractors:</p><ul>{notes}</ul>" if notes else ""
        return (
            f'<div class="attn-parsons" data-key="{self.exercise.key}"><p><strong>Parsons problem '
            f"({self.exercise.key}).</strong> {_inline(self._task())}</p>"
            f"<p>Given:</p><pre>{html.escape(self.given)}</pre><p>The lines:</p>"
            f'<ol start="0" class="attn-parsons-lines">{items}</ol>{after}'
            "<p>In a live notebook, click the lines into your program and press Check; or call the problem's "
            "<code>answer([...])</code> with the numbers of the lines you use, in order.</p>"
            f"<details><summary>Show the answer</summary><p>One right order: "
            f"<code>{list(self.model_order)}</code></p>"
            f"<pre>{html.escape(self.program(self.model_order))}</pre>{notes}</details></div>"
        )

    def widget(self):
        """The ipywidgets view: the lines as buttons, your program with up, down and remove, and Check."""
        return _Board(self).box

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": self.plain(), "text/html": self.fallback_html()}
        if _in_kernel():
            bundle[WIDGET_VIEW] = self.widget()._repr_mimebundle_()[WIDGET_VIEW]
        return bundle

    def __repr__(self) -> str:
        return self.plain()


def _inline(text: str) -> str:
    """Plain text as HTML: escaped, with `backticks` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _in_kernel() -> bool:
    """Whether this runs in a live IPython kernel, where a widget can be shown."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


_STYLE = """<style>
.attn-parsons .attn-parsons-line, .attn-parsons .attn-parsons-code {
  font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px);
  white-space: pre; text-align: left; margin: 0; }
.attn-parsons .attn-parsons-line { height: auto; min-height: 28px; }
.attn-parsons .attn-parsons-line:disabled { opacity: 0.35; }
</style>"""


class _Board:
    """The widget of a ParsonsProblem: the lines (click one to add it to your program), your program (each
    line with up, down and remove), a Check button and the verdict."""

    def __init__(self, problem: ParsonsProblem):
        import ipywidgets as widgets

        self.problem, self.widgets, self.order = problem, widgets, []
        layout = widgets.Layout(width="auto", height="auto")
        self.buttons = []
        for number, line in enumerate(problem.lines):
            button = widgets.Button(
                description=f"{number:>2}  {line.text}", tooltip=f"line {number}", layout=layout
            )
            button.add_class("attn-parsons-line")
            button.on_click(lambda _, n=number: self.add(n))
            self.buttons.append(button)
        self.program = widgets.VBox()
        self.program.add_class("attn-parsons-program")
        self.feedback = widgets.HTML()
        self.feedback.add_class("attn-parsons-feedback")
        check = widgets.Button(description="Check", button_style="primary", icon="check")
        check.add_class("attn-parsons-check")
        check.on_click(lambda _: self.check())
        intro = (
            f"<p><strong>Parsons problem ({problem.exercise.key}).</strong> {_inline(problem._task())} "
            "Click a line to add it to your program.</p>"
        )
        given = f'<pre class="attn-parsons-code">{html.escape(problem.given)}</pre>'
        after = f'<pre class="attn-parsons-code">{html.escape(problem.after)}</pre>' if problem.after else ""
        parts = [
            widgets.HTML(_STYLE + intro),
            widgets.VBox(self.buttons),
            widgets.HTML("<b>Your program</b>"),
        ]
        parts += [widgets.HTML(given), self.program, widgets.HTML(after), check, self.feedback]
        self.box = widgets.VBox(parts)
        self.box.add_class("attn-parsons")
        self.render()

    def add(self, number: int) -> None:
        """Append line `number` to the program."""
        if number not in self.order:
            self.order.append(number)
            self.render()

    def move(self, position: int, step: int) -> None:
        """Move the program's line at `position` up (step -1) or down (step +1)."""
        target = position + step
        if 0 <= target < len(self.order):
            self.order[position], self.order[target] = self.order[target], self.order[position]
            self.render()

    def remove(self, position: int) -> None:
        """Take the program's line at `position` out (it goes back among the lines)."""
        del self.order[position]
        self.render()

    def _row(self, position: int, number: int):
        widgets = self.widgets
        code = widgets.HTML(
            f'<pre class="attn-parsons-code">{html.escape(self.problem.lines[number].text)}</pre>',
            layout=widgets.Layout(flex="1 1 auto"),
        )
        controls = []
        for icon, tip, action in (
            ("arrow-up", "move up", lambda _: self.move(position, -1)),
            ("arrow-down", "move down", lambda _: self.move(position, 1)),
            ("times", "remove", lambda _: self.remove(position)),
        ):
            button = widgets.Button(icon=icon, tooltip=tip, layout=widgets.Layout(width="36px"))
            button.add_class(f"attn-parsons-{tip.split()[-1]}")
            button.on_click(action)
            controls.append(button)
        row = widgets.HBox([code, *controls])
        row.add_class("attn-parsons-row")
        return row

    def render(self) -> None:
        """Show the program as it stands; a line in it is greyed out among the lines."""
        self.program.children = [self._row(p, n) for p, n in enumerate(self.order)]
        for number, button in enumerate(self.buttons):
            button.disabled = number in self.order
        self.feedback.value = ""

    def check(self) -> None:
        """Judge the program and show the verdict."""
        self.feedback.value = self.problem.answer(self.order).rich().html


def parsons(exercise: Exercise | str, method: str | None = None, *, seed: int = 0) -> ParsonsProblem | Any:
    """The Parsons problem of `exercise` (an Exercise, e.g. q2 from the set-up cell, or its key "ch1.q2");
    method: for a class exercise, the method to order (by default the one `PROBLEMS` names, else the last
    the learner writes). In graded work (an exercise from `checks.chapter(N, graded=True)`) it shows only a
    note: the lines are the model answer's."""
    if isinstance(exercise, str):
        if exercise not in EXERCISES:
            raise ValueError(f"exercise must be an Exercise or a key such as 'ch1.q2', got {exercise!r}")
        exercise = EXERCISES[exercise]
    if not isinstance(exercise, Exercise):
        raise ValueError(f"exercise must be an Exercise or a key such as 'ch1.q2', got {exercise!r}")
    if exercise.graded:
        return _Off(
            f"Parsons problems are off for graded work ({exercise.key}): their lines are the model answer's."
        )
    if method is None:
        method = PROBLEMS.get(exercise.key, exercise.write[-1] if exercise.write else None)
    return ParsonsProblem(exercise, method, seed=seed)


class _Off:
    """What a practice call shows in graded work: one sentence saying it is off."""

    def __init__(self, text: str):
        self.text = text

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": f"<p><em>{_inline(self.text)}</em></p>"}

    def answer(self, *args: Any) -> None:
        raise ValueError(self.text)

    def __repr__(self) -> str:
        return self.text


__all__ = ["PROBLEMS", "Line", "ParsonsProblem", "define", "find_distractors", "parsons", "strip_comments"]
