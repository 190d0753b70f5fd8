"""Tests for attn_course.course.study: a reduced rerun of the study, its output schema, its summaries."""

import json
import math
from dataclasses import asdict

import pytest

from attn_course import course
from attn_course.course import study as S
from attn_course.course.chapters import VARIANTS, DataConfig, Recipe
from attn_course.training.loop import TrainConfig

RESULTS = course.RESULTS / "luong_variants.json"
BY_LENGTH_RESULTS = RESULTS.with_name("luong_by_length.json")
RUN_KEYS = {"seed", "perplexity", "bleu", "exact_match", "aer_output", "aer_input", "accuracy_output",
            "accuracy_input", "train_cpu_seconds", "parameters"}
LOCAL_KEYS = {"centre_error", "centre_slope"}


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory) -> dict:
    """The reduced study (tiny sizes, 1 epoch, 2 variants per task, 2 seeds), run through the command line."""
    out = tmp_path_factory.mktemp("study") / "quick.json"
    assert S.main(["--quick", "--out", str(out), "--workers", "1"]) == 0
    return S.load_results(out)


def stored_config(config: dict) -> S.StudyConfig:
    """A results file's config as a StudyConfig: a field added to the configuration classes since the file
    was written takes its default (which keeps the old behaviour); a field they no longer have raises
    TypeError."""
    def task(entry: dict) -> S.TaskConfig:
        recipe = Recipe(**{**entry["recipe"], "train": TrainConfig(**entry["recipe"]["train"])})
        return S.TaskConfig(DataConfig(**entry["data"]), tuple(entry["variants"]), recipe,
                            tuple(entry.get("length_bins", ())))
    return S.StudyConfig(task(config["translation"]), task(config["reversal"]), tuple(config["seeds"]))


def check_schema(results: dict, config: S.StudyConfig) -> None:
    assert results["format"] == S.RESULTS_FORMAT
    assert results["config"]["seeds"] == list(config.seeds)
    assert results["runtime_seconds"] > 0
    for task in ("translation", "reversal"):
        variants = results[task]["variants"]
        length_keys = set(S.length_keys(getattr(config, task).length_bins))
        assert [v["name"] for v in variants] == list(getattr(config, task).variants)
        for variant in variants:
            assert variant["kind"] == VARIANTS[variant["name"]].kind
            assert [run["seed"] for run in variant["runs"]] == list(config.seeds)
            is_local = variant["options"].get("attention", "global") != "global"
            for run in variant["runs"]:
                assert set(run) == RUN_KEYS | (LOCAL_KEYS if is_local else set()) | length_keys
                assert all(run[key] is None or 0 <= run[key] <= 100 for key in length_keys)
                assert run["perplexity"] >= 1 and 0 <= run["bleu"] <= 100 and 0 <= run["exact_match"] <= 1
                for key in ("aer_output", "aer_input", "accuracy_output", "accuracy_input"):
                    assert (run[key] is None) == (variant["kind"] == "plain")
                    assert run[key] is None or 0 <= run[key] <= 1
            for key, stats in variant["summary"].items():
                values = [run[key] for run in variant["runs"]]
                if stats is None:
                    assert None in values
                else:
                    assert stats["mean"] == pytest.approx(sum(values) / len(values))
                    assert stats["std"] >= 0


def test_quick_study_writes_the_documented_schema(quick_results):
    check_schema(quick_results, S.QUICK)


def test_quick_study_is_reproducible_for_a_seed(quick_results):
    run = quick_results["translation"]["variants"][0]["runs"][0]
    again = S.run_one(S.QUICK.translation, quick_results["translation"]["variants"][0]["name"], run["seed"])
    for key in ("perplexity", "bleu", "aer_output"):
        assert again[key] == pytest.approx(run[key], rel=1e-5)


@pytest.mark.skipif(not RESULTS.exists(), reason="attn_course/course/results/luong_variants.json not generated yet")
def test_committed_results_match_the_full_configuration():
    results = S.load_results(RESULTS)
    check_schema(results, S.FULL)
    assert stored_config(results["config"]) == S.FULL


@pytest.mark.skipif(not BY_LENGTH_RESULTS.exists(), reason="attn_course/course/results/luong_by_length.json not generated yet")
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


def test_quick_study_scores_bleu_per_source_length(quick_results):
    keys = S.length_keys(S.QUICK.translation.length_bins)
    run = quick_results["translation"]["variants"][0]["runs"][0]
    assert [key for key in run if key.startswith("bleu_src_")] == keys
    assert all(key not in run for run in quick_results["reversal"]["variants"][0]["runs"] for key in keys)


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


def test_results_table_formats_mean_and_std(quick_results):
    rows = S.results_table(quick_results, "translation", ["bleu", "aer_output"])
    assert [row["variant"] for row in rows] == list(S.QUICK.translation.variants)
    assert all(" ± " in row["bleu"] for row in rows)


def test_per_seed_pairs_two_variants_run_by_run(quick_results):
    results = json.loads(json.dumps(quick_results))
    runs = results["translation"]["variants"][0]["runs"]
    runs.reverse()                                           # stored order does not matter: seed order does
    bleu = S.per_seed(results, "translation", "bahdanau", "bleu")
    assert bleu == [run["bleu"] for run in sorted(runs, key=lambda run: run["seed"])]
    assert len(S.per_seed(results, "translation", "local-p-general", "centre_error")) == len(S.QUICK.seeds)


def test_per_seed_refuses_a_missing_variant_score_or_seed(quick_results):
    with pytest.raises(ValueError, match="has no variant 'global-dot'"):
        S.per_seed(quick_results, "translation", "global-dot", "bleu")
    with pytest.raises(ValueError, match="no score 'centre_error' in every run"):
        S.per_seed(quick_results, "translation", "bahdanau", "centre_error")
    results = json.loads(json.dumps(quick_results))
    results["translation"]["variants"][0]["runs"].pop()
    with pytest.raises(ValueError, match="expected the study's seeds"):
        S.per_seed(results, "translation", "bahdanau", "bleu")


def test_load_results_rejects_other_files(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="format 'something else', expected 'attn_course.study/1'"):
        S.load_results(path)
