"""The `attn-course` command line: ``attn-course grade SUBMISSION... --out grades.csv``.

Until the console script is installed, run it as ``python -m attn_course.cli grade ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from attn_course import checks
from attn_course.grading import (
    Identities,
    IdentityError,
    Limits,
    SubmissionGrade,
    check_hidden,
    collect,
    grade,
)
from attn_course.grading.identity import RULES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attn-course", description="Tools for the attention course.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_grade(commands)
    _add_hidden_template(commands)
    return parser


def _add_grade(commands: argparse._SubParsersAction) -> None:
    """The `grade` command: what to grade, where to write, and the limits of each submission's process."""
    # One declaration per option, as argparse wants them: long, but there is nothing to split.
    g = commands.add_parser(
        "grade",
        help="grade exercise notebooks with the course's checks, safely",
        description="Grade exercise notebooks: each runs in a fresh, limited process; the course's own "
        "checks judge the results. Writes a CSV gradebook (one row per student, one column per exercise, "
        "total) and one Markdown feedback file per student. The submissions are only read.",
    )
    g.add_argument(
        "submissions", nargs="+", metavar="SUBMISSION", help="notebook files, or folders of .ipynb files"
    )
    g.add_argument("--out", required=True, type=Path, help="the CSV gradebook to write")
    g.add_argument(
        "--feedback",
        type=Path,
        default=None,
        help="folder for the per-student feedback files (default: OUT's name + _feedback)",
    )
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


def hidden_template(chapters: Sequence[int] | None) -> dict:
    """What `attn-course hidden-template` prints: two extra seeds and one extra case per exercise."""
    return {
        exercise.key: {"seeds": [1001, 1002], "cases": [dict(exercise.defaults, seed=1003)]}
        for chapter in (chapters or checks.chapters())
        for exercise in checks.chapter(chapter)
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 when the gradebook was written)."""
    args = _parser().parse_args(argv)
    if args.command == "hidden-template":
        print(json.dumps(hidden_template(args.chapter), indent=2))
        return 0
    hidden = None
    if args.hidden is not None:
        try:
            hidden = check_hidden(json.loads(args.hidden.read_text()))
        except (OSError, ValueError) as exc:
            print(f"attn-course grade: --hidden {args.hidden}: {exc}", file=sys.stderr)
            return 2
    try:
        limits = Limits(
            cell_timeout=args.cell_timeout,
            total_timeout=args.total_timeout,
            memory_mb=args.memory_mb,
            max_output_kb=args.max_output_kb,
        )
    except ValueError as exc:  # e.g. --cell-timeout 0: say which option, not a traceback
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return 2
    paths = collect(args.submissions)
    if not paths:
        print("attn-course grade: no notebooks found in the given paths", file=sys.stderr)
        return 2

    def announce(identities: Identities) -> None:
        print("\n".join(identities.summary()), flush=True)

    def report(result: SubmissionGrade) -> None:
        if not args.quiet:
            points = f"{result.total}/{len(result.exercises)}"
            print(f"{result.student:<24} {points:>6}  {result.seconds:5.1f} s  {result.path}", flush=True)

    # The checks' tensors are tiny: extra threads only add overhead (and the sandboxes use one thread too).
    torch.set_num_threads(1)
    started = time.monotonic()
    try:
        results = grade(
            paths,
            out=args.out,
            feedback=args.feedback,
            hidden=hidden,
            chapters=args.chapter,
            limits=limits,
            id_from=args.id_from,
            announce=announce,
            progress=report,
        )
    except IdentityError as exc:  # raised before anything is graded: the files to sort out, no traceback
        print(f"attn-course grade: {exc}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started
    feedback = args.feedback or args.out.with_name(f"{args.out.stem}_feedback")
    print(
        f"graded {len(results)} submissions in {elapsed:.1f} s ({elapsed / len(results):.1f} s each); "
        f"gradebook {args.out}, feedback in {feedback}/"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
