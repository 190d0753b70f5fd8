"""Grade on Gradescope: build the autograder zip, and grade one student's upload in Gradescope's container.

The zip follows Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). At its root: ``setup.sh``, which Gradescope
runs once, with internet access, to build the image (Python, the CPU build of torch and the grader's other
imports); ``run_autograder``, which it runs for each submission in a fresh container; the source of the
modules of ``attn_course`` and ``attn_course_tools`` that grading imports (`closure.grading_modules`: the
checks and the library they call, the grader; not the widgets, plots, book or robustness tools);
``hidden.json`` if the instructor has hidden inputs; a README for the instructor.

``run_autograder`` runs `main`:
``python -m attn_course_tools.grading.gradescope --submission DIR --results FILE``.
It grades every notebook of the upload exactly as ``attn-course grade`` grades a class (the same sandboxes,
checks and messages), keeps the student's best attempt at each exercise across their notebooks, and writes
``results.json``: one test per exercise, whose output is the text ``attn-course grade`` writes for it in the
student's feedback file (`gradebook.feedback_text`). Whatever happens -- no notebook, no exercise, the grader
itself failing -- the student gets a results.json that says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
import traceback
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

import attn_course
from attn_course import checks
from attn_course_tools.grading.batch import Task, grade_many
from attn_course_tools.grading.closure import GRADESCOPE, PACKAGES, archive_name, grading_modules
from attn_course_tools.grading.gradebook import feedback_text
from attn_course_tools.grading.judging import check_hidden
from attn_course_tools.grading.pipeline import exercise_columns, read_all
from attn_course_tools.grading.reading import chapters_of, collect
from attn_course_tools.grading.records import ExerciseGrade, Limits, SubmissionGrade, best

#: Gradescope's visibility settings, for the results as a whole and for each test.
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")

#: What the grader imports besides torch and the standard library (torch brings typing_extensions;
#: sacrebleu, which chapter 12's BLEU exercise is judged with, brings its own requirements).
REQUIREMENTS = ("numpy>=1.26", "tqdm>=4.66", "sacrebleu>=2.4")

TORCH_INDEX = "https://download.pytorch.org/whl/cpu"

_UNKNOWN_NOTEBOOKS = "your exercise notebooks (`exercises/exNN_*.ipynb`)"

_SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root and with internet access, when it builds the autograder's image:
# Python, and a virtual environment with what the attn-course grader imports.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
VENV="$ROOT/venv"

apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --no-cache-dir --upgrade pip
"$VENV/bin/python" -m pip install --no-cache-dir --index-url {index} {torch}
"$VENV/bin/python" -m pip install --no-cache-dir {requirements}

# The grader runs the learner's code as the user nobody when nobody can read Python and the package (else
# as root, which could overwrite the results): let it, but keep the hidden inputs from it.
chmod a+rX "$ROOT" "$ROOT/source"
chmod -R a+rX {packages} "$VENV"
if [ -f "$ROOT/source/hidden.json" ]; then chmod 600 "$ROOT/source/hidden.json"; fi

# Fail the build now, rather than every submission later, if the grader cannot be imported.
cd "$ROOT/source"
"$VENV/bin/python" -c "import attn_course_tools.grading.gradescope, attn_course_tools.grading.sandbox_child"
"""

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
solved notebook. Gradescope runs `setup.sh` once, with internet access, to install Python and torch's CPU
build; then it runs `run_autograder` for each submission, in a fresh container. {points}

**What students submit.** Their exercise notebook(s), as `.ipynb` files, answers in the `# EXERCISE`
cells: {notebooks}. Several notebooks in one submission are fine; each exercise counts its best attempt.

**Where feedback shows.** On the student's results page: a summary of the submission, then one test per
exercise (one point each, e.g. "ch1.q1 sequence_mask: ...") with the verdict and message that
`attn-course grade` writes in its feedback files. Visibility: {visibility}. The grader's log (stdout) is
shown to instructors only. {hidden}

Limits of each notebook's sandbox: {limits}.
"""


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


def build_bundle(
    out: str | Path,
    *,
    exercises: str | Path,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    visibility: str = "visible",
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
) -> Path:
    """Write the Gradescope autograder zip to `out`; return its path.

    exercises: the course's exercises folder, whose notebooks students are told to upload (see
    `exercise_notebooks`; FileNotFoundError if it does not exist). hidden: the instructor's extra inputs
    (see `check_hidden`), shipped as hidden.json. chapters: the exercises every submission is graded on
    (default: those each notebook answers). visibility: one of VISIBILITIES, for the results and each test.
    limits: each notebook's sandbox. Raises ValueError for malformed hidden inputs, an unknown chapter or
    visibility.
    """
    if hidden is not None:
        check_hidden(hidden)
    for chapter in chapters or ():
        checks.chapter(chapter)  # ValueError naming the chapters there are
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, got {visibility!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    expected = exercise_notebooks(exercises, chapters)
    files = {
        "setup.sh": (setup_script(), 0o755),
        "run_autograder": (run_script(chapters, visibility, limits, hidden is not None, expected), 0o755),
        "README.md": (_readme(chapters, visibility, limits, hidden is not None, expected), 0o644),
        **({"hidden.json": (json.dumps(hidden, indent=2) + "\n", 0o644)} if hidden is not None else {}),
    }
    sources = {archive_name(name, path): path for name, path in grading_modules(GRADESCOPE).items()}
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


def setup_script() -> str:
    """setup.sh: Python, a venv with torch (this environment's version, CPU build) and REQUIREMENTS."""
    return _SETUP.format(
        packages=" ".join(f'"$ROOT/source/{package}"' for package in PACKAGES),
        index=TORCH_INDEX,
        torch=shlex.quote(f"torch=={torch_version()}"),
        requirements=" ".join(map(shlex.quote, REQUIREMENTS)),
    )


def run_script(
    chapters: Sequence[int] | None, visibility: str, limits: Limits, hidden: bool, expected: Sequence[str]
) -> str:
    """run_autograder: `main` on Gradescope's folders, and a results.json of its own if `main` wrote none."""
    options = [f"--chapter {c}" for c in chapters or ()]
    if hidden:
        options.append('--hidden "$ROOT/source/hidden.json"')
    options.append(f"--visibility {visibility}")
    options.append(f"--limits {shlex.quote(json.dumps(dataclasses.asdict(limits)))}")
    options += [f"--expect {shlex.quote(name)}" for name in expected]
    fallback = failed_results(
        "it stopped before writing any results (see the autograder's output)", visibility, seconds=0
    )
    return _RUN.format(
        options="".join(f" \\\n    {option}" for option in options), fallback=json.dumps(fallback, indent=2)
    )


def _readme(
    chapters: Sequence[int] | None, visibility: str, limits: Limits, hidden: bool, expected: Sequence[str]
) -> str:
    keys = [e.key for c in chapters or () for e in checks.chapter(c)]
    if chapters:
        what = f"chapter(s) {', '.join(map(str, chapters))}: {', '.join(keys)}"
        points = f"Set the assignment's autograder points to {len(keys)}, one per exercise."
    else:
        what = "the exercises of the chapters each submitted notebook answers"
        points = "Build it with --chapter to grade every submission on the same exercises (and points)."
    return _README.format(
        version=attn_course.__version__,
        torch=torch_version(),
        what=what,
        points=points,
        notebooks=", ".join(f"`{name}`" for name in expected) or _UNKNOWN_NOTEBOOKS,
        visibility=visibility,
        hidden="Hidden inputs (`hidden.json`) are graded too; setup.sh makes the file readable by root only."
        if hidden
        else "No hidden inputs are included.",
        limits=", ".join(f"{k} {v}" for k, v in dataclasses.asdict(limits).items()),
    )


def grade_upload(
    submission: Path,
    *,
    hidden: Mapping[str, Any] | None = None,
    chapters: Sequence[int] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
) -> tuple[list[str], list[SubmissionGrade]]:
    """Grade every notebook under the folder `submission`, one student's, as `attn-course grade` would:
    (the exercises graded, in course order; each notebook's grade)."""
    if not submission.is_dir():
        raise FileNotFoundError(f"the submission folder {submission} does not exist")
    submissions = list(read_all(collect([submission]), limits).values())
    if not submissions:
        return [e.key for c in chapters or () for e in checks.chapter(c)], []
    keys, per_path = exercise_columns(submissions, chapters)
    tasks = [Task(s, s.path.stem, tuple(per_path[s.path]), hidden, limits) for s in submissions]
    return keys, grade_many(tasks)


def results_json(
    keys: Sequence[str],
    grades: Sequence[SubmissionGrade],
    *,
    submission: Path,
    visibility: str = "visible",
    expected: Sequence[str] = (),
    seconds: float = 0.0,
) -> dict[str, Any]:
    """Gradescope's results.json for one student: a test per exercise of `keys` (their best attempt across
    `grades`), the score, and a summary of the upload that says what was expected if nothing was graded."""
    wanted = ", ".join(f"`{name}`" for name in expected) or _UNKNOWN_NOTEBOOKS
    missing = f"No notebook answering this exercise was submitted (expected {wanted})."
    tests = []
    for key in keys:
        found = best(grades, key)
        if found is None:
            exercise = checks.EXERCISES[key]
            found = ExerciseGrade(key, exercise.name, 0, checks.NOT_ATTEMPTED, missing)
        tests.append(_test(found, visibility))
    return {
        "score": sum(t["score"] for t in tests),
        "execution_time": round(seconds),
        "output": _summary(grades, tests, submission, wanted),
        "output_format": "md",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def _test(grade: ExerciseGrade, visibility: str) -> dict[str, Any]:
    exercise = checks.EXERCISES[grade.key]
    title = (
        exercise.title
        if exercise.title.startswith(f"{exercise.name}:")
        else f"{exercise.name}: {exercise.title}"
    )
    return {
        "name": f"{grade.key} {title}",
        "number": grade.key.removeprefix("ch").replace(".q", "."),
        "score": grade.points,
        "max_score": 1,
        "status": "passed" if grade.points else "failed",
        "output": feedback_text(grade),
        "output_format": "md",
        "visibility": visibility,
    }


def _summary(grades: Sequence[SubmissionGrade], tests: list[dict], submission: Path, wanted: str) -> str:
    """The submission's summary (Markdown): the points, each notebook and its notes, or what to upload."""
    upload = f"Upload {wanted} as .ipynb files, with your answers in the `# EXERCISE` cells."
    if not grades:
        lines = [f"No notebook was found in this submission, so nothing was graded. {upload}"]
    elif not tests:
        lines = [f"No exercise of the course was found in the notebooks submitted. {upload}"]
    else:
        lines = [f"{sum(t['score'] for t in tests)} of {len(tests)} points."]
    lines.append("")
    for grade in grades:
        name = grade.path.relative_to(submission).as_posix()
        lines.append(
            f"- `{name}` (sha256 {grade.sha256[:12]}): {grade.total} of {len(grade.exercises)} points."
        )
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Grade the submission and write results.json; 0, or 1 if the grader failed (results.json says why)."""
    args = _parser().parse_args(argv)
    started = time.monotonic()
    torch.set_num_threads(1)  # the checks' tensors are tiny: extra threads only add overhead
    package = Path(attn_course.__file__).parent
    print(f"attn-course {attn_course.__version__} from {package}, torch {torch.__version__}")
    try:
        hidden = None if args.hidden is None else check_hidden(json.loads(args.hidden.read_text()))
        limits = Limits() if args.limits is None else Limits(**json.loads(args.limits))
        keys, grades = grade_upload(args.submission, hidden=hidden, chapters=args.chapter, limits=limits)
        results = results_json(
            keys,
            grades,
            submission=args.submission,
            visibility=args.visibility,
            expected=args.expect,
            seconds=time.monotonic() - started,
        )
        status = 0
    except Exception as exc:  # the grader's own failure (a submission never raises): the student sees why
        traceback.print_exc()
        grades, status = [], 1
        results = failed_results(f"{type(exc).__name__}: {exc}", args.visibility, time.monotonic() - started)
    for grade in grades:
        print(f"{grade.total}/{len(grade.exercises)}  {grade.seconds:5.1f} s  {grade.path}")
    write_results(results, args.results)
    print(f"score {results['score']} of {len(results['tests'])}; results in {args.results}")
    return status


if __name__ == "__main__":
    sys.exit(main())
