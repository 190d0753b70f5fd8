"""Tests for attn_course.measure.metrics: BLEU, exact match, AER and the attention→link conventions."""

import math

import d2l.torch as d2l
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_course.measure.metrics import (
    BLEU_SETTINGS,
    LengthBin,
    alignment_accuracy,
    alignment_error_rate,
    attention_to_links,
    bleu_by_length,
    corpus_alignment_accuracy,
    corpus_alignment_error_rate,
    corpus_bleu,
    d2l_bleu,
    exact_match,
    multi_reference_bleu,
)

# ----------------------------------------------------------------------------------------- corpus BLEU


def test_identical_corpus_scores_100():
    refs = [["a", "b", "c", "d", "e"], ["x", "y", "z", "w"]]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)


def test_one_wrong_last_word_gives_hand_computed_bleu():
    # precisions 4/5, 3/4, 2/3, 1/2; same length so no brevity penalty: BLEU = (1/5) ** (1/4)
    score = corpus_bleu([["a", "b", "c", "d", "e"]], [["a", "b", "c", "d", "f"]])
    assert score == pytest.approx(100 * (4 / 5 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25)


def test_reversed_sentence_keeps_unigrams_only_and_gets_exp_smoothing():
    # p1 = 4/4; no 2-, 3-, 4-gram matches, smoothed by sacrebleu's "exp" method to 1/(2*3), 1/(4*2), 1/(8*1)
    score = corpus_bleu([["d", "c", "b", "a"]], [["a", "b", "c", "d"]])
    assert score == pytest.approx(100 * (1 * (1 / 6) * (1 / 8) * (1 / 8)) ** 0.25)


def test_short_hypothesis_pays_the_brevity_penalty():
    score = corpus_bleu([["a", "b", "c", "d"]], [["a", "b", "c", "d", "e", "f"]])
    assert score == pytest.approx(100 * math.exp(1 - 6 / 4))


def test_empty_hypothesis_scores_zero():
    assert corpus_bleu([[]], [["a", "b", "c", "d"]]) == 0.0


def test_strings_and_token_lists_give_the_same_score():
    hyps = ["the cat sat on a mat", "a dog ran"]
    refs = ["the cat sat on the mat", "the dog ran away"]
    as_tokens = corpus_bleu([h.split() for h in hyps], [r.split() for r in refs])
    assert corpus_bleu(hyps, refs) == pytest.approx(as_tokens)


def test_tokens_are_not_retokenised():
    # With sacrebleu's "13a" tokeniser "d." would become "d ." and this pair would score 100.
    assert BLEU_SETTINGS["tokenize"] == "none"
    score = corpus_bleu([["a", "b", "c", "d."]], [["a", "b", "c", "d", "."]])
    assert score < 60


def test_bleu_is_case_sensitive():
    assert corpus_bleu([["A", "b", "c", "d"]], [["a", "b", "c", "d"]]) < 100


def test_corpus_bleu_pools_counts_instead_of_averaging_sentences():
    good = list("abcdefgh")
    hyps = [good, ["q", "r", "s", "t"]]
    refs = [good, ["w", "x", "y", "z"]]
    # pooled precisions: 8/12, 7/10, 6/8, 5/6 (the second sentence adds only to the denominators)
    expected = 100 * (8 / 12 * 7 / 10 * 6 / 8 * 5 / 6) ** 0.25
    assert corpus_bleu(hyps, refs) == pytest.approx(expected)
    mean_of_sentences = (corpus_bleu(hyps[:1], refs[:1]) + corpus_bleu(hyps[1:], refs[1:])) / 2
    assert mean_of_sentences < expected - 10


def test_corpus_bleu_rejects_mismatched_corpora():
    with pytest.raises(ValueError, match="hypotheses has 1 sentences, expected one per reference = 2"):
        corpus_bleu([["a"]], [["a"], ["b"]])


def test_corpus_bleu_rejects_empty_corpus():
    with pytest.raises(ValueError, match="hypotheses is empty"):
        corpus_bleu([], [])


def test_corpus_bleu_rejects_tokens_with_spaces_and_non_strings():
    with pytest.raises(ValueError, match=r"hypotheses\[0\] contains the token 'a b'"):
        corpus_bleu([["a b"]], [["a", "b"]])
    with pytest.raises(ValueError, match=r"references\[0\] contains 3 of type int"):
        corpus_bleu([["a"]], [["a", 3]])


def test_corpus_bleu_rejects_a_single_string_as_corpus():
    with pytest.raises(ValueError, match="hypotheses is a str, expected a list of sentences"):
        corpus_bleu("a b c", ["a b c"])


# -------------------------------------------------------------------------------------------- d2l BLEU

D2L_EXAMPLES = [  # d2l's seq2seq section translates these four sentences
    ("va !", "va !"),
    ("j'ai perdu .", "j'ai perdu ."),
    ("il est <unk> .", "il est calme ."),
    ("je suis <unk> .", "je suis chez moi ."),
]


@pytest.mark.parametrize(("pred", "label"), D2L_EXAMPLES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_d2l_bleu_equals_d2l_on_the_books_examples(pred, label, k):
    assert d2l_bleu(pred, label, k) == pytest.approx(d2l.bleu(pred, label, k), abs=1e-12)
    assert d2l_bleu(pred.split(), label.split(), k) == pytest.approx(d2l.bleu(pred, label, k), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(
    pred=st.lists(st.sampled_from("abcd"), min_size=1, max_size=8),
    label=st.lists(st.sampled_from("abcd"), min_size=1, max_size=8),
    k=st.integers(1, 4),
)
def test_d2l_bleu_equals_d2l_on_random_sentences(pred, label, k):
    expected = d2l.bleu(" ".join(pred), " ".join(label), k)
    assert d2l_bleu(pred, label, k) == pytest.approx(expected, abs=1e-12)


def test_d2l_bleu_is_the_brevity_penalty_times_weighted_ngram_precisions():
    # len 4 vs 5: penalty exp(1 - 5/4); p1 = 3/4 (weight 1/2), p2 = 1/3 (weight 1/4)
    expected = math.exp(1 - 5 / 4) * (3 / 4) ** 0.5 * (1 / 3) ** 0.25
    assert d2l_bleu("je suis <unk> .", "je suis chez moi .", 2) == pytest.approx(expected)


def test_d2l_bleu_clips_repeated_words():
    # "a a a a" against "a b c d": only one "a" may match
    assert d2l_bleu("a a a a", "a b c d", 1) == pytest.approx((1 / 4) ** 0.5)


def test_d2l_bleu_of_an_empty_prediction_is_zero():
    assert d2l_bleu([], ["a", "b"], 2) == 0.0


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_d2l_bleu_rejects_a_bad_k(k):
    with pytest.raises(ValueError, match="k must be an int >= 1, got "):
        d2l_bleu("a b", "a b", k)


# ----------------------------------------------------------------------------------------- exact match


def test_exact_match_counts_identical_sentences():
    hyps = [["a", "b"], ["c"], ["d", "e"]]
    refs = [["a", "b"], ["c", "c"], ["d", "e"]]
    assert exact_match(hyps, refs) == pytest.approx(2 / 3)


def test_exact_match_treats_strings_as_whitespace_tokenised():
    assert exact_match(["a  b"], [["a", "b"]]) == 1.0


# -------------------------------------------------------------------------------------- BLEU by length


def test_bleu_by_length_scores_each_bin_on_its_own_sentences():
    good = ["a", "b", "c", "d", "e"]
    hyps = [good, good, ["x", "x", "x", "x"], ["d", "c", "b", "a"]]
    refs = [good, good, ["a", "b", "c", "d"], ["a", "b", "c", "d"]]
    bins = bleu_by_length(hyps, refs, src_lengths=[3, 7, 25, 12], bins=[0, 10, 20, 30, 40])
    assert [b.count for b in bins] == [2, 1, 1, 0]
    assert bins[0] == LengthBin(0.0, 10.0, 2, pytest.approx(100.0))
    assert bins[1].bleu == pytest.approx(corpus_bleu(hyps[3:], refs[3:]))
    assert bins[2].bleu == 0.0
    assert bins[3].bleu is None


def test_bleu_by_length_accepts_an_open_last_bin():
    bins = bleu_by_length(["a b c d"], ["a b c d"], [1000], [0, 30, math.inf])
    assert [b.count for b in bins] == [0, 1]


def test_bleu_by_length_refuses_to_drop_sentences_outside_the_bins():
    with pytest.raises(ValueError, match=r"src_lengths\[1\] is 55, outside the bins \[0.0, 50.0\)"):
        bleu_by_length(["a", "b"], ["a", "b"], [3, 55], [0, 25, 50])


def test_bleu_by_length_rejects_bad_bins_and_lengths():
    with pytest.raises(ValueError, match="strictly increasing"):
        bleu_by_length(["a"], ["a"], [3], [0, 10, 10])
    with pytest.raises(ValueError, match="src_lengths has 2 entries, expected one per sentence = 1"):
        bleu_by_length(["a"], ["a"], [3, 4], [0, 10])


# ----------------------------------------------------------------------------------- attention → links


def peaked(rows: list[int], num_keys: int, peak: float = 0.7) -> torch.Tensor:
    """An attention matrix whose row t puts `peak` on column rows[t] and spreads the rest uniformly."""
    weights = torch.full((len(rows), num_keys), (1 - peak) / (num_keys - 1))
    weights[torch.arange(len(rows)), torch.tensor(rows)] = peak
    return weights


N = 4  # source and target words; the matrices have N + 1 rows (the <eos> step) and N + 1 columns (<eos>)
DIAGONAL_GOLD = {(i, i) for i in range(N)}


def test_output_convention_credits_step_t_to_target_word_t():
    weights = peaked([0, 1, 2, 3, 4], N + 1)  # step t looks at source word t; the <eos> step at <eos>
    links = attention_to_links(weights, convention="output", src_len=N, tgt_len=N)
    assert links == DIAGONAL_GOLD
    assert alignment_error_rate(links, DIAGONAL_GOLD, DIAGONAL_GOLD) == 0.0
    shifted = attention_to_links(weights, convention="input", src_len=N, tgt_len=N)
    assert shifted == {(1, 0), (2, 1), (3, 2), (0, 3)}  # last row: <eos> column excluded, argmax of the rest
    assert alignment_error_rate(shifted, DIAGONAL_GOLD, DIAGONAL_GOLD) == 1.0


def test_input_convention_credits_step_t_to_the_word_fed_at_step_t():
    weights = peaked([4, 0, 1, 2, 3], N + 1)  # step 0 (fed <bos>) looks at <eos>; step t at word t - 1
    links = attention_to_links(weights, convention="input", src_len=N, tgt_len=N)
    assert links == DIAGONAL_GOLD
    assert alignment_error_rate(links, DIAGONAL_GOLD, DIAGONAL_GOLD) == 0.0
    output = attention_to_links(weights, convention="output", src_len=N, tgt_len=N)
    assert alignment_error_rate(output, DIAGONAL_GOLD, DIAGONAL_GOLD) > 0.5


def test_eos_column_never_becomes_a_link():
    weights = peaked([4, 4, 4], N + 1, peak=0.9)
    weights[:, 2] += 0.01  # second best: source word 2
    assert attention_to_links(weights, src_len=N) == {(2, 0), (2, 1), (2, 2)}


def test_steps_beyond_the_target_length_are_dropped():
    weights = peaked([0, 1, 2, 3, 3, 3], N + 1)  # a padded batch row: 6 steps for a 3-word target
    assert attention_to_links(weights, convention="output", src_len=N, tgt_len=3) == {(0, 0), (1, 1), (2, 2)}
    assert attention_to_links(weights, convention="input", src_len=N, tgt_len=3) == {(1, 0), (2, 1), (3, 2)}


def test_default_lengths_use_every_row_and_column():
    weights = peaked([2, 0, 1], 3)
    assert attention_to_links(weights) == {(2, 0), (0, 1), (1, 2)}
    assert attention_to_links(weights, convention="input") == {(0, 0), (1, 1)}


def test_attention_to_links_accepts_numpy():
    assert attention_to_links(peaked([1, 0], 2).numpy()) == {(1, 0), (0, 1)}


def test_attention_to_links_rejects_bad_arguments():
    with pytest.raises(ValueError, match="convention is 'outputs', expected one of"):
        attention_to_links(peaked([0], 2), convention="outputs")
    with pytest.raises(ValueError, match=r"weights has shape \(1, 1, 2\), expected \(num_steps, num_keys\)"):
        attention_to_links(peaked([0], 2)[None])
    with pytest.raises(ValueError, match=r"src_len must be an int in \[1, num_keys\] = \[1, 2\], got 3"):
        attention_to_links(peaked([0], 2), src_len=3)
    with pytest.raises(ValueError, match="NaN or inf"):
        attention_to_links(torch.tensor([[0.5, float("nan")]]))


# ------------------------------------------------------------------------------------ AER and accuracy

SURE = {(0, 0), (1, 1)}
POSSIBLE = SURE | {(2, 1)}


def test_aer_with_one_sure_and_two_possible_hits_of_three_predicted_links_is_0_4():
    predicted = {(0, 0), (2, 1), (2, 2)}  # |A|=3, |A∩S|=1, |A∩P|=2, |S|=2 -> 1 - 3/5
    assert alignment_error_rate(predicted, SURE, POSSIBLE) == pytest.approx(0.4)


def test_aer_is_zero_for_the_sure_links_and_one_for_disjoint_links():
    assert alignment_error_rate(SURE, SURE, POSSIBLE) == 0.0
    assert alignment_error_rate({(5, 5), (6, 6)}, SURE, POSSIBLE) == 1.0


def test_possible_links_are_never_errors_but_never_required():
    assert alignment_error_rate(SURE | {(2, 1)}, SURE, POSSIBLE) == 0.0  # extra possible link: no error
    # predicting only possible-but-not-sure links: precision 1, recall 0 -> 1 - (0 + 1) / (1 + 2)
    assert alignment_error_rate({(2, 1)}, SURE, POSSIBLE) == pytest.approx(2 / 3)


def test_aer_penalises_missing_sure_links():
    assert alignment_error_rate({(0, 0)}, SURE, POSSIBLE) == pytest.approx(1 - 2 / 3)


def test_corpus_aer_pools_counts_over_sentences():
    predicted = [{(0, 0)}, {(0, 0), (1, 2), (2, 2), (3, 3)}]
    sure = [{(0, 0)}, {(0, 0), (1, 1), (2, 2), (3, 3)}]
    # pooled: |A|=5, |S|=5, |A∩S|=4, |A∩P|=4 -> 1 - 8/10 (the mean of sentence AERs would be 0.125)
    assert corpus_alignment_error_rate(predicted, sure, sure) == pytest.approx(0.2)


def test_aer_requires_sure_links_to_be_possible():
    with pytest.raises(ValueError, match=r"sure\[0\] has links \[\(1, 1\)\] missing from possible\[0\]"):
        alignment_error_rate(SURE, SURE, {(0, 0)})


def test_aer_rejects_malformed_links_and_undefined_cases():
    with pytest.raises(ValueError, match=r"predicted\[0\] contains \(0, 1, 2\)"):
        alignment_error_rate({(0, 1, 2)}, SURE, POSSIBLE)
    with pytest.raises(ValueError, match="AER is undefined"):
        alignment_error_rate(set(), set(), set())
    with pytest.raises(ValueError, match="have 1, 2 and 2 sentences"):
        corpus_alignment_error_rate([SURE], [SURE, SURE], [POSSIBLE, POSSIBLE])


def test_aer_accepts_numpy_integer_links():
    predicted = {(np.int64(0), np.int64(0)), (np.int64(1), np.int64(1))}
    assert alignment_error_rate(predicted, SURE, POSSIBLE) == 0.0


def test_alignment_accuracy_counts_target_words_with_a_correct_argmax():
    # target 0: (0,0) sure -> right; target 1: (2,1) possible -> right; target 2 has no gold -> not scored
    assert alignment_accuracy({(0, 0), (2, 1), (2, 2)}, SURE, POSSIBLE) == 1.0
    assert alignment_accuracy({(1, 0), (1, 1)}, SURE, POSSIBLE) == 0.5


def test_alignment_accuracy_counts_unaligned_gold_words_as_wrong():
    assert alignment_accuracy({(0, 0)}, SURE, POSSIBLE) == 0.5


def test_corpus_alignment_accuracy_pools_target_words():
    predicted = [{(0, 0)}, {(0, 0), (0, 1), (2, 2)}]
    sure = [{(0, 0)}, {(0, 0), (1, 1), (2, 2)}]
    assert corpus_alignment_accuracy(predicted, sure, sure) == pytest.approx(3 / 4)


def test_alignment_accuracy_rejects_two_links_for_one_target_word():
    with pytest.raises(ValueError, match=r"predicted\[0\] has several links for target word 1"):
        alignment_accuracy({(0, 1), (1, 1)}, SURE, POSSIBLE)


def test_alignment_accuracy_is_undefined_without_sure_links():
    with pytest.raises(ValueError, match="no target word has a sure link"):
        alignment_accuracy({(0, 0)}, set(), set())


def test_tokenised_text_raises_no_sacrebleu_warning(caplog):
    corpus = [["il", "dort", "."]] * 120  # sacrebleu warns about "tokenized periods" unless forced
    with caplog.at_level("WARNING"):
        assert corpus_bleu(corpus, corpus) == pytest.approx(0.0)  # no 4-grams in 3-token sentences
    assert not [r for r in caplog.records if "detokenize" in r.getMessage()]


# ----------------------------------------------------------------------------------------- several references
def test_multi_reference_bleu_equals_corpus_bleu_with_one_reference_each():
    hyps = ["je vois .", "sois gentil !", "attendez !"]
    refs = ["je comprends .", "soyez gentille !", "attends !"]
    assert multi_reference_bleu(hyps, [[r] for r in refs]) == pytest.approx(corpus_bleu(hyps, refs))


def test_multi_reference_bleu_credits_any_accepted_translation():
    hyps = ["tu es très gentil !", "attendez ici un moment ."]
    sets = [["vous êtes très gentille !", "tu es très gentil !"],
            ["attends ici un moment .", "attendez ici un moment .", "patientez un peu ."]]
    assert multi_reference_bleu(hyps, sets) == pytest.approx(100.0)
    assert corpus_bleu(hyps, [s[0] for s in sets]) < 50


def test_multi_reference_bleu_names_a_bad_reference_set():
    with pytest.raises(ValueError, match=r"reference_sets\[1\] is \[\]"):
        multi_reference_bleu(["a b", "c d"], [["a b"], []])
    with pytest.raises(ValueError, match=r"reference_sets\[0\] is 'a b'"):
        multi_reference_bleu(["a b"], ["a b"])
    with pytest.raises(ValueError, match="one per reference = 1"):
        multi_reference_bleu(["a b", "c d"], [["a b"]])


def test_bleu_by_length_scores_each_bin_with_several_references():
    hyps = ["a b c d", "e f g h i j"]
    sets = [["x y z", "a b c d"], ["e f g h i j"]]
    bins = bleu_by_length(hyps, sets, [4, 6], [0, 5, 10], score=multi_reference_bleu)
    assert [(b.count, round(b.bleu)) for b in bins] == [(1, 100), (1, 100)]
