"""The questions chapters 9 and 10 ask of their seed studies: one target measure per change, named in the
package before the differences are read, and each change read against the plain model of the same seed."""

from __future__ import annotations

import json

import pytest

from attn_course.course import RESULTS, diagnosis_study, dynamics
from attn_course.measure import significance

STUDY = json.loads((RESULTS / "dynamics_seeds.json").read_text(encoding="utf-8"))


def test_chapter_9_asks_each_change_its_target_and_bleu_and_nothing_else():
    assert list(dynamics.TARGETS) == list(dynamics.BASELINES)           # one target per change, in order
    assert set(dynamics.TARGETS.values()) <= set(dynamics.MEASURES) - {"bleu"}
    assert len(dynamics.QUESTIONS) == 2 * len(dynamics.BASELINES) == 20
    assert {measure for variant, measure in dynamics.QUESTIONS if variant == "no clipping"} == {
        "train_loss", "bleu"}
    assert all(set(dynamics.MEASURES) <= set(run) for run in STUDY["runs"])   # the study records each


def test_chapter_9_reads_a_change_as_one_of_its_questions():
    differences = list(dynamics.paired(STUDY["runs"], "no clipping", "bleu").values())
    alone = significance.compare(differences)
    asked = dynamics.compare(STUDY["runs"], "no clipping", "bleu")
    assert asked == significance.compare(differences, questions=len(dynamics.QUESTIONS))
    assert asked.low < alone.low and asked.mean == alone.mean


def test_the_seed_spread_is_the_standard_deviation_over_one_variants_runs():
    runs = [{"variant": "teacher forcing", "seed": s, "bleu": b} for s, b in enumerate([60.0, 70.0, 80.0])]
    assert dynamics.seed_spread(runs, "teacher forcing", "bleu") == pytest.approx(10.0)
    with pytest.raises(ValueError, match="variant='no clipping' has 0 runs, expected 2 or more"):
        dynamics.seed_spread(runs, "no clipping", "bleu")


def rows(*entries: tuple[int, str, float, float]) -> dict:
    return {(seed, activation, dropout): {"bleu": bleu} for seed, activation, dropout, bleu in entries}


def test_chapter_10_pairs_each_model_with_the_plain_model_of_its_seed_in_seed_order():
    study = rows((1, "tanh", 0.0, 50.0), (0, "tanh", 0.0, 40.0),
                 (0, "relu", 0.0, 45.0), (1, "relu", 0.0, 49.0))
    assert diagnosis_study.paired(study, "bleu", "relu", 0.0) == [5.0, -1.0]
    with pytest.raises(ValueError, match=r"no pair \('tanh', 0.3\) and \('tanh', 0.0\) for seeds \[0, 1\]"):
        diagnosis_study.paired(study, "bleu", "tanh", 0.3)


def test_chapter_10_asks_the_relu_score_and_every_dropout_each_measure():
    assert len(diagnosis_study.QUESTIONS) == 4 * len(diagnosis_study.MEASURES) == 12
    assert ("tanh", 0.0, "bleu") not in diagnosis_study.QUESTIONS          # the plain model is the baseline
    study = diagnosis_study.load_results()
    for activation, dropout, measure in diagnosis_study.QUESTIONS:
        result = diagnosis_study.compare(study, measure, activation, dropout)
        assert result.level == pytest.approx(1 - 0.05 / 12)
        assert result.up + result.down + result.tied == len(diagnosis_study.SEEDS)
