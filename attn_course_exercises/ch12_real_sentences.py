"""Chapter 12's exercises, attention on real sentences: how often one sentence pair's argmax alignment crosses
(ch12.q1), and corpus BLEU by source length against every accepted translation (ch12.q2).

ch12.q1: every case is one sentence pair's attention, shown five ways as in chapter 10 -- [0] as
`attn_course.measure.evaluation.forced_attention` gives it, [1] padded as in a batch (leftovers on the
padding), [2] with every row scaled by its own factor (rows that do not sum to 1, as local-p gives them), [3]
in float16 and [4] in bfloat16 -- and the output is the five counts. The reference is
`attn_course.measure.diagnostics.alignment_crossings`. ch12.q2: every case is a handful of English sentences
with their French translations (1 to 4 each, as Tatoeba has them) and a hypothesis per sentence, made from one
of them by a seeded edit; the reference is
`attn_course.measure.metrics.bleu_by_length(..., score=multi_reference_bleu)`. Each mistake of either is
written as the wrong answer that makes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral
from typing import Any

import torch
from sacrebleu.metrics import BLEU

from attn_course.measure.metrics import BLEU_SETTINGS, multi_reference_bleu
from attn_course_exercises.ch9_dynamics import TENSOR_NUMBER_HINT, no_tensor_numbers
from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
from attn_course_exercises.inputs import spec_generator, spec_size

# ---------------------------------------------------------------------------------------------- ch12.q1
_VIEWS = ("as given", "padded as in a batch", "rows rescaled", "float16", "bfloat16")
_NAMES = tuple(f"the number of crossings of [{i}] {view}" for i, view in enumerate(_VIEWS))


def _alignment(spec: dict[str, Any], gen: torch.Generator, src_len: int, tgt_len: int) -> list[int]:
    """a_t for every target word: the spec's own list, or a monotone walk through the source with some
    neighbours swapped (adjective and noun) and a word moved far (a verb sent to the end)."""
    if spec["alignment"] != "random":
        aligned = [int(a) for a in spec["alignment"]]
        if len(aligned) != tgt_len or not all(0 <= a < src_len for a in aligned):
            raise ValueError(f"alignment must hold {tgt_len} source positions in [0, {src_len}), got "
                             f"{spec['alignment']!r}")
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
    views = [clean.float(), _padded(clean, gen, extra_rows, extra_cols).float(), (clean * factors).float(),
             clean.half(), clean.bfloat16()]
    label = (f"{src_len} source and {tgt_len} target words aligned as a = {aligned}, weights "
             f"{tuple(clean.shape)}; shown five ways: [0] as given, [1] padded as in a batch to "
             f"{tuple(views[1].shape)}, [2] rows rescaled, [3] float16, [4] bfloat16")
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
    return _pairs(weights[:-1, :-1].argmax(dim=1).tolist())            # drop <eos>


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


_EOS_ROW = ("The <eos> row was counted as a target word: row tgt_len is the step that predicts <eos> "
            "(and in [1] the rows after it are padding). Take a_t for the rows t < tgt_len only.")
_EOS_COLUMN = ("The source's <eos> column took part in the argmax: column src_len is <eos>, not a source "
               "word (and in [1] the columns after it are padding). Take each argmax over the columns "
               "i < src_len only.")
_TENSOR_SHAPE = ("In [1], padded as in a batch, `weights` is larger than (tgt_len + 1, src_len + 1): its "
                 "last row and column are padding, not <eos>, so dropping the tensor's last row or column "
                 "keeps the padding (and <eos>) in. Cut with tgt_len and src_len, not with the tensor's "
                 "shape.")

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
    hint="Two steps. First one source position per target word: which rows are target words, which columns "
    "are source words, and along which axis does a row pick its word? Then compare the positions of every "
    "pair of target words, each pair once, in the order the French sentence has them; equal positions do "
    "not cross. The padding, the rows' totals and the dtype must not change the count.",
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
        Mistake("The argmax ran down the columns: that gives, for each source word, the target word that "
                "looks at it most. a_t is the other way round: for each target word t (a row), the source "
                "word with the largest weight in that row.",
                wrong=crossings_down_the_columns),
        Mistake("The rows were shifted by one: row t is the step that *predicts* target word t (fed the word "
                "before it), so the first target word's row is row 0 and the last row, tgt_len, predicts "
                "<eos>. Take a_t from the rows 0 to tgt_len - 1.",
                wrong=crossings_rows_shifted),
        Mistake(_EOS_ROW, wrong=crossings_eos_row),
        Mistake(_EOS_ROW, wrong=crossings_every_row),
        Mistake(_EOS_COLUMN, wrong=crossings_eos_column),
        Mistake(_EOS_COLUMN, wrong=crossings_every_column),
        Mistake("Every row and column of `weights` was used: the last row predicts <eos> and the last column "
                "is the source's <eos> (and in [1] there is padding after them). Take the argmax of the rows "
                "t < tgt_len over the columns i < src_len.",
                wrong=crossings_whole_matrix),
        Mistake(_TENSOR_SHAPE, wrong=crossings_tensor_shape),
        Mistake(_TENSOR_SHAPE, wrong=crossings_tensor_last_row),
        Mistake(_TENSOR_SHAPE, wrong=crossings_tensor_last_column),
        Mistake("Ties were counted as crossings: two target words on the same source word (a_t1 == a_t2, "
                "as 'les voitures' for 'cars') keep the order. Count only a_t1 > a_t2.",
                wrong=crossings_ties_count),
        Mistake("Every crossing was counted twice, once as (t1, t2) and once as (t2, t1): count each pair "
                "of target words once, t1 < t2.",
                wrong=crossings_counted_twice),
        Mistake("You counted every pair of target words on different source words (t1 != t2 with "
                "a_t1 > a_t2): a pair crosses only when the *earlier* target word t1 < t2 looks further "
                "right, so loop over t1 < t2.",
                wrong=crossings_every_distinct_pair),
        Mistake("Only neighbouring target words were compared (t and t + 1): a crossing is any pair t1 < t2 "
                "with a_t1 > a_t2, however far apart (a word moved to the end crosses every word it jumps "
                "over).",
                wrong=crossings_neighbours_only),
        Mistake("The count is right but a float: a number of pairs is a Python int.",
                wrong=crossings_as_float),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(r"expected a Python int", "Return one Python int: the number of crossing pairs."),
        ErrorHint(r"unsupported ScalarType BFloat16",
                  "NumPy has no bfloat16: take the argmax with torch, or turn the weights into float32 "
                  "before calling .numpy()."),
    ],
    package=["attn_course.measure.diagnostics.alignment_crossings"],
    avoid=["attn_course.measure.metrics.attention_to_links"],
)


# ---------------------------------------------------------------------------------------------- ch12.q2
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
    ("do you want to dance ?", ("veux-tu danser ?", "voulez-vous danser ?", "tu veux danser ?",
                                "est-ce que tu veux danser ?")),
    ("she wears a long white dress .", ("elle porte une longue robe blanche .",)),
    ("we are going to eat now .", ("nous allons manger maintenant .", "on va manger maintenant .")),
    ("the little girl has a black cat .", ("la petite fille a un chat noir .",)),
    ("my brother drives a big red car .", ("mon frère conduit une grosse voiture rouge .",
                                           "mon frère conduit une grande voiture rouge .")),
    ("can you help me carry this box ?", ("peux-tu m'aider à porter cette boîte ?",
                                          "pouvez-vous m'aider à porter cette boîte ?",
                                          "tu peux m'aider à porter cette boîte ?")),
    ("tom bought an old house last year .", ("tom a acheté une vieille maison l'an dernier .",
                                             "tom a acheté une vieille maison l'année dernière .")),
    ("i have never seen a red fox before .", ("je n'ai jamais vu de renard roux auparavant .",
                                              "je n'avais jamais vu de renard roux .")),
    ("i think tom will tell you the truth .", ("je pense que tom te dira la vérité .",
                                               "je pense que tom vous dira la vérité .",
                                               "je crois que tom te dira la vérité .",
                                               "je crois que tom vous dira la vérité .")),
    ("we ate a delicious french meal in paris .", ("nous avons mangé un délicieux repas français à paris .",
                                                   "on a mangé un délicieux repas français à paris .")),
    ("my sister bought a pretty green hat yesterday .", ("ma sœur a acheté un joli chapeau vert hier .",)),
    ("we saw a big brown bear in the forest .", ("nous avons vu un grand ours brun dans la forêt .",
                                                 "on a vu un gros ours brun dans la forêt .")),
    ("the students read a long book about french history .", ("les étudiants ont lu un long livre sur "
                                                              "l'histoire de france .",)),
    ("she lives in a small house near the big river .", ("elle vit dans une petite maison près du grand "
                                                         "fleuve .",
                                                         "elle habite une petite maison près du grand "
                                                         "fleuve .")),
    ("the children are playing in the garden with the dog .", ("les enfants jouent dans le jardin avec le "
                                                              "chien .",)),
    ("the old man sat on a green bench in the park .", ("le vieil homme s'est assis sur un banc vert dans le "
                                                        "parc .",
                                                        "le vieil homme s'assit sur un banc vert dans le "
                                                        "parc .")),
    ("i would like to buy a white shirt for my father .", ("j'aimerais acheter une chemise blanche pour mon "
                                                           "père .",
                                                           "je voudrais acheter une chemise blanche pour mon "
                                                           "père .",
                                                           "j'aimerais acheter une chemise blanche à mon "
                                                           "père .")),
    ("they have been waiting for the last train since noon .", ("ils attendent le dernier train depuis "
                                                                "midi .",
                                                                "elles attendent le dernier train depuis "
                                                                "midi .")),
    ("do you know the name of the girl in the red dress ?", ("connais-tu le nom de la fille à la robe "
                                                             "rouge ?",
                                                             "connaissez-vous le nom de la fille à la robe "
                                                             "rouge ?",
                                                             "sais-tu comment s'appelle la fille en robe "
                                                             "rouge ?")),
)
_FILLERS = ("le", "un", "très", "est", "maison", "voiture", "et", "pas")
RAISED = "ValueError raised"


def _edited(reference: list[str], gen: torch.Generator, cut: bool) -> list[str]:
    """A hypothesis made from a reference by 0 to 2 seeded edits: a word dropped, two neighbours swapped,
    a word replaced or repeated; `cut`: only its first two words, as a decoder that stopped too early."""
    words = list(reference)
    for _ in range(int(torch.randint(0, 3, (), generator=gen))):
        edit, at = int(torch.randint(0, 4, (), generator=gen)), int(torch.randint(0, len(words), (),
                                                                                   generator=gen))
        if edit == 0 and len(words) > 2:
            del words[at]
        elif edit == 1 and at + 1 < len(words):
            words[at], words[at + 1] = words[at + 1], words[at]
        elif edit == 2:
            words[at] = _FILLERS[int(torch.randint(0, len(_FILLERS), (), generator=gen))]
        else:
            words.insert(at, words[at])
    return list(reference[:2]) if cut else words


def _edge(value: Any) -> float | int:
    """A bin edge from a spec: a number, or "inf" for an open last bin."""
    return math.inf if value == "inf" else value


def _edge_text(edge: float | int) -> str:
    return "inf" if edge == math.inf else f"{edge:g}"


def _sentences_case(spec: dict[str, Any]) -> Case:
    gen = spec_generator(spec)
    edges = [_edge(e) for e in spec["edges"]]
    pool = [(english.split(), [f.split() for f in french]) for english, french in _POOL
            if not spec["several"] or len(french) > 1]
    by_length: dict[int, list[int]] = {}
    for index, (english, _) in enumerate(pool):
        by_length.setdefault(len(english), []).append(index)
    lengths = spec["lengths"]
    if lengths == "random":
        count = spec_size(spec, "num_sentences")
        lengths = [len(pool[int(i)][0]) for i in torch.randint(0, len(pool), (count,), generator=gen)]
    hypotheses, reference_sets, src_lengths = [], [], []
    for n, length in enumerate(lengths):
        if length not in by_length:
            raise ValueError(f"no sentence of {length} words, expected lengths among {sorted(by_length)}")
        choices = by_length[length]
        english, french = pool[choices[int(torch.randint(0, len(choices), (), generator=gen))]]
        source = int(torch.randint(0, len(french), (), generator=gen))             # often not the first
        hypotheses.append(_edited(french[source], gen, n in spec["cut"]))
        reference_sets.append(french)
        src_lengths.append(len(english))
    outside = not all(edges[0] <= n < edges[-1] for n in src_lengths)
    names = tuple(f"the bin [{_edge_text(a)}, {_edge_text(b)})"
                  for a, b in zip(edges, edges[1:], strict=False))
    label = (f"{len(hypotheses)} sentences of source lengths {src_lengths} with "
             f"{[len(r) for r in reference_sets]} references each, edges "
             f"[{', '.join(_edge_text(e) for e in edges)}]"
             + "".join(f"; hypothesis {n} stopped after two words" for n in spec["cut"])
             + ("; a source length lies outside the bins" if outside else ""))
    inputs = {"hypotheses": hypotheses, "reference_sets": reference_sets, "src_lengths": src_lengths,
              "edges": edges, "outside": outside}
    return Case(label, inputs, spec, names)


def _arguments(inputs: dict[str, Any]) -> tuple[Any, ...]:
    return inputs["hypotheses"], inputs["reference_sets"], inputs["src_lengths"], inputs["edges"]


def _bins_call(answer: Any, inputs: dict[str, Any]) -> Any:
    """The learner's bins; where a source length lies outside them, a ValueError is the right answer."""
    if not inputs["outside"]:
        return answer(*_arguments(inputs))
    try:
        return answer(*_arguments(inputs))
    except ValueError:
        return RAISED


def _bins_reference(inputs: dict[str, Any]) -> Any:
    metrics = resolve("attn_course.measure.metrics")
    try:
        found = metrics.bleu_by_length(*_arguments(inputs), score=metrics.multi_reference_bleu)
    except ValueError:
        if inputs["outside"]:
            return RAISED
        raise
    return [(b.count, b.bleu) for b in found]


# The mistakes of ch12.q2, each written as a learner writes it. The helpers are the parts such an answer gets
# right: half-open bins that refuse a length outside them, each non-empty bin scored as one corpus.
def _binned(src_lengths, edges, inside=lambda n, a, b: a <= n < b):
    members = [[] for _ in edges[1:]]
    for i, n in enumerate(src_lengths):
        k = next((k for k in range(len(members)) if inside(n, edges[k], edges[k + 1])), None)
        if k is None:
            raise ValueError(f"src_lengths[{i}] = {n} lies outside the bins")
        members[k].append(i)
    return members


def _scored(hypotheses, reference_sets, members, bleu=multi_reference_bleu):
    return [(len(chosen), bleu([hypotheses[i] for i in chosen], [reference_sets[i] for i in chosen]))
            if chosen else (0, None) for chosen in members]


def _sacrebleu(hypotheses, streams):
    """sacrebleu's corpus BLEU with the course's settings; streams[k][i] the k-th reference of sentence i."""
    joined = [[r if r is None or isinstance(r, str) else " ".join(r) for r in stream] for stream in streams]
    return float(BLEU(**BLEU_SETTINGS).corpus_score([" ".join(h) for h in hypotheses], joined).score)


def bleu_first_reference_only(hypotheses, reference_sets, src_lengths, edges):
    firsts = [[alternatives[0]] for alternatives in reference_sets]
    return _scored(hypotheses, firsts, _binned(src_lengths, edges))


def bleu_references_zipped(hypotheses, reference_sets, src_lengths, edges):
    def bleu(hyps, sets):
        return _sacrebleu(hyps, [list(stream) for stream in zip(*sets, strict=False)])

    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges), bleu)


def bleu_sets_as_streams(hypotheses, reference_sets, src_lengths, edges):
    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges), _sacrebleu)


def bleu_missing_references_empty(hypotheses, reference_sets, src_lengths, edges):
    def bleu(hyps, sets):
        width = max(len(s) for s in sets)
        return _sacrebleu(hyps, [[s[k] if k < len(s) else "" for s in sets] for k in range(width)])

    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges), bleu)


def bleu_mean_of_sentences(hypotheses, reference_sets, src_lengths, edges):
    scorer = BLEU(**dict(BLEU_SETTINGS, effective_order=True))

    def bleu(hyps, sets):
        scores = [scorer.sentence_score(" ".join(h), [" ".join(r) for r in rs]).score
                  for h, rs in zip(hyps, sets, strict=True)]
        return sum(scores) / len(scores)

    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges), bleu)


def bleu_mean_of_one_sentence_corpora(hypotheses, reference_sets, src_lengths, edges):
    def bleu(hyps, sets):
        return sum(multi_reference_bleu([h], [rs]) for h, rs in zip(hyps, sets, strict=True)) / len(hyps)

    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges), bleu)


def bleu_closed_bins(hypotheses, reference_sets, src_lengths, edges):
    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges, lambda n, a, b: a <= n <= b))


def bleu_left_open_bins(hypotheses, reference_sets, src_lengths, edges):
    return _scored(hypotheses, reference_sets, _binned(src_lengths, edges, lambda n, a, b: a < n <= b))


def bleu_by_hypothesis_length(hypotheses, reference_sets, src_lengths, edges):
    return _scored(hypotheses, reference_sets, _binned([len(h) for h in hypotheses], edges))


def bleu_empty_bins_left_out(hypotheses, reference_sets, src_lengths, edges):
    bins = _scored(hypotheses, reference_sets, _binned(src_lengths, edges))
    return [(count, bleu) for count, bleu in bins if count]


def bleu_empty_bins_zero(hypotheses, reference_sets, src_lengths, edges):
    bins = _scored(hypotheses, reference_sets, _binned(src_lengths, edges))
    return [(count, 0.0 if bleu is None else bleu) for count, bleu in bins]


def bleu_divided_by_100(hypotheses, reference_sets, src_lengths, edges):
    bins = _scored(hypotheses, reference_sets, _binned(src_lengths, edges))
    return [(count, None if bleu is None else bleu / 100) for count, bleu in bins]


def bleu_outside_left_out(hypotheses, reference_sets, src_lengths, edges):
    inside = [i for i, n in enumerate(src_lengths) if edges[0] <= n < edges[-1]]
    members = _binned([src_lengths[i] for i in inside], edges)
    members = [[inside[i] for i in chosen] for chosen in members]
    return _scored(hypotheses, reference_sets, members)


_MEAN = ("That is the mean of the sentences' BLEU scores: BLEU is a corpus score, its n-gram matches and "
         "lengths summed over the bin's sentences before the precisions and the brevity penalty are taken. "
         "Score each bin as one corpus.")
_EDGES = ("A sentence whose length equals an edge went into the wrong bin: the bins are half-open, "
          "[edges[k], edges[k + 1]), so a length equal to an edge belongs to the bin that starts there.")
_SMALLEST_SET = ("Your references were cut to the smallest set's size (zip over the sets stops at the "
                 "shortest): every sentence must be scored against all of its translations. Give sacrebleu "
                 "one stream per k-th reference, None where a sentence has fewer.")

BLEU_BY_LENGTH = Exercise(
    "ch12.q2",
    "bleu_by_source_length",
    "Several right answers: corpus BLEU by source length against every accepted translation",
    solution='''
def bleu_by_source_length(hypotheses, reference_sets, src_lengths, edges):
    """Corpus BLEU (0-100) per bin of source length, each hypothesis against all of its references
    (Bahdanau et al. 2014, Fig. 2, with several references as Papineni et al. 2002 allow).

    hypotheses[i]: a list of str tokens; reference_sets[i]: a non-empty list of such token lists, every
    accepted translation of source sentence i; src_lengths[i]: its number of source words; edges:
    increasing numbers (the last may be math.inf) giving the half-open bins [edges[k], edges[k + 1]).
    Returns one (count, bleu) per bin, in order: how many sentences fall in it and their corpus BLEU,
    None for an empty bin. A length outside every bin raises ValueError.
    """
    members = [[] for _ in range(len(edges) - 1)]
    for i, length in enumerate(src_lengths):
        k = next((k for k in range(len(members)) if edges[k] <= length < edges[k + 1]), None)
        if k is None:
            raise ValueError(f"src_lengths[{i}] = {length} lies outside the bins [{edges[0]}, {edges[-1]})")
        members[k].append(i)
    bins = []
    for chosen in members:
        if not chosen:
            bins.append((0, None))
            continue
        bleu = multi_reference_bleu([hypotheses[i] for i in chosen], [reference_sets[i] for i in chosen])
        bins.append((len(chosen), bleu))
    return bins
''',
    hint="First put each sentence in its bin by its source length: mind which end of a bin includes its "
    "edge, and what to do with a length no bin holds. Then score each non-empty bin as one small corpus, "
    "every hypothesis against all of its translations at once, not sentence by sentence; the chapter's "
    "BLEU is on a 0-100 scale, and an empty bin has no score at all.",
    covers="bins of 1 to 6 sentences with 1 to 4 references each; lengths on the edges; empty bins; an open "
    "last bin; a length outside every bin",
    defaults={"seed": 0, "lengths": "random", "num_sentences": 8, "edges": [2, 5, 8, 14], "several": False,
              "cut": []},
    specs=[
        {"seed": 311, "lengths": [3, 4, 5, 5, 6, 7, 8, 9], "edges": [2, 5, 8, 12]},
        {"seed": 312, "lengths": [4, 5, 9, 9, 10, 12], "edges": [2, 4, 6, 9, 14]},
        {"seed": 313, "lengths": [2, 5, 6, 6, 8, 11, 12], "edges": [0, 6, 10, "inf"], "several": True,
         "cut": [2]},
        {"seed": 314, "lengths": [6, 7, 7, 8, 8, 9], "edges": [5, 8, 10], "several": True},
        {"seed": 315, "lengths": [3, 6, 9], "edges": [2, 6, 9]},
        {"seed": 316, "lengths": [7], "edges": [1, 20]},
    ],
    build=_sentences_case,
    call=_bins_call,
    reference=_bins_reference,
    mistakes=[
        Mistake("Only the first reference of each sentence was used: a hypothesis that is another accepted "
                "translation then loses n-grams it rightly has. Score each hypothesis against all of its "
                "references at once.",
                wrong=bleu_first_reference_only),
        Mistake(_SMALLEST_SET, wrong=bleu_references_zipped),
        Mistake("The reference sets were given to sacrebleu as they are, one list per sentence: sacrebleu "
                "reads its references as streams, stream k holding the k-th reference of *every* sentence "
                "(and it zips them without a warning). Transpose the sets into streams, None where a "
                "sentence has fewer references.",
                wrong=bleu_sets_as_streams),
        Mistake("A sentence with fewer references than others got empty strings in their place: an empty "
                "reference is a reference of length 0, which can become the closest length and lift the "
                "brevity penalty. Give sacrebleu None where a sentence has no k-th reference.",
                wrong=bleu_missing_references_empty),
        Mistake(_MEAN, wrong=bleu_mean_of_sentences),
        Mistake(_MEAN, wrong=bleu_mean_of_one_sentence_corpora),
        Mistake(_EDGES, wrong=bleu_closed_bins),
        Mistake(_EDGES, wrong=bleu_left_open_bins),
        Mistake("The sentences were binned by the length of their hypothesis: Fig. 2 of Bahdanau et al. "
                "bins by the *source* sentence's length, src_lengths[i].",
                wrong=bleu_by_hypothesis_length),
        Mistake("An empty bin was left out: return one (count, bleu) per bin, in order, (0, None) for a bin "
                "that no sentence falls in, so that the bins line up with their edges.",
                wrong=bleu_empty_bins_left_out),
        Mistake("An empty bin was given BLEU 0: it has no score at all (nothing was translated there), so "
                "its bleu is None, not 0 (0 would be plotted as a real, terrible score).",
                wrong=bleu_empty_bins_zero),
        Mistake("BLEU is on a 0-100 scale here, as sacrebleu and `multi_reference_bleu` give it: do not "
                "divide by 100.",
                wrong=bleu_divided_by_100),
        Mistake("A sentence whose source length lies outside every bin was silently left out: raise a "
                "ValueError instead (as `bleu_by_length` does), so that no sentence is lost from the plot "
                "without a word.",
                wrong=bleu_outside_left_out),
    ],
    error_hints=[
        ErrorHint(r"hypotheses is empty",
                  "An empty bin has no BLEU: give it None without calling the scorer on no sentences."),
        ErrorHint(r"expected a non-empty list of reference sentences|expected str tokens|expected a list of",
                  "multi_reference_bleu takes the hypotheses and, for each, the list of its references, "
                  "all as token lists (or strings), for the sentences of one bin."),
    ],
    package=["attn_course.measure.metrics.bleu_by_length"],
)
