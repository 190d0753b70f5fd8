"""Multi-seed experiments for chapter 5: Luong et al. 2015's Tables 4 and 6 in miniature, and a reversal task.

    python -m attn_course.experiments --out results/luong_variants.json            # the committed results
    python -m attn_course.experiments --out /tmp/smoke.json --quick                # a seconds-long smoke run

Every variant is trained with the same data, sizes, optimiser and number of updates, for several seeds, and
scored on held-out sentences: test perplexity (teacher forcing), corpus BLEU of greedy translations
(`attn_course.metrics.corpus_bleu`), and, for models with attention, the alignment error rate of their
teacher-forced ("forced decoding") attention against the gold links, under both credit conventions of
`attn_course.metrics.attention_to_links`. The reversal study trains global, local-m and local-p attention on
`attn_course.data.reverse_task`, whose gold alignment is the anti-diagonal, and measures how far the local
window centres p_t are from it.

The functions used by the script (`translation_data`, `build_variant`, `train_variant`, `evaluate`, ...) are
also what chapters 3-6 call to train and score their models. Runs are distributed over worker processes,
each on one CPU thread (small recurrent models run fastest single-threaded, and two single-threaded
workers use two cores without oversubscribing them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from attn_course.data import (
    Example,
    TranslationDataset,
    Vocab,
    bucketed_loader,
    build_vocabs,
    make_batch,
    reverse_task,
    split,
    toy_translation,
)
from attn_course.decoders import LuongDecoder, top_layer
from attn_course.decoding import Hypothesis, beam_search, greedy_decode
from attn_course.metrics import (
    CONVENTIONS,
    attention_to_links,
    corpus_alignment_accuracy,
    corpus_alignment_error_rate,
    corpus_bleu,
    exact_match,
)
from attn_course.runtime import artifacts_dir, eval_mode, get_device, seed_everything
from attn_course.seq2seq import Seq2Seq, build_model
from attn_course.training import History, evaluate_loss, load_checkpoint, save_checkpoint, train
from attn_course.validation import check_positive_int

RESULTS_FORMAT = "attn_course.experiments/1"

#: Where chapters keep the models they train, to share them (any chapter retrains if missing): artifacts/
#: at the top of the course (git-ignored), or $ATTN_COURSE_ARTIFACTS (`attn_course.runtime.artifacts_dir`).
ARTIFACTS = artifacts_dir()

#: The course's committed measurements: results/ at the top of the course.
RESULTS = Path(__file__).resolve().parent.parent / "results"


# ------------------------------------------------------------------------------------------------ variants
class Variant(NamedTuple):
    """A model family: the `build_model` kind and its decoder options (window and max_len are added later)."""

    kind: str
    options: dict[str, Any]


def _luong(score: str, attention: str = "global", input_feeding: bool = True) -> Variant:
    return Variant("luong", {"score": score, "attention": attention, "input_feeding": input_feeding})


#: Every variant the experiments know, by name. Luong variants use input feeding unless the name says not.
VARIANTS: dict[str, Variant] = {
    "no attention": Variant("plain", {}),
    "bahdanau": Variant("bahdanau", {}),
    "global-dot": _luong("dot"),
    "global-general": _luong("general"),
    "global-concat": _luong("concat"),
    "global-location": _luong("location"),
    "global-general, no feeding": _luong("general", input_feeding=False),
    "local-m-dot": _luong("dot", "local-m"),
    "local-m-general": _luong("general", "local-m"),
    "local-p-dot": _luong("dot", "local-p"),
    "local-p-general": _luong("general", "local-p"),
}


# ------------------------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class TaskData:
    """A task's train/validation/test examples and the vocabularies built on the training split."""

    train: list[Example]
    val: list[Example]
    test: list[Example]
    src_vocab: Vocab
    tgt_vocab: Vocab

    @property
    def max_src_positions(self) -> int:
        """The most source positions (<eos> included) of any sentence in any split."""
        return 1 + max(len(e.src) for part in (self.train, self.val, self.test) for e in part)

    def loader(self, examples: Sequence[Example], batch_size: int, *, shuffle: bool = False,
               seed: int = 0) -> DataLoader:
        """A length-bucketed DataLoader of `attn_course.data.Batch` over `examples`."""
        dataset = TranslationDataset(examples, self.src_vocab, self.tgt_vocab)
        return bucketed_loader(dataset, batch_size, shuffle=shuffle, seed=seed)


def _task_data(examples: list[Example], seed: int) -> TaskData:
    parts = split(examples, (0.8, 0.1, 0.1), seed=seed)
    src_vocab, tgt_vocab = build_vocabs(parts.train)
    return TaskData(parts.train, parts.val, parts.test, src_vocab, tgt_vocab)


def translation_data(num_pairs: int, *, min_len: int = 3, max_len: int = 30, seed: int = 0) -> TaskData:
    """`attn_course.data.toy_translation` pairs split 80/10/10 (no source sentence in two splits)."""
    return _task_data(toy_translation(num_pairs, min_len=min_len, max_len=max_len, seed=seed), seed)


def reversal_data(num_pairs: int, *, min_len: int = 8, max_len: int = 20, vocab_size: int = 20,
                  seed: int = 0) -> TaskData:
    """`attn_course.data.reverse_task` pairs split 80/10/10; gold links are the anti-diagonal."""
    examples = reverse_task(num_pairs, min_len=min_len, max_len=max_len, vocab_size=vocab_size, seed=seed)
    return _task_data(examples, seed)


# ------------------------------------------------------------------------------------------------ models
@dataclass(frozen=True)
class TrainConfig:
    """Sizes and optimisation shared by every variant of one experiment.

    The encoder is a bidirectional GRU with encoder_hiddens units per direction (default num_hiddens // 2,
    so that its annotations have num_hiddens features, the size of the decoder state: then every Luong
    score, dot included, and Bahdanau's decoder read the same encoder, and attention is the only thing
    that differs between variants). The decoder has num_hiddens units; window is local attention's D.
    lr_decay: the learning rate is multiplied by it after every epoch (None: a constant rate).
    """

    embed_size: int = 32
    num_hiddens: int = 64
    encoder_hiddens: int | None = None
    window: int = 10
    epochs: int = 12
    batch_size: int = 64
    lr: float = 5e-3
    clip: float = 1.0
    lr_decay: float | None = None

    def __post_init__(self):
        if self.encoder_hiddens is None and (self.num_hiddens < 2 or self.num_hiddens % 2):
            raise ValueError(f"num_hiddens={self.num_hiddens}, expected an even number >= 2 "
                             "(the bidirectional encoder gets num_hiddens // 2 per direction)")

    @property
    def encoder_size(self) -> int:
        """Units per direction of the bidirectional encoder."""
        return self.num_hiddens // 2 if self.encoder_hiddens is None else self.encoder_hiddens


def build_variant(name: str, data: TaskData, config: TrainConfig) -> Seq2Seq:
    """A freshly initialised model of variant `name` (a key of VARIANTS) sized for `data` and `config`."""
    if name not in VARIANTS:
        raise ValueError(f"variant {name!r} is unknown, expected one of {list(VARIANTS)}")
    kind, options = VARIANTS[name]
    options = dict(options)
    if kind == "luong":
        options["window"] = config.window
        if options["score"] == "location":
            options["max_len"] = data.max_src_positions
    return build_model(kind, len(data.src_vocab), len(data.tgt_vocab), embed_size=config.embed_size,
                       num_hiddens=config.encoder_size, bidirectional=True,
                       dec_hiddens=config.num_hiddens, **options)


def train_variant(name: str, data: TaskData, config: TrainConfig, *, seed: int,
                  device: torch.device | str | None = None, progress: bool = False,
                  callback=None) -> tuple[Seq2Seq, History]:
    """Build variant `name` with `seed` and train it on data.train (validation loss on data.val).

    device: default CUDA when present. Returns the trained model (eval mode) and its History.
    """
    seed_everything(seed)
    model = build_variant(name, data, config)
    history = train(model, data.loader(data.train, config.batch_size, shuffle=True, seed=seed),
                    epochs=config.epochs, lr=config.lr, lr_decay=config.lr_decay, clip=config.clip,
                    device=device, val_loader=data.loader(data.val, config.batch_size), progress=progress,
                    seed=seed, callback=callback)
    return model, history


#: The corpus of chapters 3 and 4: toy sentences of 3-40 source tokens, split 80/10/10.
CHAPTER_DATA = {"num_pairs": 7000, "min_len": 3, "max_len": 40, "seed": 0}

#: The model and training of chapters 3 and 4 (no attention and Bahdanau): a 64-unit decoder reading a
#: bidirectional encoder of 64 units per direction; 4 epochs of batches of 16 (small batches: more updates
#: per CPU-second, which is what these small models need), Adam's learning rate 0.004 multiplied by 0.75
#: after every epoch. Chosen with `make robustness` for Bahdanau's BLEU of at least 90 on held-out 10-30-token
#: sentences over seeds, CPU kernels and threads (3 epochs at a decay of 0.85 cleared 90 for some seeds and
#: kernels only); the measured spread of every claim is in results/robustness.json.
CHAPTER_TRAIN = TrainConfig(embed_size=32, num_hiddens=64, encoder_hiddens=64, epochs=4, batch_size=16,
                            lr=4e-3, lr_decay=0.75)


def chapter_data() -> TaskData:
    """The corpus of chapters 3 and 4 (`CHAPTER_DATA`)."""
    return translation_data(**CHAPTER_DATA)


def data_fingerprint(data: TaskData) -> str:
    """A short hash of the splits and vocabularies: equal fingerprints mean the same data."""
    digest = hashlib.sha256()
    for part in (data.train, data.val, data.test):
        for example in part:
            digest.update(json.dumps([example.src, example.tgt]).encode())
        digest.update(b"|")
    for vocab in (data.src_vocab, data.tgt_vocab):
        digest.update(json.dumps(vocab.idx_to_token).encode())
    return digest.hexdigest()[:16]


def _settings(name: str, data: TaskData, config: TrainConfig, seed: int) -> dict[str, Any]:
    """What a checkpoint must have been saved for to stand for this training (JSON round-tripped)."""
    return json.loads(json.dumps({"variant": name, "config": asdict(config), "seed": seed,
                                  "data": data_fingerprint(data)}))


def _load_matching(path: Path | None, settings: dict[str, Any], device: torch.device
                   ) -> tuple[Seq2Seq, dict[str, Any]] | None:
    """The model and record saved at `path` for exactly `settings`, or None (no file, other settings)."""
    if path is None or not path.is_file():
        return None
    try:
        model, metadata = load_checkpoint(path, device=device)
    except (ValueError, RuntimeError, KeyError):
        return None
    if metadata.get("settings") != settings:
        return None
    return model, {**metadata["record"], "loaded": True}


def load_or_train(name: str, data: TaskData, config: TrainConfig, *, seed: int,
                  path: str | Path | None = None, device: torch.device | str | None = None,
                  progress: bool = False, callback=None) -> tuple[Seq2Seq, dict[str, Any]]:
    """Variant `name` trained on `data` with `config` and `seed`, loaded from the checkpoint at `path` if
    one was saved there for exactly these settings and data, otherwise trained (and then saved to `path`).

    Lets chapters share trained models through a folder (e.g. artifacts/) while each still runs on its
    own. Returns the model (eval mode, on `device`, default CUDA when present) and the training record
    {"loaded": bool, "train_loss", "val_loss": per-epoch lists, "train_cpu_seconds", "train_seconds"}.
    """
    device = get_device() if device is None else torch.device(device)
    settings = _settings(name, data, config, seed)
    path = None if path is None else Path(path)
    found = _load_matching(path, settings, device)
    if found is not None:
        return found
    model, history = train_variant(name, data, config, seed=seed, device=device, progress=progress,
                                   callback=callback)
    record = {"train_loss": history.train_loss, "val_loss": history.val_loss,
              "train_cpu_seconds": sum(history.cpu_seconds), "train_seconds": sum(history.seconds)}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(model, path, settings=settings, record=record)
    return model, {**record, "loaded": False}


def _train_and_save(name: str, data: TaskData, config: TrainConfig, seed: int, path: str,
                    device: str) -> dict[str, Any]:
    return load_or_train(name, data, config, seed=seed, path=path, device=device)[1]


class BackgroundTraining:
    """`load_or_train` in a second process, so that a notebook can train another model meanwhile.

        job = BackgroundTraining("no attention", data, CHAPTER_TRAIN, seed=0, path=ARTIFACTS / "ch03.pt")
        ...                                   # train something else here: two models, two cores
        model, record = job.result()          # waits, then loads the checkpoint the process saved

    If a checkpoint for exactly these settings is already at `path`, no process starts and `result()`
    loads it. Otherwise one worker process (spawned, one torch thread) trains the model on `device`
    (default CUDA when present), saves it to `path` and exits; `result()` waits for it, loads the
    checkpoint and returns (model, record) with record["loaded"] False and record["background"] True.
    An error in the worker is raised again by `result()`.
    """

    def __init__(self, name: str, data: TaskData, config: TrainConfig, *, seed: int, path: str | Path,
                 device: torch.device | str | None = None) -> None:
        if name not in VARIANTS:
            raise ValueError(f"variant {name!r} is unknown, expected one of {list(VARIANTS)}")
        self.name, self.path = name, Path(path)
        self.device = get_device() if device is None else torch.device(device)
        self._settings = _settings(name, data, config, seed)
        self._pool: ProcessPoolExecutor | None = None
        self._future = None
        self._found = _load_matching(self.path, self._settings, self.device)   # kept for result()
        if self._found is None:
            self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_worker_init)
            self._future = self._pool.submit(_train_and_save, name, data, config, seed, str(self.path),
                                             str(self.device))

    @property
    def started(self) -> bool:
        """Whether a process is training (False: the checkpoint was already there)."""
        return self._future is not None

    def done(self) -> bool:
        """Whether result() would return at once."""
        return self._future is None or self._future.done()

    def result(self, timeout: float | None = None) -> tuple[Seq2Seq, dict[str, Any]]:
        """Wait for the training (at most `timeout` seconds), then (model on `device`, record)."""
        if self._found is not None:
            return self._found
        try:
            trained = self._future.result(timeout)
        finally:
            if self._future.done():
                self._pool.shutdown()
        found = _load_matching(self.path, self._settings, self.device)
        if found is None:
            raise RuntimeError(f"no checkpoint for {self.name!r} with these settings at {self.path} "
                               "after training")
        return found[0], {**trained, "loaded": False, "background": True}


# ------------------------------------------------------------------------------------------------ scoring
def _batches(examples: Sequence[Example], batch_size: int):
    """Chunks of (positions, examples), sorted by source length so little of each batch is padding."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].src))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        yield chunk, [examples[i] for i in chunk]


def decode(model: Seq2Seq, examples: Sequence[Example], data: TaskData, *, beam_size: int = 1,
           length_penalty_alpha: float = 0.75, batch_size: int = 128) -> list[Hypothesis]:
    """Translate examples (greedy when beam_size == 1, else beam search), one Hypothesis each, in order."""
    device = next(model.parameters()).device
    results: list[Hypothesis | None] = [None] * len(examples)
    for chunk, part in _batches(examples, batch_size):
        batch = make_batch(part, data.src_vocab, data.tgt_vocab).to(device)
        kwargs = {"bos": data.tgt_vocab.bos, "eos": data.tgt_vocab.eos}
        if beam_size == 1:
            hyps = greedy_decode(model, batch.src, batch.src_valid_lens, **kwargs)
        else:
            hyps = beam_search(model, batch.src, batch.src_valid_lens, beam_size=beam_size,
                               length_penalty_alpha=length_penalty_alpha, **kwargs)
        for i, hyp in zip(chunk, hyps, strict=True):
            results[i] = hyp
    return results


def translations(model: Seq2Seq, examples: Sequence[Example], data: TaskData, **options) -> list[list[str]]:
    """The model's translations of `examples` as token lists (options as in `decode`)."""
    return [data.tgt_vocab.to_tokens(h.tokens) if h.tokens else [] for h in decode(model, examples, data,
                                                                                    **options)]


@torch.no_grad()
def forced_attention(model: Seq2Seq, examples: Sequence[Example], data: TaskData, *,
                     batch_size: int = 128) -> list[torch.Tensor]:
    """The attention of every decoder step when the model is fed the reference ("forced decoding").

    Returns, per example, a CPU tensor (len(tgt) + 1, len(src) + 1): row t is the step fed y_{t-1} that
    predicts y_t (the last row predicts <eos>), column i is source word i (the last column is <eos>).
    """
    if not model.decoder.has_attention:
        raise ValueError(f"a {type(model.decoder).__name__} has no attention to align with")
    device = next(model.parameters()).device
    results: list[torch.Tensor | None] = [None] * len(examples)
    with eval_mode(model):
        for chunk, part in _batches(examples, batch_size):
            batch = make_batch(part, data.src_vocab, data.tgt_vocab).to(device)
            _, attention = model(batch.src, batch.src_valid_lens, batch.tgt_in)
            for k, (i, example) in enumerate(zip(chunk, part, strict=True)):
                results[i] = attention[k, : len(example.tgt) + 1, : len(example.src) + 1].float().cpu()
    return results


def alignment_scores(attention: Sequence[torch.Tensor], examples: Sequence[Example], *,
                     convention: str) -> tuple[float, float]:
    """(AER, argmax accuracy) of forced-decoding attention matrices against the examples' gold links.

    attention: per example (len(tgt) + 1, len(src) + 1), as `forced_attention` returns.
    """
    predicted = [attention_to_links(a, convention=convention, src_len=len(e.src), tgt_len=len(e.tgt))
                 for a, e in zip(attention, examples, strict=True)]
    sure = [e.sure for e in examples]
    possible = [e.possible for e in examples]
    return (corpus_alignment_error_rate(predicted, sure, possible),
            corpus_alignment_accuracy(predicted, sure, possible))


def evaluate(model: Seq2Seq, data: TaskData, examples: Sequence[Example] | None = None, *,
             batch_size: int = 128) -> dict[str, float | None]:
    """Test perplexity, corpus BLEU and exact match of greedy translations, and AER/accuracy per convention.

    examples: default data.test. Alignment scores are None for a model without attention.
    """
    examples = data.test if examples is None else list(examples)
    loss = evaluate_loss(model, data.loader(examples, batch_size), device=next(model.parameters()).device)
    hyps = translations(model, examples, data, batch_size=batch_size)
    refs = [e.tgt for e in examples]
    scores: dict[str, float | None] = {
        "perplexity": math.exp(loss),
        "bleu": corpus_bleu(hyps, refs),
        "exact_match": exact_match(hyps, refs),
    }
    attention = forced_attention(model, examples, data) if model.decoder.has_attention else None
    for convention in CONVENTIONS:
        aer = accuracy = None
        if attention is not None:
            aer, accuracy = alignment_scores(attention, examples, convention=convention)
        scores[f"aer_{convention}"] = aer
        scores[f"accuracy_{convention}"] = accuracy
    return scores


@torch.no_grad()
def window_centres(model: Seq2Seq, examples: Sequence[Example], data: TaskData) -> list[torch.Tensor]:
    """Local attention's window centres p_t under forced decoding, per example a CPU tensor (len(tgt) + 1,).

    p_t of step t (fed y_{t-1}, predicting y_t): t (clamped) for local-m, S_i·sigmoid(v_pᵀ tanh(W_p h_t))
    for local-p (Luong et al. 2015, eq. 9), from `LuongDecoder.centres`.
    """
    decoder = model.decoder
    if not isinstance(decoder, LuongDecoder) or decoder.alignment == "global":
        raise ValueError("window_centres needs a LuongDecoder with attention='local-m' or 'local-p'")
    device = next(model.parameters()).device
    results: list[torch.Tensor | None] = [None] * len(examples)
    with eval_mode(model):
        for chunk, part in _batches(examples, 128):
            batch = make_batch(part, data.src_vocab, data.tgt_vocab).to(device)
            state = decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
            centres = []
            for t in range(batch.tgt_in.shape[1]):
                _, state, _ = decoder.step(batch.tgt_in[:, t], state)
                query = top_layer(state.hidden)[:, None]                         # h_t: (B, 1, H)
                centres.append(decoder.centres(query, t, batch.src_valid_lens)[:, 0])
            centres = torch.stack(centres, 1).float().cpu()                      # (B, T)
            for k, (i, example) in enumerate(zip(chunk, part, strict=True)):
                results[i] = centres[k, : len(example.tgt) + 1]
    return results


def centre_statistics(centres: Sequence[torch.Tensor], examples: Sequence[Example]) -> dict[str, float]:
    """How well window centres follow the gold alignment, over every target word with one sure link.

    centres: per example (len(tgt) + 1,), as `window_centres` returns; step t is compared with the
    source position of the word it predicts (the "output" convention). Returns
    centre_error: mean |p_t - gold source position|, in positions;
    centre_slope: the least-squares slope of p_t against t within sentences (+1 follows the diagonal,
    -1 the reversal's anti-diagonal, 0 a fixed position).
    """
    errors, pairs = [], []
    for p, example in zip(centres, examples, strict=True):
        gold = {}
        for i, j in example.sure:
            gold.setdefault(j, []).append(i)
        steps = [j for j in range(len(example.tgt)) if len(gold.get(j, ())) == 1]
        if len(steps) < 2:
            continue
        values = [float(p[j]) for j in steps]
        errors += [abs(v - gold[j][0]) for v, j in zip(values, steps, strict=True)]
        mean_t, mean_p = statistics.fmean(steps), statistics.fmean(values)
        pairs += [(j - mean_t, v - mean_p) for j, v in zip(steps, values, strict=True)]
    if not errors:
        raise ValueError("no example has two or more target words with exactly one sure link")
    slope = sum(dt * dp for dt, dp in pairs) / sum(dt * dt for dt, _ in pairs)
    return {"centre_error": statistics.fmean(errors), "centre_slope": slope}


# ------------------------------------------------------------------------------------------------ the study
@dataclass(frozen=True)
class TaskConfig:
    """One task of the study: its data, the variants trained on it, and how they are trained."""

    num_pairs: int
    min_len: int
    max_len: int
    variants: tuple[str, ...]
    train: TrainConfig = field(default_factory=TrainConfig)
    vocab_size: int | None = None   # reversal only: the number of symbols
    data_seed: int = 0


@dataclass(frozen=True)
class StudyConfig:
    """Both tasks and the model seeds (every variant is trained once per seed on the same data)."""

    translation: TaskConfig
    reversal: TaskConfig
    seeds: tuple[int, ...] = (0, 1, 2)


FULL = StudyConfig(
    translation=TaskConfig(num_pairs=3400, min_len=3, max_len=30, variants=tuple(VARIANTS)),
    reversal=TaskConfig(num_pairs=2000, min_len=8, max_len=20, vocab_size=20,
                        variants=("global-general", "local-m-general", "local-p-general"),
                        train=TrainConfig(window=3, epochs=10)),
)
"""The configuration behind results/luong_variants.json."""

QUICK = StudyConfig(
    translation=TaskConfig(num_pairs=60, min_len=3, max_len=8, variants=("bahdanau", "local-p-general"),
                           train=TrainConfig(embed_size=8, num_hiddens=8, window=2, epochs=1, batch_size=16)),
    reversal=TaskConfig(num_pairs=60, min_len=4, max_len=8, vocab_size=6,
                        variants=("local-m-general", "local-p-general"),
                        train=TrainConfig(embed_size=8, num_hiddens=8, window=2, epochs=1, batch_size=16)),
    seeds=(0, 1),
)
"""A seconds-long version with the same output schema, for smoke tests."""


def task_data(task: str, config: TaskConfig) -> TaskData:
    """The data of `task` ("translation" or "reversal") described by `config`."""
    if task == "translation":
        return translation_data(config.num_pairs, min_len=config.min_len, max_len=config.max_len,
                                seed=config.data_seed)
    if task == "reversal":
        return reversal_data(config.num_pairs, min_len=config.min_len, max_len=config.max_len,
                             vocab_size=config.vocab_size, seed=config.data_seed)
    raise ValueError(f"task={task!r}, expected 'translation' or 'reversal'")


def run_one(task: str, config: TaskConfig, variant: str, seed: int) -> dict[str, Any]:
    """Train and score one (variant, seed) of a task on CPU; returns a JSON-ready record of the run."""
    data = task_data(task, config)
    model, history = train_variant(variant, data, config.train, seed=seed, device="cpu")
    record: dict[str, Any] = {"variant": variant, "seed": seed, **evaluate(model, data),
                              "train_cpu_seconds": sum(history.cpu_seconds),
                              "parameters": sum(p.numel() for p in model.parameters())}
    if isinstance(model.decoder, LuongDecoder) and model.decoder.alignment != "global":
        record.update(centre_statistics(window_centres(model, data.test, data), data.test))
    return record


def _worker_init() -> None:
    torch.set_num_threads(1)


def _job(args: tuple[str, TaskConfig, str, int]) -> tuple[str, dict[str, Any]]:
    task = args[0]
    return task, run_one(*args)


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


def run_study(config: StudyConfig, *, workers: int = 2, progress: bool = True) -> dict[str, Any]:
    """Run every (task, variant, seed) of `config` over `workers` single-threaded processes.

    Returns the JSON-ready results: config, environment, runtime, and per task the per-seed runs and
    their mean ± std per variant.
    """
    check_positive_int("workers", workers)
    jobs = [(task, getattr(config, task), variant, seed)
            for task in ("translation", "reversal")
            for variant in getattr(config, task).variants
            for seed in config.seeds]
    start = time.perf_counter()
    records: dict[str, list[dict[str, Any]]] = {"translation": [], "reversal": []}
    bar = tqdm(total=len(jobs), desc="runs", unit="run", disable=not progress, leave=False)
    try:
        if workers == 1:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                for job in jobs:
                    task, record = _job(job)
                    records[task].append(record)
                    bar.update(1)
            finally:
                torch.set_num_threads(threads)
        else:
            context = get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init) as pool:
                for future in as_completed([pool.submit(_job, job) for job in jobs]):
                    task, record = future.result()
                    records[task].append(record)
                    bar.update(1)
    finally:
        bar.close()
    results: dict[str, Any] = {
        "format": RESULTS_FORMAT,
        "config": asdict(config),
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "platform": platform.platform(), "cpu_count": os.cpu_count(), "workers": workers,
                        "threads_per_worker": 1, "device": "cpu"},
        "runtime_seconds": time.perf_counter() - start,
    }
    for task in ("translation", "reversal"):
        variants = []
        for variant in getattr(config, task).variants:
            runs = sorted((r for r in records[task] if r["variant"] == variant), key=lambda r: r["seed"])
            kind, options = VARIANTS[variant]
            variants.append({"name": variant, "kind": kind, "options": options,
                             "runs": [{k: v for k, v in r.items() if k != "variant"} for r in runs],
                             "summary": summarise(runs)})
        results[task] = {"variants": variants}
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
    parser = argparse.ArgumentParser(prog="python -m attn_course.experiments",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 epoch, 2 variants: a smoke run")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, one CPU thread each")
    parser.add_argument("--seeds", type=int, nargs="+", help="model seeds (default: 0 1 2; quick: 0 1)")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.seeds:
        config = replace(config, seeds=tuple(args.seeds))
    results = run_study(config, workers=args.workers, progress=sys.stderr.isatty())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    columns = ("perplexity", "bleu", "aer_output", "aer_input")
    print(f"{'variant':<28}" + "".join(f"{c:>18}" for c in columns))
    for row in results_table(results, "translation", columns):
        print(f"{row['variant']:<28}" + "".join(f"{row[c]:>18}" for c in columns))
    print(f"{len(config.seeds)} seeds, {results['runtime_seconds']:.0f} s, written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
