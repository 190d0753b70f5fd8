"""How good is a translation, and where did the model look: BLEU, exact match, alignment error rate.

Two families of numbers:

- Translation quality. `corpus_bleu` is the number the course reports: sacrebleu's corpus BLEU (0-100) on
  the model's own tokens. The course's sentences are already tokenised, so tokens are joined with single
  spaces and sacrebleu is told ``tokenize="none"``: BLEU counts exactly the tokens the model produced, and
  no second tokeniser splits ``"d."`` into ``"d ."`` behind our back. `d2l_bleu` is d2l's teaching
  formula for one sentence (equal to ``d2l.bleu``); it is not comparable with corpus BLEU.
- Alignment quality. An attention matrix becomes predicted links with `attention_to_links` (argmax per
  decoder step), which are scored against gold links with the alignment error rate of Och & Ney (2000) and
  with argmax-alignment accuracy.

Links are ``(src_index, tgt_index)`` pairs into the source and target token lists (without <bos>/<eos>),
the convention of `attn_course.data.tasks.Example`.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch
from sacrebleu.metrics import BLEU

from attn_course.data.tasks import Link
from attn_course.validation import check_int, check_positive_int

Sentence = str | Sequence[str]

#: The sacrebleu settings behind every `corpus_bleu` number in the course (see the module docstring).
#: ``force=True`` only silences sacrebleu's warning that the text looks tokenised: here it is, on purpose.
BLEU_SETTINGS = {
    "tokenize": "none",
    "lowercase": False,
    "smooth_method": "exp",
    "max_ngram_order": 4,
    "force": True,
}

CONVENTIONS = ("output", "input")


def _tokens(sentence: Sentence, name: str) -> list[str]:
    """A sentence as a list of tokens: a string is split on whitespace, a sequence is checked."""
    if isinstance(sentence, str):
        return sentence.split()
    if not isinstance(sentence, Sequence):
        kind = type(sentence).__name__
        raise ValueError(f"{name} is a {kind}, expected a string or a list of string tokens")
    tokens = list(sentence)
    for token in tokens:
        if not isinstance(token, str):
            raise ValueError(f"{name} contains {token!r} of type {type(token).__name__}, expected str tokens")
        if token == "" or len(token.split()) != 1 or token != token.strip():
            raise ValueError(
                f"{name} contains the token {token!r}; tokens must be non-empty and contain no spaces"
            )
    return tokens


def _paired(hypotheses: Sequence[Sentence], references: Sequence[Sentence]) -> tuple[list, list]:
    """Both corpora as token lists, after checking they are non-empty and of the same length."""
    for name, corpus in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(corpus, str) or not isinstance(corpus, Sequence):
            raise ValueError(f"{name} is a {type(corpus).__name__}, expected a list of sentences")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses has {len(hypotheses)} sentences, expected one per reference = {len(references)}"
        )
    if len(hypotheses) == 0:
        raise ValueError("hypotheses is empty, expected at least one sentence")
    hyps = [_tokens(h, f"hypotheses[{i}]") for i, h in enumerate(hypotheses)]
    refs = [_tokens(r, f"references[{i}]") for i, r in enumerate(references)]
    return hyps, refs


def corpus_bleu(hypotheses: Sequence[Sentence], references: Sequence[Sentence]) -> float:
    """Corpus BLEU (0-100) of the hypotheses against one reference each, computed by sacrebleu.

    Each sentence is a list of tokens or a whitespace-tokenised string (both give the same score).
    Settings: `BLEU_SETTINGS` -- no re-tokenisation (``tokenize="none"``), case-sensitive, sacrebleu's
    default ``exp`` smoothing, n-grams up to 4. N-gram matches and lengths are summed over the corpus
    before the precisions are combined, so this is not the mean of sentence BLEUs.

    Papineni et al. 2002, eq. on p. 315: BLEU = BP * exp(sum_{n=1..4} (1/4) log p_n),
    BP = min(1, exp(1 - r / c)) with r the reference and c the hypothesis length of the whole corpus.
    """
    hyps, refs = _paired(hypotheses, references)
    scorer = BLEU(**BLEU_SETTINGS)
    score = scorer.corpus_score([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]])
    return float(score.score)


def multi_reference_bleu(hypotheses: Sequence[Sentence],
                         reference_sets: Sequence[Sequence[Sentence]]) -> float:
    """Corpus BLEU (0-100) of the hypotheses, each against all of its accepted translations, by sacrebleu.

    reference_sets[i] is a non-empty list of sentences (token lists or whitespace-tokenised strings): every
    translation of source sentence i in the corpus. Real corpora have several for many sentences (Tatoeba:
    "be nice ." -> "sois gentil !", "soyez gentille !", ...); scoring against one of them only would count
    a correct translation that happens to be another one as wrong. Same settings as `corpus_bleu`, to which
    this is equal when every set holds one sentence. Papineni et al. 2002 define BLEU for several
    references: an n-gram counts up to its most frequent use in any one reference, and the reference
    length r is, per sentence, the reference length closest to the hypothesis's.
    """
    if isinstance(reference_sets, str) or not isinstance(reference_sets, Sequence):
        raise ValueError(f"reference_sets is a {type(reference_sets).__name__}, expected a list with one "
                         "list of reference sentences per hypothesis")
    firsts = []
    for i, alternatives in enumerate(reference_sets):
        if isinstance(alternatives, str) or not isinstance(alternatives, Sequence) or not alternatives:
            raise ValueError(f"reference_sets[{i}] is {alternatives!r}, expected a non-empty list of "
                             "reference sentences (token lists or strings)")
        firsts.append(alternatives[0])
    hyps, _ = _paired(hypotheses, firsts)
    sets = [[" ".join(_tokens(r, f"reference_sets[{i}][{k}]")) for k, r in enumerate(alternatives)]
            for i, alternatives in enumerate(reference_sets)]
    width = max(len(s) for s in sets)
    streams = [[s[k] if k < len(s) else None for s in sets] for k in range(width)]   # None: no k-th reference
    return float(BLEU(**BLEU_SETTINGS).corpus_score([" ".join(h) for h in hyps], streams).score)


def d2l_bleu(pred_seq: Sentence, label_seq: Sentence, k: int) -> float:
    """d2l's sentence BLEU (0-1), the formula taught in d2l's seq2seq section; equal to ``d2l.bleu``.

    Strings are split on single spaces exactly as d2l does; token lists are used as they are.
    exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n ** (1 / 2**n), where p_n is the clipped
    n-gram precision and n stops at the prediction length. Unlike corpus BLEU the n-gram weights are
    1/2**n, so short n-grams count more. An empty prediction scores 0.
    """
    check_positive_int("k", k)  # the longest n-gram order
    pred = pred_seq.split(" ") if isinstance(pred_seq, str) else _tokens(pred_seq, "pred_seq")
    label = label_seq.split(" ") if isinstance(label_seq, str) else _tokens(label_seq, "label_seq")
    len_pred, len_label = len(pred), len(label)
    if len_pred == 0:
        return 0.0
    score = math.exp(min(0.0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        label_ngrams = collections.Counter(tuple(label[i : i + n]) for i in range(len_label - n + 1))
        pred_ngrams = collections.Counter(tuple(pred[i : i + n]) for i in range(len_pred - n + 1))
        num_matches = sum(min(count, label_ngrams[ngram]) for ngram, count in pred_ngrams.items())
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def exact_match(hypotheses: Sequence[Sentence], references: Sequence[Sentence]) -> float:
    """Fraction (0-1) of hypotheses whose token list equals the reference's."""
    hyps, refs = _paired(hypotheses, references)
    return sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(hyps)


class LengthBin(NamedTuple):
    """Corpus BLEU of the sentences whose source length lies in [low, high); bleu is None if count is 0."""

    low: float
    high: float
    count: int
    bleu: float | None


def bleu_by_length(
    hypotheses: Sequence[Sentence],
    references: Sequence[Sentence],
    src_lengths: Sequence[int],
    bins: Sequence[float],
    *,
    score=corpus_bleu,
) -> list[LengthBin]:
    """Corpus BLEU per source-length bin, for "BLEU vs sentence length" plots (Bahdanau et al. 2014, Fig. 2).

    src_lengths[i] is the number of source tokens of sentence i (without <eos>). bins are increasing edges
    ``[e0, e1, ..., em]`` giving the half-open bins [e0, e1), ..., [e_{m-1}, e_m); use ``math.inf`` as the
    last edge for an open-ended bin. Every length must fall in some bin (ValueError otherwise, so no
    sentence is silently dropped). Returns one `LengthBin` per bin, empty bins included (bleu None).
    score: the BLEU of one bin, `corpus_bleu` (one reference per sentence) or `multi_reference_bleu`
    (references[i] is then the list of sentence i's accepted translations).
    """
    if isinstance(hypotheses, str) or not isinstance(hypotheses, Sequence):
        raise ValueError(f"hypotheses is a {type(hypotheses).__name__}, expected a list of sentences")
    if isinstance(references, str) or not isinstance(references, Sequence):
        raise ValueError(f"references is a {type(references).__name__}, expected a list with one entry per "
                         "sentence")
    hyps, refs = list(hypotheses), list(references)
    if len(refs) != len(hyps):
        raise ValueError(f"hypotheses has {len(hyps)} sentences, expected one per reference = {len(refs)}")
    if len(src_lengths) != len(hyps):
        raise ValueError(
            f"src_lengths has {len(src_lengths)} entries, expected one per sentence = {len(hyps)}"
        )
    edges = [float(e) for e in bins]
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ValueError(f"bins is {list(bins)}, expected at least two strictly increasing edges")
    groups: list[list[int]] = [[] for _ in range(len(edges) - 1)]
    for i, length in enumerate(src_lengths):
        slot = next((b for b in range(len(groups)) if edges[b] <= length < edges[b + 1]), None)
        if slot is None:
            raise ValueError(
                f"src_lengths[{i}] is {length}, outside the bins [{edges[0]}, {edges[-1]}); extend bins"
            )
        groups[slot].append(i)
    result = []
    for b, members in enumerate(groups):
        bleu = score([hyps[i] for i in members], [refs[i] for i in members]) if members else None
        result.append(LengthBin(edges[b], edges[b + 1], len(members), bleu))
    return result


def attention_to_links(
    weights: torch.Tensor | np.ndarray,
    *,
    convention: str = "output",
    src_len: int | None = None,
    tgt_len: int | None = None,
) -> set[Link]:
    """Predicted alignment links from an attention matrix: for each target word, the argmax source word.

    weights: (num_steps, num_keys); row t holds the attention of decoder step t (t = 0 is the step fed
    <bos>), column i the weight on source position i. Only the first src_len columns (the source words;
    default all) take part in the argmax, so the <eos> column and padding never become links.
    tgt_len: the number of target words (default: as many as the rows can cover). Returns a set of
    ``(src_index, tgt_index)`` links, at most one per target word.

    convention says which target word step t's attention is credited to:
      - "output": to y_t, the word step t predicts (target index t). The natural reading for Bahdanau's
        decoder, whose step t attends in order to produce y_t.
      - "input": to y_{t-1}, the word fed at step t (target index t - 1; step 0, fed <bos>, is dropped).
        Luong et al. 2015 (footnote 14) read their content-based scores this way, since a_t is computed
        right after y_{t-1} is fed (their location-based score they credit to y_t, as "output" does);
        chapter 5 scores its Table 6 in miniature under both conventions. Chen et al. 2020 ("Shift-Att")
        show that this shift also gives better alignments from Transformer attention.
    Steps whose target index falls outside [0, tgt_len) (e.g. the <eos> step, or padding) are dropped.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention is {convention!r}, expected one of {CONVENTIONS}")
    matrix = torch.as_tensor(weights)
    if matrix.dim() != 2:
        raise ValueError(f"weights has shape {tuple(matrix.shape)}, expected (num_steps, num_keys)")
    num_steps, num_keys = matrix.shape
    src_len = num_keys if src_len is None else src_len
    check_int("src_len", src_len, low=1, high=num_keys, high_name="num_keys")
    shift = 0 if convention == "output" else 1
    max_tgt = max(num_steps - shift, 0)
    tgt_len = max_tgt if tgt_len is None else tgt_len
    check_int("tgt_len", tgt_len, low=0)
    if matrix.is_floating_point() and not torch.isfinite(matrix).all():
        raise ValueError("weights contains NaN or inf, expected finite attention weights")
    best = matrix[:, :src_len].argmax(dim=1).tolist() if num_steps else []
    links = set()
    for step, src_index in enumerate(best):
        tgt_index = step - shift
        if 0 <= tgt_index < tgt_len:
            links.add((int(src_index), tgt_index))
    return links


def _link_set(links: Iterable[Link], name: str) -> set[Link]:
    if isinstance(links, str | bytes) or not isinstance(links, Iterable):
        kind = type(links).__name__
        raise ValueError(f"{name} is a {kind}, expected a collection of (src_index, tgt_index) links")
    result = set()
    for link in links:
        if not (isinstance(link, tuple) and len(link) == 2):
            raise ValueError(
                f"{name} contains {link!r}, expected (src_index, tgt_index) pairs of non-negative ints"
            )
        src_index = check_int(f"the src_index of {link!r} in {name}", link[0], low=0)
        tgt_index = check_int(f"the tgt_index of {link!r} in {name}", link[1], low=0)
        result.add((src_index, tgt_index))
    return result


def _gold_sets(
    predicted: Sequence[Iterable[Link]], sure: Sequence[Iterable[Link]], possible: Sequence[Iterable[Link]]
) -> list[tuple[set[Link], set[Link], set[Link]]]:
    """Per sentence (A, S, P) as sets, after checking the corpora line up and that S ⊆ P."""
    for name, corpus in (("predicted", predicted), ("sure", sure), ("possible", possible)):
        if not isinstance(corpus, Sequence):
            kind = type(corpus).__name__
            raise ValueError(f"{name} is a {kind}, expected one collection of links per sentence")
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(
            f"predicted, sure and possible have {len(predicted)}, {len(sure)} and {len(possible)} sentences, "
            "expected the same number"
        )
    sentences = []
    for k, (a, s, p) in enumerate(zip(predicted, sure, possible, strict=True)):
        links = _link_set(a, f"predicted[{k}]")
        gold_s, gold_p = _link_set(s, f"sure[{k}]"), _link_set(p, f"possible[{k}]")
        missing = gold_s - gold_p
        if missing:
            raise ValueError(
                f"sure[{k}] has links {sorted(missing)[:3]} missing from possible[{k}]; "
                "expected sure ⊆ possible (Och & Ney 2000: every sure link is also a possible link)"
            )
        sentences.append((links, gold_s, gold_p))
    return sentences


def corpus_alignment_error_rate(
    predicted: Sequence[Iterable[Link]], sure: Sequence[Iterable[Link]], possible: Sequence[Iterable[Link]]
) -> float:
    """Alignment error rate (0-1, lower is better) of a corpus: counts summed over sentences, then combined.

    Each argument holds one collection of (src_index, tgt_index) links per sentence; sure ⊆ possible.
    Och & Ney 2000, eq. 6: AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|), with A the predicted, S the sure
    and P the possible links. A link in P but not in S is never an error, and never required.
    """
    a = s = a_s = a_p = 0
    for links, gold_s, gold_p in _gold_sets(predicted, sure, possible):
        a += len(links)
        s += len(gold_s)
        a_s += len(links & gold_s)
        a_p += len(links & gold_p)
    if a + s == 0:
        raise ValueError("AER is undefined: there are no predicted and no sure links (|A| + |S| = 0)")
    return 1.0 - (a_s + a_p) / (a + s)


def alignment_error_rate(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link]) -> float:
    """Alignment error rate (0-1, lower is better) of one sentence's links; see `corpus_alignment_error_rate`.

    Och & Ney 2000, eq. 6: AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|).
    """
    return corpus_alignment_error_rate([predicted], [sure], [possible])


def corpus_alignment_accuracy(
    predicted: Sequence[Iterable[Link]], sure: Sequence[Iterable[Link]], possible: Sequence[Iterable[Link]]
) -> float:
    """Argmax-alignment accuracy (0-1) of a corpus: of the target words that have a sure gold link, the
    fraction whose predicted source word is a possible gold link.

    predicted holds at most one link per target word (as `attention_to_links` returns); a target word
    with no predicted link counts as wrong; target words without sure links are not scored.
    """
    correct = total = 0
    for k, (links, gold_s, gold_p) in enumerate(_gold_sets(predicted, sure, possible)):
        by_target: dict[int, int] = {}
        for src_index, tgt_index in sorted(links):
            if tgt_index in by_target:
                raise ValueError(
                    f"predicted[{k}] has several links for target word {tgt_index}, expected at most one"
                )
            by_target[tgt_index] = src_index
        for tgt_index in {j for _, j in gold_s}:
            total += 1
            correct += tgt_index in by_target and (by_target[tgt_index], tgt_index) in gold_p
    if total == 0:
        raise ValueError("no target word has a sure link, so argmax-alignment accuracy is undefined")
    return correct / total


def alignment_accuracy(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link]) -> float:
    """Argmax-alignment accuracy (0-1) of one sentence's links; see `corpus_alignment_accuracy`."""
    return corpus_alignment_accuracy([predicted], [sure], [possible])
