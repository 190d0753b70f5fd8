"""In the sandbox, keep the learner's code from using the course's own answers, however it reaches them.

The sandbox switches off the package functions an exercise asks the learner to write and the checks'
references (`attn_course_tools.grading.sandbox_child`), but the original functions still live in the process:
in the wrappers' closures, in other modules that imported them by name, in the checks' objects. `Guard`
closes the ways to them while a learner step runs:

- an audit hook (which Python code cannot remove) refuses, when the learner's code asks, the calls that
  find objects or frames (`gc.get_objects`, `gc.get_referrers`, `gc.get_referents`, `sys._getframe` and
  with it `inspect.currentframe`, `sys._current_frames`), that would switch off the watch (`sys.settrace`,
  `sys.setprofile`) or copy a function's code (a new code object, assigning `__code__`);
- a trace function notes every call of a protected function (a package original, or any function of the
  checks' chapter modules) made on the learner's behalf, whatever route found it (a closure, a module in
  `sys.modules`, `importlib` under a computed name, `inspect`, a traceback's frames);
- `answer_is_protected` says when the answer itself is a protected function (or wraps one);
- the same audit hook refuses opening the course's own files (the checks, the package's and the grader's
  source: jailed, the checks' folder is empty anyway) and reading the process's memory (`ctypes.string_at`,
  `/proc/<pid>/mem`), and marks the exercise; and it refuses, without marking it, what no exercise needs and
  what the jail stops where there is one: starting processes, network connections, loading native
  libraries, signalling another process, reading another process's environment, writing outside the
  submission's own folder.

Each of these marks the exercise of the running step; the grader scores it 0 and says why. A call counts
as the learner's when the nearest frame above it that is neither Python's or torch's library nor the
checks' own machinery is the learner's; the package calling its own helpers, and the checks calling
their references, are not.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
import threading
from collections.abc import Iterator
from types import CodeType, FrameType
from typing import Any

import attn_course
import attn_course_exercises as checks
import attn_course_tools

_PACKAGE = os.path.dirname(os.path.realpath(attn_course.__file__)) + os.sep
_CHECKS = os.path.dirname(os.path.realpath(checks.__file__)) + os.sep
#: The instructor's tools, the grader and this sandbox among them: never the learner's code.
_TOOLS = os.path.dirname(os.path.realpath(attn_course_tools.__file__)) + os.sep
#: The model answers as notebooks, where the course runs from its checkout (outside the jail's view).
_SOLUTIONS = os.path.join(os.path.dirname(_PACKAGE[:-1]), "solutions") + os.sep

#: Audit events refused when the learner's code raises them, and what each is in words.
REFUSED = {
    "gc.get_objects": "`gc.get_objects()`",
    "gc.get_referrers": "`gc.get_referrers()`",
    "gc.get_referents": "`gc.get_referents()`",
    "sys._getframe": "`sys._getframe()` (or `inspect.currentframe()`)",
    "sys._current_frames": "`sys._current_frames()`",
    "sys.settrace": "`sys.settrace()`",
    "sys.setprofile": "`sys.setprofile()`",
    "code.__new__": "a new code object (`code.replace`, `types.CodeType`)",
    "ctypes.string_at": "`ctypes.string_at()`, which reads the process's memory",
    "ctypes.wstring_at": "`ctypes.wstring_at()`, which reads the process's memory",
    "ctypes.cdata": "`ctypes` `from_address()`, which reads the process's memory",
}

#: Audit events refused when the learner's code raises them, without marking the exercise: nothing an
#: exercise needs, and what the jail stops where there is one.
OFF = {
    "subprocess.Popen": "starting a process",
    "os.system": "starting a process",
    "os.exec": "starting a process",
    "os.posix_spawn": "starting a process",
    "os.spawn": "starting a process",
    "os.fork": "starting a process",
    "os.forkpty": "starting a process",
    "pty.spawn": "starting a process",
    "socket.connect": "a network connection",
    "socket.bind": "a network connection",
    "socket.sendto": "a network connection",
    "ctypes.dlopen": "loading a native library",
}

#: Files of /proc that hold another process's secrets or this one's memory.
_PROC = re.compile(
    r"^/proc/(?:self|thread-self|\d+)/(?:task/\d+/)?(mem|maps|smaps|pagemap|environ)$|^/proc/\d+/"
)


def _nested(code: CodeType) -> Iterator[CodeType]:
    """A code object and every code object defined inside it (lambdas, inner functions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _nested(const)


def codes_of(obj: Any, depth: int = 0) -> list[CodeType]:
    """The code objects an object runs: a function's (with those nested in it and the functions its closure
    holds), a partial's or a wrapper's function's, a bound method's, every method of a class."""
    if depth > 4 or obj is None:
        return []
    if isinstance(obj, functools.partial):
        return codes_of(obj.func, depth + 1)
    if isinstance(obj, (staticmethod, classmethod)) or hasattr(obj, "__func__"):
        return codes_of(obj.__func__, depth + 1)
    if isinstance(obj, type):
        return [c for value in vars(obj).values() for c in codes_of(value, depth + 1)]
    code = getattr(obj, "__code__", None)
    if not isinstance(code, CodeType):
        return []
    found = list(_nested(code))
    for cell in getattr(obj, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            if inspect.isfunction(cell.cell_contents) or isinstance(cell.cell_contents, functools.partial):
                found += codes_of(cell.cell_contents, depth + 1)
    return found + codes_of(getattr(obj, "__wrapped__", None), depth + 1)


def _course_only(codes: dict[CodeType, str]) -> dict[CodeType, str]:
    """The course's own code objects among `codes` (a torch decorator's wrapper is shared by many): those
    of the learner's library and of the exercises' checks, where the answers live."""
    course = (_PACKAGE, _CHECKS)
    return {c: name for c, name in codes.items() if os.path.realpath(c.co_filename).startswith(course)}


def checks_codes() -> dict[CodeType, str]:
    """{code: name} of the functions of the checks' chapter modules and of every exercise's reference, case
    builder and known mistakes, the wrong code of a class exercise's mistakes included (call it before the
    sandbox blanks them). The checks' other classes (a scripted model the harness hands to the learner's
    code, say) are not among them."""
    found: dict[CodeType, str] = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("attn_course_exercises.") and name.split(".")[-1] not in ("core", "inputs"):
            for attr, value in vars(module).items():
                if inspect.isfunction(value) and value.__module__ == name:
                    found[value.__code__] = f"{name}.{attr}"
    for exercise in checks.EXERCISES.values():
        mistakes = [m.wrong if m.wrong is not None else m.variant for m in exercise.mistakes]
        for part in [exercise._reference, exercise._build, *mistakes]:
            found.update(dict.fromkeys(codes_of(part), f"the checks' reference for {exercise.key}"))
    return _course_only(found)


#: {code: (dotted name, the exercises whose answer it is, or None for every exercise)}.
Protected = dict[CodeType, tuple[str, "frozenset[str] | None"]]


def protected_codes(
    originals: dict[str, tuple[Any, frozenset[str] | None]], checks_part: dict[CodeType, str]
) -> Protected:
    """What the learner's code may not run: the checks' code (see `checks_codes`), in every exercise, and
    the package originals the sandbox switched off ({dotted name: (original, exercises)}), in the exercises
    that ask the learner to write them (chapter 2's answer may call the package's `masked_softmax`, which
    chapter 1 asks for)."""
    found: Protected = {code: (name, None) for code, name in checks_part.items()}
    for dotted, (original, keys) in originals.items():
        found.update(dict.fromkeys(_course_only(dict.fromkeys(codes_of(original), dotted)), (dotted, keys)))
    return found


@functools.lru_cache(maxsize=4096)
def _kind(filename: str) -> str:
    """Who a frame's code belongs to: "import" (the import system), "learner", "package" (attn_course outside
    its checks, and attn_course_tools, the grader) or "machinery" (Python's and torch's library, and the
    checks)."""
    if filename.startswith("<frozen"):
        return "import"
    path = os.path.realpath(filename) if not filename.startswith("<") else filename
    if path.startswith(_TOOLS):
        return "package"
    if checks.is_learner_frame(filename):
        return "learner"
    return "package" if path.startswith(_PACKAGE) else "machinery"


def is_learner_file(filename: str) -> bool:
    """Whether code of `filename` is the learner's: `checks.is_learner_frame`, never the tools' own."""
    return _kind(filename) == "learner"


def by_learner(frame: FrameType | None) -> bool:
    """Whether the call made from `frame` is the learner's: the nearest frame, from `frame` outwards, that
    is not machinery (see `_kind`) belongs to the learner's code, not to the package or the grader."""
    while frame is not None:
        kind = _kind(frame.f_code.co_filename)
        if kind != "machinery":
            return kind == "learner"
        frame = frame.f_back
    return False


def course_file(path: str) -> tuple[str | None, str]:
    """What opening `path` (a real path: /proc/self is this process's number) would reach, in words,
    and which kind of thing it is: "answers" (the checks, the solutions), "source" (the package's and the
    grader's), "memory" (this process's) or "process" (another process's files); (None, "") for a file
    the learner's code may open."""
    top = os.path.dirname(_PACKAGE[:-1])
    if path.startswith(_CHECKS) or path.startswith(_SOLUTIONS):
        return f"the course's model answers (`{os.path.relpath(path, top)}`)", "answers"
    for root in (_PACKAGE, _TOOLS):
        if path.startswith(root):
            where = os.path.relpath(path, os.path.dirname(root[:-1]))
            return f"the course's own source (`{where}`)", "source"
    match = _PROC.match(path)
    if match is None:
        return None, ""
    if match.group(1) in ("mem", "maps", "smaps", "pagemap") and path.startswith(f"/proc/{os.getpid()}/"):
        return f"`{path}`, this process's memory", "memory"
    return f"`{path}`, another process's files", "process"


def _writes(args: tuple) -> bool:
    """Whether an "open" audit event's (path, mode, flags) open for writing."""
    mode, flags = (list(args) + [None, None])[1:3]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    write = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    return isinstance(flags, int) and bool(flags & write)


def _opened_by_learner(frame: FrameType | None, through_imports: bool) -> bool:
    """`by_learner`, but, if `through_imports`, looking through the import system's frames too."""
    while frame is not None:
        kind = _kind(frame.f_code.co_filename)
        if kind == "learner":
            return True
        if kind == "package" or (kind == "import" and not through_imports):
            return False
        frame = frame.f_back
    return False


class Guard:
    """Watches the learner's steps (see the module's docstring). `found`: {exercise key: why it scores 0}."""

    def __init__(self, protected: Protected, writable: str | os.PathLike | None = None):
        """protected: what the learner's code may not run (`protected_codes`); writable: the one folder
        it may write in (its job's folder), None for anywhere."""
        self.protected = protected
        self.writable = None if writable is None else os.path.realpath(writable) + os.sep
        self._by_id = {id(code): found for code, found in protected.items()}  # cheaper than hashing code
        self.key: str | None = None
        self.found: dict[str, str] = {}
        self._busy = False
        #: The course's modules already loaded: running one again (importlib.reload, a loader from its
        #: file) would bring back the originals the sandbox switched off.
        self.loaded = {
            os.path.realpath(m.__file__)
            for m in list(sys.modules.values())
            if isinstance(getattr(m, "__file__", None), str)
            and os.path.realpath(m.__file__).startswith((_PACKAGE, _CHECKS, _TOOLS))
        }

    def install(self) -> None:
        """Start watching (for good: the audit hook stays; it acts only while a step is watched)."""
        sys.addaudithook(self._audit)
        sys.settrace(self._trace)
        threading.settrace(self._trace)

    @contextlib.contextmanager
    def watching(self, key: str) -> Iterator[None]:
        """Watch a step of exercise `key`."""
        self.key = key
        try:
            yield
        finally:
            self.key = None

    def _note(self, why: str) -> None:
        if self.key is not None:
            self.found.setdefault(self.key, why)

    def _trace(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.key is not None:
            found = self._by_id.get(id(frame.f_code))
            if found is not None and _answers(found, self.key) and by_learner(frame.f_back):
                self._note(f"your code called the course's own `{found[0]}` while grading")

    def _audit(self, event: str, args: tuple) -> None:
        if self.key is None or self._busy:
            return
        if event == "open":
            self._opening(args[0])
            if _writes(args) and not self._may_write(args[0]):
                self._off("writing outside the submission's own folder")
            return
        if event in OFF:
            self._off(OFF[event])
            return
        if event in ("os.kill", "os.killpg") and args and args[0] not in (0, os.getpid()):
            self._off("signalling another process")  # the grader's fork server, above all
            return
        what = REFUSED.get(event)
        if what is None and event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
            what = "an assignment to a function's `__code__`"
        if what is None:
            return
        self._busy = True
        try:
            caller = sys._getframe(1)
            # the standard library asks for frames for itself (namedtuple, typing, logging): allowed, except
            # inspect's, which hands them to its caller
            own = event == "sys._getframe" and _kind(caller.f_code.co_filename) == "machinery"
            learner = by_learner(caller) and not (
                own and not caller.f_code.co_filename.endswith("inspect.py")
            )
        finally:
            self._busy = False
        if learner:
            self._note(f"your code called {what}, which can reach the course's own answers")
            raise RuntimeError(f"{what} is off while grading: it can reach the course's own answers")

    def _opening(self, path: Any) -> None:
        """Refuse, and mark the exercise, when the learner's code opens the course's own files or this
        process's memory; refuse another process's files (see `course_file`)."""
        if isinstance(path, int):
            return
        self._busy = True
        try:
            real = os.path.realpath(os.fsdecode(path))
            what, kind = course_file(real)
            # the checks are never imported from their files in the sandbox, and a loaded module is never
            # imported again: whoever opens one (the import system included, on the learner's behalf, as
            # importlib.reload does) is the learner's code
            again = kind == "answers" or real in self.loaded
            learner = what is not None and _opened_by_learner(sys._getframe(2), again)
        finally:
            self._busy = False
        if not learner:
            return
        if kind != "process":
            self._note(f"your code opened {what} while grading")
        raise PermissionError(f"{what} cannot be opened while grading")

    def _may_write(self, path: Any) -> bool:
        if self.writable is None or isinstance(path, int):
            return True
        return os.path.realpath(os.fsdecode(path)).startswith(self.writable)

    def _off(self, what: str) -> None:
        self._busy = True
        try:
            learner = by_learner(sys._getframe(2))
        finally:
            self._busy = False
        if learner:
            raise PermissionError(f"{what} is off while grading")

    def answer_is_protected(self, answer: Any, key: str) -> str | None:
        """The dotted name of the function protected in exercise `key` that the answer is (or wraps, or
        calls from its class), else None."""
        with contextlib.suppress(Exception):  # whatever the learner's object does when looked at
            parts = list(answer.__mro__) if isinstance(answer, type) else [answer, type(answer).__call__]
            for code in (c for part in parts for c in codes_of(part)):
                found = self._by_id.get(id(code))
                if found is not None and _answers(found, key):
                    return found[0]
        return None


def _answers(found: tuple[str, frozenset[str] | None], key: str | None) -> bool:
    """Whether a protected function is an answer of exercise `key` (the checks' code is, of every one)."""
    return found[1] is None or key in found[1]
