"""Tests for attn_course.measure.evaluation: forced-decoding attention, alignment scores, window centres."""

import pytest
import torch

from attn_course.course import chapters as C
from attn_course.data.tasks import Example
from attn_course.measure import evaluation as E
from attn_course.training.loop import TrainConfig


def small_reversal():
    data = C.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    recipe = C.Recipe(embed_size=4, decoder_hiddens=6, window=2, train=TrainConfig(epochs=0))
    return data, recipe


def test_forced_attention_has_one_row_per_target_word_plus_eos():
    data, recipe = small_reversal()
    torch.manual_seed(0)
    model = C.build_variant("global-general", data, recipe)
    attention = E.forced_attention(model, data.test, data)
    for a, example in zip(attention, data.test, strict=True):
        assert a.shape == (len(example.tgt) + 1, len(example.src) + 1)
        assert torch.allclose(a.sum(1), torch.ones(len(example.tgt) + 1))


def test_forced_attention_refuses_a_model_without_attention():
    data, recipe = small_reversal()
    model = C.build_variant("no attention", data, recipe)
    with pytest.raises(ValueError, match="PlainDecoder has no attention"):
        E.forced_attention(model, data.test, data)


def test_alignment_scores_of_the_gold_attention_are_perfect_only_under_its_convention():
    data, _ = small_reversal()
    gold = []
    for example in data.test:
        n = len(example.src)
        a = torch.zeros(n + 1, n + 1)
        a[torch.arange(n), n - 1 - torch.arange(n)] = 1.0   # output convention: step t predicts word t
        a[n, n] = 1.0
        gold.append(a)
    assert E.alignment_scores(gold, data.test, convention="output") == (0.0, 1.0)
    aer, accuracy = E.alignment_scores(gold, data.test, convention="input")
    assert aer > 0.5 and accuracy < 0.5


def test_local_m_centres_are_the_step_clamped_to_the_sentence():
    data, recipe = small_reversal()
    model = C.build_variant("local-m-general", data, recipe)
    for p, example in zip(E.window_centres(model, data.test, data), data.test, strict=True):
        n = len(example.src)
        expected = torch.minimum(torch.arange(n + 1.0), torch.tensor(float(n)))
        assert torch.equal(p, expected)


def test_window_centres_refuse_global_attention():
    data, recipe = small_reversal()
    with pytest.raises(ValueError, match="needs a LuongDecoder"):
        E.window_centres(C.build_variant("global-dot", data, recipe), data.test, data)


def test_centre_statistics_of_the_anti_diagonal():
    links = {(3 - j, j) for j in range(4)}
    examples = [Example(list("abcd"), list("dcba"), links, links)]
    reversed_centres = [torch.tensor([3.0, 2.0, 1.0, 0.0, 0.0])]
    assert E.centre_statistics(reversed_centres, examples) == {"centre_error": 0.0, "centre_slope": -1.0}
    diagonal = [torch.arange(5.0)]  # local-m's p_t = t: distances 3, 1, 1, 3
    assert E.centre_statistics(diagonal, examples) == {"centre_error": 2.0, "centre_slope": 1.0}
