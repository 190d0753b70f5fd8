"""Greedy and beam search: per-sentence <eos>, batched == one by one, beam 1 == greedy, bookkeeping."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from attn_course.data import tasks as data
from attn_course.models.decoding import beam_search, greedy_decode, length_penalty, translate
from attn_course.models.seq2seq import build_model
from attn_course.training.loop import TrainConfig, train

BOS, EOS, UNK = 1, 2, 3
A, B, C = 4, 5, 6


@pytest.fixture(scope="module")
def copy_model():
    """A Bahdanau model trained briefly on copying: outputs of varied lengths, some right, some wrong."""
    torch.manual_seed(0)
    examples = data.copy_task(96, min_len=2, max_len=7, vocab_size=8, seed=0)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    loader = data.bucketed_loader(data.TranslationDataset(examples, src_vocab, tgt_vocab), 16, seed=0)
    model = build_model("bahdanau", len(src_vocab), len(tgt_vocab), embed_size=8, encoder_hiddens=16)
    train(model, loader, TrainConfig(epochs=5, lr=1e-2), device="cpu", progress=False, seed=0)
    test = data.copy_task(6, min_len=2, max_len=7, vocab_size=8, seed=1)
    return model, src_vocab, tgt_vocab, data.make_batch(test, src_vocab, tgt_vocab)


def random_models():
    sizes = dict(embed_size=6, encoder_hiddens=8)
    yield build_model("plain", 12, 9, **sizes)
    yield build_model("bahdanau", 12, 9, **sizes)
    yield build_model("bahdanau", 12, 9, **sizes, cell="lstm", num_layers=2)
    for score in ("dot", "general", "concat", "location"):
        for attention in ("global", "local-m", "local-p"):
            yield build_model("luong", 12, 9, **sizes, score=score, attention=attention, window=2,
                              input_feeding=score != "dot", **({"max_len": 9} if score == "location" else {}))


def random_batch(lengths=(5, 2, 4, 1)):
    lengths = torch.tensor(lengths)
    src = torch.randint(4, 12, (len(lengths), int(lengths.max())))
    src[torch.arange(src.shape[1])[None] >= lengths[:, None]] = 0
    return src, lengths


def script(monkeypatch, model, rows: dict[int, dict[int, float]], calls: list | None = None):
    """Replace model.decoder.step by a fixed table p(y_t | y_{t-1}); rows not given always emit <unk>."""
    vocab_size = model.decoder.vocab_size
    table = torch.full((vocab_size, vocab_size), 1e-12)
    table[:, UNK] = 1.0
    for prev, probs in rows.items():
        table[prev] = 1e-12
        for token, p in probs.items():
            table[prev, token] = p
    log_table = (table / table.sum(-1, keepdim=True)).log()

    def step(y_prev, state):
        if calls is not None:
            calls.append(y_prev.shape[0])
        return log_table[y_prev], state._replace(step=state.step + 1), None

    monkeypatch.setattr(model.decoder, "step", step)


def teacher_forced(model, src, lens, tokens, finished):
    """Log-probability and attention of `tokens` (+ <eos> if finished) for one sentence, teacher-forced."""
    labels = torch.tensor([tokens + [EOS] if finished else tokens])
    tgt_in = torch.tensor([[BOS] + labels[0, :-1].tolist()])
    with torch.no_grad():
        logits, attention = model.eval()(src[None], lens[None], tgt_in)
    log_probs = F.log_softmax(logits.double(), -1)[0].gather(1, labels[0][:, None]).sum()
    return float(log_probs), None if attention is None else attention[0]


# ----------------------------------------------------------------------------------------------- greedy
def test_greedy_stops_each_sentence_at_its_own_eos_and_shrinks_the_batch(monkeypatch):
    model = build_model("plain", 12, 9, embed_size=6, encoder_hiddens=8)
    calls = []

    def step(y_prev, state):       # emit A until the step reaches the sentence's source length, then <eos>
        calls.append(y_prev.shape[0])
        token = torch.where(state.step + 1 >= state.src_valid_lens, EOS, A)
        return F.one_hot(token, 9).float() * 10, state._replace(step=state.step + 1), None

    monkeypatch.setattr(model.decoder, "step", step)
    src, lens = random_batch((5, 2, 4, 1))
    hyps = greedy_decode(model, src, lens, bos=BOS, eos=EOS, max_len=20)
    assert [h.tokens for h in hyps] == [[A] * 4, [A], [A] * 3, []]
    assert all(h.finished for h in hyps)
    assert calls == [4, 3, 2, 2, 1]            # finished sentences leave the batch


def test_greedy_marks_sentences_cut_by_max_len_as_unfinished(monkeypatch):
    model = build_model("plain", 12, 9, embed_size=6, encoder_hiddens=8)
    script(monkeypatch, model, {BOS: {A: 1.0}})                      # then <unk> forever, never <eos>
    hyps = greedy_decode(model, *random_batch(), bos=BOS, eos=EOS, max_len=3)
    assert all(h.tokens == [A, UNK, UNK] and not h.finished for h in hyps)


def test_batched_greedy_equals_one_sentence_at_a_time(copy_model):
    model, _, tgt_vocab, batch = copy_model
    batched = greedy_decode(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS)
    assert len({len(h.tokens) for h in batched}) > 1                  # the sentences end at different steps
    for i, hyp in enumerate(batched):
        n = int(batch.src_valid_lens[i])
        (alone,) = greedy_decode(model, batch.src[i : i + 1, :n], batch.src_valid_lens[i : i + 1],
                                 bos=BOS, eos=EOS)
        assert alone.tokens == hyp.tokens and alone.finished == hyp.finished
        torch.testing.assert_close(alone.attention, hyp.attention)
        assert alone.score == pytest.approx(hyp.score, abs=1e-5)


def test_greedy_attention_and_score_match_teacher_forcing_on_the_output(copy_model):
    model, _, _, batch = copy_model
    hyps = greedy_decode(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS)
    for i, hyp in enumerate(hyps):
        n = int(batch.src_valid_lens[i])
        assert hyp.attention.shape == (len(hyp.tokens) + hyp.finished, n)   # trimmed to the real source
        torch.testing.assert_close(hyp.attention.sum(-1), torch.ones(hyp.attention.shape[0]))
        score, attention = teacher_forced(model, batch.src[i, :n], batch.src_valid_lens[i], hyp.tokens,
                                          hyp.finished)
        assert hyp.score == pytest.approx(score, abs=1e-4)
        torch.testing.assert_close(hyp.attention, attention, atol=1e-5, rtol=1e-4)


# ----------------------------------------------------------------------------------------------- beam search
def test_beam_size_one_is_exactly_greedy_for_every_decoder():
    src, lens = random_batch()
    for model in random_models():
        greedy = greedy_decode(model, src, lens, bos=BOS, eos=EOS, max_len=8)
        beam = beam_search(model, src, lens, bos=BOS, eos=EOS, max_len=8, beam_size=1)
        for g, b in zip(greedy, beam, strict=True):
            assert g.tokens == b.tokens and g.finished == b.finished
            assert g.score == pytest.approx(b.score, abs=1e-9)
            if g.attention is None:
                assert b.attention is None
            else:
                assert torch.equal(g.attention, b.attention)


def test_beam_size_one_is_exactly_greedy_on_a_trained_model(copy_model):
    model, _, _, batch = copy_model
    greedy = greedy_decode(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS)
    beam = beam_search(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS, beam_size=1)
    assert [g.tokens for g in greedy] == [b.tokens for b in beam]
    assert all(torch.equal(g.attention, b.attention) for g, b in zip(greedy, beam, strict=True))


def test_beam_search_finds_the_likelier_sentence_greedy_misses(monkeypatch):
    model = build_model("plain", 12, 9, embed_size=6, encoder_hiddens=8)
    # greedy: A (0.6) then C (0.4) then <eos> (0.9) = 0.216; beam: B (0.4) then <eos> (0.9) = 0.36
    script(monkeypatch, model, {BOS: {A: 0.6, B: 0.4}, A: {C: 0.4, EOS: 0.3, UNK: 0.3},
                                B: {EOS: 0.9, UNK: 0.1}, C: {EOS: 0.9, UNK: 0.1}})
    src, lens = random_batch((3,))
    (greedy,) = greedy_decode(model, src, lens, bos=BOS, eos=EOS, max_len=6)
    (beam,) = beam_search(model, src, lens, bos=BOS, eos=EOS, max_len=6, beam_size=2, length_penalty_alpha=0)
    assert greedy.tokens == [A, C] and greedy.score == pytest.approx(math.log(0.216), abs=1e-5)
    assert beam.tokens == [B] and beam.score == pytest.approx(math.log(0.36), abs=1e-5)


def test_length_normalisation_lets_a_longer_sentence_win(monkeypatch):
    model = build_model("plain", 12, 9, embed_size=6, encoder_hiddens=8)
    # "" has log p = log 0.5 (L = 1); "A B C" has log p = log(0.5 * 0.8 * 0.8 * 0.9) (L = 4): lower in
    # total, higher per token.
    script(monkeypatch, model, {BOS: {EOS: 0.5, A: 0.5}, A: {B: 0.8, UNK: 0.2}, B: {C: 0.8, UNK: 0.2},
                                C: {EOS: 0.9, UNK: 0.1}})
    src, lens = random_batch((3,))
    (raw,) = beam_search(model, src, lens, bos=BOS, eos=EOS, beam_size=2, length_penalty_alpha=0.0)
    (normalised,) = beam_search(model, src, lens, bos=BOS, eos=EOS, beam_size=2, length_penalty_alpha=1.0)
    (gnmt,) = beam_search(model, src, lens, bos=BOS, eos=EOS, beam_size=2, length_penalty_alpha=1.0,
                          length_norm="gnmt")
    assert raw.tokens == [] and normalised.tokens == [A, B, C]
    # GNMT's ((5 + L) / 6) grows slower than L: log 0.5 / 1 = -0.69 beats log(0.288) / 1.5 = -0.83
    assert gnmt.tokens == []


def test_length_penalty_is_length_to_the_alpha_or_gnmts_and_refuses_other_norms():
    assert length_penalty(4, 0.0) == 1.0
    assert length_penalty(4, 0.5) == pytest.approx(2.0)
    assert length_penalty(7, 1.0, "gnmt") == pytest.approx(2.0)
    with pytest.raises(ValueError, match="length_norm="):
        length_penalty(3, 1.0, "mean")


def test_beam_search_stops_each_sentence_at_its_own_eos_and_shrinks_the_batch(monkeypatch):
    model = build_model("plain", 12, 9, embed_size=6, encoder_hiddens=8)
    calls = []

    def step(y_prev, state):   # every beam of sentence i emits A until step len_i, then <eos> (or B, worse)
        calls.append(y_prev.shape[0])
        end = state.step + 1 >= state.src_valid_lens
        logits = torch.full((y_prev.shape[0], 9), -20.0)
        logits[:, A] = torch.where(end, -20.0, 0.0)
        logits[:, EOS] = torch.where(end, 0.0, -20.0)
        logits[:, B] = -5.0
        return logits, state._replace(step=state.step + 1), None

    monkeypatch.setattr(model.decoder, "step", step)
    src, lens = random_batch((3, 1, 2))
    hyps = beam_search(model, src, lens, bos=BOS, eos=EOS, beam_size=2, max_len=10, length_penalty_alpha=0)
    assert [h.tokens for h in hyps] == [[A, A], [], [A]]
    assert calls[0] == 6 and calls == sorted(calls, reverse=True) and calls[-1] == 2   # 2 beams per sentence


@pytest.mark.parametrize("beam_size", [2, 3])
def test_beam_attention_and_score_follow_the_chosen_beam(copy_model, beam_size):
    model, _, _, batch = copy_model
    hyps = beam_search(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS, beam_size=beam_size,
                       length_penalty_alpha=0.75)
    for i, hyp in enumerate(hyps):
        n = int(batch.src_valid_lens[i])
        assert hyp.attention.shape == (len(hyp.tokens) + hyp.finished, n)
        score, attention = teacher_forced(model, batch.src[i, :n], batch.src_valid_lens[i], hyp.tokens,
                                          hyp.finished)
        assert hyp.score == pytest.approx(score, abs=1e-4)
        torch.testing.assert_close(hyp.attention, attention, atol=1e-5, rtol=1e-4)


def test_beam_results_cut_at_max_len_keep_their_attention_and_score(copy_model):
    """Sentences stopped by max_len (their live beams become candidates) and finished ones side by side:
    every result's attention is its own float32 CPU (T_i, S_i) and matches teacher forcing."""
    model, _, _, batch = copy_model
    hyps = beam_search(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS, beam_size=3, max_len=3,
                       length_penalty_alpha=0.75)
    assert any(not h.finished for h in hyps) and any(h.finished for h in hyps)
    for i, hyp in enumerate(hyps):
        n = int(batch.src_valid_lens[i])
        assert hyp.attention.dtype == torch.float32 and hyp.attention.device.type == "cpu"
        assert hyp.attention.shape == (len(hyp.tokens) + hyp.finished, n)
        assert len(hyp.tokens) + hyp.finished <= 3
        score, attention = teacher_forced(model, batch.src[i, :n], batch.src_valid_lens[i], hyp.tokens,
                                          hyp.finished)
        assert hyp.score == pytest.approx(score, abs=1e-4)
        torch.testing.assert_close(hyp.attention, attention, atol=1e-5, rtol=1e-4)
    hyps[0].attention.fill_(-1.0)                   # writing into one result changes no other
    assert all((h.attention >= 0).all() for h in hyps[1:])


def test_batched_beam_search_equals_one_sentence_at_a_time(copy_model):
    model, _, _, batch = copy_model
    batched = beam_search(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS, beam_size=3)
    for i, hyp in enumerate(batched):
        n = int(batch.src_valid_lens[i])
        (alone,) = beam_search(model, batch.src[i : i + 1, :n], batch.src_valid_lens[i : i + 1], bos=BOS,
                               eos=EOS, beam_size=3)
        assert alone.tokens == hyp.tokens
        assert alone.score == pytest.approx(hyp.score, abs=1e-5)


def test_decoding_rejects_bad_arguments(copy_model):
    model, _, _, batch = copy_model
    args = (model, batch.src, batch.src_valid_lens)
    with pytest.raises(ValueError, match="beam_size must be an int >= 1, got 0"):
        beam_search(*args, bos=BOS, eos=EOS, beam_size=0)
    with pytest.raises(ValueError, match="length_norm="):
        beam_search(*args, bos=BOS, eos=EOS, length_norm="average")
    with pytest.raises(ValueError, match=r"bos must be an int in \[0, "):
        greedy_decode(*args, bos=99, eos=EOS)
    with pytest.raises(ValueError, match="max_len must be an int >= 1, got 0"):
        greedy_decode(*args, bos=BOS, eos=EOS, max_len=0)
    with pytest.raises(ValueError, match="src_valid_lens"):
        greedy_decode(model, batch.src, batch.src_valid_lens[:2], bos=BOS, eos=EOS)


def test_decoding_restores_training_mode(copy_model):
    model = copy_model[0]
    batch = copy_model[3]
    model.train()
    greedy_decode(model, batch.src, batch.src_valid_lens, bos=BOS, eos=EOS)
    assert model.training
    model.eval()


# ----------------------------------------------------------------------------------------------- translate
def test_translate_keeps_the_input_order_and_labels_the_attention(copy_model):
    model, src_vocab, tgt_vocab, _ = copy_model
    sentences = ["1 2 3 4 5 6", "7 0", ["3", "3", "5"], "9 1"]        # "9" is not in the vocabulary
    results = translate(model, sentences, src_vocab, tgt_vocab, batch_size=3)
    assert [r.source for r in results] == [
        ["1", "2", "3", "4", "5", "6", "<eos>"], ["7", "0", "<eos>"], ["3", "3", "5", "<eos>"],
        ["<unk>", "1", "<eos>"]]
    for sentence, result in zip(sentences, results, strict=True):
        tokens = sentence.split() if isinstance(sentence, str) else sentence
        ids = torch.tensor([src_vocab[tokens] + [src_vocab.eos]])
        (hyp,) = greedy_decode(model, ids, torch.tensor([ids.shape[1]]), bos=BOS, eos=EOS)
        assert result.target == tgt_vocab.to_tokens(hyp.tokens)
        assert result.attention.shape == (len(result.target) + result.finished, len(result.source))
    beams = translate(model, sentences, src_vocab, tgt_vocab, beam_size=3)
    assert len(beams) == 4 and all(isinstance(r.target, list) for r in beams)
    with pytest.raises(ValueError, match="sentences is one str"):
        translate(model, "1 2 3", src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match=r"sentences\[1\]"):
        translate(model, ["1 2", ""], src_vocab, tgt_vocab)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_sentence_that_never_ends_is_cut_at_its_own_limit_whatever_it_is_batched_with(search):
    """The default limit, 2 S_i + 10, counts each sentence's own length, not the padded batch width."""
    torch.manual_seed(3)
    model = build_model("bahdanau", 12, 9, embed_size=6, encoder_hiddens=8)
    with torch.no_grad():
        model.decoder.output.bias[EOS] = -1e4       # <eos> is never the best token: no sentence finishes
    src, lens = random_batch((9, 2, 5))
    decode = greedy_decode if search == "greedy" else (lambda *a, **k: beam_search(*a, **k, beam_size=2))
    batched = decode(model, src, lens, bos=BOS, eos=EOS)
    for i, hyp in enumerate(batched):
        n = int(lens[i])
        assert not hyp.finished and len(hyp.tokens) == 2 * n + 10
        (alone,) = decode(model, src[i : i + 1, :n], lens[i : i + 1], bos=BOS, eos=EOS)
        assert alone.tokens == hyp.tokens
        assert alone.score == pytest.approx(hyp.score, abs=1e-5)
