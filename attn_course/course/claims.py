"""The chapters' claims about trained models: each bar written once, checked in a chapter, measured widely.

A chapter that asserts something about a model it trained (a BLEU, an alignment error rate, a gap between
two models) does it through `check`, which raises AssertionError when the value misses its bar and
otherwise returns the sentence a learner reads:

    print(claims.check("ch04.bleu_10_30", bleu_10_30))
    # Bahdanau: corpus BLEU on held-out sentences of 10-30 tokens: 93.9
    #   (other seeds and machines: 92.3 to 95.6)

The bars were chosen from `make robustness` (`attn_course_tools.robustness`), which runs every training
chapter under several seeds, torch CPU kernels and thread counts and writes the spread of every claim to
attn_course/course/results/robustness.json. A bar is set so that the *lowest* value over that matrix clears it
with a margin; the range a chapter prints is the one measured there, so a learner can tell their own run from
a broken one. The bar itself stays out of the sentence: it is the course's test, not part of the lesson (the
appendix chapter, "How this course checks itself", explains it).

A claim is about the data its chapter ships: chapter 12, run on another pair file, passes compare=False and
prints what it measured without a range or an assert.

`make robustness` reads the values back through a log: when the environment names a file in
`ATTN_COURSE_CLAIMS_LOG`, `check` appends one JSON line {"key": ..., "value": ...} to it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attn_course.course import RESULTS

#: Where `make robustness` writes the measured spread of every claim (committed).
ROBUSTNESS_RESULTS = RESULTS / "robustness.json"

#: The format `make robustness` writes, so that an older or a foreign file is refused by name.
RESULTS_FORMAT = "attn_course.robustness/1"

#: Names the file `check` appends each checked value to (set by `make robustness` for each chapter run).
LOG_VARIABLE = "ATTN_COURSE_CLAIMS_LOG"


@dataclass(frozen=True)
class Claim:
    """One assertion a chapter makes about a trained model: value >= bar (at_least) or value <= bar."""

    key: str
    text: str
    bar: float
    at_least: bool = True

    @property
    def chapter(self) -> str:
        """The chapter's notebook prefix, e.g. "04" for "ch04.bleu_10_30"."""
        return self.key.split(".")[0].removeprefix("ch")

    @property
    def relation(self) -> str:
        return ">=" if self.at_least else "<="

    def margin(self, value: float) -> float:
        """How far `value` is on the right side of the bar (negative: the claim fails)."""
        return value - self.bar if self.at_least else self.bar - value

    def holds(self, value: float) -> bool:
        return not math.isnan(value) and self.margin(value) >= 0


def _claims(*claims: Claim) -> dict[str, Claim]:
    return {claim.key: claim for claim in claims}


#: Every claim of the chapters about a trained model, by key ("chNN.name").
CLAIMS: dict[str, Claim] = _claims(
    # Chapter 3: the encoder-decoder without attention (chapters.CHAPTER_RECIPE).
    Claim(
        "ch03.val_loss_drop",
        "no attention: validation loss falls from the first epoch to the last (nats per token)",
        0.3,
    ),
    Claim("ch03.bleu_drop_3_9_to_10_19", "no attention: BLEU of 3-9-token sentences minus BLEU of 10-19", 15),
    Claim(
        "ch03.bleu_drop_10_19_to_30_40", "no attention: BLEU of 10-19-token sentences minus BLEU of 30-40", 0
    ),
    Claim(
        "ch03.accuracy_smallest_drop",
        "no attention: smallest fall of teacher-forced next-word accuracy from one length bin to the next",
        0,
    ),
    Claim("ch03.accuracy_drop", "no attention: next-word accuracy, 3-9 tokens minus 30-40 tokens", 0.3),
    Claim(
        "ch03.long_overlap",
        "no attention: share of the words of its translations of 30-40-token sentences that occur in the "
        "reference",
        0.6,
        at_least=False,
    ),
    # Chapter 4: Bahdanau attention, same data and training as chapter 3.
    Claim("ch04.val_loss_ratio", "Bahdanau: validation loss after the first epoch / after the last", 3),
    Claim(
        "ch04.test_accuracy", "Bahdanau: argmax alignment accuracy on the test set (output convention)", 0.75
    ),
    Claim(
        "ch04.test_aer",
        "Bahdanau: alignment error rate on the test set (output convention)",
        0.25,
        at_least=False,
    ),
    Claim(
        "ch04.crossing_accuracy",
        "Bahdanau: share of the test set's crossing gold links whose source word is the one its target word "
        "attends to most",
        0.65,
    ),
    Claim(
        "ch04.long_monotone",
        "Bahdanau: correlation of step and most-attended position, greedy decoding of a 30+ word sentence",
        0.9,
    ),
    Claim(
        "ch04.gap_widening",
        "BLEU gap attention - none: smallest gap beyond 10 tokens minus the gap on 3-9 tokens",
        10,
    ),
    Claim("ch04.long_bleu_ratio", "BLEU on 30-40 tokens: Bahdanau / no attention", 2),
    Claim("ch04.bleu_10_30", "Bahdanau: corpus BLEU on held-out sentences of 10-30 tokens", 90),
    # Chapter 5: local-p on the reversal task (trained in the chapter).
    Claim(
        "ch05.reversal_slope",
        "local-p on reversal: slope of the window centre p_t against the decoder step t (gold: -1)",
        -0.8,
        at_least=False,
    ),
    Claim(
        "ch05.reversal_centre_error",
        "local-p on reversal: mean distance of the window centre p_t from the gold source position",
        2.5,
        at_least=False,
    ),
    # Chapter 6: decoding.
    Claim(
        "ch06.train_loss_ratio",
        "chapter 6's model: last epoch's training loss / first epoch's",
        0.15,
        at_least=False,
    ),
    Claim(
        "ch06.beam_at_least_greedy",
        "beam search (2, 4 and 8 beams): lowest share of sentences whose "
        "beam log-probability is at least greedy's",
        0.95,
    ),
    Claim("ch06.beam4_bleu_gain", "corpus BLEU, beam 4 minus greedy", 0),
    Claim("ch06.first_beams_gain_most", "BLEU gain of beam 2 over greedy minus |BLEU of beam 8 - beam 4|", 0),
    # Chapter 7: the two models of the explorer.
    Claim(
        "ch07.train_loss_ratio",
        "chapter 7's models: largest last-epoch / first-epoch training loss",
        0.3,
        at_least=False,
    ),
    Claim("ch07.bleu", "chapter 7's models: lowest test BLEU", 20),
    Claim(
        "ch07.aer_convention_gap",
        "chapter 7's models: smallest AER(input convention) - AER(output convention)",
        0,
    ),
    # Chapter 8: batched decoding gives the one-at-a-time outputs.
    Claim("ch08.batched_identical", "share of sentences decoded identically batched and one at a time", 0.95),
    # Chapter 9: training dynamics on the reversal task (attn_course.course.dynamics, trained in the chapter).
    Claim(
        "ch09.exposure_gap",
        "Next-word accuracy on the test set, reference fed minus the model's own words fed (teacher-forced "
        "model)",
        0.02,
    ),
    Claim("ch09.norm_growth", "Mean gradient norm without clipping, last epoch over first epoch", 2),
    Claim("ch09.clipped_share",
          "Share of the baseline's updates whose gradient norm exceeded 1 (clipped)", 0.2),
    Claim("ch09.warmup_slow_start",
          "Mean training loss of the first 40 updates at rate 0.02, with a 30-update warm-up minus without",
          0.05),
    Claim("ch09.entropy_hot",
          "Normalised attention entropy on the test set, trained at tau 4 minus at tau 1", 0.05),
    Claim("ch09.entropy_cold",
          "Normalised attention entropy on the test set, trained at tau 1 minus at tau 0.25", 0.0),
    # Chapter 10: diagnosing attention (small Bahdanau models trained in the chapter).
    Claim("ch10.final_entropy",
          "Healthy model after training: mean normalised entropy of its attention on the test sentences",
          0.6, at_least=False),
    Claim("ch10.healthy_concentration",
          "Healthy model: mean concentration of its attention on the test sentences", 0.5, at_least=False),
    Claim("ch10.broken_bleu_gap",
          "BLEU of the healthy model minus that of the better broken one (frozen or lazy)", 10),
    Claim("ch10.healthy_lazy_sentences",
          "Healthy model: share of the test sentences whose concentration is 0.6 or more", 0.12,
          at_least=False),
    Claim("ch10.activation_max_entropy",
          "Highest mean normalised entropy after training among the tanh and ReLU models of three seeds", 0.6,
          at_least=False),
    Claim("ch10.relu_bleu_gain",
          "BLEU of the ReLU score minus BLEU of the tanh score, averaged over three seeds", -2),
    Claim("ch10.relu_entropy_gap",
          "Mean normalised entropy of the tanh score minus that of the ReLU score, averaged over three seeds",
          0.05),
    # Chapter 11: a small Transformer beside Bahdanau's model, same data and training (trained there).
    Claim(
        "ch11.transformer_val_loss_ratio",
        "Transformer: validation loss after the first epoch, divided by the loss after the last",
        3,
    ),
    Claim("ch11.transformer_bleu", "Transformer: BLEU of its greedy translations of the test set", 50),
    Claim(
        "ch11.bahdanau_bleu",
        "Bahdanau's model, same data and training budget: BLEU of its greedy translations of the test set",
        30,
    ),
    Claim(
        "ch11.bleu_gap",
        "the Transformer's lead over Bahdanau's model in test-set BLEU",
        0,  # it leads; by how much varies widely with the seed and the processor
    ),
    Claim(
        "ch11.speed_ratio_growth",
        "how many times larger the step-time ratio Bahdanau / Transformer is on 21-30-token sentences "
        "than on 3-6-token ones",
        1.1,
    ),
    # Chapter 12: real English-French sentences (chapters.REAL_RECIPE), all three models trained there.
    Claim(
        "ch12.bahdanau_bleu",
        "Bahdanau's model: BLEU of its greedy translations of the test set, against every accepted "
        "translation",
        12,
    ),
    Claim("ch12.attention_gain", "how far Bahdanau's model leads the model without attention, in BLEU", 3),
    Claim("ch12.transformer_bleu", "the Transformer: BLEU of its greedy translations of the test set", 14),
    Claim(
        "ch12.bahdanau_length_drop",
        "Bahdanau's model: BLEU on sentences of 1-4 tokens minus BLEU on those of 8 or more",
        1,
    ),
    Claim("ch12.transformer_lead", "how far the Transformer leads Bahdanau's model, in BLEU", 0),
    Claim(
        "ch12.crossing_share",
        "share of test sentences in which Bahdanau's attention puts two words in the other order",
        0.15,
        at_least=False,
    ),
)


def _format(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def measurements(path: str | Path = ROBUSTNESS_RESULTS) -> dict[str, Any]:
    """Everything `make robustness` recorded: its runs, its matrix of settings and each claim's spread.

    Raises FileNotFoundError when the file is missing, ValueError when it holds another format."""
    path = Path(path)
    results = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(results, dict) or results.get("format") != RESULTS_FORMAT:
        found = results.get("format") if isinstance(results, dict) else type(results).__name__
        raise ValueError(f"{path} holds format {found!r}, expected {RESULTS_FORMAT!r}")
    return results


def measured(key: str, path: str | Path = ROBUSTNESS_RESULTS) -> dict[str, Any] | None:
    """The spread `make robustness` measured for claim `key` ({"min", "median", "max", "runs", ...}), or None
    when the results file or the claim is missing."""
    path = Path(path)
    if not path.is_file():
        return None
    results = json.loads(path.read_text(encoding="utf-8"))
    return results.get("claims", {}).get(key)


def by_seed(key: str, path: str | Path = ROBUSTNESS_RESULTS) -> dict[int, list[float]]:
    """Every value `make robustness` recorded for claim `key`, grouped by model seed: {seed: [values]}, seeds
    in increasing order, each seed's values over the machines and settings it ran under.

    A chapter weighs a difference against the spread between seeds with it. Raises KeyError for an unknown
    claim, FileNotFoundError or ValueError as `measurements`."""
    if key not in CLAIMS:
        raise KeyError(f"claim {key!r} is unknown; the claims are {sorted(CLAIMS)}")
    values: dict[int, list[float]] = {}
    for run in measurements(path)["runs"]:
        if key in run.get("claims", {}):
            values.setdefault(run["seed"], []).append(float(run["claims"][key]))
    return dict(sorted(values.items()))


def expected(key: str, path: str | Path = ROBUSTNESS_RESULTS) -> str:
    """Where other seeds and machines land for claim `key` ("other seeds and machines: 92.1 to 96.5"), or ""
    when it has not been measured."""
    stats = measured(key, path)
    if stats is None:
        return ""
    low, high = _format(stats["min"]), _format(stats["max"])
    if low == high:
        return "the same on other seeds and machines"
    return f"other seeds and machines: {low} to {high}"


def check(key: str, value: float, path: str | Path = ROBUSTNESS_RESULTS, *, compare: bool = True) -> str:
    """Assert that claim `key` holds for `value`; return the sentence a chapter prints (see the module doc).

    compare: False when `value` comes from data the claim was not measured on (chapter 12 on a learner's
    own pair file): then the sentence says only what was measured, with no range, nothing is asserted and
    nothing is logged. Raises KeyError for an unknown claim, AssertionError when a compared value misses its
    bar (NaN always does).
    """
    if key not in CLAIMS:
        raise KeyError(f"claim {key!r} is unknown; the claims are {sorted(CLAIMS)}")
    claim = CLAIMS[key]
    value = float(value)
    if not compare:
        return f"{claim.text}: {_format(value)}"
    _log(key, value)
    spread = expected(key, path)
    sentence = f"{claim.text}: {_format(value)}" + (f" ({spread})" if spread else "")
    if not claim.holds(value):
        raise AssertionError(
            f"{sentence}\nThis result is wrong: claim {key} needs a value {claim.relation} "
            f"{_format(claim.bar)}, got {_format(value)}."
        )
    return sentence


def _log(key: str, value: float) -> None:
    log = os.environ.get(LOG_VARIABLE)
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps({"key": key, "value": value}) + "\n")


def read_log(path: str | Path) -> dict[str, float]:
    """The claims `check` logged to `path`, {key: value} (the last value of a key wins); {} if no file."""
    path = Path(path)
    if not path.is_file():
        return {}
    entries = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {entry["key"]: float(entry["value"]) for entry in entries}
