"""The similarity report: answer cells that look copied, from another student or from the course's own code.

Each answer is normalised so that renaming, reformatting and comments change nothing: its tokens
(`tokenize`) without comments, blank lines or docstrings, every name the answer binds renamed in order of
first use (`v0`, `v1`, ...; attributes and library names such as `torch.where` are kept), and without the
tokens it shares with the exercise's stub (the signature every student is given). Two answers score the
share of their tokens that lie in common runs of at least `MIN_RUN` tokens (`difflib`): 2M / (|a| + |b|)
between two students, M / |answer| between a student and the course's code (the package's function and
the model answer, which a copy may trim). Pairs at or above `THRESHOLD` are listed, with the matching lines
side by side, for the teacher to review: a match is never turned into a grade. Answers shorter than
`MIN_TOKENS` are left out.
"""

from __future__ import annotations

import ast
import difflib
import html
import inspect
import io
import itertools
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from attn_course import checks
from attn_course_tools.grading.reading import exercise_cells
from attn_course_tools.grading.records import SubmissionGrade
from attn_course_tools.grading.report import attempted

#: The score from which a pair is listed (see `tests/tools/grading/test_similarity.py` for its calibration).
THRESHOLD = 0.9

#: Answers shorter than this many tokens (after the stub's) are not compared: a one-line formula is
#: written the same way by many who never saw each other's.
MIN_TOKENS = 40

#: The shortest run of tokens that counts as a match: shorter runs are idioms every answer shares.
MIN_RUN = 8

#: The name the course's own code goes by in the report.
COURSE = "the course's own code"


class Token(NamedTuple):
    """One normalised token and the line of the original source it came from (1-based)."""

    text: str
    line: int


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    lines |= set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return lines


def _bound_names(tree: ast.AST) -> set[str]:
    """The names a source binds: assigned, deleted, arguments, functions, classes, import aliases."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return names


_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_DOCSTRING = {tokenize.STRING, tokenize.NEWLINE}  # a docstring's tokens: the string and its line's end


def _string(literal: str) -> str:
    """A string literal in one spelling ('a' and "a" are one token)."""
    try:
        return repr(ast.literal_eval(literal))
    except (ValueError, SyntaxError):  # an f-string
        return literal


def normalise(source: str) -> list[Token]:
    """The source's tokens, normalised (see the module's docstring); a source that does not parse is
    tokenised as far as it goes, with its names kept."""
    source = inspect.cleandoc(source) if source.startswith((" ", "\t")) else source
    try:
        tree = ast.parse(source)
        bound, docstrings = _bound_names(tree), _docstring_lines(tree)
    except SyntaxError:
        bound, docstrings = set(), set()
    names: dict[str, str] = {}
    tokens: list[Token] = []
    previous = ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _SKIPPED or (tok.type in _DOCSTRING and tok.start[0] in docstrings):
                continue
            text = {tokenize.NEWLINE: ";", tokenize.INDENT: "{", tokenize.DEDENT: "}"}.get(
                tok.type, tok.string
            )
            if tok.type == tokenize.NAME and tok.string in bound and previous != ".":
                text = names.setdefault(tok.string, f"v{len(names)}")
            elif tok.type == tokenize.STRING:
                text = _string(tok.string)
            tokens.append(Token(text, tok.start[0]))
            previous = tok.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return tokens


def without_template(tokens: list[Token], template: list[Token]) -> list[Token]:
    """`tokens` less the runs (of 3 tokens or more) it shares with `template`, the exercise's stub."""
    matcher = difflib.SequenceMatcher(
        None, [t.text for t in tokens], [t.text for t in template], autojunk=False
    )
    shared = {
        i
        for block in matcher.get_matching_blocks()
        if block.size >= 3
        for i in range(block.a, block.a + block.size)
    }
    return [t for i, t in enumerate(tokens) if i not in shared]


class Match(NamedTuple):
    """How two normalised answers match: the score and the runs (a start, b start, length) in common."""

    score: float
    runs: list[tuple[int, int, int]]


def compare(a: list[Token], b: list[Token], *, of_first: bool = False) -> Match:
    """The share of tokens in common runs of at least MIN_RUN: 2M / (|a| + |b|), or M / |a| if `of_first`
    (how much of `a` is found in `b`)."""
    if not a or not b:
        return Match(0.0, [])
    matcher = difflib.SequenceMatcher(None, [t.text for t in a], [t.text for t in b], autojunk=False)
    runs = [(m.a, m.b, m.size) for m in matcher.get_matching_blocks() if m.size >= MIN_RUN]
    common = sum(size for _, _, size in runs)
    return Match(common / len(a) if of_first else 2 * common / (len(a) + len(b)), runs)


@dataclass
class Pair:
    """A pair of answers to one exercise at or above the threshold: `second` is a student or COURSE."""

    key: str
    first: str
    second: str
    match: Match
    first_source: str
    second_source: str
    first_tokens: list[Token]
    second_tokens: list[Token]


def course_sources(key: str) -> list[str]:
    """The course's own code for exercise `key`: the model answer and the package objects it re-implements."""
    exercise = checks.EXERCISES[key]
    sources = [exercise.solution_code]
    for dotted in exercise.package:
        try:
            sources.append(inspect.getsource(checks.resolve(dotted)))
        except (TypeError, OSError):  # no source to read (a builtin, a missing file)
            continue
    return sources


class _Form(NamedTuple):
    """One normalised answer and the students who handed it in: `tokens` and `source` are the first one's,
    `others` the tokens and source of each of the rest (for showing their lines)."""

    tokens: list[Token]
    students: list[str]
    source: str
    others: list[tuple[list[Token], str]]

    @property
    def label(self) -> str:
        first, others = self.students[0], self.students[1:]
        return first if not others else f"{first} (and {', '.join(others)}, the same code)"


def _forms(by_student: Mapping[str, str], template: list[Token]) -> list[_Form]:
    """The distinct normalised answers of MIN_TOKENS or more, each with its students (sorted)."""
    found: dict[tuple[str, ...], _Form] = {}
    for student in sorted(by_student):
        source = by_student[student]
        tokens = without_template(normalise(source), template)
        if len(tokens) < MIN_TOKENS:
            continue
        form = found.get(tuple(t.text for t in tokens))
        if form is None:
            found[tuple(t.text for t in tokens)] = _Form(tokens, [student], source, [])
        else:
            form.students.append(student)
            form.others.append((tokens, source))
    return list(found.values())


def _covered(tokens: list[Token], grams: set[tuple[str, ...]]) -> int:
    """How many of `tokens` lie in a run of MIN_RUN that is among `grams`: at most that many can match."""
    texts, covered = [t.text for t in tokens], set()
    for i in range(len(texts) - MIN_RUN + 1):
        if tuple(texts[i : i + MIN_RUN]) in grams:
            covered.update(range(i, i + MIN_RUN))
    return len(covered)


def _grams(tokens: list[Token]) -> set[tuple[str, ...]]:
    texts = [t.text for t in tokens]
    return {tuple(texts[i : i + MIN_RUN]) for i in range(len(texts) - MIN_RUN + 1)}


def _may_reach(a: _Form, b: _Form, threshold: float) -> bool:
    """Whether two answers can score `threshold`: 2M / (|a| + |b|), M at most what their shared runs cover."""
    most = min(_covered(a.tokens, _grams(b.tokens)), _covered(b.tokens, _grams(a.tokens)))
    return 2 * most / (len(a.tokens) + len(b.tokens)) >= threshold


def _pair(key: str, a: _Form, b: _Form, match: Match, second: str | None = None) -> Pair:
    return Pair(key, a.label, second or b.label, match, a.source, b.source, a.tokens, b.tokens)


def similar_pairs(answers: Mapping[str, Mapping[str, str]], threshold: float = THRESHOLD) -> list[Pair]:
    """Answers at or above `threshold`, highest first: students who handed in the same normalised code (one
    entry for all of them), pairs of different answers, answers against the course's code.
    answers: {exercise key: {student: source}}."""
    pairs: list[Pair] = []
    for key, by_student in answers.items():
        template = normalise(checks.EXERCISES[key].stub_code)
        forms = _forms(by_student, template)
        for form in forms:
            if form.others:  # one entry for all who handed in this code, showing the first two's lines
                (tokens, source), *_ = form.others
                same = _Form(tokens, form.students[1:], source, [])
                whole = Match(1.0, [(0, 0, len(form.tokens))])
                first = _Form(form.tokens, form.students[:1], form.source, [])
                pairs.append(_pair(key, first, same, whole, ", ".join(same.students)))
        for a, b in itertools.combinations(forms, 2):
            if _may_reach(a, b, threshold):
                match = compare(a.tokens, b.tokens)
                if match.score >= threshold:
                    pairs.append(_pair(key, a, b, match))
        for source in course_sources(key):
            course = _Form(without_template(normalise(source), template), [COURSE], source, [])
            for form in forms:
                match = compare(form.tokens, course.tokens, of_first=True)
                if match.score >= threshold:
                    pairs.append(_pair(key, form, course, match))
    return sorted(pairs, key=lambda p: (-p.match.score, p.key, p.first, p.second))


def _lines(source: str, tokens: list[Token], start: int, size: int) -> list[tuple[int, str]]:
    text = (inspect.cleandoc(source) if source.startswith((" ", "\t")) else source).splitlines()
    numbers = sorted({t.line for t in tokens[start : start + size]})
    return [(n, text[n - 1]) for n in range(numbers[0], numbers[-1] + 1) if n - 1 < len(text)]


def _cell(line: tuple[int, str] | None) -> str:
    if line is None:
        return ""
    number, text = line
    indent = len(text) - len(text.lstrip(" "))
    code = "&nbsp;" * indent + html.escape(text.strip()).replace("|", "&#124;")
    return f"{number}: <code>{code}</code>"


def side_by_side(pair: Pair) -> list[str]:
    """The pair's matching lines as a Markdown table, one run after another."""
    rows = [f"| {pair.first} | {pair.second} |", "| --- | --- |"]
    for a, b, size in pair.match.runs:
        left = _lines(pair.first_source, pair.first_tokens, a, size)
        right = _lines(pair.second_source, pair.second_tokens, b, size)
        for one, two in itertools.zip_longest(left, right):
            rows.append(f"| {_cell(one)} | {_cell(two)} |")
    return rows


def markdown(pairs: Sequence[Pair], students: int, threshold: float = THRESHOLD) -> str:
    """The similarity report for the teacher: each pair with its score and matching lines."""
    lines = [
        "# Similarity report",
        "",
        f"{students} students' answer cells compared with each other and with {COURSE} (the model answer "
        "and the package's function), after renaming, reformatting and comments are normalised away. "
        f"Listed: pairs scoring {threshold:.2f} or more (1.00 = the same code); answers under {MIN_TOKENS} "
        "tokens are not compared. A match is a reason to look, not a verdict: it changes no grade.",
        "",
    ]
    if not pairs:
        lines += ["No pair reaches the threshold.", ""]
    for pair in pairs:
        name = checks.EXERCISES[pair.key].name
        size = f"{len(pair.first_tokens)} tokens"
        lines += [f"## {pair.key} `{name}`: {pair.first} and {pair.second}: {pair.match.score:.2f}", ""]
        lines += [f"{pair.first}'s answer: {size} after normalising; the lines in common runs:", ""]
        lines += [*side_by_side(pair), ""]
    return "\n".join(lines)


def answer_sources(
    submissions: Mapping[str, Sequence[SubmissionGrade]], notebooks: Mapping[Path, dict | None]
) -> dict[str, dict[str, str]]:
    """{exercise key: {student: the source of the student's answer cells}}, from the submissions ({student:
    graded submissions}) and the notebooks the grader read ({path: notebook, None if unreadable}), for
    every exercise the student attempted (the first such file)."""
    answers: dict[str, dict[str, str]] = {}
    for student, graded in submissions.items():
        for submission in graded:
            notebook = notebooks.get(submission.path)
            if notebook is None:
                continue
            cells, _ = exercise_cells(notebook, list(submission.exercises))
            for key, grade in submission.exercises.items():
                source = "\n".join(c.source for c in cells if c.exercise == key)
                if source and attempted(grade):
                    answers.setdefault(key, {}).setdefault(student, source)
    return answers


def write_similarity_report(
    answers: Mapping[str, Mapping[str, str]], students: int, path: str | Path, threshold: float = THRESHOLD
) -> Path:
    """Compare the answers ({exercise key: {student: source}}) and write the report to `path`."""
    path = Path(path)
    path.write_text(markdown(similar_pairs(answers, threshold), students, threshold) + "\n", encoding="utf-8")
    return path
