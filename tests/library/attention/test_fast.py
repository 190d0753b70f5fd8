"""attn_course.attention.fast: every fast form equals the plain form it replaces; decoding opts into them."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from attn_course.attention import fast
from attn_course.attention.layers import AdditiveAttention, LuongAttention
from attn_course.attention.scoring import additive_scores
from attn_course.data.tasks import Vocab
from attn_course.models.decoders import DecoderState
from attn_course.models.decoding import beam_search, greedy_decode, translate
from attn_course.models.seq2seq import build_model

PROPERTY = settings(max_examples=40, deadline=None)
BOS, EOS = 1, 2


def tanh_form(queries, keys, w_v):
    """w_vᵀ tanh(q + k), written out independently of the package."""
    return F.linear(torch.tanh(queries[:, :, None] + keys[:, None]), w_v).squeeze(-1)


# ------------------------------------------------------------------------------------------ additive_scores
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("grad", [False, True])
def test_fast_additive_scores_equal_the_plain_form_over_the_whole_float_range(dtype, grad):
    """float32 without autograd takes (2 w_v)ᵀ sigmoid(2x) - sum(w_v): within 3e-7 of w_v tanh(x) per unit
    over the whole float range, saturating exactly, with no inf - inf where opposite huge projections
    cancel, and passing NaN on; every other case is the plain form itself, bit for bit, gradients too."""
    finfo = torch.finfo(dtype)
    tiny = torch.logspace(-30, 1, 200)
    ramps = torch.cat([torch.linspace(-12, 12, 4001), tiny, -tiny])
    edges = torch.tensor([0.0, 1e-45, finfo.max, -finfo.max, math.inf, -math.inf, math.nan], dtype=dtype)
    x = torch.cat([ramps.to(dtype), edges])
    queries = x.reshape(1, -1, 1).requires_grad_(grad)                      # one hidden unit, w_v = 1
    keys = torch.tensor([0.0, -finfo.max], dtype=dtype).reshape(1, 2, 1)   # x itself, and x - max
    w_v = torch.ones(1, 1, dtype=dtype)
    assert x.numel() * 2 >= fast.SIGMOID_FORM_MIN_SIZE               # large enough for the sigmoid form
    got = fast.additive_scores(queries, keys, w_v)
    expected = additive_scores(queries, keys, w_v)
    torch.testing.assert_close(expected, tanh_form(queries, keys, w_v), rtol=0, atol=0, equal_nan=True)
    exact = dtype != torch.float32 or grad
    torch.testing.assert_close(got, expected, rtol=0, atol=0 if exact else 3e-7, equal_nan=True)
    # rows: max, -max, inf, -inf; columns: x, x - max (so max - max = 0 exactly, in every path)
    assert got[0, -5:-1].tolist() == [[1.0, 0.0], [-1.0, -1.0], [1.0, 1.0], [-1.0, -1.0]]
    assert got[0, -1].isnan().all()
    if grad:
        got.nan_to_num().sum().backward()
        reference = x.detach().clone().reshape(1, -1, 1).requires_grad_()
        additive_scores(reference, keys, w_v).nan_to_num().sum().backward()
        torch.testing.assert_close(queries.grad, reference.grad, rtol=0, atol=0, equal_nan=True)


def test_fast_additive_scores_of_a_small_tensor_are_the_plain_form_bit_for_bit():
    """One sentence at a time the tensor is small and the calls cost more than the tanh kernel: tanh form."""
    queries, keys, w_v = torch.randn(1, 1, 128), torch.randn(1, 30, 128), torch.randn(1, 128)
    assert 30 * 128 < fast.SIGMOID_FORM_MIN_SIZE
    assert torch.equal(fast.additive_scores(queries, keys, w_v), additive_scores(queries, keys, w_v))


def test_fast_additive_scores_over_many_hidden_units_are_as_close_to_float64_as_the_plain_form():
    """With 128 units the fast form's sum(w_v) offset cancels as the tanh form's sum does: within 1e-6 of a
    float64 reference, like the plain form itself, and argmax-identical on every row."""
    gen = torch.Generator().manual_seed(0)
    queries, keys = 3 * torch.randn(50, 2, 128, generator=gen), 3 * torch.randn(50, 31, 128, generator=gen)
    w_v = torch.randn(1, 128, generator=gen) / 8
    reference = tanh_form(queries.double(), keys.double(), w_v.double())
    got = fast.additive_scores(queries, keys, w_v)
    torch.testing.assert_close(got.double(), reference, rtol=0, atol=1e-6)
    torch.testing.assert_close(additive_scores(queries, keys, w_v).double(), reference, rtol=0, atol=1e-6)
    assert torch.equal(got.argmax(-1), reference.argmax(-1))


@PROPERTY
@given(
    sizes=st.tuples(*[st.integers(0, 4)] * 3, st.integers(0, 9)),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    scale=st.floats(0.1, 20.0),
    seed=st.integers(0, 2**16),
)
def test_fast_additive_scores_take_the_sigmoid_form_equal_to_the_plain_form_at_any_size(sizes, dtype, scale,
                                                                                      seed):
    """With the size threshold at 0 every float32 input takes the sigmoid form, empty ones included:
    the plain form's shape, and its values within float32 rounding of sum|w_v|; float64 is bit for bit."""
    batch_size, num_queries, num_keys, num_hiddens = sizes
    gen = torch.Generator().manual_seed(seed)
    queries = scale * torch.randn(batch_size, num_queries, num_hiddens, generator=gen, dtype=dtype)
    keys = scale * torch.randn(batch_size, num_keys, num_hiddens, generator=gen, dtype=dtype)
    w_v = torch.randn(1, num_hiddens, generator=gen, dtype=dtype)
    expected = additive_scores(queries, keys, w_v)
    with mock.patch.object(fast, "SIGMOID_FORM_MIN_SIZE", 0):
        got = fast.additive_scores(queries, keys, w_v)
    assert got.shape == expected.shape == (batch_size, num_queries, num_keys) and got.dtype == dtype
    atol = 0.0 if dtype == torch.float64 else 1e-6 * (1.0 + float(w_v.abs().sum()))
    torch.testing.assert_close(got, expected, rtol=0, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fast_additive_scores_pass_the_same_gradients_as_the_plain_form(dtype):
    """Under autograd the fast form is the plain form: the same scores and gradients for every input."""
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(*shape, generator=gen, dtype=dtype) for shape in ((4, 9, 32), (4, 40, 32), (1, 32))]
    fast_inputs = [t.clone().requires_grad_() for t in inputs]
    plain_inputs = [t.clone().requires_grad_() for t in inputs]
    assert 4 * 9 * 40 * 32 >= fast.SIGMOID_FORM_MIN_SIZE
    got, expected = fast.additive_scores(*fast_inputs), additive_scores(*plain_inputs)
    assert torch.equal(got, expected)
    weights = torch.randn(expected.shape, generator=gen, dtype=dtype)
    (got * weights).sum().backward()
    (expected * weights).sum().backward()
    for mine, theirs in zip(fast_inputs, plain_inputs, strict=True):
        assert torch.equal(mine.grad, theirs.grad)


@pytest.mark.parametrize("args", [
    (torch.ones(2, 3, 6), torch.ones(2, 5, 6), torch.ones(6)),
    (torch.ones(2, 3, 6), torch.ones(3, 5, 6), torch.ones(1, 6)),
    (torch.ones(2, 3, 6, dtype=torch.long), torch.ones(2, 5, 6), torch.ones(1, 6)),
])
def test_fast_additive_scores_refuse_what_the_plain_form_refuses_with_its_message(args):
    with pytest.raises(ValueError) as plain:
        additive_scores(*args)
    with pytest.raises(ValueError) as got:
        fast.additive_scores(*args)
    assert str(got.value) == str(plain.value)


# ------------------------------------------------------------------------------------ memory.fast_scores
def attention_layers():
    yield AdditiveAttention(key_size=5, query_size=4, num_hiddens=16)
    yield LuongAttention("concat", query_size=4, key_size=5, num_hiddens=16)


@pytest.mark.parametrize("layer", list(attention_layers()), ids=["additive", "luong-concat"])
def test_a_memory_prepared_for_fast_scores_attends_as_the_plain_one_and_the_layer_is_untouched(layer,
                                                                                              monkeypatch):
    """The fast form is chosen by the memory, a value: the layer's attributes and parameters stay as they
    were, and the weights and context equal the plain memory's."""
    torch.manual_seed(0)
    queries, keys = torch.randn(8, 6, 4), torch.randn(8, 40, 5)
    lens = torch.randint(1, 41, (8,))
    before = (dict(vars(layer)), {k: v.clone() for k, v in layer.state_dict().items()})
    sigmoid_form = spy_on_sigmoid_form(monkeypatch)
    with torch.no_grad():
        plain = layer.attend(queries, layer.prepare(keys, keys, lens))
        assert not sigmoid_form
        faster = layer.attend(queries, layer.prepare(keys, keys, lens, fast_scores=True))
    assert any(sigmoid_form)
    assert vars(layer).keys() == before[0].keys() and all(v is before[0][k] for k, v in vars(layer).items())
    assert all(torch.equal(v, before[1][k]) for k, v in layer.state_dict().items())
    for mine, theirs in zip(faster, plain, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-6)


def test_a_fast_memory_keeps_its_choice_when_rows_are_selected():
    layer = AdditiveAttention(key_size=5, query_size=4, num_hiddens=16)
    keys = torch.randn(3, 7, 5)
    memory = layer.prepare(keys, keys, torch.tensor([7, 2, 5]), fast_scores=True)
    assert memory.fast_scores and not layer.prepare(keys, keys).fast_scores
    selected = fast.select_rows(memory, torch.tensor([2, 0]))
    assert type(memory)(*selected).fast_scores is True


def spy_on_sigmoid_form(monkeypatch) -> list[bool]:
    """Record every answer of fast.sigmoid_form_pays (the sigmoid form was taken where one is True)."""
    answers: list[bool] = []
    pays = fast.sigmoid_form_pays

    def spy(*args):
        answers.append(pays(*args))
        return answers[-1]

    monkeypatch.setattr(fast, "sigmoid_form_pays", spy)
    return answers


@pytest.mark.parametrize("search", [greedy_decode, beam_search])
def test_decoding_scores_with_the_fast_form_and_finds_what_the_plain_form_finds(search, monkeypatch):
    """The decoding benchmark times the fast form: greedy and beam search use it (and leave the model as it
    was), with the same tokens and scores as the plain form gives them."""
    torch.manual_seed(0)
    model = build_model("bahdanau", 12, 9, embed_size=8, encoder_hiddens=32)
    src = torch.randint(4, 12, (16, 20))
    lens = torch.randint(1, 21, (16,))
    options = dict(bos=BOS, eos=EOS, max_len=12) | ({"beam_size": 3} if search is beam_search else {})
    attributes = dict(vars(model.decoder.attention))
    sigmoid_form = spy_on_sigmoid_form(monkeypatch)
    faster = search(model, src, lens, **options)
    assert any(sigmoid_form) and vars(model.decoder.attention) == attributes
    with mock.patch.object(fast, "SIGMOID_FORM_MIN_SIZE", math.inf):         # the tanh form throughout
        plain = search(model, src, lens, **options)
    for mine, theirs in zip(faster, plain, strict=True):
        assert mine.tokens == theirs.tokens and mine.finished == theirs.finished
        assert math.isclose(mine.score, theirs.score, rel_tol=1e-5, abs_tol=1e-5)
        torch.testing.assert_close(mine.attention, theirs.attention, rtol=0, atol=1e-5)


def test_teacher_forcing_takes_the_fast_form_only_when_asked(monkeypatch):
    torch.manual_seed(0)
    model = build_model("luong", 12, 9, embed_size=8, encoder_hiddens=32, score="concat").eval()
    src, lens = torch.randint(4, 12, (16, 20)), torch.randint(1, 21, (16,))
    tgt_in = torch.randint(4, 9, (16, 6))
    sigmoid_form = spy_on_sigmoid_form(monkeypatch)
    with torch.no_grad():
        plain = model(src, lens, tgt_in)
        assert not sigmoid_form
        faster = model(src, lens, tgt_in, fast_scores=True)
    assert any(sigmoid_form)
    for mine, theirs in zip(faster, plain, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------------- index_select
def decoder_states():
    torch.manual_seed(0)
    sizes = dict(embed_size=6, encoder_hiddens=8)
    src, lens = torch.randint(4, 12, (4, 7)), torch.tensor([7, 3, 5, 1])
    models = [build_model("plain", 12, 9, **sizes), build_model("bahdanau", 12, 9, **sizes, cell="lstm"),
              build_model("luong", 12, 9, **sizes, score="dot"),
              build_model("luong", 12, 9, **sizes, score="concat", input_feeding=True),
              build_model("luong", 12, 9, **sizes, score="location", max_len=7, attention="local-p")]
    for model in models:
        with torch.no_grad():
            state = model.decoder.init_state(model.encode(src, lens))
            yield model.decoder.step(torch.full((4,), BOS), state)[1]


def sharing(fields: list) -> list[list[bool]]:
    """Which fields are the same object."""
    return [[a is b for b in fields] for a in fields]


def flatten(state: DecoderState) -> list:
    hidden = state.hidden if isinstance(state.hidden, tuple) else (state.hidden,)
    memory = tuple(state.memory) if state.memory is not None else ()
    return [*hidden, *memory, state.feed, state.step, state.src_valid_lens]


@pytest.mark.parametrize("index", [[2, 0, 0, 3], [1], [], [3, 2, 1, 0, 0, 1, 2, 3]])
def test_fast_index_select_equals_the_plain_one_and_keeps_shared_tensors_shared(index):
    """Keys that are also the values (and dot attention's keys, their own projection) are copied once
    and stay one tensor; every part of the state is what DecoderState.index_select gives."""
    index = torch.tensor(index, dtype=torch.long)
    for state in decoder_states():
        got, expected = fast.index_select(state, index), state.index_select(index)
        assert type(got) is DecoderState and type(got.memory) is type(expected.memory)
        for mine, theirs in zip(flatten(got), flatten(expected), strict=True):
            if isinstance(theirs, torch.Tensor):
                assert torch.equal(mine, theirs)
            else:
                assert mine == theirs
        if state.memory is not None:
            fields = [f for f in state.memory if isinstance(f, torch.Tensor)]
            selected = [f for f in got.memory if isinstance(f, torch.Tensor)]
            assert len({id(f) for f in fields}) < len(fields)      # keys are the values in every model
            assert sharing(selected) == sharing(fields)


def test_fast_index_select_of_a_state_without_memory_is_its_own_index_select():
    class Calls(list):
        def index_select(self, index):
            self.append(index)
            return "selected"

    state, index = Calls(), torch.tensor([1])
    assert fast.index_select(state, index) == "selected" and state == [index]


@PROPERTY
@given(fields=st.lists(st.sampled_from(["a", "b", "c", None, 7]), max_size=6),
       index=st.lists(st.integers(0, 2), max_size=5))
def test_select_rows_selects_each_tensor_field_and_shares_what_was_shared(fields, index):
    tensors = {name: torch.randn(3, 2) for name in "abc"}
    fields = [tensors.get(f, f) if isinstance(f, str) else f for f in fields]
    index = torch.tensor(index, dtype=torch.long)
    got = fast.select_rows(fields, index)
    assert len(got) == len(fields)
    for field, mine in zip(fields, got, strict=True):
        if isinstance(field, torch.Tensor):
            assert torch.equal(mine, field.index_select(0, index))
        else:
            assert mine is field
    assert sharing(got) == sharing(fields)


# ------------------------------------------------------------------------------------------------- to_tokens
VOCAB = Vocab(["il", "dort", "elle", "mange", "."])


@PROPERTY
@given(indices=st.lists(st.one_of(st.integers(-3, len(VOCAB) + 2), st.booleans()), max_size=8),
       as_tuple=st.booleans())
def test_fast_to_tokens_equals_the_vocabularys_or_raises_its_error(indices, as_tuple):
    indices = tuple(indices) if as_tuple else indices
    try:
        expected = VOCAB.to_tokens(indices)
    except ValueError as error:
        with pytest.raises(ValueError) as got:
            fast.to_tokens(VOCAB, indices)
        assert str(got.value) == str(error)
    else:
        assert fast.to_tokens(VOCAB, indices) == expected


@pytest.mark.parametrize("indices", [torch.tensor([4, 5, 2]), torch.tensor([[4, 5], [6, 7]]), torch.tensor(4),
                                     5, [[4, 5], [6]]])
def test_fast_to_tokens_of_anything_but_a_flat_list_is_the_vocabularys(indices):
    assert fast.to_tokens(VOCAB, indices) == VOCAB.to_tokens(indices)


def test_translate_maps_source_ids_back_to_the_vocabularys_tokens():
    torch.manual_seed(0)
    model = build_model("bahdanau", len(VOCAB), 7, embed_size=6, encoder_hiddens=8)
    results = translate(model, ["il dort .", "elle mange zèbre ."], VOCAB, Vocab(["a", "b", "c"]), max_len=5)
    assert [r.source for r in results] == [["il", "dort", ".", "<eos>"],
                                           ["elle", "mange", "<unk>", ".", "<eos>"]]
