"""Tests for attn_course.experiments: a reduced rerun of the study, its output schema, the scoring helpers."""

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from attn_course import experiments as X
from attn_course.data import Example
from attn_course.decoders import LuongDecoder

RESULTS = Path(__file__).resolve().parent.parent / "results" / "luong_variants.json"
RUN_KEYS = {"seed", "perplexity", "bleu", "exact_match", "aer_output", "aer_input", "accuracy_output",
            "accuracy_input", "train_cpu_seconds", "parameters"}
LOCAL_KEYS = {"centre_error", "centre_slope"}


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory) -> dict:
    """The reduced study (tiny sizes, 1 epoch, 2 variants per task, 2 seeds), run through the command line."""
    out = tmp_path_factory.mktemp("study") / "quick.json"
    assert X.main(["--quick", "--out", str(out), "--workers", "1"]) == 0
    return X.load_results(out)


def check_schema(results: dict, config: X.StudyConfig) -> None:
    assert results["format"] == X.RESULTS_FORMAT
    assert results["config"]["seeds"] == list(config.seeds)
    assert results["runtime_seconds"] > 0
    for task in ("translation", "reversal"):
        variants = results[task]["variants"]
        assert [v["name"] for v in variants] == list(getattr(config, task).variants)
        for variant in variants:
            assert variant["kind"] == X.VARIANTS[variant["name"]].kind
            assert [run["seed"] for run in variant["runs"]] == list(config.seeds)
            is_local = variant["options"].get("attention", "global") != "global"
            for run in variant["runs"]:
                assert set(run) == RUN_KEYS | (LOCAL_KEYS if is_local else set())
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
    check_schema(quick_results, X.QUICK)


def test_quick_study_is_reproducible_for_a_seed(quick_results):
    run = quick_results["translation"]["variants"][0]["runs"][0]
    again = X.run_one("translation", X.QUICK.translation, quick_results["translation"]["variants"][0]["name"],
                      run["seed"])
    for key in ("perplexity", "bleu", "aer_output"):
        assert again[key] == pytest.approx(run[key], rel=1e-5)


@pytest.mark.skipif(not RESULTS.exists(), reason="results/luong_variants.json not generated yet")
def test_committed_results_match_the_full_configuration():
    results = X.load_results(RESULTS)
    check_schema(results, X.FULL)
    assert results["config"] == json.loads(json.dumps(asdict(X.FULL)))


def test_summarise_gives_mean_sample_std_and_none_for_missing_scores():
    runs = [{"variant": "v", "seed": 0, "bleu": 10.0, "aer_output": None},
            {"variant": "v", "seed": 1, "bleu": 20.0, "aer_output": None}]
    summary = X.summarise(runs)
    assert summary["bleu"] == {"mean": 15.0, "std": pytest.approx(math.sqrt(50))}
    assert summary["aer_output"] is None
    assert X.summarise(runs[:1])["bleu"] == {"mean": 10.0, "std": 0.0}


def test_results_table_formats_mean_and_std(quick_results):
    rows = X.results_table(quick_results, "translation", ["bleu", "aer_output"])
    assert [row["variant"] for row in rows] == list(X.QUICK.translation.variants)
    assert all(" ± " in row["bleu"] for row in rows)


def test_per_seed_pairs_two_variants_run_by_run(quick_results):
    results = json.loads(json.dumps(quick_results))
    runs = results["translation"]["variants"][0]["runs"]
    runs.reverse()                                           # stored order does not matter: seed order does
    bleu = X.per_seed(results, "translation", "bahdanau", "bleu")
    assert bleu == [run["bleu"] for run in sorted(runs, key=lambda run: run["seed"])]
    assert len(X.per_seed(results, "translation", "local-p-general", "centre_error")) == len(X.QUICK.seeds)


def test_per_seed_refuses_a_missing_variant_score_or_seed(quick_results):
    with pytest.raises(ValueError, match="has no variant 'global-dot'"):
        X.per_seed(quick_results, "translation", "global-dot", "bleu")
    with pytest.raises(ValueError, match="no score 'centre_error' in every run"):
        X.per_seed(quick_results, "translation", "bahdanau", "centre_error")
    results = json.loads(json.dumps(quick_results))
    results["translation"]["variants"][0]["runs"].pop()
    with pytest.raises(ValueError, match="expected the study's seeds"):
        X.per_seed(results, "translation", "bahdanau", "bleu")


def test_load_results_rejects_other_files(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="format 'something else', expected 'attn_course.experiments/1'"):
        X.load_results(path)


def test_unknown_variant_is_refused():
    data = X.translation_data(30, max_len=6)
    with pytest.raises(ValueError, match="variant 'global-gneral' is unknown"):
        X.build_variant("global-gneral", data, X.TrainConfig(embed_size=4, num_hiddens=4))


def test_odd_hidden_size_is_refused():
    with pytest.raises(ValueError, match="num_hiddens=5, expected an even number"):
        X.TrainConfig(num_hiddens=5)


@pytest.mark.parametrize("name", ["no attention", "bahdanau", "global-dot", "global-location", "local-p-dot"])
def test_every_variant_reads_an_encoder_of_the_decoders_size(name):
    data = X.translation_data(30, max_len=6)
    model = X.build_variant(name, data, X.TrainConfig(embed_size=4, num_hiddens=6))
    assert model.encoder.bidirectional and model.encoder.enc_size == 6 == model.decoder.num_hiddens


def small_reversal():
    data = X.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    config = X.TrainConfig(embed_size=4, num_hiddens=6, window=2, epochs=0)
    return data, config


def test_forced_attention_has_one_row_per_target_word_plus_eos():
    data, config = small_reversal()
    torch.manual_seed(0)
    model = X.build_variant("global-general", data, config)
    attention = X.forced_attention(model, data.test, data)
    for a, example in zip(attention, data.test, strict=True):
        assert a.shape == (len(example.tgt) + 1, len(example.src) + 1)
        assert torch.allclose(a.sum(1), torch.ones(len(example.tgt) + 1))


def test_forced_attention_refuses_a_model_without_attention():
    data, config = small_reversal()
    model = X.build_variant("no attention", data, config)
    with pytest.raises(ValueError, match="PlainDecoder has no attention"):
        X.forced_attention(model, data.test, data)


def test_alignment_scores_of_the_gold_attention_are_perfect_only_under_its_convention():
    data, _ = small_reversal()
    gold = []
    for example in data.test:
        n = len(example.src)
        a = torch.zeros(n + 1, n + 1)
        a[torch.arange(n), n - 1 - torch.arange(n)] = 1.0   # output convention: step t predicts word t
        a[n, n] = 1.0
        gold.append(a)
    assert X.alignment_scores(gold, data.test, convention="output") == (0.0, 1.0)
    aer, accuracy = X.alignment_scores(gold, data.test, convention="input")
    assert aer > 0.5 and accuracy < 0.5


def test_local_m_centres_are_the_step_clamped_to_the_sentence():
    data, config = small_reversal()
    model = X.build_variant("local-m-general", data, config)
    for p, example in zip(X.window_centres(model, data.test, data), data.test, strict=True):
        n = len(example.src)
        expected = torch.minimum(torch.arange(n + 1.0), torch.tensor(float(n)))
        assert torch.equal(p, expected)


def test_window_centres_refuse_global_attention():
    data, config = small_reversal()
    with pytest.raises(ValueError, match="needs a LuongDecoder"):
        X.window_centres(X.build_variant("global-dot", data, config), data.test, data)


def test_centre_statistics_of_the_anti_diagonal():
    links = {(3 - j, j) for j in range(4)}
    examples = [Example(list("abcd"), list("dcba"), links, links)]
    reversed_centres = [torch.tensor([3.0, 2.0, 1.0, 0.0, 0.0])]
    assert X.centre_statistics(reversed_centres, examples) == {"centre_error": 0.0, "centre_slope": -1.0}
    diagonal = [torch.arange(5.0)]  # local-m's p_t = t: distances 3, 1, 1, 3
    assert X.centre_statistics(diagonal, examples) == {"centre_error": 2.0, "centre_slope": 1.0}


def test_local_p_decoder_is_used_for_local_p_variants():
    data, config = small_reversal()
    model = X.build_variant("local-p-general", data, replace(config, window=3))
    assert isinstance(model.decoder, LuongDecoder)
    assert model.decoder.alignment == "local-p" and model.decoder.window == 3


def test_load_or_train_reuses_a_checkpoint_only_for_the_same_settings(tmp_path):
    data = X.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    config = X.TrainConfig(embed_size=4, num_hiddens=6, window=2, epochs=1, batch_size=8)
    path = tmp_path / "model.pt"
    first, record = X.load_or_train("local-p-general", data, config, seed=0, path=path, device="cpu")
    assert not record["loaded"] and path.is_file() and len(record["train_loss"]) == 1
    again, record = X.load_or_train("local-p-general", data, config, seed=0, path=path, device="cpu")
    assert record["loaded"]
    for (name, a), b in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    other, record = X.load_or_train("local-p-general", data, config, seed=1, path=path, device="cpu")
    assert not record["loaded"]
    assert not torch.equal(other.decoder.W_s.weight, first.decoder.W_s.weight)


def test_encoder_hiddens_sets_the_encoder_size_per_direction():
    data = X.translation_data(30, max_len=6)
    model = X.build_variant("bahdanau", data, X.TrainConfig(embed_size=4, num_hiddens=6, encoder_hiddens=5))
    assert model.encoder.enc_size == 10 and model.decoder.num_hiddens == 6


@pytest.mark.slow
def test_background_training_trains_in_another_process_and_then_just_loads(tmp_path):
    data = X.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    config = X.TrainConfig(embed_size=4, num_hiddens=6, window=2, epochs=2, batch_size=8, lr_decay=0.5)
    path = tmp_path / "model.pt"
    job = X.BackgroundTraining("global-general", data, config, seed=0, path=path, device="cpu")
    assert job.started
    model, record = job.result(timeout=120)
    assert job.done() and record["background"] and not record["loaded"] and len(record["val_loss"]) == 2
    here, _ = X.load_or_train("global-general", data, config, seed=0, device="cpu")      # same training here
    for (name, a), b in zip(here.state_dict().items(), model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    again = X.BackgroundTraining("global-general", data, config, seed=0, path=path, device="cpu")
    assert not again.started and again.done()
    _, record = again.result()
    assert record["loaded"] and "background" not in record
    with pytest.raises(ValueError, match="variant 'global-nonsense' is unknown"):
        X.BackgroundTraining("global-nonsense", data, config, seed=0, path=path)
