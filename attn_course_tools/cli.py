"""The `attn-course` command line: ``attn-course grade SUBMISSION... --out grades.csv``,
``attn-course gradescope --out autograder.zip`` for a Gradescope autograder that grades the same way, and
``attn-course release --out DIR`` for the exercise notebooks of graded work (model answers off).

Until the console script is installed, run it as ``python -m attn_course_tools.cli grade ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch

import attn_course_exercises as checks
from attn_course_tools.grading import (
    FORMATS,
    Identities,
    IdentityError,
    Limits,
    Roster,
    SubmissionGrade,
    check_hidden,
    collect,
    grade,
    gradebook_rows,
    jail,
)
from attn_course_tools.grading.batch import default_jobs
from attn_course_tools.grading.closure import PACKAGES
from attn_course_tools.grading.gradebook import Marking, notes_path
from attn_course_tools.grading.gradescope import VISIBILITIES, build_bundle, torch_version
from attn_course_tools.grading.identity import RULES
from attn_course_tools.grading.release import build_release
from attn_course_tools.grading.report import report_paths
from attn_course_tools.grading.rules import Rules, parse_time, read_overrides, read_times


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attn-course", description="Tools for the attention course.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_grade(commands)
    _add_hidden_template(commands)
    _add_gradescope(commands)
    _add_release(commands)
    return parser


def _add_grade(commands: argparse._SubParsersAction) -> None:
    """The `grade` command: what to grade, where to write, and the limits of each submission's process."""
    g = commands.add_parser(
        "grade",
        help="grade exercise notebooks with the course's checks, safely",
        description="Grade exercise notebooks: each runs in a fresh, limited process; the course's own "
        "checks judge the results. Writes a gradebook (one row per student, one column per exercise, "
        "total; or Canvas's or Moodle's import format) and one Markdown feedback file per student. "
        "Grades are remembered: running it again on the same folder grades only new or changed "
        "submissions. The submissions are only read. Exit status: 0 done, 1 a file given (roster, rules, "
        "overrides, times, the gradebook at --out) was refused, 2 the command line or the batch's layout "
        "is wrong.",
    )
    g.add_argument(
        "submissions", nargs="+", metavar="SUBMISSION", help="notebook files, or folders of .ipynb files"
    )
    g.add_argument(
        "--out",
        required=True,
        type=Path,
        help="the CSV gradebook to write; one already there is never shrunk (see --replace, --only)",
    )
    g.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="csv",
        help="the gradebook's form: the course's CSV (default), Canvas's gradebook import (a column per "
        "exercise) or Moodle's offline grading worksheet (one total grade and a feedback comment)",
    )
    g.add_argument(
        "--canvas-column",
        default=None,
        metavar="NAME",
        help="with --format canvas: one column NAME holding the total (e.g. 'Assignment 1 (12345)', as "
        "Canvas's export names the assignment) instead of a column per exercise",
    )
    g.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="the class: a CSV of one student id a line, optionally a name, or Canvas's gradebook export, "
        "or Moodle's grading worksheet or participants export; every student on it gets a row (0, 'no "
        "submission' if nothing came); students not on it are listed",
    )
    g.add_argument(
        "--feedback",
        type=Path,
        default=None,
        help="folder for the per-student feedback files (default: OUT's name + _feedback)",
    )
    _add_grade_gradebook(g)
    _add_grade_selection(g)
    _add_grade_running(g)


def _add_grade_gradebook(g: argparse.ArgumentParser) -> None:
    """`grade`'s options on the gradebook already at --out, and the course's rules, overrides and times."""
    g.add_argument(
        "--replace",
        action="store_true",
        help="write over the gradebook at --out even if this run drops students it has",
    )
    g.add_argument(
        "--only",
        action="append",
        metavar="STUDENT",
        help="regrade only this student (repeatable; the id the gradebook gives, or the layout's) from the "
        "submissions given: their rows of the gradebook at --out are updated, every other line is kept, "
        "and only their feedback is written",
    )
    g.add_argument(
        "--rules",
        type=Path,
        default=None,
        help="the course's rules (TOML): each exercise's points, the due date, the late penalty per day and "
        "its cap, students' extensions",
    )
    g.add_argument(
        "--overrides",
        type=Path,
        default=None,
        help="CSV of student,exercise,points,reason: the instructor's points, applied on every run; the "
        "student reads the reason",
    )
    g.add_argument(
        "--times",
        type=Path,
        default=None,
        help="CSV of student,submitted (2025-03-14T18:02:00+01:00): when each student handed in, for the "
        "late penalty of --rules where the layout gives no time",
    )


def _add_grade_selection(g: argparse.ArgumentParser) -> None:
    """`grade`'s options that choose what is graded and whose it is: hidden inputs, chapters, student ids."""
    g.add_argument(
        "--hidden",
        type=Path,
        default=None,
        help='JSON with extra test inputs kept out of the student release: {"ch1.q2": {"seeds": '
        '[101, 102], "cases": [{"num_keys": 9, "dtype": "float64"}]}}',
    )
    g.add_argument(
        "--chapter",
        type=int,
        action="append",
        choices=checks.chapters(),
        help="grade these chapters' exercises (repeatable; default: those the notebooks answer)",
    )
    g.add_argument(
        "--id-from",
        choices=(*RULES, "stem"),
        default="auto",
        help="student ids: from each file's folder, its file name (or 'stem'), nbgrader's, Canvas's or "
        "Moodle's layout, or metadata.attn_course.student; auto (default) picks from the layout and "
        "says which",
    )


def _add_grade_running(g: argparse.ArgumentParser) -> None:
    """`grade`'s options for the run: jobs, the cache, each submission's limits, what is printed."""
    g.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help="submissions graded at once, each in its own limited process (default: the cores, %(default)s)",
    )
    g.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="folder of remembered grades (default: OUT's name + _cache); a submission is graded again "
        "only if it, the checks or the hidden inputs changed",
    )
    g.add_argument("--force", action="store_true", help="grade every submission again, ignoring the cache")
    defaults = Limits()
    g.add_argument(
        "--cell-timeout",
        type=float,
        default=defaults.cell_timeout,
        help="seconds per exercise cell and per call of a learner's function (default %(default)s)",
    )
    g.add_argument(
        "--total-timeout",
        type=float,
        default=defaults.total_timeout,
        help="seconds per submission, all of it (default %(default)s)",
    )
    g.add_argument(
        "--memory-mb",
        type=int,
        default=defaults.memory_mb,
        help="address-space limit of the process running a submission (default %(default)s)",
    )
    g.add_argument(
        "--max-output-kb",
        type=int,
        default=defaults.max_output_kb,
        help="most a cell may print (default %(default)s)",
    )
    g.add_argument("--quiet", action="store_true", help="print only the summary line")


def _add_hidden_template(commands: argparse._SubParsersAction) -> None:
    """The `hidden-template` command: a --hidden file to start from."""
    t = commands.add_parser(
        "hidden-template",
        help="print a --hidden file to start from: every exercise with the keys its cases accept",
        description="Print a JSON template for `grade --hidden`: for each exercise, extra seeds (each reruns "
        "every shipped case with that seed) and one extra case showing every key a case accepts, with its "
        "default value. Edit it, keep it out of the student release, and pass it to `grade --hidden`.",
    )
    t.add_argument(
        "--chapter",
        type=int,
        action="append",
        choices=checks.chapters(),
        help="only these chapters (repeatable)",
    )


def _add_gradescope(commands: argparse._SubParsersAction) -> None:
    """The `gradescope` command: an autograder zip that grades each Gradescope submission like `grade`."""
    s = commands.add_parser(
        "gradescope",
        help="build a Gradescope autograder zip that grades each submission like `grade`",
        description="Build an autograder zip for a Gradescope programming assignment: setup.sh installs "
        "Python and torch's CPU build (on Gradescope, which has internet), run_autograder grades every "
        "notebook a student uploads with the course's checks, in the same sandboxes, and reports one test "
        "per exercise with the message `grade` writes in its feedback files.",
    )
    s.add_argument("--out", required=True, type=Path, help="the zip to write, e.g. autograder.zip")
    s.add_argument(
        "--hidden",
        type=Path,
        default=None,
        help="JSON with extra test inputs, as for `grade --hidden`; shipped in the zip as hidden.json",
    )
    s.add_argument(
        "--chapter",
        type=int,
        action="append",
        choices=checks.chapters(),
        help="grade every submission on these chapters' exercises (repeatable; default: those each "
        "notebook answers)",
    )
    s.add_argument(
        "--visibility",
        choices=VISIBILITIES,
        default="visible",
        help="when students see their results and each exercise's test (Gradescope's settings; default "
        "%(default)s)",
    )
    s.add_argument(
        "--rules",
        type=Path,
        default=None,
        help="the course's rules (TOML: each exercise's points, the due date, the late penalty, "
        "extensions); shipped in the zip as rules.toml: each test is worth the exercise's points and a "
        "late submission loses what the rules say",
    )
    _add_exercises(s, "whose notebooks students are told to upload")


def _add_release(commands: argparse._SubParsersAction) -> None:
    """The `release` command: the exercise notebooks for graded work, model answers off."""
    r = commands.add_parser(
        "release",
        help="write the exercise notebooks for graded work (solution() off) and a README for the instructor",
        description="Write the course's exercise notebooks for graded work: the set-up cell asks for "
        "graded mode (`checks.chapter(N, graded=True)`: solution() says solutions are off), the "
        "`# qK.solution()` lines are removed, markers, checks and hints are kept so `attn-course grade` "
        "grades them as usual. Also writes README.md for the instructor.",
    )
    r.add_argument("--out", required=True, type=Path, help="the folder to write the notebooks to")
    r.add_argument(
        "--chapter",
        type=int,
        action="append",
        choices=checks.chapters(),
        help="only these chapters (repeatable; default: all)",
    )
    _add_exercises(r, "to release")


def _add_exercises(command: argparse.ArgumentParser, what: str) -> None:
    """The --exercises option of `release` and `gradescope`: where the course's exercise notebooks are."""
    command.add_argument(
        "--exercises",
        type=Path,
        default=Path("exercises"),
        help=f"the course's folder of exercise notebooks {what} (default: %(default)s, in the current "
        "folder)",
    )


def _exercises_folder(args: argparse.Namespace) -> Path:
    """The --exercises folder; FileNotFoundError naming the option if it is not there."""
    if not args.exercises.is_dir():
        raise FileNotFoundError(
            f"--exercises {args.exercises}: no such folder (run from the course's folder, or pass "
            "--exercises with the path of its exercises/ folder)"
        )
    return args.exercises


def _release(args: argparse.Namespace) -> int:
    """Write the release; print what was written."""
    try:
        paths = build_release(args.out, chapters=args.chapter, exercises=_exercises_folder(args))
    except (OSError, ValueError) as exc:
        print(f"attn-course release: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(paths)} notebooks for graded work and README.md to {args.out}/:")
    print("\n".join(f"  {p.name}" for p in paths))
    return 0


def hidden_template(chapters: Sequence[int] | None) -> dict:
    """What `attn-course hidden-template` prints: two extra seeds and one extra case per exercise."""
    return {
        exercise.key: {"seeds": [1001, 1002], "cases": [dict(exercise.defaults, seed=1003)]}
        for chapter in (chapters or checks.chapters())
        for exercise in checks.chapter(chapter)
    }


def _read_inputs(args: argparse.Namespace) -> tuple[dict | None, Limits]:
    """The --hidden inputs and the limits; ValueError says which option is wrong."""
    hidden = _read_hidden(args.hidden)
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    if args.canvas_column is not None and args.format != "canvas":
        raise ValueError(f"--canvas-column is for --format canvas, got --format {args.format}")
    if args.only and args.replace:
        raise ValueError("--only updates some rows of the gradebook and --replace writes it anew: give one")
    if args.times is not None and args.rules is None:
        raise ValueError("--times gives submission times for the late penalty of --rules: give --rules too")
    limits = Limits(
        cell_timeout=args.cell_timeout,
        total_timeout=args.total_timeout,
        memory_mb=args.memory_mb,
        max_output_kb=args.max_output_kb,
    )
    return hidden, limits


def _read_course(args: argparse.Namespace) -> tuple[Roster | None, Marking]:
    """The --roster, --rules, --overrides and --times files; ValueError names the file, the line and what is
    wrong."""
    roster = Roster.read(args.roster) if args.roster is not None else None  # RosterError names the line
    rules = Rules.load(args.rules) if args.rules is not None else None
    overrides = read_overrides(args.overrides, rules) if args.overrides is not None else ()
    times = {}
    if rules is not None and roster is not None:
        where = f"roster {args.roster}: the submission time of"
        times = {s: parse_time(t, rules, f"{where} {s}") for s, t in roster.submitted.items()}
    if args.times is not None:
        times.update(read_times(args.times, rules))
    return roster, Marking(rules, overrides, times)


def _read_hidden(path: Path | None) -> dict | None:
    """The --hidden inputs, checked; ValueError names the file and what is wrong."""
    if path is None:
        return None
    try:
        return check_hidden(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--hidden {path}: {exc}") from exc


def _gradescope(args: argparse.Namespace) -> int:
    """Build the autograder zip; print where it is and what it holds."""
    try:
        hidden, exercises = _read_hidden(args.hidden), _exercises_folder(args)
        path = build_bundle(  # ValueError naming the rules file and its line, before the zip is written
            args.out,
            exercises=exercises,
            hidden=hidden,
            chapters=args.chapter,
            visibility=args.visibility,
            rules=args.rules,
        )
    except (OSError, ValueError) as exc:
        print(f"attn-course gradescope: {exc}", file=sys.stderr)
        return 2
    with zipfile.ZipFile(path) as bundle:
        names = bundle.namelist()
    sources = {package: [n for n in names if n.startswith(f"{package}/")] for package in PACKAGES}
    print(f"wrote {path} ({path.stat().st_size // 1024} KB), to upload to Gradescope as it is:")
    print("\n".join(f"  {n}" for n in names if "/" not in n))
    print("\n".join(f"  {package}/ ({len(files)} .py files)" for package, files in sources.items()))
    chapters = ", ".join(map(str, args.chapter)) if args.chapter else "those each notebook answers"
    print(
        f"grades chapters: {chapters}; hidden inputs: {'yes' if hidden is not None else 'no'}; rules: "
        f"{args.rules if args.rules is not None else 'none'}; visibility: {args.visibility}; setup.sh "
        f"installs torch {torch_version()} (CPU) and bubblewrap (the jail) on Gradescope"
    )
    return 0


def _summary(results: list[SubmissionGrade], roster: Roster | None, rule: str, only: bool) -> list[str]:
    """What the command prints after grading: the roster's students without a row, those not on it (not
    when only some students were regraded)."""
    lines = []
    if roster is not None and not only:
        rows = gradebook_rows(results, roster, rule)
        for note in ("no submission", "not on the roster"):
            found = [row.student for row in rows if row.note == note]
            if found:
                lines.append(f"{note} ({len(found)}): {', '.join(found)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 when the command did its work)."""
    args = _parser().parse_args(argv)
    if args.command == "hidden-template":
        print(json.dumps(hidden_template(args.chapter), indent=2))
        return 0
    if args.command == "gradescope":
        return _gradescope(args)
    if args.command == "release":
        return _release(args)
    return _grade(args)


def _grade_inputs(args: argparse.Namespace) -> tuple[dict | None, Limits, Roster | None, Marking] | int:
    """`grade`'s inputs (the hidden inputs, the limits, the roster, the marking), or the exit status if one
    is wrong, said on stderr: 2 for an option, 1 for a file refused."""
    try:
        hidden, limits = _read_inputs(args)
    except ValueError as exc:  # e.g. --cell-timeout 0: say which option, not a traceback
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return 2
    try:
        roster, marking = _read_course(args)
    except ValueError as exc:  # a roster, rules, overrides or times file refused: its line, no traceback
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return 1
    if not collect(args.submissions):
        print("attn-course grade: no notebooks found in the given paths", file=sys.stderr)
        return 2
    return hidden, limits, roster, marking


def _say_where_it_runs() -> bool:
    """Whether grading may go ahead as for the jail (bubblewrap's): print, once and loudly, that the
    submissions will run without it where they will; False where ATTN_COURSE_JAIL=require cannot be met."""
    try:
        status = jail.status()
    except (jail.JailError, ValueError) as exc:
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return False
    if status.notice:
        print(status.notice, file=sys.stderr, flush=True)
    return True


def _grade(args: argparse.Namespace) -> int:
    """Grade the submissions; print each as it is graded, then where everything was written."""
    inputs = _grade_inputs(args)
    if isinstance(inputs, int):
        return inputs
    hidden, limits, roster, marking = inputs
    rule = "auto"

    def announce(identities: Identities) -> None:
        nonlocal rule
        rule = identities.rule
        print("\n".join(identities.summary()), flush=True)

    def report(result: SubmissionGrade) -> None:
        if not args.quiet:
            points = f"{result.total}/{len(result.exercises)}"
            took = "cached" if result.cached else f"{result.seconds:.1f} s"
            print(f"{result.student:<24} {points:>6}  {took:>8}  {result.path}", flush=True)

    if not _say_where_it_runs():
        return 1
    # The checks' tensors are tiny: extra threads only add overhead (and the sandboxes use one thread too).
    torch.set_num_threads(1)
    started = time.monotonic()
    cache = args.cache or args.out.with_name(f"{args.out.stem}_cache")
    try:
        results = grade(
            args.submissions,
            out=args.out,
            feedback=args.feedback,
            hidden=hidden,
            chapters=args.chapter,
            limits=limits,
            id_from=args.id_from,
            roster=roster,
            format=args.format,
            jobs=args.jobs,
            cache=cache,
            force=args.force,
            announce=announce,
            progress=report,
            marking=marking,
            only=args.only or (),
            replace=args.replace,
            canvas_column=args.canvas_column,
        )
    except IdentityError as exc:  # raised before anything is graded: the files to sort out, no traceback
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # the gradebook at --out, or the course's files, refused before grading
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return 1
    print("\n".join(line for line in _summary(results, roster, rule, bool(args.only)) if line))
    _print_written(args, results, cache, time.monotonic() - started)
    return 0


def _print_written(
    args: argparse.Namespace, results: list[SubmissionGrade], cache: Path, seconds: float
) -> None:
    """The run's last lines: how many were graded or reused, and where each file was written."""
    feedback = args.feedback or args.out.with_name(f"{args.out.stem}_feedback")
    cached = sum(r.cached for r in results)
    updated = f"updated the rows of {', '.join(args.only)} in" if args.only else "gradebook"
    print(
        f"graded {len(results) - cached} submissions and reused {cached} remembered grades in "
        f"{seconds:.1f} s with {min(args.jobs, max(len(results) - cached, 1))} job(s); "
        f"{updated} {args.out} ({args.format}), notes in {notes_path(args.out)}, feedback in {feedback}/, "
        f"cache in {cache}/"
    )
    paths = report_paths(args.out)
    if args.only:
        print(
            f"class report {paths.markdown}, similarity and integrity reports left as they were (they need "
            "the class)"
        )
        return
    figure = f", chart {paths.figure}" if paths.figure.exists() else " (no named mistake to chart)"
    print(f"class report {paths.markdown} and {paths.csv}{figure}; similarity report {paths.similarity}")
    print(f"integrity report {paths.integrity}")


if __name__ == "__main__":
    sys.exit(main())
