"""Grading a class: seconds per submission with one job and with every core, and a re-run from the cache.

``python -m benchmarks.grading [--students 300] [--jobs 1 2] [--out grading.json]``

The class (`write_class`) is laid out as instructors get it, one folder per student,
``class/<student>/exNN_*.ipynb``, one submission of each exercise notebook per student. Each
submission is drawn, with a fixed seed, as:

- correct, 70%: the notebook of solutions/;
- untouched, 10%: the template of exercises/;
- wrong, 15%: the solutions with one exercise answered by a known-wrong implementation, drawn from the
  checks' own named mistakes, each written as the wrong code that makes it (`Mistake.wrong`;
  `wrong_answers`);
- raises, 5%: the solutions with one exercise left half done, calling a name it never defined (NameError);
- then, in place of drawn ones, per 100 students (at least one of each) one submission whose exercise
  cell never finishes (it runs into the cell timeout) and one whose cell ends its process (os._exit): the
  grader's expensive paths, in about the proportion a class sends them.

The measurement (`measure`) grades the whole class with each --jobs value (default: 1, then the cores this
process may use, `attn_course_tools.grading.batch.default_jobs`), each into a fresh folder with a fresh, empty
grade cache, then once more with the cache of the last run, which then holds every grade (the seconds of a
re-run). Grading runs processes side by side, so it is timed by the wall clock, and the machine's load
shows in it. The speed-up is the first run's seconds over the last uncached run's, both measured in this
run; the gradebooks (CSV bytes) of all runs must be identical.
"""

from __future__ import annotations

import argparse
import builtins
import copy
import datetime
import inspect
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import attn_course_exercises as checks
from attn_course_tools.grading import Limits, grade
from attn_course_tools.grading.batch import default_jobs
from benchmarks.measure import machine_info

ROOT = Path(__file__).resolve().parents[1]
MIX = {"correct": 0.70, "untouched": 0.10, "wrong": 0.15, "raises": 0.05}
HOSTILE = {  # what is added to an exercise cell of the solutions
    "hangs": "\nwhile True:  # left running\n    pass\n",
    "exits": "\nimport os\n\nos._exit(1)\n",
}
STUDENTS_PER_HOSTILE = 100
MIX_RULE = (", ".join(f"{share:.0%} {kind}" for kind, share in MIX.items()) + ", drawn per submission; then "
            f"per {STUDENTS_PER_HOSTILE} students (at least 1) one that {' and one that '.join(HOSTILE)}")
_STUB_LINE = re.compile(r"raise NotImplementedError.*")


def _globals_used(obj: Any) -> set[str]:
    """The global names a function, or a class's methods and bases, refer to."""
    if inspect.isclass(obj):
        methods = [v.__code__ for v in vars(obj).values() if inspect.isfunction(v)]
        return {b.__name__ for b in obj.__bases__}.union(*map(_code_names, methods))
    return _code_names(obj.__code__)


def _code_names(code: Any) -> set[str]:
    return set(code.co_names).union(*(_code_names(c) for c in code.co_consts if inspect.iscode(c)))


def _definitions(obj: Any, module: Any, seen: set[str]) -> list[Any]:
    """obj after the functions and classes of the check modules it needs (their helpers first), each once."""
    found = []
    for name in sorted(_globals_used(obj) - seen):
        helper = vars(module).get(name)
        if str(getattr(helper, "__module__", "")).startswith("attn_course_exercises.") and (
            inspect.isfunction(helper) or inspect.isclass(helper)
        ) and getattr(helper, "__name__", None) == name:
            seen.add(name)
            found += _definitions(helper, sys.modules[helper.__module__], seen)
    return [*found, obj]


def _answer_cell(key: str, wrong: Any) -> str | None:
    """The exercise cell of `key` answered with the wrong code `wrong` and the helpers of its check module
    it calls, or None when it needs a name the chapter's set-up does not give (or has no source to show).
    A mistake written as an edit of the model answer (`core.edit_of`) is that edited answer's source."""
    preamble: dict[str, Any] = {}
    exec(checks.PREAMBLES[int(key[2 : key.index(".")])], preamble)
    edited = getattr(wrong, "__course_source__", None)
    if edited is not None:
        return _edited_cell(key, wrong, edited, preamble)
    module = sys.modules[wrong.__module__]
    parts = _definitions(wrong, module, {wrong.__name__})
    needed = set().union(*map(_globals_used, parts)) - {p.__name__ for p in parts} - set(preamble)
    if needed & set().union(*(vars(sys.modules[p.__module__]) for p in parts)):
        return None
    try:
        source = "\n\n".join(inspect.getsource(p) for p in parts)
    except (OSError, TypeError):  # built at run time: inspect cannot find its source
        return None
    return f"# EXERCISE {key}\n{source}\n\n{checks.EXERCISES[key].name} = {wrong.__name__}\n"


def _edited_cell(key: str, wrong: Any, source: str, preamble: dict[str, Any]) -> str | None:
    """The exercise cell of `key` holding `source`, the model answer edited into the mistake `wrong`; None
    when it needs a name the chapter's set-up does not give."""
    scope: dict[str, Any] = dict(preamble)
    exec(compile(source, f"<{key} edited>", "exec"), scope)
    made = [v for v in scope.values() if inspect.isfunction(v) or inspect.isclass(v)]
    needed = set().union(*map(_globals_used, made)) - set(scope) - set(dir(builtins))
    methods = [v for v in vars(wrong).values() if inspect.isfunction(v)] if inspect.isclass(wrong) else []
    edit_scope = set().union(*(f.__globals__ for f in methods or [wrong]))
    if needed & edit_scope or checks.EXERCISES[key].name not in scope:
        return None
    return f"# EXERCISE {key}\n{source}"


def wrong_answers() -> dict[str, list[tuple[str, str]]]:
    """Each exercise's known-wrong answers as exercise cells: {key: [(mistake's name, cell source)]}.

    A cell holds a named mistake's wrong code (`Mistake.wrong`, as the checks diagnose it), the helpers of
    its check module it calls, and binds the exercise's name to it. Wrong code that needs a name the
    chapter's imports do not give is left out."""
    answers: dict[str, list[tuple[str, str]]] = {}
    for key, exercise in checks.EXERCISES.items():
        for mistake in exercise.mistakes:
            if mistake.wrong is not None and (cell := _answer_cell(key, mistake.wrong)) is not None:
                answers.setdefault(key, []).append((mistake.wrong.__name__, cell))
    return answers


def _exercise_cell(notebook: dict, key: str) -> dict:
    marker = checks.EXERCISES[key].marker
    return next(c for c in notebook["cells"] if "".join(c["source"]).startswith(marker))


def _submission(kind: str, name: str, solution: dict, template: dict, answers: dict,
                rng: random.Random) -> dict:
    """One student's notebook `name`: the template if `kind` is "untouched", else the solutions, with one
    exercise cell (drawn) made "wrong", "raises" or hostile as `kind` says."""
    notebook = copy.deepcopy(template if kind == "untouched" else solution)
    if kind in ("correct", "untouched"):
        return notebook
    key = rng.choice([e.key for e in checks.chapter(int(name[2:4]))])
    cell = _exercise_cell(notebook, key)
    if kind == "wrong":
        cell["source"] = rng.choice(answers[key])[1]
    elif kind == "raises":
        cell["source"] = _STUB_LINE.sub("return result", "".join(_exercise_cell(template, key)["source"]))
    else:
        cell["source"] = "".join(cell["source"]) + HOSTILE[kind]
    return notebook


def write_class(folder: str | Path, students: int, seed: int = 0) -> dict[str, int]:
    """Write a class of `students` x (one per exercise notebook) submissions under `folder` (see the module's
    docstring); return how many submissions of each kind it holds."""
    folder, rng = Path(folder), random.Random(seed)
    names = sorted(p.name for p in (ROOT / "solutions").glob("ex[0-9]*.ipynb"))
    solutions = {n: json.loads((ROOT / "solutions" / n).read_text()) for n in names}
    templates = {n: json.loads((ROOT / "exercises" / n).read_text()) for n in names}
    answers = wrong_answers()
    width = max(3, len(str(students)))
    slots = [(f"student{i:0{width}d}", name) for i in range(1, students + 1) for name in names]
    kinds = dict(zip(slots, rng.choices(list(MIX), weights=list(MIX.values()), k=len(slots)), strict=True))
    hostile = max(1, round(students / STUDENTS_PER_HOSTILE))
    for slot, kind in zip(rng.sample(slots, hostile * len(HOSTILE)), sorted(HOSTILE) * hostile, strict=True):
        kinds[slot] = kind
    for (student, name), kind in kinds.items():
        notebook = _submission(kind, name, solutions[name], templates[name], answers, rng)
        path = folder / student / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notebook, indent=1) + "\n")
    counts = Counter(kinds.values())
    return {kind: counts[kind] for kind in (*MIX, *HOSTILE)}


def _graded(class_dir: Path, out: Path, jobs: int, cache: Path, limits: Limits) -> dict[str, Any]:
    """Grade the class once; the run's seconds (wall clock), its submissions and how many came from cache."""
    started = time.perf_counter()
    results = grade([class_dir], out=out / "grades.csv", jobs=jobs, cache=cache, limits=limits)
    seconds = time.perf_counter() - started
    cached = sum(r.cached for r in results)
    return {"jobs": jobs, "seconds": seconds, "seconds_per_submission": seconds / len(results),
            "submissions": len(results), "from_cache": cached, "points": sum(r.total for r in results)}


def measure(students: int = 300, jobs: Sequence[int] | None = None, *, seed: int = 0,
            limits: Limits = Limits(),  # noqa: B008 - frozen, so one shared default is safe
            log: Callable[[str], object] = print) -> dict[str, Any]:
    """Write a class of `students` in a temporary folder and grade it with each of `jobs` (default 1 and
    the cores), then again from the last run's cache; the JSON-ready report."""
    jobs = list(jobs) if jobs else [1, default_jobs()]
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        work = Path(tmp)
        mix = write_class(work / "class", students, seed)
        runs = []
        for i, n in enumerate(jobs):
            log(f"  grading {students} students with jobs={n}, no remembered grades ...")
            runs.append(_graded(work / "class", work / f"run{i}", n, work / f"cache{i}", limits))
        log(f"  again with jobs={jobs[-1]} and the grades the last run remembered ...")
        rerun = _graded(work / "class", work / "rerun", jobs[-1], work / f"cache{len(jobs) - 1}", limits)
        books = [(work / f"run{i}" / "grades.csv").read_bytes() for i in range(len(jobs))]
        rerun_book = (work / "rerun" / "grades.csv").read_bytes()
    return {
        "students": students, "notebooks_per_student": 6, "submissions": runs[0]["submissions"],
        "mix": mix, "mix_rule": MIX_RULE,
        "wrong_answers": {"from": "the checks' named mistakes (Mistake.wrong)",
                          "mistakes": sum(m.wrong is not None for e in checks.EXERCISES.values()
                                          for m in e.mistakes),
                          "usable": sum(map(len, wrong_answers().values()))},
        "limits": asdict(limits), "cores": default_jobs(), "clock": "wall-clock (time.perf_counter)",
        "runs": runs, "speedup": runs[0]["seconds"] / runs[-1]["seconds"],
        "gradebooks_identical": all(book == books[0] for book in books),
        "rerun": rerun, "rerun_gradebook_identical": rerun_book == books[0],
        "rerun_speedup": runs[-1]["seconds"] / rerun["seconds"],
        "machine": machine_info("cpu"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def summary(report: dict[str, Any]) -> str:
    """The report in a few lines."""
    lines = [f"{report['students']} students x {report['notebooks_per_student']} notebooks = "
             f"{report['submissions']} submissions; mix {report['mix']}"]
    for run in report["runs"]:
        lines.append(f"jobs={run['jobs']}: {run['seconds']:.1f} s, {run['seconds_per_submission']:.3f} s per "
                     "submission")
    lines.append(f"speed-up {report['speedup']:.2f}x, gradebooks identical: {report['gradebooks_identical']}")
    rerun = report["rerun"]
    lines.append(f"re-run from the cache: {rerun['seconds']:.1f} s ({rerun['from_cache']} of "
                 f"{rerun['submissions']} remembered), same gradebook: {report['rerun_gradebook_identical']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grading",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=300, help="class size (default %(default)s)")
    parser.add_argument("--jobs", type=int, nargs="+", default=None,
                        help=f"--jobs values to time, in order (default: 1 {default_jobs()}, the cores)")
    parser.add_argument("--seed", type=int, default=0, help="the class's seed (default %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="write the report (JSON) here too")
    args = parser.parse_args(argv)
    if args.students < 1 or any(n < 1 for n in args.jobs or ()):
        parser.error("--students and --jobs must be >= 1")
    report = measure(args.students, args.jobs, seed=args.seed, log=lambda s: print(s, file=sys.stderr))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
