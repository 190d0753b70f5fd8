"""Run a submission's job in sandboxes, from the grader: start them, watch them, restart past fatal steps.

The grader writes a job folder (`Sandboxes.job_folder`), `run_job` runs it in a sandbox forked by the
`Sandboxes` fork server (see `attn_course_tools.grading.sandbox_child`) and reads back the journal: how each
step ended, and why each step that killed its sandbox is fatal. The fork server runs in the operating-system
jail where bubblewrap works (`attn_course_tools.grading.jail`), with the server's jobs folder the only place
it may write. No learner code runs in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from attn_course_tools.grading import jail
from attn_course_tools.grading.closure import package_roots
from attn_course_tools.grading.reading import ExerciseCell
from attn_course_tools.grading.records import Limits, Step
from attn_course_tools.grading.sandbox_child import (
    JAILED_VARIABLE,
    NOBODY,
    SERVER_COMMAND,
    drops_to_nobody,
    process_namespace,
)

#: Seconds a step may overrun its own timer (which the sandbox enforces) before the grader kills it.
_GRACE = 2.0
#: Seconds between two looks at a running sandbox.
_POLL = 0.02


@contextlib.contextmanager
def job_folder(
    inputs: Mapping[str, list[Any]], root: Path | None = None, owner: int | None = None
) -> Iterator[Path]:
    """A temporary job folder in `root` (default: the system's temporary folder): inputs/{key}.pt (each
    exercise's case inputs), outputs/ and work/ for the sandbox to write (owned by the user id `owner` if
    given: the sandbox's, when it runs as another user). Removed on exit."""
    with tempfile.TemporaryDirectory(prefix="attn-course-grade-", dir=root) as tmp:
        job_dir = Path(tmp)
        for folder in ("inputs", "outputs", "work"):
            (job_dir / folder).mkdir()
        for key, key_inputs in inputs.items():
            torch.save(key_inputs, job_dir / "inputs" / f"{key}.pt")
        if owner is not None:
            for folder in (job_dir, job_dir / "outputs", job_dir / "work"):
                os.chown(folder, owner, owner)
        yield job_dir


def output_path(job_dir: Path, key: str) -> Path:
    """Where the sandbox saves the attempts of exercise `key`."""
    return job_dir / "outputs" / f"{key}.pt"


def describe_death(returncode: int | None, killed_for: str | None, limits: Limits) -> str:
    """Why a sandbox ended, in words: killed by the grader ("step"/"total"), by a signal, or by an exit."""
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


def read_journal(path: Path) -> list[tuple[Step, dict]]:
    """The sandbox's journal: (step, event) per well-formed line; anything else (it is written where the
    learner's code runs) is skipped."""
    events = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            step = Step.from_json(event.get("step")) if isinstance(event, dict) else None
            if step is not None:
                events.append((step, event))
    return events


#: Variables of the grader's environment the sandbox may see (paths only: never a secret).
_PASSED = ("LD_LIBRARY_PATH", "ATEN_CPU_CAPABILITY")


def _sandbox_env(jailed: bool) -> dict[str, str]:
    """The fork server's whole environment, built afresh (nothing of the grader's but `_PASSED`): one
    thread, no GPU, and the folders the grader imports the course's packages from first on its path (a
    checkout or site-packages alike), so it grades with the same code."""
    roots = dict.fromkeys(str(folder.parent) for folder in package_roots().values())
    env = {name: os.environ[name] for name in _PASSED if name in os.environ}
    env.update(
        PATH="/usr/local/bin:/usr/bin:/bin",
        HOME="/tmp",
        LANG="C.UTF-8",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        CUDA_VISIBLE_DEVICES="",
        PYTHONHASHSEED="0",
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONPATH=os.pathsep.join(roots),
    )
    if jailed:
        env[JAILED_VARIABLE] = process_namespace()
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


def overrun(step_started: float | None, now: float, deadline: float, limits: Limits) -> str | None:
    """Why the grader must kill a sandbox at time `now`: "step" if the running step (started at
    `step_started`, None between steps) overran its timer by more than the grace the sandbox has to stop
    it itself, "total" if the submission's deadline passed, else None. Times in seconds, one clock."""
    if step_started is not None and now - step_started > limits.cell_timeout + _GRACE:
        return "step"
    if now > deadline:
        return "total"
    return None


class Sandboxes:
    """Starts sandboxes for the grader, fast: a fork server imports torch once, then forks one fresh,
    limited process per run. Use as a context manager; `run` restarts the server if a submission killed it.

    The server runs in the operating-system jail where it works (`jail.status()`; `jail` says what it
    stops), with a jobs folder of its own, where `job_folder` makes each job's folder: the only place its
    sandboxes may write. `jail`: that status, for the grader to report.
    """

    def __init__(self) -> None:
        self.jail = jail.status()
        self._server: subprocess.Popen | None = None
        self._buffer = b""
        self.jobs = Path(tempfile.mkdtemp(prefix="attn-course-jobs-"))
        os.chmod(self.jobs, 0o711)  # a sandbox running as nobody reaches its own job's folder, lists none

    def __enter__(self) -> Sandboxes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the fork server (and, jailed, everything in its jail) and remove the jobs folder."""
        self._stop()
        shutil.rmtree(self.jobs, ignore_errors=True)

    def _stop(self) -> None:
        if self._server is not None:
            self._server.kill()
            self._server.wait()
            for stream in (self._server.stdin, self._server.stdout):
                stream.close()
            self._server = None

    @contextlib.contextmanager
    def job_folder(self, inputs: Mapping[str, list[Any]]) -> Iterator[Path]:
        """A job's folder in this server's jobs folder (see the module-level `job_folder`). On exit the
        jobs folder is emptied, so that nothing a submission left there reaches the next one."""
        owner = NOBODY if drops_to_nobody(self.jail.jailed) else None
        try:
            with job_folder(inputs, self.jobs, owner) as job_dir:
                yield job_dir
        finally:
            for entry in self.jobs.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)

    def _start(self) -> None:
        self._stop()
        self.jobs.mkdir(mode=0o711, exist_ok=True)
        argv = [sys.executable, "-c", SERVER_COMMAND]
        env = _sandbox_env(self.jail.jailed)
        if self.jail.jailed:
            argv = jail.command(argv, self.jobs, env)
        self._server = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self.jobs,
            start_new_session=True,
        )
        self._server.stdin.write((json.dumps(jail.checks_sources()) + "\n").encode())
        self._server.stdin.flush()
        self._buffer = b""

    def _message(self, timeout: float) -> dict | None:
        """The server's next message; {} if none came within `timeout`; None if the server is gone."""
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

    def _fork(self, job_dir: Path) -> int:
        """Ask the fork server (started if needed) for a sandbox on the job; its pid."""
        if self._server is None or self._server.poll() is not None:
            self._start()
        self._server.stdin.write((json.dumps({"job": str(job_dir)}) + "\n").encode())
        self._server.stdin.flush()
        started = self._message(timeout=120.0)
        if not started:
            self._stop()
            raise RuntimeError(
                "the grader's fork server did not start a sandbox (is attn_course importable?)"
            )
        return started["pid"]

    def _ended(self, pid: int) -> tuple[bool, int | None]:
        """Wait a moment for the sandbox `pid`: (whether it ended, its returncode if the server said)."""
        if self._server is None:  # the server is gone (the learner's code killed it): watch the sandbox
            if self.jail.jailed:  # ... which went with the server's jail
                return True, None
            time.sleep(_POLL)
            return not _alive(pid), None
        message = self._message(timeout=_POLL)
        if message is None:
            self._stop()
        elif message.get("pid") == pid and "returncode" in message:
            return True, message["returncode"]
        return False, None

    def run(self, job_dir: Path, limits: Limits, deadline: float) -> tuple[int | None, str | None]:
        """Run one sandbox on the job; watch its journal; return (returncode, "step"/"total" if killed).

        returncode is None when the sandbox's end could not be observed (it killed the fork server).
        """
        pid = self._fork(job_dir)
        journal, killed_for, seen, step_started = job_dir / "journal.jsonl", None, 0, None
        try:
            while True:
                ended, returncode = self._ended(pid)
                if ended:
                    return returncode, killed_for
                events = read_journal(journal)
                for _, event in events[seen:]:  # when the running step started, as this process saw it
                    step_started = time.monotonic() if event.get("event") == "start" else None
                seen = len(events)
                if killed_for is None:
                    killed_for = overrun(step_started, time.monotonic(), deadline, limits)
                if killed_for:
                    self._kill(pid)
        finally:
            if not self.jail.jailed:  # jailed, the server ends what the learner's code started
                _kill_group(pid)

    def _kill(self, pid: int) -> None:
        """Kill the sandbox `pid` and what it started: jailed, the pid is the jail's own, so the server and
        its whole jail go (the next run starts a fresh one)."""
        if self.jail.jailed:
            self._stop()
        else:
            _kill_group(pid)


@dataclass
class JobResult:
    """What the sandbox runs of one job came to.

    ended: the last "end" event of each step that finished; fatal: why each step that killed its sandbox
    (or was killed) failed; broken: why the whole submission could not be run, or None.
    """

    ended: dict[Step, dict] = field(default_factory=dict)
    fatal: dict[Step, str] = field(default_factory=dict)
    broken: str | None = None


def _write_job(
    job_dir: Path,
    preamble: str,
    cells: Sequence[ExerciseCell],
    keys: Sequence[str],
    limits: Limits,
    skip: list[Step],
) -> None:
    """job.json, what the sandbox reads: its limits, the set-up imports, the cells, the steps to skip."""
    job = {
        "limits": limits.__dict__,
        "preamble": preamble,
        "exercises": list(keys),
        "skip": [step.to_json() for step in skip],
        "cells": [{"index": c.index, "source": c.source, "exercise": c.exercise} for c in cells],
    }
    (job_dir / "job.json").write_text(json.dumps(job))
    (job_dir / "journal.jsonl").unlink(missing_ok=True)


def _unfinished(job_dir: Path, ended: dict[Step, dict]) -> Step | None:
    """Record the journal's finished steps in `ended`; return the step that started and never ended."""
    started = None
    for step, event in read_journal(job_dir / "journal.jsonl"):
        if event.get("event") == "start":
            started = step
        elif event.get("event") == "end" and step == started:
            ended[started] = event
            started = None
    return started


def run_job(
    sandboxes: Sandboxes,
    job_dir: Path,
    preamble: str,
    cells: Sequence[ExerciseCell],
    keys: Sequence[str],
    limits: Limits,
) -> JobResult:
    """Run the job, restarting without any step that kills the sandbox, until every call step is done."""
    deadline = time.monotonic() + limits.total_timeout
    result = JobResult()
    for _ in range(len(cells) + len(keys) + 2):  # at most one restart per step
        # Skip what killed a sandbox, what already ran out of time or printed too much, and finished calls.
        skip = list(result.fatal) + [
            s for s, e in result.ended.items() if s.kind == "call" or e.get("status") in ("timeout", "output")
        ]
        _write_job(job_dir, preamble, cells, keys, limits, skip)
        returncode, killed_for = sandboxes.run(job_dir, limits, deadline)
        started = _unfinished(job_dir, result.ended)
        calls = [Step.call(k) for k in keys]
        if (
            started is None
            and killed_for is None
            and all(s in result.ended or s in result.fatal for s in calls)
        ):
            return result
        if started is None:  # died outside any step: the sandbox itself failed
            if killed_for == "total":
                result.broken = describe_death(returncode, killed_for, limits)
            else:
                tail = (job_dir / "stderr.txt").read_text(errors="replace")[-600:].strip()
                death = describe_death(returncode, None, limits)
                result.broken = f"the grading sandbox failed ({death}): {tail}"
            return result
        result.fatal[started] = describe_death(returncode, killed_for, limits)
        if started.kind == "preamble":
            result.broken = f"the set-up imports {result.fatal[started]}"
            return result
        if killed_for == "total" or time.monotonic() > deadline:
            return result
    return result
