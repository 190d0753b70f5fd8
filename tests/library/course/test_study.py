"""Tests for attn_course.course.study: its configurations, the committed results chapter 5 reads, and the
readers and summaries over them (a fresh run of the study is tested with the tools that run it:
tests/tools/test_studies.py)."""

import json
import math
from dataclasses import asdict

import pytest
from study_results import check_schema

from attn_course import course
from attn_course.course import study as S
from attn_course.course.chapters import DataConfig, Recipe
from attn_course.training.loop import TrainConfig

RESULTS = course.RESULTS / "luong_variants.json"
BY_LENGTH_RESULTS = RESULTS.with_name("luong_by_length.json")


@pytest.fixture(scope="module")
def committed() -> dict:
    """The results chapter 5 reads: every variant of FULL, three seeds."""
    return S.load_results(RESULTS)


def stored_config(config: dict) -> S.StudyConfig:
    """A results file's config as a StudyConfig: a field added to the configuration classes since the file
    was written takes its default (which keeps the old behaviour); a field they no longer have raises
    TypeError."""
    def task(entry: dict) -> S.TaskConfig:
        recipe = Recipe(**{**entry["recipe"], "train": TrainConfig(**entry["recipe"]["train"])})
        return S.TaskConfig(DataConfig(**entry["data"]), tuple(entry["variants"]), recipe,
                            tuple(entry.get("length_bins", ())))
    return S.StudyConfig(task(config["translation"]), task(config["reversal"]), tuple(config["seeds"]))


def test_committed_results_match_the_full_configuration(committed):
    check_schema(committed, S.FULL)
    assert stored_config(committed["config"]) == S.FULL


def test_committed_by_length_results_match_their_configuration():
    results = S.load_results(BY_LENGTH_RESULTS)
    check_schema(results, S.BY_LENGTH)
    assert stored_config(results["config"]) == S.BY_LENGTH
    keys = S.length_keys(S.BY_LENGTH.translation.length_bins)
    for variant in results["translation"]["variants"]:
        assert all(run[key] is not None for run in variant["runs"] for key in keys)


def test_by_length_study_trains_the_full_studys_translation_models():
    """Same data, recipe and seeds as the committed study: its seeds 0-2 train that study's models."""
    full, by_length = S.FULL.translation, S.BY_LENGTH.translation
    assert (by_length.data, by_length.recipe) == (full.data, full.recipe)
    assert set(by_length.variants) <= set(full.variants) and set(S.FULL.seeds) <= set(S.BY_LENGTH.seeds)
    assert S.BY_LENGTH.reversal.variants == ()


def test_length_keys_name_each_half_open_bin_by_its_first_and_last_length():
    assert S.length_key(3, 10) == "bleu_src_3_9"
    assert S.length_keys([3, 10, 17]) == ["bleu_src_3_9", "bleu_src_10_16"]
    assert S.length_keys([]) == []


def test_stored_config_reads_back_what_the_study_writes():
    assert stored_config(json.loads(json.dumps(asdict(S.BY_LENGTH)))) == S.BY_LENGTH
    changed = json.loads(json.dumps(asdict(S.FULL)))
    changed["translation"]["recipe"]["train"]["epochs"] = 3
    assert stored_config(changed) != S.FULL


def test_summarise_gives_mean_sample_std_and_none_for_missing_scores():
    runs = [{"variant": "v", "seed": 0, "bleu": 10.0, "aer_output": None},
            {"variant": "v", "seed": 1, "bleu": 20.0, "aer_output": None}]
    summary = S.summarise(runs)
    assert summary["bleu"] == {"mean": 15.0, "std": pytest.approx(math.sqrt(50))}
    assert summary["aer_output"] is None
    assert S.summarise(runs[:1])["bleu"] == {"mean": 10.0, "std": 0.0}


def test_results_table_formats_mean_and_std(committed):
    rows = S.results_table(committed, "translation", ["bleu", "aer_output"])
    assert [row["variant"] for row in rows] == list(S.FULL.translation.variants)
    assert all(" ± " in row["bleu"] for row in rows)


def test_per_seed_pairs_two_variants_run_by_run(committed):
    results = json.loads(json.dumps(committed))
    runs = next(v["runs"] for v in results["translation"]["variants"] if v["name"] == "bahdanau")
    runs.reverse()                                           # stored order does not matter: seed order does
    bleu = S.per_seed(results, "translation", "bahdanau", "bleu")
    assert bleu == [run["bleu"] for run in sorted(runs, key=lambda run: run["seed"])]
    assert len(S.per_seed(results, "translation", "local-p-general", "centre_error")) == len(S.FULL.seeds)


def test_per_seed_refuses_a_missing_variant_score_or_seed(committed):
    with pytest.raises(ValueError, match="has no variant 'global-dot'"):
        S.per_seed(committed, "reversal", "global-dot", "bleu")
    with pytest.raises(ValueError, match="no score 'centre_error' in every run"):
        S.per_seed(committed, "translation", "bahdanau", "centre_error")
    results = json.loads(json.dumps(committed))
    next(v for v in results["translation"]["variants"] if v["name"] == "bahdanau")["runs"].pop()
    with pytest.raises(ValueError, match="expected the study's seeds"):
        S.per_seed(results, "translation", "bahdanau", "bleu")


def test_load_results_rejects_other_files(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="format 'something else', expected 'attn_course.study/1'"):
        S.load_results(path)
