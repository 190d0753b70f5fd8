"""Entropy of attention weights: uniform rows give log(n), one-hot rows 0, padding is refused, not counted."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_course.attention.masking import masked_softmax
from attn_course.measure.diagnostics import attention_entropy, mean_entropy


def test_uniform_rows_give_log_of_the_real_keys_and_one_hot_rows_zero():
    lens = torch.tensor([3, 5])
    weights = masked_softmax(torch.zeros(2, 4, 5), lens)
    assert torch.allclose(attention_entropy(weights, lens)[:, 0], torch.tensor([math.log(3), math.log(5)],
                                                                             dtype=torch.float64))
    ones = torch.ones(2, 4, dtype=torch.float64)
    assert torch.allclose(attention_entropy(weights, lens, normalise=True), ones)
    one_hot = torch.zeros(2, 4, 5)
    one_hot[..., 1] = 1
    assert attention_entropy(one_hot, lens).abs().max() == 0


def test_a_single_real_key_has_normalised_entropy_zero_not_nan():
    weights = masked_softmax(torch.zeros(1, 2, 4), torch.tensor([1]))
    assert torch.equal(attention_entropy(weights, torch.tensor([1]), normalise=True), torch.zeros(1, 2,
                                                                                                 dtype=torch.float64))


def test_weight_on_padded_keys_is_refused():
    weights = torch.full((1, 2, 4), 0.25)
    with pytest.raises(ValueError, match="padded keys"):
        attention_entropy(weights, torch.tensor([2]))


def test_bad_shapes_and_values_name_the_argument():
    expected = r"weights has shape \(2, 3\), expected \(batch_size, num_steps, num_keys\)"
    with pytest.raises(ValueError, match=expected):
        attention_entropy(torch.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="src_valid_lens has shape"):
        attention_entropy(torch.full((2, 1, 3), 1 / 3), torch.tensor([3]))
    with pytest.raises(ValueError, match="NaN"):
        attention_entropy(torch.full((1, 1, 2), float("nan")))


def test_mean_entropy_averages_only_real_decoder_steps():
    weights = torch.zeros(1, 3, 4)
    weights[0, 0] = 0.25          # uniform: log 4
    weights[0, 1:, 0] = 1          # one-hot; step 2 is padding
    assert mean_entropy(weights, torch.tensor([4]), torch.tensor([2])) == pytest.approx(math.log(4) / 2)
    with pytest.raises(ValueError, match="no decoder steps"):
        mean_entropy(weights, torch.tensor([4]), torch.tensor([0]))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.floats(0.1, 10))
def test_normalised_entropy_lies_in_zero_one(num_steps, num_keys, scale):
    torch.manual_seed(num_steps * 10 + num_keys)
    lens = torch.randint(1, num_keys + 1, (3,))
    weights = masked_softmax(scale * torch.randn(3, num_steps, num_keys), lens)
    entropy = attention_entropy(weights, lens, normalise=True)
    assert entropy.min() >= 0 and entropy.max() <= 1 + 1e-9


# ---------------------------------------------------------------------------------------- concentration
from attn_course.measure.diagnostics import (  # noqa: E402
    COLLAPSED_CONCENTRATION,
    NEAR_UNIFORM_ENTROPY,
    attention_concentration,
    diagnose,
)


def test_a_diagonal_spreads_its_mass_and_a_lazy_model_puts_it_all_on_one_column():
    diagonal = torch.eye(5)[None]
    assert attention_concentration(diagonal).item() == pytest.approx(1 / 5)
    lazy = torch.zeros(1, 5, 5)
    lazy[..., 4] = 1
    assert attention_concentration(lazy).item() == 1
    assert diagnose(lazy).verdict == "collapsed" and diagnose(diagonal).verdict == "looking"


def test_uniform_rows_are_near_uniform_not_collapsed():
    lens = torch.tensor([4, 6])
    weights = masked_softmax(torch.zeros(2, 5, 6), lens)
    result = diagnose(weights, lens)
    assert result.entropy == pytest.approx(1) and result.verdict == "near-uniform"
    assert torch.allclose(attention_concentration(weights, lens), 1 / lens.double())


def test_padded_decoder_steps_do_not_count():
    weights = torch.zeros(1, 4, 3)
    weights[0, :2] = torch.eye(3)[:2]       # two real steps on two different words
    weights[0, 2:, 2] = 1                    # padded steps that all look at the last word
    lens = torch.tensor([3])
    assert attention_concentration(weights, lens, torch.tensor([2])).item() == pytest.approx(0.5)
    assert attention_concentration(weights, lens).item() == pytest.approx(0.5)  # 2 of 4 steps on column 2
    weights[0, 3:, 2] = 0.5                  # padded steps are ignored, whatever they hold
    assert diagnose(weights, lens, torch.tensor([2])).concentration == pytest.approx(0.5)


def test_concentration_refuses_weight_on_padded_keys_and_sentences_without_steps():
    with pytest.raises(ValueError, match="padded keys"):
        attention_concentration(torch.full((1, 2, 4), 0.25), torch.tensor([2]))
    with pytest.raises(ValueError, match=r"sentences \[1\] have no attention weight"):
        attention_concentration(torch.full((2, 2, 2), 0.5), None, torch.tensor([2, 0]))
    with pytest.raises(ValueError, match="tgt_valid_lens has shape"):
        attention_concentration(torch.full((2, 2, 2), 0.5), None, torch.tensor([2]))
    with pytest.raises(ValueError, match=r"weights has shape \(2, 2\)"):
        diagnose(torch.full((2, 2), 0.5))


def test_thresholds_separate_the_diagonal_of_two_words_from_a_collapse():
    two_words = torch.eye(3)[None]           # 2 words + <eos>, one step each: 1/3 per column
    assert attention_concentration(two_words).item() < COLLAPSED_CONCENTRATION
    assert 0 < NEAR_UNIFORM_ENTROPY < 1


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.floats(0.1, 10), st.integers(0, 2**16))
def test_concentration_lies_between_one_over_the_real_keys_and_one(num_steps, num_keys, scale, seed):
    generator = torch.Generator().manual_seed(seed)
    src_lens = torch.randint(1, num_keys + 1, (3,), generator=generator)
    tgt_lens = torch.randint(1, num_steps + 1, (3,), generator=generator)
    weights = masked_softmax(scale * torch.randn(3, num_steps, num_keys, generator=generator), src_lens)
    concentration = attention_concentration(weights, src_lens, tgt_lens)
    assert (concentration >= 1 / src_lens.double() - 1e-9).all() and (concentration <= 1 + 1e-9).all()
    # the padded steps may hold anything: only the real ones are read
    noisy = weights.clone()
    padded = torch.arange(num_steps)[None] >= tgt_lens[:, None]
    noisy[padded] = masked_softmax(torch.randn(3, num_steps, num_keys, generator=generator), src_lens)[padded]
    assert torch.equal(attention_concentration(noisy, src_lens, tgt_lens), concentration)


# ------------------------------------------------------------------------- score range, chapter 10's study
from attn_course.data.tasks import Example  # noqa: E402
from attn_course.measure.diagnostics import score_range  # noqa: E402


def test_score_range_reads_max_minus_min_score_back_from_the_softmax_over_real_keys():
    scores = torch.tensor([[[1.0, 3.0, -2.0, 9.0], [0.5, 0.5, 0.5, 7.0]]], dtype=torch.float64)
    lens = torch.tensor([3])
    ranges = score_range(masked_softmax(scores, lens), lens)
    # the padded 9 and 7 do not count
    assert torch.allclose(ranges, torch.tensor([[5.0, 0.0]], dtype=torch.float64))


def test_score_range_is_infinite_for_a_zero_weight_on_a_real_key_and_refuses_padded_weight():
    one_hot = torch.tensor([[[0.0, 1.0, 0.0]]])
    assert torch.isinf(score_range(one_hot, torch.tensor([3]))).all()
    assert score_range(one_hot[..., 1:2], torch.tensor([1])).item() == 0     # one key: nothing to spread
    with pytest.raises(ValueError, match="padded keys"):
        score_range(torch.full((1, 1, 3), 1 / 3), torch.tensor([2]))


def test_argmax_hits_sorts_each_target_word_by_kind_and_where_its_attention_peaks():
    from attn_course.course.diagnosis_study import argmax_hits

    example = Example(["the", "mother", "writes", "."], ["la", "mère", "écrit", "."],
                      sure={(0, 0), (1, 1), (2, 2), (3, 3)}, possible={(0, 0), (1, 1), (2, 2), (3, 3)})
    attention = torch.zeros(1, 5, 5)
    # la -> mother (the next word), mère -> mother, écrit -> the, . -> writes
    for t, j in enumerate([1, 1, 0, 2, 4]):
        attention[0, t, j] = 1
    assert argmax_hits(attention, [example]) == {"content_on_gold": 0.5, "function_on_gold": 0.0,
                                                 "function_on_next": 1.0, "stop_on_gold": 0.0}


def test_the_studys_model_is_the_one_build_model_makes_and_takes_an_attention_dropout():
    from attn_course.course import diagnosis_study
    from attn_course.course.chapters import translation_data
    from attn_course.models.seq2seq import build_model
    from attn_course.training.runtime import seed_everything

    data = translation_data(60, min_len=3, max_len=6, seed=0)
    model = diagnosis_study.build(data, 3, attention_dropout=0.3)
    seed_everything(3)
    reference = build_model("bahdanau", len(data.src_vocab), len(data.tgt_vocab), **diagnosis_study.SIZES)
    assert model.decoder.attention.dropout.p == 0.3 and reference.decoder.attention.dropout.p == 0.0
    expected = reference.state_dict()
    for name, got in model.state_dict().items():
        assert torch.equal(got, expected[name]), name


from attn_course.measure.diagnostics import alignment_crossings  # noqa: E402


def forced(aligned: list[int], src_len: int, *, eos_row_on: int = 0, padding: int = 0) -> torch.Tensor:
    """Attention as forced_attention returns it, (len(aligned) + 1, src_len + 1) plus `padding` rows and
    columns: row t peaks on source word aligned[t], but puts even more on the <eos> column; the <eos> row
    peaks on source word eos_row_on among the words; the padding holds the largest weights of all."""
    tgt_len = len(aligned)
    weights = torch.full((tgt_len + 1 + padding, src_len + 1 + padding), 0.01)
    for t, i in enumerate([*aligned, eos_row_on]):
        weights[t, i] = 0.2
    weights[:, src_len] = 0.5
    weights[tgt_len + 1 :, :] = 0.9
    weights[:, src_len + 1 :] = 0.9
    return weights


@pytest.mark.parametrize(("aligned", "src_len", "expected"), [
    ([0, 1, 2], 3, 0),                       # monotone
    ([0, 2, 1], 3, 1),                       # a red car -> une voiture rouge
    ([4, 3, 2, 1, 0], 5, 10),                # a reversal: every pair, 5 * 4 / 2
    ([0, 0, 1, 1], 2, 0),                    # two target words on one source word keep the order
    ([1, 1, 0], 2, 2),
    ([0], 1, 0),
])
def test_alignment_crossings_counts_the_target_word_pairs_in_the_other_order(aligned, src_len, expected):
    for padding in (0, 2):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            weights = forced(aligned, src_len, padding=padding).to(dtype)
            got = alignment_crossings(weights, src_len, len(aligned))
            assert got == expected and type(got) is int


def test_alignment_crossings_leave_out_the_eos_row_the_eos_column_and_the_padding():
    # The <eos> row peaks on word 0 after every word of a monotone alignment: counted, it would cross 2.
    weights = forced([0, 1, 2], 3, eos_row_on=0, padding=3)
    assert alignment_crossings(weights, 3, 3) == 0
    scaled = weights * torch.linspace(0.05, 1.0, weights.shape[0])[:, None]             # rows of any total
    assert alignment_crossings(scaled, 3, 3) == 0


def test_alignment_crossings_refuses_sizes_the_weights_cannot_hold():
    weights = forced([0, 1], 2)
    with pytest.raises(ValueError, match=r"tgt_len must be an int in \[0, num_steps - 1\] = \[0, 2\], got 3"):
        alignment_crossings(weights, 2, 3)
    with pytest.raises(ValueError, match=r"src_len must be an int in \[1, num_keys - 1\]"):
        alignment_crossings(weights, 3, 2)
    with pytest.raises(ValueError, match=r"weights has shape \(1, 3, 3\), expected \(num_steps, num_keys\)"):
        alignment_crossings(weights[None], 2, 2)
