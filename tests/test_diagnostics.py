"""Entropy of attention weights: uniform rows give log(n), one-hot rows 0, padding is refused, not counted."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_course.diagnostics import attention_entropy, mean_entropy
from attn_course.masking import masked_softmax


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
