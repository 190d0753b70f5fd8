"""Multi-head attention, positional encoding and the small Transformer: equal to torch's attention, masks
right (padding, causal, empty rows give zeros), the Seq2Seq interface that training and decoding use."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

from attn_course.attention.multihead import MultiHeadAttention, merge_heads, split_heads
from attn_course.attention.positional import PositionalEncoding, sinusoidal_encoding
from attn_course.models.decoding import beam_search, greedy_decode
from attn_course.models.transformer import HeadView, Transformer, TransformerConfig
from attn_course.training.loop import TrainConfig, evaluate_loss, train

FAST = settings(max_examples=25, deadline=None)
D, H = 8, 2


def torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention with our weights: in_proj = [W_q; W_k; W_v], out_proj = W_o."""
    theirs = nn.MultiheadAttention(ours.num_hiddens, ours.num_heads, batch_first=True,
                                   dtype=ours.W_q.weight.dtype)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)
    return theirs


def allowed(lens: torch.Tensor, num_queries: int, num_keys: int, causal: bool) -> torch.Tensor:
    """(batch_size, num_queries, num_keys) bool: True where a query may attend to a key."""
    mask = torch.arange(num_keys)[None, None] < lens[:, None, None]
    if causal:
        mask = mask & torch.ones(num_queries, num_keys, dtype=torch.bool).tril()
    return mask


def inputs(batch_size: int, num_queries: int, num_keys: int, self_attention: bool):
    queries = torch.randn(batch_size, num_queries, D, dtype=torch.float64, requires_grad=True)
    if self_attention:
        return queries, queries, queries
    keys = torch.randn(batch_size, num_keys, D, dtype=torch.float64, requires_grad=True)
    return queries, keys, keys


@pytest.mark.parametrize("causal", [False, True])
def test_multihead_equals_torch_multihead_attention_forward_and_gradients(causal: bool) -> None:
    ours = MultiHeadAttention(D, H).double()
    theirs = torch_mha(ours)
    lens = torch.tensor([5, 3, 1])                       # every row keeps at least one key (torch gives NaN)
    queries, keys, values = inputs(3, 5, 5, self_attention=causal)
    out, weights = ours(queries, keys, values, lens, causal=causal)
    attn_mask = ~torch.ones(5, 5, dtype=torch.bool).tril() if causal else None
    ref, ref_weights = theirs(queries, keys, values, key_padding_mask=torch.arange(5)[None] >= lens[:, None],
                              attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(weights, ref_weights)
    grads = torch.autograd.grad(out.square().sum(), [queries, ours.W_q.weight, ours.W_o.bias])
    ref_grads = torch.autograd.grad(ref.square().sum(),
                                    [queries, theirs.in_proj_weight, theirs.out_proj.bias])
    torch.testing.assert_close(grads[0], ref_grads[0])
    torch.testing.assert_close(grads[1], ref_grads[1][:D])
    torch.testing.assert_close(grads[2], ref_grads[2])


@FAST
@given(lens=st.lists(st.integers(1, 6), min_size=1, max_size=4), causal=st.booleans())
def test_multihead_equals_scaled_dot_product_attention(lens: list[int], causal: bool) -> None:
    ours = MultiHeadAttention(D, H).double()
    lens = torch.tensor(lens)
    queries, keys, values = inputs(len(lens), 6, 6, self_attention=True)
    out, _ = ours(queries, keys, values, lens, causal=causal)

    def heads(X):                                        # (B, n, D) -> (B, h, n, D / h)
        return X.view(X.shape[0], X.shape[1], H, D // H).transpose(1, 2)

    mask = allowed(lens, 6, 6, causal)[:, None]          # (B, 1, Q, K), shared by the heads
    context = F.scaled_dot_product_attention(heads(ours.W_q(queries)), heads(ours.W_k(keys)),
                                             heads(ours.W_v(values)), attn_mask=mask)
    ref = ours.W_o(context.transpose(1, 2).reshape(len(lens), 6, D))
    torch.testing.assert_close(out, ref)
    (grad,) = torch.autograd.grad(out.sum(), queries, retain_graph=True)
    (ref_grad,) = torch.autograd.grad(ref.sum(), queries)
    torch.testing.assert_close(grad, ref_grad)


def test_fully_masked_rows_give_zero_output_weights_and_finite_gradients() -> None:
    ours = MultiHeadAttention(D, H).double()
    queries, keys, values = inputs(2, 3, 4, self_attention=False)
    out, weights = ours(queries, keys, values, torch.tensor([0, 2]))
    assert torch.equal(weights[0], torch.zeros_like(weights[0]))
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(H, 3, dtype=torch.float64))
    # With no key to read the context is 0, so the output is the output layer's bias, not NaN.
    torch.testing.assert_close(out[0], ours.W_o.bias.expand(3, D))
    (grad,) = torch.autograd.grad(out.sum(), keys)
    assert torch.isfinite(grad).all() and torch.equal(grad[0], torch.zeros_like(grad[0]))


def test_causal_mask_lets_query_i_see_keys_up_to_i_only() -> None:
    ours = MultiHeadAttention(D, H)
    X = torch.randn(2, 5, D)
    _, weights = ours(X, X, X, torch.tensor([5, 3]), causal=True)
    upper = torch.ones(5, 5, dtype=torch.bool).triu(1)
    assert (weights[..., upper] == 0).all()
    assert (weights[1, :, :, 3:] == 0).all()              # padding still masked
    assert (weights[0].diagonal(dim1=-2, dim2=-1) > 0).all()   # a query sees itself
    later = X.clone()
    later[:, 3:] += 1.0                                 # changing later tokens leaves earlier outputs alone
    torch.testing.assert_close(ours(X, X, X, causal=True)[0][:, :3],
                               ours(later, later, later, causal=True)[0][:, :3])


def test_per_query_valid_lens_are_accepted() -> None:
    ours = MultiHeadAttention(D, H)
    X = torch.randn(2, 4, D)
    _, weights = ours(X, X, X, torch.tensor([[1, 2, 3, 4], [4, 4, 0, 1]]))
    assert (weights[0, :, 0, 1:] == 0).all() and (weights[1, :, 2] == 0).all()


def test_split_and_merge_heads_are_inverse_and_split_features_in_blocks() -> None:
    X = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    split = split_heads(X, 4)
    assert split.shape == (8, 3, 2)
    torch.testing.assert_close(split[1], X[0, :, 2:4])     # head 1 of sequence 0: features 2-3
    torch.testing.assert_close(merge_heads(split, 4), X)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m(torch.randn(2, 3, 7), torch.randn(2, 4, 8), torch.randn(2, 4, 8)),
         r"queries has shape \(2, 3, 7\), expected \(batch_size, num_queries, num_hiddens\) = \(\*, \*, 8\)"),
        (lambda m: m(torch.randn(2, 3, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8)),
         r"keys has shape \(3, 4, 8\), expected \(batch_size, num_keys, num_hiddens\) = \(2, \*, 8\)"),
        (lambda m: m(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8)),
         r"values has shape \(2, 5, 8\), expected \(batch_size, num_keys, num_hiddens\) = \(2, 4, 8\)"),
        (lambda m: m(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8),
                     torch.tensor([1, 2, 3])),
         r"valid_lens has shape \(3,\), expected \(batch_size,\) = \(2,\)"),
        (lambda m: m(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8), causal=True),
         r"causal=True needs num_queries == num_keys"),
    ],
)
def test_shape_errors_name_the_argument_expected_and_actual(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(MultiHeadAttention(D, H))


def test_num_hiddens_must_split_into_heads() -> None:
    with pytest.raises(ValueError, match="multiple of num_heads"):
        MultiHeadAttention(10, 4)


def test_sinusoid_follows_the_paper_interleaved_sin_cos() -> None:
    P = sinusoidal_encoding(50, 16, dtype=torch.float64)
    for pos, i in [(0, 0), (3, 1), (17, 5), (49, 7)]:
        angle = pos / 10000 ** (2 * i / 16)
        assert P[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
        assert P[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    torch.testing.assert_close(P[0], torch.tensor([0.0, 1.0] * 8, dtype=torch.float64))


def test_positional_encoding_errors() -> None:
    with pytest.raises(ValueError, match="num_hiddens must be even"):
        sinusoidal_encoding(4, 7)
    with pytest.raises(ValueError, match="more than max_len = 4"):
        PositionalEncoding(8, max_len=4)(torch.randn(1, 5, 8))


@FAST
@given(seed=st.integers(0, 10_000))
def test_self_attention_is_permutation_equivariant_until_positions_are_added(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(1, 6, D, generator=generator, dtype=torch.float64)
    order = torch.randperm(6, generator=generator)
    attention = MultiHeadAttention(D, H).double()
    out = attention(X, X, X)[0]
    torch.testing.assert_close(attention(X[:, order], X[:, order], X[:, order])[0], out[:, order])
    Y = X + sinusoidal_encoding(6, D, dtype=torch.float64)
    Y_shuffled = X[:, order] + sinusoidal_encoding(6, D, dtype=torch.float64)
    if not torch.equal(order, torch.arange(6)):
        shuffled_out = attention(Y_shuffled, Y_shuffled, Y_shuffled)[0]
        assert not torch.allclose(shuffled_out, attention(Y, Y, Y)[0][:, order])


# ---------------------------------------------------------------------------------------------- the model
def tiny_model() -> Transformer:
    return Transformer(TransformerConfig(12, 12, num_hiddens=16, num_heads=2, ffn_hiddens=32, num_layers=2))


def copy_batches(num_batches: int = 20, seed: int = 0):
    """A copy task: the target is the source (ids 3-11), <bos> = 1, <eos> = 2, padded with 0."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(num_batches):
        lens = torch.randint(2, 7, (8,), generator=generator)
        tokens = torch.randint(3, 12, (8, 6), generator=generator)
        real = torch.arange(6)[None] < lens[:, None]
        words = tokens.masked_fill(~real, 0)
        src = torch.cat([words, torch.zeros(8, 1, dtype=torch.long)], 1)
        src[torch.arange(8), lens] = 2
        tgt_in = torch.cat([torch.ones(8, 1, dtype=torch.long), words], 1)
        batches.append((src, lens + 1, tgt_in, src.clone(), lens + 1))
    return batches


def test_transformer_has_seq2seq_interface_and_trains_with_the_course_loop() -> None:
    model = tiny_model()
    batches = copy_batches()
    before = evaluate_loss(model, batches, device="cpu")
    history = train(model, batches, TrainConfig(epochs=4, lr=3e-3), device="cpu", progress=False, seed=0)
    assert len(history.train_loss) == 4
    assert evaluate_loss(model, batches, device="cpu") < 0.8 * before
    src, lens, tgt_in, _, _ = batches[0]
    logits, attention = model(src, lens, tgt_in)
    assert logits.shape == (8, 7, 12) and attention.shape == (8, 7, 7)
    torch.testing.assert_close(attention.sum(-1), torch.ones(8, 7))


def test_step_by_step_decoding_equals_teacher_forcing() -> None:
    model = tiny_model().eval()
    src, lens, tgt_in, _, _ = copy_batches(1)[0]
    logits, attention = model(src, lens, tgt_in)
    state = model.decoder.init_state(model.encode(src, lens))
    for t in range(tgt_in.shape[1]):
        step_logits, state, weights = model.decoder.step(tgt_in[:, t], state)
        torch.testing.assert_close(step_logits, logits[:, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(weights, attention[:, t])


def test_source_padding_does_not_change_the_outputs() -> None:
    model = tiny_model().eval()
    src, lens, tgt_in, _, _ = copy_batches(1)[0]
    padded = torch.cat([src, torch.zeros(8, 3, dtype=torch.long)], 1)
    logits, attention = model(src, lens, tgt_in)
    padded_logits, padded_attention = model(padded, lens, tgt_in)
    torch.testing.assert_close(padded_logits, logits)
    torch.testing.assert_close(padded_attention[..., :7], attention)
    assert (padded_attention[..., 7:] == 0).all()


def test_greedy_and_beam_search_decode_the_transformer_batched_as_alone() -> None:
    model = tiny_model()
    train(model, copy_batches(), TrainConfig(epochs=3, lr=3e-3), device="cpu", progress=False, seed=0)
    src, lens, _, _, _ = copy_batches(1, seed=1)[0]
    batched = greedy_decode(model, src, lens, bos=1, eos=2, max_len=10)
    for i in range(3):
        alone = greedy_decode(model, src[i:i + 1, : int(lens[i])], lens[i:i + 1], bos=1, eos=2, max_len=10)[0]
        assert alone.tokens == batched[i].tokens
        torch.testing.assert_close(alone.attention, batched[i].attention, atol=1e-5, rtol=1e-4)
    one_beam = beam_search(model, src, lens, bos=1, eos=2, max_len=10, beam_size=1)
    assert [h.tokens for h in one_beam] == [h.tokens for h in batched]        # one beam is greedy search
    beams = beam_search(model, src, lens, bos=1, eos=2, max_len=10, beam_size=3)
    for hyp, n in zip(beams, lens, strict=True):
        assert hyp.attention.shape == (len(hyp.tokens) + hyp.finished, int(n))


def test_head_view_reports_one_head_and_the_same_logits() -> None:
    model = tiny_model().eval()
    src, lens, tgt_in, _, _ = copy_batches(1)[0]
    all_weights = model.cross_attention(src, lens, tgt_in)
    assert all_weights.shape == (2, 8, 2, 7, 7)
    logits, _ = model(src, lens, tgt_in)
    view_logits, head_weights = HeadView(model, head=1, layer=0)(src, lens, tgt_in)
    torch.testing.assert_close(view_logits, logits)
    torch.testing.assert_close(head_weights, all_weights[0, :, 1])
    with pytest.raises(ValueError, match=r"head must be an int in \[0, num_heads - 1\] = \[0, 1\], got 2"):
        HeadView(model, head=2)


def test_config_refuses_widths_that_do_not_split_into_heads() -> None:
    with pytest.raises(ValueError, match="multiple of num_heads"):
        TransformerConfig(5, 5, num_hiddens=18, num_heads=4)


def test_multihead_equals_d2l_after_load_state_dict() -> None:
    import d2l.torch as d2l

    theirs = d2l.MultiHeadAttention(D, H, dropout=0.0, bias=True)
    X, lens = torch.randn(2, 5, D), torch.tensor([5, 2])
    theirs.eval()
    expected = theirs(X, X, X, lens)                   # also materialises d2l's LazyLinear layers
    ours = MultiHeadAttention(D, H)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(X, X, X, lens)[0], expected)
