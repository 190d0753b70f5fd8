"""The step-through widgets, headless: each step shows what the package's own search computed at that step.

DecoderStepper runs on small seeded (untrained) Bahdanau and Luong models: its words and weights are
compared with `greedy_decode`'s, its query, scores and context with the decoder driven step by step by hand.
BeamStepper runs on a scripted model (a fixed table p(y_t | y_{t-1}), so every status is known in advance)
and on an untrained Bahdanau model, against `beam_search`.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.nn import functional as F

from attn_course.attention.masking import masked_softmax
from attn_course.data.tasks import Vocab, build_vocabs, toy_translation
from attn_course.models.decoders import top_layer
from attn_course.models.decoding import beam_search, greedy_decode
from attn_course.models.seq2seq import build_model
from attn_course.view.steppers import BeamStepper, DecoderStepper

SIZES = {"embed_size": 8, "encoder_hiddens": 8}
DECODERS = {
    "bahdanau": {"kind": "bahdanau"},
    "bahdanau lstm, 2 layers": {"kind": "bahdanau", "cell": "lstm", "num_layers": 2},
    "luong general": {"kind": "luong", "score": "general"},
    "luong dot, local-m, no feeding": {"kind": "luong", "score": "dot", "attention": "local-m", "window": 1,
                                       "input_feeding": False},
    "luong concat, local-p": {"kind": "luong", "score": "concat", "attention": "local-p", "window": 2},
}


@pytest.fixture(scope="module")
def vocabs():
    examples = toy_translation(6, min_len=4, max_len=6, seed=0)
    src_vocab, tgt_vocab = build_vocabs(examples)
    return examples[0].src, src_vocab, tgt_vocab


def seeded_model(src_vocab, tgt_vocab, kind: str, **options):
    torch.manual_seed(0)
    return build_model(kind, len(src_vocab), len(tgt_vocab), **SIZES, **options)


def padded(sentence, src_vocab, pad):
    ids = src_vocab[list(sentence)] + [src_vocab.eos]
    return torch.tensor([ids + [src_vocab.pad] * pad]), torch.tensor([len(ids)])


# ------------------------------------------------------------------------------------- decoder stepper
@pytest.mark.parametrize("name", list(DECODERS))
def test_each_step_shows_greedy_decodes_word_and_weights(vocabs, name):
    sentence, src_vocab, tgt_vocab = vocabs
    model = seeded_model(src_vocab, tgt_vocab, **DECODERS[name])
    stepper = DecoderStepper(model, sentence, src_vocab, tgt_vocab, pad=2, max_len=7)
    src, lens = padded(sentence, src_vocab, 2)
    (hyp,) = greedy_decode(model, src, lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos, max_len=7)
    n = int(lens[0])
    assert stepper.num_steps == len(hyp.tokens) + hyp.finished
    shown = [stepper.record(t).token for t in range(stepper.num_steps)]
    assert shown == hyp.tokens + [tgt_vocab.eos] * hyp.finished
    for t in range(stepper.num_steps):
        record = stepper.record(t)
        assert torch.equal(record.weights[:n], hyp.attention[t])
        assert torch.equal(record.weights[n:], torch.zeros(2))            # the padding
        assert record.target == tuple(tgt_vocab.to_tokens(hyp.tokens[:t]))
        assert record.fed == (tgt_vocab.to_tokens(hyp.tokens[t - 1]) if t else "<bos>")


@pytest.mark.parametrize("name", list(DECODERS))
def test_query_scores_and_context_are_the_decoders_at_that_step(vocabs, name):
    sentence, src_vocab, tgt_vocab = vocabs
    model = seeded_model(src_vocab, tgt_vocab, **DECODERS[name]).eval()
    stepper = DecoderStepper(model, sentence, src_vocab, tgt_vocab, pad=1, max_len=6)
    src, lens = padded(sentence, src_vocab, 1)
    decoder, bahdanau = model.decoder, DECODERS[name]["kind"] == "bahdanau"
    with torch.no_grad():
        enc = model.encode(src, lens)
        state = decoder.init_state(enc, fast_scores=True)
        y = torch.tensor([tgt_vocab.bos])
        for t in range(stepper.num_steps):
            record = stepper.record(t)
            logits, next_state, weights = decoder.step(y, state)
            assert record.query_name == ("s_{t-1}" if bahdanau else "h_t")
            expected_query = top_layer((state if bahdanau else next_state).hidden)[0]
            assert torch.equal(record.query, expected_query)
            assert torch.equal(record.weights, weights[0])
            torch.testing.assert_close(record.context, weights[0] @ enc.outputs[0], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(record.probability, float(F.softmax(logits[0], -1)[record.token]))
            if bahdanau or decoder.alignment == "global":       # the weights are the masked softmax
                softmax = masked_softmax(record.scores[None, None], lens)[0, 0]
                torch.testing.assert_close(softmax, record.weights, rtol=1e-5, atol=1e-6)
            if bahdanau:
                attention = decoder.attention
                projected = attention.W_q(expected_query) + attention.W_k(enc.outputs[0])
                additive = attention.w_v(torch.tanh(projected))
                torch.testing.assert_close(record.scores, additive[:, 0], rtol=1e-5, atol=1e-5)
            y, state = torch.tensor([record.token]), next_state


@pytest.mark.parametrize("name", ["bahdanau", "luong dot, local-m, no feeding", "luong concat, local-p"])
def test_masked_positions_are_the_padding_and_the_window_and_get_exactly_zero(vocabs, name):
    sentence, src_vocab, tgt_vocab = vocabs
    model = seeded_model(src_vocab, tgt_vocab, **DECODERS[name])
    stepper = DecoderStepper(model, sentence, src_vocab, tgt_vocab, pad=3, max_len=6)
    n = len(sentence) + 1
    assert stepper.source[n:] == ["<pad>"] * 3 and stepper.valid_len == n
    for t in range(stepper.num_steps):
        record = stepper.record(t)
        assert record.masked[n:].all() and torch.equal(record.weights[record.masked], torch.zeros(
            int(record.masked.sum())))
        assert (record.weights[~record.masked] > 0).all()
        if name == "bahdanau":
            assert record.centre is None and not record.masked[:n].any()
        else:
            window = model.decoder.window
            inside = (torch.arange(n) - record.centre).abs() <= window
            assert torch.equal(~record.masked[:n], inside)
            if name.startswith("luong dot"):
                assert record.centre == min(t, n - 1)         # local-m: p_t = t, at most the last position


def test_next_and_back_move_one_step_and_stop_at_the_ends(vocabs):
    sentence, src_vocab, tgt_vocab = vocabs
    stepper = DecoderStepper(seeded_model(src_vocab, tgt_vocab, "bahdanau"), sentence, src_vocab, tgt_vocab,
                             max_len=4)
    assert stepper.num_steps == 4 and stepper.step == 0
    assert stepper.back_button.disabled and not stepper.next_button.disabled
    first_view = stepper.view.value
    stepper.next_button.click()
    assert stepper.step == 1 and "data-step='1'" in stepper.readout.value and stepper.view.value != first_view
    assert "step <b>2</b> of 4" in stepper.readout.value
    stepper.back_button.click()
    assert stepper.step == 0 and stepper.view.value == first_view
    stepper.back()                                                     # at the first step: stays
    assert stepper.step == 0
    for _ in range(6):
        stepper.next()
    assert stepper.step == 3 and stepper.next_button.disabled and not stepper.back_button.disabled


def test_the_view_shows_the_records_word_scores_and_weights(vocabs):
    sentence, src_vocab, tgt_vocab = vocabs
    model = seeded_model(src_vocab, tgt_vocab, "luong", score="general")
    stepper = DecoderStepper(model, sentence, src_vocab, tgt_vocab, pad=2, max_len=5)
    stepper.go(2)
    record, page = stepper.record(2), stepper.view.value
    shown = [float(w) for w in re.findall(r"data-weight='([^']+)'", page)]
    assert shown == pytest.approx(record.weights.tolist(), abs=1e-6)
    assert re.findall(r"data-masked='(\d)'", page) == [str(int(m)) for m in record.masked.tolist()]
    assert f"data-token='{record.token}'" in page and "<b class='attn-query'>h<sub>3</sub></b>" in page
    assert page.count("<s>") == 2 and "padding" in page                 # the two <pad> columns


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pad": -1}, "pad must be an int >= 0, got -1"),
        ({"pad": 1.5}, "pad must be an int"),
        ({"sentence": ""}, "sentence is '', expected a non-empty str or list of str tokens"),
        ({"sentence": ["a", 3]}, r"sentence is \['a', 3\], expected a non-empty str or list of str tokens"),
        ({"max_len": 0}, "max_len must be an int >= 1, got 0"),
        ({"tgt_vocab": Vocab(["x"])}, "tgt_vocab has 5 tokens, expected the decoder's vocab_size = "),
        ({"src_vocab": {"a": 1}}, "src_vocab is a dict, expected an attn_course.data.tasks.Vocab"),
    ],
)
def test_decoder_stepper_rejects_bad_arguments_naming_them(vocabs, change, message):
    sentence, src_vocab, tgt_vocab = vocabs
    arguments = {"sentence": sentence, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab, **change}
    model = seeded_model(src_vocab, tgt_vocab, "bahdanau")
    keywords = {k: v for k, v in arguments.items() if k in ("pad", "max_len")}
    with pytest.raises(ValueError, match=message):
        DecoderStepper(model, arguments["sentence"], arguments["src_vocab"], arguments["tgt_vocab"],
                       **keywords)


def test_decoder_stepper_refuses_a_model_without_attention(vocabs):
    sentence, src_vocab, tgt_vocab = vocabs
    message = "model has a PlainDecoder, expected a Seq2Seq with a BahdanauDecoder"
    with pytest.raises(ValueError, match=message):
        DecoderStepper(seeded_model(src_vocab, tgt_vocab, "plain"), sentence, src_vocab, tgt_vocab)


def test_a_step_out_of_range_is_refused_naming_the_range(vocabs):
    sentence, src_vocab, tgt_vocab = vocabs
    stepper = DecoderStepper(seeded_model(src_vocab, tgt_vocab, "bahdanau"), sentence, src_vocab, tgt_vocab,
                             max_len=3)
    expected = "must be an int in [0, num_steps - 1] = [0, 2]"
    with pytest.raises(ValueError, match=re.escape(f"step {expected}, got 3")):
        stepper.go(3)
    with pytest.raises(ValueError, match=re.escape(f"t {expected}, got -1")):
        stepper.record(-1)
    assert stepper.step == 0


# ---------------------------------------------------------------------------------------- beam stepper
BOS, EOS, UNK = 1, 2, 3
A, B, C = 4, 5, 6
# greedy: A (0.6), C (0.4), <eos> (0.9) = 0.216; the beam also finds B (0.4), <eos> (0.9) = 0.36
TABLE = {BOS: {A: 0.6, B: 0.4}, A: {C: 0.4, EOS: 0.35, UNK: 0.25}, B: {EOS: 0.9, UNK: 0.1},
         C: {EOS: 0.9, UNK: 0.1}}


@pytest.fixture
def scripted(monkeypatch):
    """A model whose step reads p(y_t | y_{t-1}) from TABLE (rows not given always emit <unk>)."""
    src_vocab, tgt_vocab = Vocab(list("abcdefgh")), Vocab(["A", "B", "C", "D", "E"])
    model = build_model("plain", len(src_vocab), len(tgt_vocab), embed_size=6, encoder_hiddens=8)
    table = torch.full((len(tgt_vocab), len(tgt_vocab)), 1e-12)
    table[:, UNK] = 1.0
    for prev, probs in TABLE.items():
        table[prev] = 1e-12
        for token, p in probs.items():
            table[prev, token] = p
    log_table = (table / table.sum(-1, keepdim=True)).log()
    monkeypatch.setattr(model.decoder, "step",
                        lambda y_prev, state: (log_table[y_prev], state._replace(step=state.step + 1), None))
    return model, src_vocab, tgt_vocab


def test_beam_steps_show_kept_finished_and_pruned_continuations(scripted):
    model, src_vocab, tgt_vocab = scripted
    stepper = BeamStepper(model, "a b c", src_vocab, tgt_vocab, beam_size=2, length_penalty_alpha=0.0)
    assert stepper.num_steps == 3                          # two hypotheses finished by step 3: K = 2
    first, second, third = (stepper.record(t) for t in range(3))
    assert [(o.word, o.status) for o in first.options[:2]] == [("A", "kept"), ("B", "kept")]
    assert first.beams == (((), 0.0), ((), -math.inf))   # only beam 0 is extended at the first step
    assert [(o.prefix, o.word, o.status, o.next_beam) for o in second.options] == [
        (("B",), "<eos>", "finished", None),               # <eos> among the K = 2 best: set aside
        (("A",), "C", "kept", 0),
        (("A",), "<eos>", "pruned", None),                 # <eos> third: outside the K best
        (("A",), "<unk>", "kept", 1),
    ]
    assert second.options[0].score == pytest.approx(math.log(0.36), abs=1e-6)
    assert second.beams == ((("A",), pytest.approx(math.log(0.6))), (("B",), pytest.approx(math.log(0.4))))
    assert [(h.words, h.length, h.finished) for h in stepper.hypotheses] == [(("B",), 2, True),
                                                                             (("A", "C"), 3, True)]
    assert third.set_aside[0].score == pytest.approx(math.log(0.216), abs=1e-6)


@pytest.mark.parametrize(("alpha", "expected"), [(0.0, ("B",)), (2.0, ("A", "C"))])
def test_final_choice_is_beam_searchs_length_normalised_best(scripted, alpha, expected):
    model, src_vocab, tgt_vocab = scripted
    stepper = BeamStepper(model, "a b c", src_vocab, tgt_vocab, beam_size=2, length_penalty_alpha=alpha)
    src, lens = padded("a b c".split(), src_vocab, 0)
    (hyp,) = beam_search(model, src, lens, bos=BOS, eos=EOS, beam_size=2, length_penalty_alpha=alpha)
    assert stepper.final_words == expected == tuple(tgt_vocab.to_tokens(hyp.tokens))
    assert stepper.final.score == hyp.score
    assert stepper.hypotheses[stepper.final_index].words == expected
    stepper.go(stepper.num_steps - 1)
    final = re.search(r"class='attn-final-words'>([^<]*)<", stepper.view.value).group(1)
    assert final == " ".join(expected) and "data-final=1" in stepper.view.value
    stepper.go(0)
    assert "attn-final" not in stepper.view.value


@pytest.mark.parametrize("beam_size", [2, 3])
def test_beam_stepper_equals_beam_search_on_a_real_model(vocabs, beam_size):
    sentence, src_vocab, tgt_vocab = vocabs
    model = seeded_model(src_vocab, tgt_vocab, "bahdanau")
    stepper = BeamStepper(model, sentence, src_vocab, tgt_vocab, beam_size=beam_size, max_len=5)
    src, lens = padded(sentence, src_vocab, 0)
    (hyp,) = beam_search(model, src, lens, bos=tgt_vocab.bos, eos=tgt_vocab.eos, beam_size=beam_size,
                         max_len=5)
    assert list(stepper.final.tokens) == hyp.tokens and stepper.final.score == hyp.score
    for t in range(stepper.num_steps):
        record = stepper.record(t)
        assert len(record.options) == 2 * beam_size
        assert sum(o.status == "kept" for o in record.options) == beam_size
        assert [o.score for o in record.options] == sorted((o.score for o in record.options), reverse=True)
        if t + 1 < stepper.num_steps:                     # the kept continuations are the next step's beams
            following = stepper.record(t + 1).beams
            kept = sorted((o for o in record.options if o.status == "kept"), key=lambda o: o.next_beam)
            assert [(o.prefix + (o.word,), o.score) for o in kept] == list(following)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"beam_size": 0}, re.escape("beam_size must be an int in [1, 16], got 0")),
        ({"length_norm": "mean"}, re.escape("length_norm='mean', expected one of ('power', 'gnmt')")),
        ({"max_len": -2}, "max_len must be an int >= 1, got -2"),
    ],
)
def test_beam_stepper_rejects_bad_arguments_naming_them(vocabs, change, message):
    sentence, src_vocab, tgt_vocab = vocabs
    with pytest.raises(ValueError, match=message):
        BeamStepper(seeded_model(src_vocab, tgt_vocab, "bahdanau"), sentence, src_vocab, tgt_vocab, **change)
