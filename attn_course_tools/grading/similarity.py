"""The similarity report: answer cells that look copied, from a classmate or from the course's own code.

An answer is compared in three steps, the last two copydetect's (the winnowing detector of
https://github.com/blingenf/copydetect, after Schleimer, Wilkerson and Aiken 2003):

1. Its canonical form (`normalise`), so that what a copier adds or moves changes nothing. Lines Python
   cannot parse are left out. Statements that do nothing are dropped (`dead_statements`): `pass`, a bare
   constant or name (docstrings too), `if False:` and `while 0:` blocks, `assert True`, what follows a
   `return`, `raise`, `break` or `continue` in its block, and assignments to names that no statement left
   reads; an `if True:` gives way to its body. The statements of each block are then put in one order
   (`_canonical_order`): a statement stays after an earlier one whose names it reads or writes, or that
   reads or writes its names; of those free to come next, first one that depends on the latest placed (so
   a chain stays together), then the one whose copydetect text sorts first. So independent statements,
   functions and methods come in one order however the source had them. Each line keeps the file and line
   it came from, for the report. Last, the lines of the exercise's stub (the signature and the given code
   every student starts from) are left out (`without_template`): copydetect's own boilerplate option
   mis-handles a run that occurs twice in an answer.
2. copydetect's text of each line (`copydetect.utils.filter_code`, pygments' tokens): every name one
   placeholder, comments and spacing gone, so renaming and reformatting change nothing and an inserted
   statement only touches the runs of text it is in.
3. copydetect's fingerprints of that text (`CodeFingerprint`): the hashes of its runs of K characters,
   winnowed with a window of WINDOW; `compare_files` gives the share of each answer's text that lies in
   runs the other shares.

Two students' answers score the larger of their two shares (a copy padded with code the canonical form
keeps still holds all of the original); an answer against the course's code scores its own share found in
it (`course_document`: the model answer and the whole source of every package module the exercise's
reference lives in or reaches through the helpers it calls, so helpers pasted with the answer are found
too). Pairs at or above THRESHOLD are listed with the matching lines side by side for the teacher to
review: a match is never turned into a grade. Answers whose text is shorter than MIN_TEXT are not compared.

Why these values (measured on the learner-answer catalogue's independent correct alternatives and on
disguised copies of classmates' answers and of the course's code, `tests/tools/grading/test_similarity.py`;
the figures are in docs/instructors.md). K: shorter runs are shared by independent answers through the
idioms every answer uses (`x = torch.softmax(y, dim=-1)` is one) and flag correct alternatives against
the course's large modules; longer ones cost a copy more of its score for each live statement added to
it. WINDOW 1 keeps every run's hash: answers are a few hundred characters, so winnowing's saving buys
nothing here, and copydetect hashes runs with Python's `hash`, which is salted anew in every process: with
a larger window, which hashes are kept, and so a score, would change from one run of the grader to the
next. THRESHOLD: every disguised copy scores well above it, with room for some live code added to the
copy (which lowers a score by the share it adds); the few independent answers above it are written the
way the course writes them. MIN_TEXT leaves out answers so short (a one-line formula) that independent
students write them alike.
"""

from __future__ import annotations

import ast
import bisect
import functools
import heapq
import html
import inspect
import io
import itertools
import textwrap
import types
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import attn_course_exercises as checks
from attn_course_tools.grading.reading import exercise_cells
from attn_course_tools.grading.records import SubmissionGrade
from attn_course_tools.grading.report import attempted

if TYPE_CHECKING:
    from copydetect import CodeFingerprint

#: The length of the runs of copydetect's text that are fingerprinted (characters; each name is one).
K = 20

#: copydetect's winnowing window: 1 keeps every run's fingerprint (see the module's docstring).
WINDOW = 1

#: The score from which a pair is listed.
THRESHOLD = 0.8

#: Answers whose copydetect text (after the stub's lines) is shorter than this are not compared.
MIN_TEXT = 60

#: The name the course's own code goes by in the report.
COURSE = "the course's own code"


# -- the canonical form ---------------------------------------------------------------------------------


class Place(NamedTuple):
    """Where a line of a canonical form came from: the file (a student's answer or a course file), the line
    number in it (1-based) and that line's text."""

    file: str
    line: int
    text: str


class Normalised(NamedTuple):
    """A canonical form, line by line: copydetect's text of each line and the `Place` it came from."""

    tokens: list[str]
    places: list[Place]

    @classmethod
    def of(cls, lines: Sequence[tuple[str, Place]]) -> Normalised:
        """The form whose lines are these (source text, place): each line's text filtered."""
        return cls([filtered(text) for text, _ in lines], [place for _, place in lines])

    @property
    def text(self) -> str:
        """copydetect's text of the whole form, what is fingerprinted."""
        return "".join(self.tokens)


def _falsy(test: ast.expr) -> bool | None:
    """Whether a test is a constant (`False`, `0`, `not True`, ...) that is false: True, False, or None if
    the test is not constant."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _falsy(test.operand)
        return None if inner is None else not inner
    return not test.value if isinstance(test, ast.Constant) else None


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """The blocks of statements directly inside `node` (a body, an else, a handler's body...), in order."""
    found = [getattr(node, name, None) for name in ("body", "orelse", "finalbody")]
    found += [h.body for h in getattr(node, "handlers", [])] + [c.body for c in getattr(node, "cases", [])]
    found = [b for b in found if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]
    return sorted(found, key=lambda b: (b[0].lineno, b[0].col_offset))


def _stored_names(targets: Sequence[ast.expr]) -> set[str] | None:
    """The names an assignment binds if it binds plain names only, else None."""
    names: set[str] = set()
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif not isinstance(node, (ast.Tuple, ast.List, ast.Starred, ast.expr_context)):
                return None
    return names


def _inert(node: ast.stmt) -> bool:
    """Whether a statement does nothing whatever names are read (see the module's docstring)."""
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.Name, ast.Attribute))
    if isinstance(node, (ast.If, ast.While)):
        return _falsy(node.test) is True and not node.orelse
    if isinstance(node, ast.Assert):
        return _falsy(node.test) is False
    return False


def _bound(node: ast.stmt) -> set[str] | None:
    """The names an assignment to plain names binds (it does nothing if none is read), else None."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return _stored_names(node.targets if isinstance(node, ast.Assign) else [node.target]) or None
    return None


def _own_reads(statement: ast.stmt) -> set[str]:
    """The names a statement reads itself, not in the statements nested in it (a loop's body...)."""
    found, todo = set(), [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
        todo += [child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt)]
    return found


#: What ends a block: the statements after one of these never run.
_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


def dead_statements(tree: ast.AST) -> set[int]:
    """The ids of the statements that do nothing (see the module's docstring). Marked as a garbage
    collector marks: the statements that do something whatever is read read names; an assignment to
    plain names does something once one of its names is read by one that does, and then reads its own."""
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # a class's, if read
    dead: set[int] = set()
    assignments: dict[str, list[ast.stmt]] = defaultdict(list)
    read: set[str] = set()
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, in_class = todo.pop()
        for block in _blocks(node):
            after_exit = False
            for statement in block:
                bound = _bound(statement)
                if after_exit or _inert(statement):
                    dead.add(id(statement))
                elif bound is not None and not (in_class and bound & attributes):
                    dead.add(id(statement))  # until one of its names is read
                    for name in bound:
                        assignments[name].append(statement)
                else:
                    read |= _own_reads(statement)
                    todo.append((statement, isinstance(statement, ast.ClassDef)))
                after_exit = after_exit or isinstance(statement, _EXITS)
    waiting = list(read)
    while waiting:
        for statement in assignments.pop(waiting.pop(), []):
            if id(statement) in dead:
                dead.discard(id(statement))
                new = _own_reads(statement) - read
                read |= new
                waiting += new
    return dead


def _path(node: ast.expr) -> str | None:
    """`a.b.c` for an attribute chain of names, `a` for a name, None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _path(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Effects(NamedTuple):
    """What a statement reads and writes, as names and attribute chains (`self.W_q`)."""

    reads: set[str]
    writes: set[str]


def _effects(statement: ast.stmt) -> _Effects:
    """The names and attribute chains a statement reads and writes; a function or class is its name, read
    by nothing but its decorators, defaults and bases (its body runs later)."""
    reads, writes = set(), set()
    roots: list[ast.AST] = [statement]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        writes.add(statement.name)
        roots = [*statement.decorator_list, *getattr(statement, "bases", [])]
        if not isinstance(statement, ast.ClassDef):
            roots += [*statement.args.defaults, *(d for d in statement.args.kw_defaults if d is not None)]
    inner = set()  # the prefixes of longer chains: `self` in `self.W_q` is not a read of all of self
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                writes.update((a.asname or a.name).split(".")[0] for a in node.names)
            if id(node) in inner or not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
                continue
            if isinstance(node.ctx, ast.Load) and (path := _path(node)) is not None:
                reads.add(path)
            elif not isinstance(node.ctx, ast.Load):
                target = node
                while isinstance(target, ast.Subscript):
                    target = target.value
                if (path := _path(target)) is not None:
                    writes.add(path)
    return _Effects(reads, writes)


def _overlap(one: set[str], other: set[str]) -> bool:
    """Whether a chain of `one` is one of `other`'s or a part of it (`x` and `x.shape`)."""
    return any(a == b or a.startswith(b + ".") or b.startswith(a + ".") for a in one for b in other)


def _depends(earlier: _Effects, later: _Effects) -> bool:
    return _overlap(earlier.writes, later.reads | later.writes) or _overlap(later.writes, earlier.reads)


#: The longest block whose statements are put in canonical order.
_REORDERED_AT_MOST = 300


def _canonical_order(effects: Sequence[_Effects], keys: Sequence[str]) -> list[int]:
    """The statements' order: each after the earlier ones it depends on; among those free to come next,
    first the one that depends on the latest placed (so a chain of statements stays together, as in the
    source), then the smallest key. The same order whichever way independent statements were arranged.
    A block longer than _REORDERED_AT_MOST keeps its order (the comparisons grow with its square)."""
    if len(effects) > _REORDERED_AT_MOST:
        return list(range(len(effects)))
    waits = [{i for i in range(j) if _depends(effects[i], effects[j])} for j in range(len(effects))]
    ready = [(1, keys[j], j) for j, before in enumerate(waits) if not before]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        *_, done = heapq.heappop(ready)
        order.append(done)
        for j, before in enumerate(waits):
            if done in before:
                before.discard(done)
                if not before:  # free now, after `done`, the latest it depends on
                    heapq.heappush(ready, (-len(order), keys[j], j))
    return order


@functools.lru_cache(maxsize=1 << 16)  # lines recur: within a module, across answers and modules
def filtered(text: str) -> str:
    """copydetect's text of some Python source: pygments' tokens, names as placeholders, no comments or
    spacing. The canonical form filters line by line (a line is a short source of its own, and its tokens
    lead back to it)."""
    from copydetect.utils import filter_code  # see `fingerprint` for why it is imported here

    return filter_code(text, "answer.py", "python")[0]


class _Source:
    """One source being put in canonical form: its text, its lines and the statements found dead."""

    def __init__(self, text: str, file: str, tree: ast.AST):
        self.text, self.file = text, file
        self.lines = text.split("\n")
        self.starts = list(itertools.accumulate((len(line) + 1 for line in self.lines), initial=0))
        self.dead = dead_statements(tree)

    def at(self, line: int, column: int) -> int:
        """The offset in the text of the AST's (line, UTF-8 byte column) position."""
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:column].decode(errors="ignore"))

    def span(self, node: ast.stmt) -> tuple[int, int]:
        """Where a statement starts (its first decorator's `@`) and ends in the text."""
        start = self.at(node.lineno, node.col_offset)
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            start = self.text.rfind("@", 0, self.at(decorators[0].lineno, decorators[0].col_offset))
        return start, self.at(node.end_lineno or node.lineno, node.end_col_offset or 0)

    def cut(self, start: int, end: int) -> list[tuple[str, Place]]:
        """The text from `start` to `end` as lines, each with its place; blank and comment lines left out."""
        first = bisect.bisect_right(self.starts, start) - 1
        found = []
        for offset, piece in enumerate(self.text[start:end].split("\n")):
            if piece.strip() and not piece.strip().startswith("#"):
                number = first + offset + 1
                found.append((piece, Place(self.file, number, self.lines[number - 1])))
        return found

    def statement(self, node: ast.stmt) -> list[tuple[str, Place]]:
        """A statement's canonical lines: its own text around its blocks, each block in canonical order."""
        if isinstance(node, ast.If) and _falsy(node.test) is False and not node.orelse:
            return self.block(node.body)  # `if True:` gives way to its body
        start, end = self.span(node)
        found = []
        for block in _blocks(node):
            block_start, block_end = self.span(block[0])[0], self.span(block[-1])[1]
            found += self.cut(start, block_start) + self.block(block)
            start = block_end
        return found + self.cut(start, end)

    def block(self, block: Sequence[ast.stmt]) -> list[tuple[str, Place]]:
        """A block's live statements in canonical order, each as its canonical lines."""
        live = [s for s in block if id(s) not in self.dead]
        lines = [self.statement(s) for s in live]
        keys = ["".join(filtered(text) for text, _ in found) for found in lines]
        order = _canonical_order([_effects(s) for s in live], keys)
        return [line for i in order for line in lines[i]]


def _cleaned(source: str) -> str:
    """The source with one kind of line ending, dedented, and notebook magics (`%time`, `!pip`) blanked."""
    source = textwrap.dedent(source.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))


#: How many lines that do not parse a source may lose before it is compared line by line as it is.
_UNPARSED_LINES = 20


def _parsed(source: str) -> tuple[str, ast.Module | None]:
    """The source, less (blanked) the lines Python cannot parse, and its tree; None if that does not do."""
    lines = source.split("\n")
    for _ in range(_UNPARSED_LINES):
        try:
            return "\n".join(lines), ast.parse("\n".join(lines))
        except SyntaxError as error:
            filled = [n for n, line in enumerate(lines, 1) if line.strip()]
            lines[max((n for n in filled if n <= (error.lineno or 0)), default=filled[-1]) - 1] = ""
            if len(filled) == 1:
                break
        except ValueError:  # a null byte
            break
    return source, None


def normalise(source: str, file: str = "") -> Normalised:
    """The source's canonical form (see the module's docstring), its lines placed in `file`. Lines that do
    not parse are left out; a source that still does not parse keeps its lines as they are."""
    source, tree = _parsed(_cleaned(source))
    if tree is None:
        lines = source.split("\n")
        return Normalised.of([(t, Place(file, n, t)) for n, t in enumerate(lines, 1) if t.strip()])
    return Normalised.of(_Source(source, file, tree).block(tree.body))


def without_template(doc: Normalised, template: Normalised) -> Normalised:
    """`doc` less its lines whose copydetect text is that of a line of `template`, the exercise's stub."""
    given = set(template.tokens)
    kept = [(t, p) for t, p in zip(doc.tokens, doc.places, strict=True) if t and t not in given]
    return Normalised([t for t, _ in kept], [p for _, p in kept])


# -- fingerprints and matches ---------------------------------------------------------------------------


def fingerprint(doc: Normalised) -> CodeFingerprint:
    """copydetect's fingerprints of a canonical form (K, WINDOW)."""
    # copydetect is imported where it is used: Gradescope's container grades one student and compares
    # nothing, and does not install it.
    from copydetect import CodeFingerprint

    return CodeFingerprint("answer.py", K, WINDOW, filter=False, fp=io.StringIO(doc.text))


class Run(NamedTuple):
    """A run of text two answers share: the lines it covers on either side (their places)."""

    first: list[Place]
    second: list[Place]


def _starts(doc: Normalised) -> list[int]:
    """Where each line of `doc` starts in its text, and (last) where the text ends."""
    return list(itertools.accumulate((len(t) for t in doc.tokens), initial=0))


def _lines(doc: Normalised, starts: list[int], start: int, end: int) -> list[Place]:
    """The places of the lines of `doc` (whose lines start at `starts`) that its text from `start` to `end`
    comes from."""
    first, last = bisect.bisect_right(starts, start) - 1, bisect.bisect_right(starts, end - 1) - 1
    return doc.places[first : last + 1]


def _whole_lines(starts: list[int], i: int, j: int, size: int) -> tuple[int, int, int]:
    """A run (start in a, start in b, length) cut to the whole lines of a it covers, if it covers one,
    so that a line it only touches is not shown as matching."""
    start = starts[bisect.bisect_left(starts, i)]
    end = starts[bisect.bisect_right(starts, i + size) - 1]
    return (start, j + start - i, end - start) if end > start else (i, j, size)


#: The most places of one shared fingerprint in the second text that `matching_runs` pairs with each in the
#: first: a fingerprint repeated all over both would otherwise pair every place with every other.
_PLACES_PER_FINGERPRINT = 8


def _diagonals(a: CodeFingerprint, b: CodeFingerprint) -> list[tuple[int, int, int]]:
    """The runs of shared fingerprints that lie one after another in both: (start in a, start in b, length
    in characters), longest first."""
    by_shift: dict[int, list[int]] = defaultdict(list)
    for found in a.hashes & b.hashes:
        for i, j in itertools.product(a.hash_idx[found], b.hash_idx[found][:_PLACES_PER_FINGERPRINT]):
            by_shift[int(j) - int(i)].append(int(i))
    runs = []
    for shift, starts in by_shift.items():
        starts.sort()
        first = previous = starts[0]
        for i in [*starts[1:], None]:
            if i is None or i - previous > WINDOW:
                runs.append((first, first + shift, previous - first + K))
                first = i
            previous = i if i is not None else previous
    return sorted(runs, key=lambda r: (-r[2], r[0], r[1]))


def shares(fa: CodeFingerprint, fb: CodeFingerprint) -> tuple[float, float]:
    """The share of each of two fingerprinted texts that lies in runs the other shares (`compare_files`)."""
    from copydetect import compare_files  # see `fingerprint`

    if fa.hashes.isdisjoint(fb.hashes):
        return 0.0, 0.0
    _, (share_a, share_b), _ = compare_files(fa, fb)
    return float(share_a), float(share_b)


def matching_runs(a: Normalised, b: Normalised, fa: CodeFingerprint, fb: CodeFingerprint) -> list[Run]:
    """The runs of text two canonical forms share (fa, fb: their fingerprints): each part of `a` in the
    longest run that covers it, in the order of `a`, runs that meet on both sides made one."""
    covered: set[int] = set()
    kept = []
    for i, j, size in _diagonals(fa, fb):
        new = set(range(i, i + size)) - covered
        if 2 * len(new) >= size:
            covered |= new
            kept.append((i, j, size))
    runs: list[Run] = []
    starts, others = _starts(a), _starts(b)
    for i, j, size in (_whole_lines(starts, *run) for run in sorted(kept)):
        run = Run(_lines(a, starts, i, i + size), _lines(b, others, j, j + size))
        if runs and run.first[0] in runs[-1].first and run.second[0] in runs[-1].second:
            last = runs.pop()
            run = Run(_union(last.first, run.first), _union(last.second, run.second))
        runs.append(run)
    return runs


def _union(one: list[Place], other: list[Place]) -> list[Place]:
    return one + [p for p in other if p not in one]


# -- the course's own code ------------------------------------------------------------------------------


def _called(found: object) -> Iterator[object]:
    """The globals a function or class (its methods, its bases) refers to by name."""
    functions = [found] if inspect.isfunction(found) else []
    if inspect.isclass(found):
        yield from found.__bases__
        for value in vars(found).values():
            value = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            functions += [value] if inspect.isfunction(value) else []
    for function in functions:
        codes = [function.__code__]
        while codes:
            code = codes.pop()
            yield from (function.__globals__[n] for n in code.co_names if n in function.__globals__)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]


def course_modules(key: str) -> list[types.ModuleType]:
    """The package modules exercise `key`'s reference lives in or reaches through the course functions and
    classes it calls (and they call, and so on), by name."""
    todo = [checks.resolve(dotted) for dotted in checks.EXERCISES[key].package]
    seen, found = set(), {}
    while todo:
        item = todo.pop()
        module = item if inspect.ismodule(item) else inspect.getmodule(item)
        if id(item) in seen or module is None or not module.__name__.startswith("attn_course."):
            continue
        seen.add(id(item))
        if module.__name__.startswith("attn_course_exercises"):
            continue
        found[module.__name__] = module
        todo += [] if inspect.ismodule(item) else list(_called(item))
    return [found[name] for name in sorted(found)]


def course_sources(key: str) -> dict[str, str]:
    """{file: source} of the course's own code for exercise `key`: the model answer, then the source of
    each module of `course_modules`."""
    sources = {f"{key} model answer": checks.EXERCISES[key].solution_code}
    for module in course_modules(key):
        file = module.__name__.replace(".", "/") + ("/__init__.py" if hasattr(module, "__path__") else ".py")
        sources[file] = inspect.getsource(module)
    return sources


@functools.cache
def _module_form(file: str, source: str) -> Normalised:
    return normalise(source, file)


@functools.lru_cache(maxsize=64)
def course_document(key: str) -> tuple[Normalised, CodeFingerprint]:
    """The canonical forms of `course_sources(key)` one after another, and their fingerprints."""
    forms = [_module_form(file, source) for file, source in course_sources(key).items()]
    doc = Normalised([t for f in forms for t in f.tokens], [p for f in forms for p in f.places])
    doc = without_template(doc, template(key))  # as the answers are, so that their lines meet alike
    return doc, fingerprint(doc)


@functools.lru_cache(maxsize=64)
def template(key: str) -> Normalised:
    """The canonical form of exercise `key`'s stub."""
    return normalise(checks.EXERCISES[key].stub_code, "stub")


# -- the pairs ------------------------------------------------------------------------------------------


@dataclass
class _Form:
    """One canonical answer and the students who handed it in (sorted): `doc` and `found` (its
    fingerprints) are the first one's, `second` the second one's canonical form, if any."""

    students: list[str]
    doc: Normalised
    found: CodeFingerprint
    second: Normalised | None = None

    @property
    def label(self) -> str:
        first, others = self.students[0], self.students[1:]
        return first if not others else f"{first} (and {', '.join(others)}, the same code)"


@dataclass
class Pair:
    """Two answers to one exercise that score at or above the threshold.

    first, second: how the report names each side; second is COURSE for the course's own code.
    first_students, second_students: the students on each side (several who handed in the same canonical
    code; none for the course). An entry for the students who handed in the same code has one of them
    first and the rest second (`same_code`). score: see the module's docstring; runs: the matching lines.
    """

    key: str
    first: str
    second: str
    score: float
    runs: list[Run]
    first_students: list[str]
    second_students: list[str]
    same_code: bool = False


def _forms(key: str, by_student: Mapping[str, str]) -> list[_Form]:
    """The distinct canonical answers whose copydetect text is MIN_TEXT long or more, with their students."""
    found: dict[str, _Form] = {}
    for student in sorted(by_student):
        doc = without_template(normalise(by_student[student], student), template(key))
        prints = fingerprint(doc)
        if len(prints.filtered_code) < MIN_TEXT:
            continue
        form = found.setdefault(prints.filtered_code, _Form([], doc, prints))
        form.students.append(student)
        form.second = doc if len(form.students) == 2 else form.second
    return list(found.values())


def _same_code(key: str, form: _Form) -> Pair:
    """One entry for the students who handed in `form`, showing the first two's lines."""
    first, rest = form.students[0], form.students[1:]
    runs = [Run(form.doc.places, (form.second or form.doc).places)]
    return Pair(key, first, ", ".join(rest), 1.0, runs, [first], rest, same_code=True)


def similar_pairs(answers: Mapping[str, Mapping[str, str]], threshold: float = THRESHOLD) -> list[Pair]:
    """Answers at or above `threshold`, highest first: students who handed in the same canonical code (one
    entry for all of them), pairs of different answers, answers against the course's code.
    answers: {exercise key: {student: source}}."""
    pairs: list[Pair] = []
    for key, by_student in answers.items():
        forms = _forms(key, by_student)
        pairs += [_same_code(key, form) for form in forms if len(form.students) > 1]
        for a, b in itertools.combinations(forms, 2):
            score = max(shares(a.found, b.found))
            if score >= threshold:
                runs = matching_runs(a.doc, b.doc, a.found, b.found)
                pairs.append(Pair(key, a.label, b.label, score, runs, a.students, b.students))
        course, prints = course_document(key) if forms else (None, None)
        for form in forms:
            score = shares(form.found, prints)[0]
            if score >= threshold:
                runs = matching_runs(form.doc, course, form.found, prints)
                pairs.append(Pair(key, form.label, COURSE, score, runs, form.students, []))
    return sorted(pairs, key=lambda p: (-p.score, p.key, p.first, p.second))


# -- the report -----------------------------------------------------------------------------------------


def _cell(place: Place | None, with_file: bool) -> str:
    if place is None:
        return ""
    indent = len(place.text) - len(place.text.lstrip(" "))
    code = "&nbsp;" * indent + html.escape(place.text.strip()).replace("|", "&#124;")
    where = f"{place.file}:{place.line}" if with_file else str(place.line)
    return f"{where}: <code>{code}</code>"


def side_by_side(pair: Pair, swap: bool = False) -> list[str]:
    """The pair's matching lines as a Markdown table, one run after another (`swap`: second on the left);
    the course's lines name their file."""
    names, course = [pair.first, pair.second], [False, pair.second == COURSE]
    if swap:
        names, course = names[::-1], course[::-1]
    names = [html.escape(" ".join(n.split()), quote=False).replace("|", "&#124;") for n in names]
    rows = [f"| {names[0]} | {names[1]} |", "| --- | --- |"]
    for number, run in enumerate(pair.runs):
        left, right = (run.second, run.first) if swap else (run.first, run.second)
        rows += ["| ⋯ | ⋯ |"] if number else []
        for one, two in itertools.zip_longest(left, right):
            rows.append(f"| {_cell(one, course[0])} | {_cell(two, course[1])} |")
    return rows


def heading(pair: Pair) -> str:
    """The pair's exercise, both sides and score, as a report names them."""
    name = checks.EXERCISES[pair.key].name
    return f"{pair.key} `{name}`: {pair.first} and {pair.second}: {pair.score:.2f}"


def markdown(pairs: Sequence[Pair], students: int, threshold: float = THRESHOLD) -> str:
    """The similarity report for the teacher: each pair with its score and matching lines."""
    lines = [
        "# Similarity report",
        "",
        f"{students} students' answer cells compared with each other and with {COURSE} (the model answer "
        "and the whole source of the package modules the exercise's reference lives in or calls), after "
        "renaming, reformatting, comments, dead code and the order of independent statements are "
        f"normalised away (copydetect's fingerprints). Listed: pairs scoring {threshold:.2f} or more (the "
        "share of an answer found in the other; 1.00 = the same code). Very short answers are not "
        "compared. A match is a reason to look, not a verdict: it changes no grade. The integrity report "
        "lists the same matches student by student.",
        "",
    ]
    if not pairs:
        lines += ["No pair reaches the threshold.", ""]
    for pair in pairs:
        lines += [f"## {heading(pair)}", "", "The lines in matching runs:", "", *side_by_side(pair), ""]
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
    pairs: Sequence[Pair], students: int, path: str | Path, threshold: float = THRESHOLD
) -> Path:
    """Write the report of `pairs` (`similar_pairs`) among `students` students to `path`."""
    path = Path(path)
    path.write_text(markdown(pairs, students, threshold) + "\n", encoding="utf-8")
    return path
