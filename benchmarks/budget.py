"""The course's time budget: ``python -m benchmarks.budget [NOTEBOOK ...] [--limit 120] [--out FILE]``.

Runs each notebook alone under nbval, as CI does (``pytest --nbval-lax --nbval-current-env``), in a fresh
process, and reports its wall-clock time and the CPU time of the process and its kernel (user + system,
from resource.getrusage of the children). The budget of the course: each chapter within `--limit` seconds
(2 minutes) on 2 CPU cores, nbval over all notebooks within 15 minutes. On a busy machine the wall-clock
time grows with the load while the CPU time barely does, so both are shown. Without arguments it runs every
notebook of notebooks/, exercises/ and solutions/. ``--strict`` exits with status 1 when a notebook fails
or exceeds the limit in wall-clock time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("notebooks", "exercises", "solutions")
TOTAL_LIMIT_S = 15 * 60


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_notebook(path: Path, cell_timeout: int = 300) -> dict[str, object]:
    """Run one notebook under nbval in a fresh process: {"notebook", "passed", "wall_s", "cpu_s"}."""
    command = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
               f"--nbval-cell-timeout={cell_timeout}", "-p", "no:cacheprovider", "-q", str(path)]
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    return {"notebook": name, "passed": done.returncode == 0, "wall_s": time.perf_counter() - wall,
            "cpu_s": _children_cpu() - cpu}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.budget", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook of the course")
    parser.add_argument("--limit", type=float, default=120.0,
                        help="seconds allowed per notebook (default 120)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 if a notebook fails or exceeds the limit")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(p for folder in FOLDERS
                                                             for p in (ROOT / folder).glob("*.ipynb"))
    if not paths:
        parser.error("no notebooks found")
    rows = []
    print(f"{'notebook':46} {'result':>6} {'wall s':>7} {'cpu s':>7}  within {args.limit:.0f} s")
    for path in paths:
        row = time_notebook(path)
        row["within_limit"] = row["wall_s"] <= args.limit
        rows.append(row)
        print(f"{row['notebook']:46} {'pass' if row['passed'] else 'FAIL':>6} {row['wall_s']:7.1f} "
              f"{row['cpu_s']:7.1f}  {'yes' if row['within_limit'] else 'NO'}", flush=True)
    wall, cpu = sum(r["wall_s"] for r in rows), sum(r["cpu_s"] for r in rows)
    print(f"{'all notebooks':46} {'':>6} {wall:7.1f} {cpu:7.1f}  within {TOTAL_LIMIT_S} s: "
          f"{'yes' if wall <= TOTAL_LIMIT_S else 'NO'}; load average {os.getloadavg()[0]:.1f}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"limit_s": args.limit, "total_limit_s": TOTAL_LIMIT_S,
                                        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
                                        "total_wall_s": wall, "total_cpu_s": cpu, "notebooks": rows},
                                       indent=1) + "\n")
    ok = all(r["passed"] and r["within_limit"] for r in rows) and wall <= TOTAL_LIMIT_S
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
