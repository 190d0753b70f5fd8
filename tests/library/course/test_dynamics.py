"""Training dynamics (chapter 9): scheduled sampling and its decays, warm-up, gradient norms, attention
temperature, initialisation schemes, and next-word accuracy by position, teacher-forced or free running."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from attn_course.attention.masking import masked_softmax
from attn_course.course import chapters
from attn_course.data import tasks as data
from attn_course.measure.diagnostics import mean_entropy
from attn_course.measure.evaluation import accuracy_by_position
from attn_course.models.seq2seq import ModelConfig, build_model
from attn_course.training.loop import (
    Decay,
    TrainConfig,
    exponential_decay,
    initialize,
    inverse_sigmoid_decay,
    linear_decay,
    load_checkpoint,
    masked_cross_entropy,
    save_checkpoint,
    scheduled_sampling_logits,
    train,
    warmup_factor,
)


def reference_training(model, loader, epochs, lr, clip):
    """The training loop as it was before scheduled sampling, warm-up and the recorded norms."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        model.train()
        for batch in loader:
            logits, _ = model(batch.src, batch.src_valid_lens, batch.tgt_in)
            loss = masked_cross_entropy(logits, batch.tgt_out, batch.tgt_valid_lens)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            losses.append(loss.item())
    return losses


# ------------------------------------------------------------------------------ teacher forcing, unchanged
@pytest.mark.parametrize("clip", [1.0, None])
def test_full_teacher_forcing_trains_bit_for_bit_as_the_loop_before_it(copy_loader, tiny_seq2seq, clip):
    loader, src_vocab, tgt_vocab = copy_loader()
    ours, theirs = tiny_seq2seq(src_vocab, tgt_vocab), tiny_seq2seq(src_vocab, tgt_vocab)
    expected = reference_training(theirs, loader, 3, 1e-2, clip)
    loader, _, _ = copy_loader()                                         # a fresh loader: its epochs restart
    config = TrainConfig(epochs=3, lr=1e-2, clip=clip, teacher_forcing=1.0)
    history = train(ours, loader, config, device="cpu", progress=False)
    assert history.step_loss == expected
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert history.teacher_forcing == [1.0] * len(expected) and history.lr == [1e-2] * len(expected)


def test_train_config_records_the_new_options_with_defaults_that_change_nothing():
    config = TrainConfig()
    assert config.teacher_forcing == 1.0 and config.warmup_steps is None
    scheduled = TrainConfig(teacher_forcing=Decay("inverse_sigmoid", k=20.0), warmup_steps=10)
    assert json.loads(json.dumps(asdict(scheduled)))["teacher_forcing"] == {
        "kind": "inverse_sigmoid", "k": 20.0, "c": 0.0, "epsilon": 0.0}


# ------------------------------------------------------------------------------ scheduled sampling
def test_ratio_one_step_by_step_gives_the_teacher_forcing_logits(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader()
    model = tiny_seq2seq(src_vocab, tgt_vocab).eval()
    batch = next(iter(loader))
    with torch.no_grad():
        forced, _ = model(batch.src, batch.src_valid_lens, batch.tgt_in)
        stepped = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 1.0)
    torch.testing.assert_close(stepped, forced, atol=1e-6, rtol=1e-5)


def recorded_inputs(model):
    """Wrap model.decoder.step to record every y_prev it is fed; returns the list it fills."""
    fed, step = [], model.decoder.step

    def recording(y_prev, state):
        fed.append(y_prev.clone())
        return step(y_prev, state)

    model.decoder.step = recording
    return fed


def test_ratio_zero_feeds_the_argmax_of_the_previous_step(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader()
    model = tiny_seq2seq(src_vocab, tgt_vocab).eval()
    batch = next(iter(loader))
    fed = recorded_inputs(model)
    with torch.no_grad():
        logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.0)
    assert torch.equal(fed[0], batch.tgt_in[:, 0])                       # <bos> at step 0
    for t in range(1, batch.tgt_in.shape[1]):
        assert torch.equal(fed[t], logits[:, t - 1].argmax(-1))


def test_each_sentence_is_fed_the_gold_word_with_probability_ratio_and_gets_no_gradient_through_it(
        copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader(num_pairs=400, batch_size=400)
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    batch = next(iter(loader))
    fed = recorded_inputs(model)
    logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.3,
                                       torch.Generator().manual_seed(0))
    gold_shares = []
    for t in range(1, batch.tgt_in.shape[1]):
        predicted = logits[:, t - 1].argmax(-1)
        differ = predicted != batch.tgt_in[:, t]                        # only there can we tell them apart
        gold_shares.append((fed[t][differ] == batch.tgt_in[differ, t]).float().mean().item())
        mixed = fed[t] == batch.tgt_in[:, t]
        assert bool(mixed.any()) and not bool(mixed.all())              # per sentence, not per batch
    assert 0.2 < sum(gold_shares) / len(gold_shares) < 0.4
    assert logits.requires_grad and not any(y.requires_grad for y in fed)


def test_scheduled_sampling_is_reproducible_and_leaves_the_global_generator_alone(copy_loader, tiny_seq2seq):
    runs, states = {}, {}
    for ratio in (0.5, 1.0, 0.5):
        loader, src_vocab, tgt_vocab = copy_loader()
        model = tiny_seq2seq(src_vocab, tgt_vocab)                         # reseeds the global generator
        config = TrainConfig(epochs=2, teacher_forcing=ratio)
        history = train(model, loader, config, device="cpu", progress=False)
        runs.setdefault(ratio, []).append(history.step_loss)
        states.setdefault(ratio, []).append(torch.get_rng_state())
    assert runs[0.5][0] == runs[0.5][1] and runs[0.5][0] != runs[1.0][0]
    assert torch.equal(states[0.5][0], states[1.0][0])                  # the coins come from elsewhere
    loader, src_vocab, tgt_vocab = copy_loader()
    other = train(tiny_seq2seq(src_vocab, tgt_vocab), loader, TrainConfig(epochs=2, teacher_forcing=0.5),
                  device="cpu", progress=False, seed=1).step_loss
    assert other != runs[0.5][0]                                         # seed= picks other coins


def test_a_schedule_is_called_with_the_global_step_and_its_ratio_recorded(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader()
    steps = []

    def schedule(step):
        steps.append(step)
        return max(0.0, 1 - step / 4)

    config = TrainConfig(epochs=2, teacher_forcing=schedule)
    history = train(tiny_seq2seq(src_vocab, tgt_vocab), loader, config, device="cpu", progress=False)
    assert steps == list(range(6))                                       # 3 batches x 2 epochs
    assert history.teacher_forcing == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]


def test_a_ratio_outside_zero_one_is_refused_by_name(copy_loader, tiny_seq2seq):
    with pytest.raises(ValueError, match=r"teacher_forcing must be a finite number in \[0, 1\], got 1.5"):
        TrainConfig(teacher_forcing=1.5)
    loader, src_vocab, tgt_vocab = copy_loader()
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match=r"teacher_forcing\(step\) must be a finite number in \[0, 1\]"):
        train(model, loader, TrainConfig(epochs=1, teacher_forcing=lambda step: -0.1), device="cpu",
              progress=False)


# ------------------------------------------------------------------------------ the paper's decays
def test_the_three_decays_follow_bengio_et_al_2015_section_2_4():
    assert linear_decay(0, c=0.1) == 1.0 and linear_decay(3, c=0.1) == pytest.approx(0.7)
    assert linear_decay(100, c=0.1, epsilon=0.2) == 0.2                   # floored at epsilon
    assert exponential_decay(0, k=0.9) == 1.0 and exponential_decay(2, k=0.9) == pytest.approx(0.81)
    assert inverse_sigmoid_decay(0, k=10) == pytest.approx(10 / 11)
    assert inverse_sigmoid_decay(50, k=10) == pytest.approx(10 / (10 + math.exp(5)))
    assert inverse_sigmoid_decay(10**9, k=1.0) == 0.0                    # no overflow far out
    assert Decay("linear", k=1.0, c=0.1, epsilon=0.2)(3) == linear_decay(3, c=0.1, epsilon=0.2)
    assert Decay("exponential", k=0.9)(5) == exponential_decay(5, k=0.9)
    assert Decay("inverse_sigmoid", k=10.0)(7) == inverse_sigmoid_decay(7, k=10.0)


@given(st.sampled_from([Decay("linear", k=1.0, c=0.01, epsilon=0.1), Decay("exponential", k=0.99),
                        Decay("inverse_sigmoid", k=30.0)]), st.integers(0, 5000))
def test_every_decay_is_a_probability_that_never_rises(decay, step):
    assert 0 <= decay(step + 1) <= decay(step) <= 1


def test_decays_refuse_parameters_outside_the_papers_ranges():
    with pytest.raises(ValueError, match="k must be a finite number >= 1"):
        Decay("inverse_sigmoid", k=0.5)
    with pytest.raises(ValueError, match=r"k must be a finite number in \(0, 1\]"):
        Decay("exponential", k=1.5)
    with pytest.raises(ValueError, match="kind='cosine'"):
        Decay("cosine", k=1.0)
    with pytest.raises(ValueError, match="step must be an int >= 0"):
        inverse_sigmoid_decay(-1, k=2)


# ------------------------------------------------------------------------------ warm-up, norms, rates
def test_warmup_ramps_the_rate_linearly_and_composes_with_the_epoch_decay(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader()                         # 3 steps per epoch
    config = TrainConfig(epochs=3, lr=0.01, lr_decay=0.5, warmup_steps=4)
    history = train(tiny_seq2seq(src_vocab, tgt_vocab), loader, config, device="cpu", progress=False)
    expected = [0.01 * 0.5 ** (i // 3) * min(1, (i + 1) / 4) for i in range(9)]
    assert history.lr == pytest.approx(expected)
    assert [warmup_factor(i, 4) for i in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmup_factor(0, None) == 1.0
    with pytest.raises(ValueError, match="warmup_steps must be an int >= 1, got 0"):
        TrainConfig(warmup_steps=0)


def test_warmup_leaves_the_optimizer_at_its_scheduled_rate(copy_loader, tiny_seq2seq):
    loader, src_vocab, tgt_vocab = copy_loader()
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    train(model, loader, TrainConfig(epochs=1, warmup_steps=10), optimizer=optimizer, device="cpu",
          progress=False)
    assert optimizer.param_groups[0]["lr"] == 0.02                       # the ramp is per step, not kept


@pytest.mark.parametrize("clip", [1e-3, None])
def test_the_recorded_gradient_norm_is_the_norm_before_clipping(copy_loader, tiny_seq2seq, clip):
    loader, src_vocab, tgt_vocab = copy_loader()
    model = tiny_seq2seq(src_vocab, tgt_vocab)
    twin = copy.deepcopy(model)
    batch = next(iter(loader))
    logits, _ = twin(batch.src, batch.src_valid_lens, batch.tgt_in)
    masked_cross_entropy(logits, batch.tgt_out, batch.tgt_valid_lens).backward()
    expected = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in twin.parameters()
                                                     if p.grad is not None])).item()
    loader, _, _ = copy_loader()                                         # the same first batch again
    history = train(model, loader, TrainConfig(epochs=1, clip=clip), device="cpu", progress=False)
    assert history.grad_norm[0] == pytest.approx(expected, rel=1e-5)
    assert len(history.grad_norm) == len(history.step_loss) == 3
    if clip is not None:
        assert min(history.grad_norm) > clip                              # recorded before, not after


# ------------------------------------------------------------------------------ attention temperature
def attention_of(model, batch):
    enc = model.encode(batch.src, batch.src_valid_lens)
    state = model.decoder.init_state(enc)
    _, _, weights = model.decoder.step(batch.tgt_in[:, 0], state)
    return weights, state


@pytest.mark.parametrize("options", [{"kind": "bahdanau"}, {"kind": "luong", "score": "general"},
                                     {"kind": "luong", "attention": "local-m", "window": 2}])
def test_temperature_divides_the_scores_before_the_masked_softmax(copy_loader, tiny_seq2seq, options):
    loader, src_vocab, tgt_vocab = copy_loader()
    batch = next(iter(loader))
    kind = options.pop("kind")
    plain = tiny_seq2seq(src_vocab, tgt_vocab, kind, decoder_hiddens=32, **options).eval()
    hot, one = (tiny_seq2seq(src_vocab, tgt_vocab, kind, decoder_hiddens=32, attention_temperature=tau,
                           **options).eval() for tau in (4.0, 1.0))
    hot.load_state_dict(plain.state_dict())
    one.load_state_dict(plain.state_dict())
    with torch.no_grad():
        weights, _ = attention_of(plain, batch)
        hot_weights, state = attention_of(hot, batch)
        one_weights, _ = attention_of(one, batch)
        assert torch.equal(one_weights, weights)                         # tau = 1 is no temperature
        if kind == "bahdanau":
            query = state.hidden[-1][:, None]
            scores = hot.decoder.attention.scores(query, state.memory)   # already divided by tau
            softmax = masked_softmax(scores, batch.src_valid_lens)[:, 0]
            assert torch.allclose(hot_weights, softmax, atol=1e-6)
            plain_scores = plain.decoder.attention.scores(query, state.memory)
            assert torch.allclose(scores * 4.0, plain_scores, atol=1e-5)
    lens = batch.src_valid_lens
    assert mean_entropy(hot_weights[:, None], lens) > mean_entropy(weights[:, None], lens)  # tau > 1 spreads


def test_temperature_is_refused_where_there_is_no_attention_or_it_is_not_positive():
    with pytest.raises(ValueError, match="attention_temperature=2.0 is an option of bahdanau and luong"):
        ModelConfig("plain", 5, 5, attention_temperature=2.0)
    with pytest.raises(ValueError, match="attention_temperature must be a finite number > 0, got 0"):
        build_model("bahdanau", 5, 5, attention_temperature=0)


def test_a_checkpoint_records_the_temperature(tmp_path):
    model = build_model("bahdanau", 6, 7, embed_size=4, encoder_hiddens=4, attention_temperature=0.5)
    loaded, _ = load_checkpoint(save_checkpoint(model, tmp_path / "m.pt"), device="cpu")
    assert loaded.config.attention_temperature == 0.5 and loaded.decoder.attention.temperature == 0.5


# ------------------------------------------------------------------------------ initialisation
def test_torch_scheme_changes_nothing_and_an_unknown_scheme_is_refused():
    model = build_model("bahdanau", 6, 7, embed_size=4, encoder_hiddens=4)
    before = copy.deepcopy(model.state_dict())
    initialize(model, "torch")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match=r"scheme='he', expected one of \('torch', 'xavier', 'orth"):
        initialize(model, "he")


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_orthogonal_makes_every_recurrent_gate_block_orthogonal_and_zeroes_biases(cell):
    torch.manual_seed(0)
    model = build_model("bahdanau", 6, 7, embed_size=4, encoder_hiddens=5, cell=cell)
    embeddings = model.decoder.embedding.weight.clone()
    initialize(model, "orthogonal")
    for rnn in (model.encoder.rnn, model.decoder.rnn):
        for name, param in rnn.named_parameters():
            if name.startswith("bias"):
                assert not param.any(), name
            elif name.startswith("weight_hh"):
                for block in param.chunk(param.shape[0] // rnn.hidden_size):
                    torch.testing.assert_close(block @ block.T, torch.eye(rnn.hidden_size), atol=1e-5, rtol=0)
    assert torch.equal(model.decoder.embedding.weight, embeddings)      # embeddings are left alone


def test_xavier_keeps_every_linear_weight_within_glorots_bound():
    torch.manual_seed(0)
    model = initialize(build_model("bahdanau", 6, 7, embed_size=4, encoder_hiddens=8), "xavier")
    for module in model.modules():
        if isinstance(module, nn.Linear):
            fan_out, fan_in = module.weight.shape
            assert module.weight.abs().max() <= math.sqrt(6 / (fan_in + fan_out))
            assert module.bias is None or not module.bias.any()
    hh = model.decoder.rnn.weight_hh_l0
    assert not torch.allclose(hh[:8] @ hh[:8].T, torch.eye(8), atol=1e-2)  # not orthogonal


# ------------------------------------------------------------------------------ exposure bias
def tiny_task():
    examples = data.copy_task(40, min_len=2, max_len=6, vocab_size=8, seed=0)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    return chapters.TaskData(examples, [], examples[:20], src_vocab, tgt_vocab)


def test_teacher_forced_accuracy_by_position_counts_argmax_hits_among_real_tokens(tiny_seq2seq):
    task = tiny_task()
    model = tiny_seq2seq(task.src_vocab, task.tgt_vocab).eval()
    accuracy, count = accuracy_by_position(model, task.test, task, batch_size=7)
    batch = data.make_batch(task.test, task.src_vocab, task.tgt_vocab)
    with torch.no_grad():
        predicted = model(batch.src, batch.src_valid_lens, batch.tgt_in)[0].argmax(-1)
    for t in range(len(count)):
        rows = [i for i, e in enumerate(task.test) if len(e.tgt) + 1 > t]
        assert count[t] == len(rows)
        hits = sum(int(predicted[i, t] == batch.tgt_out[i, t]) for i in rows)
        assert accuracy[t] == pytest.approx(hits / len(rows))
    assert len(count) == 1 + max(len(e.tgt) for e in task.test)


def test_free_running_feeds_the_models_own_words_and_agrees_at_the_first_position(tiny_seq2seq):
    task = tiny_task()
    model = tiny_seq2seq(task.src_vocab, task.tgt_vocab).eval()
    forced, count = accuracy_by_position(model, task.test, task)
    free, free_count = accuracy_by_position(model, task.test, task, free_running=True)
    assert free_count == count and free[0] == forced[0]                 # both read <bos> first
    batch = data.make_batch(task.test, task.src_vocab, task.tgt_vocab)
    with torch.no_grad():
        logits = scheduled_sampling_logits(model, batch.src, batch.src_valid_lens, batch.tgt_in, 0.0)
    predicted = logits.argmax(-1)
    last = count.index(count[-1])
    rows = [i for i, e in enumerate(task.test) if len(e.tgt) + 1 > last]
    hits = sum(int(predicted[i, last] == batch.tgt_out[i, last]) for i in rows)
    assert free[last] == pytest.approx(hits / len(rows))
    with pytest.raises(ValueError, match="examples is empty"):
        accuracy_by_position(model, [], task)


# ------------------------------------------------------------------------------ chapter 9's experiments
def test_early_steps_reads_the_first_updates_of_a_history():
    from attn_course.course.dynamics import early_steps
    from attn_course.training.loop import History

    history = History(step_loss=[3.0, 2.0, 2.5, 1.0, 9.0], grad_norm=[1.0, 4.0, 2.0, 0.5, 99.0])
    assert early_steps(history, steps=3) == {"early_loss": pytest.approx(2.5), "early_rise": 0.5,
                                             "early_norm": 4.0}


def test_token_accuracy_weights_each_position_by_its_count():
    from attn_course.course.dynamics import token_accuracy

    assert token_accuracy([1.0, 0.5, 0.0], [10, 10, 5]) == pytest.approx(15 / 25)


def test_the_chapters_runs_differ_from_the_recipe_only_by_their_changes():
    from attn_course.course import dynamics

    assert dynamics.SCHEDULED(0) > 0.95 and 0.4 < dynamics.SCHEDULED(189) < 0.6
    assert set(dynamics.HIGH_LR) <= set(asdict(dynamics.RECIPE.train))
    for changes in dynamics.STUDY.values():
        train_changes = {k: v for k, v in changes.items() if k not in dynamics.MODEL_OPTIONS}
        TrainConfig(**{**asdict(dynamics.RECIPE.train), **train_changes})   # every other change is a field
    for variant, baseline in dynamics.BASELINES.items():                # the baseline plus its own changes
        kept = {k: v for k, v in dynamics.STUDY[variant].items() if k in dynamics.STUDY[baseline]}
        assert {k: v for k, v in dynamics.STUDY[baseline].items() if k != "lr"} == {
            k: v for k, v in kept.items() if k != "lr"}, variant
    assert set(dynamics.BASELINES) | {"teacher forcing", "lr 0.02"} == set(dynamics.STUDY)


def test_noams_peak_is_the_high_rate_reached_when_the_linear_ramp_ends():
    from attn_course.course import dynamics

    rates = [dynamics.NOAM_LR * dynamics.NOAM(i) for i in range(90)]
    assert max(rates) == pytest.approx(dynamics.HIGH_LR["lr"])
    assert rates.index(max(rates)) == dynamics.WARMUP_STEPS - 1
    ramp = [dynamics.HIGH_LR["lr"] * warmup_factor(i, dynamics.WARMUP_STEPS) for i in range(90)]
    assert rates[:dynamics.WARMUP_STEPS] == pytest.approx(ramp[:dynamics.WARMUP_STEPS])
    assert all(r < dynamics.HIGH_LR["lr"] for r in rates[dynamics.WARMUP_STEPS:])


def test_a_model_option_of_run_builds_the_model_and_cannot_come_with_a_model():
    from attn_course.course import dynamics

    task = chapters.task_data(chapters.DataConfig("reversal", num_pairs=40, min_len=3, max_len=5,
                                                  vocab_size=6, seed=0))
    model, history = dynamics.run(task, 0, attention_temperature=2.0, epochs=1)
    assert model.decoder.attention.temperature == 2.0 and len(history.train_loss) == 1
    with pytest.raises(ValueError, match="pass either model= or the model options"):
        dynamics.run(task, 0, model=model, init="xavier", epochs=1)
    with pytest.raises(ValueError, match=r"\['temperature'\] are neither TrainConfig fields nor model"):
        dynamics.run(task, 0, temperature=2.0)


def test_paired_differences_match_each_seed_with_its_own_baseline():
    from attn_course.course import dynamics

    runs = [{"seed": 0, "variant": "teacher forcing", "bleu": 70.0},
            {"seed": 1, "variant": "teacher forcing", "bleu": 80.0},
            {"seed": 0, "variant": "no clipping", "bleu": 75.0},
            {"seed": 1, "variant": "no clipping", "bleu": 79.0},
            {"seed": 2, "variant": "no clipping", "bleu": 99.0},          # no baseline with seed 2
            {"seed": 0, "variant": "lr 0.02", "bleu": 60.0},
            {"seed": 0, "variant": "lr 0.02, linear warm-up", "bleu": 61.5}]
    assert dynamics.paired(runs, "no clipping", "bleu") == {0: 5.0, 1: -1.0}
    assert dynamics.paired(runs, "lr 0.02, linear warm-up", "bleu") == {0: 1.5}
    with pytest.raises(ValueError, match="variant='teacher forcing' has no baseline"):
        dynamics.paired(runs, "teacher forcing", "bleu")
