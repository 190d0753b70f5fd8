"""Real effect, or seed noise (chapter 9's test, used by chapter 10): the paired t interval with Bonferroni's
correction, the sign test beside it, and the seeds' directions."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attn_course.measure.significance import (
    Comparison,
    bonferroni,
    compare,
    counts,
    sign_test,
    t_interval,
)

#: Student's t, 4 degrees of freedom, 0.975 quantile, as printed in the tables (a normal quantile is 1.960).
T_4_975 = 2.7764451052


def test_the_interval_is_the_mean_plus_and_minus_t_times_the_standard_error():
    differences = [1.0, 2.0, 3.0, 4.0, 5.0]                     # mean 3, s = sqrt(2.5)
    half = T_4_975 * math.sqrt(2.5) / math.sqrt(5)
    low, high, _ = t_interval(differences, 0.95)
    assert (low, high) == pytest.approx((3 - half, 3 + half), abs=1e-9)   # not 1.96 (a z interval)


@given(st.lists(st.floats(-10, 10, allow_nan=False).map(lambda x: round(x, 3)), min_size=2, max_size=15),
       st.sampled_from([0.9, 0.95, 0.99]))
def test_the_interval_leaves_out_0_exactly_when_the_two_sided_p_value_is_below_its_level(differences, level):
    low, high, p_value = t_interval(differences, level)
    assert low <= statistics.fmean(differences) <= high
    if not math.isclose(p_value, 1 - level, rel_tol=1e-6):
        assert (low > 0 or high < 0) == (p_value < 1 - level)


def test_five_seeds_on_one_side_never_pass_the_sign_test_but_can_pass_the_t_interval():
    result = compare([-18.8, -8.8, -16.8, -7.6, -14.3])         # chapter 9's tau = 4, BLEU, seeds 0 to 4
    assert result.sign_p_value == pytest.approx(2 / 2**5) and result.sign_p_value > 0.05
    assert result.verdict == "down" and result.p_value < 0.01


def test_one_outlier_seed_can_keep_an_eleven_to_one_split_from_a_verdict():
    result = compare([1.0] * 11 + [-100.0])
    assert (result.up, result.down) == (11, 1) and result.sign_p_value < 0.01
    assert result.verdict == "no verdict" and result.low < 0 < result.high


def test_bonferroni_widens_every_interval_so_that_all_hold_together():
    assert bonferroni(0.95, 1) == pytest.approx(0.95) and bonferroni(0.95, 20) == pytest.approx(0.9975)
    differences = [-0.0077, -0.0067, 0.0134, -0.0108, -0.0288, -0.0175, -0.0298, -0.0237, -0.0118, -0.0571,
                   -0.019, -0.0031]                          # chapter 9: coin per sentence, exposure gap
    alone, among_20 = compare(differences), compare(differences, questions=20)
    assert among_20.level == pytest.approx(0.9975) and among_20.mean == alone.mean
    assert among_20.low < alone.low and among_20.high > alone.high
    assert alone.verdict == "down" and among_20.verdict == "no verdict"   # 0.05 / 20 < p < 0.05


def test_the_verdict_follows_the_interval():
    assert compare([1.0, 2.0, 3.0, 4.0, 5.0]).verdict == "up"
    assert compare([-1.0, -2.0, -3.0, -4.0, -5.0]).verdict == "down"
    assert compare([-1.0, 2.0, -3.0, 4.0, 1.0]).verdict == "no verdict"


def test_differences_that_do_not_vary_give_a_point_interval():
    assert t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.0)
    assert compare([0.0, 0.0, 0.0]).verdict == "no verdict" and compare([0.0, 0.0]).p_value == 1.0


def test_the_sign_test_is_the_two_sided_binomial_tail():
    assert sign_test([1.0] * 10) == pytest.approx(2 / 2**10)
    assert sign_test([-1.0] * 10) == pytest.approx(2 / 2**10)
    assert sign_test([1.0] * 9 + [-1.0]) == pytest.approx(2 * 11 / 2**10)
    assert sign_test([1.0, -1.0] * 5) == 1.0 and sign_test([0.0, 0.0]) == 1.0
    assert sign_test([1.0, 1.0, 0.0]) == pytest.approx(0.5)             # a tie counts for neither side
    assert sign_test([1.0] * 11 + [-1.0]) == pytest.approx(2 * 13 / 2**12)


def test_directions_count_ties_apart():
    assert counts([0.3, -0.1, 0.0, 0.2, 0.0]) == (2, 1, 2)
    result = compare([0.3, -0.1, 0.0, 0.2, 0.0])
    assert (result.up, result.down, result.tied) == (2, 1, 2)


def test_a_comparison_reads_as_a_sentence():
    result = Comparison(mean=-0.0167, low=-0.0362, high=0.0029, level=0.9975, p_value=0.006,
                        sign_p_value=0.006, up=1, down=11, tied=0)
    assert result.sentence(3) == "-0.017 (-0.036 to +0.003; 1 up, 11 down, 0 tied)"
    assert result.verdict == "no verdict"


@pytest.mark.parametrize(("call", "named"), [
    (lambda: compare([1.0]), "differences must hold at least 2 values"),
    (lambda: compare([1.0, float("nan")]), "differences[1]"),
    (lambda: compare([1.0, True]), "differences[1]"),
    (lambda: compare([1.0, 2.0], questions=0), "questions"),
    (lambda: compare([1.0, 2.0], confidence=1.0), "confidence"),
    (lambda: t_interval([1.0, 2.0], level=95), "level"),
])
def test_bad_input_is_refused_by_name(call, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        call()
