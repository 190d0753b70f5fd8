"""The models of chapters 3-5: their data, the variants of attention, and training cached in a folder.

    data = chapter_data()                                        # CHAPTER_DATA: chapters 3 and 4's corpus
    model, history = train_variant("bahdanau", data, CHAPTER_RECIPE, seed=0)
    model, record = load_or_train("bahdanau", data, CHAPTER_RECIPE, seed=0,
                                  path=runtime.artifacts_dir() / "ch04_bahdanau.pt")
    job = BackgroundTraining("no attention", data, CHAPTER_RECIPE, seed=0, path=...)   # a second process
    data = real_data(tatoeba.pair_file().read())                 # the real-data chapter: Tatoeba pairs

Three configs, one per thing configured: `DataConfig` (the corpus), `Recipe` (the sizes every variant
shares and their `attn_course.training.loop.TrainConfig`) and, built from both and a variant's name,
`attn_course.models.seq2seq.ModelConfig` (the architecture, which a checkpoint records). One way leads from
a recipe to a trained model: `train_variant` seeds, builds the variant and hands it to `fit`, which batches
the data as the TrainConfig says and calls `attn_course.training.loop.train` with that TrainConfig whole.
Chapters 9 and 10 build their own models and call `fit` too. A checkpoint is reused only when it was saved
for the same variant, recipe, seed and data; any chapter retrains when it is missing. Chapter 12 (real
sentences, any pair file) draws its data with `real_data`, keeps its models at `real_model_path`, picks its
heatmaps' sentences with `showcase` and reads how its figures spread over seeds with `measured_spread`.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, NamedTuple

import torch

from attn_course.course import claims
from attn_course.data.tasks import (
    Example,
    TaskData,
    build_vocabs,
    reverse_task,
    split,
    toy_translation,
)
from attn_course.models.seq2seq import ModelConfig, Seq2Seq
from attn_course.training.loop import History, TrainConfig, load_checkpoint, save_checkpoint, train
from attn_course.training.runtime import artifact_path, get_device, seed_everything
from attn_course.validation import check_positive_int

TASKS = ("translation", "reversal")


# ------------------------------------------------------------------------------------------------ variants
class Variant(NamedTuple):
    """A model family: its `ModelConfig` kind and decoder options (window and max_len are added later)."""

    kind: str
    options: dict[str, Any]


def _luong(score: str, attention: str = "global", input_feeding: bool = True) -> Variant:
    return Variant("luong", {"score": score, "attention": attention, "input_feeding": input_feeding})


#: Every variant the chapters and the study (`attn_course.course.study`) know, by name. Luong variants use
#: input feeding unless the name says not.
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
def pairs_data(examples: Sequence[Example], *, min_freq: int = 2, seed: int = 0,
               fractions: Sequence[float] = (0.9, 0.05, 0.05)) -> TaskData:
    """Any sentence pairs (e.g. `attn_course.data.tatoeba.read_pairs`) as a task: train/validation/test
    splits by `fractions` in which no source sentence is in two splits (`attn_course.data.tasks.split`), and
    vocabularies built on the training split; a word seen fewer than min_freq times there becomes <unk>."""
    parts = split(examples, fractions, seed=seed)
    src_vocab, tgt_vocab = build_vocabs(parts.train, min_freq=min_freq)
    return TaskData(parts.train, parts.val, parts.test, src_vocab, tgt_vocab)


def _task_data(examples: list[Example], seed: int) -> TaskData:
    return pairs_data(examples, min_freq=0, seed=seed, fractions=(0.8, 0.1, 0.1))


def translation_data(num_pairs: int, *, min_len: int = 3, max_len: int = 30, seed: int = 0) -> TaskData:
    """`attn_course.data.tasks.toy_translation` pairs split 80/10/10 (no source sentence in two splits)."""
    return _task_data(toy_translation(num_pairs, min_len=min_len, max_len=max_len, seed=seed), seed)


def reversal_data(num_pairs: int, *, min_len: int = 8, max_len: int = 20, vocab_size: int = 20,
                  seed: int = 0) -> TaskData:
    """`attn_course.data.tasks.reverse_task` pairs split 80/10/10; gold links are the anti-diagonal."""
    examples = reverse_task(num_pairs, min_len=min_len, max_len=max_len, vocab_size=vocab_size, seed=seed)
    return _task_data(examples, seed)


@dataclass(frozen=True)
class DataConfig:
    """A task's corpus: num_pairs generated pairs of min_len..max_len source tokens, split 80/10/10 with seed.

    task: "translation" (`attn_course.data.tasks.toy_translation`) or "reversal"
    (`attn_course.data.tasks.reverse_task` over vocab_size symbols, whose gold alignment is the anti-diagonal;
    vocab_size is for it alone).
    """

    task: str
    num_pairs: int
    min_len: int
    max_len: int
    vocab_size: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r}, expected one of {TASKS}")
        if (self.vocab_size is None) != (self.task == "translation"):
            raise ValueError(f"vocab_size={self.vocab_size!r} with task={self.task!r}: the reversal task "
                             "needs a number of symbols, the translation task takes none")


def task_data(config: DataConfig) -> TaskData:
    """The train/validation/test splits and vocabularies that `config` describes."""
    if config.task == "translation":
        return translation_data(config.num_pairs, min_len=config.min_len, max_len=config.max_len,
                                seed=config.seed)
    return reversal_data(config.num_pairs, min_len=config.min_len, max_len=config.max_len,
                         vocab_size=config.vocab_size, seed=config.seed)


# ------------------------------------------------------------------------------------------------ models
@dataclass(frozen=True)
class Recipe:
    """The sizes and the training that every variant of a chapter or task shares.

    The encoder is a bidirectional GRU with encoder_hiddens units per direction (default
    decoder_hiddens // 2, so that its annotations have decoder_hiddens features, the size of the decoder
    state: then every Luong score, dot included, and Bahdanau's decoder read the same encoder, and
    attention is the only thing that differs between variants). The decoder has decoder_hiddens units;
    window is local attention's D. `variant_config` turns a recipe into a variant's `ModelConfig`.
    """

    embed_size: int = 32
    decoder_hiddens: int = 64
    encoder_hiddens: int | None = None
    window: int = 10
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        if self.encoder_hiddens is None and (self.decoder_hiddens < 2 or self.decoder_hiddens % 2):
            raise ValueError(f"decoder_hiddens={self.decoder_hiddens}, expected an even number >= 2 "
                             "(the bidirectional encoder gets decoder_hiddens // 2 per direction)")

    @property
    def encoder_size(self) -> int:
        """Units per direction of the bidirectional encoder."""
        return self.decoder_hiddens // 2 if self.encoder_hiddens is None else self.encoder_hiddens


def variant_config(name: str, data: TaskData, recipe: Recipe) -> ModelConfig:
    """The architecture of variant `name` (a key of VARIANTS) sized for `data` and `recipe`."""
    if name not in VARIANTS:
        raise ValueError(f"variant {name!r} is unknown, expected one of {list(VARIANTS)}")
    kind, options = VARIANTS[name]
    options = dict(options)
    if kind == "luong":
        options["window"] = recipe.window
        if options["score"] == "location":
            options["max_len"] = data.max_src_positions
    return ModelConfig(kind, len(data.src_vocab), len(data.tgt_vocab), embed_size=recipe.embed_size,
                       encoder_hiddens=recipe.encoder_size, bidirectional=True,
                       decoder_hiddens=recipe.decoder_hiddens, **options)


def build_variant(name: str, data: TaskData, recipe: Recipe) -> Seq2Seq:
    """A freshly initialised model of variant `name` (a key of VARIANTS) sized for `data` and `recipe`."""
    return Seq2Seq.from_config(variant_config(name, data, recipe))


def fit(model: Seq2Seq, data: TaskData, config: TrainConfig, *, seed: int, validate: bool = True,
        device: torch.device | str | None = None, progress: bool = False, callback=None) -> History:
    """Train `model` on data.train as `config` says, in batches of config.batch_size shuffled with `seed`
    (which also seeds the training's own draws); validation loss on data.val after every epoch unless
    validate is False. device: default CUDA when present; callback as in `train`. Returns the History."""
    loader = data.loader(data.train, config.batch_size, shuffle=True, seed=seed)
    val_loader = data.loader(data.val, config.batch_size) if validate else None
    return train(model, loader, config, val_loader=val_loader, device=device, seed=seed, progress=progress,
                 callback=callback)


def train_variant(name: str, data: TaskData, recipe: Recipe, *, seed: int,
                  device: torch.device | str | None = None, progress: bool = False,
                  callback=None) -> tuple[Seq2Seq, History]:
    """Build variant `name` with `seed` and `fit` it with recipe.train (validation loss on data.val).

    device: default CUDA when present. Returns the trained model (eval mode) and its History.
    """
    seed_everything(seed)
    model = build_variant(name, data, recipe)
    return model, fit(model, data, recipe.train, seed=seed, device=device, progress=progress,
                      callback=callback)


# ------------------------------------------------------------------------------------------------ chapters
#: The corpus of chapters 3 and 4: toy sentences of 3-40 source tokens, split 80/10/10.
CHAPTER_DATA = DataConfig("translation", num_pairs=7000, min_len=3, max_len=40, seed=0)

#: The model and training of chapters 3 and 4 (no attention and Bahdanau): a 64-unit decoder reading a
#: bidirectional encoder of 64 units per direction; 4 epochs of batches of 16 (small batches: more updates
#: per CPU-second, which is what these small models need), Adam's learning rate 0.004 multiplied by 0.75
#: after every epoch. Chosen with `make robustness` so that chapter 4's claim about Bahdanau's BLEU holds over
#: seeds, CPU kernels and threads; the measured spread of every claim is in
#: attn_course/course/results/robustness.json.
CHAPTER_RECIPE = Recipe(embed_size=32, decoder_hiddens=64, encoder_hiddens=64,
                        train=TrainConfig(epochs=4, batch_size=16, lr=4e-3, lr_decay=0.75))


def chapter_data() -> TaskData:
    """The corpus of chapters 3 and 4 (`CHAPTER_DATA`)."""
    return task_data(CHAPTER_DATA)


#: The real-data chapter's corpus: REAL_PAIRS of the shipped Tatoeba sentence pairs, drawn with REAL_SEED
#: (whatever the model seed), split 90/5/5 by source sentence; words seen once in training become <unk>.
REAL_PAIRS = 25_000
REAL_SEED = 0

#: The real-data chapter's models and training, shared by the three models it compares.
REAL_RECIPE = Recipe(embed_size=48, decoder_hiddens=96, encoder_hiddens=48,
                     train=TrainConfig(epochs=2, batch_size=128, lr=5e-3, lr_decay=0.8))


def sample_pairs(examples: Sequence[Example], num_pairs: int, *, seed: int = 0) -> list[Example]:
    """num_pairs of `examples` drawn without replacement with `seed`, kept in corpus order (all of them when
    there are no more than num_pairs)."""
    check_positive_int("num_pairs", num_pairs)
    if len(examples) <= num_pairs:
        return list(examples)
    return [examples[i] for i in sorted(random.Random(seed).sample(range(len(examples)), num_pairs))]


def real_data(examples: Sequence[Example], *, num_pairs: int = REAL_PAIRS, seed: int = REAL_SEED) -> TaskData:
    """The real-data chapter's task from any sentence pairs (`attn_course.data.tatoeba.load_sample` or
    `read_pairs`): `sample_pairs`, then `pairs_data` (90/5/5, words seen once in training -> <unk>)."""
    return pairs_data(sample_pairs(examples, num_pairs, seed=seed), min_freq=2, seed=seed)


#: The English sentences whose heatmaps the real-data chapter draws when they are in its test set: those of
#: the shipped sample, where French moves the adjective after its noun.
SHOWCASE = ("i love french movies .", "i don't care for green tea .")
#: The source lengths (tokens, first and last) from which `showcase` picks sentences of its own: long enough
#: for words to change places, short enough for a heatmap to read.
SHOWCASE_LENGTHS = (5, 10)


def showcase(test: Sequence[Example], crossings: Sequence[int], *, wanted: Sequence[str] = SHOWCASE,
             count: int = 2, lengths: tuple[int, int] = SHOWCASE_LENGTHS) -> list[Example]:
    """The test sentences the real-data chapter draws attention heatmaps for: min(count, len(test)) of them.

    First those whose source (tokens joined by spaces) is in `wanted`, in test order; when fewer than
    `count` are (another pair file, another draw), the rest are the test sentences whose alignment crosses
    most, crossings[i] being that of test[i] (`attn_course.measure.diagnostics.alignment_crossings`):
    among those of lengths[0]..lengths[1] source tokens first, the earliest first among equals.
    """
    check_positive_int("count", count)
    if len(crossings) != len(test):
        raise ValueError(f"crossings has {len(crossings)} entries, expected one per test sentence = "
                         f"{len(test)}")
    chosen = [i for i, example in enumerate(test) if " ".join(example.src) in wanted][:count]
    low, high = lengths
    others = sorted((i for i in range(len(test)) if i not in chosen),
                    key=lambda i: (not low <= len(test[i].src) <= high, -crossings[i], i))
    return [test[i] for i in chosen + others[:count - len(chosen)]]


def other_translation(test: Sequence[Example], references: Sequence[Sequence[list[str]]]
                      ) -> tuple[int, list[str]] | None:
    """A test sentence with another accepted translation than its own, to show why BLEU takes them all:
    (i, the first of references[i] other than test[i].tgt). The first sentence with 3 or more translations
    whose own has 5 or more tokens, else the first with 2 or more; the other translation has 4 or more
    tokens, so that it holds 4-grams. None when no test sentence has such a second translation."""
    for fewest, shortest in ((3, 5), (2, 1)):
        for i, example in enumerate(test):
            if len(references[i]) >= fewest and len(example.tgt) >= shortest:
                other = next((r for r in references[i] if r != example.tgt and len(r) >= 4), None)
                if other is not None:
                    return i, other
    return None


class Spread(NamedTuple):
    """A measured figure over the trainings `make robustness` recorded: lowest, highest, mean, standard
    deviation, and over how many trainings and distinct seeds."""

    low: float
    high: float
    mean: float
    sd: float
    trainings: int
    seeds: int


def measured_spread(key: str) -> Spread:
    """How claim `key` ("ch12.attention_gain", ...) spread over the trainings recorded in
    attn_course/course/results/robustness.json (`attn_course.course.claims.by_seed`): seeds and machines,
    on the data its chapter ships. Raises KeyError for an unknown claim or one fewer than 2 trainings
    recorded."""
    seeds = claims.by_seed(key)
    values = [value for per_seed in seeds.values() for value in per_seed]
    if len(values) < 2:
        raise KeyError(f"claim {key!r} was recorded by {len(values)} trainings, expected 2 or more")
    return Spread(min(values), max(values), statistics.mean(values), statistics.stdev(values), len(values),
                  len(seeds))


# ------------------------------------------------------------------------------------------------ cache
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


def real_model_path(name: str, pairs: str, data: TaskData, recipe: Recipe, seed: int) -> Path:
    """Where the real-data chapter keeps variant `name` trained on `data`, drawn from the pair file whose
    content hashes to `pairs` (`attn_course.data.tatoeba.PairFile.digest`), with `recipe` and `seed`: a file
    of the artifacts folder named for all of them (`attn_course.training.runtime.artifact_path`), so that
    runs on other files or settings never overwrite each other's models."""
    return artifact_path(f"ch12_{name.replace(' ', '_')}", pairs=pairs, data=data_fingerprint(data),
                         recipe=recipe, seed=seed)


def _settings(name: str, data: TaskData, recipe: Recipe, seed: int) -> dict[str, Any]:
    """What a checkpoint must have been saved for to stand for this training (JSON round-tripped)."""
    return json.loads(json.dumps({"variant": name, "recipe": asdict(recipe), "seed": seed,
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


def load_or_train(name: str, data: TaskData, recipe: Recipe, *, seed: int,
                  path: str | Path | None = None, device: torch.device | str | None = None,
                  progress: bool = False, callback=None) -> tuple[Seq2Seq, dict[str, Any]]:
    """Variant `name` trained on `data` with `recipe` and `seed`, loaded from the checkpoint at `path` if
    one was saved there for exactly these settings and data, otherwise trained (and then saved to `path`).

    Lets chapters share trained models through a folder (`attn_course.training.runtime.artifacts_dir()`) while
    each still runs on its own. A checkpoint of an older format or other settings is trained again.
    Returns the model (eval mode, on `device`, default CUDA when present) and the training record
    {"loaded": bool, "train_loss", "val_loss": per-epoch lists, "train_cpu_seconds", "train_seconds"}.
    """
    device = get_device() if device is None else torch.device(device)
    settings = _settings(name, data, recipe, seed)
    path = None if path is None else Path(path)
    found = _load_matching(path, settings, device)
    if found is not None:
        return found
    model, history = train_variant(name, data, recipe, seed=seed, device=device, progress=progress,
                                   callback=callback)
    record = {"train_loss": history.train_loss, "val_loss": history.val_loss,
              "train_cpu_seconds": sum(history.cpu_seconds), "train_seconds": sum(history.seconds)}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(model, path, settings=settings, record=record)
    return model, {**record, "loaded": False}


def _one_thread() -> None:
    torch.set_num_threads(1)


def _train_and_save(name: str, data: TaskData, recipe: Recipe, seed: int, path: str,
                    device: str) -> dict[str, Any]:
    return load_or_train(name, data, recipe, seed=seed, path=path, device=device)[1]


class BackgroundTraining:
    """`load_or_train` in a second process, so that a notebook can train another model meanwhile.

        job = BackgroundTraining("no attention", data, CHAPTER_RECIPE, seed=0, path=folder / "ch03.pt")
        ...                                   # train something else here: two models, two cores
        model, record = job.result()          # waits, then loads the checkpoint the process saved

    If a checkpoint for exactly these settings is already at `path`, no process starts and `result()`
    loads it. Otherwise one worker process (spawned, one torch thread) trains the model on `device`
    (default CUDA when present), saves it to `path` and exits; `result()` waits for it, loads the
    checkpoint and returns (model, record) with record["loaded"] False and record["background"] True.
    An error in the worker is raised again by `result()`.
    """

    def __init__(self, name: str, data: TaskData, recipe: Recipe, *, seed: int, path: str | Path,
                 device: torch.device | str | None = None) -> None:
        if name not in VARIANTS:
            raise ValueError(f"variant {name!r} is unknown, expected one of {list(VARIANTS)}")
        self.name, self.path = name, Path(path)
        self.device = get_device() if device is None else torch.device(device)
        self._settings = _settings(name, data, recipe, seed)
        self._pool: ProcessPoolExecutor | None = None
        self._future = None
        self._found = _load_matching(self.path, self._settings, self.device)   # kept for result()
        if self._found is None:
            self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=_one_thread)
            self._future = self._pool.submit(_train_and_save, name, data, recipe, seed, str(self.path),
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
