"""`make robustness`: the training chapters run over seeds x CPU kernels x threads, their claims read back.

In the course's checkout (or name it with `--root`), with RESULTS = attn_course/course/results:

    python -m attn_course_tools.robustness --out RESULTS/robustness.json                  # the full matrix
    python -m attn_course_tools.robustness --out /tmp/r.json --seeds 0 --kernels default --threads 1 \
        --chapters 04
    python -m attn_course_tools.robustness --out RESULTS/robustness-cuda.json --device cuda  # on a GPU
    python -m attn_course_tools.robustness --out RESULTS/robustness.json --merge /tmp/ch09.json  # made apart

A chapter's claims about a trained model hold on a learner's machine only if they hold whatever the seed
and the floating-point path: torch picks its CPU kernels by the processor (ATEN_CPU_CAPABILITY: default,
avx2, avx512), the number of threads changes how sums are split, and a GPU computes differently again.
So each run executes one chapter notebook top to bottom (nbclient), as a learner would, in a fresh kernel
whose environment sets

    ATTN_COURSE_SEED       the chapter's model seed (`attn_course.training.runtime.course_seed`)
    ATEN_CPU_CAPABILITY    torch's CPU kernels
    OMP_NUM_THREADS        torch's threads
    ATTN_COURSE_ARTIFACTS  a folder of this (seed, kernel, threads) alone: chapter 4 reuses chapter 3's
                           model of the same run, never one trained under another kernel

and reads back the values `attn_course.course.claims.check` logged (`ATTN_COURSE_CLAIMS_LOG`). A run that
fails (an assert, a claim, a crash) is recorded with its error. The results, JSON and a Markdown table, give
per claim its bar and the min / median / max over all runs, and the margin: how far the worst run is on
the right side of the bar.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from attn_course.course.claims import CLAIMS, LOG_VARIABLE, RESULTS_FORMAT, Claim, measurements, read_log
from attn_course.training.runtime import ARTIFACTS_VARIABLE, SEED_VARIABLE
from attn_course_tools.checkout import add_root_option, parsed_checkout

#: The chapters that claim something about a trained model, in the order they run (4 reuses 3's model).
CHAPTERS = tuple(sorted({claim.chapter for claim in CLAIMS.values()}))
CELL_TIMEOUT = 900


@dataclass(frozen=True)
class Setting:
    """Where one series of chapter runs happens: model seed, torch CPU kernels, threads, device."""

    seed: int
    kernel: str  # an ATEN_CPU_CAPABILITY value, or "cuda"
    threads: int
    device: str = "cpu"

    def environment(self, artifacts: Path) -> dict[str, str]:
        """The kernel's environment: this process's, with the setting's variables, and without chapter 12's
        choice of another pair file (the claims are measured on the shipped sample)."""
        env = {k: v for k, v in os.environ.items() if k not in ("ATTN_COURSE_PAIRS", "ATTN_COURSE_NUM_PAIRS")}
        env.update(
            {
                SEED_VARIABLE: str(self.seed),
                "OMP_NUM_THREADS": str(self.threads),
                ARTIFACTS_VARIABLE: str(artifacts),
                "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            }
        )
        if self.device == "cpu":
            env["ATEN_CPU_CAPABILITY"] = self.kernel
            env["CUDA_VISIBLE_DEVICES"] = ""  # a chapter picks CUDA when it sees one
        else:
            env.pop("ATEN_CPU_CAPABILITY", None)
        return env


def capability(kernel: str | None = None) -> str:
    """The CPU kernels torch really uses when ATEN_CPU_CAPABILITY is `kernel` (None: the machine's best),
    in ATEN_CPU_CAPABILITY's spelling. Asking for more than the processor has gives what it has."""
    env = dict(os.environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel is not None:
        env["ATEN_CPU_CAPABILITY"] = kernel
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return found.stdout.strip().lower()


def default_kernels() -> list[str]:
    """default, avx2 and the machine's best, each once and each one torch really runs here."""
    kernels = []
    for kernel in ("default", "avx2", capability()):
        if capability(kernel) == kernel and kernel not in kernels:
            kernels.append(kernel)
    return kernels


def notebook(chapter: str, notebooks: Path) -> Path:
    """The notebook of a chapter in the folder `notebooks` ("04" -> notebooks/04_bahdanau_attention.ipynb)."""
    found = sorted(Path(notebooks).glob(f"{chapter}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(
            f"chapter {chapter!r}: expected one notebook {chapter}_*.ipynb in {notebooks}, "
            f"found {[p.name for p in found]}"
        )
    return found[0]


#: Run first in every kernel: what torch really uses there, recorded with the run.
_PROBE = (
    "import json, torch\n"
    "print('robustness probe:', json.dumps({'capability': torch.backends.cpu.get_cpu_capability().lower(), "
    "'threads': torch.get_num_threads(), 'cuda': torch.cuda.is_available()}))"
)


def _probed(nb: nbformat.NotebookNode) -> dict[str, Any] | None:
    for output in nb.cells[0].get("outputs", []):
        text = output.get("text", "")
        if text.startswith("robustness probe: "):
            return json.loads(text.split(": ", 1)[1])
    return None


def run_chapter(chapter: str, setting: Setting, artifacts: Path, notebooks: Path) -> dict[str, Any]:
    """Execute one chapter of the folder `notebooks` under `setting`, in that folder; its claims, wall-clock
    seconds, error (None if it passed) and what torch really ran on ("actual": CPU kernels, threads, CUDA)."""
    nb = nbformat.read(notebook(chapter, notebooks), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_PROBE))
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(notebooks)}}
    )
    artifacts.mkdir(parents=True, exist_ok=True)
    log = artifacts / f"claims-ch{chapter}.jsonl"  # claims.check appends each value it checks
    log.unlink(missing_ok=True)
    env = setting.environment(artifacts) | {LOG_VARIABLE: str(log)}
    start, error = time.perf_counter(), None
    try:
        client.execute(env=env)
    except CellExecutionError as failure:
        error = f"{failure.ename}: {failure.evalue}"
    except Exception as failure:  # a dead kernel or a timeout is a failed run too
        error = f"{type(failure).__name__}: {failure}"
    return {
        "chapter": chapter,
        **asdict(setting),
        "seconds": time.perf_counter() - start,
        "actual": _probed(nb),
        "processor": _processor(),
        "claims": read_log(log),
        "error": error,
    }


def run_setting(setting: Setting, chapters: Sequence[str], notebooks: Path) -> list[dict[str, Any]]:
    """Every chapter (of the folder `notebooks`) in order under one setting, sharing one fresh artifacts
    folder."""
    with tempfile.TemporaryDirectory(prefix="attn-course-robustness-") as artifacts:
        return [run_chapter(chapter, setting, Path(artifacts), notebooks) for chapter in chapters]


def summarise(runs: Sequence[dict[str, Any]], claims: dict[str, Claim] = CLAIMS) -> dict[str, dict[str, Any]]:
    """Per claim measured in any run: its bar, min / median / max over the runs, the worst run's margin,
    the number of runs, and the runs that missed the bar (seed, kernel, threads, device, value)."""
    summary = {}
    for key, claim in claims.items():
        measured = [(run, run["claims"][key]) for run in runs if key in run["claims"]]
        if not measured:
            continue
        values = [value for _, value in measured]
        worst = min(values, key=claim.margin)
        summary[key] = {
            "text": claim.text,
            "bar": claim.bar,
            "relation": claim.relation,
            "min": min(values),
            "median": statistics.median(values),
            "max": max(values),
            "margin": claim.margin(worst),
            "runs": len(values),
            "failures": [
                {k: run[k] for k in ("seed", "kernel", "threads", "device")} | {"value": value}
                for run, value in measured
                if not claim.holds(value)
            ],
        }
    return summary


def table(results: dict[str, Any]) -> str:
    """The Markdown table README shows: per claim, bar, min / median / max over the runs, margin."""
    lines = [
        "| claim | bar | min | median | max | margin | runs |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, stats in results["claims"].items():
        lines.append(
            f"| `{key}` | {stats['relation']} {stats['bar']:g} | {stats['min']:.3g} | "
            f"{stats['median']:.3g} | {stats['max']:.3g} | {stats['margin']:.3g} | {stats['runs']} |"
        )
    return "\n".join(lines) + "\n"


def _run_settings(work: Sequence[tuple[Setting, list[str]]], workers: int, notebooks: Path):
    """Each (setting, chapters)'s runs as it finishes: in this process for one worker, else in `workers`
    processes."""
    if workers == 1:
        for setting, chapters in work:
            yield run_setting(setting, chapters, notebooks)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        for future in as_completed([pool.submit(run_setting, *item, notebooks) for item in work]):
            yield future.result()


def _setting_of(run: dict[str, Any]) -> Setting:
    return Setting(run["seed"], run["kernel"], run["threads"], run["device"])


def run_matrix(
    seeds: Sequence[int],
    kernels: Sequence[str],
    threads: Sequence[int],
    chapters: Sequence[str],
    *,
    notebooks: Path,
    device: str = "cpu",
    workers: int = 2,
    done: Sequence[dict[str, Any]] = (),
    log=None,
    save=None,
) -> dict[str, Any]:
    """Run `chapters` under every (seed, kernel, threads) on `device` ("cuda": one kernel, "cuda", and the
    given threads); return the JSON-ready results.

    notebooks: the folder of the chapters (the checkout's notebooks/), where each runs.

    workers: the cores to fill. Settings of n threads run workers // n at a time (at least one): more
    threads than cores makes OpenMP's waiting threads spin against each other, and a chapter then takes
    many times as long.
    done: runs of an earlier call (its "runs"); a chapter already run under a setting is not run again, so
    an interrupted or partial matrix can be completed (a run that failed is kept: delete it to retry).
    save: called with the results so far after every finished setting (e.g. to write them to a file).
    """
    if device == "cuda":
        kernels = ["cuda"]
    matrix = {
        "seeds": list(seeds),
        "kernels": list(kernels),
        "threads": list(threads),
        "chapters": list(chapters),
        "device": device,
    }
    settings = [
        Setting(seed, kernel, n, device) for kernel, n, seed in itertools.product(kernels, threads, seeds)
    ]
    runs = [run for run in done if _setting_of(run) in settings and run["chapter"] in chapters]
    work = _still_to_run(settings, chapters, runs)
    start = time.perf_counter()
    for n in sorted({setting.threads for setting, _ in work}):
        same_threads = [item for item in work if item[0].threads == n]
        for series in _run_settings(same_threads, max(1, workers // n), notebooks):
            runs.extend(series)
            _log_runs(series, log)
            if save is not None:
                save(results_of(matrix, runs, time.perf_counter() - start))
    return results_of(matrix, runs, time.perf_counter() - start)


def _still_to_run(
    settings: Sequence[Setting], chapters: Sequence[str], runs: Sequence[dict[str, Any]]
) -> list[tuple[Setting, list[str]]]:
    """Each setting with the chapters `runs` lack under it (settings that lack none are left out)."""
    work = []
    for setting in settings:
        ran = {run["chapter"] for run in runs if _setting_of(run) == setting}
        if missing := [chapter for chapter in chapters if chapter not in ran]:
            work.append((setting, missing))
    return work


def _log_runs(series: Sequence[dict[str, Any]], log) -> None:
    """One line per finished run to the file `log` (None: nothing)."""
    for run in series if log is not None else ():
        status = "ok" if run["error"] is None else f"FAILED {run['error'][:200]}"
        print(
            f"ch{run['chapter']} seed {run['seed']} {run['kernel']} x{run['threads']}: "
            f"{run['seconds']:.0f} s, {status}",
            file=log,
            flush=True,
        )


def results_of(matrix: dict[str, Any], runs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """The JSON-ready results of `runs` made under `matrix` in `seconds`: every run, sorted, the spread of
    each claim (`summarise`), the runs that failed, and the machine they ran on."""
    runs = sorted(runs, key=lambda r: (r["kernel"], r["threads"], r["seed"], r["chapter"]))
    cpu = matrix["device"] == "cpu"
    return {
        "format": RESULTS_FORMAT,
        "matrix": matrix,
        "environment": {
            "python": platform.python_version(),
            "torch": _torch_version(),
            "platform": platform.platform(),
            "processor": _processor(),
            "best_kernel": capability() if cpu else None,
            "cpu_count": os.cpu_count(),
        },
        "runtime_seconds": seconds,  # of this call (a resumed one ran a part)
        "chapter_seconds": sum(run["seconds"] for run in runs),
        "claims": summarise(runs),
        "errors": [
            {k: run[k] for k in ("chapter", "seed", "kernel", "threads", "device", "error")}
            for run in runs
            if run["error"] is not None
        ],
        "runs": runs,
    }


def merge(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One results object from several (e.g. a new chapter measured apart, or on another processor): every
    run of each, a later one replacing a run of the same chapter, setting and processor (runs recorded
    before runs named their processor count as one unnamed processor); the matrix is the union of theirs.
    Runs of one setting on two processors both stay: the spread of a claim is over machines too."""
    runs: dict[tuple, dict[str, Any]] = {}
    for result in results:
        for run in result["runs"]:
            runs[(run["chapter"], _setting_of(run), run.get("processor"))] = run
    devices = {result["matrix"]["device"] for result in results}
    if len(devices) != 1:
        raise ValueError(f"cannot merge results of devices {sorted(devices)}: keep one file per device")

    def union(field: str) -> list:  # in the order first met (kernels: default, avx2, the machine's best)
        return list(dict.fromkeys(value for result in results for value in result["matrix"][field]))

    matrix = {field: sorted(union(field)) for field in ("seeds", "threads", "chapters")}
    matrix["kernels"] = union("kernels")
    matrix["device"] = devices.pop()
    seconds = sum(result["runtime_seconds"] for result in results)
    return results_of(matrix, list(runs.values()), seconds)


def _torch_version() -> str:
    import torch

    return torch.__version__


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m attn_course_tools.robustness", description=__doc__.split("\n")[0]
    )
    add_root_option(parser)
    parser.add_argument(
        "--out", type=Path, required=True, help="the JSON results (a .md table is written beside)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--kernels",
        nargs="+",
        help="ATEN_CPU_CAPABILITY values (default: default, avx2 and the machine's best)",
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--chapters", nargs="+", default=list(CHAPTERS), help=f"default: {' '.join(CHAPTERS)}"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count(),
        help="cores to fill (settings of N threads run workers // N at a time; default: all)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="add the runs of these results files to --out (which must exist) and rewrite its summary; "
        "runs nothing",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the runs already in --out and run only the settings it lacks",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    notebooks = parsed_checkout(parser, args.root, "notebooks") / "notebooks"
    for chapter in args.chapters:
        notebook(chapter, notebooks)
    if args.merge:
        results = merge([measurements(path) for path in (args.out, *args.merge)])
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(table(results), encoding="utf-8")
        print(table(results))
        return 0
    kernels = args.kernels or default_kernels()
    done = measurements(args.out)["runs"] if args.resume and args.out.is_file() else ()

    def save(results: dict[str, Any]) -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(table(results), encoding="utf-8")

    results = run_matrix(
        args.seeds,
        kernels,
        args.threads,
        args.chapters,
        notebooks=notebooks,
        device=args.device,
        workers=args.workers,
        done=done,
        log=sys.stderr,
        save=save,
    )
    save(results)
    print(table(results))
    failed = [key for key, stats in results["claims"].items() if stats["failures"]]
    print(
        f"{len(results['runs'])} chapter runs, {results['chapter_seconds'] / 60:.0f} min of chapters "
        f"({results['runtime_seconds'] / 60:.0f} min now); "
        f"{len(results['errors'])} failed; claims missing their bar somewhere: {failed or 'none'}"
    )
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
