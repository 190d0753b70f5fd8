"""Chapter 0, data: translation pairs with gold word alignments, vocabularies, padded batches, splits.

Nothing is downloaded. The course's main corpus comes from a small English→French grammar
(:func:`toy_translation`, built in :mod:`attn_course.data.toy_french`) that knows which source words each
target word translates, so later chapters can score attention maps against gold alignments. Algorithmic tasks
(copy, reverse, sort, dates) use the same :class:`Example` type, and :func:`load_fra_eng` reads the real
Tatoeba English–French file (fra.txt) that d2l uses, if you have it.

Tensors follow the d2l vocabulary: a :class:`Batch` holds source ids (with <eos>) and their ``valid_lens``,
decoder inputs (<bos> + target) and labels (target + <eos>) and their ``valid_lens``, all right-padded with
<pad> = 0. Source token i of ``Example.src`` is ``batch.src[:, i]``; target token j of ``Example.tgt`` is the
label ``batch.tgt_out[:, j]``, predicted at decoder step j from the input ``batch.tgt_in[:, j]`` = y_{j-1}.
"""

from __future__ import annotations

import collections
import datetime
import json
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from attn_course.data import toy_french
from attn_course.validation import check_int, check_positive_int

Link = tuple[int, int]
"""A word alignment link (src_index, tgt_index), 0-based into an Example's src and tgt tokens."""
# --------------------------------------------------------------------------------------------- examples
@dataclass(frozen=True)
class Example:
    """One sentence pair and its gold word alignment.

    src, tgt: token lists. sure, possible: sets of (src_index, tgt_index) links, sure ⊆ possible
    (Och & Ney 2000: sure links are certain, possible links are allowed; AER never penalises a possible link).
    Links are stored as frozensets; they compare equal to sets. Real data (fra-eng) has no links: both empty.
    """

    src: list
    tgt: list
    sure: frozenset = frozenset()
    possible: frozenset = frozenset()

    def __post_init__(self):
        for name in ("src", "tgt"):
            tokens = getattr(self, name)
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise ValueError(f"{name} must be a list of str tokens, got {_describe(tokens)}")
        object.__setattr__(self, "sure", frozenset(self.sure))
        object.__setattr__(self, "possible", frozenset(self.possible))
        n, m = len(self.src), len(self.tgt)
        for name in ("sure", "possible"):
            for link in getattr(self, name):
                if not (isinstance(link, tuple) and len(link) == 2 and 0 <= link[0] < n and 0 <= link[1] < m):
                    raise ValueError(
                        f"{name} link {link!r} is not a (src_index, tgt_index) pair in range for "
                        f"len(src) = {n}, len(tgt) = {m}"
                    )
        if not self.sure <= self.possible:
            missing = sorted(self.sure - self.possible)[:3]
            raise ValueError(f"sure links {missing} are missing from possible; expected sure ⊆ possible")


def alignment_matrix(example: Example) -> torch.Tensor:
    """The gold alignment as a (len(tgt), len(src)) float tensor: 1 for a sure link, 0.5 for a possible-only
    link, 0 elsewhere. Rows are target tokens, like the rows of an attention map (decoder steps)."""
    matrix = torch.zeros(len(example.tgt), len(example.src))
    for i, j in example.possible:
        matrix[j, i] = 1.0 if (i, j) in example.sure else 0.5
    return matrix


def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def _check_count(num_pairs, name: str = "num_pairs") -> None:
    check_int(name, num_pairs, low=0)


def _check_lengths(min_len, max_len, smallest: int = 1) -> None:
    for name, value in (("min_len", min_len), ("max_len", max_len)):
        check_int(name, value)
    if not 1 <= min_len <= max_len:
        raise ValueError(f"expected 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    if max_len < smallest:
        raise ValueError(f"max_len={max_len} is below the shortest sentence this task makes ({smallest})")


# --------------------------------------------------------------------------------------------- generators
def toy_translation(num_pairs: int, *, min_len: int = 3, max_len: int = 50, seed: int = 0) -> list[Example]:
    """English→French sentence pairs from the course grammar, with gold sure/possible alignments.

    Source lengths (tokens, "." included) are drawn uniformly from [min_len, max_len], so with the defaults
    about 40% of the sentences are longer than 30 tokens. Same seed, same corpus; nothing global is touched.
    The grammar, its agreement rules and its alignment conventions are described in
    attn_course.data.toy_french; its lexicon (NOUNS, ADJECTIVES, VERBS, …) is machine-readable there.
    """
    _check_count(num_pairs)
    _check_lengths(min_len, max_len, toy_french.SHORTEST_SENTENCE)
    rng = random.Random(seed)
    return [Example(*toy_french.generate_pair(rng, min_len, max_len)) for _ in range(num_pairs)]


def _symbols(vocab_size: int) -> list[str]:
    return [str(i) for i in range(vocab_size)]


def _check_vocab_size(vocab_size) -> None:
    check_positive_int("vocab_size", vocab_size)


def copy_task(num_pairs: int, *, min_len: int = 3, max_len: int = 20, vocab_size: int = 20,
              seed: int = 0) -> list[Example]:
    """Sequences of the symbols "0" … str(vocab_size - 1) (repeats allowed) to be copied: link i ↔ i."""
    return _symbol_task(num_pairs, min_len, max_len, vocab_size, seed, reverse=False)


def reverse_task(num_pairs: int, *, min_len: int = 3, max_len: int = 20, vocab_size: int = 20,
                 seed: int = 0) -> list[Example]:
    """Sequences to be reversed: source position i links to target position n - 1 - i (an anti-diagonal)."""
    return _symbol_task(num_pairs, min_len, max_len, vocab_size, seed, reverse=True)


def _symbol_task(num_pairs: int, min_len: int, max_len: int, vocab_size: int, seed: int,
                 reverse: bool) -> list[Example]:
    _check_count(num_pairs)
    _check_lengths(min_len, max_len)
    _check_vocab_size(vocab_size)
    rng, symbols = random.Random(seed), _symbols(vocab_size)
    out = []
    for _ in range(num_pairs):
        src = rng.choices(symbols, k=rng.randint(min_len, max_len))
        n = len(src)
        links = {(i, n - 1 - i if reverse else i) for i in range(n)}
        out.append(Example(src, src[::-1] if reverse else list(src), links, links))
    return out


def sort_task(num_pairs: int, *, min_len: int = 3, max_len: int = 20, vocab_size: int = 20,
              seed: int = 0) -> list[Example]:
    """Distinct symbols to be sorted by numeric value ("2" < "10"): source position i links to its rank."""
    _check_count(num_pairs)
    _check_lengths(min_len, max_len)
    _check_vocab_size(vocab_size)
    if max_len > vocab_size:
        raise ValueError(f"sort_task needs distinct symbols: max_len={max_len} > vocab_size={vocab_size}")
    rng = random.Random(seed)
    out = []
    for _ in range(num_pairs):
        values = rng.sample(range(vocab_size), rng.randint(min_len, max_len))
        order = sorted(range(len(values)), key=values.__getitem__)
        rank = {i: r for r, i in enumerate(order)}
        links = {(i, rank[i]) for i in range(len(values))}
        out.append(Example([str(v) for v in values], [str(values[i]) for i in order], links, links))
    return out


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Each format lists its tokens; Y, M and D are the year, month and day fields (linked to the target digits),
# everything else (weekday, "of", "the", separators) is left unaligned. Slashed dates are day/month/year.
DATE_FORMATS = {
    "March 5, 2021": ("{month}", "D", ",", "Y"),
    "March 5th, 2021": ("{month}", "{Dth}", ",", "Y"),
    "5 March 2021": ("D", "{month}", "Y"),
    "5 Mar 2021": ("D", "{mon}", "Y"),
    "Mar 5, 2021": ("{mon}", "D", ",", "Y"),
    "Friday, 5th of March 2021": ("{weekday}", ",", "{Dth}", "of", "{month}", "Y"),
    "Friday, March 5, 2021": ("{weekday}", ",", "{month}", "D", ",", "Y"),
    "the 5th of March, 2021": ("the", "{Dth}", "of", "{month}", ",", "Y"),
    "05/03/2021": ("DD", "/", "MM", "/", "Y"),
    "5.3.2021": ("D", ".", "M", ".", "Y"),
    "2021-03-05": ("Y", "-", "MM", "-", "DD"),
}
_FIELD = {"Y": "Y", "D": "D", "DD": "D", "{Dth}": "D", "M": "M", "MM": "M", "{month}": "M", "{mon}": "M"}
_TARGET_SLOTS = {"Y": (0, 1, 2, 3), "M": (5, 6), "D": (8, 9)}  # positions in Y Y Y Y - M M - D D


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def date_task(num_pairs: int, *, first_year: int = 1900, last_year: int = 2099,
              formats: Sequence[str] | None = None, seed: int = 0) -> list[Example]:
    """Human-written dates → ISO 8601 "YYYY-MM-DD", one target token per character (digits and "-").

    Source formats are the keys of DATE_FORMATS (all of them unless `formats` picks some); "05/03/2021" is
    day/month/year. Each source field (year, month name or number, day) links sure to its target digits;
    weekdays, "the", "of" and separators have no links. Weekdays are the true ones for the date.
    """
    _check_count(num_pairs)
    for name, value in (("first_year", first_year), ("last_year", last_year)):
        check_int(name, value)
    if not 1000 <= first_year <= last_year <= 9999:
        raise ValueError(f"expected 1000 <= first_year <= last_year <= 9999, got {first_year}, {last_year}")
    names = tuple(DATE_FORMATS) if formats is None else tuple(formats)
    unknown = [f for f in names if f not in DATE_FORMATS]
    if unknown or not names:
        raise ValueError(f"formats {unknown or names!r} are unknown or empty; expected keys of DATE_FORMATS, "
                         f"e.g. {list(DATE_FORMATS)[:2]}")
    rng = random.Random(seed)
    start = datetime.date(first_year, 1, 1).toordinal()
    end = datetime.date(last_year, 12, 31).toordinal()
    out = []
    for _ in range(num_pairs):
        date = datetime.date.fromordinal(rng.randint(start, end))
        values = {
            "Y": str(date.year), "D": str(date.day), "DD": f"{date.day:02d}", "M": str(date.month),
            "MM": f"{date.month:02d}", "{Dth}": _ordinal(date.day), "{month}": MONTHS[date.month - 1],
            "{mon}": MONTHS[date.month - 1][:3], "{weekday}": WEEKDAYS[date.weekday()],
        }
        src, links = [], set()
        for i, slot in enumerate(DATE_FORMATS[rng.choice(names)]):
            src.append(values.get(slot, slot))
            if slot in _FIELD:
                links.update((i, j) for j in _TARGET_SLOTS[_FIELD[slot]])
        out.append(Example(src, list(date.isoformat()), links, links))
    return out


# --------------------------------------------------------------------------------------------- fra-eng
def preprocess_fra_eng(text: str) -> str:
    """d2l's MTFraEng preprocessing: non-breaking spaces (U+202F, U+00A0) → spaces, lower case, and a space
    inserted before , . ! ? when the character before is not a space."""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    out = [" " + ch if i > 0 and ch in ",.!?" and text[i - 1] != " " else ch for i, ch in enumerate(text)]
    return "".join(out)


# --------------------------------------------------------------------------------------------- vocabulary
class Vocab:
    """Token ↔ index maps with d2l's interface, and the special tokens <pad>, <bos>, <eos>, <unk>.

    tokens: a flat list of tokens or a list of token lists. Indices: <pad> 0, <bos> 1, <eos> 2, <unk> 3, then
    `reserved_tokens` in the given order, then every token seen at least `min_freq` times, most frequent
    first, ties in alphabetical order (d2l sorts all tokens alphabetically). Unknown tokens map to <unk>.
    """

    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, tokens: Sequence = (), min_freq: int = 0,
                 reserved_tokens: Sequence[str] | None = None):
        check_int("min_freq", min_freq, low=0)
        if isinstance(tokens, str):
            raise ValueError("tokens must be a list of tokens or a list of token lists, got one str")
        tokens = list(tokens)
        if tokens and all(isinstance(t, (list, tuple)) for t in tokens):
            tokens = [t for line in tokens for t in line]
        bad = next((t for t in tokens if not isinstance(t, str)), None)
        if bad is not None:
            raise ValueError(f"tokens must be str (or lists of str), found {_describe(bad)}")
        reserved = list(reserved_tokens or ())
        if not all(isinstance(t, str) for t in reserved):
            raise ValueError(f"reserved_tokens must be str, got {reserved!r}")
        counter = collections.Counter(tokens)
        self.token_freqs = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
        self.idx_to_token = list(dict.fromkeys([*self.SPECIALS, *reserved, *(
            t for t, freq in self.token_freqs if freq >= min_freq)]))
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.pad, self.bos, self.eos, self.unk = range(4)

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __contains__(self, token: str) -> bool:
        return token in self.token_to_idx

    def __getitem__(self, tokens):
        """vocab["chat"] → int; vocab[["le", "chat"]] → list[int] (nested lists map element-wise)."""
        if isinstance(tokens, (list, tuple)):
            get, unk = self.token_to_idx.get, self.unk
            return [get(t, unk) if isinstance(t, str) else self[t] for t in tokens]
        return self.token_to_idx.get(tokens, self.unk)

    def to_tokens(self, indices):
        """Index → token; a list or 1-D tensor of indices → list of tokens; 2-D → list of token lists."""
        if isinstance(indices, torch.Tensor) and indices.dim() > 0:
            return self.to_tokens(indices.tolist())
        if isinstance(indices, np.ndarray) and indices.ndim > 0:
            return self.to_tokens(indices.tolist())
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(i) for i in indices]
        index = int(indices)
        if not 0 <= index < len(self.idx_to_token):
            raise ValueError(f"index {index} is out of range for a vocabulary of {len(self)} tokens")
        return self.idx_to_token[index]

    def decode(self, indices) -> list[str]:
        """The tokens of one predicted sequence, up to (not including) the first <eos>, without <bos>/<pad>.

        indices: a list or 1-D tensor of token indices.
        """
        tokens = self.to_tokens(indices)
        if isinstance(tokens, str) or any(isinstance(t, list) for t in tokens):
            raise ValueError("decode takes one sequence of indices (a list or a 1-D tensor)")
        out = []
        for t in tokens:
            if t == "<eos>":
                break
            if t not in ("<bos>", "<pad>"):
                out.append(t)
        return out

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {self.idx_to_token[:8]}…)"


def build_vocabs(examples: Sequence[Example], *, min_freq: int = 0) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies of a corpus (build them on the training split only)."""
    return Vocab([e.src for e in examples], min_freq), Vocab([e.tgt for e in examples], min_freq)


# --------------------------------------------------------------------------------------------- batches
class Batch(NamedTuple):
    """A padded batch (all long tensors, right-padded with <pad> = 0).

    src: (batch_size, S), source ids + <eos>. src_valid_lens: (batch_size,), len(src tokens) + 1.
    tgt_in: (batch_size, T), <bos> + target ids (decoder inputs, teacher forcing).
    tgt_out: (batch_size, T), target ids + <eos> (labels). tgt_valid_lens: (batch_size,), len(tgt tokens) + 1.
    index: (batch_size,), position of each example in its dataset (for gold links and raw text).
    """

    src: torch.Tensor
    src_valid_lens: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_valid_lens: torch.Tensor
    index: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on `device`."""
        return Batch(*(t.to(device) for t in self))


def _pad(rows: list[list[int]], pad: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)


def collate(items: Sequence[tuple[int, list[int], list[int]]], src_vocab: Vocab, tgt_vocab: Vocab) -> Batch:
    """Pad encoded items (index, source ids, target ids) into a Batch; <eos>/<bos> are added here."""
    if not items:
        raise ValueError("cannot make a batch of 0 examples")
    index = torch.tensor([i for i, _, _ in items], dtype=torch.long)
    src = [s + [src_vocab.eos] for _, s, _ in items]
    tgt_in = [[tgt_vocab.bos] + t for _, _, t in items]
    tgt_out = [t + [tgt_vocab.eos] for _, _, t in items]
    return Batch(
        _pad(src, src_vocab.pad),
        torch.tensor([len(s) for s in src], dtype=torch.long),
        _pad(tgt_in, tgt_vocab.pad),
        _pad(tgt_out, tgt_vocab.pad),
        torch.tensor([len(t) for t in tgt_out], dtype=torch.long),
        index,
    )


def make_batch(examples: Sequence[Example], src_vocab: Vocab, tgt_vocab: Vocab,
               index: Sequence[int] | None = None) -> Batch:
    """A Batch from Examples directly (index defaults to 0 … len(examples) - 1). Shapes: see Batch."""
    index = range(len(examples)) if index is None else index
    if len(index) != len(examples):
        raise ValueError(f"index has {len(index)} entries, expected one per example = {len(examples)}")
    items = [(int(i), src_vocab[e.src], tgt_vocab[e.tgt]) for i, e in zip(index, examples, strict=True)]
    return collate(items, src_vocab, tgt_vocab)


class TranslationDataset(Dataset):
    """Examples encoded once with their vocabularies; item i is (i, source ids, target ids) (no specials).

    Use `dataset.collate` as a DataLoader's collate_fn, or :func:`bucketed_loader`.
    """

    def __init__(self, examples: Sequence[Example], src_vocab: Vocab, tgt_vocab: Vocab):
        self.examples = list(examples)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self._src = [src_vocab[e.src] for e in self.examples]
        self._tgt = [tgt_vocab[e.tgt] for e in self.examples]

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> tuple[int, list[int], list[int]]:
        return i, self._src[i], self._tgt[i]

    @property
    def lengths(self) -> list[tuple[int, int]]:
        """(source length + 1, target length + 1) of every example: the padded sizes it needs."""
        return [(len(s) + 1, len(t) + 1) for s, t in zip(self._src, self._tgt, strict=True)]

    def collate(self, items) -> Batch:
        return collate(items, self.src_vocab, self.tgt_vocab)


class BucketBatchSampler(Sampler):
    """Batches of similar length: shuffle, cut into pools of `pool_size` batches, sort each pool by length,
    cut it into batches, shuffle the batches. Every example appears exactly once per epoch.

    The shuffle of epoch e depends only on (seed, e); each pass over the sampler starts the next epoch (or
    call set_epoch). shuffle=False: batches of the whole dataset sorted by length, the same every epoch.
    """

    def __init__(self, lengths: Sequence[tuple[int, int]], batch_size: int, *, shuffle: bool = True,
                 seed: int = 0, pool_size: int = 50, drop_last: bool = False):
        for name, value in (("batch_size", batch_size), ("pool_size", pool_size)):
            check_positive_int(name, value)
        self.lengths = list(lengths)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.pool_size, self.drop_last = pool_size, drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _chunks(self, order: list[int]) -> list[list[int]]:
        bs = self.batch_size
        batches = [order[k:k + bs] for k in range(0, len(order), bs)]
        if self.drop_last and batches and len(batches[-1]) < bs:
            batches.pop()
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        key = self.lengths.__getitem__
        if not self.shuffle:
            yield from self._chunks(sorted(range(len(self.lengths)), key=key))
            return
        rng = np.random.default_rng((self.seed, self.epoch))
        self.epoch += 1
        order = rng.permutation(len(self.lengths)).tolist()
        pool = self.pool_size * self.batch_size
        batches = []
        for k in range(0, len(order), pool):
            batches += self._chunks(sorted(order[k:k + pool], key=key))
        for b in rng.permutation(len(batches)).tolist():
            yield batches[b]

    def __len__(self) -> int:
        n, bs = len(self.lengths), self.batch_size
        if not self.shuffle:
            return n // bs if self.drop_last else math.ceil(n / bs)
        full, rest = divmod(n, self.pool_size * bs)  # a full pool makes exactly pool_size batches
        return full * self.pool_size + (rest // bs if self.drop_last else math.ceil(rest / bs))


def bucketed_loader(dataset: TranslationDataset, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                    pool_size: int = 50, drop_last: bool = False, num_workers: int = 0) -> DataLoader:
    """A DataLoader of Batches grouped by length, so that little of each batch is padding.

    Deterministic for a seed (epoch e of two loaders built alike is the same); see BucketBatchSampler.
    """
    if not isinstance(dataset, TranslationDataset):
        raise ValueError(f"dataset must be a TranslationDataset, got {type(dataset).__name__}")
    sampler = BucketBatchSampler(dataset.lengths, batch_size, shuffle=shuffle, seed=seed, pool_size=pool_size,
                                 drop_last=drop_last)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=dataset.collate, num_workers=num_workers)


def padding_waste(batches: Iterable[Batch]) -> float:
    """Fraction of all source and label positions (src, tgt_out) that are padding, over the given batches."""
    padded = total = 0
    for batch in batches:
        total += batch.src.numel() + batch.tgt_out.numel()
        padded += batch.src.numel() - int(batch.src_valid_lens.sum())
        padded += batch.tgt_out.numel() - int(batch.tgt_valid_lens.sum())
    if total == 0:
        raise ValueError("padding_waste needs at least one batch")
    return padded / total


# --------------------------------------------------------------------------------------------- splits, files
class Splits(NamedTuple):
    train: list[Example]
    val: list[Example]
    test: list[Example]


def split(examples: Sequence[Example], fractions: Sequence[float] = (0.8, 0.1, 0.1),
          seed: int = 0) -> Splits:
    """Train/validation/test splits in which no source sentence appears in two splits.

    Exact duplicate pairs are dropped first; the remaining examples are grouped by source sentence (a
    sentence with several translations keeps them all, in one split), the groups are shuffled with `seed`
    and dealt out by `fractions` (of the groups). Each split keeps the corpus order.
    """
    fractions = tuple(fractions)
    if len(fractions) != 3 or any(not 0 <= f <= 1 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be 3 numbers in [0, 1] summing to 1 (train, val, test), "
                         f"got {fractions}")
    groups: dict[tuple, list[int]] = {}
    seen_pairs = set()
    for k, e in enumerate(examples):
        pair = (tuple(e.src), tuple(e.tgt))
        if pair in seen_pairs:
            continue
        seen_pairs.add(pair)
        groups.setdefault(pair[0], []).append(k)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    n_val, n_test = round(fractions[1] * len(keys)), round(fractions[2] * len(keys))
    n_train = len(keys) - n_val - n_test
    parts = (keys[:n_train], keys[n_train:n_train + n_val], keys[n_train + n_val:])
    return Splits(*([examples[k] for k in sorted(k for key in part for k in groups[key])] for part in parts))


def save_corpus(examples: Iterable[Example], path: str | Path) -> None:
    """Write Examples as JSON lines: {"src": [..], "tgt": [..], "sure": [[i, j], ..], "possible": [..]}."""
    with open(path, "w", encoding="utf-8") as f:
        for e in examples:
            record = {"src": e.src, "tgt": e.tgt, "sure": sorted(map(list, e.sure)),
                      "possible": sorted(map(list, e.possible))}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def load_corpus(path: str | Path) -> list[Example]:
    """Read Examples written by save_corpus; a bad line raises ValueError naming its line number."""
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                out.append(Example(record["src"], record["tgt"], {tuple(link) for link in record["sure"]},
                                   {tuple(link) for link in record["possible"]}))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{path}, line {number}: not a saved Example ({err})") from err
    return out


# ------------------------------------------------------------------------------------------ task data
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
        """A length-bucketed DataLoader of `Batch` over `examples`."""
        dataset = TranslationDataset(examples, self.src_vocab, self.tgt_vocab)
        return bucketed_loader(dataset, batch_size, shuffle=shuffle, seed=seed)
