"""Red team: a determined student against the grader's jail, its guard and its grade cache.

Each hostile submission tries what a student could do from a notebook cell -- read the grader's
environment, reach the network, write the course's files, the gradebook's folder or the grade cache, leave
a process running, read the model answers from disk or from the process's memory -- and each test checks
both that the attempt failed (the exercise is graded as if it had not been made, or scores 0 with the reason
where the attempt itself is cheating) and that nothing outside changed. The jail's tests need bubblewrap
(`.ci/run` installs it and sets ATTN_COURSE_JAIL=require, so CI fails rather than skips without it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from grading_cases import LIMITS, Q1, Q2, Q3, notebook, write

from attn_course_tools.grading import (
    ExerciseGrade,
    GradeCache,
    Sandboxes,
    SubmissionGrade,
    grade,
    grade_submission,
    jail,
)
from attn_course_tools.grading.closure import package_roots
from attn_course_tools.grading.sandbox_child import _readable_by_anyone

CHECKS_FILE = package_roots()["attn_course_exercises"] / "ch1_masking.py"
SECRET = "attn-course-red-team-secret"
#: A sleep no other program on the machine runs: a process left behind is found by its arguments.
LEFTOVER = "977.25"


def _jailed() -> bool:
    return jail.status().jailed


needs_jail = pytest.mark.skipif(
    jail.mode() != "require" and not _jailed(), reason="bubblewrap cannot make a jail on this machine"
)


@contextlib.contextmanager
def listening() -> Iterator[socket.socket]:
    """A TCP server on the loopback that counts who connects (nobody should)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def connections(server: socket.socket) -> int:
    count = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            server.accept()[0].close()
            count += 1
    return count


def leftovers() -> list[int]:
    """The processes still running `sleep LEFTOVER` (or a Python sleeping as long)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if LEFTOVER in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
    return found


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the jail itself, without the grader: what a process in it can do ------------------------------------

ESCAPES = f"""
import json, os, socket, subprocess, sys
found = {{}}
found["environment"] = os.environ.get("ATTN_RED_TEAM")
try:
    found["grader_environment"] = "{SECRET}" in open(f"/proc/{{os.getppid()}}/environ").read()
except OSError as exc:
    found["grader_environment"] = False
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    found["network"] = True
except OSError:
    found["network"] = False
for name, path in (("course", sys.argv[2]), ("outside", sys.argv[3])):
    try:
        with open(path, "a") as f:
            f.write("# written from the jail")
        found[name] = True
    except OSError:
        found[name] = False
try:
    found["checks"] = "solution=" in open(sys.argv[2]).read()
except OSError:
    found["checks"] = False
found["home"] = os.path.exists(os.path.expanduser("~{os.environ.get("USER", "root")}/.bashrc"))
subprocess.Popen(["sleep", "{LEFTOVER}"], start_new_session=True)
print(json.dumps(found))
"""


@needs_jail
def test_a_process_in_the_jail_sees_no_secret_no_network_no_writable_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTN_RED_TEAM", SECRET)
    outside = tmp_path / "gradebook" / "grades.csv"
    outside.parent.mkdir()
    outside.write_text("student,total\n")
    before = digest(CHECKS_FILE), digest(outside)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    with listening() as server:
        port = server.getsockname()[1]
        argv = [sys.executable, "-c", ESCAPES, str(port), str(CHECKS_FILE), str(outside)]
        done = subprocess.run(
            jail.command(argv, jobs, {"PATH": "/usr/bin:/bin"}), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        assert connections(server) == 0
    assert found == {
        "environment": None,
        "grader_environment": False,
        "network": False,
        "course": False,
        "outside": False,
        "checks": False,
        "home": False,
    }
    assert (digest(CHECKS_FILE), digest(outside)) == before
    time.sleep(0.2)
    assert leftovers() == []  # the jail's processes ended with it


# -- a hostile notebook, through the whole grader --------------------------------------------------------

#: Cell code that tries each escape and, if any worked, leaves the exercise undefined (so a full mark says
#: that every one failed); the attempts a cheater's code makes on purpose are tested below.
TRIES = """
import os, socket, subprocess
escaped = []
if os.environ.get("ATTN_RED_TEAM"):
    escaped.append("environment")
for pid in ("1", str(os.getppid())):
    try:
        if "{secret}" in open(f"/proc/{{pid}}/environ").read():
            escaped.append("grader environment")
    except Exception:
        pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    escaped.append("network")
except Exception:
    pass
for path in ({gradebook!r}, {cache!r}):
    try:
        with open(path, "a") as f:
            f.write("# from a cell")
        escaped.append(path)
    except Exception:
        pass
try:
    subprocess.Popen(["sleep", "{leftover}"], start_new_session=True)
    escaped.append("process")
except Exception:
    pass
try:
    if os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "{leftover}"])
    escaped.append("fork")
except Exception:
    pass
"""


def tries(port: int, gradebook: Path, cache: Path) -> str:
    return TRIES.format(
        secret=SECRET,
        port=port,
        gradebook=str(gradebook / "grades.csv"),
        cache=str(cache / "forged.json"),
        leftover=LEFTOVER,
    )


#: Appends to the checks' file on disk; reads the model answer of ch1.q2 from it, and runs it.
READS_ANSWER = f"""
import re
try:
    open({str(CHECKS_FILE)!r}, "a").write("# from a cell")
except Exception:
    pass
source = open({str(CHECKS_FILE)!r}).read()
answer = re.findall(r"solution='''(.*?)'''", source, re.S)[1]
exec(answer)
"""

#: Reads the model answer from the process's memory, where it was loaded.
READS_MEMORY = """
import ctypes, re
found = None
with open("/proc/self/maps") as maps:
    regions = [line.split()[0].split("-") for line in maps if " rw" in line]
for start, end in regions:
    data = ctypes.string_at(int(start, 16), int(end, 16) - int(start, 16))
    match = re.search(rb"def nadaraya_watson\\(.*?\\n\\n\\n", data, re.S)
    if match:
        found = match.group(0).decode()
        break
exec(found)
"""

#: Runs the package's masking module again, so that its `masked_softmax` is not the switched-off one.
RELOADS = """
import importlib
import attn_course.attention.masking as masking
fresh = importlib.reload(masking)


def masked_softmax(X, valid_lens):
    return fresh.masked_softmax(X, valid_lens)
"""

#: Chapter 6's model answer is also the text its mistakes are edited from: a module global of the checks.
READS_GLOBAL = """
import attn_course_exercises.ch6_decoding as ch6
exec(ch6._BEAM_SEARCH_SOLUTION)
"""


@pytest.mark.slow
@pytest.mark.parametrize("jailed", [True, False], ids=["jailed", "unjailed"])
def test_a_hostile_notebook_escapes_nothing_and_reading_the_answers_scores_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jailed: bool
) -> None:
    if jailed and not _jailed():
        pytest.skip("bubblewrap cannot make a jail on this machine")
    monkeypatch.setenv(jail.MODE_VARIABLE, "require" if jailed else "off")
    monkeypatch.setenv("ATTN_RED_TEAM", SECRET)
    gradebook, cache = tmp_path / "gradebook", tmp_path / "cache"
    gradebook.mkdir()
    cache.mkdir()
    before = digest(CHECKS_FILE)
    with listening() as server:
        cell = tries(server.getsockname()[1], gradebook, cache)
        guarded = cell + Q1.solution_code + "if escaped:\n    sequence_mask = None\n"
        path = write(tmp_path, "mallory", notebook({"ch1.q1": guarded, "ch1.q2": READS_ANSWER}))
        graded = grade_submission(path, limits=LIMITS)
        assert connections(server) == 0
    q1, q2 = graded.exercises["ch1.q1"], graded.exercises["ch1.q2"]
    if jailed:  # unjailed, a grader running as root lets a cell write where root may: the jail stops it
        assert (q1.points, q1.notes) == (1, []), q1.message
        assert sorted(p.name for p in gradebook.iterdir()) == []
        assert sorted(p.name for p in cache.iterdir()) == []
    assert digest(CHECKS_FILE) == before
    assert (q2.points, q2.integrity is not None) == (0, True), q2.message
    assert "opened the course's model answers" in q2.message
    assert "ch1_masking.py" in q2.integrity
    time.sleep(0.2)
    assert leftovers() == []


@pytest.mark.slow
def test_the_answers_are_not_in_the_sandboxes_memory_nor_in_the_checks_globals(tmp_path: Path) -> None:
    path = write(tmp_path, "mallory", notebook({"ch1.q2": RELOADS, "ch1.q3": READS_MEMORY}))
    graded = grade_submission(path, limits=LIMITS)
    q2, q3 = graded.exercises["ch1.q2"], graded.exercises["ch1.q3"]
    assert q3.points == 0 and q3.integrity is not None, q3.message
    assert "this process's memory" in q3.message
    assert q2.points == 0 and "attn_course/attention/masking.py" in str(q2.integrity), q2.message
    cell = READS_GLOBAL + Q1.solution_code.replace("sequence_mask", "_unused")
    nb = notebook()
    for c in nb["cells"]:  # chapter 6's global, read from chapter 1's notebook: it is blank
        if "".join(c["source"]).startswith("# EXERCISE ch1.q1"):
            c["source"] = "# EXERCISE ch1.q1\n" + cell + Q1.solution_code
    q1 = grade_submission(write(tmp_path, "eve", nb), limits=LIMITS).exercises["ch1.q1"]
    assert q1.points == 1  # the blank text defines nothing, and the honest answer below it counts


#: A mistake written as an edit of the model answer kept that edited answer as text on its function: look
#: for it on every function of the chapters' checks, their closures and what they wrap.
READS_EDITED_SOURCE = """
import attn_course_exercises as checks_package
import sys

leaked = []


def visit(obj, depth=0):
    if obj is None or depth > 6:
        return
    if isinstance(getattr(obj, "__course_source__", None), str):
        leaked.append(obj)
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            visit(cell.cell_contents, depth + 1)
        except ValueError:
            pass
    visit(getattr(obj, "__wrapped__", None), depth + 1)


for name, module in list(sys.modules.items()):
    if name.startswith("attn_course_exercises.ch"):
        for value in list(vars(module).values()):
            visit(value)
"""


@pytest.mark.slow
def test_no_mistake_keeps_the_edited_model_answer_in_the_sandbox(tmp_path: Path) -> None:
    import attn_course_exercises.ch2_scoring as ch2

    assert any(getattr(v, "__course_source__", None) for v in vars(ch2).values())  # the grader's side has it
    cell = READS_EDITED_SOURCE + Q1.solution_code + "if leaked:\n    sequence_mask = None\n"
    graded = grade_submission(write(tmp_path, "eve", notebook({"ch1.q1": cell})), limits=LIMITS)
    q1 = graded.exercises["ch1.q1"]
    assert q1.points == 1, q1.message  # nothing leaked, so the honest answer below the search counts


#: Leaves a note for the next submission wherever it can write outside its own job folder ...
LEAVES_NOTE = """
import os
for folder in ("../..", "..", "/tmp"):
    try:
        with open(os.path.join(folder, "note.txt"), "w") as f:
            f.write("ch1.q1 is torch.where")
    except OSError:
        pass
"""
#: ... and looks for it (if it finds one, its answer is left undefined).
READS_NOTE = """
import os
found_note = any(os.path.exists(os.path.join(f, "note.txt")) for f in ("../..", "..", "/tmp"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("jailed", [True, False], ids=["jailed", "unjailed"])
def test_nothing_one_submission_leaves_reaches_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jailed: bool
) -> None:
    if jailed and not _jailed():
        pytest.skip("bubblewrap cannot make a jail on this machine")
    monkeypatch.setenv(jail.MODE_VARIABLE, "require" if jailed else "off")
    first = write(tmp_path, "carl", notebook({"ch1.q1": LEAVES_NOTE + Q1.solution_code}))
    second = READS_NOTE + Q1.solution_code + "if found_note:\n    sequence_mask = None\n"
    with Sandboxes() as sandboxes:
        grade_submission(first, limits=LIMITS, sandboxes=sandboxes)
        graded = grade_submission(
            write(tmp_path, "dina", notebook({"ch1.q1": second})), limits=LIMITS, sandboxes=sandboxes
        )
    assert graded.exercises["ch1.q1"].points == 1, graded.exercises["ch1.q1"].message


# -- one broken cell costs one exercise -------------------------------------------------------------------


@pytest.mark.slow
def test_a_cell_that_does_not_compile_costs_only_its_exercise_and_is_told_in_the_learners_terms(
    tmp_path: Path,
) -> None:
    broken = Q2.solution_code.replace("):", ")", 1)  # the `:` of its `def` line missing
    path = write(tmp_path, "dan", notebook({"ch1.q2": broken, "ch1.q3": Q3.solution_code + "1 / 0\n"}))
    graded = grade_submission(path, limits=LIMITS)
    points = {k: g.points for k, g in graded.exercises.items()}
    assert points == {"ch1.q1": 1, "ch1.q2": 0, "ch1.q3": 1}
    message = graded.exercises["ch1.q2"].message
    assert "SyntaxError" in message and "line " in message and "def masked_softmax" in message, message
    for leak in ("Traceback", "sandbox_child", "compile(", "attn_course_tools", ".py"):
        assert leak not in message, message
    assert "ZeroDivisionError" in " ".join(graded.exercises["ch1.q3"].notes)


# -- grades nobody can forge --------------------------------------------------------------------------------


def test_a_cache_entry_that_does_not_match_its_key_submission_or_hmac_is_ignored(tmp_path: Path) -> None:
    cache = GradeCache(tmp_path / "cache", version="v")
    solved = {"ch1.q1": ExerciseGrade("ch1.q1", "sequence_mask", 1, "passed", "")}
    grade_ = SubmissionGrade(Path("a.ipynb"), "alice", "d1", solved, [], 1.0)
    key = cache.key("d1", ["ch1.q1"], None, LIMITS)
    assert cache.store(key, grade_, "d1")
    assert cache.load(key, Path("a.ipynb"), "alice", "d1").total == 1
    entry = json.loads((cache.folder / f"{key}.json").read_text())
    other = cache.key("d2", ["ch1.q1"], None, LIMITS)
    (cache.folder / f"{other}.json").write_text(json.dumps(entry))  # copied under another student's key
    assert cache.load(other, Path("b.ipynb"), "bob", "d2") is None
    forged = dict(entry, grade=dict(entry["grade"], sha256="d2"), key=other)  # rewritten by hand
    (cache.folder / f"{other}.json").write_text(json.dumps(forged))
    assert cache.load(other, Path("b.ipynb"), "bob", "d2") is None
    assert cache.load(key, Path("a.ipynb"), "alice", "d3") is None  # another submission's bytes
    assert oct((cache.folder / ".secret").stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow
def test_a_class_graded_twice_with_a_hostile_late_submission_between_keeps_everyone_elses_grades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cache = tmp_path / "class", tmp_path / "cache"
    wrong = Q1.solution_code.replace("<", "<=")
    honest = {"ann": notebook(), "ben": notebook(solved=False), "cat": notebook({"ch1.q1": wrong})}
    for name, nb in honest.items():
        (root / name).mkdir(parents=True)
        write(root / name, "ex01_masked_softmax", nb)
    first = grade([root], out=tmp_path / "g.csv", limits=LIMITS, cache=cache, jobs=1)
    before = {r.student: r.total for r in first}
    # a late submission whose cell rewrites every cache entry to full marks, and forges new ones
    forger = f"""
import glob, json
for path in glob.glob({str(cache)!r} + "/*.json"):
    try:
        entry = json.load(open(path))
        for g in entry["grade"]["exercises"]:
            g["points"] = 1
        json.dump(entry, open(path, "w"))
    except Exception:
        pass
"""
    (root / "mallory").mkdir()
    write(root / "mallory", "ex01_masked_softmax", notebook({"ch1.q1": forger + Q1.solution_code}))
    grade([root], out=tmp_path / "g.csv", limits=LIMITS, cache=cache, jobs=1)
    again = grade([root], out=tmp_path / "g.csv", limits=LIMITS, cache=cache, jobs=1)
    after = {r.student: r.total for r in again if r.student != "mallory"}
    assert after == before == {"ann": 3, "ben": 0, "cat": 2}


# -- as an ordinary user -----------------------------------------------------------------------------------


def _ordinary_user() -> str | None:
    """A user to run the grader as, where this machine allows it: root can switch to `nobody`, and Python
    and the course can be read by anyone."""
    if os.geteuid() != 0 or shutil.which("runuser") is None or not _readable_by_anyone():
        return None
    return "nobody"


@pytest.mark.slow
def test_as_an_ordinary_user_the_jail_holds_too(tmp_path: Path) -> None:
    user = _ordinary_user()
    if user is None:
        pytest.skip("no ordinary user can run this Python here (it is installed where only root can read)")
    tmp_path.chmod(0o777)
    outside = tmp_path / "grades.csv"
    outside.write_text("student,total\n")
    outside.chmod(0o666)
    argv = [sys.executable, "-c", ESCAPES, "9", str(CHECKS_FILE), str(outside)]
    jobs = tmp_path / "jobs"
    jobs.mkdir(mode=0o777)
    runner = ["runuser", "-u", user, "--"]
    jailed = jail.command(argv, jobs, {"PATH": "/usr/bin:/bin"}, privileged=False)
    done = subprocess.run(runner + jailed, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert not any(found.values()), found


# -- the release hands out no model answer ---------------------------------------------------------------


def test_a_release_for_graded_work_holds_no_model_answer(tmp_path: Path) -> None:
    from grading_cases import ROOT

    import attn_course_exercises as checks
    from attn_course_tools.grading.release import build_release

    build_release(tmp_path, exercises=ROOT / "exercises")
    released = "\n".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    for exercise in checks.EXERCISES.values():  # each answer's longest line that its stub does not have
        own = [line.strip() for line in exercise.solution_code.splitlines() if line.strip()]
        given = {line.strip() for line in exercise.stub_code.splitlines()}
        telling = max((line for line in own if line not in given), key=len)
        assert json.dumps(telling)[1:-1] not in released, (exercise.key, telling)
