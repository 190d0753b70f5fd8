"""Training: the masked loss ignores padding, a short run learns, scheduled sampling's coin and feed, the Noam
schedule, checkpoints round-trip, callbacks run."""

from __future__ import annotations

import math
from dataclasses import asdict
from itertools import pairwise

import pytest
import torch
from torch.nn import functional as F

from attn_course.models.seq2seq import ModelConfig, Seq2Seq
from attn_course.training.loop import (
    History,
    Noam,
    TrainConfig,
    evaluate_loss,
    load_checkpoint,
    masked_cross_entropy,
    noam_rate,
    save_checkpoint,
    scheduled_sampling_logits,
    train,
    warmup_factor,
)


# ----------------------------------------------------------------------------------------------- the loss
def test_masked_loss_is_the_mean_over_real_tokens_only():
    logits = torch.randn(3, 5, 7)
    labels = torch.randint(0, 7, (3, 5))
    lens = torch.tensor([5, 2, 0])
    loss = masked_cross_entropy(logits, labels, lens)
    real = [(0, t) for t in range(5)] + [(1, 0), (1, 1)]
    expected = sum(F.cross_entropy(logits[i, t][None], labels[i, t][None]) for i, t in real) / len(real)
    torch.testing.assert_close(loss, expected)
    total = masked_cross_entropy(logits, labels, lens, reduction="sum")
    torch.testing.assert_close(total, expected * len(real))


def test_masked_loss_ignores_whatever_sits_at_padding():
    logits = torch.randn(2, 4, 5, requires_grad=True)
    labels = torch.randint(0, 5, (2, 4))
    lens = torch.tensor([4, 2])
    loss = masked_cross_entropy(logits, labels, lens)
    loss.backward()
    assert torch.equal(logits.grad[1, 2:], torch.zeros(2, 5))          # padding gets no gradient
    changed_logits, changed_labels = logits.detach().clone(), labels.clone()
    changed_logits[1, 2:] = 1e4                                         # huge logits at padding ...
    changed_labels[1, 2:] = 99                                          # ... and out-of-range labels
    torch.testing.assert_close(masked_cross_entropy(changed_logits, changed_labels, lens), loss.detach())


def test_masked_loss_rejects_bad_shapes_and_empty_batches():
    logits, labels = torch.randn(2, 4, 5), torch.randint(0, 5, (2, 4))
    with pytest.raises(ValueError, match=r"tgt_out has shape \(2, 3\)"):
        masked_cross_entropy(logits, labels[:, :3], torch.tensor([4, 2]))
    with pytest.raises(ValueError, match=r"tgt_valid_lens has shape \(3,\), expected \(batch_size,\) = \(2,"):
        masked_cross_entropy(logits, labels, torch.tensor([4, 2, 1]))
    with pytest.raises(ValueError, match=r"tgt_valid_lens must lie in \[0, T\] = \[0, 4\]"):
        masked_cross_entropy(logits, labels, torch.tensor([5, 2]))
    with pytest.raises(ValueError, match="no real tokens"):
        masked_cross_entropy(logits, labels, torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="logits has shape"):
        masked_cross_entropy(logits[0], labels, torch.tensor([4, 2]))


# ----------------------------------------------------------------------------------------------- training
@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_a_short_training_run_lowers_the_loss_on_the_copy_task(copy_loader, tiny_seq2seq, kind):
    loader, src_vocab, tgt_vocab = copy_loader(64)
    model = tiny_seq2seq(src_vocab, tgt_vocab, kind)
    before = evaluate_loss(model, loader, device="cpu")
    history = train(model, loader, TrainConfig(epochs=8, lr=1e-2), device="cpu", progress=False, seed=0)  # 32
    after = evaluate_loss(model, loader, device="cpu")
    assert len(history.step_loss) == 32 and len(history.train_loss) == 8
    assert after < 0.7 * before
    assert history.train_loss[-1] < history.train_loss[0]
    assert not model.training                                            # train leaves the model in eval mode


def test_training_is_reproducible_with_a_seed(copy_loader, tiny_seq2seq):
    losses = []
    for run in range(2):
        loader, src_vocab, tgt_vocab = copy_loader(num_pairs=32)   # a fresh loader: its epochs restart
        model = tiny_seq2seq(src_vocab, tgt_vocab, dropout=0.2, seed=1)
        torch.rand(run + 1)                                         # the global generator moves on ...
        history = train(model, loader, TrainConfig(epochs=2), device="cpu", progress=False, seed=3)
        losses.append(history.step_loss)
    assert losses[0] == losses[1]                                   # ... but seed= resets dropout's draws


def test_callback_runs_after_every_epoch_sees_validation_and_can_stop_training(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=32)
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    seen = []

    def callback(epoch, history, model_):
        seen.append((epoch, len(history.train_loss), len(history.val_loss), model_ is model))
        return epoch == 1                                                # stop after the second epoch

    history = train(model, loader, TrainConfig(epochs=5), device="cpu", progress=False, val_loader=loader,
                    callback=callback)
    assert seen == [(0, 1, 1, True), (1, 2, 2, True)]
    assert isinstance(history, History) and len(history.seconds) == len(history.cpu_seconds) == 2
    assert history.val_perplexity == [math.exp(x) for x in history.val_loss]


def test_lr_decay_multiplies_the_learning_rate_after_every_epoch(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=16)
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    rates = []
    halving = TrainConfig(epochs=3, lr_decay=0.5)
    train(model, loader, halving, optimizer=optimizer, device="cpu", progress=False,
          callback=lambda epoch, history, model_: rates.append(optimizer.param_groups[0]["lr"]))
    assert rates == pytest.approx([0.005, 0.0025, 0.00125])
    train(model, loader, TrainConfig(epochs=1), optimizer=optimizer, device="cpu", progress=False)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.00125)     # no decay unless asked


class FakeClock:
    """A clock for tqdm that moves on `step` seconds each time it is read, however fast the machine is."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_the_progress_bar_redraws_at_most_twice_a_second(copy_loader, tiny_seq2seq, monkeypatch):
    """In a notebook every redraw is a widget message; one per batch overflowed the kernel's IOPub queue
    and made nbval time out waiting for a training cell's output."""
    import tqdm.std

    from attn_course.training import loop as training

    clock, redrawn_at = FakeClock(step=0.1), []

    class Spy(training.tqdm):
        monitor_interval = 0  # no monitor thread reading the real clock

        def refresh(self, *args, **kwargs):
            redrawn_at.append(clock.now)
            return super().refresh(*args, **kwargs)

    monkeypatch.setattr(tqdm.std, "time", clock)  # what every tqdm bar reads the time from
    # An earlier bar in this process may have started tqdm's monitor thread, which refreshes every bar
    # (all classes share one list of bars) after 10 s of real time: stop it, or a slow machine sees extra
    # redraws. The monitor is kept on the class of the bar that started it, e.g. tqdm.auto's, so look at
    # every class from the course's bar up to tqdm's own.
    for cls in {*training.tqdm.__mro__, tqdm.std.tqdm}:
        if cls.__dict__.get("monitor") is not None:
            cls.__dict__["monitor"].exit()
            monkeypatch.setattr(cls, "monitor", None)
    monkeypatch.setattr(tqdm.std.tqdm, "monitor_interval", 0)
    monkeypatch.setattr(training, "tqdm", Spy)
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=64, batch_size=2)  # 32 batches per epoch
    train(tiny_seq2seq(src_vocab, tgt_vocab), loader, TrainConfig(epochs=2), device="cpu", progress=True)
    during = redrawn_at[1:]  # the first draw is the empty bar, when it is created
    assert 1 <= len(during) < 64 / 4  # not one per batch
    assert all(later - earlier >= 0.5 for earlier, later in pairwise(during))


def test_gradients_are_clipped_to_the_given_norm(copy_loader, tiny_seq2seq, monkeypatch):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=16)
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    norms = []
    clip = torch.nn.utils.clip_grad_norm_

    def spy(parameters, max_norm):
        parameters = list(parameters)
        before = clip(parameters, max_norm)                                  # the norm before clipping
        norms.append(float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters]))))
        return before

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    train(model, loader, TrainConfig(epochs=1, lr=1e-3, clip=1e-3), device="cpu", progress=False)
    assert norms and max(norms) <= 1e-3 * (1 + 1e-4)


def test_a_train_config_refuses_a_bad_field_by_name_when_it_is_made():
    with pytest.raises(ValueError, match="epochs must be an int >= 0, got -1"):
        TrainConfig(epochs=-1)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got 0"):
        TrainConfig(lr=0)
    with pytest.raises(ValueError, match="clip must be a finite number > 0, got 0"):
        TrainConfig(clip=0)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match=r"lr_decay must be a finite number in \(0, 1\], got "):
            TrainConfig(lr_decay=bad)
    with pytest.raises(ValueError, match="lr_schedule=0.5, expected None or a callable"):
        TrainConfig(lr_schedule=0.5)


def test_train_refuses_what_is_not_a_train_config_and_batches_without_their_fields(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=16)
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match=r"config is a dict, expected a TrainConfig: train\(model, load"):
        train(model, loader, {"epochs": 1}, progress=False)
    with pytest.raises(ValueError, match="a batch must have the fields"):
        train(model, [torch.zeros(2, 3)], TrainConfig(epochs=1), device="cpu", progress=False)


# ------------------------------------------------------------------------ scheduled sampling's coin and feed
def recorded_inputs(model):
    """Wrap model.decoder.step to record every y_prev it is fed; returns the list it fills."""
    fed, step = [], model.decoder.step

    def recording(y_prev, state):
        fed.append(y_prev.clone())
        return step(y_prev, state)

    model.decoder.step = recording
    return fed


@pytest.fixture
def big_batch(copy_loader, tiny_seq2seq):
    """A factory: big_batch(num_pairs=300) -> (one batch of num_pairs copy pairs, a tiny model)."""
    def make(num_pairs=300):
        loader, src_vocab, tgt_vocab = copy_loader(num_pairs=num_pairs, batch_size=num_pairs)
        return next(iter(loader)), tiny_seq2seq(src_vocab, tgt_vocab)
    return make


def test_a_coin_per_sequence_makes_every_step_of_a_sentence_read_the_same_source(big_batch):
    batch, model = big_batch()
    fed = recorded_inputs(model)
    with torch.no_grad():
        logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.5,
                                           torch.Generator().manual_seed(0), coin="sequence")
    steps = range(1, batch.tgt_in.shape[1])
    gold = torch.stack([fed[t] == batch.tgt_in[:, t] for t in steps], 1)             # (B, T - 1)
    guess = torch.stack([fed[t] == logits[:, t - 1].argmax(-1) for t in steps], 1)
    teacher_forced, free_running = gold.all(1), guess.all(1)
    assert bool((teacher_forced | free_running).all())             # no sentence mixes the two sources
    only_gold = teacher_forced & ~free_running                     # told apart where the guess was wrong
    only_free = free_running & ~teacher_forced
    assert int(only_gold.sum()) > 30 and int(only_free.sum()) > 30


def test_a_coin_per_word_mixes_the_sources_within_a_sentence(big_batch):
    batch, model = big_batch()
    fed = recorded_inputs(model)
    with torch.no_grad():
        logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.5,
                                           torch.Generator().manual_seed(0))
    steps = range(1, batch.tgt_in.shape[1])
    gold = torch.stack([fed[t] == batch.tgt_in[:, t] for t in steps], 1)
    guess = torch.stack([fed[t] == logits[:, t - 1].argmax(-1) for t in steps], 1)
    mixed = (gold & ~guess).any(1) & (guess & ~gold).any(1)
    assert int(mixed.sum()) > 30


def test_sampled_feeding_draws_the_models_word_from_its_softmax_with_the_generator(big_batch):
    batch, model = big_batch()
    fed = recorded_inputs(model)
    with torch.no_grad():
        logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.0,
                                           torch.Generator().manual_seed(3), feed="sample")
    generator = torch.Generator().manual_seed(3)
    for t in range(1, batch.tgt_in.shape[1]):                      # ratio 0: no coins, one draw per step
        expected = torch.multinomial(logits[:, t - 1].softmax(-1), 1, generator=generator)[:, 0]
        assert torch.equal(fed[t], expected)
    argmax = torch.stack([fed[t] == logits[:, t - 1].argmax(-1) for t in range(1, len(fed))])
    assert not bool(argmax.all())                                  # a sample is not always the argmax


def test_sampled_words_follow_the_softmax_probabilities(big_batch):
    batch, model = big_batch(num_pairs=400)
    fed = recorded_inputs(model)
    with torch.no_grad():
        logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.0,
                                           torch.Generator().manual_seed(0), feed="sample")
    chosen = torch.stack([logits[:, t - 1].softmax(-1).gather(1, fed[t][:, None])[:, 0]
                          for t in range(1, len(fed))])
    expected = torch.stack([(logits[:, t - 1].softmax(-1) ** 2).sum(-1) for t in range(1, len(fed))])
    # E[p(sampled word)] = sum_v p_v^2 under the softmax; an argmax feed would give max_v p_v instead
    assert float(chosen.mean()) == pytest.approx(float(expected.mean()), abs=0.02)


def test_train_passes_the_coin_and_feed_on_and_refuses_unknown_ones(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=32)
    losses = {}
    for coin, feed in (("word", "argmax"), ("sequence", "argmax"), ("word", "sample")):
        config = TrainConfig(epochs=1, teacher_forcing=0.5, coin=coin, feed=feed)
        losses[coin, feed] = train(tiny_seq2seq(src_vocab, tgt_vocab), loader, config, device="cpu",
                                   progress=False).step_loss
    assert len(set(map(tuple, losses.values()))) == 3
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match=r"coin='batch', expected one of \('word', 'sequence'\)"):
        TrainConfig(coin="batch")
    with pytest.raises(ValueError, match=r"feed='top2', expected one of \('argmax', 'sample'\)"):
        scheduled_sampling_logits(model, *next(iter(loader))[:2], next(iter(loader)).tgt_in, 0.5,
                                  feed="top2")


# ----------------------------------------------------------------------------------------------- Noam
def test_noam_follows_vaswani_et_al_eq_3_and_peaks_at_the_warmup_step():
    d_model, warmup = 512, 4000
    for step in (0, 1, 99, 3998, 3999, 4000, 10**5):
        n = step + 1
        assert noam_rate(step, d_model=d_model, warmup_steps=warmup) == pytest.approx(
            d_model**-0.5 * min(n**-0.5, n * warmup**-1.5))
    rates = [noam_rate(i, d_model=d_model, warmup_steps=warmup) for i in range(3 * warmup)]
    assert rates.index(max(rates)) == warmup - 1                   # the paper's step_num = warmup_steps
    assert max(rates) == pytest.approx(Noam(d_model, warmup).peak) == pytest.approx((512 * 4000) ** -0.5)
    assert rates[2 * warmup - 1] == pytest.approx(max(rates) / math.sqrt(2))   # then 1 / sqrt(step)


def test_noams_rise_is_the_linear_warmup_ramp_up_to_its_peak():
    noam = Noam(d_model=32, warmup_steps=30)
    for step in range(30):
        assert noam(step) == pytest.approx(noam.peak * warmup_factor(step, 30))


def test_train_multiplies_the_rate_by_lr_schedule_and_records_it(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader(64)                 # 4 batches per epoch
    noam = Noam(d_model=16, warmup_steps=3)
    config = TrainConfig(epochs=2, lr=2.0, lr_schedule=noam)
    history = train(tiny_seq2seq(src_vocab, tgt_vocab), loader, config, device="cpu", progress=False)
    assert history.lr == pytest.approx([2.0 * noam(i) for i in range(8)])
    assert asdict(TrainConfig(lr_schedule=noam))["lr_schedule"] == {"d_model": 16, "warmup_steps": 3}
    with pytest.raises(ValueError, match="warmup_steps must be an int >= 1, got 0"):
        Noam(d_model=16, warmup_steps=0)
    with pytest.raises(ValueError, match=r"lr_schedule\(step\) must be a finite number >= 0"):
        train(tiny_seq2seq(src_vocab, tgt_vocab), loader, TrainConfig(epochs=1, lr_schedule=lambda i: -1.0),
              device="cpu", progress=False)


# ----------------------------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("options", [dict(kind="bahdanau", cell="lstm", num_layers=2),
                                     dict(kind="luong", score="location", max_len=9, attention="local-p"),
                                     dict(kind="plain")])
def test_checkpoint_round_trip_rebuilds_the_same_model(copy_loader, tiny_seq2seq, tmp_path, options):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=16)
    model = tiny_seq2seq(src_vocab, tgt_vocab, **options)
    train(model, loader, TrainConfig(epochs=1), device="cpu", progress=False)
    path = save_checkpoint(model, tmp_path / "model.pt", src_tokens=src_vocab.idx_to_token, note="copy")
    loaded, metadata = load_checkpoint(path, device="cpu")
    assert metadata == {"src_tokens": src_vocab.idx_to_token, "note": "copy"}
    assert loaded.config == model.config and not loaded.training
    batch = next(iter(loader))
    expected = model.eval()(batch.src, batch.src_valid_lens, batch.tgt_in)
    actual = loaded(batch.src, batch.src_valid_lens, batch.tgt_in)
    torch.testing.assert_close(actual[0], expected[0], rtol=0, atol=0)


def test_load_checkpoint_refuses_other_files(tmp_path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="is not an attn_course checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


def test_load_checkpoint_names_the_format_of_an_older_checkpoint(tmp_path):
    old = {"kind": "bahdanau", "encoder": {}, "decoder": {}}
    torch.save({"format": "attn_course.seq2seq/1", "config": old, "state_dict": {}, "metadata": {}},
               tmp_path / "old.pt")
    with pytest.raises(ValueError, match=r"format 'attn_course.seq2seq/1', expected 'attn_course.seq2seq/2' "
                                         r"\(train the model again\)"):
        load_checkpoint(tmp_path / "old.pt")


def test_checkpoint_records_the_model_config_as_plain_values(copy_loader, tiny_seq2seq, tmp_path):
    _, src_vocab, tgt_vocab = copy_loader(num_pairs=16)
    model = tiny_seq2seq(src_vocab, tgt_vocab, kind="luong", score="concat", attn_hiddens=5)
    stored = torch.load(save_checkpoint(model, tmp_path / "model.pt"), weights_only=True)["config"]
    assert stored == asdict(model.config) and ModelConfig(**stored) == model.config
    assert (stored["encoder_hiddens"], stored["attn_hiddens"], stored["window"]) == (16, 5, None)


def test_save_checkpoint_needs_a_model_built_from_a_config(copy_loader, tiny_seq2seq, tmp_path):
    _, src_vocab, tgt_vocab = copy_loader(num_pairs=16)
    built = tiny_seq2seq(src_vocab, tgt_vocab)
    assembled = Seq2Seq(built.encoder, built.decoder)
    with pytest.raises(ValueError, match="has no ModelConfig"):
        save_checkpoint(assembled, tmp_path / "model.pt")
