"""Predict, then see: a question asked right before the cell that shows its answer.

The learner commits to an answer, then reads why every option is right or tempting, then runs the next cell,
which shows the answer and asserts it. Everything is checked here, in the learner's kernel: nothing is sent
anywhere, and a learner's answers live in this kernel's session only (`SESSION`), so a question shown again
shows the answer given before.

    from attn_course_exercises.predict import ask
    ask("ch1.p1")      # last line of a cell: JupyterLab shows a widget, the book a <details> to open

    q = ask("ch1.p1")
    q.check(2)         # Verdict(correct=..., text=the verdict and every option's explanation)

A question is a `Choice` (options, each with why it is right or tempting) or a `Number` (a guess within a
tolerance). The questions of chapter N live in `attn_course_exercises/questions/chNN.py` as a tuple
`QUESTIONS`, keyed "chN.p1", "chN.p2", ... in the order the chapter asks them. Prompts and explanations are
plain text; `backticks` become code.

Each question displays as three things at once: text/plain, a static text/html fallback (the question, with
the answer and every explanation behind a <details> click: what the book shows), and, in a live kernel, an
ipywidgets view (what JupyterLab shows, since it ranks widgets above HTML; book/conf.py ranks HTML first).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

KEY = re.compile(r"ch([1-9][0-9]?)\.p([1-9][0-9]*)")
LETTERS = "ABCDEFGHIJ"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class Verdict:
    """The result of checking a guess: `correct`, and `text`, the verdict followed by every explanation."""

    correct: bool
    text: str

    def __str__(self) -> str:
        return self.text


class Session:
    """The answers given in this kernel, by question key: shown again when a question is displayed again."""

    def __init__(self) -> None:
        self._answers: dict[str, Any] = {}

    def record(self, key: str, guess: Any) -> None:
        """Remember `guess` as the answer to question `key`."""
        self._answers[key] = guess

    def answer(self, key: str) -> Any:
        """The answer last given to question `key`, or None."""
        return self._answers.get(key)

    def forget(self) -> None:
        """Forget every answer (a fresh start, as after a kernel restart)."""
        self._answers.clear()


#: This kernel's answers; a restart forgets them.
SESSION = Session()


def _check_key(key: object) -> None:
    """Raise ValueError unless `key` reads "chN.pK" (chapter N, question K, both from 1)."""
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise ValueError(f'key must look like "ch4.p1" (chapter, then question from 1), got {key!r}')


def _check_text(name: str, value: object) -> None:
    """Raise ValueError naming the argument `name` unless `value` is a string with some text in it."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


def _inline(text: str) -> str:
    """Plain text as HTML: escaped, with `backticks` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


class _Question:
    """What Choice and Number share: the key, the display bundle, the widget and the session."""

    key: str
    prompt: str
    reveal: str

    @property
    def chapter(self) -> int:
        """The chapter number, read from the key ("ch4.p2" -> 4)."""
        return int(KEY.fullmatch(self.key).group(1))

    def show(self) -> None:
        """Display the question (in IPython: the widget, or the static fallback outside a kernel)."""
        from IPython.display import display

        display(self)

    def widget(self):
        """The ipywidgets view: the question, the learner's input, a Check button and the explanations."""
        return _build_widget(self, SESSION)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        """text/plain and the static text/html always; in a live kernel also the widget's view."""
        bundle = {"text/plain": self.plain(), "text/html": self.fallback_html()}
        if _in_kernel():
            bundle[WIDGET_VIEW] = self.widget()._repr_mimebundle_()[WIDGET_VIEW]
        return bundle

    def fallback_html(self) -> str:
        """The static view: the question, then the answer and every explanation inside <details>."""
        return (
            f'<div class="attn-predict" data-key="{self.key}">'
            f"<p><strong>Predict ({self.key}).</strong> {_inline(self.prompt)}</p>{self._input_html()}"
            f"<details><summary>Show the answer</summary>{self.explanation_html()}"
            f"<p><em>{_inline(self.reveal)}</em></p></details></div>"
        )


def _in_kernel() -> bool:
    """Whether this runs in a live IPython kernel, where a widget can be shown."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


@dataclass(frozen=True)
class Choice(_Question):
    """A multiple-choice question.

    key: "chN.pK"; prompt: the question; options: (text, why) pairs, why saying why the option is right or
    why it is tempting and wrong; answer: the index of the right option; reveal: one sentence saying what
    the next cell shows.
    """

    key: str
    prompt: str
    options: Sequence[tuple[str, str]]
    answer: int
    reveal: str

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_text("prompt", self.prompt)
        _check_text("reveal", self.reveal)
        object.__setattr__(self, "options", _checked_options(self.options))
        if isinstance(self.answer, bool) or not isinstance(self.answer, int):
            raise ValueError(f"answer must be an option's index (an int), got {self.answer!r}")
        if not 0 <= self.answer < len(self.options):
            last = len(self.options) - 1
            raise ValueError(f"answer must be an option's index in 0..{last}, got {self.answer}")

    def check(self, guess: int) -> Verdict:
        """The verdict on `guess`, an option's index (0 for the first); raises ValueError for no option."""
        if isinstance(guess, bool) or not isinstance(guess, int) or not 0 <= guess < len(self.options):
            raise ValueError(f"guess must be an option's index in 0..{len(self.options) - 1}, got {guess!r}")
        right = LETTERS[self.answer]
        head = "Right" if guess == self.answer else f"Not quite: you chose {LETTERS[guess]}"
        lines = [f"{head}. The answer is {right}: {self.options[self.answer][0]}"]
        for i, (text, why) in enumerate(self.options):
            mark = "right" if i == self.answer else "wrong"
            lines.append(f"{LETTERS[i]}. {text} ({mark}): {why}")
        return Verdict(guess == self.answer, "\n".join(lines))

    def plain(self) -> str:
        """The question as plain text, options lettered, without the answer."""
        options = [f"  {LETTERS[i]}. {text}" for i, (text, _) in enumerate(self.options)]
        return "\n".join([f"Predict ({self.key}): {self.prompt}", *options])

    def _input_html(self) -> str:
        """The options, lettered A, B, ..., as the static view lists them."""
        items = "".join(f"<li>{_inline(text)}</li>" for text, _ in self.options)
        return f'<ol type="A">{items}</ol>'

    def explanation_html(self, guess: int | None = None) -> str:
        """The answer and every option's explanation, as HTML; `guess` (an index) is marked if given."""
        items = []
        for i, (text, why) in enumerate(self.options):
            right = i == self.answer
            label = "right" if right else "wrong"
            chosen = " (your answer)" if i == guess else ""
            items.append(
                f'<li class="attn-predict-{label}"><strong>{LETTERS[i]}. {_inline(text)}</strong> '
                f"<em>{label}{chosen}</em>: {_inline(why)}</li>"
            )
        answer = f"{LETTERS[self.answer]}. {_inline(self.options[self.answer][0])}"
        return f"<p><strong>Answer: {answer}</strong></p><ul>{''.join(items)}</ul>"


def _checked_options(options: object) -> tuple[tuple[str, str], ...]:
    """The options as a tuple of (text, why) pairs; raises ValueError naming the first bad one."""
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise ValueError(f"options must be a sequence of (text, why) pairs, got {type(options).__name__}")
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(f"options must hold 2..{len(LETTERS)} (text, why) pairs, got {len(options)}")
    checked = []
    for i, option in enumerate(options):
        if isinstance(option, str) or not isinstance(option, Sequence) or len(option) != 2:
            raise ValueError(f"options[{i}] must be a (text, why) pair, got {option!r}")
        _check_text(f"options[{i}] text", option[0])
        _check_text(f"options[{i}] why (why the option is right or tempting)", option[1])
        checked.append((option[0], option[1]))
    return tuple(checked)


@dataclass(frozen=True)
class Number(_Question):
    """A question whose answer is a number: a guess within `tolerance` of `answer` is right.

    key: "chN.pK"; prompt: the question; answer: the number; tolerance: how far off a right guess may be
    (>= 0); why: why the answer is what it is, and where the usual wrong guesses come from; reveal: one
    sentence saying what the next cell shows; unit: printed after numbers ("", "%", "BLEU", ...).
    """

    key: str
    prompt: str
    answer: float
    tolerance: float
    why: str
    reveal: str
    unit: str = ""

    def __post_init__(self) -> None:
        _check_key(self.key)
        for name in ("prompt", "why", "reveal"):
            _check_text(name, getattr(self, name))
        for name in ("answer", "tolerance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.tolerance < 0:
            raise ValueError(f"tolerance must be >= 0, got {self.tolerance}")
        if not isinstance(self.unit, str):
            raise ValueError(f"unit must be a string, got {self.unit!r}")

    def _number(self, value: float) -> str:
        """`value` with the unit after it ("37.5%", "4.7 BLEU")."""
        space = "" if self.unit in ("", "%") else " "
        return f"{value:g}{space}{self.unit}"

    def check(self, guess: float) -> Verdict:
        """The verdict on `guess`, a number; raises ValueError for anything else (text, NaN, infinity)."""
        if isinstance(guess, bool) or not isinstance(guess, (int, float)) or not math.isfinite(guess):
            raise ValueError(f"guess must be a finite number, got {guess!r}")
        correct = abs(guess - self.answer) <= self.tolerance
        head = "Right" if correct else f"Not quite: you guessed {self._number(guess)}"
        within = f" (anything within {self._number(self.tolerance)} counts)" if self.tolerance else ""
        return Verdict(correct, f"{head}. The answer is {self._number(self.answer)}{within}.\n{self.why}")

    def plain(self) -> str:
        """The question as plain text, without the answer."""
        unit = f" (in {self.unit})" if self.unit else ""
        return f"Predict ({self.key}): {self.prompt}\n  Your guess: a number{unit}"

    def _input_html(self) -> str:
        """What the static view asks for: a number, in the question's unit."""
        unit = f" (in {_inline(self.unit)})" if self.unit else ""
        return f"<p>Your guess: a number{unit}.</p>"

    def explanation_html(self, guess: float | None = None) -> str:
        """The answer and its explanation, as HTML; `guess` is quoted if given."""
        tolerance = html.escape(self._number(self.tolerance))
        within = f" (anything within {tolerance} counts)" if self.tolerance else ""
        yours = f" You guessed {html.escape(self._number(guess))}." if guess is not None else ""
        answer = html.escape(self._number(self.answer))
        return f"<p><strong>Answer: {answer}</strong>{within}.{yours}</p><p>{_inline(self.why)}</p>"


Question = Choice | Number


def _build_widget(question: Question, session: Session):
    """The question as ipywidgets: prompt, input, Check button, explanations; restores the session's answer.

    question: the Choice or Number shown; session: where the Check button records the learner's answer.
    """
    import ipywidgets as widgets

    prompt = widgets.HTML(
        _readable(f"<p><strong>Predict ({question.key}).</strong> {_inline(question.prompt)}</p>")
    )
    field = _input_widget(question, widgets)
    button = widgets.Button(description="Check", button_style="primary", icon="check")
    feedback = widgets.HTML()

    def on_check(_=None) -> None:
        guess = _read_guess(question, field.value)
        if isinstance(guess, str):
            feedback.value = _readable(f"<p>{html.escape(guess)}</p>")
            return
        session.record(question.key, guess)
        feedback.value = _readable(_feedback_html(question, guess))

    button.on_click(on_check)
    previous = session.answer(question.key)
    if previous is not None:
        field.value = previous if isinstance(question, Choice) else f"{previous:g}"
        on_check()
    box = widgets.VBox([prompt, field, button, feedback])
    box.add_class("attn-predict")
    return box


def _readable(fragment: str) -> str:
    """HTML for an ipywidgets HTML widget, at the line height of prose (the widget's own is a control's)."""
    return f'<div style="line-height: 1.45">{fragment}</div>'


def _input_widget(question: Question, widgets):
    """RadioButtons over the options' indices (a Choice) or a text box for a number (a Number)."""
    if isinstance(question, Choice):
        # a radio button's label is plain text: `code` reads as code without its backticks
        labels = [
            (f"{LETTERS[i]}. {text.replace('`', '')}", i) for i, (text, _) in enumerate(question.options)
        ]
        layout = widgets.Layout(width="auto")
        return widgets.RadioButtons(options=labels, index=None, layout=layout)
    unit = f" ({question.unit})" if question.unit else ""
    return widgets.Text(value="", placeholder=f"your guess{unit}", description="Guess:")


def _read_guess(question: Question, value: Any) -> float | int | str:
    """The guess in the input widget's `value`, or a sentence saying what is missing (a str)."""
    if isinstance(question, Choice):
        return "Pick an option first." if value is None else value
    try:
        guess = float(str(value).strip().rstrip("%").strip())
    except ValueError:
        return f"Type a number first (got {str(value)!r})."
    return guess if math.isfinite(guess) else "Type a finite number."


def _feedback_html(question: Question, guess: float | int) -> str:
    """The verdict, every explanation and what the next cell shows, as HTML."""
    verdict = question.check(guess)
    head = "Right." if verdict.correct else "Not quite."
    colour = "#1a7f37" if verdict.correct else "#b35900"
    return (
        f'<p style="color:{colour}"><strong>{head}</strong></p>{question.explanation_html(guess)}'
        f"<p><em>{_inline(question.reveal)}</em> <strong>Run it now.</strong></p>"
    )


@cache
def _all() -> dict[str, Question]:
    from attn_course_exercises.questions import discover

    found = {}
    for number, module in discover().items():
        found.update((q.key, q) for q in _checked(module, number))
    return found


def _checked(module, number: int) -> tuple[Question, ...]:
    """A chapter module's QUESTIONS, after checking they are questions keyed chN.p1, chN.p2, ... in order.

    module: the chapter's questions module (anything with `__name__` and `QUESTIONS`); number: its chapter.
    """
    questions = getattr(module, "QUESTIONS", None)
    if not isinstance(questions, tuple) or not all(isinstance(q, (Choice, Number)) for q in questions):
        raise ValueError(f"{module.__name__}.QUESTIONS must be a tuple of Choice and Number questions")
    expected = [f"ch{number}.p{i}" for i in range(1, len(questions) + 1)]
    keys = [q.key for q in questions]
    if keys != expected:
        raise ValueError(f"{module.__name__}.QUESTIONS has keys {keys}, expected {expected}")
    return questions


def __getattr__(name: str) -> Any:
    # QUESTIONS is built on first use: the question modules import this one.
    if name == "QUESTIONS":
        return _all()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def ask(key: str) -> Question:
    """The question `key` ("ch4.p1"); as a cell's last line, IPython displays it."""
    _check_key(key)
    questions = _all()
    if key not in questions:
        known = [k for k in questions if k.startswith(key.split(".")[0] + ".")]
        raise KeyError(f"no question {key!r}; chapter's questions: {known or 'none yet'}")
    return questions[key]


def chapter(number: int) -> tuple[Question, ...]:
    """The questions of chapter `number`, in the order the chapter asks them (empty if it has none)."""
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 99:
        raise ValueError(f"number must be a chapter number in 1..99, got {number!r}")
    return tuple(q for q in _all().values() if q.chapter == number)


__all__ = [
    "QUESTIONS",  # noqa: F822 - built on first use, by __getattr__
    "SESSION",
    "Choice",
    "Number",
    "Question",
    "Session",
    "Verdict",
    "ask",
    "chapter",
]
