"""`attention_maps`: a Transformer's encoder self-attention, causal decoder self-attention and
cross-attention, every layer and head, from one teacher-forced pass that leaves no hook and no changed mode
behind."""

from __future__ import annotations

import pytest
import torch

from attn_course.attention.multihead import MultiHeadAttention
from attn_course.models.transformer import Transformer, TransformerConfig, attention_maps

LAYERS, HEADS, S, T = 2, 2, 7, 5


def small_model(dropout: float = 0.0) -> Transformer:
    return Transformer(TransformerConfig(12, 12, num_hiddens=16, num_heads=HEADS, ffn_hiddens=32,
                                         num_layers=LAYERS, dropout=dropout))


def padded_batch(device: torch.device | str = "cpu"):
    """Three sentences of 7, 4 and 1 source tokens (padded with 0 to S = 7) and T = 5 target tokens fed."""
    lens = torch.tensor([7, 4, 1], device=device)
    src = torch.randint(3, 12, (3, S), device=device)
    src = src.masked_fill(torch.arange(S, device=device)[None] >= lens[:, None], 0)
    tgt_in = torch.randint(3, 12, (3, T), device=device)
    tgt_in[:, 0] = 1
    return src, lens, tgt_in


def hooks_left(model: Transformer) -> int:
    return sum(len(m._forward_hooks) for m in model.modules() if isinstance(m, MultiHeadAttention))


def test_every_layer_and_head_of_each_kind_has_its_shape(device: torch.device) -> None:
    model = small_model().to(device)
    maps = attention_maps(model, *padded_batch(device))
    assert maps.encoder_self.shape == (LAYERS, 3, HEADS, S, S)
    assert maps.decoder_self.shape == (LAYERS, 3, HEADS, T, T)
    assert maps.cross.shape == (LAYERS, 3, HEADS, T, S)
    assert all(weights.device.type == device.type for weights in maps)


def test_decoder_self_attention_is_causal_and_each_row_sums_to_one() -> None:
    maps = attention_maps(small_model(), *padded_batch())
    above_diagonal = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert (maps.decoder_self[..., above_diagonal] == 0).all()
    assert (maps.decoder_self[..., ~above_diagonal] > 0).all()            # position i sees 0..i, all of them
    torch.testing.assert_close(maps.decoder_self.sum(-1), torch.ones(LAYERS, 3, HEADS, T))


def test_encoder_self_attention_gives_padded_keys_zero_and_real_keys_weights_summing_to_one() -> None:
    src, lens, tgt_in = padded_batch()
    maps = attention_maps(small_model(), src, lens, tgt_in)
    padded = torch.arange(S)[None] >= lens[:, None]                                 # (batch_size, S)
    padded_keys = padded[None, :, None, None, :].expand_as(maps.encoder_self)
    assert (maps.encoder_self[padded_keys] == 0).all()
    assert (maps.encoder_self[~padded_keys] > 0).all()
    torch.testing.assert_close(maps.encoder_self.sum(-1), torch.ones(LAYERS, 3, HEADS, S))
    padded_sources = padded_keys[:, :, :, 0, :]                              # (layers, batch, heads, S)
    assert (maps.cross[padded_sources[:, :, :, None, :].expand_as(maps.cross)] == 0).all()


def test_cross_attention_equals_what_the_decoders_run_returns() -> None:
    model = small_model().eval()
    src, lens, tgt_in = padded_batch()
    maps = attention_maps(model, src, lens, tgt_in)
    with torch.no_grad():
        _, cross = model.decoder.run(tgt_in, model.encode(src, lens))
    torch.testing.assert_close(maps.cross, cross)
    torch.testing.assert_close(maps.cross, model.cross_attention(src, lens, tgt_in))


def test_no_hook_is_left_behind_even_when_the_forward_pass_raises() -> None:
    model = small_model()
    src, lens, tgt_in = padded_batch()
    attention_maps(model, src, lens, tgt_in)
    assert hooks_left(model) == 0
    with pytest.raises(ValueError, match="tgt_in"):
        attention_maps(model, src, lens, tgt_in[:2])                     # the encoder's hooks have fired
    assert hooks_left(model) == 0


def test_maps_come_from_evaluation_mode_and_the_models_mode_is_restored() -> None:
    model, batch = small_model(dropout=0.5).train(), padded_batch()
    first = attention_maps(model, *batch)
    torch.manual_seed(1)                                        # other dropout draws, if any were made
    second = attention_maps(model, *batch)
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b)
    assert model.training


def test_refuses_what_is_not_a_transformer() -> None:
    with pytest.raises(ValueError, match="model is a Linear, expected a Transformer"):
        attention_maps(torch.nn.Linear(2, 2), *padded_batch())
