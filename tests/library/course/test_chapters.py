"""Tests for attn_course.course.chapters: variants' sizes, one way from a recipe to a trained model, training
cached in checkpoints and in a second process."""

from dataclasses import replace

import pytest
import torch

from attn_course.course import chapters as C
from attn_course.data.tasks import Example
from attn_course.models.decoders import LuongDecoder
from attn_course.training.loop import TrainConfig
from attn_course.training.runtime import seed_everything


def small_reversal():
    data = C.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    recipe = C.Recipe(embed_size=4, decoder_hiddens=6, window=2, train=TrainConfig(epochs=0))
    return data, recipe


def test_unknown_variant_is_refused():
    data = C.translation_data(30, max_len=6)
    with pytest.raises(ValueError, match="variant 'global-gneral' is unknown"):
        C.build_variant("global-gneral", data, C.Recipe(embed_size=4, decoder_hiddens=4))


def test_odd_hidden_size_is_refused():
    with pytest.raises(ValueError, match="decoder_hiddens=5, expected an even number"):
        C.Recipe(decoder_hiddens=5)


@pytest.mark.parametrize("name", ["no attention", "bahdanau", "global-dot", "global-location", "local-p-dot"])
def test_every_variant_reads_an_encoder_of_the_decoders_size(name):
    data = C.translation_data(30, max_len=6)
    model = C.build_variant(name, data, C.Recipe(embed_size=4, decoder_hiddens=6))
    assert model.encoder.bidirectional and model.encoder.enc_size == 6 == model.decoder.num_hiddens


def test_local_p_decoder_is_used_for_local_p_variants():
    data, recipe = small_reversal()
    model = C.build_variant("local-p-general", data, replace(recipe, window=3))
    assert isinstance(model.decoder, LuongDecoder)
    assert model.decoder.alignment == "local-p" and model.decoder.window == 3


def test_fit_batches_by_the_config_and_validates_unless_told_not_to():
    data, recipe = small_reversal()                                     # 32 training pairs
    config = TrainConfig(epochs=2, batch_size=8, lr=1e-2)
    history = C.fit(C.build_variant("global-general", data, recipe), data, config, seed=0, device="cpu")
    assert len(history.step_loss) == 2 * 4 and len(history.val_loss) == 2
    assert history.lr == [1e-2] * 8                                     # the config's rate, taken whole
    quiet = C.fit(C.build_variant("global-general", data, recipe), data, config, seed=0, validate=False,
                  device="cpu")
    assert quiet.val_loss == [] and len(quiet.train_loss) == 2


def test_train_variant_is_the_variant_built_with_the_seed_then_fitted_with_the_recipes_training():
    data, recipe = small_reversal()
    recipe = replace(recipe, train=TrainConfig(epochs=2, batch_size=8, lr_decay=0.5))
    model, history = C.train_variant("bahdanau", data, recipe, seed=2, device="cpu")
    seed_everything(2)
    twin = C.build_variant("bahdanau", data, recipe)
    torch.rand(3)                                                       # fit seeds again before training
    assert C.fit(twin, data, recipe.train, seed=2, device="cpu").step_loss == history.step_loss
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_load_or_train_reuses_a_checkpoint_only_for_the_same_settings(tmp_path):
    data = C.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    recipe = C.Recipe(embed_size=4, decoder_hiddens=6, window=2, train=TrainConfig(epochs=1, batch_size=8))
    path = tmp_path / "model.pt"
    first, record = C.load_or_train("local-p-general", data, recipe, seed=0, path=path, device="cpu")
    assert not record["loaded"] and path.is_file() and len(record["train_loss"]) == 1
    again, record = C.load_or_train("local-p-general", data, recipe, seed=0, path=path, device="cpu")
    assert record["loaded"]
    for (name, a), b in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    other, record = C.load_or_train("local-p-general", data, recipe, seed=1, path=path, device="cpu")
    assert not record["loaded"]
    assert not torch.equal(other.decoder.W_s.weight, first.decoder.W_s.weight)


def test_encoder_hiddens_sets_the_encoder_size_per_direction():
    data = C.translation_data(30, max_len=6)
    model = C.build_variant("bahdanau", data, C.Recipe(embed_size=4, decoder_hiddens=6, encoder_hiddens=5))
    assert model.encoder.enc_size == 10 and model.decoder.num_hiddens == 6


@pytest.mark.slow
def test_background_training_trains_in_another_process_and_then_just_loads(tmp_path):
    data = C.reversal_data(40, min_len=4, max_len=7, vocab_size=5)
    recipe = C.Recipe(embed_size=4, decoder_hiddens=6, window=2,
                      train=TrainConfig(epochs=2, batch_size=8, lr_decay=0.5))
    path = tmp_path / "model.pt"
    job = C.BackgroundTraining("global-general", data, recipe, seed=0, path=path, device="cpu")
    assert job.started
    model, record = job.result(timeout=120)
    assert job.done() and record["background"] and not record["loaded"] and len(record["val_loss"]) == 2
    here, _ = C.load_or_train("global-general", data, recipe, seed=0, device="cpu")      # same training here
    for (name, a), b in zip(here.state_dict().items(), model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    again = C.BackgroundTraining("global-general", data, recipe, seed=0, path=path, device="cpu")
    assert not again.started and again.done()
    _, record = again.result()
    assert record["loaded"] and "background" not in record
    with pytest.raises(ValueError, match="variant 'global-nonsense' is unknown"):
        C.BackgroundTraining("global-nonsense", data, recipe, seed=0, path=path)


def test_load_or_train_retrains_over_a_checkpoint_of_an_older_format(tmp_path):
    data, recipe = small_reversal()
    path = tmp_path / "model.pt"
    torch.save({"format": "attn_course.models.seq2seq/1", "config": {"kind": "luong"}, "state_dict": {},
                "metadata": {}}, path)
    model, record = C.load_or_train("global-general", data, recipe, seed=0, path=path, device="cpu")
    assert not record["loaded"] and isinstance(model.decoder, LuongDecoder)
    assert C.load_or_train("global-general", data, recipe, seed=0, path=path, device="cpu")[1]["loaded"]


def test_variant_config_is_what_the_checkpoint_records():
    data, recipe = small_reversal()
    config = C.variant_config("local-p-general", data, recipe)
    assert C.build_variant("local-p-general", data, recipe).config == config
    assert (config.kind, config.attention, config.window) == ("luong", "local-p", recipe.window)
    assert (config.encoder_hiddens, config.decoder_hiddens, config.bidirectional) == (3, 6, True)


def test_data_config_names_the_task_and_its_symbols():
    assert len(C.task_data(C.DataConfig("reversal", 40, 4, 7, vocab_size=5)).train) == 32
    with pytest.raises(ValueError, match="task='copy', expected one of"):
        C.DataConfig("copy", 40, 4, 7)
    with pytest.raises(ValueError, match="vocab_size=None with task='reversal'"):
        C.DataConfig("reversal", 40, 4, 7)


# ------------------------------------------------------------------------------------------ real sentences
def _pairs(n):
    return [Example([f"w{i}", "common", "."], [f"m{i}", "commun", "."]) for i in range(n)]


def test_sample_pairs_draws_with_its_seed_and_keeps_the_corpus_order():
    pairs = _pairs(50)
    drawn = C.sample_pairs(pairs, 10, seed=3)
    assert len(drawn) == 10 and drawn == sorted(drawn, key=pairs.index)
    assert drawn == C.sample_pairs(pairs, 10, seed=3) != C.sample_pairs(pairs, 10, seed=4)
    assert C.sample_pairs(pairs, 80) == pairs                       # fewer than asked: all of them
    with pytest.raises(ValueError, match="num_pairs"):
        C.sample_pairs(pairs, 0)


def test_real_data_splits_by_source_and_leaves_words_seen_once_unknown():
    data = C.real_data(_pairs(200), num_pairs=100, seed=0)
    sources = [{tuple(e.src) for e in part} for part in (data.train, data.val, data.test)]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    assert len(data.train) + len(data.val) + len(data.test) == 100
    assert "common" in data.src_vocab and "w0" not in data.src_vocab      # every w_i is seen once
