"""Grade on Gradescope: build the autograder zip, and grade one student's upload in Gradescope's container.

The zip follows Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). At its root: ``setup.sh``, which Gradescope
runs once, with internet access, to build the image (Python, bubblewrap for the jail, the CPU build of torch
and the grader's other imports); ``run_autograder``, which it runs for each submission in a fresh container;
the source of the modules of the three packages that grading imports (`bundle_modules`:
the checks and the library they call, the grader, the jail; not the widgets, plots, book or robustness
tools), with the data files the checks read (chapter 9's committed seed study, chapter 12's attention maps);
``hidden.json`` if the instructor has hidden inputs; ``rules.toml`` if the course has rules (each
exercise's points, the due date, the late penalty: `attn_course_tools.grading.rules`); a README for the
instructor.

``run_autograder`` runs `main`:
``python -m attn_course_tools.grading.gradescope --submission DIR --results FILE``.
It grades every notebook of the upload as ``attn-course grade`` grades a class (the same sandboxes, jailed
where bubblewrap works, checks and messages), each on the exercises of its own chapters, and writes
``results.json``: one test per exercise, whose output is the text ``attn-course grade`` writes for it in the
student's feedback file (`gradebook.feedback_text`), taken from the notebook of the best attempt and naming
it. With rules, each test is worth the exercise's points and a late submission (Gradescope's
``submission_metadata.json`` says when it was made) loses what the rules say. Whatever happens -- no
notebook, no exercise, the grader itself failing -- the student gets a results.json that says why.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import shlex
import sys
import time
import traceback
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import attn_course
import attn_course_exercises as checks
from attn_course_tools.grading import jail
from attn_course_tools.grading.batch import Task, grade_many
from attn_course_tools.grading.closure import (
    GRADESCOPE,
    PACKAGES,
    archive_name,
    grading_data,
    grading_modules,
)
from attn_course_tools.grading.gradebook import feedback_text
from attn_course_tools.grading.judging import check_hidden
from attn_course_tools.grading.pipeline import exercise_columns, read_all
from attn_course_tools.grading.reading import Submission, chapters_of, collect, exercise_cells
from attn_course_tools.grading.records import ExerciseGrade, Limits, SubmissionGrade
from attn_course_tools.grading.rules import Rules, parse_time
from attn_course_tools.grading.sandbox_child import SERVER_COMMAND

#: Gradescope's visibility settings, for the results as a whole and for each test.
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")

#: What the grader imports besides torch and the standard library (torch brings typing_extensions;
#: sacrebleu, which chapter 12's BLEU exercise is judged with, brings its own requirements).
REQUIREMENTS = ("numpy>=1.26", "tqdm>=4.66", "sacrebleu>=2.4")

#: What reading a rules file needs besides: a TOML reader where Python is older than 3.11 (Ubuntu 22.04's
#: Python is 3.10), so installed only into such a Python.
RULES_REQUIREMENTS = ('tomli>=2; python_version < "3.11"',)

#: Debian's and Ubuntu's packages setup.sh installs: Python, and bubblewrap for the jail (`jail`); with
#: rules, the time zones a rules file may name.
APT_PACKAGES = ("python3", "python3-venv")
JAIL_PACKAGE = "bubblewrap"
RULES_APT_PACKAGES = ("tzdata",)

TORCH_INDEX = "https://download.pytorch.org/whl/cpu"

_UNKNOWN_NOTEBOOKS = "your exercise notebooks (`exercises/exNN_*.ipynb`)"

_SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root and with internet access, when it builds the autograder's image:
# Python, bubblewrap, and a virtual environment with what the attn-course grader imports.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
VENV="$ROOT/venv"

apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {apt}
# bubblewrap's `bwrap` is the operating-system jail each notebook's sandboxes run in (no network, nothing
# of the machine but Python and the course; attn_course_tools/grading/jail.py). Where it cannot be had, or
# the container does not let it make namespaces, every submission's output says so and grading goes on
# with limited processes.
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {jail} \\
    || echo "setup.sh: WARNING: {jail} could not be installed: submissions will run without the jail" >&2
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --no-cache-dir --upgrade pip
"$VENV/bin/python" -m pip install --no-cache-dir --index-url {index} {torch}
"$VENV/bin/python" -m pip install --no-cache-dir {requirements}

# The grader runs the learner's code as the user nobody when nobody can read Python and the package (else
# as root, which could overwrite the results): let it, but keep the hidden inputs and the rules from it.
chmod a+rX "$ROOT" "$ROOT/source"
chmod -R a+rX {packages} "$VENV"
for secret in hidden.json rules.toml; do
    if [ -f "$ROOT/source/$secret" ]; then chmod 600 "$ROOT/source/$secret"; fi
done

# Fail the build now, rather than every submission later, if the grader cannot be imported; and say
# whether the jail works in this image.
cd "$ROOT/source"
"$VENV/bin/python" -c "import attn_course_tools.grading.gradescope, attn_course_tools.grading.sandbox_child"
"$VENV/bin/python" -c "{jail_check}" || true
"""

#: setup.sh's last line: whether the jail works in the image Gradescope built.
_JAIL_CHECK = (
    "from attn_course_tools.grading import jail; found = jail.status(); "
    "print('setup.sh: the jail works' if found.jailed else f'setup.sh: {found.notice}')"
)

_RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission, in a fresh container: grade the notebooks under submission/
# and write results/results.json. AUTOGRADER_ROOT and AUTOGRADER_PYTHON replace /autograder and the Python
# that setup.sh installed (to try the autograder outside Gradescope).
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"

cd "$ROOT/source" && PYTHONPATH="$ROOT/source" "$PYTHON" -m attn_course_tools.grading.gradescope \\
    --submission "$ROOT/submission" --results "$RESULTS"{options}
status=$?
if [ ! -s "$RESULTS" ]; then  # the grader could not start, or was killed: the student still learns why
    echo "run_autograder: the grader ended with status $status and wrote no results" >&2
    cat > "$RESULTS" <<'EOF'
{fallback}
EOF
    [ "$status" -ne 0 ] || status=1
fi
exit "$status"
"""

_README = """\
# attn-course autograder for Gradescope

Built by `attn-course gradescope` (attn-course {version}, torch {torch} on CPU). It grades {what}, with
the same sandboxes, checks and messages as `attn-course grade`.

**Upload.** In Gradescope, create a Programming Assignment; under *Configure Autograder*, choose an Ubuntu
base image (Python 3.10 or later), upload this zip as it is, and check it with *Test Autograder* and a
solved notebook. Gradescope runs `setup.sh` once, with internet access, to install Python, bubblewrap and
torch's CPU build; then it runs `run_autograder` for each submission, in a fresh container. {points}

**What students submit.** Their exercise notebook(s), as `.ipynb` files, answers in the `# EXERCISE`
cells: {notebooks}. Several notebooks in one submission are fine: each is graded on its own chapters'
exercises, and each exercise counts its best attempt, whose notebook its test names. An exercise of a
chapter whose notebook is not in the submission says so.

**Where feedback shows.** On the student's results page: a summary of the submission, then one test per
exercise ({worth}, e.g. "ch1.q1 sequence_mask: ...") with the verdict and message that `attn-course grade`
writes in its feedback files. Visibility: {visibility}. The grader's log (stdout) is shown to instructors
only: it says whether the submission ran in the jail (bubblewrap), and, loudly, when it did not. {hidden}
{late}
Limits of each notebook's sandbox: {limits}.
"""


@dataclass(frozen=True)
class Settings:
    """What an autograder zip grades, and how: the chapters (None: those each notebook answers), the
    visibility of the results, each notebook's sandbox limits, whether hidden inputs are shipped, the rules
    (None: one point an exercise, nothing lost for lateness) and the notebooks students are told to
    upload."""

    chapters: tuple[int, ...] | None = None
    visibility: str = "visible"
    limits: Limits = field(default_factory=Limits)
    hidden: bool = False
    rules: Rules | None = None
    expected: tuple[str, ...] = ()


def torch_version() -> str:
    """This environment's torch version without its local build tag: "2.14.1" for "2.14.1+cu130"."""
    return torch.__version__.split("+")[0]


def exercise_notebooks(exercises: str | Path, chapters: Sequence[int] | None = None) -> list[str]:
    """The course's exercise notebooks of `chapters` (default: all) in the folder `exercises`, named as
    students know them: "exercises/ex01_masked_softmax.ipynb". FileNotFoundError if there is no such
    folder."""
    folder = Path(exercises)
    if not folder.is_dir():
        raise FileNotFoundError(f"the exercises folder {folder} does not exist")
    wanted = set(chapters or checks.chapters())
    return [
        f"exercises/{p.name}" for p in sorted(folder.glob("ex*.ipynb")) if wanted & {*chapters_of(None, p)}
    ]


def bundle_modules() -> dict[str, Path]:
    """{module: source file} of the course's modules the zip ships: what grading an upload imports
    (`closure.grading_modules`), with what the sandboxes' fork server imports on its command line
    (`sandbox_child.SERVER_COMMAND`, code in a string, which the closure's reading of import statements
    does not see)."""
    server: list[str] = []
    for node in ast.walk(ast.parse(SERVER_COMMAND)):
        if isinstance(node, ast.Import):
            server += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            server.append(node.module)
    return grading_modules((*GRADESCOPE, *server))


def build_bundle(
    out: str | Path,
    *,
    exercises: str | Path,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    visibility: str = "visible",
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
    rules: str | Path | None = None,
) -> Path:
    """Write the Gradescope autograder zip to `out`; return its path.

    exercises: the course's exercises folder, whose notebooks students are told to upload (see
    `exercise_notebooks`; FileNotFoundError if it does not exist). hidden: the instructor's extra inputs
    (see `check_hidden`), shipped as hidden.json. chapters: the exercises every submission is graded on
    (default: those each notebook answers). visibility: one of VISIBILITIES, for the results and each test.
    limits: each notebook's sandbox. rules: a rules file (`Rules.load`), shipped as rules.toml. Raises
    ValueError for malformed hidden inputs or rules, an unknown chapter or visibility.
    """
    if hidden is not None:
        check_hidden(hidden)
    for chapter in chapters or ():
        checks.chapter(chapter)  # ValueError naming the chapters there are
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, got {visibility!r}")
    loaded = None if rules is None else Rules.load(rules)  # ValueError naming the file and the line
    settings = Settings(
        tuple(chapters) if chapters else None,
        visibility,
        limits,
        hidden is not None,
        loaded,
        tuple(exercise_notebooks(exercises, chapters)),
    )
    files = {
        "setup.sh": (setup_script(settings), 0o755),
        "run_autograder": (run_script(settings), 0o755),
        "README.md": (_readme(settings), 0o644),
        **({"hidden.json": (json.dumps(hidden, indent=2) + "\n", 0o644)} if hidden is not None else {}),
        **({"rules.toml": (Path(rules).read_text(encoding="utf-8"), 0o644)} if rules is not None else {}),
    }
    return _write_zip(Path(out), files)


def _write_zip(out: Path, files: Mapping[str, tuple[str, int]]) -> Path:
    """The zip: `files` ({name: (text, mode)}) at its root, then the source of `bundle_modules` and their
    packages' data files (`closure.grading_data`)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    modules = bundle_modules()
    sources = {archive_name(name, path): path for name, path in modules.items()} | grading_data(modules)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, (text, mode) in files.items():
            _add(bundle, name, text.encode(), mode)
        for name in sorted(sources):
            _add(bundle, name, sources[name].read_bytes(), 0o644)
    return out


def _add(bundle: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    """One regular file with Unix permissions and a fixed date, so the same sources give the same zip."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.create_system = 3  # Unix: unzip restores the mode, so run_autograder stays executable
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(info, data)


def setup_script(settings: Settings = Settings()) -> str:  # noqa: B008 - frozen, so one shared default is safe
    """setup.sh: Python and bubblewrap (apt-get), a venv with torch (this environment's version, CPU build)
    and REQUIREMENTS; with rules, what reading them needs."""
    with_rules = settings.rules is not None
    return _SETUP.format(
        apt=" ".join(APT_PACKAGES + (RULES_APT_PACKAGES if with_rules else ())),
        jail=JAIL_PACKAGE,
        packages=" ".join(f'"$ROOT/source/{package}"' for package in PACKAGES),
        index=TORCH_INDEX,
        torch=shlex.quote(f"torch=={torch_version()}"),
        requirements=" ".join(map(shlex.quote, REQUIREMENTS + (RULES_REQUIREMENTS if with_rules else ()))),
        jail_check=_JAIL_CHECK,
    )


def run_script(settings: Settings) -> str:
    """run_autograder: `main` on Gradescope's folders, and a results.json of its own if `main` wrote none."""
    options = [f"--chapter {c}" for c in settings.chapters or ()]
    if settings.hidden:
        options.append('--hidden "$ROOT/source/hidden.json"')
    if settings.rules is not None:
        options += ['--rules "$ROOT/source/rules.toml"', '--metadata "$ROOT/submission_metadata.json"']
    options.append(f"--visibility {settings.visibility}")
    options.append(f"--limits {shlex.quote(json.dumps(dataclasses.asdict(settings.limits)))}")
    options += [f"--expect {shlex.quote(name)}" for name in settings.expected]
    fallback = failed_results(
        "it stopped before writing any results (see the autograder's output)", settings.visibility, seconds=0
    )
    return _RUN.format(
        options="".join(f" \\\n    {option}" for option in options), fallback=json.dumps(fallback, indent=2)
    )


def _readme(settings: Settings) -> str:
    """The zip's README.md, for the instructor: what it grades and how to set the assignment up."""
    rules = settings.rules or Rules()
    keys = [e.key for c in settings.chapters or () for e in checks.chapter(c)]
    if settings.chapters:
        what = f"chapter(s) {', '.join(map(str, settings.chapters))}: {', '.join(keys)}"
        total = sum(rules.weight(k) for k in keys)
        points = f"Set the assignment's autograder points to {total:g}, the sum of its exercises' points."
    else:
        what = "the exercises of the chapters each submitted notebook answers"
        points = "Build it with --chapter to grade every submission on the same exercises (and points)."
    return _README.format(
        version=attn_course.__version__,
        torch=torch_version(),
        what=what,
        points=points,
        notebooks=", ".join(f"`{name}`" for name in settings.expected) or _UNKNOWN_NOTEBOOKS,
        worth="one point each" if settings.rules is None else "worth the points `rules.toml` gives it",
        visibility=settings.visibility,
        hidden="Hidden inputs (`hidden.json`) are graded too; setup.sh makes the file readable by root only."
        if settings.hidden
        else "No hidden inputs are included.",
        late="" if settings.rules is None else _late_readme(settings.rules),
        limits=", ".join(f"{k} {v}" for k, v in dataclasses.asdict(settings.limits).items()),
    )


def _late_readme(rules: Rules) -> str:
    """The README's paragraph on the rules' late penalty."""
    due = rules.due.isoformat() if rules.due is not None else "the assignment's due date on Gradescope"
    penalty = (
        f"{rules.per_day:.0%} of the points a day or part of a day late, at most {rules.cap:.0%}"
        if rules.per_day
        else "nothing"
    )
    return (
        f"\n**Late work** (`rules.toml`, readable by root only). Due: {due}; a submission made later (its "
        f"time on Gradescope) loses {penalty}, and its summary says so. An extension in the rules is "
        "found by the student's SID on Gradescope, else their email, else their name; in a group, the "
        "member who loses least counts.\n"
    )


@dataclass
class Upload:
    """One student's upload, graded: the exercises graded (in course order), each notebook's grade, the
    chapters each notebook answers (`reading.chapters_of`: [] where none can be told) and the exercises
    each has a cell for."""

    keys: list[str]
    grades: list[SubmissionGrade]
    chapters: dict[Path, list[int]] = field(default_factory=dict)
    answered: dict[Path, set[str]] = field(default_factory=dict)


def grade_upload(
    submission: Path,
    *,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
) -> Upload:
    """Grade every notebook under the folder `submission`, one student's, as `attn-course grade` would,
    each on the exercises of its own chapters among `chapters` (a notebook whose chapters cannot be told:
    on all of them), so that one notebook's problem touches only its own chapters' exercises."""
    if not submission.is_dir():
        raise FileNotFoundError(f"the submission folder {submission} does not exist")
    submissions = list(read_all(collect([submission]), limits).values())
    if not submissions:
        return Upload([e.key for c in chapters or () for e in checks.chapter(c)], [])
    own = {s.path: chapters_of(s.notebook, s.path) for s in submissions}
    keys, per_path = _exercises(submissions, own, chapters)
    tasks = [Task(s, s.path.stem, tuple(per_path[s.path]), hidden, limits) for s in submissions]
    graded = {g.path: g for g in grade_many([t for t in tasks if t.keys or not own[t.path]])}
    grades = [graded.get(s.path) or _outside(s, own[s.path]) for s in submissions]
    answered = {s.path: _answered(s, per_path[s.path]) for s in submissions}
    return Upload(keys, grades, own, answered)


def _exercises(
    submissions: Sequence[Submission], own: Mapping[Path, list[int]], chapters: Sequence[int] | None
) -> tuple[list[str], dict[Path, list[str]]]:
    """The exercises graded, and each notebook's: those of its own chapters among `chapters`, all of them
    where its chapters cannot be told (without `chapters`: as `attn-course grade` chooses)."""
    if chapters is None:
        return exercise_columns(submissions, None)
    keys = [e.key for c in chapters for e in checks.chapter(c)]
    return keys, {path: [k for k in keys if not found or _chapter(k) in found] for path, found in own.items()}


def _chapter(key: str) -> int:
    """The chapter of exercise `key`: 2 for "ch2.q1"."""
    return int(key[2 : key.index(".")])


def _outside(submission: Submission, chapters: Sequence[int]) -> SubmissionGrade:
    """The grade of a notebook none of whose chapters the assignment grades: nothing, and why."""
    note = (
        f"It answers chapter(s) {', '.join(map(str, chapters))}, which this assignment does not grade, so "
        "it was not graded."
    )
    path = submission.path
    return SubmissionGrade(path, path.stem, submission.sha256, {}, [note], 0.0)


def _answered(submission: Submission, keys: Sequence[str]) -> set[str]:
    """The exercises of `keys` the notebook has a cell for (by marker, metadata or definition)."""
    if submission.notebook is None:
        return set()
    return {cell.exercise for cell in exercise_cells(submission.notebook, keys)[0]}


def chosen(upload: Upload, key: str) -> SubmissionGrade | None:
    """The notebook whose grade of exercise `key` counts, or None if no notebook was graded on it: the
    best attempt (most points; then a notebook with a cell for it; then an attempt over an untouched stub;
    then a notebook of the exercise's chapter; then the first uploaded)."""

    def rank(grade: SubmissionGrade) -> tuple:
        found = grade.exercises[key]
        return (
            found.points,
            key in upload.answered.get(grade.path, ()),
            found.status != checks.NOT_ATTEMPTED,
            _chapter(key) in upload.chapters.get(grade.path, ()),
        )

    return max((g for g in upload.grades if key in g.exercises), key=rank, default=None)


@dataclass(frozen=True)
class Marking:
    """How points become a score: each exercise's points (`Rules.weight`), and the late factor with the
    sentence that explains it (`Rules.late`; 1 and None when on time or without rules)."""

    rules: Rules = field(default_factory=Rules)
    factor: float = 1.0
    late: str | None = None


def results_json(
    upload: Upload,
    *,
    submission: Path,
    visibility: str = "visible",
    expected: Sequence[str] = (),
    seconds: float = 0.0,
    marking: Marking = Marking(),  # noqa: B008 - frozen, so one shared default is safe
    jailed: bool | None = None,
) -> dict[str, Any]:
    """Gradescope's results.json for one student: a test per exercise of the upload's keys (their best
    attempt, `chosen`, worth its points and scaled by the late factor of `marking`), the score, and a
    summary of the upload that says what was expected if nothing was graded. jailed: whether the
    submission ran in the jail (in `extra_data`, for the instructor), None if not known."""
    tests = [_test(upload, key, submission, visibility, expected, marking) for key in upload.keys]
    results = {
        "score": _number(sum(t["score"] for t in tests)),
        "execution_time": round(seconds),
        "output": _summary(upload.grades, tests, submission, expected, marking),
        "output_format": "md",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    extra = {"jailed": jailed, "late_factor": marking.factor}
    results["extra_data"] = {k: v for k, v in extra.items() if v is not None}
    return results


def _number(value: float) -> int | float:
    """A score as Gradescope shows it: 2 rather than 2.0, 0.9 rather than 0.9000000000000001."""
    value = round(value, 4)
    return int(value) if value == int(value) else value


def _test(
    upload: Upload, key: str, submission: Path, visibility: str, expected: Sequence[str], marking: Marking
) -> dict[str, Any]:
    """The test of exercise `key`: the best attempt's points, verdict and message, and its notebook."""
    exercise, source = checks.EXERCISES[key], chosen(upload, key)
    if source is None:
        grade = ExerciseGrade(key, exercise.name, 0, checks.NOT_ATTEMPTED, _not_uploaded(key, expected))
        where = ""
    else:
        grade = source.exercises[key]
        where = f"\n\nGraded from `{source.path.relative_to(submission).as_posix()}`."
    title = (
        exercise.title
        if exercise.title.startswith(f"{exercise.name}:")
        else f"{exercise.name}: {exercise.title}"
    )
    weight = marking.rules.weight(key)
    return {
        "name": f"{key} {title}",
        "number": key.removeprefix("ch").replace(".q", "."),
        "score": _number(grade.points * weight * marking.factor),
        "max_score": _number(weight),
        "status": "passed" if grade.points else "failed",
        "output": feedback_text(grade) + where,
        "output_format": "md",
        "visibility": visibility,
    }


def _not_uploaded(key: str, expected: Sequence[str]) -> str:
    """The message of an exercise whose chapter has no notebook in the upload."""
    chapter = _chapter(key)
    names = [name for name in expected if chapter in chapters_of(None, Path(name))]
    wanted = ", ".join(f"`{name}`" for name in names) or f"`exercises/ex{chapter:02d}_*.ipynb`"
    return (
        f"No notebook for chapter {chapter} was uploaded, so this exercise was not graded: upload {wanted} "
        "with your answers in its `# EXERCISE` cells."
    )


def _summary(
    grades: Sequence[SubmissionGrade],
    tests: list[dict],
    submission: Path,
    expected: Sequence[str],
    marking: Marking,
) -> str:
    """The submission's summary (Markdown): the points and any late penalty, each notebook and its notes,
    or what to upload."""
    wanted = ", ".join(f"`{name}`" for name in expected) or _UNKNOWN_NOTEBOOKS
    upload = f"Upload {wanted} as .ipynb files, with your answers in the `# EXERCISE` cells."
    if not grades:
        lines = [f"No notebook was found in this submission, so nothing was graded. {upload}"]
    elif not tests:
        lines = [f"No exercise of the course was found in the notebooks submitted. {upload}"]
    else:
        score, most = (_number(sum(t[k] for t in tests)) for k in ("score", "max_score"))
        lines = [f"{score} of {most} points."]
    if marking.late is not None:
        lines += ["", marking.late]
    lines.append("")
    for grade in grades:
        name = grade.path.relative_to(submission).as_posix()
        solved = f"{grade.total} of {len(grade.exercises)} exercises solved"
        lines.append(f"- `{name}` (sha256 {grade.sha256[:12]}): {solved}.")
        lines += [f"  - {note}" for note in grade.notes]
    if sum(len(g.exercises) for g in grades) > len(tests):
        lines += ["", "Where several notebooks answer an exercise, the best attempt counts."]
    return "\n".join(lines).strip() + "\n"


def failed_results(reason: str, visibility: str, seconds: float) -> dict[str, Any]:
    """The results.json of a submission the grader itself failed on: no points, and why."""
    return {
        "score": 0,
        "execution_time": round(seconds),
        "output": f"The autograder failed, so this submission got no points: {reason}. Please tell your "
        "instructor.",
        "output_format": "md",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": [],
    }


def write_results(results: Mapping[str, Any], path: Path) -> Path:
    """Write results.json whole (aside, then renamed), so Gradescope never reads half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.tmp")
    aside.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(aside, path)
    return path


def late_marking(rules: Rules, metadata: Mapping[str, Any] | None) -> Marking:
    """The marking of a submission under `rules`, from Gradescope's submission metadata (None: not known,
    so nothing is lost): handed in at its `created_at`, due at the rules' due date, else the assignment's
    `due_date` on Gradescope. A student's extension is found by their `sid`, else `email`, else `name`;
    in a group, the member the rules treat best counts. ValueError names a time that cannot be read."""
    if metadata is None:
        return Marking(rules)
    created = metadata.get("created_at")
    submitted = None if created is None else parse_time(str(created), rules, "created_at")
    due = (metadata.get("assignment") or {}).get("due_date")
    if rules.due is None and due is not None:
        rules_due = dataclasses.replace(rules, due=parse_time(str(due), rules, "assignment.due_date"))
    else:
        rules_due = rules
    students = [_student(user, rules) for user in metadata.get("users") or [] if isinstance(user, dict)]
    factor, sentence = max((rules_due.late(s, submitted) for s in students or [""]), key=lambda f: f[0])
    return Marking(rules, factor, sentence)


def _student(user: Mapping[str, Any], rules: Rules) -> str:
    """The id a Gradescope user has in `rules`: the first of their sid, email and name that has an
    extension there, else the first they have."""
    ids = [str(user[k]).strip() for k in ("sid", "email", "name") if user.get(k) and str(user[k]).strip()]
    return next((i for i in ids if i in rules.extensions), ids[0] if ids else "")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m attn_course_tools.grading.gradescope",
        description="Grade one Gradescope submission (every notebook under --submission) and write "
        "Gradescope's results.json. The autograder zip's run_autograder runs it.",
    )
    parser.add_argument("--submission", required=True, type=Path, help="the student's upload, a folder")
    parser.add_argument("--results", required=True, type=Path, help="the results.json to write")
    parser.add_argument("--hidden", type=Path, default=None, help="the instructor's hidden inputs (JSON)")
    parser.add_argument(
        "--chapter", type=int, action="append", choices=checks.chapters(), help="grade these chapters"
    )
    parser.add_argument("--visibility", choices=VISIBILITIES, default="visible")
    parser.add_argument("--limits", default=None, help="the sandbox's Limits, as a JSON object")
    parser.add_argument(
        "--expect", action="append", default=[], help="a notebook students should upload, to name if none is"
    )
    parser.add_argument("--rules", type=Path, default=None, help="the course's rules file (TOML)")
    parser.add_argument(
        "--metadata", type=Path, default=None, help="Gradescope's submission_metadata.json (for --rules)"
    )
    return parser


def _marking(args: argparse.Namespace) -> Marking:
    """The --rules and the late factor the --metadata gives under them; without rules, the default."""
    if args.rules is None:
        return Marking()
    rules = Rules.load(args.rules)
    if args.metadata is None or not args.metadata.is_file():
        print(f"no submission metadata at {args.metadata}: no late penalty applies")
        return Marking(rules)
    try:
        return late_marking(rules, json.loads(args.metadata.read_text()))
    except ValueError as exc:  # Gradescope's own file: grade anyway, and tell the instructor
        print(f"WARNING: the submission's time could not be read ({exc}): no late penalty applies")
        return Marking(rules)


def _grade(args: argparse.Namespace, started: float) -> dict[str, Any]:
    """Grade the upload `args` names (jailed where the jail works); its results.json."""
    found = jail.status()  # JailError where ATTN_COURSE_JAIL=require and the jail does not work
    print("submissions run in the jail (bubblewrap)" if found.jailed else found.notice)
    hidden = None if args.hidden is None else check_hidden(json.loads(args.hidden.read_text()))
    limits = Limits() if args.limits is None else Limits(**json.loads(args.limits))
    marking = _marking(args)
    upload = grade_upload(args.submission, hidden=hidden, chapters=args.chapter, limits=limits)
    for grade in upload.grades:
        print(f"{grade.total}/{len(grade.exercises)}  {grade.seconds:5.1f} s  {grade.path}")
    if marking.late is not None:
        print(f"late: factor {marking.factor:g}: {marking.late}")
    return results_json(
        upload,
        submission=args.submission,
        visibility=args.visibility,
        expected=args.expect,
        seconds=time.monotonic() - started,
        marking=marking,
        jailed=found.jailed,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Grade the submission and write results.json; 0, or 1 if the grader failed (results.json says why)."""
    args = _parser().parse_args(argv)
    started = time.monotonic()
    torch.set_num_threads(1)  # the checks' tensors are tiny: extra threads only add overhead
    package = Path(attn_course.__file__).parent
    print(f"attn-course {attn_course.__version__} from {package}, torch {torch.__version__}")
    try:
        results, status = _grade(args, started), 0
    except Exception as exc:  # the grader's own failure (a submission never raises): the student sees why
        traceback.print_exc()
        status = 1
        results = failed_results(f"{type(exc).__name__}: {exc}", args.visibility, time.monotonic() - started)
    write_results(results, args.results)
    most = _number(sum(t["max_score"] for t in results["tests"]))
    print(f"score {results['score']} of {most}; results in {args.results}")
    return status


if __name__ == "__main__":
    sys.exit(main())
