"""Real effect, or seed noise? The course's test of a change against its baseline trained with the same seeds.

Train the change and its baseline with each seed (same initial weights, same batches) and take, seed by
seed, the difference change minus baseline. Then

    result = significance.compare(differences, questions=20)
    result.mean, result.low, result.high       # the mean difference and its interval
    result.verdict                              # "up", "down" or "no verdict"
    result.sentence(3)                          # "-0.017 (-0.036 to +0.003; 1 up, 11 down, 0 tied)"

The interval is the paired t interval, mean +- t * s / sqrt(n) with t the (1 + level) / 2 quantile of
Student's t with n - 1 degrees of freedom and s the differences' standard deviation: it weighs how large the
differences are against how much they vary. A study asked several questions widens every interval to the
level 1 - (1 - confidence) / questions (Bonferroni), so that all its intervals together hold with the
stated confidence. Beside it, `sign_test` reads only on which side of 0 each difference falls: it assumes
nothing about their sizes, and so with n seeds it never goes below 2 / 2**n (0.0625 for five seeds).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from attn_course.validation import check_int, check_number


def _check_differences(differences: Sequence[float], at_least: int) -> list[float]:
    """The differences as floats; ValueError unless there are `at_least` of them, every one finite."""
    values = list(differences)
    if len(values) < at_least:
        raise ValueError(f"differences must hold at least {at_least} values, one per seed; got {len(values)}")
    for index, value in enumerate(values):
        check_number(f"differences[{index}]", value)
    return [float(value) for value in values]


def counts(differences: Sequence[float]) -> tuple[int, int, int]:
    """How many differences are above 0, below 0, and exactly 0: (up, down, tied)."""
    values = _check_differences(differences, 0)
    up, down = sum(value > 0 for value in values), sum(value < 0 for value in values)
    return up, down, len(values) - up - down


def sign_test(differences: Sequence[float]) -> float:
    """Two-sided sign test: the probability, if each nonzero difference were a fair coin's sign, of a split
    at least as uneven as the one seen. Ties count for neither side; 1.0 when every difference is 0."""
    from scipy import stats  # here, not at the top: importing the chapters' studies stays light

    up, down, _ = counts(differences)
    if up + down == 0:
        return 1.0
    return float(stats.binomtest(up, up + down, 0.5).pvalue)


def bonferroni(confidence: float, questions: int) -> float:
    """The level of each of `questions` intervals that hold all together with probability `confidence`."""
    check_number("confidence", confidence, low=0, high=1, low_open=True, high_open=True)
    check_int("questions", questions, low=1)
    return 1 - (1 - confidence) / questions


def t_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """The paired t test of the mean difference against 0: (low, high, p_value), the interval at `level`
    and the two-sided p-value. Differences that do not vary give the interval (mean, mean), and p-value 0
    (1 when they are all 0)."""
    values = _check_differences(differences, 2)
    check_number("level", level, low=0, high=1, low_open=True, high_open=True)
    mean = statistics.fmean(values)
    if statistics.stdev(values) == 0:
        return mean, mean, 1.0 if mean == 0 else 0.0
    from scipy import stats

    result = stats.ttest_1samp(values, 0.0)
    interval = result.confidence_interval(level)
    return float(interval.low), float(interval.high), float(result.pvalue)


@dataclass(frozen=True)
class Comparison:
    """A change against its baseline over n seeds: the mean paired difference, its interval at `level`,
    the t test's and the sign test's p-values, and how many differences went up, down or tied."""

    mean: float
    low: float
    high: float
    level: float
    p_value: float
    sign_p_value: float
    up: int
    down: int
    tied: int

    @property
    def verdict(self) -> str:
        """"up" or "down" when the interval lies on that side of 0, else "no verdict"."""
        return "up" if self.low > 0 else "down" if self.high < 0 else "no verdict"

    def sentence(self, digits: int = 3) -> str:
        """The mean difference, its interval and the seeds' directions, e.g.
        "-0.017 (-0.036 to +0.003; 1 up, 11 down, 0 tied)"."""
        return (f"{self.mean:+.{digits}f} ({self.low:+.{digits}f} to {self.high:+.{digits}f}; "
                f"{self.up} up, {self.down} down, {self.tied} tied)")


def compare(differences: Sequence[float], *, questions: int = 1, confidence: float = 0.95) -> Comparison:
    """Read paired differences (change minus baseline, one per seed) as one of `questions` a study asks:
    the t interval at `bonferroni(confidence, questions)`, the sign test beside it, and the directions."""
    values = _check_differences(differences, 2)
    level = bonferroni(confidence, questions)
    low, high, p_value = t_interval(values, level)
    return Comparison(statistics.fmean(values), low, high, level, p_value, sign_test(values), *counts(values))
