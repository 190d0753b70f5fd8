"""The multi-seed study of chapter 5: Luong et al. 2015's Tables 4 and 6 in miniature, and a reversal task.

    python -m attn_course.course.study --out attn_course/course/results/luong_variants.json            # the committed results
    python -m attn_course.course.study --out attn_course/course/results/luong_by_length.json --by-length   # BLEU by source length
    python -m attn_course.course.study --out /tmp/smoke.json --quick                # a seconds-long smoke run

Every variant is trained with the same data, sizes, optimiser and number of updates, for several seeds, and
scored on held-out sentences (`attn_course.measure.evaluation.evaluate`): test perplexity (teacher forcing), corpus
BLEU of greedy translations, and, for models with attention, the alignment error rate of their
teacher-forced ("forced decoding") attention against the gold links, under both credit conventions of
`attn_course.measure.metrics.attention_to_links`. The reversal study trains global, local-m and local-p attention on
`attn_course.data.tasks.reverse_task`, whose gold alignment is the anti-diagonal, and measures how far the local
window centres p_t are from it. A task configured with source-length bins also scores each run's BLEU per
bin (`BY_LENGTH`: do dot, general and concat lose BLEU on long sentences at the same rate?). Runs are
distributed over worker processes, each on one CPU thread (small recurrent models run fastest
single-threaded, and two single-threaded workers use two cores without oversubscribing them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from attn_course.course.chapters import TASKS, VARIANTS, DataConfig, Recipe, task_data, train_variant
from attn_course.measure.evaluation import centre_statistics, evaluate, translations, window_centres
from attn_course.measure.metrics import bleu_by_length
from attn_course.models.decoders import LuongDecoder
from attn_course.training.loop import TrainConfig
from attn_course.validation import check_positive_int

#: The layout of the JSON results `run_study` returns and `main` writes.
RESULTS_FORMAT = "attn_course.study/1"


@dataclass(frozen=True)
class TaskConfig:
    """One task of the study: its data, the variants trained on it, the recipe they share, and the edges
    of the source-length bins its BLEU is also scored on (half-open, as `metrics.bleu_by_length`; () for
    none)."""

    data: DataConfig
    variants: tuple[str, ...]
    recipe: Recipe = field(default_factory=Recipe)
    length_bins: tuple[int, ...] = ()


@dataclass(frozen=True)
class StudyConfig:
    """Both tasks and the model seeds (every variant is trained once per seed on the same data)."""

    translation: TaskConfig
    reversal: TaskConfig
    seeds: tuple[int, ...] = (0, 1, 2)

    def __post_init__(self) -> None:
        for task in TASKS:
            if getattr(self, task).data.task != task:
                raise ValueError(f"{task}.data.task is {getattr(self, task).data.task!r}, expected {task!r}")


FULL = StudyConfig(
    translation=TaskConfig(DataConfig("translation", num_pairs=3400, min_len=3, max_len=30),
                           variants=tuple(VARIANTS)),
    reversal=TaskConfig(DataConfig("reversal", num_pairs=2000, min_len=8, max_len=20, vocab_size=20),
                        variants=("global-general", "local-m-general", "local-p-general"),
                        recipe=Recipe(window=3, train=TrainConfig(epochs=10))),
)
"""The configuration behind attn_course/course/results/luong_variants.json."""

BY_LENGTH = StudyConfig(
    translation=replace(FULL.translation, variants=("global-dot", "global-general", "global-concat"),
                        length_bins=(3, 10, 17, 24, 31)),
    reversal=replace(FULL.reversal, variants=()),
    seeds=(0, 1, 2, 3, 4),
)
"""The configuration behind attn_course/course/results/luong_by_length.json: FULL's translation task, global attention with the
three content scores, five seeds, test BLEU in four source-length bins of seven lengths each."""

_QUICK_RECIPE = Recipe(embed_size=8, decoder_hiddens=8, window=2, train=TrainConfig(epochs=1, batch_size=16))
QUICK = StudyConfig(
    translation=TaskConfig(DataConfig("translation", num_pairs=60, min_len=3, max_len=8),
                           variants=("bahdanau", "local-p-general"), recipe=_QUICK_RECIPE,
                           length_bins=(3, 6, 9)),
    reversal=TaskConfig(DataConfig("reversal", num_pairs=60, min_len=4, max_len=8, vocab_size=6),
                        variants=("local-m-general", "local-p-general"), recipe=_QUICK_RECIPE),
    seeds=(0, 1),
)
"""A seconds-long version with the same output schema, for smoke tests."""


def run_one(config: TaskConfig, variant: str, seed: int) -> dict[str, Any]:
    """Train and score one (variant, seed) of a task on CPU; returns a JSON-ready record of the run."""
    data = task_data(config.data)
    model, history = train_variant(variant, data, config.recipe, seed=seed, device="cpu")
    record: dict[str, Any] = {"variant": variant, "seed": seed, **evaluate(model, data),
                              "train_cpu_seconds": sum(history.cpu_seconds),
                              "parameters": sum(p.numel() for p in model.parameters())}
    if isinstance(model.decoder, LuongDecoder) and model.decoder.alignment != "global":
        record.update(centre_statistics(window_centres(model, data.test, data), data.test))
    if config.length_bins:
        record.update(_bleu_by_length(model, data, config.length_bins))
    return record


def length_key(low: int, high: int) -> str:
    """The key of test BLEU on sources of low to high - 1 tokens: length_key(3, 10) = "bleu_src_3_9"."""
    return f"bleu_src_{low}_{high - 1}"


def length_keys(bins: Sequence[int]) -> list[str]:
    """The record keys of every bin of the edges `bins`, shortest sentences first."""
    return [length_key(low, high) for low, high in zip(bins, bins[1:], strict=False)]


def _bleu_by_length(model, data, bins: Sequence[int]) -> dict[str, float | None]:
    """Corpus BLEU of greedy translations of data.test per source-length bin, {length_key: BLEU or None}."""
    hyps = translations(model, data.test, data)
    scores = bleu_by_length(hyps, [e.tgt for e in data.test], [len(e.src) for e in data.test], bins)
    return dict(zip(length_keys(bins), (score.bleu for score in scores), strict=True))


def _one_thread() -> None:
    torch.set_num_threads(1)


def _job(args: tuple[TaskConfig, str, int]) -> tuple[str, dict[str, Any]]:
    return args[0].data.task, run_one(*args)


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, float] | None]:
    """Mean and sample standard deviation (n - 1; 0 for one run) of every score over the seeds' runs.

    A score that is None in any run (e.g. AER of a model without attention) summarises to None.
    """
    summary: dict[str, dict[str, float] | None] = {}
    for key in sorted({k for run in runs for k in run} - {"variant", "seed"}):
        values = [run.get(key) for run in runs]
        if any(v is None or isinstance(v, bool) or not isinstance(v, int | float) for v in values):
            summary[key] = None
            continue
        summary[key] = {"mean": statistics.fmean(values),
                        "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    return summary


def _finished_jobs(jobs: list[tuple[TaskConfig, str, int]], workers: int
                   ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(task, record) of every job as it finishes: here with one thread, or over `workers` processes."""
    if workers == 1:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for job in jobs:
                yield _job(job)
        finally:
            torch.set_num_threads(threads)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_one_thread) as pool:
        for future in as_completed([pool.submit(_job, job) for job in jobs]):
            yield future.result()


def _task_results(config: TaskConfig, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per variant of the task, in the config's order: its runs in seed order and their summary."""
    variants = []
    for variant in config.variants:
        runs = sorted((r for r in records if r["variant"] == variant), key=lambda r: r["seed"])
        kind, options = VARIANTS[variant]
        variants.append({"name": variant, "kind": kind, "options": options,
                         "runs": [{k: v for k, v in r.items() if k != "variant"} for r in runs],
                         "summary": summarise(runs)})
    return {"variants": variants}


def run_study(config: StudyConfig, *, workers: int = 2, progress: bool = True) -> dict[str, Any]:
    """Run every (task, variant, seed) of `config` over `workers` single-threaded processes.

    Returns the JSON-ready results: config, environment, runtime, and per task the per-seed runs and
    their mean ± std per variant.
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
        "format": RESULTS_FORMAT,
        "config": asdict(config),
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "platform": platform.platform(), "cpu_count": os.cpu_count(), "workers": workers,
                        "threads_per_worker": 1, "device": "cpu"},
        "runtime_seconds": time.perf_counter() - start,
    }
    for task in TASKS:
        results[task] = _task_results(getattr(config, task), records[task])
    return results


def load_results(path: str | Path, expected_format: str = RESULTS_FORMAT) -> dict[str, Any]:
    """Read results written by this script (or another writer of `expected_format`), checking their format."""
    results = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(results, dict) or results.get("format") != expected_format:
        found = results.get("format") if isinstance(results, dict) else type(results).__name__
        raise ValueError(f"{path} holds format {found!r}, expected {expected_format!r}")
    return results


def per_seed(results: dict[str, Any], task: str, variant: str, key: str) -> list[float]:
    """One score of one variant, run by run in the order of the study's seeds.

    Every variant of a task is trained from the same seeds, so two variants' lists pair up by position:
    [a - b for a, b in zip(per_seed(r, t, "x", k), per_seed(r, t, "y", k))] compares x and y seed by seed.
    """
    for entry in results[task]["variants"]:
        if entry["name"] == variant:
            runs = sorted(entry["runs"], key=lambda run: run["seed"])
            if [run["seed"] for run in runs] != list(results["config"]["seeds"]):
                raise ValueError(f"variant {variant!r} has runs for seeds {[run['seed'] for run in runs]}, "
                                 f"expected the study's seeds {results['config']['seeds']}")
            values = [run.get(key) for run in runs]
            if any(v is None for v in values):
                raise ValueError(f"variant {variant!r} has no score {key!r} in every run")
            return [float(v) for v in values]
    raise ValueError(f"task {task!r} has no variant {variant!r}, expected one of "
                     f"{[entry['name'] for entry in results[task]['variants']]}")


def results_table(results: dict[str, Any], task: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """One row per variant: its name and "mean ± std" text for each score in `columns` ("—" if None)."""
    rows = []
    for variant in results[task]["variants"]:
        row: dict[str, Any] = {"variant": variant["name"]}
        for column in columns:
            stats = variant["summary"].get(column)
            row[column] = "—" if stats is None else f"{stats['mean']:.2f} ± {stats['std']:.2f}"
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attn_course.course.study", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="tiny sizes, 1 epoch, 2 variants: a smoke run")
    sizes.add_argument("--by-length", action="store_true",
                       help="dot, general and concat, 5 seeds, BLEU by source length (BY_LENGTH)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, one CPU thread each")
    parser.add_argument("--seeds", type=int, nargs="+",
                        help="model seeds (default: 0 1 2; quick: 0 1; by length: 0 to 4)")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else BY_LENGTH if args.by_length else FULL
    if args.seeds:
        config = replace(config, seeds=tuple(args.seeds))
    results = run_study(config, workers=args.workers, progress=sys.stderr.isatty())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    columns = ("perplexity", "bleu", "aer_output", "aer_input", *length_keys(config.translation.length_bins))
    print(f"{'variant':<28}" + "".join(f"{c:>18}" for c in columns))
    for row in results_table(results, "translation", columns):
        print(f"{row['variant']:<28}" + "".join(f"{row[c]:>18}" for c in columns))
    print(f"{len(config.seeds)} seeds, {results['runtime_seconds']:.0f} s, written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
