"""The multi-seed study of chapter 5: Luong et al. 2015's Tables 4 and 6 in miniature, and a reversal task.

Its configurations, what one run trains and measures (`run_one`), and the readers chapter 5 uses on the
results (`load_results`, `per_seed`, `results_table`). `python -m attn_course_tools.studies luong` runs it
over seeds and writes attn_course/course/results/luong_variants.json (and, `--by-length`,
luong_by_length.json).

Every variant is trained with the same data, sizes, optimiser and number of updates, for several seeds, and
scored on held-out sentences (`attn_course.measure.evaluation.evaluate`): test perplexity (teacher forcing),
corpus BLEU of greedy translations, and, for models with attention, the alignment error rate of their
teacher-forced ("forced decoding") attention against the gold links, under both credit conventions of
`attn_course.measure.metrics.attention_to_links`. The reversal study trains global, local-m and local-p
attention on `attn_course.data.tasks.reverse_task`, whose gold alignment is the anti-diagonal, and measures
how far the local window centres p_t are from it. A task configured with source-length bins also scores
each run's BLEU per bin (`BY_LENGTH`: do dot, general and concat lose BLEU on long sentences at the same
rate?).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attn_course.course.chapters import TASKS, VARIANTS, DataConfig, Recipe, task_data, train_variant
from attn_course.measure.evaluation import centre_statistics, evaluate, translations, window_centres
from attn_course.measure.metrics import bleu_by_length
from attn_course.models.decoders import LuongDecoder
from attn_course.training.loop import TrainConfig

#: The layout of the JSON results `python -m attn_course_tools.studies luong` writes.
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
"""The configuration behind attn_course/course/results/luong_by_length.json: FULL's translation task, global
attention with the three content scores, five seeds, test BLEU in four source-length bins of seven lengths
each."""

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
