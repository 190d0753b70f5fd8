"""The measured figures the guides show, generated from the results on record, never typed.

    python -m attn_course_tools.docs            # rewrite the generated regions of the guides
    python -m attn_course_tools.docs --check    # exit 1, naming the page, if one is out of date

A page marks each region it does not write by hand:

    <!-- generated: robustness -->
    (the claims' spread, from attn_course/course/results/robustness.json)
    <!-- end generated -->

and this module fills it from the results (`REGIONS` names each region and what writes it), so a table
changes when a new run is committed, and only then. `tests/project/test_docs.py` fails when a page differs
from what this module writes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from attn_course.course.claims import measurements
from attn_course_tools import robustness
from attn_course_tools.checkout import add_root_option, parsed_checkout

#: The pages with generated regions, relative to the checkout.
PAGES = ("docs/maintainers.md",)
#: The benchmarks' last CPU run, relative to the checkout (`make bench` writes it).
BENCH_RESULTS = Path("benchmarks/results/bench-cpu.json")

REGION = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)",
                    re.DOTALL)


def robustness_table(root: Path) -> str:
    """The claims' spread over seeds, CPU kernels and threads, as `attn_course_tools.robustness.table`
    writes it from the committed results."""
    return robustness.table(measurements())


def bench_run(root: Path) -> str:
    """One sentence: which machine and sizes the benchmarks' last run used."""
    results = json.loads((root / BENCH_RESULTS).read_text(encoding="utf-8"))
    machine, config = results["machine"], results["config"]
    threads = machine["torch_threads"]
    where = (f"{machine['device_name']}, {machine['logical_cpus']} cores, {threads} torch "
             f"thread{'s' * (threads != 1)}, torch {machine['torch']}, {results['date'][:10]}")
    sizes = (f"{config['train_pairs']:,} training pairs of {config['min_len']}–{config['max_len']} tokens, "
             f"embeddings of {config['embed_size']}, encoder of {config['encoder_hiddens']} units, "
             f"batches of {config['batch_size']}")
    return (f"The last run (`{BENCH_RESULTS.as_posix()}`: {where}; {sizes}), as `python -m benchmarks.run` "
            "prints it; a target is the ratio the course aims for, not a bar any test asserts:\n")


def bench_table(root: Path) -> str:
    """The benchmarks' claims as a Markdown table: the rows `benchmarks.run.claims` stored in the results."""
    rows = json.loads((root / BENCH_RESULTS).read_text(encoding="utf-8"))["claims"]
    lines = ["| claim | ratio | rounds | target | met | what is compared |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        ratio = "n/a" if row["ratio"] is None else f"{'>=' if row['lower_bound'] else ''}{row['ratio']:.2f}x"
        rounds = "" if row.get("rounds") is None else "{:.1f}–{:.1f}".format(*row["rounds"])
        target = "" if row["target"] is None else f"{row['target']:.1f}x"
        met = "" if row["met"] is None else ("yes" if row["met"] else "no")
        lines.append(f"| {row['claim']} | {ratio} | {rounds} | {target} | {met} | {row['meaning']} |")
    return "\n".join(lines) + "\n"


def grading_bench(root: Path) -> str:
    """One paragraph: the seeded class the benchmarks' last run graded, and how fast."""
    report = json.loads((root / BENCH_RESULTS).read_text(encoding="utf-8"))["benchmarks"]["grading"]
    runs, mix = {run["jobs"]: run for run in report["runs"]}, report["mix"]
    most = max(runs)
    same = "identical" if report["gradebooks_identical"] else "DIFFERENT"
    cls = (f"{report['students']} students × {report['notebooks_per_student']} notebooks "
           f"({report['submissions']:,} submissions: mostly correct, some untouched, wrong or raising, "
           f"{mix['hangs']} that hang and {mix['exits']} that call `os._exit`; `benchmarks/grading.py`)")
    speed = (f"{runs[1]['seconds_per_submission']:.3f} s per submission with `--jobs 1`, "
             f"{runs[most]['seconds_per_submission']:.3f} s with `--jobs {most}`, a {report['speedup']:.2f}x "
             f"speed-up with {same} gradebooks, and {report['rerun']['seconds']:.1f} s for the whole class "
             "again from the grade cache")
    return (f"It also grades a seeded class of {cls}, by the wall clock: on {report['cores']} cores "
            f"({report['machine']['cpu']}) {speed}.\n")


#: Each region's name and what writes it, from the checkout's path.
REGIONS: dict[str, Callable[[Path], str]] = {
    "robustness": robustness_table,
    "bench-run": bench_run,
    "bench-table": bench_table,
    "grading-bench": grading_bench,
}


def render(text: str, root: Path) -> str:
    """`text` with every generated region written afresh; ValueError for a region this module doesn't know."""

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in REGIONS:
            raise ValueError(f"<!-- generated: {name} -->: no such region; expected one of {sorted(REGIONS)}")
        return match[1] + REGIONS[name](root) + match[4]

    return REGION.sub(fill, text)


def stale_pages(root: Path, pages: Sequence[str] = PAGES) -> list[str]:
    """The pages whose generated regions differ from what `render` writes."""
    return [page for page in pages if render(_read(root / page), root) != _read(root / page)]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attn_course_tools.docs",
                                     description=__doc__.split("\n")[0])
    add_root_option(parser)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    root = parsed_checkout(parser, args.root, "docs", "benchmarks")
    if args.check:
        stale = stale_pages(root)
        for page in stale:
            print(f"{page} is out of date: run python -m attn_course_tools.docs", file=sys.stderr)
        return 1 if stale else 0
    for page in PAGES:
        path = root / page
        path.write_text(render(_read(path), root), encoding="utf-8")
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
