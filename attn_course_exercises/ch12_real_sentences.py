"""Chapter 12's exercises, attention on real sentences: how often one sentence pair's argmax alignment crosses
(ch12.q1), which of a trained model's crossings are reorderings and which are misalignments (ch12.q2), and
the counts that multi-reference BLEU is made of: clipped n-gram matches and the closest reference length
(ch12.q3).

ch12.q1: every case is one sentence pair's attention, shown five ways as in chapter 10 -- [0] as
`attn_course.measure.evaluation.forced_attention` gives it, [1] padded as in a batch (leftovers on the
padding), [2] with every row scaled by its own factor (rows that do not sum to 1, as local-p gives them), [3]
in float16 and [4] in bfloat16 -- and the output is the five counts. The reference is
`attn_course.measure.diagnostics.alignment_crossings`. ch12.q2: every case is one sentence pair with its word
alignment written by hand and an attention matrix: seeded ones whose rows point at a word they translate or,
some of them, at another, and chapter 12's trained Transformer on five test sentences (its cross-attention,
heads averaged, stored in `data/ch12_cross_attention.json`); the output is the crossings, split into
reorderings (both rows on a word they translate) and misalignments. ch12.q3: every case is a handful of
hypotheses, each with 1 to 4 references; the reference is sacrebleu's statistics with the course's settings,
those `attn_course.measure.metrics.multi_reference_bleu` combines into BLEU. Each mistake is written as the
wrong answer that makes it.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from importlib import resources
from numbers import Integral
from typing import Any

import torch
from sacrebleu.metrics import BLEU

from attn_course.measure.metrics import BLEU_SETTINGS
from attn_course_exercises.ch9_dynamics import TENSOR_NUMBER_HINT, no_tensor_numbers
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, edit_of, resolve
from attn_course_exercises.inputs import spec_generator, spec_size

#: What the chapter's exercise cells may use, for the mistakes written as edits of a model answer.
_NAMESPACE = {"math": math, "torch": torch, "Counter": Counter}

# ---------------------------------------------------------------------------------------------- ch12.q1
_VIEWS = ("as given", "padded as in a batch", "rows rescaled", "float16", "bfloat16")
_NAMES = tuple(f"the number of crossings of [{i}] {view}" for i, view in enumerate(_VIEWS))


def _alignment(spec: dict[str, Any], gen: torch.Generator, src_len: int, tgt_len: int) -> list[int]:
    """a_t for every target word: the spec's own list, or a monotone walk through the source with some
    neighbours swapped (adjective and noun) and a word moved far (a verb sent to the end)."""
    if spec["alignment"] != "random":
        aligned = [int(a) for a in spec["alignment"]]
        if len(aligned) != tgt_len or not all(0 <= a < src_len for a in aligned):
            raise ValueError(
                f"alignment must hold {tgt_len} source positions in [0, {src_len}), got {spec['alignment']!r}"
            )
        return aligned
    aligned = [t * src_len // tgt_len for t in range(tgt_len)]
    for t in range(tgt_len - 1):
        if float(torch.rand((), generator=gen)) < 0.35:
            aligned[t], aligned[t + 1] = aligned[t + 1], aligned[t]
    if tgt_len >= 4:
        word = int(torch.randint(0, tgt_len // 2, (), generator=gen))
        aligned.append(aligned.pop(word))
    return aligned


def _row(gen: torch.Generator, width: int, peak: int) -> torch.Tensor:
    """Non-negative weights (width,) whose largest is at `peak`, clear of the others (by 0.15 at least
    before normalising, so that float16 and bfloat16 keep the order), its neighbours a little raised."""
    row = 0.2 * torch.rand(width, generator=gen, dtype=torch.float64)
    for near in (peak - 1, peak + 1):
        if 0 <= near < width:
            row[near] += 0.2 * torch.rand((), generator=gen, dtype=torch.float64)
    row[peak] = row.max() + 0.15 + 0.4 * torch.rand((), generator=gen, dtype=torch.float64)
    return row


def _attention(gen: torch.Generator, aligned: list[int], src_len: int) -> torch.Tensor:
    """Clean weights (tgt_len + 1, src_len + 1) float64, rows summing to 1: row t peaks on a_t among the
    source words, some rows put even more on <eos>; the <eos> row is mostly on <eos>, and its largest weight
    among the words lies left of the rightmost aligned word, so that counting that row changes the answer."""
    rows = []
    for t, a in enumerate(aligned):
        row = torch.cat([_row(gen, src_len, a), 0.1 * torch.rand(1, generator=gen, dtype=torch.float64)])
        if src_len > 1 and (t % 3 == 1 or float(torch.rand((), generator=gen)) < 0.2):
            extra = 0.15 + 0.3 * torch.rand((), generator=gen, dtype=torch.float64)
            row[src_len] = row[:src_len].max() + extra
        rows.append(row)
    last = max(aligned, default=0)
    lure = int(torch.randint(0, max(last, 1), (), generator=gen))
    eos = torch.cat([_row(gen, src_len, lure), torch.zeros(1, dtype=torch.float64)])
    eos[src_len] = eos.sum() + 1.0
    rows.append(eos)
    weights = torch.stack(rows)
    return weights / weights.sum(-1, keepdim=True)


def _padded(clean: torch.Tensor, gen: torch.Generator, extra_rows: int, extra_cols: int) -> torch.Tensor:
    """`clean` in the corner of a batch's larger tensor, as an unmasked softmax leaves it: every row puts
    most of its weight on the first padded column (leftovers), and the padded rows after <eos> peak on
    random source words."""
    steps, keys = clean.shape
    out = torch.zeros(steps + extra_rows, keys + extra_cols, dtype=torch.float64)
    leftover = 0.6 + 0.2 * torch.rand(steps, 1, generator=gen, dtype=torch.float64)
    out[:steps, :keys] = clean * (1 - leftover)
    out[:steps, keys] = leftover[:, 0]
    if extra_cols > 1:
        out[:steps, keys + 1 :] = 0.01 * torch.rand(steps, extra_cols - 1, generator=gen, dtype=torch.float64)
    for r in range(steps, steps + extra_rows):
        peak = int(torch.randint(0, keys - 1, (), generator=gen)) if keys > 1 else 0
        out[r] = _row(gen, keys + extra_cols, peak)
    return out


def _crossings_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    src_len, tgt_len = spec_size(spec, "src_len"), spec_size(spec, "tgt_len")
    aligned = _alignment(spec, gen, src_len, tgt_len)
    clean = _attention(gen, aligned, src_len)
    extra_rows = 1 + int(torch.randint(0, 3, (), generator=gen))
    extra_cols = 1 + int(torch.randint(0, 3, (), generator=gen))
    factors = torch.exp(torch.empty(tgt_len + 1, 1, dtype=torch.float64).uniform_(-3.0, -0.7, generator=gen))
    views = [
        clean.float(),
        _padded(clean, gen, extra_rows, extra_cols).float(),
        (clean * factors).float(),
        clean.half(),
        clean.bfloat16(),
    ]
    label = (
        f"{src_len} source and {tgt_len} target words aligned as a = {aligned}, weights "
        f"{tuple(clean.shape)}; shown five ways: [0] as given, [1] padded as in a batch to "
        f"{tuple(views[1].shape)}, [2] rows rescaled, [3] float16, [4] bfloat16"
    )
    return Case(label, {"views": views, "src_len": src_len, "tgt_len": tgt_len}, spec, _NAMES)


# The mistakes of ch12.q1, each written as a learner writes it; `_pairs` is the count they get right: the
# pairs t1 < t2 with a_t1 > a_t2.
def _pairs(a):
    return sum(a[i] > a[j] for i in range(len(a)) for j in range(i + 1, len(a)))


def crossings_down_the_columns(weights, src_len, tgt_len):
    return _pairs(weights[:tgt_len, :src_len].argmax(dim=0).tolist())


def crossings_rows_shifted(weights, src_len, tgt_len):
    return _pairs(weights[1 : tgt_len + 1, :src_len].argmax(dim=1).tolist())


def crossings_eos_row(weights, src_len, tgt_len):
    return _pairs(weights[: tgt_len + 1, :src_len].argmax(dim=1).tolist())


def crossings_every_row(weights, src_len, tgt_len):
    return _pairs(weights[:, :src_len].argmax(dim=1).tolist())


def crossings_eos_column(weights, src_len, tgt_len):
    return _pairs(weights[:tgt_len, : src_len + 1].argmax(dim=1).tolist())


def crossings_every_column(weights, src_len, tgt_len):
    return _pairs(weights[:tgt_len].argmax(dim=1).tolist())


def crossings_whole_matrix(weights, src_len, tgt_len):
    return _pairs(weights.argmax(dim=1).tolist())


def crossings_tensor_shape(weights, src_len, tgt_len):
    return _pairs(weights[:-1, :-1].argmax(dim=1).tolist())  # drop <eos>


def crossings_tensor_last_row(weights, src_len, tgt_len):
    return _pairs(weights[:-1, :src_len].argmax(dim=1).tolist())


def crossings_tensor_last_column(weights, src_len, tgt_len):
    return _pairs(weights[:tgt_len, :-1].argmax(dim=1).tolist())


def crossings_ties_count(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum(a[i] >= a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))


def crossings_counted_twice(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum((i - j) * (a[i] - a[j]) < 0 for i in range(tgt_len) for j in range(tgt_len))


def crossings_every_distinct_pair(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum(a[i] > a[j] for i in range(tgt_len) for j in range(tgt_len) if i != j)


def crossings_neighbours_only(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(dim=1).tolist()
    return sum(a[t] > a[t + 1] for t in range(tgt_len - 1))


def crossings_as_float(weights, src_len, tgt_len):
    return float(_pairs(weights[:tgt_len, :src_len].argmax(dim=1).tolist()))


def _each_view(count: Callable[[torch.Tensor, int, int], Any]) -> Callable[[dict[str, Any]], Any]:
    """A function of one presentation, applied to all five."""

    def run(inputs: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(count(view, inputs["src_len"], inputs["tgt_len"]) for view in inputs["views"])

    return run


def _crossings_reference(view: torch.Tensor, src_len: int, tgt_len: int) -> int:
    return resolve("attn_course.measure.diagnostics.alignment_crossings")(view, src_len, tgt_len)


def _crossings_call(answer: Any, inputs: dict[str, Any]) -> tuple[Any, ...]:
    """Run the learner's function on every presentation; a count must be a Python int (a float is kept, to be
    named; a tensor or anything else is refused)."""
    results = []
    for view in inputs["views"]:
        result = no_tensor_numbers(answer(view, inputs["src_len"], inputs["tgt_len"]), "crossings")
        if isinstance(result, Integral) and not isinstance(result, bool):
            results.append(int(result))
        elif isinstance(result, float):
            results.append(result)
        else:
            raise TypeError(f"crossings returned {type(result).__name__}, expected a Python int")
    return tuple(results)


_EOS_ROW = (
    "The <eos> row was counted as a target word: row tgt_len is the step that predicts <eos> "
    "(and in [1] the rows after it are padding). Take a_t for the rows t < tgt_len only."
)
_EOS_COLUMN = (
    "The source's <eos> column took part in the argmax: column src_len is <eos>, not a source "
    "word (and in [1] the columns after it are padding). Take each argmax over the columns "
    "i < src_len only."
)
_TENSOR_SHAPE = (
    "In [1], padded as in a batch, `weights` is larger than (tgt_len + 1, src_len + 1): its "
    "last row and column are padding, not <eos>, so dropping the tensor's last row or column "
    "keeps the padding (and <eos>) in. Cut with tgt_len and src_len, not with the tensor's "
    "shape."
)

CROSSINGS = Exercise(
    "ch12.q1",
    "crossings",
    "Words change places: how often a sentence pair's argmax alignment crosses",
    solution='''
def crossings(weights, src_len, tgt_len):
    """The number of crossings of one sentence pair's argmax alignment: the pairs of target words t1 < t2
    with a_t1 > a_t2 (ties are not crossings), where a_t is the source word i < src_len with the largest
    weight in row t. 0 for a monotone alignment; "a red car" -> "une voiture rouge" gives 1.

    weights: (tgt_len + 1, src_len + 1) as forced_attention returns it (row t predicts target word t, the
    last row <eos>; column i is source word i, the last column <eos>), or larger, with padding after those;
    any floating dtype; rows need not sum to 1. src_len, tgt_len: ints >= 1. Returns a Python int.
    """
    aligned = weights[:tgt_len, :src_len].argmax(dim=1).tolist()        # a_t, one per target word
    return sum(aligned[t1] > aligned[t2] for t1 in range(tgt_len) for t2 in range(t1 + 1, tgt_len))
''',
    hint=(
        "Two steps. First one source position per target word: which rows are target words, which "
        "columns are source words, and along which axis does a row pick its word? Then compare the "
        "positions of every pair of target words, each pair once, in the order the French sentence has them.",
        "The argmax alignment and its discordant pairs (Kendall's tau): a_t is the source word i < src_len "
        "with the largest weight in row t < tgt_len -- the <eos> row and column and any padding take no "
        "part -- and a pair t1 < t2 crosses when a_t1 > a_t2. Equal positions do not cross; the padding, the "
        "rows' totals and the dtype change no argmax, so they must not change the count.",
        "Cut the weights with tgt_len and src_len, not with the tensor's shape, take the argmax along the "
        "source axis (one per row) as a list of ints, then count with two loops whose inner one starts at "
        "t1 + 1, comparing with a strict greater-than; return the count as an int.",
    ),
    covers="1 to 12 source and target words; a monotone alignment, an adjective swapped after its noun, a "
    "reversal and random reorderings; several target words on one source word; <eos> as some rows' largest "
    "weight; padding as in a batch; rows that do not sum to 1; float16 and bfloat16",
    defaults={"seed": 0, "src_len": 6, "tgt_len": 7, "alignment": "random"},
    specs=[
        {"seed": 301, "src_len": 3, "tgt_len": 3, "alignment": [0, 2, 1]},
        {"seed": 302, "src_len": 1, "tgt_len": 1, "alignment": [0]},
        {"seed": 303, "src_len": 3, "tgt_len": 5, "alignment": [0, 0, 2, 1, 1]},
        {"seed": 304, "src_len": 7, "tgt_len": 9},
        {"seed": 305, "src_len": 12, "tgt_len": 10},
        {"seed": 306, "src_len": 6, "tgt_len": 6, "alignment": [5, 4, 3, 2, 1, 0]},
        {"seed": 307, "src_len": 5, "tgt_len": 1, "alignment": [3]},
    ],
    build=_crossings_case,
    call=_crossings_call,
    reference=_each_view(_crossings_reference),
    mistakes=[
        Mistake(
            "The argmax ran down the columns: that gives, for each source word, the target word that "
            "looks at it most. a_t is the other way round: for each target word t (a row), the source "
            "word with the largest weight in that row.",
            wrong=crossings_down_the_columns,
        ),
        Mistake(
            "The rows were shifted by one: row t is the step that *predicts* target word t (fed the word "
            "before it), so the first target word's row is row 0 and the last row, tgt_len, predicts "
            "<eos>. Take a_t from the rows 0 to tgt_len - 1.",
            wrong=crossings_rows_shifted,
        ),
        Mistake(_EOS_ROW, wrong=crossings_eos_row),
        Mistake(_EOS_ROW, wrong=crossings_every_row),
        Mistake(_EOS_COLUMN, wrong=crossings_eos_column),
        Mistake(_EOS_COLUMN, wrong=crossings_every_column),
        Mistake(
            "Every row and column of `weights` was used: the last row predicts <eos> and the last column "
            "is the source's <eos> (and in [1] there is padding after them). Take the argmax of the rows "
            "t < tgt_len over the columns i < src_len.",
            wrong=crossings_whole_matrix,
        ),
        Mistake(_TENSOR_SHAPE, wrong=crossings_tensor_shape),
        Mistake(_TENSOR_SHAPE, wrong=crossings_tensor_last_row),
        Mistake(_TENSOR_SHAPE, wrong=crossings_tensor_last_column),
        Mistake(
            "Ties were counted as crossings: two target words on the same source word (a_t1 == a_t2, "
            "as 'les voitures' for 'cars') keep the order. Count only a_t1 > a_t2.",
            wrong=crossings_ties_count,
        ),
        Mistake(
            "Every crossing was counted twice, once as (t1, t2) and once as (t2, t1): count each pair "
            "of target words once, t1 < t2.",
            wrong=crossings_counted_twice,
        ),
        Mistake(
            "You counted every pair of target words on different source words (t1 != t2 with "
            "a_t1 > a_t2): a pair crosses only when the *earlier* target word t1 < t2 looks further "
            "right, so loop over t1 < t2.",
            wrong=crossings_every_distinct_pair,
        ),
        Mistake(
            "Only neighbouring target words were compared (t and t + 1): a crossing is any pair t1 < t2 "
            "with a_t1 > a_t2, however far apart (a word moved to the end crosses every word it jumps "
            "over).",
            wrong=crossings_neighbours_only,
        ),
        Mistake(
            "The count is right but a float: a number of pairs is a Python int.", wrong=crossings_as_float
        ),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(r"expected a Python int", "Return one Python int: the number of crossing pairs."),
        ErrorHint(
            r"unsupported ScalarType BFloat16",
            "NumPy has no bfloat16: take the argmax with torch, or turn the weights into float32 "
            "before calling .numpy().",
        ),
    ],
    package=["attn_course.measure.diagnostics.alignment_crossings"],
    avoid=["attn_course.measure.metrics.attention_to_links"],
)


# ---------------------------------------------------------------------------------------------- ch12.q2
#: Sentence pairs with their word alignment written by hand: English, French, and for each French word the
#: positions of the English words it translates (none for a word French adds, as "le" in "le fromage").
_ALIGNED: tuple[tuple[str, str, tuple[tuple[int, ...], ...]], ...] = (
    ("a red car .", "une voiture rouge .", ((0,), (2,), (1,), (3,))),
    ("he has a white dog .", "il a un chien blanc .", ((0,), (1,), (2,), (4,), (3,), (5,))),
    ("i like cheese .", "j'aime le fromage .", ((0, 1), (), (2,), (3,))),
    ("i saw them .", "je les ai vues .", ((0,), (2,), (1,), (1,), (3,))),
    (
        "i don't care for green tea .",
        "je n'aime pas le thé vert .",
        ((0,), (1, 2), (1,), (5,), (5,), (4,), (6,)),
    ),
    (
        "my brother drives a big red car .",
        "mon frère conduit une grosse voiture rouge .",
        ((0,), (1,), (2,), (3,), (4,), (6,), (5,), (7,)),
    ),
    ("the cat is on the table .", "le chat est sur la table .", ((0,), (1,), (2,), (3,), (4,), (5,), (6,))),
    (
        "tom bought an old house last year .",
        "tom a acheté une vieille maison l'an dernier .",
        ((0,), (1,), (1,), (2,), (3,), (4,), (6,), (5,), (7,)),
    ),
    (
        "we saw a big brown bear in the forest .",
        "nous avons vu un grand ours brun dans la forêt .",
        ((0,), (1,), (1,), (2,), (3,), (5,), (4,), (6,), (7,), (8,), (9,)),
    ),
)
_KIND_NAMES = ("the reorderings", "the misalignments")


def stored_maps() -> list[dict[str, Any]]:
    """Chapter 12's Transformer on five test sentences, as the package data file holds them: dicts with
    "src" and "tgt" (tokens), "translates" (for each target word, the source positions it translates) and
    "weights" ((len(tgt) + 1, len(src) + 1) nested lists); the file's "about" says how they were made."""
    data = resources.files("attn_course_exercises").joinpath("data", "ch12_cross_attention.json")
    return json.loads(data.read_text(encoding="utf-8"))["pairs"]


def _pointed_rows(spec: dict[str, Any], gen: torch.Generator, translates: Any, src_len: int) -> list[int]:
    """a_t for every target word: the spec's own list, or one of the source words the word translates, or
    (with probability spec["wrong"], and always for a word that translates none) another source word."""
    if spec["rows"] != "random":
        rows = [int(a) for a in spec["rows"]]
        if len(rows) != len(translates) or not all(0 <= a < src_len for a in rows):
            raise ValueError(
                f"rows must hold {len(translates)} source positions in [0, {src_len}), got {spec['rows']!r}"
            )
        return rows
    rows = []
    for gold in translates:
        wrong = not gold or float(torch.rand((), generator=gen)) < spec["wrong"]
        choices = [i for i in range(src_len) if i not in gold] if wrong else list(gold)
        rows.append(choices[int(torch.randint(0, len(choices), (), generator=gen))])
    return rows


def _kinds_case(spec: dict[str, Any]) -> Case:
    if spec["real"] is not None:
        pair = stored_maps()[spec["real"]]
        src, tgt, translates = pair["src"], pair["tgt"], pair["translates"]
        weights, made = torch.tensor(pair["weights"], dtype=torch.float32), "chapter 12's Transformer"
        links = sorted((i, t) for t, gold in enumerate(translates) for i in gold)
    else:
        english, french, translates = _ALIGNED[spec["pair"]]
        src, tgt, gen = english.split(), french.split(), spec_generator(spec)
        weights = _attention(gen, _pointed_rows(spec, gen, translates, len(src)), len(src)).float()
        links = [(i, t) for t, gold in enumerate(translates) for i in gold]  # in no particular order
        links = [links[int(k)] for k in torch.randperm(len(links), generator=gen)]
        made = "seeded weights"
    aligned = weights[: len(tgt), : len(src)].argmax(dim=1).tolist()
    rows = ", ".join(f"{tgt[t]} -> {src[a]}" for t, a in enumerate(aligned))
    label = (
        f"'{' '.join(src)}' -> '{' '.join(tgt)}' ({made}), each row's most-attended word: {rows}; "
        f"links {sorted(links)}"
    )
    inputs = {"weights": weights, "src_words": list(src), "tgt_words": list(tgt), "links": links}
    return Case(label, inputs, spec, _KIND_NAMES)


def _kinds_arguments(inputs: dict[str, Any]) -> tuple[Any, ...]:
    return inputs["weights"], inputs["src_words"], inputs["tgt_words"], inputs["links"]


def _as_pairs(part: Any) -> Any:
    """A collection of (t1, t2) pairs (a list, tuple or set, in any order) as a sorted list of int tuples;
    anything else as it is, to be judged."""
    if not isinstance(part, (list, tuple, set, frozenset)):
        return part
    pairs = []
    for pair in part:
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(isinstance(x, Integral) and not isinstance(x, bool) for x in pair)
        ):
            return part
        pairs.append((int(pair[0]), int(pair[1])))
    return sorted(pairs)


def _kinds_call(answer: Any, inputs: dict[str, Any]) -> Any:
    """Run the learner's function; two collections of pairs become two sorted lists (order is not asked)."""
    result = answer(*_kinds_arguments(inputs))
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return tuple(_as_pairs(part) for part in result)
    return result


def _kinds_reference(inputs: dict[str, Any]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The crossings of `attn_course.measure.metrics.attention_to_links`'s argmax alignment (as
    `alignment_crossings` counts them), split by whether both rows are on a gold link."""
    src_len, tgt_len = len(inputs["src_words"]), len(inputs["tgt_words"])
    links = resolve("attn_course.measure.metrics.attention_to_links")(
        inputs["weights"], src_len=src_len, tgt_len=tgt_len
    )
    aligned = {t: i for i, t in links}
    right = {t: (aligned[t], t) in set(inputs["links"]) for t in range(tgt_len)}
    kinds: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
    for t1 in range(tgt_len):
        for t2 in range(t1 + 1, tgt_len):
            if aligned[t1] > aligned[t2]:
                kinds[0 if right[t1] and right[t2] else 1].append((t1, t2))
    return kinds


_KINDS_SOLUTION = '''
def crossing_kinds(weights, src_words, tgt_words, links):
    """The crossings of one sentence pair's argmax alignment, told apart: a reordering when both rows point
    at a word they translate (the two languages put those words in the other order), a misalignment when
    one of them (or both) points at a word it does not translate.

    weights: (len(tgt_words) + 1, len(src_words) + 1) as forced_attention returns it (row t predicts target
    word t, the last row <eos>; column i is source word i, the last column <eos>). src_words, tgt_words:
    the tokens, without <eos>. links: the gold word alignment, a list of (i, t) pairs in no particular
    order, source word i translated by target word t; a target word may have several links, or none.
    a_t is the source word i < len(src_words) with the largest weight in row t; row t is right when
    (a_t, t) is a link. Returns (reorderings, misalignments): two lists of pairs (t1, t2) with t1 < t2 and
    a_t1 > a_t2, every crossing in exactly one of them.
    """
    src_len, tgt_len = len(src_words), len(tgt_words)
    aligned = weights[:tgt_len, :src_len].argmax(dim=1).tolist()        # a_t, one per target word
    gold = set(links)
    right = [(aligned[t], t) in gold for t in range(tgt_len)]           # row t on a word it translates?
    reorderings, misalignments = [], []
    for t1 in range(tgt_len):
        for t2 in range(t1 + 1, tgt_len):
            if aligned[t1] > aligned[t2]:                                 # a crossing
                kind = reorderings if right[t1] and right[t2] else misalignments
                kind.append((t1, t2))
    return reorderings, misalignments
'''


def _kinds_edit(rename: str, *edits: tuple[str, str]) -> Callable[..., Any]:
    return edit_of(_KINDS_SOLUTION, "crossing_kinds", *edits, namespace=_NAMESPACE, rename=rename)


# The mistakes of ch12.q2, each the wrong code a learner writes: most a few characters of the model answer.
kinds_one_right_row_enough = _kinds_edit(
    "kinds_one_right_row_enough", ("right[t1] and right[t2]", "right[t1] or right[t2]")
)
kinds_earlier_row_only = _kinds_edit("kinds_earlier_row_only", ("right[t1] and right[t2]", "right[t1]"))
kinds_later_row_only = _kinds_edit("kinds_later_row_only", ("right[t1] and right[t2]", "right[t2]"))
kinds_swapped = _kinds_edit(
    "kinds_swapped",
    ("kind = reorderings if", "kind = misalignments if"),
    ("else misalignments", "else reorderings"),
)
kinds_links_read_backwards = _kinds_edit(
    "kinds_links_read_backwards", ("(aligned[t], t) in gold", "(t, aligned[t]) in gold")
)
kinds_eos_column = _kinds_edit("kinds_eos_column", ("weights[:tgt_len, :src_len]", "weights[:tgt_len]"))
kinds_eos_row = _kinds_edit(
    "kinds_eos_row", ("len(src_words), len(tgt_words)", "len(src_words), len(tgt_words) + 1")
)
kinds_whole_matrix = _kinds_edit(
    "kinds_whole_matrix",
    ("len(src_words), len(tgt_words)", "len(src_words), len(tgt_words) + 1"),
    ("weights[:tgt_len, :src_len]", "weights[:tgt_len]"),
)
kinds_ties_cross = _kinds_edit(
    "kinds_ties_cross", ("if aligned[t1] > aligned[t2]:", "if aligned[t1] >= aligned[t2]:")
)
kinds_neighbours_only = _kinds_edit(
    "kinds_neighbours_only", ("range(t1 + 1, tgt_len)", "range(t1 + 1, min(t1 + 2, tgt_len))")
)
kinds_source_positions = _kinds_edit(
    "kinds_source_positions", ("kind.append((t1, t2))", "kind.append((aligned[t1], aligned[t2]))")
)
kinds_counted = _kinds_edit(
    "kinds_counted", ("return reorderings, misalignments", "return len(reorderings), len(misalignments)")
)


# The helpers are the parts the answers below get right: a_t, the crossings, and splitting them by two rows.
def _aligned(weights, src_words, tgt_words):
    return weights[: len(tgt_words), : len(src_words)].argmax(dim=1).tolist()


def _crossed(aligned):
    return [
        (t1, t2)
        for t1 in range(len(aligned))
        for t2 in range(t1 + 1, len(aligned))
        if aligned[t1] > aligned[t2]
    ]


def _split(crossed, right):
    return (
        [(t1, t2) for t1, t2 in crossed if right[t1] and right[t2]],
        [(t1, t2) for t1, t2 in crossed if not (right[t1] and right[t2])],
    )


def kinds_one_link_per_word(weights, src_words, tgt_words, links):
    aligned = _aligned(weights, src_words, tgt_words)
    translation = {t: i for i, t in links}  # one source word per target word
    return _split(_crossed(aligned), [translation.get(t) == a for t, a in enumerate(aligned)])


def kinds_same_word(weights, src_words, tgt_words, links):
    aligned = _aligned(weights, src_words, tgt_words)
    words = [{src_words[i] for i, u in links if u == t} for t in range(len(tgt_words))]
    return _split(_crossed(aligned), [src_words[a] in words[t] for t, a in enumerate(aligned)])


def kinds_where_the_links_cross(weights, src_words, tgt_words, links):
    reorderings, misalignments = [], []
    for t1, t2 in _crossed(_aligned(weights, src_words, tgt_words)):
        moved = any(i1 > i2 for i1, u1 in links for i2, u2 in links if (u1, u2) == (t1, t2))
        (reorderings if moved else misalignments).append((t1, t2))
    return reorderings, misalignments


def kinds_unsure_rows(weights, src_words, tgt_words, links):
    best = weights[: len(tgt_words), : len(src_words)].max(dim=1)
    return _split(_crossed(best.indices.tolist()), (best.values >= 0.5).tolist())


def kinds_off_the_diagonal(weights, src_words, tgt_words, links):
    aligned = _aligned(weights, src_words, tgt_words)
    return _split(_crossed(aligned), [a == t for t, a in enumerate(aligned)])


def kinds_all_crossings_reorderings(weights, src_words, tgt_words, links):
    aligned = _aligned(weights, src_words, tgt_words)
    crossed = _crossed(aligned)
    return crossed, _split(crossed, [(a, t) in set(links) for t, a in enumerate(aligned)])[1]


def kinds_down_the_columns(weights, src_words, tgt_words, links):
    aligned = weights[: len(tgt_words), : len(src_words)].argmax(dim=0).tolist()  # one per source word
    return _split(_crossed(aligned), [(a, t) in set(links) for t, a in enumerate(aligned)])


def kinds_down_the_columns_as_links(weights, src_words, tgt_words, links):
    best = weights[: len(tgt_words), : len(src_words)].argmax(dim=0).tolist()  # a target word per column
    return _split(_crossed(best), [(i, t) in set(links) for i, t in enumerate(best)])


def kinds_wrong_rows(weights, src_words, tgt_words, links):
    aligned = _aligned(weights, src_words, tgt_words)
    right = [(a, t) in set(links) for t, a in enumerate(aligned)]
    return _split(_crossed(aligned), right)[0], [t for t, ok in enumerate(right) if not ok]


_BOTH_ROWS = (
    "A crossing is a reordering only when *both* of its rows point at a word they translate, "
    "(a_t1, t1) and (a_t2, t2) both gold links: then the two languages really put those words in "
    "the other order. One row off its word is enough for the crossing to come from that row alone: "
    "a misalignment."
)
_EOS_ROW = (
    "The <eos> row was counted as a target word: the last row is the step that predicts <eos>. The "
    "target words are the rows t < len(tgt_words)."
)
_EOS_COLUMN = (
    "The source's <eos> column took part in the argmax: the last column is <eos>, not a source word (no "
    "link names it). Take a_t over the columns i < len(src_words) only."
)
_DOWN_THE_COLUMNS = (
    "The argmax ran down the columns: a_t is, for each target word t (a row), the source word with the "
    "largest weight in that row."
)

CROSSING_KINDS = Exercise(
    "ch12.q2",
    "crossing_kinds",
    "Reordering or misalignment? Reading a trained model's crossings",
    solution=_KINDS_SOLUTION,
    hint=(
        "Start from Q1's alignment, one source word per target word. Then ask one question of each row -- is "
        "it on a word its target word translates? -- and, for every crossing, of both of its rows.",
        "A row is right when its most-attended source word is one that its target word translates: the "
        "link (a_t, t), source position first, is among the gold links (by position: the other 'the' of a "
        "sentence is another word). A crossing shows a real change of word order only when both of its "
        "rows are right; if either row is off its word, the crossing can come from that row alone, so it is "
        "a misalignment. Every crossing goes in exactly one of the two lists.",
        "Make a set of the links once and mark each row t < len(tgt_words) right or wrong by looking up "
        "the tuple (a_t, t) in it; then, in Q1's double loop over t1 < t2 with a strict a_t1 > a_t2, append "
        "(t1, t2) to the reorderings when both rows are right and to the misalignments otherwise.",
    ),
    covers="seeded sentence pairs of 4 to 11 words with links written by hand: several links for one word, "
    "none for a word French adds, a word that occurs twice; rows on a word they translate or on another; "
    "<eos> as some rows' largest weight; chapter 12's trained Transformer on five test sentences",
    defaults={"seed": 0, "pair": 0, "rows": "random", "wrong": 0.35, "real": None},
    specs=[
        {"seed": 321, "pair": 0, "rows": [0, 2, 1, 3]},  # une voiture rouge: one reordering
        {"seed": 322, "pair": 0, "rows": [0, 3, 1, 3]},  # voiture on '.': a misalignment
        {"seed": 323, "pair": 6, "rows": [0, 1, 2, 3, 0, 5, 6]},  # la on the first 'the'
        {"seed": 324, "pair": 4, "rows": [0, 2, 1, 5, 5, 4, 6]},  # n'aime on its second word, 'care'
        {"seed": 325, "pair": 2, "rows": [1, 3, 2, 3]},  # le translates no word
        {"seed": 326, "pair": 7},
        {"seed": 327, "pair": 8},
        {"seed": 328, "pair": 5, "wrong": 0.5},
        {"seed": 329, "pair": 3},
        {"real": 0},
        {"real": 1},
        {"real": 2},
        {"real": 3},
        {"real": 4},
    ],
    build=_kinds_case,
    call=_kinds_call,
    reference=_kinds_reference,
    mistakes=[
        Mistake(_BOTH_ROWS, wrong=kinds_one_right_row_enough),
        Mistake(_BOTH_ROWS, wrong=kinds_earlier_row_only),
        Mistake(_BOTH_ROWS, wrong=kinds_later_row_only),
        Mistake(
            "The two lists are swapped: return (reorderings, misalignments), the reorderings (both rows "
            "on a word they translate) first.",
            wrong=kinds_swapped,
        ),
        Mistake(
            "The links were read the other way round: a link is (i, t), the source position first and "
            "the target word second, as chapter 4's gold links (src_index, tgt_index); row t is right "
            "when (a_t, t) is one.",
            wrong=kinds_links_read_backwards,
        ),
        Mistake(
            "Only one link was kept for each target word (a dict from target word to source word): a "
            "word may translate several source words (n'aime: don't and care) and is right on any of "
            "them. Keep every link, e.g. in a set of (i, t) pairs.",
            wrong=kinds_one_link_per_word,
        ),
        Mistake(
            "Rows were compared by word, not by position: a row on the other occurrence of the same word "
            "(la on the first 'the' of 'the cat is on the table') is not on the word it translates. "
            "Look up the positions, (a_t, t), among the links.",
            wrong=kinds_same_word,
        ),
        Mistake(
            "You asked whether the gold links cross, not where the rows point: a crossing is a "
            "reordering only when both rows are on words they translate, whatever the gold "
            "alignment does elsewhere; a row off its word makes the crossing a misalignment.",
            wrong=kinds_where_the_links_cross,
        ),
        Mistake(
            "A row's certainty is not its correctness: a row is misaligned when its most-attended word "
            "is not one it translates, which only the links can say, however large or small its weight.",
            wrong=kinds_unsure_rows,
        ),
        Mistake(
            "Off the diagonal is not misaligned: a_t == t only holds where the two sentences match word "
            "for word. Whether row t is right is for the links to say: (a_t, t) among them.",
            wrong=kinds_off_the_diagonal,
        ),
        Mistake(
            "Every crossing went in the reorderings and the misaligned ones in both lists: each crossing "
            "is exactly one of the two, a reordering or a misalignment.",
            wrong=kinds_all_crossings_reorderings,
        ),
        Mistake(
            "The second list holds the wrong rows, not crossings: return the crossing pairs (t1, t2) "
            "that have a wrong row, not the rows themselves.",
            wrong=kinds_wrong_rows,
        ),
        Mistake(_EOS_COLUMN, wrong=kinds_eos_column),
        Mistake(_EOS_ROW, wrong=kinds_eos_row),
        Mistake(
            "Every row and column of `weights` was used: the last row predicts <eos> and the last column is "
            "the source's <eos>. Take the argmax of the rows t < len(tgt_words) over the columns "
            "i < len(src_words).",
            wrong=kinds_whole_matrix,
        ),
        Mistake(
            "Ties were counted as crossings: two target words on the same source word keep the order. "
            "Only a_t1 > a_t2 crosses.",
            wrong=kinds_ties_cross,
        ),
        Mistake(
            "Only neighbouring target words were compared: a crossing is any pair t1 < t2 with "
            "a_t1 > a_t2, however far apart.",
            wrong=kinds_neighbours_only,
        ),
        Mistake(
            "The pairs hold source positions (a_t1, a_t2): give the target words' positions (t1, t2), "
            "the rows that cross.",
            wrong=kinds_source_positions,
        ),
        Mistake(
            "Return the crossing pairs themselves, two lists of (t1, t2), not how many there are.",
            wrong=kinds_counted,
        ),
        Mistake(_DOWN_THE_COLUMNS, wrong=kinds_down_the_columns),
        Mistake(_DOWN_THE_COLUMNS, wrong=kinds_down_the_columns_as_links),
    ],
    error_hints=[
        ErrorHint(
            r"KeyError",
            "A target word with no link raised a KeyError: a word French adds ('le' in 'le fromage') "
            "translates no source word, so it has no link at all and its row is never right. Look up "
            "the pair (a_t, t) in a set of the links rather than a dict with an entry per word.",
        ),
        ErrorHint(
            r"IndexError",
            "An index ran past a sentence: the <eos> row or the <eos> column took part. The target words "
            "are the rows t < len(tgt_words), the source words the columns i < len(src_words).",
        ),
        ErrorHint(
            r"unhashable type: 'list'",
            "A link is a tuple (i, t): look up a tuple, not a list, in a set of links.",
        ),
    ],
)


# ---------------------------------------------------------------------------------------------- ch12.q3
#: English sentences with their French translations, tokenised as `attn_course.data.tatoeba` does (lower case,
#: punctuation apart, apostrophes and hyphens inside words). Several are right as Tatoeba has them.
_POOL: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("go !", ("va !", "allez !", "file !")),
    ("hello !", ("bonjour !", "salut !")),
    ("i won !", ("j'ai gagné !", "je l'ai emporté !")),
    ("be nice .", ("sois gentil !", "soyez gentil !", "sois gentille !", "soyez gentille !")),
    ("we tried .", ("nous avons essayé .", "on a essayé .")),
    ("a red car .", ("une voiture rouge .",)),
    ("is it true ?", ("est-ce vrai ?", "c'est vrai ?", "est-ce que c'est vrai ?")),
    ("i like cheese .", ("j'aime le fromage .",)),
    ("the cat is black .", ("le chat est noir .",)),
    ("i need a car .", ("j'ai besoin d'une voiture .", "il me faut une voiture .")),
    ("where is the station ?", ("où est la gare ?", "où se trouve la gare ?")),
    ("i bought a new car .", ("j'ai acheté une nouvelle voiture .", "j'ai acheté une voiture neuve .")),
    ("he has a white dog .", ("il a un chien blanc .",)),
    (
        "do you want to dance ?",
        ("veux-tu danser ?", "voulez-vous danser ?", "tu veux danser ?", "est-ce que tu veux danser ?"),
    ),
    ("she wears a long white dress .", ("elle porte une longue robe blanche .",)),
    ("we are going to eat now .", ("nous allons manger maintenant .", "on va manger maintenant .")),
    ("the little girl has a black cat .", ("la petite fille a un chat noir .",)),
    (
        "my brother drives a big red car .",
        ("mon frère conduit une grosse voiture rouge .", "mon frère conduit une grande voiture rouge ."),
    ),
    (
        "can you help me carry this box ?",
        (
            "peux-tu m'aider à porter cette boîte ?",
            "pouvez-vous m'aider à porter cette boîte ?",
            "tu peux m'aider à porter cette boîte ?",
        ),
    ),
    (
        "tom bought an old house last year .",
        (
            "tom a acheté une vieille maison l'an dernier .",
            "tom a acheté une vieille maison l'année dernière .",
        ),
    ),
    (
        "i have never seen a red fox before .",
        ("je n'ai jamais vu de renard roux auparavant .", "je n'avais jamais vu de renard roux ."),
    ),
    (
        "i think tom will tell you the truth .",
        (
            "je pense que tom te dira la vérité .",
            "je pense que tom vous dira la vérité .",
            "je crois que tom te dira la vérité .",
            "je crois que tom vous dira la vérité .",
        ),
    ),
    (
        "we ate a delicious french meal in paris .",
        (
            "nous avons mangé un délicieux repas français à paris .",
            "on a mangé un délicieux repas français à paris .",
        ),
    ),
    ("my sister bought a pretty green hat yesterday .", ("ma sœur a acheté un joli chapeau vert hier .",)),
    (
        "we saw a big brown bear in the forest .",
        ("nous avons vu un grand ours brun dans la forêt .", "on a vu un gros ours brun dans la forêt ."),
    ),
    (
        "the students read a long book about french history .",
        ("les étudiants ont lu un long livre sur l'histoire de france .",),
    ),
    (
        "she lives in a small house near the big river .",
        (
            "elle vit dans une petite maison près du grand fleuve .",
            "elle habite une petite maison près du grand fleuve .",
        ),
    ),
    (
        "the children are playing in the garden with the dog .",
        ("les enfants jouent dans le jardin avec le chien .",),
    ),
    (
        "the old man sat on a green bench in the park .",
        (
            "le vieil homme s'est assis sur un banc vert dans le parc .",
            "le vieil homme s'assit sur un banc vert dans le parc .",
        ),
    ),
    (
        "i would like to buy a white shirt for my father .",
        (
            "j'aimerais acheter une chemise blanche pour mon père .",
            "je voudrais acheter une chemise blanche pour mon père .",
            "j'aimerais acheter une chemise blanche à mon père .",
        ),
    ),
    (
        "they have been waiting for the last train since noon .",
        ("ils attendent le dernier train depuis midi .", "elles attendent le dernier train depuis midi ."),
    ),
    (
        "do you know the name of the girl in the red dress ?",
        (
            "connais-tu le nom de la fille à la robe rouge ?",
            "connaissez-vous le nom de la fille à la robe rouge ?",
            "sais-tu comment s'appelle la fille en robe rouge ?",
        ),
    ),
)
_FILLERS = ("le", "un", "très", "est", "maison", "voiture", "et", "pas")


def _edited(reference: list[str], gen: torch.Generator, cut: bool) -> list[str]:
    """A hypothesis made from a reference by 0 to 2 seeded edits: a word dropped, two neighbours swapped,
    a word replaced or repeated; `cut`: only its first two words, as a decoder that stopped too early."""
    words = list(reference)
    for _ in range(int(torch.randint(0, 3, (), generator=gen))):
        edit, at = (
            int(torch.randint(0, 4, (), generator=gen)),
            int(torch.randint(0, len(words), (), generator=gen)),
        )
        if edit == 0 and len(words) > 2:
            del words[at]
        elif edit == 1 and at + 1 < len(words):
            words[at], words[at + 1] = words[at + 1], words[at]
        elif edit == 2:
            words[at] = _FILLERS[int(torch.randint(0, len(_FILLERS), (), generator=gen))]
        else:
            words.insert(at, words[at])
    return list(reference[:2]) if cut else words


_STAT_NAMES = (
    "the clipped matches",
    "the n-gram totals",
    "the hypothesis length c",
    "the reference length r",
)


def _pool_sentences(spec: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """spec["num_sentences"] sentences of `_POOL` (only those with several translations if spec["several"]),
    each hypothesis made from one of its references, often not the first, by seeded edits."""
    gen = spec_generator(spec)
    pool = [[f.split() for f in french] for _, french in _POOL if not spec["several"] or len(french) > 1]
    sentences = []
    chosen = torch.randint(0, len(pool), (spec_size(spec, "num_sentences"),), generator=gen)
    for n, index in enumerate(chosen):
        references = pool[int(index)]
        source = references[int(torch.randint(0, len(references), (), generator=gen))]
        sentences.append((_edited(source, gen, n in spec["cut"]), references))
    return sentences


def _statistics_case(spec: dict[str, Any]) -> Case:
    if spec["sentences"] == "random":
        sentences = _pool_sentences(spec)
    else:
        sentences = [
            (hypothesis.split(), [r.split() for r in references])
            for hypothesis, references in spec["sentences"]
        ]
    if not sentences or not all(references for _, references in sentences):
        raise ValueError(f"sentences must be a non-empty list of (hypothesis, references), got {sentences!r}")
    shown = "; ".join(
        f"'{' '.join(h)}' against " + " | ".join(f"'{' '.join(r)}'" for r in refs) for h, refs in sentences
    )
    inputs = {"hypotheses": [h for h, _ in sentences], "reference_sets": [refs for _, refs in sentences]}
    return Case(f"{len(sentences)} hypotheses: {shown}", inputs, spec, _STAT_NAMES)


def _statistics_call(answer: Any, inputs: dict[str, Any]) -> Any:
    """Run the learner's function; a count must be a Python number, not a tensor."""
    return no_tensor_numbers(answer(inputs["hypotheses"], inputs["reference_sets"]), "bleu_statistics")


def _statistics_reference(inputs: dict[str, Any]) -> tuple[list[int], list[int], int, int]:
    """sacrebleu's statistics with the course's settings (`BLEU_SETTINGS`), those behind
    `attn_course.measure.metrics.multi_reference_bleu`, added up sentence by sentence."""
    scorer = BLEU(**dict(BLEU_SETTINGS, effective_order=True))  # effective_order changes no count
    matches, totals, hyp_length, ref_length = [0] * 4, [0] * 4, 0, 0
    for hypothesis, references in zip(inputs["hypotheses"], inputs["reference_sets"], strict=True):
        stats = scorer.sentence_score(" ".join(hypothesis), [" ".join(r) for r in references])
        matches = [m + c for m, c in zip(matches, stats.counts, strict=True)]
        totals = [m + c for m, c in zip(totals, stats.totals, strict=True)]
        hyp_length, ref_length = hyp_length + stats.sys_len, ref_length + stats.ref_len
    return matches, totals, hyp_length, ref_length


_STATISTICS_SOLUTION = '''
from collections import Counter


def bleu_statistics(hypotheses, reference_sets):
    """The counts corpus BLEU is made of, each hypothesis against all of its references (Papineni et al.
    2002, sec. 2.1 and 2.2.2): for n = 1..4 the clipped n-gram matches and the hypotheses' n-grams, and
    the lengths c and r of the brevity penalty. Then p_n = matches[n - 1] / totals[n - 1] and
    BP = min(1, exp(1 - r / c)).

    hypotheses[i]: a list of str tokens; reference_sets[i]: a non-empty list of such token lists, every
    accepted translation of sentence i. An n-gram of a hypothesis is matched at most as often as it occurs
    in the one reference that has it most; r adds up, sentence by sentence, the reference length closest
    to the hypothesis's, the shorter of two equally close. Returns (matches, totals, hyp_length, ref_length):
    two lists of 4 Python ints, then two ints.
    """
    matches, totals, hyp_length, ref_length = [0] * 4, [0] * 4, 0, 0
    for hypothesis, references in zip(hypotheses, reference_sets, strict=True):
        for n in range(1, 5):
            counts = Counter(tuple(hypothesis[i : i + n]) for i in range(len(hypothesis) - n + 1))
            most = Counter()                       # each n-gram's count in the reference that has it most
            for reference in references:
                found = Counter(tuple(reference[i : i + n]) for i in range(len(reference) - n + 1))
                for gram, count in found.items():
                    most[gram] = max(most[gram], count)
            matches[n - 1] += sum(min(count, most[gram]) for gram, count in counts.items())   # clipped
            totals[n - 1] += sum(counts.values())
        hyp_length += len(hypothesis)
        lengths = [len(reference) for reference in references]
        ref_length += min(lengths, key=lambda length: (abs(length - len(hypothesis)), length))
    return matches, totals, hyp_length, ref_length
'''
_CLOSEST_CODE = "min(lengths, key=lambda length: (abs(length - len(hypothesis)), length))"


def _statistics_edit(rename: str, *edits: tuple[str, str]) -> Callable[..., Any]:
    return edit_of(_STATISTICS_SOLUTION, "bleu_statistics", *edits, namespace=_NAMESPACE, rename=rename)


# The mistakes of ch12.q3, each the wrong code a learner writes: most a few characters of the model answer.
statistics_first_reference_clips = _statistics_edit(
    "statistics_first_reference_clips", ("for reference in references:", "for reference in references[:1]:")
)
statistics_sum_clips = _statistics_edit(
    "statistics_sum_clips", ("most[gram] = max(most[gram], count)", "most[gram] = most[gram] + count")
)
statistics_not_clipped = _statistics_edit(
    "statistics_not_clipped", ("min(count, most[gram])", "(count if most[gram] else 0)")
)
statistics_longest_reference = _statistics_edit(
    "statistics_longest_reference", (_CLOSEST_CODE, "max(lengths)")
)
statistics_shortest_reference = _statistics_edit(
    "statistics_shortest_reference", (_CLOSEST_CODE, "min(lengths)")
)
statistics_mean_reference = _statistics_edit(
    "statistics_mean_reference", (_CLOSEST_CODE, "sum(lengths) / len(lengths)")
)
statistics_first_reference_length = _statistics_edit(
    "statistics_first_reference_length", (_CLOSEST_CODE, "lengths[0]")
)
statistics_ties_to_the_longer = _statistics_edit(
    "statistics_ties_to_the_longer",
    ("(abs(length - len(hypothesis)), length)", "(abs(length - len(hypothesis)), -length)"),
)
statistics_ties_to_the_first = _statistics_edit(
    "statistics_ties_to_the_first",
    (
        "key=lambda length: (abs(length - len(hypothesis)), length)",
        "key=lambda length: abs(length - len(hypothesis))",
    ),
)
statistics_distinct_totals = _statistics_edit(
    "statistics_distinct_totals", ("totals[n - 1] += sum(counts.values())", "totals[n - 1] += len(counts)")
)
statistics_length_totals = _statistics_edit(
    "statistics_length_totals", ("totals[n - 1] += sum(counts.values())", "totals[n - 1] += len(hypothesis)")
)
statistics_orders_from_zero = _statistics_edit(
    "statistics_orders_from_zero",
    ("for n in range(1, 5):", "for n in range(4):"),
    ("matches[n - 1] +=", "matches[n] +="),
    ("totals[n - 1] +=", "totals[n] +="),
)
statistics_length_per_order = _statistics_edit(
    "statistics_length_per_order",
    ("        hyp_length += len(hypothesis)", "            hyp_length += len(hypothesis)"),
)
statistics_precisions = _statistics_edit(
    "statistics_precisions",
    ("return matches, totals", "return [m / t if t else 0.0 for m, t in zip(matches, totals)], totals"),
)
statistics_of_characters = _statistics_edit(
    "statistics_of_characters",
    (
        "zip(hypotheses, reference_sets, strict=True)",
        "zip([' '.join(h) for h in hypotheses],\n"
        "        [[' '.join(r) for r in rs] for rs in reference_sets], strict=True)",
    ),
)


def _ngrams(words, n):
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def _closest(lengths, length):
    return min(lengths, key=lambda x: (abs(x - length), x))


def statistics_least_clips(hypotheses, reference_sets):
    matches, totals, hyp_length, ref_length = [0] * 4, [0] * 4, 0, 0
    for hypothesis, references in zip(hypotheses, reference_sets, strict=True):
        for n in range(1, 5):
            counts, least = _ngrams(hypothesis, n), None
            for reference in references:
                found = _ngrams(reference, n)
                least = found if least is None else least & found  # Counter's & keeps the smaller count
            matches[n - 1] += sum(min(count, least[gram]) for gram, count in counts.items())
            totals[n - 1] += sum(counts.values())
        hyp_length += len(hypothesis)
        ref_length += _closest([len(r) for r in references], len(hypothesis))
    return matches, totals, hyp_length, ref_length


def statistics_each_reference_matched(hypotheses, reference_sets):
    matches, totals, hyp_length, ref_length = [0] * 4, [0] * 4, 0, 0
    for hypothesis, references in zip(hypotheses, reference_sets, strict=True):
        for n in range(1, 5):
            counts = _ngrams(hypothesis, n)
            for reference in references:
                found = _ngrams(reference, n)
                matches[n - 1] += sum(min(count, found[gram]) for gram, count in counts.items())
            totals[n - 1] += sum(counts.values())
        hyp_length += len(hypothesis)
        ref_length += _closest([len(r) for r in references], len(hypothesis))
    return matches, totals, hyp_length, ref_length


def statistics_references_pooled(hypotheses, reference_sets):
    matches, totals, hyp_length, ref_length = [0] * 4, [0] * 4, 0, 0
    for n in range(1, 5):
        most = Counter()
        for references in reference_sets:
            for reference in references:
                most |= _ngrams(reference, n)  # Counter's | keeps the larger count
        for hypothesis in hypotheses:
            counts = _ngrams(hypothesis, n)
            matches[n - 1] += sum(min(count, most[gram]) for gram, count in counts.items())
            totals[n - 1] += sum(counts.values())
    for hypothesis, references in zip(hypotheses, reference_sets, strict=True):
        hyp_length += len(hypothesis)
        ref_length += _closest([len(r) for r in references], len(hypothesis))
    return matches, totals, hyp_length, ref_length


_CLOSEST = (
    "the brevity penalty's r is, sentence by sentence, the length of the reference closest to the "
    "hypothesis's length (the shorter of two equally close), added up over the corpus"
)

BLEU_STATISTICS = Exercise(
    "ch12.q3",
    "bleu_statistics",
    "Several right answers: what multi-reference BLEU counts",
    solution=_STATISTICS_SOLUTION,
    hint=(
        "Work sentence by sentence and add up: for each n from 1 to 4, how many of the hypothesis's n-grams "
        "there are and how many of them a reference vouches for; then one length for the hypothesis and one "
        "for its references.",
        "Papineni et al.'s modified precision: an n-gram of the hypothesis counts at most as often as it "
        "occurs in the single reference that has it most (the maximum over the references: not their sum, "
        "not the first one alone), so repeating a right word earns nothing more. The brevity penalty's r is, "
        "per sentence, the reference length closest to the hypothesis's, the shorter of two equally close; "
        "c and r are added up over the corpus.",
        "For each n, count the hypothesis's n-grams (tuples of tokens) and, for each n-gram, its largest "
        "count in any one reference; add the smaller of the two counts to matches[n - 1] and every n-gram of "
        "the hypothesis to totals[n - 1]. For r, take the minimum of the reference lengths under the key "
        "(distance to the hypothesis's length, length).",
    ),
    covers="1 to 6 hypotheses with 1 to 4 references each: repeated words, hypotheses that are another "
    "reference than the first, reference lengths equally close on either side and listed either way, "
    "hypotheses shorter than 4 tokens",
    defaults={"seed": 0, "sentences": "random", "num_sentences": 6, "several": False, "cut": []},
    specs=[
        {
            "seed": 331,
            "sentences": [
                ["le le le le chat .", ["le chat .", "le le chat noir .", "un chat ."]],
                ["il pleut il pleut .", ["il pleut .", "il pleut encore ."]],
                ["le chien est noir .", ["le chien est brun ."]],
                [
                    "on a mangé un très bon repas .",
                    ["nous avons mangé un très bon repas .", "on a mangé un très bon repas ."],
                ],
            ],
        },
        {
            "seed": 332,
            "sentences": [
                ["je ne sais pas .", ["je sais pas .", "je ne le sais pas ."]],
                ["il fait très froid ici .", ["il fait vraiment très froid ici .", "il fait froid ici ."]],
                [
                    "elle a un chat noir et blanc .",
                    [
                        "elle a un chat noir .",
                        "elle a un petit chat noir et blanc , très mignon .",
                        "elle a un chat noir et tout blanc .",
                        "elle a un chat .",
                    ],
                ],
            ],
        },
        {"seed": 333},
        {"seed": 334, "several": True, "num_sentences": 5},
        {"seed": 335, "several": True, "num_sentences": 4, "cut": [1]},
        {"seed": 336, "num_sentences": 1},
    ],
    build=_statistics_case,
    call=_statistics_call,
    reference=_statistics_reference,
    mistakes=[
        Mistake(
            "Only the first reference clipped the matches: an n-gram of the hypothesis counts up to its "
            "largest count in *any one* of its references (the max over them), so a translation that is "
            "another accepted one keeps its n-grams.",
            wrong=statistics_first_reference_clips,
        ),
        Mistake(
            "The references' counts were added up: an n-gram is matched at most as often as it occurs in "
            "the single reference that has it most (the max over the references, not their sum), or a "
            "repeated word would earn a match from every reference that holds it once.",
            wrong=statistics_sum_clips,
        ),
        Mistake(
            "Each reference was matched on its own and the matches summed: a use of an n-gram is matched "
            "once at most, against the reference that has it most (the max over the references), not "
            "once per reference.",
            wrong=statistics_each_reference_matched,
        ),
        Mistake(
            "The matches were not clipped: an n-gram found in a reference counted every time the "
            "hypothesis repeats it, so 'le le le le' would match every 'le'. Count it at most as often "
            "as the reference that has it most holds it.",
            wrong=statistics_not_clipped,
        ),
        Mistake(
            "The smallest count over the references clipped the matches, so an n-gram missing from one "
            "reference counted nothing: take its largest count in any one reference (the max).",
            wrong=statistics_least_clips,
        ),
        Mistake(
            "The references of every sentence were pooled: each hypothesis is clipped against its own "
            "references only (a word of another sentence's translation does not make it right).",
            wrong=statistics_references_pooled,
        ),
        Mistake(f"r was the longest reference's length: {_CLOSEST}.", wrong=statistics_longest_reference),
        Mistake(
            f"r was the shortest reference's length (a distance without abs picks it too): {_CLOSEST}.",
            wrong=statistics_shortest_reference,
        ),
        Mistake(
            f"r was the average of the references' lengths: {_CLOSEST}.", wrong=statistics_mean_reference
        ),
        Mistake(f"r was the first reference's length: {_CLOSEST}.", wrong=statistics_first_reference_length),
        Mistake(
            "A tie went to the longer reference: of two references equally close to the hypothesis's "
            "length, r takes the shorter (as sacrebleu does, and so the course's BLEU).",
            wrong=statistics_ties_to_the_longer,
        ),
        Mistake(
            "A tie went to the reference listed first: of two references equally close to the "
            "hypothesis's length, r takes the shorter, wherever it is listed (a key of the distance "
            "alone keeps the first of a tie: add the length to the key).",
            wrong=statistics_ties_to_the_first,
        ),
        Mistake(
            "The totals counted distinct n-grams: every n-gram of the hypothesis counts, a repeated one "
            "each time (a hypothesis of L tokens has L - n + 1 n-grams of order n).",
            wrong=statistics_distinct_totals,
        ),
        Mistake(
            "The totals were the hypothesis's length for every order: a hypothesis of L tokens has "
            "L - n + 1 n-grams of order n, none when L < n.",
            wrong=statistics_length_totals,
        ),
        Mistake(
            "The orders ran from 0 to 3: BLEU counts the n-grams of n = 1 to 4, matches[0] being the "
            "unigrams.",
            wrong=statistics_orders_from_zero,
        ),
        Mistake(
            "c was added once per n-gram order, four times per sentence: add each hypothesis's length once.",
            wrong=statistics_length_per_order,
        ),
        Mistake(
            "The first list holds precisions: return the clipped match counts themselves, Python ints "
            "(p_n is matches[n - 1] / totals[n - 1]).",
            wrong=statistics_precisions,
        ),
        Mistake(
            "The sentences were joined into strings, so the n-grams and the lengths were of characters: "
            "BLEU counts n-grams of tokens, the items of each token list.",
            wrong=statistics_of_characters,
        ),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(
            r"unhashable type: 'list'",
            "A list cannot be counted in a Counter or a dict: make each n-gram a tuple of tokens.",
        ),
        ErrorHint(
            r"ZeroDivisionError",
            "Return counts, not ratios: a hypothesis shorter than n has no n-grams at all, and the "
            "check asks for the matches and the totals themselves.",
        ),
    ],
    package=["attn_course.measure.metrics.multi_reference_bleu"],
    avoid=["attn_course.measure.metrics.corpus_bleu", "sacrebleu.metrics.bleu.BLEU"],
)
