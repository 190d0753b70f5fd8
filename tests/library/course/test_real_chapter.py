"""Tests of what chapter 12 (real sentences, any pair file) takes from the package: claims said without a
comparison on other data, the heatmaps' sentences, the spread of its figures over seeds, and models kept
under a name made from what they were trained on."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from attn_course.course import chapters, claims
from attn_course.data.tasks import Example
from attn_course.training import runtime
from attn_course.training.loop import TrainConfig


def _example(src: str, tgt: str = "x y z .") -> Example:
    return Example(src.split(), tgt.split())


# ------------------------------------------------------------------------------------------------ claims
def test_a_claim_on_other_data_is_said_without_a_range_an_assert_or_a_log(tmp_path, monkeypatch):
    log = tmp_path / "claims.jsonl"
    monkeypatch.setenv(claims.LOG_VARIABLE, str(log))
    sentence = claims.check("ch12.transformer_lead", -1.62, compare=False)
    assert sentence == "how far the Transformer leads Bahdanau's model, in BLEU: -1.62"
    assert not log.exists()
    with pytest.raises(AssertionError, match="needs a value >= 0, got -1.62"):
        claims.check("ch12.transformer_lead", -1.62)
    assert "other seeds and machines" in claims.check("ch12.transformer_lead", 3.5)
    with pytest.raises(KeyError):
        claims.check("ch12.no_such_claim", 1.0, compare=False)


# ------------------------------------------------------------------------------------------------ showcase
def test_showcase_keeps_the_shipped_sentences_when_they_are_in_the_test_set():
    test = [_example("a b c d e ."), _example("i love french movies ."),
            _example("i don't care for green tea .")]
    assert chapters.showcase(test, [9, 0, 0]) == test[1:]


def test_showcase_picks_the_most_crossed_sentences_of_moderate_length_when_they_are_not():
    test = [_example("one two ."), _example("a b c d e f"), _example("g h i j k l"),
            _example("m n o p q r"), _example("s t u v w x y z a b c d e")]
    crossings = [9, 1, 4, 4, 9]       # the 3-word and 13-word sentences cross most, but are out of range
    assert chapters.showcase(test, crossings) == [test[2], test[3]]       # equals: the earliest first
    assert chapters.showcase(test, crossings, count=4) == [test[2], test[3], test[1], test[0]]
    half = [_example("i love french movies ."), *test[1:3]]
    assert chapters.showcase(half, [0, 1, 4]) == [half[0], half[2]]     # a shipped one, then the most crossed


def test_showcase_shows_what_there_is_and_refuses_crossings_of_another_length():
    test = [_example("a b")]
    assert chapters.showcase(test, [0]) == test
    with pytest.raises(ValueError, match="crossings has 2 entries, expected one per test sentence = 1"):
        chapters.showcase(test, [0, 1])
    with pytest.raises(ValueError, match="count"):
        chapters.showcase(test, [0], count=0)


# ------------------------------------------------------------------------------------------------ references
def test_other_translation_prefers_three_translations_of_five_words_and_falls_back_to_two():
    test = [_example("a .", "x ."), _example("b .", "u v w x y"), _example("c .", "p q r s t")]
    references = [[["x", "."], ["y", "."]], [["u", "v", "w", "x", "y"], ["k", "l", "m", "n"]],
                  [["p", "q", "r", "s", "t"], ["a", "b"], ["f", "g", "h", "i", "j"]]]
    assert chapters.other_translation(test, references) == (2, ["f", "g", "h", "i", "j"])
    assert chapters.other_translation(test[:2], references[:2]) == (1, ["k", "l", "m", "n"])
    assert chapters.other_translation(test[:1], references[:1]) is None    # its other one has no 4-gram


# ------------------------------------------------------------------------------------------------ spread
def test_measured_spread_reads_every_training_of_the_shipped_results():
    spread = chapters.measured_spread("ch12.attention_gain")
    stats = claims.measured("ch12.attention_gain")
    assert (spread.low, spread.high, spread.trainings) == (stats["min"], stats["max"], stats["runs"])
    assert spread.seeds == 5 and spread.low <= spread.mean <= spread.high and spread.sd > 0
    with pytest.raises(KeyError, match="ch12.nothing"):
        chapters.measured_spread("ch12.nothing")


# ------------------------------------------------------------------------------------------------ cache
def _data():
    pairs = [Example([f"w{i}", "common", "."], [f"m{i}", "commun", "."]) for i in range(60)]
    return chapters.real_data(pairs, num_pairs=50)


def test_models_of_other_pair_files_recipes_seeds_or_draws_are_kept_in_other_files(tmp_path, monkeypatch):
    monkeypatch.setenv(runtime.ARTIFACTS_VARIABLE, str(tmp_path))
    data, recipe = _data(), chapters.REAL_RECIPE
    path = chapters.real_model_path("no attention", "0123456789abcdef", data, recipe, 0)
    assert path.parent == tmp_path and path.name.startswith("ch12_no_attention-") and path.suffix == ".pt"
    assert path == chapters.real_model_path("no attention", "0123456789abcdef", data, recipe, 0)
    others = [chapters.real_model_path("no attention", "fedcba9876543210", data, recipe, 0),
              chapters.real_model_path("no attention", "0123456789abcdef", data, recipe, 1),
              chapters.real_model_path("no attention", "0123456789abcdef",
                                       chapters.real_data(data.train + data.val, num_pairs=40), recipe, 0),
              chapters.real_model_path("no attention", "0123456789abcdef", data,
                                       replace(recipe, train=TrainConfig(epochs=3)), 0),
              chapters.real_model_path("bahdanau", "0123456789abcdef", data, recipe, 0)]
    assert len({path, *others}) == 6


def test_artifact_path_hashes_json_values_and_dataclasses_and_refuses_other_values(tmp_path, monkeypatch):
    monkeypatch.setenv(runtime.ARTIFACTS_VARIABLE, str(tmp_path))
    path = runtime.artifact_path("m", recipe=chapters.REAL_RECIPE, seed=0)
    assert path == runtime.artifact_path("m", seed=0, recipe=json.loads(json.dumps(
        {"embed_size": 48, "decoder_hiddens": 96, "encoder_hiddens": 48, "window": 10,
         "train": chapters.REAL_RECIPE.train.__dict__})))
    with pytest.raises(TypeError, match=r"key data=\{1, 2\} is a set, expected JSON values"):
        runtime.artifact_path("m", data={1, 2})
