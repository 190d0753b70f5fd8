"""The operating-system jail every submission's sandbox runs in: bubblewrap (`bwrap`), where it works.

bubblewrap is the unprivileged sandbox Flatpak runs its applications in (Debian and Ubuntu: the package
`bubblewrap`). The grader starts its fork server of sandboxes (`attn_course_tools.grading.sandbox`) inside
one jail per server, built by `command`:

- no network (its own, empty network namespace), its own process, IPC and hostname namespaces, and
  `--die-with-parent`: nothing the learner's code starts outlives the grader, nothing outside can be
  signalled, and the server ends whatever a submission left running before the next one starts;
- the system (/usr and the libraries' links), Python and the course's two packages read-only, and nothing
  else of the machine: not the instructor's home, the submissions, the gradebook, the grade cache, the
  course's checkout (its solutions) or other jobs; the checks' folder is empty (the server reads the checks'
  source from the grader, `checks_sources`, so the model answers are never a file the learner's code can
  open); an empty, read-only /tmp and /dev/shm; the jobs folder the grader made for this server the only
  place it may write (each sandbox's TMPDIR is its own job's folder, emptied after the job);
- a clean environment (`--clearenv`: only what the sandbox needs), no capabilities, a new session.

Where bubblewrap is missing (macOS) or cannot make namespaces here, `status()` says so and the sandboxes
run as before, as plain processes with limits (`attn_course_tools.grading.sandbox_child`); the grader says
so once, loudly, in its output and in the integrity report. ``ATTN_COURSE_JAIL=off`` grades without the
jail on purpose; ``ATTN_COURSE_JAIL=require`` refuses to grade without it (CI sets it).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from attn_course_tools.grading.closure import package_roots

#: The environment variable that chooses: "auto" (default: the jail where it works), "off", "require".
MODE_VARIABLE = "ATTN_COURSE_JAIL"

#: What the system needs read-only inside the jail, where it exists: the dynamic loader's cache and the
#: few files Python and torch read at start.
_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
)
#: The top-level folders of the system's programs and libraries (links into /usr on current systems).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class JailError(RuntimeError):
    """Grading must run jailed (``ATTN_COURSE_JAIL=require``) and the jail does not work here."""


@dataclass(frozen=True)
class JailStatus:
    """Whether submissions run in the jail. notice: the sentence to show the instructor when they do not."""

    jailed: bool
    notice: str | None = None


def mode() -> str:
    """The jail's mode from ATTN_COURSE_JAIL: "auto", "off" or "require" (ValueError for anything else)."""
    value = os.environ.get(MODE_VARIABLE, "auto").strip().lower() or "auto"
    if value not in ("auto", "off", "require"):
        raise ValueError(f"{MODE_VARIABLE} must be auto, off or require, got {value!r}")
    return value


def _unjailed(why: str) -> JailStatus:
    return JailStatus(
        False,
        f"WARNING: submissions are graded WITHOUT the operating-system jail ({why}). Each runs in its own "
        "limited process, but its code could read what this user can read, reach the network and leave "
        "processes behind. Install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap) and grade "
        "again; docs/instructors.md says what the jail stops.",
    )


@functools.cache
def _probe(bwrap: str) -> str | None:
    """Run Python in an empty jail once: None if it works, else why not (bwrap's own words)."""
    argv = command([sys.executable, "-c", "pass"], jobs=None, env={})
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} did not run: {exc}"
    if done.returncode != 0:
        return f"{bwrap} cannot make a jail here: {done.stderr.strip()[-300:] or done.returncode}"
    return None


def status() -> JailStatus:
    """Whether this grader's sandboxes run jailed, by ATTN_COURSE_JAIL and by trying bubblewrap once.

    Raises JailError when the mode is "require" and the jail does not work."""
    chosen = mode()
    if chosen == "off":
        found: JailStatus = _unjailed(f"{MODE_VARIABLE}=off")
    elif (bwrap := shutil.which("bwrap")) is None:
        found = _unjailed("bubblewrap's `bwrap` is not installed")
    else:
        why = _probe(bwrap)
        found = JailStatus(True) if why is None else _unjailed(why)
    if chosen == "require" and not found.jailed:
        raise JailError(f"{MODE_VARIABLE}=require, but {found.notice}")
    return found


def _system_binds() -> list[str]:
    """The system read-only: /usr, the top-level links into it (as links), the few files of /etc."""
    args: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC:
        args += ["--ro-bind-try", path, path]
    return args


def _python_folders() -> list[str]:
    """Python's folders: its installation, the environment's prefix, its libraries, the real place of its
    executable (a virtual environment's `python` is a link)."""
    paths = sysconfig.get_paths()
    folders = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        paths["stdlib"],
        paths["platstdlib"],
        paths["purelib"],
        paths["platlib"],
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    return sorted(os.path.realpath(f) for f in folders if os.path.isdir(f))


def course_binds() -> list[str]:
    """The course's packages read-only, at the paths Python imports them from, with the checks' folder
    replaced by an empty one (the server gets the checks' source from the grader: `checks_sources`)."""
    args: list[str] = []
    for root in package_roots().values():
        args += ["--ro-bind", str(root), str(root)]
    checks = package_roots()["attn_course_exercises"]
    return args + ["--tmpfs", str(checks), "--remount-ro", str(checks)]


def command(
    argv: list[str], jobs: Path | None, env: Mapping[str, str], privileged: bool | None = None
) -> list[str]:
    """`argv` run in a jail (see the module's docstring): `jobs` the one folder it may write (None: none),
    `env` its whole environment; `privileged`: whether bwrap will run as root (default: whether this
    process does). The paths are the same inside and out."""
    # bwrap itself starts with an empty environment too: its own process is the jail's parent, whose
    # environment a jailed process could read in /proc
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [shutil.which("env") or "/usr/bin/env", "-i", bwrap, "--unshare-ipc", "--unshare-pid"]
    args += ["--unshare-net", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--hostname", "sandbox"]
    if not (os.geteuid() == 0 if privileged is None else privileged):  # an unprivileged bwrap needs a
        args += ["--unshare-user"]  # user namespace; as root, dropping every capability keeps it in
    args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv"]
    # /tmp and /dev/shm read-only (each sandbox's TMPDIR is its own job's folder): a file left there
    # would reach the next submission the server runs
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    args += _system_binds()
    for folder in _python_folders():
        args += ["--ro-bind", folder, folder]
    args += course_binds()
    if jobs is not None:
        args += ["--bind", str(jobs), str(jobs), "--chdir", str(jobs)]
    else:
        args += ["--chdir", "/tmp"]
    args += ["--remount-ro", "/tmp", "--remount-ro", "/dev/shm"]  # last: the binds above may lie in /tmp
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args + ["--", *argv]


def checks_sources() -> dict[str, tuple[str, str, bool]]:
    """The checks' modules as the jailed server imports them: {module name: (source, file path, whether it
    is a package)}, read here by the grader (the jail hides the files themselves)."""
    folder = package_roots()["attn_course_exercises"]
    found = {}
    for path in sorted(folder.glob("*.py")):
        package = path.name == "__init__.py"
        name = "attn_course_exercises" if package else f"attn_course_exercises.{path.stem}"
        found[name] = (path.read_text(encoding="utf-8"), str(path), package)
    return found
