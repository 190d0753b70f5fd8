"""Encoder, decoders and Seq2Seq: shapes, padding never leaks, who queries with what, parallel == loop."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch
from torch.nn import functional as F

from attn_course.models.decoders import BahdanauDecoder, Decoder, LuongDecoder, PlainDecoder, top_layer
from attn_course.models.encoders import Encoder, EncoderOutput
from attn_course.models.seq2seq import ModelConfig, Seq2Seq, build_model

V_SRC, V_TGT, E, H = 13, 11, 6, 8
LUONG_CONFIGS = [
    dict(score=score, attention=attention, input_feeding=feeding, window=2, max_len=12)
    for score in ("dot", "general", "concat", "location")
    for attention in ("global", "local-m", "local-p")
    for feeding in (False, True)
]


def luong_options(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "max_len" or config["score"] == "location"}


def batch(lengths=(7, 3, 5, 1), pad_to: int | None = None, tgt_len: int = 6):
    """A padded source batch (real tokens >= 4), its lengths, and decoder inputs."""
    lengths = torch.tensor(lengths)
    width = pad_to or int(lengths.max())
    src = torch.randint(4, V_SRC, (len(lengths), width))
    src[torch.arange(width)[None] >= lengths[:, None]] = 0
    tgt_in = torch.randint(4, V_TGT, (len(lengths), tgt_len))
    return src, lengths, tgt_in


def repad(src: torch.Tensor, width: int) -> torch.Tensor:
    """The same sentences padded (with 0) to `width` columns."""
    return F.pad(src, (0, width - src.shape[1]))


def all_models(cell="gru", num_layers=1):
    sizes = dict(embed_size=E, encoder_hiddens=H, cell=cell, num_layers=num_layers)
    yield build_model("plain", V_SRC, V_TGT, **sizes)
    yield build_model("bahdanau", V_SRC, V_TGT, **sizes)
    for config in LUONG_CONFIGS:
        yield build_model("luong", V_SRC, V_TGT, **sizes, **luong_options(config))


# ----------------------------------------------------------------------------------------------- encoder
@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_encoder_shapes_and_zero_outputs_at_padding(cell, bidirectional, num_layers):
    encoder = Encoder(V_SRC, E, H, num_layers, cell=cell, bidirectional=bidirectional, decoder_hiddens=5)
    src, lens, _ = batch()
    outputs, state, valid_lens = encoder(src, lens)
    assert encoder.enc_size == H * (2 if bidirectional else 1)
    assert outputs.shape == (4, 7, encoder.enc_size)
    for h in state if cell == "lstm" else (state,):
        assert h.shape == (num_layers, 4, 5)
        assert h.abs().max() <= 1  # tanh bridge
    padding = torch.arange(7)[None] >= lens[:, None]
    assert torch.equal(outputs[padding], torch.zeros_like(outputs[padding]))
    assert torch.equal(valid_lens, lens)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_padding_never_leaks_into_outputs_or_state(cell, bidirectional):
    encoder = Encoder(V_SRC, E, H, 2, cell=cell, bidirectional=bidirectional).eval()
    src, lens, _ = batch()
    short = encoder(src, lens)
    long = encoder(repad(src, 11), lens)
    torch.testing.assert_close(long.outputs[:, :7], short.outputs)
    assert torch.equal(long.outputs[:, 7:], torch.zeros_like(long.outputs[:, 7:]))
    torch.testing.assert_close(long.state, short.state)
    # ... and each sentence encoded alone, without any padding, gives the same annotations and state
    for i, n in enumerate(lens.tolist()):
        alone = encoder(src[i : i + 1, :n], lens[i : i + 1])
        torch.testing.assert_close(alone.outputs[0], short.outputs[i, :n])
        torch.testing.assert_close(top_layer(alone.state)[0], top_layer(short.state)[i])


def test_bidirectional_bridge_reads_last_forward_and_first_backward_state():
    encoder = Encoder(V_SRC, E, H, 1, bidirectional=True)
    src, lens, _ = batch()
    outputs, state, _ = encoder(src, lens)
    last_forward = outputs[torch.arange(4), lens - 1, :H]      # h→ at each sentence's own last token
    first_backward = outputs[:, 0, H:]                          # h← at the first token
    expected = torch.tanh(encoder.bridge(torch.cat([last_forward, first_backward], -1)))
    torch.testing.assert_close(state[0], expected)


def test_encoder_rejects_bad_lengths_and_shapes():
    encoder = Encoder(V_SRC, E, H)
    src, lens, _ = batch()
    with pytest.raises(ValueError, match="src_valid_lens must lie in"):
        encoder(src, torch.tensor([7, 3, 0, 1]))
    with pytest.raises(ValueError, match="src_valid_lens must lie in"):
        encoder(src, torch.tensor([8, 3, 5, 1]))
    with pytest.raises(ValueError, match=r"src_valid_lens has shape \(3,\), expected \(batch_size,\) = \(4"):
        encoder(src, lens[:3])
    with pytest.raises(ValueError, match="src_valid_lens must hold integer lengths, got dtype torch.float32"):
        encoder(src, lens.float())
    with pytest.raises(ValueError, match="src has shape"):
        encoder(src[0], lens)
    with pytest.raises(ValueError, match="cell="):
        Encoder(V_SRC, E, H, cell="rnn")


# ----------------------------------------------------------------------------------------------- decoders
@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_every_decoder_returns_logits_and_attention_of_every_step(cell, num_layers):
    src, lens, tgt_in = batch()
    for model in all_models(cell, num_layers):
        logits, attention = model(src, lens, tgt_in)
        assert logits.shape == (4, 6, V_TGT)
        assert torch.isfinite(logits).all()
        if model.kind == "plain":
            assert attention is None
            continue
        assert attention.shape == (4, 6, 7)
        padding = torch.arange(7)[None, None] >= lens[:, None, None]
        assert torch.equal(attention.masked_select(padding), torch.zeros(int(padding.sum()) * 6))
        sums = attention.sum(-1)
        if getattr(model.decoder, "alignment", "global") == "local-p":
            assert (sums <= 1 + 1e-6).all() and (sums > 0).all()   # Gaussian-weighted, not renormalised
        else:
            torch.testing.assert_close(sums, torch.ones_like(sums))


@pytest.mark.parametrize("index", range(len(LUONG_CONFIGS) + 2))
def test_decoder_outputs_do_not_depend_on_source_or_target_padding(index):
    model = list(all_models())[index].eval()
    src, lens, tgt_in = batch()
    logits, attention = model(src, lens, tgt_in)
    longer_tgt = F.pad(tgt_in, (0, 3))
    logits2, attention2 = model(repad(src, 10), lens, longer_tgt)
    torch.testing.assert_close(logits2[:, :6], logits)
    if attention is not None:
        torch.testing.assert_close(attention2[:, :6, :7], attention)
        assert torch.equal(attention2[:, :, 7:], torch.zeros_like(attention2[:, :, 7:]))


def test_step_by_step_decoding_equals_teacher_forcing_for_every_decoder():
    src, lens, tgt_in = batch()
    for model in all_models("lstm"):
        model.eval()
        logits, attention = model(src, lens, tgt_in)
        state = model.decoder.init_state(model.encode(src, lens))
        for t in range(tgt_in.shape[1]):
            step_logits, state, weights = model.decoder.step(tgt_in[:, t], state)
            torch.testing.assert_close(step_logits, logits[:, t])
            if attention is not None:
                torch.testing.assert_close(weights, attention[:, t])


def test_state_index_select_keeps_rows_of_every_part_of_the_state():
    """Dropping, repeating and reordering sentences selects every part of the state
    (attn_course.attention.fast.index_select, which also keeps shared tensors shared: test_fast.py)."""
    src, lens, tgt_in = batch()
    index = torch.tensor([2, 0, 0, 3])
    for model in all_models("lstm"):
        model.eval()
        state = model.decoder.init_state(model.encode(src, lens))
        state = model.decoder.step(tgt_in[:, 0], state)[1]
        picked = state.index_select(index)
        alone = model.decoder.init_state(model.encode(src[index], lens[index]))
        alone = model.decoder.step(tgt_in[index, 0], alone)[1]
        for mine, theirs in [(picked.hidden, alone.hidden), (picked.feed, alone.feed),
                             (picked.src_valid_lens, alone.src_valid_lens), (picked.memory, alone.memory)]:
            if mine is not None:
                for a, b in zip(mine if isinstance(mine, tuple) else (mine,),
                                theirs if isinstance(theirs, tuple) else (theirs,), strict=True):
                    torch.testing.assert_close(a, b)
        assert picked.step == state.step


@pytest.mark.parametrize("score", ["dot", "general", "concat", "location"])
@pytest.mark.parametrize("alignment", ["global", "local-m", "local-p"])
def test_parallel_luong_path_equals_the_step_loop(score, alignment):
    model = build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, num_layers=2, score=score,
                        attention=alignment, input_feeding=False, window=2,
                        **({"max_len": 12} if score == "location" else {})).double().eval()
    src, lens, tgt_in = batch(tgt_len=9)
    enc = model.encode(src, lens)
    parallel = model.decoder(tgt_in, enc)
    loop = Decoder.forward(model.decoder, tgt_in, enc)   # the generic loop over decoder.step
    torch.testing.assert_close(parallel[0], loop[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(parallel[1], loop[1], rtol=1e-12, atol=1e-12)


def record_queries(monkeypatch, attention):
    queries = []
    attend = attention.attend

    def spy(query, memory):
        queries.append(query.detach().clone())
        return attend(query, memory)

    monkeypatch.setattr(attention, "attend", spy)
    return queries


def test_bahdanau_queries_with_the_previous_state(monkeypatch):
    model = build_model("bahdanau", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, num_layers=2).eval()
    src, lens, tgt_in = batch()
    queries = record_queries(monkeypatch, model.decoder.attention)
    state = model.decoder.init_state(model.encode(src, lens))
    for t in range(tgt_in.shape[1]):
        previous = top_layer(state.hidden)             # s_{t-1}
        _, state, _ = model.decoder.step(tgt_in[:, t], state)
        torch.testing.assert_close(queries[-1][:, 0], previous)
        assert not torch.allclose(queries[-1][:, 0], top_layer(state.hidden))  # ... not s_t
    queries.clear()
    model(src, lens, tgt_in)                           # teacher forcing queries the same way
    assert len(queries) == tgt_in.shape[1]
    torch.testing.assert_close(queries[0][:, 0], top_layer(model.encode(src, lens).state))


@pytest.mark.parametrize("input_feeding", [False, True])
def test_luong_queries_with_the_current_state(monkeypatch, input_feeding):
    model = build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, num_layers=2, score="general",
                        input_feeding=input_feeding).eval()
    src, lens, tgt_in = batch()
    queries = record_queries(monkeypatch, model.decoder.attention)
    state = model.decoder.init_state(model.encode(src, lens))
    for t in range(tgt_in.shape[1]):
        previous = top_layer(state.hidden)
        _, state, _ = model.decoder.step(tgt_in[:, t], state)
        torch.testing.assert_close(queries[-1][:, 0], top_layer(state.hidden))   # h_t
        assert not torch.allclose(queries[-1][:, 0], previous)                  # ... not h_{t-1}
    if not input_feeding:
        queries.clear()
        model(src, lens, tgt_in)
        assert len(queries) == 1 and queries[0].shape == (4, 6, H)   # all steps in one batched call


def test_input_feeding_feeds_the_previous_attentional_state():
    model = build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, input_feeding=True).eval()
    src, lens, tgt_in = batch()
    decoder = model.decoder
    state = decoder.init_state(model.encode(src, lens))
    assert torch.equal(state.feed, torch.zeros(4, H))   # h̃_0 = 0
    _, state1, _ = decoder.step(tgt_in[:, 0], state)
    inputs = torch.cat([decoder.embedding(tgt_in[:, 1]), state1.feed], -1)[:, None]
    expected_output, _ = decoder.rnn(inputs, state1.hidden)
    _, state2, _ = decoder.step(tgt_in[:, 1], state1)
    torch.testing.assert_close(top_layer(state2.hidden), expected_output[:, 0])
    context = torch.bmm(decoder.attention.attend(expected_output, state2.memory)[1], state2.memory.values)
    expected_feed = torch.tanh(decoder.W_c(torch.cat([context, expected_output], -1)))[:, 0]
    torch.testing.assert_close(state2.feed, expected_feed)   # h̃_t = tanh(W_c [c_t; h_t])


def test_local_m_attends_only_within_the_window_around_t():
    model = build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, attention="local-m", window=1,
                        input_feeding=False).eval()
    src, lens, tgt_in = batch(lengths=(7, 3), tgt_len=6)
    _, attention = model(src, lens, tgt_in)
    for i, n in enumerate(lens.tolist()):
        for t in range(6):
            p = min(t, n - 1)                                          # p_t = t, clamped to the source
            inside = [s for s in range(7) if abs(s - p) <= 1 and s < n]
            outside = [s for s in range(7) if s not in inside]
            assert torch.all(attention[i, t, outside] == 0)
            torch.testing.assert_close(attention[i, t, inside].sum(), torch.tensor(1.0))


def test_local_p_is_the_window_softmax_times_a_gaussian_around_a_learned_centre():
    model = build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, attention="local-p", window=2,
                        score="dot", input_feeding=False).double().eval()
    decoder = model.decoder
    src, lens, tgt_in = batch(lengths=(7, 3))
    enc = model.encode(src, lens)
    _, attention = decoder(tgt_in, enc)
    outputs, _ = decoder.rnn(decoder.embedding(tgt_in), enc.state)
    centres = lens[:, None].double() * torch.sigmoid(decoder.v_p(torch.tanh(decoder.W_p(outputs))))[..., 0]
    assert ((centres > 0) & (centres < lens[:, None])).all()   # p_t in (0, S_i), S_i the sentence's length
    torch.testing.assert_close(decoder.centres(outputs, 0, lens), centres)
    scores = torch.bmm(outputs, enc.outputs.transpose(1, 2))
    positions = torch.arange(7, dtype=torch.float64)
    inside = ((positions - centres[..., None]).abs() <= 2) & (positions < lens[:, None, None])
    align = torch.softmax(scores.masked_fill(~inside, -torch.inf), -1)
    gaussian = torch.exp(-((positions - centres[..., None]) ** 2) / (2 * 1.0**2))   # sigma = D / 2 = 1
    torch.testing.assert_close(attention, align * gaussian)


def test_luong_location_score_needs_max_len_and_dot_needs_equal_sizes():
    with pytest.raises(ValueError, match="max_len"):
        build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, score="location")
    with pytest.raises(ValueError, match="score='dot' needs num_hiddens == enc_size"):
        build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, score="dot", bidirectional=True)
    with pytest.raises(ValueError, match="attention="):
        build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, attention="local")
    with pytest.raises(ValueError, match="window must be an int >= 1, got 0"):
        build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, window=0)


def test_plain_decoder_reads_one_fixed_context_at_every_step():
    model = build_model("plain", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H).eval()
    src, lens, tgt_in = batch()
    enc = model.encode(src, lens)
    state = model.decoder.init_state(enc)
    torch.testing.assert_close(state.feed, enc.state[-1])          # c = tanh(W h_S), the bridged state
    for t in range(3):
        _, state, weights = model.decoder.step(tgt_in[:, t], state)
        assert weights is None
        torch.testing.assert_close(state.feed, enc.state[-1])


@pytest.mark.parametrize("kind", ["bahdanau", "luong-concat-feeding", "luong-local-p"])
def test_decoder_gradients_match_finite_differences(kind):
    options = {"bahdanau": {}, "luong-concat-feeding": dict(score="concat", input_feeding=True),
               "luong-local-p": dict(score="general", alignment="local-p", window=1, input_feeding=False)}
    model_kind = kind.split("-")[0]
    decoder_cls = BahdanauDecoder if model_kind == "bahdanau" else LuongDecoder
    decoder = decoder_cls(5, 3, 3, enc_size=4, **options[kind]).double()
    tgt_in = torch.tensor([[1, 2, 3], [1, 4, 2]])
    lens = torch.tensor([3, 2])
    annotations = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    s0 = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)

    def logits(annotations, s0):
        annotations = annotations * (torch.arange(3)[None, :, None] < lens[:, None, None])  # zero padding
        return decoder(tgt_in, EncoderOutput(annotations, torch.tanh(s0), lens))[0]

    assert torch.autograd.gradcheck(logits, (annotations, s0))


# ----------------------------------------------------------------------------------------------- Seq2Seq
def test_seq2seq_refuses_an_encoder_and_decoder_that_do_not_fit():
    encoder = Encoder(V_SRC, E, H, bidirectional=True)
    with pytest.raises(ValueError, match="enc_size"):
        Seq2Seq(encoder, BahdanauDecoder(V_TGT, E, H, enc_size=H))
    with pytest.raises(ValueError, match="cell"):
        Seq2Seq(encoder, BahdanauDecoder(V_TGT, E, H, enc_size=2 * H, cell="lstm"))
    with pytest.raises(ValueError, match="num_layers"):
        Seq2Seq(encoder, PlainDecoder(V_TGT, E, H, 2, enc_size=2 * H))
    with pytest.raises(ValueError, match="kind="):
        build_model("transformer", V_SRC, V_TGT)


def test_decoder_rejects_an_encoder_output_of_the_wrong_size():
    decoder = BahdanauDecoder(V_TGT, E, H, enc_size=2 * H)
    src, lens, tgt_in = batch()
    enc = Encoder(V_SRC, E, H)(src, lens)
    with pytest.raises(ValueError, match=r"enc.outputs has shape \(4, 7, 8\), expected"):
        decoder(tgt_in, enc)
    with pytest.raises(ValueError, match="tgt_in has shape"):
        BahdanauDecoder(V_TGT, E, H, enc_size=H)(tgt_in[:2], enc)


def test_config_rebuilds_the_same_architecture():
    for model in all_models():
        rebuilt = Seq2Seq.from_config(model.config)
        rebuilt.load_state_dict(model.state_dict())
        src, lens, tgt_in = batch()
        torch.testing.assert_close(rebuilt.eval()(src, lens, tgt_in)[0], model.eval()(src, lens, tgt_in)[0])


def test_model_config_records_what_was_asked_and_rebuilds_from_its_fields():
    model = build_model("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, decoder_hiddens=5,
                        score="concat", attn_hiddens=3)
    assert model.config == ModelConfig("luong", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H,
                                       decoder_hiddens=5, score="concat", attn_hiddens=3)
    assert model.encoder.num_hiddens == H and model.decoder.num_hiddens == 5
    rebuilt = Seq2Seq.from_config(ModelConfig(**asdict(model.config)))
    assert [p.shape for p in rebuilt.parameters()] == [p.shape for p in model.parameters()]


def test_model_config_refuses_an_option_its_decoder_does_not_read():
    with pytest.raises(ValueError, match="score='dot' is an option of luong models, got kind='bahdanau'"):
        ModelConfig("bahdanau", V_SRC, V_TGT, score="dot")
    with pytest.raises(ValueError, match="attn_hiddens=4 is an option of bahdanau and luong models"):
        ModelConfig("plain", V_SRC, V_TGT, attn_hiddens=4)


def test_build_model_names_its_options_when_given_an_unknown_one():
    expected = r"unknown options \['num_hiddens'\], expected some of \['embed_size', 'encoder_hiddens', "
    with pytest.raises(ValueError, match=expected + "'decoder_hiddens'"):
        build_model("bahdanau", V_SRC, V_TGT, num_hiddens=H)


def test_build_model_defaults_follow_the_papers():
    assert build_model("bahdanau", V_SRC, V_TGT).encoder.bidirectional
    assert build_model("plain", V_SRC, V_TGT).encoder.bidirectional
    luong = build_model("luong", V_SRC, V_TGT)
    assert not luong.encoder.bidirectional
    assert luong.decoder.input_feeding and luong.decoder.score == "general"


def test_score_activation_reaches_bahdanaus_attention_and_a_checkpoint_records_it(tmp_path):
    from attn_course.training.loop import load_checkpoint, save_checkpoint

    torch.manual_seed(0)
    default = build_model("bahdanau", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H)
    torch.manual_seed(0)
    tanh = build_model("bahdanau", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, score_activation="tanh")
    src, lens, tgt_in = batch()
    assert default.decoder.attention.activation == "tanh"
    assert torch.equal(default.eval()(src, lens, tgt_in)[1], tanh.eval()(src, lens, tgt_in)[1])
    relu = build_model("bahdanau", V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, score_activation="relu")
    relu.load_state_dict(default.state_dict())
    assert not torch.equal(relu.eval()(src, lens, tgt_in)[1], default(src, lens, tgt_in)[1])
    path = save_checkpoint(relu, tmp_path / "relu.pt")
    assert torch.load(path, weights_only=True)["config"]["score_activation"] == "relu"
    loaded, _ = load_checkpoint(path, device="cpu")
    assert loaded.decoder.attention.activation == "relu"
    assert torch.equal(loaded(src, lens, tgt_in)[1], relu(src, lens, tgt_in)[1])
    with pytest.raises(ValueError, match="score_activation='relu' is an option of bahdanau models"):
        ModelConfig("luong", V_SRC, V_TGT, score_activation="relu")
    with pytest.raises(ValueError, match="activation='elu'"):
        build_model("bahdanau", V_SRC, V_TGT, score_activation="elu")


def with_attention_dropout(model: Seq2Seq, p: float) -> Seq2Seq:
    """A copy of `model` (same weights) whose decoder attention drops its weights with probability p."""
    config = ModelConfig(model.kind, V_SRC, V_TGT, **({} if model.kind == "bahdanau"
                                                       else luong_options(LUONG_CONFIGS[3])))
    options = config.decoder_options()            # the config's attention= is the decoder's alignment=
    enc_size = model.encoder.enc_size
    decoder = type(model.decoder)(V_TGT, E, H, enc_size=enc_size, attention_dropout=p, **options)
    copy = Seq2Seq(model.encoder, decoder)
    copy.decoder.load_state_dict(model.decoder.state_dict())
    return copy


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_attention_dropout_reaches_the_decoders_layer_and_acts_only_in_training(kind):
    torch.manual_seed(0)
    options = {} if kind == "bahdanau" else luong_options(LUONG_CONFIGS[3])
    model = build_model(kind, V_SRC, V_TGT, embed_size=E, encoder_hiddens=H, **options)
    assert model.decoder.attention.dropout.p == 0.0                  # off by default
    dropped = with_attention_dropout(model, 0.5)
    assert dropped.decoder.attention.dropout.p == 0.5
    src, lens, tgt_in = batch()
    clean_logits, clean_attention = model.eval()(src, lens, tgt_in)
    eval_logits, eval_attention = dropped.eval()(src, lens, tgt_in)
    assert torch.equal(eval_logits, clean_logits) and torch.equal(eval_attention, clean_attention)
    torch.manual_seed(1)
    train_logits, train_attention = dropped.train()(src, lens, tgt_in)
    assert not torch.allclose(train_logits, clean_logits)
    first_step = slice(0, 1)   # later steps see other states once the first context was dropped
    torch.testing.assert_close(train_attention[:, first_step], clean_attention[:, first_step])


@pytest.mark.parametrize("kind", [BahdanauDecoder, LuongDecoder])
@pytest.mark.parametrize("p", [-0.5, 1.0])
def test_decoders_refuse_an_attention_dropout_outside_zero_to_one_naming_it(kind, p):
    with pytest.raises(ValueError, match=r"attention_dropout must be a finite number in \[0, 1\)"):
        kind(V_TGT, E, H, enc_size=H, attention_dropout=p)
