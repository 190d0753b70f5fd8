"""Chapter 9's experiments on training dynamics: one small task and model, runs that differ in one setting.

    data = dynamics.task_data()                                   # reversal of 8-16 symbols (TASK)
    model, history = dynamics.run(data, seed=0)                   # RECIPE: teacher forcing, clipped at 1
    model, history = dynamics.run(data, seed=0, teacher_forcing=dynamics.SCHEDULED)
    model, history = dynamics.run(data, seed=0, attention_temperature=4.0)    # a model option
    scores = dynamics.exposure(model, data)                       # teacher-forced vs free-running accuracy

The chapter trains a few variants with the course seed; `python -m attn_course_tools.studies dynamics --out
attn_course/course/results/dynamics_seeds.json` trains every variant of STUDY with each of several seeds
(`study_run`), so that the chapter can compare each variant with its baseline seed by seed (`paired`), and
answer its QUESTIONS: does each change move the measure it targets (TARGETS), and BLEU (`compare`)?
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

import torch

from attn_course.course import chapters
from attn_course.course.chapters import DataConfig, Recipe
from attn_course.data.tasks import TaskData, make_batch
from attn_course.measure import significance
from attn_course.measure.diagnostics import mean_entropy
from attn_course.measure.evaluation import accuracy_by_position, translations
from attn_course.measure.metrics import corpus_bleu
from attn_course.models.seq2seq import Seq2Seq
from attn_course.training.loop import Decay, History, Noam, TrainConfig, initialize
from attn_course.training.runtime import seed_everything

#: Reversal of 8-16 symbols out of 20 (1,200 training pairs): chapter 5's reversal task made shorter (it
#: uses 8-20 symbols and 2,000 pairs), hard enough that 190 updates leave mistakes.
TASK = DataConfig("reversal", num_pairs=1500, min_len=8, max_len=16, vocab_size=20, seed=0)

#: Bahdanau attention, a 32-unit decoder over a bidirectional encoder of 16 units per direction; 5 epochs of
#: batches of 32 (190 updates), Adam at a constant 0.005, gradients clipped at norm 1, full teacher forcing.
RECIPE = Recipe(embed_size=16, decoder_hiddens=32, train=TrainConfig(epochs=5, batch_size=32, lr=5e-3))

#: Scheduled sampling's inverse-sigmoid decay with k = 50: the ratio falls from 0.98 to about 0.53 by the
#: last of the 190 updates (Bengio et al. 2015, sec. 2.4).
SCHEDULED = Decay("inverse_sigmoid", k=50.0)

#: Warm-up's runs: 3 epochs at four times RECIPE's rate, nothing clipped, with or without a 30-update ramp.
HIGH_LR = {"lr": 2e-2, "epochs": 3, "clip": None}
WARMUP_STEPS = 30
#: The Transformer's schedule with the decoder's 32 units as d_model and the same 30 warm-up updates,
#: scaled (NOAM_LR) so that its peak is HIGH_LR's rate: the same ramp, then a decay as 1 / sqrt(step).
NOAM = Noam(d_model=32, warmup_steps=WARMUP_STEPS)
NOAM_LR = HIGH_LR["lr"] / NOAM.peak
#: The first updates, where warm-up acts.
EARLY = 40

#: Options of the model (`build`'s keywords) a run may change; every other change is a TrainConfig field.
MODEL_OPTIONS = ("attention_temperature", "init")

#: The variants the seed study trains with every seed: changes to RECIPE (TrainConfig fields or
#: MODEL_OPTIONS).
STUDY: dict[str, dict[str, Any]] = {
    "teacher forcing": {},
    "scheduled sampling, coin per word": {"teacher_forcing": SCHEDULED},
    "scheduled sampling, coin per sentence": {"teacher_forcing": SCHEDULED, "coin": "sequence"},
    "scheduled sampling, sampled word": {"teacher_forcing": SCHEDULED, "feed": "sample"},
    "no clipping": {"clip": None},
    "attention temperature 0.25": {"attention_temperature": 0.25},
    "attention temperature 4": {"attention_temperature": 4.0},
    "Xavier initialisation": {"init": "xavier"},
    "orthogonal initialisation": {"init": "orthogonal"},
    "lr 0.02": HIGH_LR,
    "lr 0.02, linear warm-up": {**HIGH_LR, "warmup_steps": WARMUP_STEPS},
    "lr 0.02, Noam schedule": {**HIGH_LR, "lr": NOAM_LR, "lr_schedule": NOAM},
}
#: Each variant's baseline: the run of the same seed that differs from it in that one setting only.
BASELINES: dict[str, str] = {
    name: "lr 0.02" if name.startswith("lr 0.02,") else "teacher forcing"
    for name in STUDY if name not in ("teacher forcing", "lr 0.02")
}
#: What the study measures in every run, in the chapter's words.
MEASURES: dict[str, str] = {
    "bleu": "test BLEU", "gap": "exposure gap", "entropy": "attention entropy",
    "early_rise": "largest early rise of the loss", "train_loss": "final training loss",
}
#: The measure each change is meant to move, named from what its section says the change is for (the chapter
#: states them before it reads any difference): scheduled sampling the exposure gap it sets out to close
#: (sec. 2-3); clipping, which shortens the late steps, and initialisation where training ends (sec. 4, 7);
#: warm-up the early rises of the loss (sec. 5); the temperature how spread out the attention is (sec. 6).
TARGETS: dict[str, str] = {
    **{name: "gap" for name in BASELINES if name.startswith("scheduled sampling")},
    "no clipping": "train_loss",
    "attention temperature 0.25": "entropy",
    "attention temperature 4": "entropy",
    "Xavier initialisation": "train_loss",
    "orthogonal initialisation": "train_loss",
    "lr 0.02, linear warm-up": "early_rise",
    "lr 0.02, Noam schedule": "early_rise",
}
#: The chapter's questions of the study, (variant, measure): each change's target, and BLEU, what we want in
#: the end, for every change. Every other (variant, measure) is there to explore, not to conclude from.
QUESTIONS: tuple[tuple[str, str], ...] = tuple((name, measure) for name, target in TARGETS.items()
                                               for measure in (target, "bleu"))


def task_data() -> TaskData:
    """The splits and vocabularies of `TASK`."""
    return chapters.task_data(TASK)


def build(data: TaskData, seed: int, *, attention_temperature: float | None = None,
          init: str = "torch") -> Seq2Seq:
    """A fresh Bahdanau model of `RECIPE`'s sizes, seeded; an attention temperature, an init scheme."""
    seed_everything(seed)
    config = replace(chapters.variant_config("bahdanau", data, RECIPE),
                     attention_temperature=attention_temperature)
    return initialize(Seq2Seq.from_config(config), init)


def run(data: TaskData, seed: int, *, model: Seq2Seq | None = None, device: torch.device | str | None = None,
        **changes: Any) -> tuple[Seq2Seq, History]:
    """Train `model` (default: `build(data, seed, **model options)`) with RECIPE.train changed by the other
    `changes` (TrainConfig fields: teacher_forcing, coin, feed, clip, warmup_steps, lr_schedule, lr,
    epochs...), through `chapters.fit` without validation. Returns the model (eval mode) and History."""
    options = {name: changes.pop(name) for name in MODEL_OPTIONS if name in changes}
    unknown = sorted(set(changes) - {field.name for field in fields(TrainConfig)})
    if unknown:
        raise ValueError(f"{unknown} are neither TrainConfig fields nor model options {MODEL_OPTIONS}")
    if model is not None and options:
        raise ValueError(f"pass either model= or the model options {sorted(options)}, not both")
    config = replace(RECIPE.train, **changes)
    model = build(data, seed, **options) if model is None else model
    return model, chapters.fit(model, data, config, seed=seed, validate=False, device=device)


def token_accuracy(accuracy: Sequence[float], count: Sequence[int]) -> float:
    """The accuracy over all target tokens, from `accuracy_by_position`'s per-position accuracy and count."""
    return sum(a * n for a, n in zip(accuracy, count, strict=True)) / sum(count)


def exposure(model: Seq2Seq, data: TaskData) -> dict[str, Any]:
    """Teacher-forced and free-running next-word accuracy on data.test, by position and over all tokens,
    and the corpus BLEU of greedy translations."""
    forced, count = accuracy_by_position(model, data.test, data)
    free, _ = accuracy_by_position(model, data.test, data, free_running=True)
    bleu = corpus_bleu(translations(model, data.test, data), [e.tgt for e in data.test])
    return {"forced": forced, "free": free, "count": count, "forced_all": token_accuracy(forced, count),
            "free_all": token_accuracy(free, count), "bleu": bleu}


@torch.no_grad()
def attention_entropy(model: Seq2Seq, data: TaskData) -> float:
    """Mean normalised entropy of the model's attention over data.test, the reference fed (forced
    decoding): 1 for uniform weights, 0 for one-hot."""
    device = next(model.parameters()).device
    batch = make_batch(data.test, data.src_vocab, data.tgt_vocab).to(device)
    _, weights = model.eval()(batch.src, batch.src_valid_lens, batch.tgt_in)
    return mean_entropy(weights, batch.src_valid_lens, batch.tgt_valid_lens, normalise=True)


def early_steps(history: History, steps: int = EARLY) -> dict[str, float]:
    """The first `steps` updates: mean batch loss, largest rise of the loss from one update to the next,
    largest gradient norm."""
    losses = history.step_loss[: steps + 1]
    return {"early_loss": sum(losses[:steps]) / steps,
            "early_rise": max(b - a for a, b in zip(losses, losses[1:], strict=False)),
            "early_norm": max(history.grad_norm[:steps])}


def study_run(seed: int, variant: str, device: torch.device | str | None = "cpu") -> dict[str, Any]:
    """One run of the seed study: `variant` of STUDY trained with `seed`, and its scores."""
    start = time.process_time()
    data = task_data()
    model, history = run(data, seed, device=device, **STUDY[variant])
    scores = exposure(model, data)
    per_epoch = len(history.grad_norm) // len(history.train_loss)
    return {"seed": seed, "variant": variant, "bleu": scores["bleu"], "forced": scores["forced_all"],
            "free": scores["free_all"], "gap": scores["forced_all"] - scores["free_all"],
            "entropy": attention_entropy(model, data), "train_loss": history.train_loss[-1],
            **early_steps(history), "first_epoch_norm": max(history.grad_norm[:per_epoch]),
            "cpu_seconds": time.process_time() - start}


def paired(runs: Sequence[dict[str, Any]], variant: str, metric: str) -> dict[int, float]:
    """{seed: metric of `variant` minus metric of its baseline (BASELINES) with the same seed}, over the
    seeds that have both runs."""
    if variant not in BASELINES:
        raise ValueError(f"variant={variant!r} has no baseline; expected one of {sorted(BASELINES)}")
    values = {(r["variant"], r["seed"]): r[metric] for r in runs}
    baseline = BASELINES[variant]
    return {seed: values[variant, seed] - values[baseline, seed] for seed in sorted({r["seed"] for r in runs})
            if (variant, seed) in values and (baseline, seed) in values}


def compare(runs: Sequence[dict[str, Any]], variant: str, metric: str, questions: int = len(QUESTIONS)
            ) -> significance.Comparison:
    """`variant` against its baseline on `metric`, seed by seed (`paired`), read as one of `questions` the
    study is asked (`significance.compare`: the mean difference, its interval, the directions)."""
    return significance.compare(list(paired(runs, variant, metric).values()), questions=questions)


def seed_spread(runs: Sequence[dict[str, Any]], variant: str, metric: str) -> float:
    """How far apart the seeds of one variant land on `metric`: the standard deviation over its runs."""
    values = [r[metric] for r in runs if r["variant"] == variant]
    if len(values) < 2:
        raise ValueError(f"variant={variant!r} has {len(values)} runs, expected 2 or more")
    return statistics.stdev(values)
