"""The course installed as a learner or an instructor installs it: `pip install .`, not editable, used from a
folder outside the checkout. The chapters' shipped data and results come with it, chapter 1's checks pass
the model answers and judge an untouched exercise "not attempted", and `attn-course grade` grades a class.

Installing torch and the rest into a fresh environment would take minutes and the network, so the fresh
environment gets this one's installed packages as hard links (no data is copied), all but the course's
editable install (a `.pth` hook pointing at the checkout): only the course pip installs can be imported.
The packages lie in the fresh environment's own site-packages, as after a real install. (Listing this
environment's site-packages in a `.pth` file instead would not do: the grader takes code outside the
running environment's site-packages and torch for the learner's, and refuses it what learner code may not
do, so a library in such a place fails every answer.) The hard links need one file system, so the fresh
environment is made inside this one's folder, and removed afterwards. The wheel is built from a copy of the
checkout as a fresh clone has it, so nothing is written among the checkout's sources and no file an
earlier build left in its build/ folder can slip into the wheel.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EX01, EX02 = "ex01_masked_softmax.ipynb", "ex02_scoring_functions.ipynb"
PACKAGES = ("attn_course", "attn_course_tools")  # the checkout's, which the installed copies must not be
#: What a fresh clone lacks (.gitignore): at its top, git's and tools' state, environments, builds and run
#: outputs; anywhere, Python's and Jupyter's caches.
TOP_NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "artifacts", "data", "*.egg-info", ".pytest_cache", ".ruff_cache",
    ".hypothesis",
)  # fmt: skip
NOT_IN_A_CLONE = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
#: This environment's site-packages, and in it the course's editable install, which the fresh one lacks.
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
THE_COURSE = shutil.ignore_patterns("attn_course*", "attn-course*", "__editable__*attn_course*")


def not_in_a_clone(folder: str, names: list[str]) -> set[str]:
    """`shutil.copytree`'s ignore: what a fresh clone of the checkout would not hold."""
    top = TOP_NOT_IN_A_CLONE(folder, names) if Path(folder) == ROOT else set()
    return top | NOT_IN_A_CLONE(folder, names)


def not_the_course(folder: str, names: list[str]) -> set[str]:
    """`shutil.copytree`'s ignore: the course's own entries at the top of site-packages."""
    return THE_COURSE(folder, names) if Path(folder) == SITE_PACKAGES else set()


class Installed:
    """A fresh virtual environment with the course pip-installed into it, and a folder outside the
    checkout to use it from."""

    def __init__(self, venv: Path, folder: Path) -> None:
        self.venv, self.elsewhere = venv, folder / "elsewhere"
        self.elsewhere.mkdir()
        self.python = self.venv / "bin" / "python"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        self.env = env | {"PYTHONNOUSERSITE": "1", "PATH": f"{self.venv / 'bin'}{os.pathsep}{env['PATH']}"}

    def run(self, *command: str | Path, stdin: str | None = None) -> str:
        """Run `command` in the folder outside the checkout; its stdout. Fails the test if it fails."""
        done = subprocess.run(
            [str(part) for part in command], cwd=self.elsewhere, env=self.env, input=stdin,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def python_says(self, code: str, stdin: str | None = None) -> object:
        """What `code`, run by the installed environment's Python, prints as JSON."""
        return json.loads(self.run(self.python, "-c", code, stdin=stdin))


def install(venv: Path, folder: Path) -> Installed:
    """A fresh venv at `venv` with this environment's packages (not its course), and the course installed
    from a clone of the checkout made in `folder`."""
    installed = Installed(venv, folder)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", installed.venv], check=True)
    purelib = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"
    site = Path(installed.python_says(purelib))
    shutil.copytree(
        SITE_PACKAGES, site, symlinks=True, ignore=not_the_course, copy_function=os.link, dirs_exist_ok=True
    )
    source = folder / "clone"
    shutil.copytree(ROOT, source, ignore=not_in_a_clone)
    pip = ["-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--ignore-installed"]
    installed.run(installed.python, *pip, "--no-cache-dir", "--disable-pip-version-check", "--quiet", source)
    shutil.rmtree(source)  # what follows can only use the installed copy
    return installed


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[Installed]:
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs the course's virtual environment (make env): the fresh one links its packages")
    venv = Path(tempfile.mkdtemp(prefix="install-test-", dir=sys.prefix))  # beside the packages it links
    try:
        yield install(venv / "venv", tmp_path_factory.mktemp("install"))
    finally:
        shutil.rmtree(venv)


def inside(path: str, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


SHIPPED = """
import json
import attn_course, attn_course_tools
from attn_course.course import RESULTS
from attn_course.data import tatoeba
print(json.dumps({
    "library": attn_course.__file__,
    "tools": attn_course_tools.__file__,
    "results": sorted(path.name for path in RESULTS.iterdir()),
    "sample": str(tatoeba.sample_path()),
    "corpora": sorted(path.name for path in tatoeba.sample_path().parent.iterdir()),
    "pairs": len(tatoeba.load_sample(num_pairs=5)),
}))
"""


def test_the_installed_course_is_the_copy_pip_made_with_its_data_and_results(installed):
    found = installed.python_says(SHIPPED)
    for key in ("library", "tools", "sample"):
        assert inside(found[key], installed.venv), (key, found[key])
        assert not any(inside(found[key], ROOT / package) for package in PACKAGES), (key, found[key])
    results = ROOT / "attn_course" / "course" / "results"
    shipped = sorted(path.name for path in results.iterdir() if path.suffix in (".json", ".md"))
    assert found["results"] == shipped and "robustness.json" in shipped
    assert {"fra-eng.txt.xz", "README.md"} <= set(found["corpora"]) and found["pairs"] == 5
    code = "import attn_course.course; print(attn_course.course.RESULTS)"
    results = Path(installed.run(installed.python, "-c", code).strip())
    assert inside(str(results), installed.venv) and (results / "robustness.json").is_file()


CHECK_CHAPTER_1 = """
import json, sys
import attn_course_exercises as checks
namespace = {}
exec(checks.PREAMBLES[1], namespace)
for source in json.loads(sys.stdin.read()):
    exec(source, namespace)
results = [exercise.evaluate(namespace[exercise.name]) for exercise in checks.chapter(1)]
print(json.dumps({result.exercise: [result.status, result.message] for result in results}))
"""


def exercise_cells(path: Path) -> list[str]:
    """The sources of a notebook's exercise cells (those that start `# EXERCISE chN.qM`)."""
    code = [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    return [source for source in code if source.startswith("# EXERCISE ")]


@pytest.mark.parametrize(("folder", "expected"), [("solutions", "passed"), ("exercises", "not attempted")])
def test_chapter_1_checks_judge_the_notebooks_answers_from_outside_the_checkout(installed, folder, expected):
    cells = exercise_cells(ROOT / folder / EX01)
    verdicts = installed.python_says(CHECK_CHAPTER_1, stdin=json.dumps(cells))
    assert sorted(verdicts) == ["ch1.q1", "ch1.q2", "ch1.q3"]
    statuses = {key: status for key, (status, _) in verdicts.items()}
    assert statuses == dict.fromkeys(verdicts, expected), verdicts


def test_the_installed_command_grades_a_class(installed, tmp_path):
    submissions = {
        "alice": [ROOT / "solutions" / EX01, ROOT / "solutions" / EX02],
        "bob": [ROOT / "exercises" / EX01],
    }
    for student, notebooks in submissions.items():
        (tmp_path / "class" / student).mkdir(parents=True)
        for notebook in notebooks:
            shutil.copyfile(notebook, tmp_path / "class" / student / notebook.name)
    command = shutil.which("attn-course", path=installed.env["PATH"])
    assert command is not None and inside(command, installed.venv)
    grades = tmp_path / "grades.csv"
    installed.run(command, "grade", tmp_path / "class", "--out", grades, "--jobs", "1")
    header, *table = csv.reader(grades.read_text(encoding="utf-8").splitlines())
    rows = {row[0]: row for row in table}
    total = [name.lower() for name in header].index("total")
    exercises = {name: column for column, name in enumerate(header) if name.startswith(("ch1.", "ch2."))}
    assert sorted(rows) == ["alice", "bob"] and len(exercises) > 3, (header, rows)
    assert all(float(rows["alice"][column]) > 0 for column in exercises.values()), (header, rows)
    assert float(rows["alice"][total]) == sum(float(rows["alice"][column]) for column in exercises.values())
    ch1 = [column for name, column in exercises.items() if name.startswith("ch1.")]
    assert [rows["bob"][column] for column in ch1] == ["0"] * 3 and float(rows["bob"][total]) == 0, rows
    assert sorted(path.name for path in (tmp_path / "grades_feedback").iterdir()) == ["alice.md", "bob.md"]
