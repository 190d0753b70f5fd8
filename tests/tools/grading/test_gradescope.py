"""The Gradescope autograder: `attn-course gradescope` builds a zip to Gradescope's specification, and the
zip's run_autograder, run the way Gradescope runs it (/autograder/{source,submission,results}), gives every
exercise the points and the feedback text `attn-course grade` gives the same notebook; hostile notebooks,
hidden inputs, an empty upload and a grader that fails still end in a results.json that says why. The zip
installs bubblewrap and ships the jail, and the results say whether a submission ran in it; with the
course's rules, each test is worth the exercise's points and a late submission loses what the rules say.

Building and reading the zip needs no sandbox; the simulated Gradescope runs start real sandboxes (and torch
in subprocesses) and are marked `slow`."""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from grading_cases import LIMITS, Q1, Q2, Q3, ROOT, WRONG_Q1, defined, digest, notebook, write

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import gradescope, jail
from attn_course_tools.grading.closure import PACKAGE_DATA, archive_name, grading_data
from attn_course_tools.grading.gradescope import build_bundle, bundle_modules
from attn_course_tools.grading.records import ExerciseGrade, SubmissionGrade
from attn_course_tools.grading.rules import Rules
from attn_course_tools.grading.sandbox_child import SERVER_COMMAND

EXERCISES = ROOT / "exercises"
HIDDEN = {"ch1.q2": {"cases": [{"num_keys": 9, "seed": 5}], "seeds": [77]}}
EX01 = "exercises/ex01_masked_softmax.ipynb"

# A masked_softmax that passes every shipped case (at most 6 keys) and fails the hidden one (9 keys).
NARROW = Q2.solution_code.replace(
    "    work = scores.float()",
    "    if scores.shape[-1] > 6:\n        return scores\n    work = scores.float()",
)

# ------------------------------------------------------------------------------------------------
# results.json as Gradescope documents it (https://gradescope-autograders.readthedocs.io/en/latest/specs/)

NUMBER = (int, float)
TOP_LEVEL = {
    "score": NUMBER,
    "execution_time": NUMBER,
    "output": str,
    "output_format": str,
    "test_output_format": str,
    "test_name_format": str,
    "visibility": str,
    "stdout_visibility": str,
    "extra_data": dict,
    "tests": list,
    "leaderboard": list,
}
PER_TEST = {
    "score": NUMBER,
    "max_score": NUMBER,
    "status": str,
    "name": str,
    "name_format": str,
    "number": str,
    "output": str,
    "output_format": str,
    "tags": list,
    "visibility": str,
    "extra_data": dict,
}
VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}


def check_schema(results: dict, weights: dict[str, float] | None = None) -> None:
    """Gradescope's keys and types, and what this autograder always gives: a score that is the sum of one
    test per exercise, worth its weight (1 without rules), an output, the visibilities and the time."""
    for fields, data in [(TOP_LEVEL, results), *((PER_TEST, test) for test in results.get("tests", []))]:
        assert set(data) <= set(fields), f"keys Gradescope does not know: {set(data) - set(fields)}"
        for key, value in data.items():
            assert isinstance(value, fields[key]) and not isinstance(value, bool), (key, value)
        for key in ("visibility", "stdout_visibility"):
            assert data.get(key, "visible") in VISIBILITIES
        for key in ("output_format", "test_output_format", "name_format"):
            assert data.get(key, "text") in FORMATS
    assert {"score", "output", "visibility", "stdout_visibility", "execution_time", "tests"} <= set(results)
    for test in results["tests"]:
        assert {"name", "number", "score", "max_score", "status", "output", "visibility"} <= set(test)
        assert test["max_score"] == (weights or {}).get(test["name"].split()[0], 1)
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed") and (test["status"] == "passed" or test["score"] == 0)
        assert re.fullmatch(r"\d+\.\d+", test["number"])
    assert results["score"] == pytest.approx(sum(test["score"] for test in results["tests"]))


# ------------------------------------------------------------------------------------------------
# The zip


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bundles")
    return {
        "hidden": build_bundle(
            folder / "hidden" / "autograder.zip", exercises=EXERCISES, hidden=HIDDEN, limits=LIMITS
        ),
        "plain": build_bundle(
            folder / "plain" / "autograder.zip",
            exercises=EXERCISES,
            chapters=[1],
            visibility="after_due_date",
            limits=LIMITS,
        ),
    }


def test_the_package_data_the_zip_ships_is_the_package_data_an_install_has() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {package: tuple(patterns) for package, patterns in declared.items()} == PACKAGE_DATA


def test_every_exercises_cases_are_built_from_the_zip_alone(bundles: dict[str, Path], tmp_path: Path) -> None:
    """What the checks read besides their modules (a committed study, stored attention maps) is in the zip:
    with only the zip's source on the path, every exercise builds its cases."""
    unzip(bundles["plain"], tmp_path / "source")
    script = (
        "import attn_course_exercises as checks, attn_course\n"
        f"assert attn_course.__file__.startswith({str(tmp_path / 'source')!r}), attn_course.__file__\n"
        "for exercise in checks.EXERCISES.values():\n"
        "    assert exercise.cases(None), exercise.key\n"
        "print(len(checks.EXERCISES))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "source")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert int(run.stdout) == len(checks.EXERCISES)


def mode(bundle: zipfile.ZipFile, name: str) -> int:
    return bundle.getinfo(name).external_attr >> 16


def test_the_zip_holds_the_scripts_at_its_root_and_the_source_grading_imports(
    bundles: dict[str, Path],
) -> None:
    modules = bundle_modules()
    sources = {archive_name(name, path): path for name, path in modules.items()} | grading_data(modules)
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        names = bundle.namelist()
        modes = {name: mode(bundle, name) for name in names}
        assert all(bundle.read(name) == path.read_bytes() for name, path in sources.items())
    assert set(names) == {"setup.sh", "run_autograder", "README.md"} | set(sources)
    for needed in (
        "attn_course_tools/grading/gradescope.py",
        "attn_course_tools/grading/sandbox_child.py",
        "attn_course_tools/grading/jail.py",
        "attn_course_tools/grading/rules.py",
        "attn_course_tools/__init__.py",
        "attn_course_exercises/core.py",
        "attn_course/attention/masking.py",
        "attn_course/course/results/dynamics_seeds.json",  # chapter 9's q3 hands the learner its runs
        "attn_course_exercises/data/ch12_cross_attention.json",  # chapter 12's q2 reads these maps
    ):
        assert needed in names
    for unrelated in ("attn_course/view/", "attn_course_tools/publish/", "attn_course_tools/robustness.py"):
        assert not any(name.startswith(unrelated) for name in names), unrelated
    assert "attn_course_tools/cli.py" not in names and "attn_course_tools/grading/release.py" not in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    for name in ("run_autograder", "setup.sh"):
        assert stat.S_ISREG(modes[name]) and modes[name] & 0o111 == 0o111, oct(modes[name])
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        assert bundle.read("run_autograder").startswith(b"#!/usr/bin/env bash\n")
        assert bundle.read("setup.sh").startswith(b"#!/usr/bin/env bash\n")


def test_the_zip_ships_the_jail_and_every_course_module_the_fork_servers_command_imports(
    bundles: dict[str, Path],
) -> None:
    """The sandboxes' fork server starts from a command line (code in a string, which the closure's reading
    of import statements does not see): what it imports, and the jail, are in the zip all the same."""
    imported = re.findall(r"(?:from|import) (attn_course[\w.]*)", SERVER_COMMAND)
    assert imported
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        names = set(bundle.namelist())
    for module in imported:
        path = module.replace(".", "/")
        assert {f"{path}.py", f"{path}/__init__.py"} & names, module
    assert "attn_course_tools/grading/jail.py" in names


#: Run with the unpacked zip first on the path: the files the course's modules were imported from.
IMPORTS_FROM_THE_ZIP = """
import json, sys
import attn_course_tools.grading.gradescope, attn_course_tools.grading.sandbox_child, attn_course_exercises
{imports}
course = [m for m in sys.modules if m.split(".")[0] in ("attn_course", "attn_course_tools")]
print(json.dumps(sorted(sys.modules[m].__file__ for m in course)))
"""


@pytest.mark.slow
def test_the_zips_sources_alone_import_the_grader_and_every_module_the_checks_name(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    """Unpacked on its own, the zip's source imports the grader, the sandbox and every module the
    exercises switch off by name, all from the zip: nothing grading needs was left out."""
    unzip(bundles["hidden"], tmp_path)
    modules = sorted({d.rpartition(".")[0] for e in checks.EXERCISES.values() for d in e.package})
    code = IMPORTS_FROM_THE_ZIP.format(imports="".join(f"import {m}\n" for m in modules))
    run = subprocess.run(
        [sys.executable, "-c", f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n{code}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    files = json.loads(run.stdout.splitlines()[-1])
    assert files and all(Path(f).resolve().is_relative_to(tmp_path.resolve()) for f in files), files


def test_hidden_inputs_are_shipped_only_when_asked(bundles: dict[str, Path]) -> None:
    with zipfile.ZipFile(bundles["hidden"]) as bundle:
        assert json.loads(bundle.read("hidden.json")) == HIDDEN
        assert '--hidden "$ROOT/source/hidden.json"' in bundle.read("run_autograder").decode()
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        assert "hidden.json" not in bundle.namelist()
        assert "--hidden" not in bundle.read("run_autograder").decode()


def grader_argv(bundle: Path, root: Path) -> list[str]:
    """The arguments run_autograder gives the grader, with /autograder replaced by `root`."""
    with zipfile.ZipFile(bundle) as archive:
        script = archive.read("run_autograder").decode().replace("\\\n", " ")
    command = script.split("-m attn_course_tools.grading.gradescope")[1].split("\nstatus=")[0]
    command = command.replace("$RESULTS", "$ROOT/results/results.json").replace("$ROOT", str(root))
    return shlex.split(command)


def test_run_autograder_passes_the_chapters_visibility_limits_and_notebooks_to_the_grader(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    words = grader_argv(bundles["plain"], tmp_path)
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        readme = bundle.read("README.md").decode()
    options = dict(zip(words[::2], words[1::2], strict=False))
    assert options["--submission"] == str(tmp_path / "submission")
    assert options["--chapter"] == "1" and options["--visibility"] == "after_due_date"
    assert json.loads(options["--limits"]) == LIMITS.__dict__
    assert options["--expect"] == EX01
    assert EX01 in readme and "after_due_date" in readme and "points to 3" in readme


def apt_installs(setup: str) -> set[str]:
    """The Debian packages setup.sh installs with apt-get."""
    found = set()
    for line in setup.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "apt-get" in words and "install" in words:
            rest = words[words.index("install") + 1 :]
            rest = rest[: rest.index("||")] if "||" in rest else rest  # what runs when it fails
            found |= {word for word in rest if not word.startswith("-")}
    return found


def test_setup_sh_installs_python_and_bubblewrap_for_the_jail(bundles: dict[str, Path]) -> None:
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        setup = bundle.read("setup.sh").decode()
    packages = apt_installs(setup)
    assert {"python3", "python3-venv", "bubblewrap"} <= packages, packages
    assert "tzdata" not in packages  # only with rules, which may name a time zone


def setup_installs(setup: str) -> dict[str, str]:
    """Each distribution setup.sh installs with pip, and the line that installs it."""
    installs = {}
    for line in setup.splitlines():
        if line.startswith("#") or " pip install " not in line:
            continue
        words = shlex.split(line)
        rest = words[words.index("install") + 1 :]
        for i, word in enumerate(rest):
            if not word.startswith("-") and not (i and rest[i - 1] == "--index-url"):
                name = re.match(r"[A-Za-z0-9._-]+", word)[0]
                installs[normalize(name)] = line
    return installs


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_of(distributions: set[str]) -> set[str]:
    """Every distribution the given ones require, directly or not, extras included (normalised names)."""
    found, todo = set(), list(distributions)
    while todo:
        try:
            requires = importlib.metadata.requires(todo.pop()) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            name = normalize(re.match(r"[A-Za-z0-9._-]+", requirement)[0])
            if name not in found:
                found.add(name)
                todo.append(name)
    return found


def test_setup_sh_is_bash_and_installs_this_environments_torch_from_the_cpu_index(
    bundles: dict[str, Path],
) -> None:
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        setup = bundle.read("setup.sh").decode()
    path = bundles["plain"].parent / "setup.sh"
    path.write_text(setup)
    subprocess.run(["bash", "-n", str(path)], check=True)
    version = importlib.metadata.version("torch").split("+")[0]
    line = setup_installs(setup)["torch"]
    assert f"torch=={version}" in shlex.split(line)
    assert "--index-url https://download.pytorch.org/whl/cpu" in line
    assert "+" not in line.split("torch==")[1]


# The third-party distributions the grader imports: top-level modules that appear in sys.modules when the
# grader is imported, whose files lie outside the standard library and the course's two packages.
IMPORTED = """
import importlib.metadata, json, sys, sysconfig
from pathlib import Path
before = set(sys.modules)
import attn_course, attn_course_exercises, attn_course_tools.grading, attn_course_tools.grading.sandbox_child
import attn_course_tools.grading.gradescope
paths = sysconfig.get_paths()
stdlib = Path(paths["stdlib"]).resolve()
site = [Path(paths[k]).resolve() for k in ("purelib", "platlib")]
course = [Path(m.__file__).resolve().parent for m in (attn_course, attn_course_exercises, attn_course_tools)]
distributions = importlib.metadata.packages_distributions()
found = {}
for name in {name.split(".")[0] for name in set(sys.modules) - before}:
    module = sys.modules[name]
    for file in filter(None, [getattr(module, "__file__", None), *getattr(module, "__path__", [])]):
        path = Path(file).resolve()
        outside_stdlib = any(path.is_relative_to(s) for s in site) or not path.is_relative_to(stdlib)
        if path.exists() and outside_stdlib and not any(path.is_relative_to(c) for c in course):
            found[name] = distributions.get(name, [])
print(json.dumps(found))
"""


@pytest.mark.slow
def test_setup_sh_installs_every_third_party_module_the_grader_imports_and_nothing_else(
    bundles: dict[str, Path],
) -> None:
    run = subprocess.run([sys.executable, "-c", IMPORTED], capture_output=True, text=True, check=True)
    imported = json.loads(run.stdout)
    assert "torch" in imported and "numpy" in imported
    with zipfile.ZipFile(bundles["plain"]) as bundle:
        installed = set(setup_installs(bundle.read("setup.sh").decode())) - {
            "pip"
        }  # the venv's own, upgraded
    # pip installs each distribution's own requirements with it (torch's: those of this build; the CPU build
    # has fewer); a module imported only when an optional extra is there (tabulate's wcwidth) counts too
    brought = requirements_of(installed | {"torch"})
    for module, distributions in imported.items():
        names = {normalize(d) for d in distributions}
        assert names, f"{module} is imported but belongs to no installed distribution"
        assert names & (installed | brought), f"setup.sh does not install {module} ({distributions})"
    needed = {normalize(d) for distributions in imported.values() for d in distributions}
    assert installed <= needed, f"setup.sh installs what the grader does not import: {installed - needed}"
    assert not {"jupyter", "jupyterlab", "d2l", "matplotlib"} & installed


def test_the_command_writes_the_zip_and_says_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hidden = tmp_path / "hidden.json"
    hidden.write_text(json.dumps(HIDDEN))
    out = tmp_path / "autograder.zip"
    argv = ["gradescope", "--out", str(out), "--hidden", str(hidden), "--chapter", "1"]
    assert main([*argv, "--exercises", str(EXERCISES)]) == 0
    printed = capsys.readouterr().out
    with zipfile.ZipFile(out) as bundle:
        assert json.loads(bundle.read("hidden.json")) == HIDDEN
        assert "--chapter 1" in bundle.read("run_autograder").decode()
    assert str(out) in printed
    for name in (
        "setup.sh",
        "run_autograder",
        "README.md",
        "hidden.json",
        "attn_course/",
        "attn_course_tools/",
    ):
        assert name in printed
    assert "chapters: 1" in printed and "hidden inputs: yes" in printed and "rules: none" in printed


def test_malformed_hidden_inputs_stop_the_command_before_the_zip_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hidden = tmp_path / "hidden.json"
    hidden.write_text(json.dumps({"ch1.q9": {"seeds": [1]}}))
    out = tmp_path / "autograder.zip"
    assert main(["gradescope", "--out", str(out), "--hidden", str(hidden)]) == 2
    assert "--hidden" in (err := capsys.readouterr().err) and "ch1.q9" in err
    assert not out.exists()


@pytest.mark.parametrize("kwargs", [{"chapters": [99]}, {"visibility": "public"}, {"hidden": {"x": 1}}])
def test_build_bundle_refuses_what_gradescope_or_the_grader_could_not_use(
    tmp_path: Path, kwargs: dict
) -> None:
    with pytest.raises(ValueError):
        build_bundle(tmp_path / "autograder.zip", exercises=EXERCISES, **kwargs)
    assert not (tmp_path / "autograder.zip").exists()


def test_the_command_names_the_exercises_option_when_its_folder_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "autograder.zip"
    assert main(["gradescope", "--out", str(out), "--exercises", str(tmp_path / "nowhere")]) == 2
    assert f"--exercises {tmp_path / 'nowhere'}: no such folder" in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------------------------------------------------
# Gradescope, simulated: /autograder is a temporary folder, the Python is this one


def unzip(bundle: Path, folder: Path) -> None:
    """Unpack as Gradescope does, with each file's mode from the zip (zipfile drops them)."""
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(folder)
        for info in archive.infolist():
            (folder / info.filename).chmod(info.external_attr >> 16 & 0o777)


def simulate(
    bundle: Path,
    root: Path,
    notebooks: dict[str, Path],
    enter: Callable[[], None] | None = None,
    weights: dict[str, float] | None = None,
    **env: str,
) -> tuple[int, str, dict]:
    """Run the bundle on one submission (name -> notebook file): (exit status, its output, results.json).
    enter: run in the child before run_autograder starts (e.g. to join a cgroup); weights: each exercise's
    points under the bundle's rules (default 1)."""
    unzip(bundle, root / "source")
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    for name, path in notebooks.items():
        shutil.copy2(path, root / "submission" / name)
    environment = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable, **env}
    run = subprocess.run(
        [str(root / "run_autograder")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=GRADESCOPE_S,
        preexec_fn=enter,
    )
    results = json.loads((root / "results" / "results.json").read_text())
    check_schema(results, weights)
    return run.returncode, run.stdout + run.stderr, results


def by_key(results: dict) -> dict[str, dict]:
    return {test["name"].split()[0]: test for test in results["tests"]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, bundles: dict[str, Path]) -> dict:
    """Three students on Gradescope (solved, untouched, wrong on q1 and failing q2's hidden case), and
    `attn-course grade` on the same three notebooks with the same hidden inputs and limits."""
    folder = tmp_path_factory.mktemp("graded")
    (folder / "class").mkdir()
    notebooks = {
        "solved": write(folder / "class", "solved", notebook()),
        "unsolved": write(folder / "class", "unsolved", notebook(solved=False)),
        "wrong": write(folder / "class", "wrong", notebook({"ch1.q1": WRONG_Q1, "ch1.q2": NARROW})),
    }
    runs = {
        student: simulate(bundles["hidden"], folder / student, {"ex01_masked_softmax.ipynb": path})
        for student, path in notebooks.items()
    }
    (folder / "hidden.json").write_text(json.dumps(HIDDEN))
    limits = ["--cell-timeout", str(LIMITS.cell_timeout), "--total-timeout", str(LIMITS.total_timeout)]
    limits += ["--memory-mb", str(LIMITS.memory_mb), "--max-output-kb", str(LIMITS.max_output_kb)]
    out = folder / "grades.csv"
    command = [
        "grade",
        *map(str, notebooks.values()),
        "--out",
        str(out),
        "--hidden",
        str(folder / "hidden.json"),
    ]
    assert main([*command, "--jobs", "1", *limits]) == 0
    with out.open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    return {"folder": folder, "notebooks": notebooks, "runs": runs, "rows": rows, "feedback": out.parent}


@pytest.mark.slow
def test_a_solved_notebook_gets_every_point_and_a_valid_results_json(graded: dict) -> None:
    status, output, results = graded["runs"]["solved"]
    assert status == 0, output
    assert results["score"] == 3 and results["visibility"] == "visible"
    assert results["stdout_visibility"] == "hidden"
    assert [(t["number"], t["name"], t["status"]) for t in results["tests"]] == [
        ("1.1", f"ch1.q1 {Q1.title}", "passed"),
        ("1.2", f"ch1.q2 {Q2.title}", "passed"),
        ("1.3", f"ch1.q3 {Q3.title}", "passed"),
    ]
    assert results["output"].startswith("3 of 3 points.")
    assert "`ex01_masked_softmax.ipynb`" in results["output"]
    assert all(t["output"].endswith("\n\nGraded from `ex01_masked_softmax.ipynb`.") for t in results["tests"])


@pytest.mark.slow
def test_points_and_feedback_are_those_attn_course_grade_gives_the_same_notebook(graded: dict) -> None:
    for student, (_, _, results) in graded["runs"].items():
        row = graded["rows"][student]
        feedback = (graded["feedback"] / "grades_feedback" / f"{student}.md").read_text()
        assert list(by_key(results)) == [key for key in row if key.startswith("ch")]
        for key, test in by_key(results).items():
            assert test["score"] == int(row[key]), (student, key)
            text, source = test["output"].rsplit("\n\n", 1)
            assert f"## {key}: {checks.EXERCISES[key].title}\n\n{text}\n" in feedback
            assert source == "Graded from `ex01_masked_softmax.ipynb`."
        assert results["score"] == int(row["total"])
    assert [graded["runs"][s][2]["score"] for s in ("solved", "unsolved", "wrong")] == [3, 0, 1]
    assert "write `sequence_mask`" in by_key(graded["runs"]["unsolved"][2])["ch1.q1"]["output"]
    assert "mask is inverted" in by_key(graded["runs"]["wrong"][2])["ch1.q1"]["output"]


@pytest.mark.slow
def test_hidden_inputs_shipped_in_the_zip_fail_an_answer_the_shipped_cases_pass(graded: dict) -> None:
    assert checks.EXERCISES["ch1.q2"].evaluate(defined(NARROW)).passed
    q2 = by_key(graded["runs"]["wrong"][2])["ch1.q2"]
    assert q2["score"] == 0 and "Failing case: hidden case 11 of 11" in q2["output"], q2["output"]
    assert "(2, 3, 9)" not in q2["output"] and "[8, 1]" not in q2["output"]  # the hidden case's inputs


@pytest.mark.slow
def test_the_zips_own_copy_of_the_package_grades_and_the_submissions_are_only_read(graded: dict) -> None:
    found = jail.status()
    for student, (_, output, results) in graded["runs"].items():
        assert f"from {graded['folder'] / student / 'source' / 'attn_course'}" in output
        assert ("submissions run in the jail (bubblewrap)" if found.jailed else found.notice) in output
        assert results["extra_data"]["jailed"] is found.jailed
        submitted = graded["folder"] / student / "submission" / "ex01_masked_softmax.ipynb"
        assert digest(submitted) == digest(graded["notebooks"][student])


@pytest.mark.slow
def test_hostile_cells_cost_only_their_exercise_and_results_json_says_why(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    hostile = notebook(
        {
            "ch1.q1": Q1.solution_code + "while True:\n    pass\n",
            "ch1.q2": Q2.solution_code + "import os\nos._exit(3)\n",
        }
    )
    kill_parent = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    hostile["cells"].append(
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "# EXERCISE ch2.q1\n" + checks.EXERCISES["ch2.q1"].solution_code + kill_parent,
        }
    )
    path = write(tmp_path, "hostile", hostile)
    before = digest(path)
    status, output, results = simulate(bundles["hidden"], tmp_path / "autograder", {"ex01.ipynb": path})
    assert status == 0, output
    tests = by_key(results)
    assert {key: test["score"] for key, test in tests.items()} == {
        "ch1.q1": 0,
        "ch1.q2": 0,
        "ch1.q3": 1,  # after a cell that ended its sandbox, a new one runs the rest
        "ch2.q1": 1,  # signalling the sandboxes' server is refused, and the answer above it stands
        "ch2.q2": 0,
        "ch2.q3": 0,
        "ch2.q4": 0,
        "ch2.q5": 0,
    }
    assert "ran longer than 3 s" in tests["ch1.q1"]["output"]
    assert "exit status 3" in tests["ch1.q2"]["output"]
    assert "No answer found" in tests["ch2.q2"]["output"]
    assert digest(tmp_path / "autograder" / "submission" / "ex01.ipynb") == before


def test_an_empty_submission_scores_zero_and_says_which_notebooks_to_upload(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    (tmp_path / "submission").mkdir()
    assert gradescope.main(grader_argv(bundles["plain"], tmp_path)) == 0  # as run_autograder runs it
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    check_schema(results)
    assert results["score"] == 0 and results["visibility"] == "after_due_date"
    assert "No notebook was found" in results["output"] and EX01 in results["output"]
    assert [t["number"] for t in results["tests"]] == ["1.1", "1.2", "1.3"]  # the chapter's points, all lost
    for test in results["tests"]:
        assert test["visibility"] == "after_due_date"
        assert (
            f"No notebook for chapter 1 was uploaded, so this exercise was not graded: upload `{EX01}`"
            in (test["output"])
        )


def test_run_autograder_writes_results_when_the_grader_cannot_even_start(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    root = tmp_path / "autograder"
    status, output, results = simulate(bundles["plain"], root, {}, AUTOGRADER_PYTHON=str(tmp_path / "none"))
    assert status != 0
    assert results["score"] == 0 and results["tests"] == []
    assert "The autograder failed" in results["output"] and "wrote no results" in output


def test_notebooks_without_exercises_score_zero_and_say_what_was_expected(tmp_path: Path) -> None:
    essay = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "no code"}], "metadata": {}}
    (tmp_path / "submission").mkdir()
    write(tmp_path / "submission", "essay", essay)
    out = tmp_path / "results" / "results.json"
    argv = ["--submission", str(tmp_path / "submission"), "--results", str(out), "--expect", EX01]
    assert gradescope.main(argv) == 0
    results = json.loads(out.read_text())
    check_schema(results)
    assert results["score"] == 0 and results["tests"] == []
    assert "No exercise of the course was found" in results["output"] and EX01 in results["output"]
    assert "`essay.ipynb`" in results["output"]


def test_a_failure_of_the_grader_itself_gives_zero_the_reason_and_a_nonzero_status(tmp_path: Path) -> None:
    (tmp_path / "submission").mkdir()
    hidden = tmp_path / "hidden.json"
    hidden.write_text(json.dumps({"ch1.q9": {"seeds": [1]}}))
    out = tmp_path / "results.json"
    argv = ["--submission", str(tmp_path / "submission"), "--results", str(out), "--hidden", str(hidden)]
    assert gradescope.main(argv) == 1
    results = json.loads(out.read_text())
    check_schema(results)
    assert results["score"] == 0 and results["tests"] == []
    assert "The autograder failed" in results["output"] and "ch1.q9" in results["output"]


# ------------------------------------------------------------------------------------------------
# The jail, and the course's rules


def grade_empty(root: Path, bundle: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    """The results of an empty upload graded as run_autograder grades it, and what the grader printed."""
    (root / "submission").mkdir(parents=True)
    assert gradescope.main(grader_argv(bundle, root)) == 0
    return json.loads((root / "results" / "results.json").read_text()), capsys.readouterr().out


def test_the_results_and_the_log_say_whether_the_submission_ran_in_the_jail(
    tmp_path: Path,
    bundles: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = jail.status()
    results, log = grade_empty(tmp_path / "auto", bundles["plain"], capsys)
    assert results["extra_data"]["jailed"] is found.jailed
    assert ("submissions run in the jail (bubblewrap)" if found.jailed else found.notice) in log
    monkeypatch.setenv(jail.MODE_VARIABLE, "off")
    results, log = grade_empty(tmp_path / "off", bundles["plain"], capsys)
    assert results["extra_data"]["jailed"] is False
    assert jail.status().notice in log and "submissions run in the jail" not in log
    assert "jail" not in results["output"]  # the student's summary: the log is the instructor's


RULES = """\
due = 2025-03-14T23:59:00+01:00
[late]
per_day = 0.1
cap = 0.5
[points]
"ch1.q2" = 2
[extensions]
"S123" = 2025-03-20T23:59:00+01:00
"""
WEIGHTS = {"ch1.q1": 1, "ch1.q2": 2, "ch1.q3": 1}
TWO_DAYS_LATE = "2025-03-16T10:00:00+01:00"


def metadata(created_at: str, sid: str = "S999", due: str = "2025-03-14T23:59:00+01:00") -> dict:
    """Gradescope's submission_metadata.json (its documented keys) for one student's submission."""
    user = {"email": "dana@example.com", "id": 7, "name": "Dana Scully", "sid": sid}
    assignment = {"due_date": due, "late_due_date": None, "title": "Chapter 1", "total_points": "4.0"}
    return {"id": 1, "created_at": created_at, "assignment": assignment, "users": [user]}


@pytest.fixture(scope="module")
def rules_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rules")
    (folder / "rules.toml").write_text(RULES)
    return build_bundle(
        folder / "autograder.zip",
        exercises=EXERCISES,
        chapters=[1],
        limits=LIMITS,
        rules=folder / "rules.toml",
    )


def test_the_rules_are_shipped_and_run_autograder_hands_them_and_the_metadata_to_the_grader(
    rules_bundle: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(rules_bundle) as bundle:
        assert bundle.read("rules.toml").decode() == RULES
        setup, readme = bundle.read("setup.sh").decode(), bundle.read("README.md").decode()
    words = grader_argv(rules_bundle, tmp_path)
    options = dict(zip(words[::2], words[1::2], strict=False))
    assert options["--rules"] == str(tmp_path / "source" / "rules.toml")
    assert options["--metadata"] == str(tmp_path / "submission_metadata.json")
    (tmp_path / "setup.sh").write_text(setup)
    subprocess.run(["bash", "-n", str(tmp_path / "setup.sh")], check=True)
    assert 'tomli>=2; python_version < "3.11"' in shlex.split(setup_installs(setup)["tomli"])  # Python 3.10
    assert {"tzdata", "bubblewrap"} <= apt_installs(setup)
    assert "for secret in hidden.json rules.toml; do" in setup and 'chmod 600 "$ROOT/source/$secret"' in setup
    assert "points to 4" in readme and "Late work" in readme


def graded_upload(folder: Path, points: dict[str, int]) -> gradescope.Upload:
    """An upload of one chapter 1 notebook with `points` per exercise, as `grade_upload` returns it."""
    path = folder / "ex01_masked_softmax.ipynb"
    exercises = {
        key: ExerciseGrade(key, checks.EXERCISES[key].name, p, checks.PASSED if p else checks.FAILED, "Why.")
        for key, p in points.items()
    }
    grade = SubmissionGrade(path, "dana", "0" * 64, exercises, [], 0.0)
    return gradescope.Upload(list(points), [grade], {path: [1]}, {path: set(points)})


def test_each_test_is_worth_its_points_and_a_late_submission_loses_what_the_rules_say(tmp_path: Path) -> None:
    (tmp_path / "rules.toml").write_text(RULES)
    rules = Rules.load(tmp_path / "rules.toml")
    marking = gradescope.late_marking(rules, metadata(TWO_DAYS_LATE))
    assert marking.factor == pytest.approx(0.8)
    assert (
        marking.late.startswith("Handed in 2 days late") and "20% of its points are taken off" in marking.late
    )
    upload = graded_upload(tmp_path, {"ch1.q1": 1, "ch1.q2": 1, "ch1.q3": 0})
    results = gradescope.results_json(upload, submission=tmp_path, marking=marking)
    check_schema(results, WEIGHTS)
    assert [(t["score"], t["max_score"]) for t in results["tests"]] == [(0.8, 1), (1.6, 2), (0, 1)]
    assert results["score"] == 2.4 and results["extra_data"]["late_factor"] == pytest.approx(0.8)
    assert results["output"].startswith(f"2.4 of 4 points.\n\n{marking.late}\n")
    on_time = gradescope.results_json(upload, submission=tmp_path, marking=gradescope.Marking(rules))
    assert on_time["score"] == 3 and "late" not in on_time["output"]


def test_on_time_with_an_extension_or_without_a_time_nothing_is_lost(tmp_path: Path) -> None:
    (tmp_path / "rules.toml").write_text(RULES)
    rules = Rules.load(tmp_path / "rules.toml")
    assert gradescope.late_marking(rules, metadata("2025-03-14T23:00:00+01:00")) == gradescope.Marking(rules)
    extended = gradescope.late_marking(rules, metadata(TWO_DAYS_LATE, sid="S123"))  # found by the SID
    assert extended.factor == 1 and extended.late is None
    assert gradescope.late_marking(rules, None) == gradescope.Marking(rules)
    # rules without a due date of their own: the assignment's on Gradescope counts
    mine = Rules(per_day=0.25, cap=0.5)
    assert gradescope.late_marking(mine, metadata("2025-03-15T00:30:00+01:00")).factor == pytest.approx(0.75)
    assert gradescope.late_marking(mine, metadata("2025-03-20T00:30:00+01:00")).factor == pytest.approx(0.5)


def test_the_command_refuses_a_malformed_rules_file_before_the_zip_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rules.toml").write_text("due = 2025-03-14T23:59:00+01:00\n[late]\nper_day = 2\n")
    out = tmp_path / "autograder.zip"
    argv = [
        "gradescope",
        "--out",
        str(out),
        "--rules",
        str(tmp_path / "rules.toml"),
        "--exercises",
        str(EXERCISES),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "rules.toml, line 3" in err and "per_day" in err
    assert not out.exists()


@pytest.mark.slow
def test_a_late_submission_on_gradescope_scores_the_weighted_points_times_the_late_factor(
    tmp_path: Path, rules_bundle: Path
) -> None:
    root = tmp_path / "autograder"
    root.mkdir()
    (root / "submission_metadata.json").write_text(json.dumps(metadata(TWO_DAYS_LATE)))
    solved = write(tmp_path, "solved", notebook())
    status, output, results = simulate(
        rules_bundle, root, {"ex01_masked_softmax.ipynb": solved}, weights=WEIGHTS
    )
    assert status == 0, output
    assert [t["score"] for t in results["tests"]] == [0.8, 1.6, 0.8] and results["score"] == 3.2
    assert results["output"].startswith("3.2 of 4 points.\n\nHanded in 2 days late")
    assert "late: factor 0.8" in output


# ------------------------------------------------------------------------------------------------
# Gradescope's default limits, enforced by cgroups where this machine lets a test set them

#: Gradescope's default container: 768 MB of memory, half a CPU, 10 minutes per submission.
GRADESCOPE_MB, GRADESCOPE_CPU, GRADESCOPE_S = 768, 0.5, 600


def limited_cgroups(name: str) -> dict[str, Path] | None:
    """Child cgroups (v1) of this process's own memory and cpu cgroups, set to Gradescope's limits; None
    unless ATTN_COURSE_CGROUPS=1 asks for them (CI, where the test runs as root in a machine of its own),
    and where they cannot be made (not root, cgroup v2, a read-only hierarchy)."""
    if os.environ.get("ATTN_COURSE_CGROUPS") != "1":
        return None
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            own[controller] = path
    made: dict[str, Path] = {}
    try:
        if os.geteuid() != 0 or not {"memory", "cpu"} <= set(own):
            return None
        for controller in ("memory", "cpu"):
            made[controller] = Path("/sys/fs/cgroup", controller, own[controller].lstrip("/"), name)
            made[controller].mkdir()
        (made["memory"] / "memory.limit_in_bytes").write_text(str(GRADESCOPE_MB * 2**20))
        (made["cpu"] / "cpu.cfs_period_us").write_text("100000")
        (made["cpu"] / "cpu.cfs_quota_us").write_text(str(int(100000 * GRADESCOPE_CPU)))
    except OSError:
        remove_cgroups(made)
        return None
    return made


def remove_cgroups(made: dict[str, Path]) -> None:
    for folder in made.values():
        with contextlib.suppress(OSError):
            folder.rmdir()


@pytest.mark.slow
def test_a_full_solution_set_is_graded_within_gradescopes_default_limits(tmp_path: Path) -> None:
    cgroups = limited_cgroups(f"attn-course-gradescope-{os.getpid()}")
    if cgroups is None:
        pytest.skip("needs ATTN_COURSE_CGROUPS=1, root and writable memory and cpu cgroups (v1)")
    try:
        procs = [str(folder / "cgroup.procs") for folder in cgroups.values()]

        def enter() -> None:  # in the child, before run_autograder starts: into both cgroups
            for path in procs:
                Path(path).write_text(str(os.getpid()))

        bundle = build_bundle(tmp_path / "autograder.zip", exercises=EXERCISES)
        solutions = {p.name: p for p in sorted((ROOT / "solutions").glob("ex*.ipynb"))}
        started = time.monotonic()
        status, output, results = simulate(bundle, tmp_path / "autograder", solutions, enter=enter)
        seconds = time.monotonic() - started
        # cgroup v1 counts the page cache in its usage and reclaims it at the limit, so the usage peaks at
        # the limit whenever files are read; what fails a submission is a process killed for memory.
        peak_mb = int((cgroups["memory"] / "memory.max_usage_in_bytes").read_text()) / 2**20
        oom_control = (cgroups["memory"] / "memory.oom_control").read_text()
        oom = dict(line.split() for line in oom_control.splitlines())
    finally:
        remove_cgroups(cgroups)
    print(
        f"full solution set under Gradescope's limits: {seconds:.0f} s; memory with page cache at most "
        f"{peak_mb:.0f} MB; processes killed for memory: {oom.get('oom_kill', '?')}"
    )
    assert status == 0, output
    assert results["score"] == len(results["tests"]) == len(checks.EXERCISES), output
    assert seconds < GRADESCOPE_S and peak_mb <= GRADESCOPE_MB and oom.get("oom_kill", "0") == "0"
