"""Scoring functions and attention layers: equal to d2l and to the papers' equations, keys projected once."""

from __future__ import annotations

import math

import d2l.torch as d2l
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from attn_course import (
    AdditiveAttention,
    DotProductAttention,
    LuongAttention,
    Memory,
    masked_softmax,
)
from attn_course.attention.layers import LUONG_SCORES
from attn_course.attention.scoring import (
    additive_scores,
    concat_scores,
    dot_scores,
    general_scores,
    location_scores,
)

FAST = settings(max_examples=30, deadline=None)
QUERY_SIZE, KEY_SIZE, VALUE_SIZE, NUM_HIDDENS, MAX_LEN = 4, 5, 3, 6, 9

LAYERS = {
    "dot": lambda: DotProductAttention(scaled=False),
    "scaled_dot": lambda: DotProductAttention(),
    "additive": lambda: AdditiveAttention(KEY_SIZE, QUERY_SIZE, NUM_HIDDENS),
    "luong_dot": lambda: LuongAttention("dot", KEY_SIZE, KEY_SIZE),
    "general": lambda: LuongAttention("general", QUERY_SIZE, KEY_SIZE),
    "concat": lambda: LuongAttention("concat", QUERY_SIZE, KEY_SIZE, num_hiddens=NUM_HIDDENS),
    "location": lambda: LuongAttention("location", QUERY_SIZE, KEY_SIZE, max_len=MAX_LEN),
}


def query_size_of(layer) -> int:
    return layer.query_size if layer.query_size is not None else KEY_SIZE


def make_inputs(layer, batch_size=3, num_queries=2, num_keys=6, dtype=torch.float32, device="cpu"):
    """Random queries, keys, values for `layer`, and valid_lens (batch_size,) with one empty sequence."""

    def randn(*shape):
        return torch.randn(*shape, dtype=dtype).to(device)

    queries = randn(batch_size, num_queries, query_size_of(layer))
    keys, values = randn(batch_size, num_keys, KEY_SIZE), randn(batch_size, num_keys, VALUE_SIZE)
    valid_lens = torch.arange(batch_size, device=device) * num_keys // max(batch_size - 1, 1)
    return queries, keys, values, valid_lens


def lens_of_kind(kind: str, batch_size: int, num_queries: int, num_keys: int, low: int, gen=None):
    if kind == "none":
        return None
    shape = (batch_size,) if kind == "per_sequence" else (batch_size, num_queries)
    return torch.randint(low, num_keys + 1, shape, generator=gen)


shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 7))
lens_kinds = st.sampled_from(["none", "per_sequence", "per_query"])
seeds = st.integers(0, 2**31 - 1)


# ---------------------------------------------------------------- equal to d2l


@FAST
@given(shape=shapes, size=st.integers(1, 6), kind=lens_kinds, seed=seeds)
def test_dot_product_attention_equals_d2l(shape, size, kind, seed):
    gen = torch.Generator().manual_seed(seed)
    batch_size, num_queries, num_keys = shape
    queries = torch.randn(batch_size, num_queries, size, generator=gen)
    keys = torch.randn(batch_size, num_keys, size, generator=gen)
    values = torch.randn(batch_size, num_keys, 3, generator=gen)
    valid_lens = lens_of_kind(kind, *shape, low=1, gen=gen)
    theirs, ours = d2l.DotProductAttention(dropout=0.0), DotProductAttention()
    expected = theirs(queries, keys, values, valid_lens)
    torch.testing.assert_close(ours(queries, keys, values, valid_lens), expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights, rtol=1e-6, atol=1e-7)


@FAST
@given(
    shape=shapes,
    sizes=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 6)),
    kind=lens_kinds,
    seed=seeds,
)
def test_additive_attention_equals_d2l_with_copied_weights(shape, sizes, kind, seed):
    gen = torch.Generator().manual_seed(seed)
    batch_size, num_queries, num_keys = shape
    query_size, key_size, num_hiddens = sizes
    queries = torch.randn(batch_size, num_queries, query_size, generator=gen)
    keys = torch.randn(batch_size, num_keys, key_size, generator=gen)
    values = torch.randn(batch_size, num_keys, 2, generator=gen)
    valid_lens = lens_of_kind(kind, *shape, low=1, gen=gen)
    theirs = d2l.AdditiveAttention(num_hiddens, dropout=0.0)
    theirs(queries, keys, values, valid_lens)  # d2l's LazyLinear layers get their sizes on the first call
    ours = AdditiveAttention(key_size, query_size, num_hiddens)
    ours.load_state_dict(theirs.state_dict())
    expected = theirs(queries, keys, values, valid_lens)
    torch.testing.assert_close(ours(queries, keys, values, valid_lens), expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights, rtol=1e-6, atol=1e-7)


def test_fully_padded_sequence_gets_zero_context_where_d2l_averages_the_padding():
    queries, keys, values = torch.randn(2, 1, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 2)
    valid_lens = torch.tensor([0, 3])
    theirs = d2l.DotProductAttention(dropout=0.0)(queries, keys, values, valid_lens)
    ours = DotProductAttention()(queries, keys, values, valid_lens)
    torch.testing.assert_close(theirs[0, 0], values[0].mean(0))
    assert torch.equal(ours[0], torch.zeros(1, 2))
    torch.testing.assert_close(ours[1], theirs[1])


def test_additive_attention_has_d2l_parameter_names_and_no_biases():
    layer = AdditiveAttention(key_size=5, query_size=4, num_hiddens=6)
    shapes_by_name = {name: tuple(p.shape) for name, p in layer.named_parameters()}
    assert shapes_by_name == {"W_k.weight": (6, 5), "W_q.weight": (6, 4), "w_v.weight": (1, 6)}


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        (LuongAttention("dot", 4, 4), {}),
        (LuongAttention("general", 4, 5), {"W_a.weight": (4, 5)}),
        (LuongAttention("concat", 4, 5, num_hiddens=6), {"W_a.weight": (6, 9), "v_a.weight": (1, 6)}),
        (LuongAttention("location", 4, 5, max_len=9), {"W_a.weight": (9, 4)}),
    ],
    ids=["dot", "general", "concat", "location"],
)
def test_luong_attention_has_the_papers_parameters_and_no_biases(layer, expected):
    assert {name: tuple(p.shape) for name, p in layer.named_parameters()} == expected


@pytest.mark.parametrize("score", list(LUONG_SCORES))
def test_luong_attention_builds_the_named_scores_class_which_attends_alike_when_built_directly(score):
    options = {"concat": {"num_hiddens": 6}, "location": {"max_len": 9}}.get(score, {})
    by_name = LuongAttention(score, 5, 5, **options)
    direct = LUONG_SCORES[score](5, 5, *options.values())
    assert type(by_name) is LUONG_SCORES[score] and by_name.score == score
    assert f"score={score!r}" in repr(by_name)
    direct.load_state_dict(by_name.state_dict())
    queries, keys, lens = torch.randn(2, 3, 5), torch.randn(2, 7, 5), torch.tensor([7, 2])
    for mine, theirs in zip(direct.attend(queries, direct.prepare(keys, keys, lens)),
                            by_name.attend(queries, by_name.prepare(keys, keys, lens)), strict=True):
        assert torch.equal(mine, theirs)


# ---------------------------------------------------------------- scores equal the papers' equations


def test_dot_scores_scaled_divides_by_the_square_root_of_the_feature_size():
    queries, keys = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    expected = torch.einsum("bqd,bkd->bqk", queries, keys)
    torch.testing.assert_close(dot_scores(queries, keys), expected)
    torch.testing.assert_close(dot_scores(queries, keys, scaled=True), expected / 2)


def test_general_scores_equal_the_bilinear_form():
    queries, keys, W_a = torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(4, 6)
    expected = torch.einsum("bqi,ij,bkj->bqk", queries, W_a, keys)
    torch.testing.assert_close(general_scores(queries, keys, W_a), expected)


def test_additive_scores_equal_the_mlp_on_summed_projections():
    projected_queries, projected_keys, w_v = torch.randn(2, 3, 6), torch.randn(2, 5, 6), torch.randn(1, 6)
    expected = torch.einsum(
        "bqkh,h->bqk", torch.tanh(projected_queries[:, :, None] + projected_keys[:, None]), w_v[0]
    )
    torch.testing.assert_close(additive_scores(projected_queries, projected_keys, w_v), expected)


def test_concat_scores_equal_the_mlp_on_the_literal_concatenation():
    queries, keys, W_a, v_a = (
        torch.randn(2, 3, 4),
        torch.randn(2, 5, 6),
        torch.randn(7, 10),
        torch.randn(1, 7),
    )
    pairs = torch.cat([queries[:, :, None].expand(2, 3, 5, 4), keys[:, None].expand(2, 3, 5, 6)], dim=-1)
    expected = (torch.tanh(pairs @ W_a.T) @ v_a.T).squeeze(-1)
    torch.testing.assert_close(concat_scores(queries, keys, W_a, v_a), expected)


def test_location_scores_are_the_first_num_keys_rows_of_W_a_applied_to_the_query():
    queries, W_a = torch.randn(2, 3, 4), torch.randn(9, 4)
    torch.testing.assert_close(location_scores(queries, W_a, num_keys=5), (queries @ W_a.T)[..., :5])


@pytest.mark.parametrize("score", ["dot", "general", "concat", "location"])
def test_luong_attention_equals_its_score_function_then_masked_softmax(score):
    kwargs = {"concat": {"num_hiddens": NUM_HIDDENS}, "location": {"max_len": MAX_LEN}}.get(score, {})
    query_size = KEY_SIZE if score == "dot" else QUERY_SIZE
    layer = LuongAttention(score, query_size, KEY_SIZE, **kwargs)
    queries, keys, values, valid_lens = make_inputs(layer)
    scores = {
        "dot": lambda: dot_scores(queries, keys),
        "general": lambda: general_scores(queries, keys, layer.W_a.weight),
        "concat": lambda: concat_scores(queries, keys, layer.W_a.weight, layer.v_a.weight),
        "location": lambda: location_scores(queries, layer.W_a.weight, keys.shape[1]),
    }[score]()
    weights = masked_softmax(scores, valid_lens)
    torch.testing.assert_close(layer(queries, keys, values, valid_lens), weights @ values)
    torch.testing.assert_close(layer.attention_weights, weights)


def test_location_attention_ignores_the_keys_but_not_their_count():
    layer = LAYERS["location"]()
    queries, keys, values, valid_lens = make_inputs(layer)
    expected = layer(queries, keys, values, valid_lens)
    torch.testing.assert_close(layer(queries, torch.randn_like(keys), values, valid_lens), expected)
    assert torch.equal(layer.attention_weights[0], torch.zeros(2, 6)), "valid length 0 masks every position"


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize(
    ("function", "shapes"),
    [
        (lambda q, k: dot_scores(q, k), [(2, 3, 4), (2, 5, 4)]),
        (lambda q, k: dot_scores(q, k, scaled=True), [(2, 3, 4), (2, 5, 4)]),
        (general_scores, [(2, 3, 4), (2, 5, 6), (4, 6)]),
        (additive_scores, [(2, 3, 6), (2, 5, 6), (1, 6)]),
        (concat_scores, [(2, 3, 4), (2, 5, 6), (7, 10), (1, 7)]),
        (lambda q, W: location_scores(q, W, 5), [(2, 3, 4), (9, 4)]),
    ],
    ids=["dot", "scaled_dot", "general", "additive", "concat", "location"],
)
def test_score_functions_pass_gradcheck_in_inputs_and_weights(function, shapes):
    args = [torch.randn(shape, dtype=torch.float64, requires_grad=True) for shape in shapes]
    assert torch.autograd.gradcheck(function, args)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("kind", ["per_sequence", "per_query"])
def test_layers_pass_gradcheck_including_fully_padded_sequences(name, kind):
    layer = LAYERS[name]().double()
    queries, keys, values, valid_lens = make_inputs(layer, batch_size=2, num_keys=4, dtype=torch.float64)
    if kind == "per_query":
        valid_lens = torch.tensor([[0, 2], [4, 0]])
    else:
        assert valid_lens.tolist() == [0, 4]
    inputs = [t.requires_grad_() for t in (queries, keys, values)]
    if name == "location":  # its output does not depend on the keys
        inputs = [queries, values]

        def function(q, v):
            return layer(q, keys, v, valid_lens)
    else:

        def function(q, k, v):
            return layer(q, k, v, valid_lens)

    assert torch.autograd.gradcheck(function, inputs)


@pytest.mark.parametrize("name", LAYERS)
def test_layer_parameter_gradients_are_finite_with_a_fully_padded_sequence(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    assert valid_lens[0] == 0
    layer(queries.requires_grad_(), keys, values, valid_lens).sum().backward()
    assert torch.equal(queries.grad[0], torch.zeros_like(queries[0]))
    for parameter in layer.parameters():
        assert torch.isfinite(parameter.grad).all()


# ---------------------------------------------------------------- prepare / attend


# What each layer's `prepare` computes from the keys alone, for every decoder step to reuse.
KEY_ONLY_PART = {
    "dot": lambda layer, keys: keys,
    "scaled_dot": lambda layer, keys: keys,
    "additive": lambda layer, keys: keys @ layer.W_k.weight.T,
    "luong_dot": lambda layer, keys: keys,
    "general": lambda layer, keys: keys @ layer.W_a.weight.T,
    "concat": lambda layer, keys: keys @ layer.W_a.weight[:, QUERY_SIZE:].T,
    "location": lambda layer, keys: None,
}


@pytest.mark.parametrize("name", LAYERS)
def test_prepare_keeps_keys_values_and_lengths_and_computes_the_key_only_part_of_the_score(name):
    layer = LAYERS[name]()
    _, keys, values, valid_lens = make_inputs(layer)
    memory = layer.prepare(keys, values, valid_lens)
    assert isinstance(memory, Memory)
    assert torch.equal(memory.keys, keys) and torch.equal(memory.values, values)
    assert torch.equal(memory.valid_lens, valid_lens)
    expected = KEY_ONLY_PART[name](layer, keys)
    if expected is None:
        assert memory.projected_keys is None
    else:
        torch.testing.assert_close(memory.projected_keys, expected)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("num_queries", [1, 4])
@pytest.mark.parametrize("kind", ["none", "per_sequence", "per_query"])
def test_attend_on_a_prepared_memory_equals_forward(name, num_queries, kind):
    layer = LAYERS[name]()
    queries, keys, values, _ = make_inputs(layer, num_queries=num_queries)
    valid_lens = lens_of_kind(kind, 3, num_queries, 6, low=0)
    context, weights = layer.attend(queries, layer.prepare(keys, values, valid_lens))
    assert context.shape == (3, num_queries, VALUE_SIZE) and weights.shape == (3, num_queries, 6)
    torch.testing.assert_close(layer(queries, keys, values, valid_lens), context, rtol=0, atol=0)
    torch.testing.assert_close(layer.attention_weights, weights, rtol=0, atol=0)


@pytest.mark.parametrize("name", LAYERS)
def test_attend_writes_no_state(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    before = {key: value for key, value in vars(layer).items() if not key.startswith("_")}
    parameters = {key: value.clone() for key, value in layer.state_dict().items()}
    layer.attend(queries, layer.prepare(keys, values, valid_lens))
    assert {key: value for key, value in vars(layer).items() if not key.startswith("_")} == before
    assert layer.attention_weights is None
    assert all(torch.equal(layer.state_dict()[key], value) for key, value in parameters.items())


@pytest.mark.parametrize("name", LAYERS)
def test_attend_uses_the_projected_keys_not_the_raw_keys(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    memory = layer.prepare(keys, values, valid_lens)
    expected = layer.attend(queries, memory)
    poisoned = memory._replace(keys=torch.full_like(keys, float("nan")))
    torch.testing.assert_close(layer.attend(queries, poisoned), expected, rtol=0, atol=0)


@pytest.mark.parametrize(("name", "key_projection"), [("additive", "W_k"), ("general", "W_a")])
def test_prepare_projects_the_keys_once_for_all_decoder_steps(name, key_projection):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer, num_queries=5)
    calls = []
    getattr(layer, key_projection).register_forward_hook(lambda module, args, output: calls.append(args[0]))
    memory = layer.prepare(keys, values, valid_lens)
    for step in range(5):
        layer.attend(queries[:, step : step + 1], memory)
    assert len(calls) == 1 and calls[0] is keys


def test_d2l_additive_attention_reprojects_the_keys_at_every_step():
    queries, keys, values = torch.randn(2, 5, 4), torch.randn(2, 6, 5), torch.randn(2, 6, 3)
    valid_lens = torch.tensor([3, 6])
    theirs = d2l.AdditiveAttention(NUM_HIDDENS, dropout=0.0)
    theirs(queries[:, :1], keys, values, valid_lens)  # materialise the LazyLinear layers
    calls = []
    theirs.W_k.register_forward_hook(lambda module, args, output: calls.append(args[0]))
    for step in range(5):
        theirs(queries[:, step : step + 1], keys, values, valid_lens)
    assert len(calls) == 5, "d2l's decoder loop pays for W_k(keys) once per target step"


@pytest.mark.parametrize("name", LAYERS)
def test_projecting_once_equals_projecting_at_every_step(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer, num_queries=5)
    memory = layer.prepare(keys, values, valid_lens)
    for step in range(5):
        query = queries[:, step : step + 1]
        reprojected = layer(query, keys, values, valid_lens)
        torch.testing.assert_close(layer.attend(query, memory)[0], reprojected, rtol=0, atol=0)


@pytest.mark.parametrize("name", LAYERS)
def test_one_query_per_step_equals_all_steps_at_once(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer, num_queries=5)
    memory = layer.prepare(keys, values, valid_lens)
    context, weights = layer.attend(queries, memory)
    steps = [layer.attend(queries[:, step : step + 1], memory) for step in range(5)]
    torch.testing.assert_close(torch.cat([c for c, _ in steps], dim=1), context)
    torch.testing.assert_close(torch.cat([w for _, w in steps], dim=1), weights)


# ---------------------------------------------------------------- dropout, dtypes, devices, no_grad


@pytest.mark.parametrize("name", ["scaled_dot", "additive", "concat"])
def test_dropout_drops_weights_before_the_values_but_attention_weights_are_kept_whole(name):
    layer = LAYERS[name]()
    layer.dropout.p = 0.5
    queries, keys, values, valid_lens = make_inputs(layer)
    layer.eval()
    clean = layer(queries, keys, values, valid_lens)
    clean_weights = layer.attention_weights
    layer.train()
    torch.manual_seed(7)
    noisy = layer(queries, keys, values, valid_lens)
    torch.testing.assert_close(layer.attention_weights, clean_weights)
    torch.manual_seed(7)
    torch.testing.assert_close(noisy, F.dropout(clean_weights, 0.5, training=True) @ values)
    assert not torch.allclose(noisy, clean)


@pytest.mark.parametrize("name", LAYERS)
def test_attention_dropout_is_off_by_default_and_zero_dropout_changes_nothing_in_training(name):
    torch.manual_seed(0)
    default = LAYERS[name]()
    assert default.dropout.p == 0.0
    queries, keys, values, valid_lens = make_inputs(default)
    default.eval()
    expected = default(queries, keys, values, valid_lens)
    default.train()
    torch.testing.assert_close(default(queries, keys, values, valid_lens), expected, rtol=0, atol=0)


def identity_values(layer, p: float):
    """`layer` with dropout p, inputs whose values are the identity: the context is the dropped weights."""
    layer.dropout.p = p
    queries, keys, _, valid_lens = make_inputs(layer, batch_size=4, num_queries=5, num_keys=6)
    values = torch.eye(6).expand(4, 6, 6)
    return queries, layer.prepare(keys, values, valid_lens)


@pytest.mark.parametrize("name", ["scaled_dot", "additive", "general", "concat"])
def test_attention_dropout_has_no_effect_in_evaluation_mode(name):
    layer = LAYERS[name]()
    queries, memory = identity_values(layer, 0.5)
    context, weights = layer.eval().attend(queries, memory)
    torch.testing.assert_close(context, weights, rtol=0, atol=0)


@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("name", ["scaled_dot", "additive", "general", "concat"])
def test_attention_dropout_in_training_zeroes_weights_and_rescales_the_rest_by_one_over_keep(name, p):
    torch.manual_seed(3)
    layer = LAYERS[name]()
    queries, memory = identity_values(layer, p)
    dropped, weights = layer.train().attend(queries, memory)       # context = the weights after dropout
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], weights[kept] / (1 - p))
    assert 0 < int((~kept & (weights > 0)).sum()) < int((weights > 0).sum())
    padded = (torch.arange(6)[None, None] >= memory.valid_lens[:, None, None]).expand_as(dropped)
    assert torch.all(dropped[padded] == 0) and torch.all(weights[padded] == 0)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, float("nan"), "0.1"])
@pytest.mark.parametrize("make", [
    lambda p: DotProductAttention(dropout=p),
    lambda p: AdditiveAttention(KEY_SIZE, QUERY_SIZE, NUM_HIDDENS, dropout=p),
    lambda p: LuongAttention("general", QUERY_SIZE, KEY_SIZE, dropout=p),
], ids=["dot", "additive", "luong"])
def test_a_dropout_probability_outside_zero_to_one_is_refused_naming_dropout(make, p):
    with pytest.raises(ValueError, match=r"dropout must be a finite number in \[0, 1\), got"):
        make(p)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_layers_give_finite_outputs_in_every_float_dtype_on_every_device(name, dtype, device):
    layer = LAYERS[name]().to(device=device, dtype=dtype)
    queries, keys, values, valid_lens = make_inputs(layer, dtype=dtype, device=device)
    context = layer(queries, keys, values, valid_lens)
    assert context.dtype == dtype and context.device == queries.device
    assert torch.isfinite(context).all() and torch.isfinite(layer.attention_weights).all()
    assert torch.equal(context[0], torch.zeros_like(context[0]))
    reference = LAYERS[name]().double()
    reference.load_state_dict(layer.state_dict())
    tolerance = {torch.float16: 2e-2, torch.bfloat16: 1e-1}.get(dtype, 1e-5)
    expected = reference(*(t.double().cpu() for t in (queries, keys, values)), valid_lens.cpu())
    torch.testing.assert_close(context.double().cpu(), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("name", LAYERS)
def test_under_no_grad_neither_outputs_nor_projected_keys_require_grad(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    with torch.no_grad():
        context = layer(queries, keys, values, valid_lens)
        memory = layer.prepare(keys, values, valid_lens)
    assert not context.requires_grad and not layer.attention_weights.requires_grad
    assert memory.projected_keys is None or not memory.projected_keys.requires_grad


def test_prepare_moves_valid_lens_to_the_values_device(device):
    layer = LAYERS["additive"]().to(device)
    queries, keys, values, _ = make_inputs(layer, device=device)
    memory = layer.prepare(keys, values, torch.tensor([1, 2, 6]))
    assert memory.valid_lens.device == values.device
    assert layer.attend(queries, memory)[0].device == values.device


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("name", LAYERS)
def test_mismatched_batch_sizes_are_rejected_with_both_shapes(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    size = query_size_of(layer)
    with pytest.raises(
        ValueError, match=rf"queries has shape \(2, 2, {size}\), expected \(batch_size, num_querie"
    ):
        layer(queries[:2], keys, values, valid_lens)
    with pytest.raises(
        ValueError, match=r"values has shape \(2, 6, 3\), expected \(batch_size, num_keys, value_si"
    ):
        layer(queries, keys, values[:2], valid_lens)


@pytest.mark.parametrize("name", LAYERS)
def test_keys_and_values_of_different_lengths_are_rejected(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    message = r"values has shape \(3, 5, 3\), expected \(batch_size, num_keys, value_size\) = \(3, 6, \*\)"
    with pytest.raises(ValueError, match=message):
        layer(queries, keys, values[:, :5], valid_lens)


@pytest.mark.parametrize("name", LAYERS)
def test_wrong_query_feature_size_is_rejected(name):
    layer = LAYERS[name]()
    queries, keys, values, valid_lens = make_inputs(layer)
    size = query_size_of(layer)
    dim = "key_size" if name in ("dot", "scaled_dot") else "query_size"
    message = (
        rf"queries has shape \(3, 2, 7\), expected \(batch_size, num_queries, {dim}\) = \(3, \*, {size}\)"
    )
    with pytest.raises(ValueError, match=message):
        layer(torch.randn(3, 2, 7), keys, values, valid_lens)


@pytest.mark.parametrize("name", ["additive", "luong_dot", "general", "concat", "location"])
def test_wrong_key_feature_size_is_rejected(name):
    layer = LAYERS[name]()
    queries, _, values, valid_lens = make_inputs(layer)
    message = r"keys has shape \(3, 6, 2\), expected \(batch_size, num_keys, key_size\) = \(\*, \*, 5\)"
    with pytest.raises(ValueError, match=message):
        layer(queries, torch.randn(3, 6, 2), values, valid_lens)


@pytest.mark.parametrize(
    ("valid_lens", "message"),
    [
        (
            torch.tensor([1, -1, 2]),
            r"valid_lens must lie in \[0, num_keys\] = \[0, 6\], got values from -1 to 2",
        ),
        (
            torch.tensor([1, 7, 2]),
            r"valid_lens must lie in \[0, num_keys\] = \[0, 6\], got values from 1 to 7",
        ),
        (
            torch.tensor([1, 2]),
            r"valid_lens has shape \(2,\), expected \(batch_size,\) = \(3,\) or \(batch_size, n",
        ),
        (torch.ones(3, 5, dtype=torch.int64), r"valid_lens has shape \(3, 5\), expected .* = \(3, 2\)"),
        (torch.tensor([1.0, 2.0, 3.0]), r"valid_lens must hold integer lengths, got dtype torch.float32"),
    ],
)
@pytest.mark.parametrize("name", ["scaled_dot", "additive", "concat"])
def test_bad_valid_lens_are_rejected_by_forward(name, valid_lens, message):
    layer = LAYERS[name]()
    queries, keys, values, _ = make_inputs(layer)
    with pytest.raises(ValueError, match=message):
        layer(queries, keys, values, valid_lens)


def test_a_memory_prepared_for_other_queries_is_rejected_by_attend():
    layer = LAYERS["additive"]()
    queries, keys, values, _ = make_inputs(layer, num_queries=2)
    memory = layer.prepare(keys, values, torch.ones(3, 2, dtype=torch.int64))
    message = r"memory.valid_lens has shape \(3, 2\), expected .* \(batch_size, num_queries\) = \(3, 1\)"
    with pytest.raises(ValueError, match=message):
        layer.attend(queries[:, :1], memory)


@pytest.mark.parametrize("argument", ["queries", "keys", "values"])
def test_non_floating_inputs_are_rejected(argument):
    layer = LAYERS["additive"]()
    inputs = dict(zip(["queries", "keys", "values"], make_inputs(layer)[:3], strict=True))
    inputs[argument] = inputs[argument].long()
    with pytest.raises(
        ValueError, match=f"{argument} must be a floating-point tensor, got dtype torch.int64"
    ):
        layer(**inputs)


def test_two_dimensional_queries_are_rejected():
    layer = LAYERS["scaled_dot"]()
    _, keys, values, _ = make_inputs(layer)
    with pytest.raises(
        ValueError, match=r"queries has shape \(3, 5\), expected \(batch_size, num_queries, key_size\)"
    ):
        layer(torch.randn(3, 5), keys, values)


def test_location_attention_rejects_more_keys_than_max_len():
    layer = LAYERS["location"]()
    queries, _, _, _ = make_inputs(layer)
    with pytest.raises(ValueError, match=r"keys has num_keys = 10 positions, but .* max_len = 9"):
        layer(queries, torch.randn(3, 10, KEY_SIZE), torch.randn(3, 10, VALUE_SIZE))
    with pytest.raises(ValueError, match=r"num_keys must lie in \[0, max_len\] = \[0, 9\], got 10"):
        location_scores(queries, layer.W_a.weight, 10)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: LuongAttention("bilinear", 4, 4),
            "score must be one of 'dot', 'general', 'concat', 'location', got",
        ),
        (
            lambda: LuongAttention("dot", 4, 5),
            "score='dot' needs query_size == key_size, got query_size=4, key_size=5",
        ),
        (lambda: LuongAttention("concat", 4, 5), "score='concat' needs num_hiddens"),
        (
            lambda: LuongAttention("general", 4, 5, num_hiddens=8),
            "num_hiddens is only used by score='concat', got num_hiddens=8",
        ),
        (lambda: LuongAttention("location", 4, 5), "score='location' needs max_len"),
        (
            lambda: LuongAttention("dot", 4, 4, max_len=10),
            "max_len is only used by score='location', got max_len=10",
        ),
        (lambda: LuongAttention("location", 4, 5, max_len=0), "max_len must be an int >= 1, got 0"),
        (lambda: AdditiveAttention(5, 4, 0), "num_hiddens must be an int >= 1, got 0"),
        (lambda: AdditiveAttention(5, 4.0, 8), r"query_size must be an int >= 1, got 4\.0"),
    ],
)
def test_bad_layer_configuration_is_rejected(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: dot_scores(torch.ones(2, 3, 4), torch.ones(2, 5, 3)),
            r"keys has shape \(2, 5, 3\), expected .* = \(2,",
        ),
        (
            lambda: dot_scores(torch.ones(2, 3, 4), torch.ones(1, 5, 4)),
            r"keys has shape \(1, 5, 4\), expected",
        ),
        (
            lambda: general_scores(torch.ones(2, 3, 4), torch.ones(2, 5, 6), torch.ones(6, 4)),
            r"W_a has shape \(6, 4\), expected \(query_size, key_size\) = \(4, 6\)",
        ),
        (
            lambda: additive_scores(torch.ones(2, 3, 6), torch.ones(2, 5, 6), torch.ones(6)),
            r"w_v has shape \(6,\), expected \(1, num_hiddens\) = \(1, 6\)",
        ),
        (
            lambda: concat_scores(
                torch.ones(2, 3, 4), torch.ones(2, 5, 6), torch.ones(7, 9), torch.ones(1, 7)
            ),
            r"W_a has shape \(7, 9\), expected \(num_hiddens, query_size \+ key_size\) = \(\*, 10\)",
        ),
        (
            lambda: dot_scores(torch.ones(2, 3, 4).int(), torch.ones(2, 5, 4)),
            "queries must be a floating-point",
        ),
    ],
)
def test_score_functions_reject_mismatched_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_scaled_dot_scores_match_d2l_division_exactly():
    queries, keys = torch.randn(2, 3, 7), torch.randn(2, 4, 7)
    expected = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(7)
    assert torch.equal(dot_scores(queries, keys, scaled=True), expected)


@pytest.mark.parametrize("score", ["dot", "general", "concat", "location"])
def test_public_scores_softmaxed_with_the_mask_give_the_attention_weights(score):
    layer = LuongAttention(score, 6, 6, num_hiddens=5 if score == "concat" else None,
                           max_len=9 if score == "location" else None)
    keys, queries = torch.randn(3, 7, 6), torch.randn(3, 2, 6)
    memory = layer.prepare(keys, keys, torch.tensor([7, 3, 0]))
    _, weights = layer.attend(queries, memory)
    torch.testing.assert_close(masked_softmax(layer.scores(queries, memory), memory.valid_lens), weights)
    with pytest.raises(ValueError, match="queries"):
        layer.scores(torch.randn(3, 2, 4), memory)


# ------------------------------------------------------------------------- the additive score's activation
def test_additive_relu_score_is_w_v_relu_and_tanh_stays_the_default_bit_for_bit():
    torch.manual_seed(0)
    queries, keys, w_v = torch.randn(2, 3, 5), torch.randn(2, 4, 5), torch.randn(1, 5)
    expected = (torch.relu(queries[:, :, None] + keys[:, None]) * w_v[0]).sum(-1)
    assert torch.allclose(additive_scores(queries, keys, w_v, "relu"), expected, atol=1e-6)
    assert torch.equal(additive_scores(queries, keys, w_v), additive_scores(queries, keys, w_v, "tanh"))
    with pytest.raises(ValueError, match=r"activation='sigmoid', expected one of \('tanh', 'relu'\)"):
        additive_scores(queries, keys, w_v, "sigmoid")


def test_a_relu_attention_layer_never_takes_the_tanh_only_fast_form():
    torch.manual_seed(0)
    layer = AdditiveAttention(8, 8, 16, activation="relu")
    queries, keys = torch.randn(4, 30, 8), torch.randn(4, 40, 8)   # large: the fast form would pay
    with torch.no_grad():
        plain = layer.attend(queries, layer.prepare(keys, keys))
        fast_memory = layer.prepare(keys, keys, fast_scores=True)
        assert fast_memory.fast_scores
        fast_context = layer.attend(queries, fast_memory)
    for mine, theirs in zip(fast_context, plain, strict=True):
        assert torch.equal(mine, theirs)
    with pytest.raises(ValueError, match="activation='gelu'"):
        AdditiveAttention(8, 8, 16, activation="gelu")
