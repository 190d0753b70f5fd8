"""Grade a class's exercise notebooks safely: ``attn-course grade SUBMISSION... --out grades.csv``.

For each submission, this process (the grader) never runs a line of the learner's code:

1. it reads the notebook as JSON and finds the exercise cells: a cell that starts with the marker
   ``# EXERCISE ch1.q2``, else one whose metadata says ``{"attn_course": {"exercise": "ch1.q2"}}``, else a
   code cell that defines the exercise's function or class at top level;
2. it builds each exercise's cases with its own `attn_course.checks` (plus the instructor's hidden ones) and
   writes their inputs to a job folder;
3. a fresh Python process -- the sandbox, with a memory cap, a file-size cap, a per-cell and a total
   timeout -- runs the chapter's imports, then only the learner's exercise cells, then calls the learner's
   functions on the inputs, and writes back plain data (tensors, numbers, strings) and a journal of its steps;
4. the grader reads that data with ``torch.load(weights_only=True)`` and judges it with its own checks.

So editing or deleting check cells, or monkeypatching ``attn_course.checks`` or torch inside the notebook,
changes nothing: the checks that judge never share a process with the learner's code. A step that kills the
sandbox (``os._exit``, a signal, a hang past its deadline) costs only its exercise: the grader notes why,
starts a fresh sandbox without that step, and carries on. The submission files are only ever read.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attn_course
from attn_course import checks

_MARKER = re.compile(r"^\s*#\s*EXERCISE\s+(ch\d+\.q\d+)\b", re.MULTILINE)
_FILENAME_CHAPTER = re.compile(r"ex0*(\d+)")
_MEMORY_ERROR = re.compile(r"MemoryError|can't allocate memory|out of memory|Cannot allocate memory")


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Seconds, megabytes, kilobytes as the names say.

    cell_timeout: each exercise cell, and each call of the learner's code on one case;
    total_timeout: the whole submission, restarts included;
    memory_mb: the sandbox's address space (RLIMIT_AS; importing torch alone maps about 3.5 GB);
    max_output_kb: what one cell or call may print; max_file_mb: the largest file the sandbox may write;
    max_notebook_mb: the largest notebook file the grader reads.
    """

    cell_timeout: float = 10.0
    total_timeout: float = 120.0
    memory_mb: int = 6144
    max_output_kb: int = 1024
    max_file_mb: int = 64
    max_notebook_mb: int = 50


@dataclass
class ExerciseGrade:
    """One exercise of one submission: points (0 or 1), the verdict in words, and notes for the instructor."""

    key: str
    name: str
    points: int
    status: str
    message: str
    notes: list[str] = field(default_factory=list)


@dataclass
class SubmissionGrade:
    """One notebook: who, what each exercise got, and anything that went wrong while grading it."""

    path: Path
    student: str
    sha256: str
    exercises: dict[str, ExerciseGrade]
    notes: list[str]
    seconds: float

    @property
    def total(self) -> int:
        return sum(g.points for g in self.exercises.values())


# ----------------------------------------------------------------------------------------------------
# Reading a submission (no code runs here)


@dataclass
class _Cell:
    index: int
    source: str
    exercise: str


def _read_notebook(path: Path, limits: Limits) -> tuple[dict | None, str | None, bytes]:
    """(notebook, None, raw bytes) or (None, why it cannot be graded, raw bytes)."""
    try:
        size = path.stat().st_size
        if size > limits.max_notebook_mb * 2**20:
            return (
                None,
                f"the file is {size / 2**20:.0f} MB, more than the {limits.max_notebook_mb} MB limit",
                b"",
            )
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"the file cannot be read ({exc.strerror or exc})", b""
    try:
        notebook = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not valid notebook JSON: not UTF-8 text ({exc.reason} at byte {exc.start})", raw
    except json.JSONDecodeError as exc:
        return None, f"not valid notebook JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", raw
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None, "not a Jupyter notebook: the JSON has no list of cells", raw
    return notebook, None, raw


def _source(cell: Any) -> str | None:
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return source if isinstance(source, str) else None


def _defines(source: str, name: str) -> bool:
    """Whether the code defines `name` at top level (def, class or assignment), read without running it."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return True
    return False


def _exercise_cells(notebook: dict, keys: Sequence[str]) -> tuple[list[_Cell], list[str]]:
    """The cells to run, in notebook order, and notes on how they were found."""
    cells, notes, found = [], [], set()
    sources = [(i, _source(c), c) for i, c in enumerate(notebook["cells"])]
    for i, source, cell in sources:
        if source is None:
            continue
        match = _MARKER.search(source)
        meta = (
            cell.get("metadata", {}).get("attn_course", {}) if isinstance(cell.get("metadata"), dict) else {}
        )
        key = match.group(1) if match else meta.get("exercise") if isinstance(meta, dict) else None
        if key in keys:
            cells.append(_Cell(i, source, key))
            found.add(key)
    for key in keys:
        if key in found:
            continue
        name = checks.EXERCISES[key].name
        for i, source, _ in sources:
            if source is not None and _defines(source, name):
                cells.append(_Cell(i, source, key))
                notes.append(
                    f"{key}: no cell starts with `# EXERCISE {key}`; graded the definition of "
                    f"`{name}` in cell {i + 1}"
                )
                found.add(key)
    cells.sort(key=lambda c: c.index)
    return cells, notes


def _chapters_of(notebook: dict | None, path: Path) -> list[int]:
    """The chapters a submission answers: from its markers, else its metadata, else its file name."""
    found: set[int] = set()
    if notebook is not None:
        for cell in notebook["cells"]:
            source = _source(cell)
            if source:
                found.update(int(m.group(1)[2 : m.group(1).index(".")]) for m in _MARKER.finditer(source))
        meta = notebook.get("metadata", {})
        chapter = (
            meta.get("attn_course", {}).get("chapter")
            if isinstance(meta, dict) and isinstance(meta.get("attn_course"), dict)
            else None
        )
        if not found and isinstance(chapter, int):
            found.add(chapter)
    if not found:
        match = _FILENAME_CHAPTER.search(path.stem)
        if match:
            found.add(int(match.group(1)))
    return sorted(c for c in found if c in checks.chapters())


def _student_id(notebook: dict | None, path: Path, id_from: str) -> str:
    if id_from == "metadata" and notebook is not None:
        meta = notebook.get("metadata", {})
        value = (
            meta.get("attn_course", {}).get("student")
            if isinstance(meta, dict) and isinstance(meta.get("attn_course"), dict)
            else None
        )
        if isinstance(value, str) and value.strip():
            return value.strip()
    return path.stem


# ----------------------------------------------------------------------------------------------------
# The sandbox (runs in the child process)


class _Timeout(BaseException):
    """Raised in the sandbox when a step runs past its time; a BaseException, so `except Exception` in the
    learner's code does not swallow it."""


class _OutputLimit(BaseException):
    """Raised in the sandbox when a step prints more than it may."""


class _CappedStream:
    """sys.stdout / sys.stderr for the learner's code: counts what is printed and stops at the limit."""

    def __init__(self, limit: int):
        self.limit, self.written, self.exceeded = limit, 0, False

    def write(self, text: str) -> int:
        self.written += len(text)
        if self.written > self.limit:
            self.exceeded = True
            raise _OutputLimit(f"printed more than {self.limit // 1024} KB")
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _switch_off(dotted: str, key: str, name: str) -> None:
    """Make a package function (or class) the learner must write refuse calls from the learner's code, with a
    message that says so. Calls from the package and the checks (e.g. another exercise's harness) still work.
    Only in the sandbox, while grading."""
    import importlib

    module_name, _, attr = dotted.rpartition(".")
    module = importlib.import_module(module_name)
    original = getattr(module, attr, None)
    if original is None:
        return

    def switched_off(*args: Any, **kwargs: Any) -> Any:
        if checks._is_learner_frame(sys._getframe(1).f_code.co_filename):
            raise RuntimeError(
                f"{dotted} is switched off while grading: {key} asks you to write `{name}` yourself"
            )
        return original(*args, **kwargs)

    setattr(module, attr, switched_off)
    package = sys.modules["attn_course"]
    if getattr(package, attr, None) is original:  # the top-level re-export, e.g. attn_course.masked_softmax
        setattr(package, attr, switched_off)


_NOBODY = 65534  # the sandbox's user and group when the grader runs as root


def server_main() -> None:
    """The fork server: import torch and the checks once, then fork a fresh sandbox for every job.

    Reads one JSON line per job from stdin, {"job": folder}; answers {"pid": ...} when the sandbox starts
    and {"pid": ..., "returncode": ...} when it ends (negative: killed by that signal). Importing torch takes
    seconds, a fork milliseconds; and every sandbox starts from the same clean state, because nothing runs
    in the server but imports.
    """
    import traceback

    import torch  # noqa: F401 - imported once here; every sandbox inherits it

    from attn_course import checks as trusted  # noqa: F401 - likewise, before any learner code exists

    for line in sys.stdin:
        job_dir = Path(json.loads(line)["job"])
        pid = os.fork()
        if pid == 0:
            try:
                _enter_sandbox(job_dir)
                _sandbox(job_dir)
            except BaseException:  # the sandbox itself failed: say why on its stderr, exit 70
                traceback.print_exc()
            finally:
                os._exit(70)
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


def _enter_sandbox(job_dir: Path) -> None:
    """In the forked child: its own session, no terminal or pipes, stderr to a file, the job's folders,
    and -- if the grader runs as root -- the unprivileged user `nobody`, so that the learner's code cannot
    signal the grader or write the submissions."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    stderr = os.open(job_dir / "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(stderr, 2)
    os.chdir(job_dir / "work")
    os.environ["TMPDIR"] = str(job_dir / "work")
    if os.geteuid() == 0 and _readable_by_anyone():
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)


def _readable_by_anyone() -> bool:
    """Whether Python, its libraries and the course package can be read by any user: only then can the
    sandbox run as `nobody` (a Python installed under /root, say, cannot be imported from by nobody)."""
    import stat
    import sysconfig

    roots = {
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        os.path.dirname(attn_course.__file__),
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    for root in roots:
        path = Path(os.path.realpath(root))
        for part in (path, *path.parents):
            try:
                mode = part.stat().st_mode
            except OSError:
                return False
            if not (mode & stat.S_IXOTH and mode & stat.S_IROTH):
                return False
    return True


def _sandbox(job_dir: Path) -> None:
    """Run the job in `job_dir`: limit the process, then run the chapter preamble, the learner's exercise
    cells, and one call step per exercise, each with a timer, logging the "start" and "end" of every step to
    journal.jsonl so the grader knows which step a crash or hang belongs to. Ends with os._exit, so nothing
    the learner's code registered (atexit handlers, threads) runs after the last step."""
    import resource

    import torch

    from attn_course import checks as trusted

    job = json.loads((job_dir / "job.json").read_text())
    limits = Limits(**job["limits"])
    memory = limits.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    file_size = limits.max_file_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    torch.set_num_threads(1)
    journal = open(job_dir / "journal.jsonl", "a", buffering=1)  # noqa: SIM115 - open until os._exit

    def log(**event: Any) -> None:
        journal.write(json.dumps(event) + "\n")
        journal.flush()

    stream = _CappedStream(limits.max_output_kb * 1024)

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"ran longer than {limits.cell_timeout:g} s")

    signal.signal(signal.SIGALRM, on_alarm)
    skip = set(job["skip"])

    def run_step(step: str, action: Any) -> None:
        if step in skip:
            return
        log(step=step, event="start")
        stream.written, stream.exceeded = 0, False
        status, error = "ok", None
        sys.stdout = sys.stderr = stream
        signal.setitimer(signal.ITIMER_REAL, limits.cell_timeout)
        try:
            action()
        except _Timeout as exc:
            status, error = "timeout", trusted.summarize_exception(exc)
        except _OutputLimit as exc:
            status, error = "output", trusted.summarize_exception(exc)
        except BaseException as exc:  # the learner's error, even SystemExit or KeyboardInterrupt: noted
            status, error = "error", trusted.summarize_exception(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        if stream.exceeded:
            status = "output"
        log(step=step, event="end", status=status, error=error)

    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    run_step("preamble", lambda: exec(compile(job["preamble"], "<set-up imports>", "exec"), namespace))
    for key in job["exercises"]:
        exercise = trusted.EXERCISES[key]
        for dotted in exercise.package:
            _switch_off(dotted, key, exercise.name)
    for cell in job["cells"]:
        code = compile(cell["source"], f"<cell {cell['index'] + 1}, {cell['exercise']}>", "exec")
        _remember_source(code.co_filename, cell["source"])
        run_step(f"cell:{cell['index']}", lambda code=code: exec(code, namespace))
    for key in job["exercises"]:
        exercise = trusted.EXERCISES[key]
        run_step(
            f"call:{key}",
            lambda exercise=exercise: _call_exercise(
                exercise, namespace, job_dir, stream, limits, torch, trusted
            ),
        )
    journal.close()
    os._exit(0)


def _remember_source(filename: str, source: str) -> None:
    """Let tracebacks quote the learner's lines (the code was compiled from a string)."""
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _call_exercise(
    exercise: checks.Exercise,
    namespace: dict,
    job_dir: Path,
    stream: _CappedStream,
    limits: Limits,
    torch: Any,
    trusted: Any,
) -> None:
    """Call the learner's answer on every case (each with its own timer); save the attempts as plain data."""
    answer = namespace.get(exercise.name)
    copied = next((d for d in exercise.package if answer is not None and answer is trusted._resolve(d)), None)
    if answer is None:
        attempts: Any = {"missing": True}
    elif copied is not None:  # the package's own (switched-off) function, imported under the exercise's name
        attempts = {"copied": copied}
    else:
        inputs = torch.load(job_dir / "inputs" / f"{exercise.key}.pt", weights_only=True)
        attempts = []
        for case_inputs in inputs:
            stream.written = 0
            signal.setitimer(signal.ITIMER_REAL, limits.cell_timeout)
            try:
                attempts.append(exercise.attempt(answer, trusted.Case("", case_inputs, {})))
            except (_Timeout, _OutputLimit) as exc:
                attempts.append({"status": "error", "error": trusted.summarize_exception(exc)})
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    out = job_dir / "outputs" / f"{exercise.key}.pt"
    torch.save(attempts, out.with_suffix(".tmp"))
    os.replace(out.with_suffix(".tmp"), out)


# ----------------------------------------------------------------------------------------------------
# Running sandboxes (in the grader)


def _describe_death(returncode: int | None, killed_for: str | None, limits: Limits) -> str:
    if killed_for == "step":
        return f"ran longer than {limits.cell_timeout:g} s and did not stop when interrupted; it was killed"
    if killed_for == "total":
        return (
            f"was still running when the submission's total time limit ({limits.total_timeout:g} s) ran out"
        )
    if returncode is None:
        return "stopped the sandbox in a way the grader cannot tell (e.g. by killing its parent process)"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        why = {
            "SIGKILL": " (by itself, or by the system for lack of memory)",
            "SIGXFSZ": f" (it wrote a file or output larger than {limits.max_file_mb} MB)",
            "SIGSEGV": " (a crash in native code)",
            "SIGABRT": " (an abort, e.g. out of memory in native code)",
        }.get(name, "")
        return f"killed the Python process with {name}{why}"
    return f"ended the Python process (exit status {returncode}, e.g. os._exit)"


def _journal(path: Path) -> list[dict]:
    events = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and isinstance(event.get("step"), str):
                events.append(event)
    return events


def _sandbox_env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(attn_course.__file__).resolve().parents[1])
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        CUDA_VISIBLE_DEVICES="",
        PYTHONHASHSEED="0",
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p),
    )
    return env


def _alive(pid: int) -> bool:
    """Whether a process (not necessarily our child) still runs; a zombie counts as ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return status.rsplit(")", 1)[-1].split()[0] != "Z"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Sandboxes:
    """Starts sandboxes for the grader, fast: a fork server imports torch once, then forks one fresh,
    limited process per run. Use as a context manager; `run` restarts the server if a submission killed it."""

    def __init__(self) -> None:
        self._server: subprocess.Popen | None = None
        self._buffer = b""

    def __enter__(self) -> Sandboxes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the fork server."""
        if self._server is not None:
            self._server.kill()
            self._server.wait()
            for stream in (self._server.stdin, self._server.stdout):
                stream.close()
            self._server = None

    def _start(self) -> None:
        self.close()
        command = [sys.executable, "-c", "from attn_course.grading import server_main; server_main()"]
        self._server = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_sandbox_env(),
            cwd=tempfile.gettempdir(),
        )
        self._buffer = b""

    def _message(self, timeout: float) -> dict | None:
        """The server's next message; {} if none came within `timeout`; None if the server is gone."""
        import select

        end = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0:
                return {}
            ready, _, _ = select.select([self._server.stdout], [], [], left)
            if ready:
                chunk = os.read(self._server.stdout.fileno(), 4096)
                if not chunk:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, job_dir: Path, limits: Limits, deadline: float) -> tuple[int | None, str | None]:
        """Run one sandbox on the job; watch its journal; return (returncode, "step"/"total" if killed).

        returncode is None when the sandbox's end could not be observed (it killed the fork server).
        """
        if self._server is None or self._server.poll() is not None:
            self._start()
        self._server.stdin.write((json.dumps({"job": str(job_dir)}) + "\n").encode())
        self._server.stdin.flush()
        started = self._message(timeout=120.0)
        if not started:
            self.close()
            raise RuntimeError(
                "the grader's fork server did not start a sandbox (is attn_course importable?)"
            )
        pid = started["pid"]
        journal, killed_for, seen, current, returncode = job_dir / "journal.jsonl", None, 0, None, None
        try:
            while True:
                if self._server is not None:
                    message = self._message(timeout=0.02)
                else:  # the server is gone (the learner's code killed it): watch the sandbox directly
                    message = {}
                    time.sleep(0.02)
                    if not _alive(pid):
                        break
                if message is None:
                    self.close()
                    continue
                if message.get("pid") == pid and "returncode" in message:
                    returncode = message["returncode"]
                    break
                events = _journal(journal)
                for event in events[seen:]:
                    current = (event["step"], time.monotonic()) if event.get("event") == "start" else None
                seen = len(events)
                now = time.monotonic()
                if (
                    killed_for is None
                    and current is not None
                    and now - current[1] > limits.cell_timeout + 2.0
                ):
                    killed_for = "step"
                elif killed_for is None and now > deadline:
                    killed_for = "total"
                if killed_for:
                    _kill_group(pid)
        finally:
            _kill_group(pid)  # also whatever the learner's code started
        return returncode, killed_for


def _run_sandbox(
    sandboxes: Sandboxes, job_dir: Path, preamble: str, cells: list[_Cell], keys: list[str], limits: Limits
) -> tuple[dict[str, dict], dict[str, str], str | None]:
    """Run the job, restarting without any step that kills the sandbox.

    Returns (the last "end" event of each step, the reason each fatal step failed, a reason for the
    whole submission if the sandbox could not run at all).
    """
    deadline = time.monotonic() + limits.total_timeout
    ended: dict[str, dict] = {}
    fatal: dict[str, str] = {}
    steps = ["preamble"] + [f"cell:{c.index}" for c in cells] + [f"call:{k}" for k in keys]
    for _ in range(len(steps) + 1):
        # Skip what killed a sandbox, what already ran out of time or printed too much, and finished calls.
        skip = sorted(fatal) + [
            s for s, e in ended.items() if s.startswith("call:") or e.get("status") in ("timeout", "output")
        ]
        job = {
            "limits": limits.__dict__,
            "preamble": preamble,
            "exercises": keys,
            "skip": skip,
            "cells": [{"index": c.index, "source": c.source, "exercise": c.exercise} for c in cells],
        }
        (job_dir / "job.json").write_text(json.dumps(job))
        (job_dir / "journal.jsonl").unlink(missing_ok=True)
        returncode, killed_for = sandboxes.run(job_dir, limits, deadline)
        started = None
        for event in _journal(job_dir / "journal.jsonl"):
            if event.get("event") == "start":
                started = event["step"]
            elif event.get("event") == "end" and event["step"] == started:
                ended[started] = event
                started = None
        if (
            started is None
            and killed_for is None
            and all(f"call:{k}" in ended or f"call:{k}" in fatal for k in keys)
        ):
            return ended, fatal, None
        if started is None:  # died outside any step: the sandbox itself failed
            if killed_for == "total":
                return ended, fatal, _describe_death(returncode, killed_for, limits)
            tail = (job_dir / "stderr.txt").read_text(errors="replace")[-600:].strip()
            return (
                ended,
                fatal,
                f"the grading sandbox failed ({_describe_death(returncode, None, limits)}): {tail}",
            )
        fatal[started] = _describe_death(returncode, killed_for, limits)
        if started == "preamble":
            return ended, fatal, f"the set-up imports {fatal[started]}"
        if killed_for == "total" or time.monotonic() > deadline:
            return ended, fatal, None
    return ended, fatal, None


# ----------------------------------------------------------------------------------------------------
# Grading


def _preamble(keys: Iterable[str]) -> str:
    chapters = sorted({int(k[2 : k.index(".")]) for k in keys})
    lines: list[str] = []
    for chapter in chapters:
        for line in checks.PREAMBLES[chapter].splitlines():
            if line.strip() and line not in lines:
                lines.append(line)
    return "\n".join(lines) + "\n"


def _hidden_for(hidden: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    return None if hidden is None else hidden.get(key)


def check_hidden(hidden: Any) -> dict[str, Any]:
    """Validate an instructor's hidden inputs: {exercise key: {"seeds": [...], "cases": [...]}}."""
    if not isinstance(hidden, dict):
        raise ValueError(
            f"hidden inputs must be a JSON object keyed by exercise, got {type(hidden).__name__}"
        )
    for key, extra in hidden.items():
        if key not in checks.EXERCISES:
            raise ValueError(
                f"hidden inputs name the exercise {key!r}, expected one of {list(checks.EXERCISES)}"
            )
        checks.EXERCISES[key].cases(extra)  # raises ValueError naming the exercise if malformed
    return hidden


def grade_submission(
    path: str | Path,
    *,
    keys: Sequence[str] | None = None,
    hidden: Mapping[str, Any] | None = None,
    limits: Limits = Limits(),
    id_from: str = "stem",
    sandboxes: Sandboxes | None = None,
) -> SubmissionGrade:
    """Grade one notebook with the master checks; never raises for anything the submission does.

    keys: the exercises to grade (default: every exercise of the chapters the notebook answers).
    hidden: extra cases per exercise (see `check_hidden`). id_from: "stem" (the file name) or "metadata"
    (the notebook's ``metadata.attn_course.student``, falling back to the file name).
    sandboxes: a running `Sandboxes` to reuse across submissions (default: one just for this call).
    """
    if sandboxes is None:
        with Sandboxes() as own:
            return grade_submission(
                path, keys=keys, hidden=hidden, limits=limits, id_from=id_from, sandboxes=own
            )
    started = time.monotonic()
    path = Path(path)
    notebook, problem, raw = _read_notebook(path, limits)
    digest = hashlib.sha256(raw).hexdigest()
    student = _student_id(notebook, path, id_from)
    if keys is None:
        keys = [e.key for c in _chapters_of(notebook, path) for e in checks.chapter(c)]
    keys = list(keys)
    notes: list[str] = []
    if problem is not None:
        grades = {k: _zero(k, f"Not graded: {problem}.") for k in keys}
        return SubmissionGrade(
            path, student, digest, grades, [f"Not graded: {problem}."], time.monotonic() - started
        )
    if not keys:
        notes.append("No exercise of the course was found in this notebook (no `# EXERCISE` cell).")
        return SubmissionGrade(path, student, digest, {}, notes, time.monotonic() - started)
    cells, found_notes = _exercise_cells(notebook, keys)
    notes += found_notes
    grades = _grade_cells(sandboxes, cells, keys, hidden, limits)
    if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        notes.append("WARNING: the submission file changed while it was being graded.")
    return SubmissionGrade(path, student, digest, grades, notes, time.monotonic() - started)


def _zero(key: str, message: str, notes: Sequence[str] = ()) -> ExerciseGrade:
    return ExerciseGrade(key, checks.EXERCISES[key].name, 0, checks.FAILED, message, list(notes))


def _grade_cells(
    sandboxes: Sandboxes,
    cells: list[_Cell],
    keys: list[str],
    hidden: Mapping[str, Any] | None,
    limits: Limits,
) -> dict[str, ExerciseGrade]:
    import torch

    cases = {k: checks.EXERCISES[k].cases(_hidden_for(hidden, k)) for k in keys}
    with tempfile.TemporaryDirectory(prefix="attn-course-grade-") as tmp:
        job_dir = Path(tmp)
        for folder in ("inputs", "outputs", "work"):
            (job_dir / folder).mkdir()
        for key, key_cases in cases.items():
            torch.save([c.inputs for c in key_cases], job_dir / "inputs" / f"{key}.pt")
        if os.geteuid() == 0:  # the sandbox runs as nobody: let it write its journal, results and scratch
            for folder in (job_dir, job_dir / "outputs", job_dir / "work"):
                os.chown(folder, _NOBODY, _NOBODY)
        ended, fatal, broken = _run_sandbox(sandboxes, job_dir, _preamble(keys), cells, keys, limits)
        grades = {}
        for key in keys:
            grades[key] = _judge(
                key,
                cases[key],
                [c for c in cells if c.exercise == key],
                ended,
                fatal,
                broken,
                job_dir,
                limits,
            )
    return grades


def _cell_note(cell: _Cell, event: dict) -> str:
    error = event.get("error") or {}
    where = f" at {error['where']}" if error.get("where") else ""
    return f"cell {cell.index + 1} raised {error.get('type')}: {error.get('message')}{where}"


def _judge(
    key: str,
    cases: list[checks.Case],
    cells: list[_Cell],
    ended: dict,
    fatal: dict,
    broken: str | None,
    job_dir: Path,
    limits: Limits,
) -> ExerciseGrade:
    import torch

    exercise = checks.EXERCISES[key]
    notes = []
    if broken is not None:
        return _zero(key, f"Not graded: {broken}.")
    if not cells:
        return _zero(
            key,
            f"No answer found: no cell starts with `{exercise.marker}` and no cell defines "
            f"`{exercise.name}`.",
        )
    for cell in cells:
        step = f"cell:{cell.index}"
        if step in fatal:
            return _zero(key, f"0 points: running its cell (cell {cell.index + 1}) {fatal[step]}.")
        event = ended.get(step, {})
        status = event.get("status")
        if status == "timeout":
            return _zero(
                key,
                f"0 points: its cell (cell {cell.index + 1}) ran longer than {limits.cell_timeout:g} s "
                "and was stopped.",
            )
        if status == "output":
            return _zero(
                key,
                f"0 points: its cell (cell {cell.index + 1}) printed more than {limits.max_output_kb} KB.",
            )
        if status == "error":
            error = event.get("error") or {}
            if _MEMORY_ERROR.search(f"{error.get('type')}: {error.get('message')}"):
                return _zero(
                    key,
                    f"0 points: its cell (cell {cell.index + 1}) ran out of memory (the limit is "
                    f"{limits.memory_mb} MB).",
                )
            notes.append(_cell_note(cell, event))
        if re.search(r"\bimportlib\b|\breload\b", cell.source):
            notes.append(
                f"cell {cell.index + 1} uses importlib/reload: check by hand that it does not bring back "
                "a package function the exercise asks the learner to write"
            )
    step = f"call:{key}"
    if step in fatal:
        return _zero(key, f"0 points: calling `{exercise.name}` {fatal[step]}.", notes)
    output = job_dir / "outputs" / f"{key}.pt"
    if not output.exists():
        return _zero(
            key,
            f"Not graded: the submission's total time limit ({limits.total_timeout:g} s) ran out "
            "before this exercise was checked.",
            notes,
        )
    try:
        attempts = torch.load(output, weights_only=True)
    except Exception as exc:  # forged or truncated results: whatever it is, it is not a valid attempt
        return _zero(
            key, f"0 points: the results of the checks could not be read back ({type(exc).__name__}).", notes
        )
    if isinstance(attempts, dict) and attempts.get("missing"):
        extra = f" ({notes[0]})" if notes else ""
        return _zero(key, f"`{exercise.name}` is not defined after running its cell{extra}.", notes)
    if isinstance(attempts, dict) and isinstance(attempts.get("copied"), str):
        return _zero(
            key,
            f"0 points: `{exercise.name}` is the package's own `{attempts['copied']}`; the "
            f"exercise is to write it yourself.",
            notes,
        )
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        return _zero(key, "0 points: the results of the checks could not be read back.", notes)
    try:
        result = exercise.judge(cases, attempts)
    except Exception as exc:  # malformed attempt data can only come from tampering in the sandbox
        return _zero(key, f"0 points: the results of the checks are malformed ({type(exc).__name__}).", notes)
    return ExerciseGrade(key, exercise.name, int(result.passed), result.status, result.message, notes)


# ----------------------------------------------------------------------------------------------------
# A batch, the gradebook and the feedback files


def collect(paths: Iterable[str | Path]) -> list[Path]:
    """Submission files: each path itself, or the .ipynb files inside a folder (sorted)."""
    found = []
    for p in map(Path, paths):
        found += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    return found


def _merge(grades: list[SubmissionGrade]) -> dict[str, list[SubmissionGrade]]:
    by_student: dict[str, list[SubmissionGrade]] = {}
    for g in grades:
        by_student.setdefault(g.student, []).append(g)
    return by_student


def _best(submissions: list[SubmissionGrade], key: str) -> ExerciseGrade | None:
    candidates = [s.exercises[key] for s in submissions if key in s.exercises]
    return max(candidates, key=lambda g: g.points) if candidates else None


def write_gradebook(grades: Sequence[SubmissionGrade], columns: Sequence[str], path: str | Path) -> Path:
    """CSV: one row per student, one column per exercise (points; empty if not submitted), and total."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *columns, "total"])
        for student, submissions in sorted(_merge(list(grades)).items()):
            row, total = [student], 0
            for key in columns:
                best = _best(submissions, key)
                row.append("" if best is None else best.points)
                total += 0 if best is None else best.points
            writer.writerow([*row, total])
    return path


def _safe_name(student: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"


def write_feedback(
    student: str, submissions: Sequence[SubmissionGrade], columns: Sequence[str], folder: str | Path
) -> Path:
    """A Markdown file for one student: a table of points, then each exercise's verdict and notes.

    Lists the exercises of `columns` that the student's submissions were graded on.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    graded = [key for key in columns if _best(list(submissions), key) is not None]
    lines = [f"# Feedback for {student}", ""]
    for s in submissions:
        lines.append(f"Submission `{s.path.name}` (sha256 {s.sha256[:12]}), graded in {s.seconds:.1f} s.")
        lines += [f"- {note}" for note in s.notes]
    lines += ["", "| Exercise | Points | Verdict |", "| --- | --- | --- |"]
    verdicts = {checks.PASSED: "correct", checks.NOT_ATTEMPTED: "not attempted"}
    for key in graded:
        best = _best(list(submissions), key)
        lines.append(f"| {key} `{best.name}` | {best.points}/1 | {verdicts.get(best.status, 'incorrect')} |")
    total = sum(_best(list(submissions), key).points for key in graded)
    lines += ["", f"**Total: {total} of {len(graded)}**", ""]
    for key in graded:
        best = _best(list(submissions), key)
        verdict = verdicts.get(best.status, "incorrect").capitalize()
        lines += [
            f"## {key}: {checks.EXERCISES[key].title}",
            "",
            f"**{verdict}.** " + best.message.replace("\n", "  \n"),
            "",
        ]
        lines += [f"- Note: {note}" for note in best.notes]
        if best.notes:
            lines.append("")
    path = folder / f"{_safe_name(student)}.md"
    path.write_text("\n".join(lines))
    return path


def grade(
    paths: Iterable[str | Path],
    *,
    out: str | Path,
    feedback: str | Path | None = None,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    limits: Limits = Limits(),
    id_from: str = "stem",
    progress: Any = None,
) -> list[SubmissionGrade]:
    """Grade every submission, write the CSV gradebook to `out` and one Markdown file per student.

    feedback: the folder for the feedback files (default: next to `out`, named after it, e.g.
    grades_feedback/). chapters: the exercises to grade (default: each notebook is graded on the chapters
    its exercise cells belong to, or, if it shows none -- no markers, unreadable -- on the batch's).
    progress(submission_grade) is called after each submission (the command line prints a line).
    """
    if id_from not in ("stem", "metadata"):
        raise ValueError(f"id_from must be 'stem' or 'metadata', got {id_from!r}")
    if hidden is not None:
        check_hidden(hidden)
    paths = collect(paths)
    if chapters is None:  # each notebook is graded on the chapters it answers, else on those of the batch
        answered = {path: _chapters_of(_read_notebook(path, limits)[0], path) for path in paths}
        batch = sorted({c for found in answered.values() for c in found})
        per_path = {
            path: [e.key for c in (found or batch) for e in checks.chapter(c)]
            for path, found in answered.items()
        }
        keys = [k for k in checks.EXERCISES if any(k in v for v in per_path.values())]
    else:
        keys = [e.key for c in chapters for e in checks.chapter(c)]
        per_path = {path: keys for path in paths}
    results = []
    with Sandboxes() as sandboxes:
        for path in paths:
            result = grade_submission(
                path, keys=per_path[path], hidden=hidden, limits=limits, id_from=id_from, sandboxes=sandboxes
            )
            results.append(result)
            if progress is not None:
                progress(result)
    out = Path(out)
    write_gradebook(results, keys, out)
    folder = Path(feedback) if feedback is not None else out.with_name(f"{out.stem}_feedback")
    for student, submissions in _merge(results).items():
        write_feedback(student, submissions, keys, folder)
    return results
