"""Chapter 9's experiments on training dynamics: one small task and model, runs that differ in one setting.

    data = dynamics.task_data()                                   # reversal of 8-16 symbols (TASK)
    model, history = dynamics.run(data, seed=0)                   # RECIPE: teacher forcing, clipped at 1
    model, history = dynamics.run(data, seed=0, teacher_forcing=dynamics.SCHEDULED)
    scores = dynamics.exposure(model, data)                       # teacher-forced vs free-running accuracy

The chapter trains each variant once, with the course seed; `python -m attn_course.dynamics --out
results/dynamics_seeds.json` trains the variants whose comparison it shows seed by seed (seeds 0-4).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from attn_course.chapters import DataConfig, Recipe, TaskData, variant_config
from attn_course.chapters import task_data as _task_data
from attn_course.evaluation import accuracy_by_position, translations
from attn_course.metrics import corpus_bleu
from attn_course.runtime import seed_everything
from attn_course.seq2seq import Seq2Seq
from attn_course.training import Decay, History, TrainConfig, initialize, train

#: Reversal of 8-16 symbols out of 20 (1,200 training pairs): hard enough that 190 updates leave mistakes.
TASK = DataConfig("reversal", num_pairs=1500, min_len=8, max_len=16, vocab_size=20, seed=0)

#: Bahdanau attention, a 32-unit decoder over a bidirectional encoder of 16 units per direction; 5 epochs of
#: batches of 32 (190 updates), Adam at 0.005, gradients clipped at norm 1, full teacher forcing.
RECIPE = Recipe(embed_size=16, decoder_hiddens=32, train=TrainConfig(epochs=5, batch_size=32, lr=5e-3))

#: Scheduled sampling's inverse-sigmoid decay with k = 50: the ratio falls from 0.98 to about 0.53 by the
#: last of the 190 updates (Bengio et al. 2015, sec. 2.4).
SCHEDULED = Decay("inverse_sigmoid", k=50.0)

#: Warm-up's runs: 3 epochs at four times RECIPE's rate, nothing clipped, with or without a 30-update ramp.
HIGH_LR = {"lr": 2e-2, "epochs": 3, "clip": None}
WARMUP_STEPS = 30
#: The first updates, where warm-up acts.
EARLY = 40

#: The variants `seed_study` compares seed by seed (changes to RECIPE.train).
STUDY: dict[str, dict[str, Any]] = {
    "teacher forcing": {},
    "scheduled sampling": {"teacher_forcing": SCHEDULED},
    "no clipping": {"clip": None},
    "lr 0.02": HIGH_LR,
    "lr 0.02, warm-up": {**HIGH_LR, "warmup_steps": WARMUP_STEPS},
}


def task_data() -> TaskData:
    """The splits and vocabularies of `TASK`."""
    return _task_data(TASK)


def build(data: TaskData, seed: int, *, attention_temperature: float | None = None,
          init: str = "torch") -> Seq2Seq:
    """A fresh Bahdanau model of `RECIPE`'s sizes, seeded; an attention temperature, an init scheme."""
    seed_everything(seed)
    config = replace(variant_config("bahdanau", data, RECIPE), attention_temperature=attention_temperature)
    return initialize(Seq2Seq.from_config(config), init)


def run(data: TaskData, seed: int, *, model: Seq2Seq | None = None, device: torch.device | str | None = None,
        **changes: Any) -> tuple[Seq2Seq, History]:
    """Train `model` (default: `build(data, seed)`) with RECIPE.train changed by `changes` (any TrainConfig
    field: teacher_forcing, clip, warmup_steps, lr, epochs...). Returns the model (eval mode) and History."""
    config = replace(RECIPE.train, **changes)
    model = build(data, seed) if model is None else model
    loader = data.loader(data.train, config.batch_size, shuffle=True, seed=seed)
    history = train(model, loader, epochs=config.epochs, lr=config.lr, lr_decay=config.lr_decay,
                    clip=config.clip, teacher_forcing=config.teacher_forcing,
                    warmup_steps=config.warmup_steps, device=device, progress=False, seed=seed)
    return model, history


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


def early_steps(history: History, steps: int = EARLY) -> dict[str, float]:
    """The first `steps` updates: mean batch loss, largest rise of the loss from one update to the next,
    largest gradient norm."""
    losses = history.step_loss[: steps + 1]
    return {"early_loss": sum(losses[:steps]) / steps,
            "early_rise": max(b - a for a, b in zip(losses, losses[1:], strict=False)),
            "early_norm": max(history.grad_norm[:steps])}


def seed_study(seeds: Sequence[int], device: torch.device | str | None = "cpu") -> dict[str, Any]:
    """Every variant of `STUDY` trained with each seed: test BLEU, forced and free-running accuracy, the
    last epoch's training loss and the `early_steps` figures."""
    data, runs = task_data(), []
    for seed in seeds:
        for name, changes in STUDY.items():
            start = time.process_time()
            model, history = run(data, seed, device=device, **changes)
            scores = exposure(model, data)
            runs.append({"seed": seed, "variant": name, "bleu": scores["bleu"],
                         "forced": scores["forced_all"], "free": scores["free_all"],
                         "train_loss": history.train_loss[-1], **early_steps(history),
                         "cpu_seconds": time.process_time() - start})
    study = {name: {field: str(value) for field, value in changes.items()} for name, changes in STUDY.items()}
    config = {"task": asdict(TASK), "recipe": asdict(RECIPE), "study": study}
    return {"config": json.loads(json.dumps(config)), "seeds": list(seeds), "torch": torch.__version__,
            "runs": runs}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = seed_study(args.seeds)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
