"""The multi-seed studies behind chapters 5, 9 and 10, run over seeds and written to the JSON files the
chapters read (attn_course/course/results/, below $R):

    python -m attn_course_tools.studies luong --out $R/luong_variants.json
    python -m attn_course_tools.studies luong --by-length --out $R/luong_by_length.json
    python -m attn_course_tools.studies luong --quick --out /tmp/smoke.json       # a seconds-long smoke run
    python -m attn_course_tools.studies dynamics --out $R/dynamics_seeds.json
    python -m attn_course_tools.studies diagnosis --out $R/diagnosis_seeds.json

What one run trains and measures is the chapter's own experiment, in the learner's library
(`attn_course.course.study.run_one`, `dynamics.study_run`, `diagnosis_study.study_row`); this module runs
them over seeds and worker processes, each on one CPU thread (small recurrent models run fastest
single-threaded, and single-threaded workers use the cores without oversubscribing them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import asdict, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from attn_course.course import diagnosis_study, dynamics, study
from attn_course.course.chapters import TASKS, VARIANTS
from attn_course.validation import check_positive_int


# ------------------------------------------------------------------------------------- chapter 5: Luong
def _one_thread() -> None:
    torch.set_num_threads(1)


def _luong_job(args: tuple[study.TaskConfig, str, int]) -> tuple[str, dict[str, Any]]:
    return args[0].data.task, study.run_one(*args)


def _finished_jobs(jobs: list[tuple[study.TaskConfig, str, int]], workers: int
                   ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(task, record) of every job as it finishes: here with one thread, or over `workers` processes."""
    if workers == 1:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for job in jobs:
                yield _luong_job(job)
        finally:
            torch.set_num_threads(threads)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_one_thread) as pool:
        for future in as_completed([pool.submit(_luong_job, job) for job in jobs]):
            yield future.result()


def _task_results(config: study.TaskConfig, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per variant of the task, in the config's order: its runs in seed order and their summary."""
    variants = []
    for variant in config.variants:
        runs = sorted((r for r in records if r["variant"] == variant), key=lambda r: r["seed"])
        kind, options = VARIANTS[variant]
        variants.append({"name": variant, "kind": kind, "options": options,
                         "runs": [{k: v for k, v in r.items() if k != "variant"} for r in runs],
                         "summary": study.summarise(runs)})
    return {"variants": variants}


def luong_study(config: study.StudyConfig, *, workers: int = 2, progress: bool = True) -> dict[str, Any]:
    """Run every (task, variant, seed) of `config` over `workers` single-threaded processes.

    Returns the JSON-ready results (`study.RESULTS_FORMAT`): config, environment, runtime, and per task the
    per-seed runs and their mean ± std per variant.
    """
    check_positive_int("workers", workers)
    jobs = [(getattr(config, task), variant, seed)
            for task in TASKS
            for variant in getattr(config, task).variants
            for seed in config.seeds]
    start = time.perf_counter()
    records: dict[str, list[dict[str, Any]]] = {task: [] for task in TASKS}
    with tqdm(total=len(jobs), desc="runs", unit="run", disable=not progress, leave=False) as bar:
        for task, record in _finished_jobs(jobs, workers):
            records[task].append(record)
            bar.update(1)
    results: dict[str, Any] = {
        "format": study.RESULTS_FORMAT,
        "config": asdict(config),
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "platform": platform.platform(), "cpu_count": os.cpu_count(), "workers": workers,
                        "threads_per_worker": 1, "device": "cpu"},
        "runtime_seconds": time.perf_counter() - start,
    }
    for task in TASKS:
        results[task] = _task_results(getattr(config, task), records[task])
    return results


def _run_luong(args: argparse.Namespace) -> None:
    config = study.QUICK if args.quick else study.BY_LENGTH if args.by_length else study.FULL
    if args.seeds:
        config = replace(config, seeds=tuple(args.seeds))
    results = luong_study(config, workers=args.workers, progress=sys.stderr.isatty())
    _write(args.out, results)
    columns = ("perplexity", "bleu", "aer_output", "aer_input",
               *study.length_keys(config.translation.length_bins))
    print(f"{'variant':<28}" + "".join(f"{c:>18}" for c in columns))
    for row in study.results_table(results, "translation", columns):
        print(f"{row['variant']:<28}" + "".join(f"{row[c]:>18}" for c in columns))
    print(f"{len(config.seeds)} seeds, {results['runtime_seconds']:.0f} s, written to {args.out}")


# --------------------------------------------------------------------------- chapter 9: training dynamics
def _dynamics_run_one_thread(seed: int, variant: str) -> dict[str, Any]:
    torch.set_num_threads(1)
    return dynamics.study_run(seed, variant)


def dynamics_study(seeds: Sequence[int], *, workers: int = 1,
                   on_run: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every variant of `dynamics.STUDY` trained on CPU with each seed, `workers` runs at a time (one thread
    each), each scored by `dynamics.study_run`. on_run(results so far), after every run in seed order: e.g.
    to save a long study as it goes."""
    jobs = [(seed, name) for seed in seeds for name in dynamics.STUDY]
    runs: list[dict[str, Any]] = []
    with ProcessPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        done = pool.map(_dynamics_run_one_thread, *zip(*jobs, strict=True)) if pool else (
            dynamics.study_run(seed, name) for seed, name in jobs)
        for record in done:
            runs.append(record)
            if on_run is not None:
                on_run(_dynamics_results(seeds, runs))
    return _dynamics_results(seeds, runs)


def _dynamics_results(seeds: Sequence[int], runs: list[dict[str, Any]]) -> dict[str, Any]:
    variants = {name: {field: str(value) for field, value in changes.items()}
                for name, changes in dynamics.STUDY.items()}
    config = {"task": asdict(dynamics.TASK), "recipe": asdict(dynamics.RECIPE), "study": variants,
              "baselines": dynamics.BASELINES}
    return {"config": json.loads(json.dumps(config)), "seeds": list(seeds), "torch": torch.__version__,
            "runs": list(runs)}


def _run_dynamics(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    start = time.perf_counter()

    def save(results: dict[str, Any]) -> None:
        results["wall_seconds"] = time.perf_counter() - start
        _write(args.out, results)

    save(dynamics_study(args.seeds, workers=args.workers, on_run=save))


# ---------------------------------------------------------------------- chapter 10: diagnosing attention
def diagnosis_seed_study(seeds: Sequence[int] = diagnosis_study.SEEDS,
                         dropouts: Sequence[float] = diagnosis_study.DROPOUTS) -> dict[str, Any]:
    """Every row of chapter 10's study: the tanh model with each attention dropout, the ReLU model without,
    for each seed (`diagnosis_study.study_row`)."""
    data = diagnosis_study.chapter_data()
    variants = [("tanh", p) for p in dropouts] + [("relu", 0.0)]
    start = time.perf_counter()
    rows = [diagnosis_study.study_row(data, seed, activation, p)
            for seed in seeds for activation, p in variants]
    training = diagnosis_study.TRAINING
    settings = {"seeds": list(seeds), "dropouts": list(dropouts), "sizes": diagnosis_study.SIZES,
                "epochs": training.epochs, "batch_size": training.batch_size, "lr": training.lr,
                "device": "cpu", "threads": torch.get_num_threads(),
                "torch": torch.__version__, "python": platform.python_version()}
    return {"settings": settings, "seconds": round(time.perf_counter() - start, 1), "rows": rows}


def _run_diagnosis(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    _write(args.out, diagnosis_seed_study(args.seeds, args.dropouts))


# ------------------------------------------------------------------------------------------ command line
def _write(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per study, each writing its JSON results to --out."""
    main_parser = argparse.ArgumentParser(prog="python -m attn_course_tools.studies",
                                          description=__doc__.split("\n")[0])
    commands = main_parser.add_subparsers(dest="study", required=True)
    luong = commands.add_parser("luong", help="chapter 5: Luong's variants over seeds")
    sizes = luong.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="tiny sizes, 1 epoch, 2 variants: a smoke run")
    sizes.add_argument("--by-length", action="store_true",
                       help="dot, general and concat, 5 seeds, BLEU by source length (study.BY_LENGTH)")
    luong.add_argument("--workers", type=int, default=2, help="worker processes, one CPU thread each")
    luong.add_argument("--seeds", type=int, nargs="+",
                       help="model seeds (default: 0 1 2; quick: 0 1; by length: 0 to 4)")
    luong.set_defaults(run=_run_luong)
    paired = commands.add_parser("dynamics", help="chapter 9: each setting against its baseline, per seed")
    paired.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    paired.add_argument("--workers", type=int, default=2, help="runs at a time, one CPU thread each")
    paired.set_defaults(run=_run_dynamics)
    dropout = commands.add_parser("diagnosis", help="chapter 10: attention dropout and ReLU scores, per seed")
    dropout.add_argument("--seeds", type=int, nargs="+", default=list(diagnosis_study.SEEDS))
    dropout.add_argument("--dropouts", type=float, nargs="+", default=list(diagnosis_study.DROPOUTS))
    dropout.set_defaults(run=_run_diagnosis)
    for command in (luong, paired, dropout):
        command.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
