"""The exercise checks: solutions pass, untouched stubs are "not attempted", and known-wrong answers are
rejected with a message that names the mistake (mutation tests). Also the learner-facing behaviour of
check(), hint() and solution(), hidden cases, and the exercise/solution notebooks' correspondence."""

from __future__ import annotations

import functools
import json
import linecache
import math
import re
import sys
from pathlib import Path

import pytest
import torch
from learner_answers import ANSWERS
from learner_answers import define as define_answer
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attn_course import checks
from attn_course.attention.masking import masked_softmax
from attn_course.checks.bug_hunt import BugHunt
from attn_course_tools.cli import hidden_template

ROOT = Path(__file__).resolve().parents[3]


def learner_namespace(key: str) -> dict:
    """What a learner's cell sees: the chapter's set-up imports."""
    namespace: dict = {"__name__": "__main__"}
    exec(checks.PREAMBLES[int(key[2 : key.index(".")])], namespace)
    return namespace


def define(key: str, source: str) -> object:
    namespace = learner_namespace(key)
    exec(source, namespace)
    return namespace[checks.EXERCISES[key].name]


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_solution_passes_its_check(key: str) -> None:
    exercise = checks.EXERCISES[key]
    result = exercise.evaluate(define(key, exercise.solution_code))
    assert result.passed, result.message
    assert result.cases_passed == result.cases_total >= 3


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_untouched_stub_answers_not_attempted(key: str) -> None:
    exercise = checks.EXERCISES[key]
    # A find-the-bug exercise's stub is the buggy function itself.
    assert "raise NotImplementedError" in exercise.stub_code or isinstance(exercise, BugHunt)
    result = exercise.evaluate(define(key, exercise.stub_code))
    assert result.status == checks.NOT_ATTEMPTED
    assert not result.passed
    assert exercise.marker in result.message


# ------------------------------------------------------------------------------------------------
# Mutants: known-wrong answers a learner might write, each with the words its rejection must contain.


def keep_mask(valid_lens, num_queries, num_keys):
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    return (torch.arange(num_keys) < lens).expand(-1, num_queries, -1)


def written_masked_softmax(scores, valid_lens=None):
    """A masked softmax as a learner writes it (ch1.q2's answers may not call the package's own)."""
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1) * keep


def mask_d2l_in_place(X, valid_len, value=0):
    mask = torch.arange(X.size(1))[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def mask_keeps_one_too_many(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] <= valid_len[:, None]
    return X.masked_fill(~keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)


def mask_drops_last_real(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None] - 1
    return X.masked_fill(~keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)


def mask_last_axis(X, valid_len, value=0):
    keep = torch.arange(X.shape[-1])[None, :] < valid_len[:, None]
    return X.masked_fill(~keep.reshape(X.shape[0], *([1] * (X.dim() - 2)), X.shape[-1]), value)


def mask_ignores_value(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    return X * keep.reshape(*keep.shape, *([1] * (X.dim() - 2)))


def mask_inverted(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    return X.masked_fill(keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)


def softmax_wrong_axis(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, -1e4), dim=1) * keep


def softmax_no_mask(scores, valid_lens=None):
    return F.softmax(scores.float(), dim=-1).to(scores.dtype)


def softmax_d2l_fill(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(torch.where(keep, scores, torch.tensor(-1e6)), dim=-1)


def softmax_neg_inf(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def softmax_then_zero(scores, valid_lens=None):
    weights = F.softmax(scores, dim=-1)
    if valid_lens is None:
        return weights
    return weights * keep_mask(valid_lens, scores.shape[1], scores.shape[2])


def softmax_fill_minus_1e6(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores.float(), dim=-1).to(scores.dtype)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, -1e6).float(), dim=-1).to(scores.dtype) * keep


def softmax_fill_minus_1e6_in_dtype(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    filled = torch.where(keep, scores, torch.tensor(-1e6, dtype=scores.dtype))
    return F.softmax(filled, dim=-1) * keep


def softmax_float32_out(scores, valid_lens=None):
    half = scores.dtype in (torch.float16, torch.bfloat16)
    return written_masked_softmax(scores.float() if half else scores, valid_lens)


def softmax_detached(scores, valid_lens=None):
    return written_masked_softmax(scores.detach(), valid_lens)


def nw_softmax_over_queries(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=0)
    return weights, weights @ values


def nw_divided_by_total(queries, keys, values, sigma):
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    weights = kernel / kernel.sum()
    return weights, weights @ values


def nw_keys_by_queries(queries, keys, values, sigma):
    weights = F.softmax(-((keys[:, None] - queries[None, :]) ** 2) / (2 * sigma**2), dim=0)
    return weights, values @ weights


def nw_keys_by_queries_last_axis(queries, keys, values, sigma):
    weights = F.softmax(-((keys[:, None] - queries[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights, values @ weights


def nw_no_minus(queries, keys, values, sigma):
    weights = F.softmax((queries[:, None] - keys[None, :]) ** 2 / (2 * sigma**2), dim=-1)
    return weights, weights @ values


def nw_no_half(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / sigma**2, dim=-1)
    return weights, weights @ values


def nw_sigma_not_squared(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma), dim=-1)
    return weights, weights @ values


def nw_precedence(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / 2 * sigma**2, dim=-1)
    return weights, weights @ values


def nw_cdist_not_squared(queries, keys, values, sigma):
    weights = F.softmax(-torch.cdist(queries[:, None], keys[:, None]) / (2 * sigma**2), dim=-1)
    return weights, weights @ values


def nw_exp_unnormalised(queries, keys, values, sigma):
    weights = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    return weights, weights @ values


def nw_exp_over_sum(queries, keys, values, sigma):
    kernel = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    weights = kernel / kernel.sum(dim=-1, keepdim=True)
    return weights, weights @ values


def nw_mean_of_weighted_values(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights, (weights * values).mean(dim=-1)


def nw_averages_keys(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights, weights @ keys


def nw_predictions_first(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights @ values, weights


def nw_only_predictions(queries, keys, values, sigma):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)
    return weights @ values


def nw_only_weights(queries, keys, values, sigma):
    return F.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=-1)


def attention(
    queries,
    keys,
    values,
    valid_lens=None,
    *,
    divisor=None,
    dim=-1,
    use_mask=True,
    transposed=False,
    weigh_keys=False,
):
    d = queries.shape[-1]
    scores = (
        torch.bmm(keys, queries.transpose(1, 2)) if transposed else torch.bmm(queries, keys.transpose(1, 2))
    )
    scores = scores / (math.sqrt(d) if divisor is None else divisor)
    if dim == -1:
        weights = masked_softmax(scores, valid_lens if use_mask else None)
    else:
        weights = softmax_wrong_axis(scores, valid_lens)
    return torch.bmm(weights, keys if weigh_keys else values), weights


def no_scaling(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, divisor=1.0)


def divide_by_d(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, divisor=queries.shape[-1])


def divide_by_num_keys(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, divisor=math.sqrt(keys.shape[1]))


def attention_wrong_axis(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, dim=1)


def attention_no_mask(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, use_mask=False)


def attention_d2l_masking(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        scores = scores.masked_fill(~keep_mask(valid_lens, scores.shape[1], scores.shape[2]), -1e6)
    weights = F.softmax(scores, dim=-1)
    return torch.bmm(weights, values), weights


def attention_transposed(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, transposed=True)


def attention_over_keys(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, weigh_keys=True)


class AdditiveBase(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def prepare(self, keys, values, valid_lens=None):
        return self.W_k(keys), values, valid_lens

    def features(self, queries, projected_keys):
        return self.W_q(queries)[:, :, None, :] + projected_keys[:, None, :, :]

    def weights(self, scores, valid_lens):
        return masked_softmax(scores, valid_lens)

    def attend(self, queries, memory):
        projected_keys, values, valid_lens = memory
        weights = self.weights(
            self.w_v(torch.tanh(self.features(queries, projected_keys))).squeeze(-1), valid_lens
        )
        return torch.bmm(weights, values), weights


class AdditiveProjectsEveryStep(AdditiveBase):
    def prepare(self, keys, values, valid_lens=None):
        return keys, values, valid_lens

    def attend(self, queries, memory):
        keys, values, valid_lens = memory
        return super().attend(queries, (self.W_k(keys), values, valid_lens))


class AdditiveNoTanh(AdditiveBase):
    def attend(self, queries, memory):
        projected_keys, values, valid_lens = memory
        weights = masked_softmax(self.w_v(self.features(queries, projected_keys)).squeeze(-1), valid_lens)
        return torch.bmm(weights, values), weights


class AdditiveTanhOutside(AdditiveBase):
    def attend(self, queries, memory):
        projected_keys, values, valid_lens = memory
        scores = torch.tanh(self.w_v(self.features(queries, projected_keys)).squeeze(-1))
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(weights, values), weights


class AdditiveSwapped(AdditiveBase):
    def prepare(self, keys, values, valid_lens=None):
        return self.W_q(keys), values, valid_lens

    def features(self, queries, projected_keys):
        return self.W_k(queries)[:, :, None, :] + projected_keys[:, None, :, :]


class AdditiveNoMask(AdditiveBase):
    def weights(self, scores, valid_lens):
        return F.softmax(scores, dim=-1)


class AdditiveD2lMasking(AdditiveBase):
    def weights(self, scores, valid_lens):
        if valid_lens is not None:
            scores = scores.masked_fill(~keep_mask(valid_lens, scores.shape[1], scores.shape[2]), -1e6)
        return F.softmax(scores, dim=-1)


class AdditiveWrongAxis(AdditiveBase):
    def weights(self, scores, valid_lens):
        return softmax_wrong_axis(scores, valid_lens)


class AdditiveNoBroadcast(AdditiveBase):
    def features(self, queries, projected_keys):
        return self.W_q(queries) + projected_keys


def general_untransposed(queries, keys, W_a):
    return torch.bmm(queries, (keys @ W_a).transpose(1, 2))


def general_ignores_W_a(queries, keys, W_a):
    return torch.bmm(queries, keys.transpose(1, 2))


def general_scaled(queries, keys, W_a):
    return torch.bmm(queries, (keys @ W_a.T).transpose(1, 2)) / math.sqrt(queries.shape[-1])


def general_softmaxed(queries, keys, W_a):
    return F.softmax(torch.bmm(queries, (keys @ W_a.T).transpose(1, 2)), dim=-1)


def general_transposed(queries, keys, W_a):
    return torch.bmm(keys @ W_a.T, queries.transpose(1, 2))


def concat_pairs(queries, keys, key_first=False):
    num_queries, num_keys = queries.shape[1], keys.shape[1]
    q = queries[:, :, None, :].expand(-1, -1, num_keys, -1)
    k = keys[:, None, :, :].expand(-1, num_queries, -1, -1)
    return torch.cat([k, q] if key_first else [q, k], dim=-1)


def concat_key_first(queries, keys, W_a, v_a):
    return (torch.tanh(concat_pairs(queries, keys, key_first=True) @ W_a.T) @ v_a.T).squeeze(-1)


def concat_no_tanh(queries, keys, W_a, v_a):
    return (concat_pairs(queries, keys) @ W_a.T @ v_a.T).squeeze(-1)


def concat_tanh_outside(queries, keys, W_a, v_a):
    return torch.tanh(concat_pairs(queries, keys) @ W_a.T @ v_a.T).squeeze(-1)


def concat_softmaxed(queries, keys, W_a, v_a):
    return F.softmax((torch.tanh(concat_pairs(queries, keys) @ W_a.T) @ v_a.T).squeeze(-1), dim=-1)


def concat_no_expand(queries, keys, W_a, v_a):
    return (torch.tanh(torch.cat([queries[:, :, None], keys[:, None]], dim=-1) @ W_a.T) @ v_a.T).squeeze(-1)


def concat_keys_by_queries(queries, keys, W_a, v_a):
    num_queries, num_keys = queries.shape[1], keys.shape[1]
    q = queries[:, None, :, :].expand(-1, num_keys, -1, -1)
    k = keys[:, :, None, :].expand(-1, -1, num_queries, -1)
    return (torch.tanh(torch.cat([q, k], dim=-1) @ W_a.T) @ v_a.T).squeeze(-1)


def token_losses(logits, tgt_out, tgt_valid_lens):
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    return losses, mask


def ce_unmasked(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out)


def ce_over_all_positions(logits, tgt_out, tgt_valid_lens):
    losses, mask = token_losses(logits, tgt_out, tgt_valid_lens)
    return (losses * mask).sum() / losses.numel()


def ce_per_sentence(logits, tgt_out, tgt_valid_lens):
    losses, mask = token_losses(logits, tgt_out, tgt_valid_lens)
    return ((losses * mask).sum(1) / tgt_valid_lens).mean()


def ce_sum(logits, tgt_out, tgt_valid_lens):
    losses, mask = token_losses(logits, tgt_out, tgt_valid_lens)
    return (losses * mask).sum()


def ce_ignore_index(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=0)


def ce_keeps_one_padded(logits, tgt_out, tgt_valid_lens):
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = torch.arange(tgt_out.shape[1])[None, :] <= tgt_valid_lens[:, None]
    return (losses * mask).sum() / mask.sum()


def ce_classes_last(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits, tgt_out)


def state_last_padded(outputs, valid_lens):
    return outputs[:, -1]


def state_mean(outputs, valid_lens):
    mask = torch.arange(outputs.shape[1])[None, :] < valid_lens[:, None]
    return (outputs * mask[..., None]).sum(1) / valid_lens[:, None]


def state_off_by_one(outputs, valid_lens):
    return outputs[torch.arange(outputs.shape[0]), valid_lens]


def state_mean_with_padding(outputs, valid_lens):
    return outputs.mean(dim=1)


def state_first(outputs, valid_lens):
    return outputs[:, 0]


class EncoderBase(nn.Module):
    """The given __init__ of ch3.q3; each mutant below writes its own forward."""

    def __init__(self, vocab_size, embed_size, num_hiddens, decoder_hiddens):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=0)
        self.rnn = nn.GRU(embed_size, num_hiddens, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * num_hiddens, decoder_hiddens)

    def packed(self, src, valid_lens, **kwargs):
        packed = pack_padded_sequence(
            self.embedding(src),
            valid_lens,
            batch_first=True,
            enforce_sorted=kwargs.get("enforce_sorted", False),
        )
        packed_outputs, h_n = self.rnn(packed)
        length = kwargs.get("total_length", src.shape[1])
        outputs, _ = pad_packed_sequence(packed_outputs, batch_first=True, total_length=length)
        return outputs, h_n


class EncoderUnpacked(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.rnn(self.embedding(src))
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1))).unsqueeze(0)


class EncoderUnpackedZeroed(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.rnn(self.embedding(src))
        real = torch.arange(src.shape[1])[None, :, None] < valid_lens[:, None, None]
        return outputs.masked_fill(~real, 0), torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))[None]


class EncoderSorted(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens, enforce_sorted=True)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))[None]


class EncoderShortOutputs(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens, total_length=None)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))[None]


class EncoderBridgeLastColumn(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(outputs[:, -1]))[None]


class EncoderBridgeLastWord(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(outputs[torch.arange(src.shape[0]), valid_lens - 1]))[None]


class EncoderBridgeFirstPosition(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(outputs[:, 0, :]))[None]


class EncoderBackwardFirst(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[-1], h_n[-2]], -1)))[None]


class EncoderReshapedStates(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(h_n.reshape(src.shape[0], -1)))[None]


class EncoderBackwardOnly(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(h_n[1]))[None]


class EncoderNoTanh(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, self.bridge(torch.cat([h_n[0], h_n[1]], -1))[None]


class EncoderNoLayerAxis(EncoderBase):
    def forward(self, src, valid_lens):
        outputs, h_n = self.packed(src, valid_lens)
        return outputs, torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], -1)))


class EncoderSortsByHand(EncoderBase):
    """A correct alternative: sort the batch by length, pack it sorted, and put the rows back in order."""

    def forward(self, src, valid_lens):
        lens, order = valid_lens.sort(descending=True)
        outputs, h_n = self.packed(src[order], lens, enforce_sorted=True)
        back = order.argsort()
        s_0 = torch.tanh(self.bridge(h_n.transpose(0, 1).reshape(src.shape[0], -1)))
        return outputs[back], s_0[back].unsqueeze(0)


class EncoderOutputHalves(EncoderBase):
    """Correct too: the final states read from the outputs (forward at the last word, backward at 0)."""

    def forward(self, src, valid_lens):
        outputs, _ = self.packed(src, valid_lens)
        h = self.num_hiddens
        forward_last = outputs[torch.arange(src.shape[0]), valid_lens - 1, :h]
        return outputs, torch.tanh(self.bridge(torch.cat([forward_last, outputs[:, 0, h:]], -1)))[None]


def bahdanau(
    embedded,
    s_0,
    memory,
    attention,
    rnn,
    *,
    luong_order=False,
    swap=False,
    once=False,
    shift=False,
    forward=False,
    no_axis=False,
):
    s, states, contexts, weights = s_0, [], [], []
    context_prev = embedded.new_zeros(embedded.shape[0], memory.values.shape[-1])
    fixed = attention.attend(s[:, None], memory)
    for t in range(embedded.shape[1]):
        if luong_order:
            s_new = rnn(torch.cat([embedded[:, t], context_prev], -1), s)
            context, weight = attention.attend(s_new[:, None], memory)
            context_prev = context[:, 0]
        else:
            if once:
                context, weight = fixed
            elif forward:
                context = attention(s[:, None], memory.keys, memory.values, memory.valid_lens)
                weight = attention.attention_weights
            else:
                context, weight = attention.attend(s if no_axis else s[:, None], memory)
            x = [context[:, 0], embedded[:, t]] if swap else [embedded[:, t], context[:, 0]]
            s_new = rnn(torch.cat(x, -1), s)
        states.append(s if shift else s_new)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
        s = s_new
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)


def bahdanau_queries_with_s_t(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded, s_0, memory, attention, rnn, luong_order=True)


def bahdanau_context_first(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded, s_0, memory, attention, rnn, swap=True)


def bahdanau_context_once(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded, s_0, memory, attention, rnn, once=True)


def bahdanau_returns_s_0(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded, s_0, memory, attention, rnn, shift=True)


def bahdanau_calls_forward(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded, s_0, memory, attention, rnn, forward=True)


def bahdanau_query_without_axis(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded, s_0, memory, attention, rnn, no_axis=True)


def aer_sure_only(predicted, sure, possible):
    return 1 - 2 * len(predicted & sure) / (len(predicted) + len(sure))


def aer_possible_denominator(predicted, sure, possible):
    return 1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(possible))


def aer_agreement(predicted, sure, possible):
    return (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))


def aer_precision(predicted, sure, possible):
    return 1 - len(predicted & possible) / max(len(predicted), 1)


def aer_possible_twice(predicted, sure, possible):
    return 1 - (len(predicted & possible) + len(predicted & possible)) / (len(predicted) + len(sure))


def location_uncut(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a.T, valid_lens)


def location_cut_after(queries, W_a, num_keys, valid_lens=None):
    return F.softmax(queries @ W_a.T, dim=-1)[..., :num_keys]


def location_unmasked(queries, W_a, num_keys, valid_lens=None):
    return F.softmax(queries @ W_a[:num_keys].T, dim=-1)


def location_wrong_axis(queries, W_a, num_keys, valid_lens=None):
    return softmax_wrong_axis(queries @ W_a[:num_keys].T, valid_lens)


def location_untransposed(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a[:num_keys], valid_lens)


def luong(
    y_emb,
    h_prev,
    feed,
    memory,
    attention,
    rnn,
    W_c,
    *,
    hc=False,
    previous=False,
    feed_h=False,
    feed_first=False,
    tanh=True,
    no_axis=False,
):
    fed = h_prev if feed_h else feed
    h_t = rnn(torch.cat([fed, y_emb] if feed_first else [y_emb, fed], -1), h_prev)
    query = h_prev if previous else h_t
    context, weights = attention.attend(query if no_axis else query[:, None], memory)
    pair = [h_t, context[:, 0]] if hc else [context[:, 0], h_t]
    attentional = torch.cat(pair, -1) @ W_c.T
    return h_t, torch.tanh(attentional) if tanh else attentional, weights[:, 0]


def luong_h_before_c(*args):
    return luong(*args, hc=True)


def luong_queries_with_h_prev(*args):
    return luong(*args, previous=True)


def luong_feeds_h_prev(*args):
    return luong(*args, feed_h=True)


def luong_feed_first(*args):
    return luong(*args, feed_first=True)


def luong_no_tanh(*args):
    return luong(*args, tanh=False)


def luong_query_without_axis(*args):
    return luong(*args, no_axis=True)


def local(
    scores,
    centres,
    window,
    valid_lens,
    *,
    sigma=None,
    two=2,
    use_window=True,
    cut_padding=True,
    gaussian=True,
    renormalise=False,
    rounded=False,
):
    centres = centres.round() if rounded else centres
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]
    outside = torch.zeros_like(distance, dtype=torch.bool)
    if use_window:
        outside |= distance.abs() > window
    if cut_padding:
        outside |= positions >= valid_lens[:, None, None]
    weights = F.softmax(scores.masked_fill(outside, -1e9), dim=-1) * ~outside
    if gaussian:
        sigma = window / 2 if sigma is None else sigma
        weights = weights * torch.exp(-(distance**2) / (two * sigma**2))
    return weights / weights.sum(-1, keepdim=True) if renormalise else weights


def local_sigma_d(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, sigma=window)


def local_no_two(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, two=1)


def local_no_window(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, use_window=False)


def local_window_past_end(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, cut_padding=False)


def local_no_gaussian(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, gaussian=False)


def local_renormalised(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, renormalise=True)


def local_rounded(scores, centres, window, valid_lens):
    return local(scores, centres, window, valid_lens, rounded=True)


def local_p(
    queries,
    scores,
    W_p,
    v_p,
    window,
    valid_lens,
    *,
    S="valid",
    tanh=True,
    linear=True,
    sigma=None,
    before=None,
    edges=True,
    use_window=True,
    cut_padding=True,
    renormalise=False,
):
    lengths = {
        "valid": valid_lens,
        "padded": torch.full_like(valid_lens, scores.shape[-1]),
        "minus_one": valid_lens - 1,
    }
    hidden = F.linear(queries, W_p) if linear else queries @ W_p
    centres = lengths[S][:, None] * torch.sigmoid(
        F.linear(torch.tanh(hidden) if tanh else hidden, v_p)[..., 0]
    )
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]
    outside = torch.zeros_like(distance, dtype=torch.bool)
    if use_window:
        outside |= distance.abs() > window if edges else distance.abs() >= window
    if cut_padding:
        outside |= positions >= valid_lens[:, None, None]
    sigma = window / 2 if sigma is None else sigma
    gaussian = torch.exp(-(distance**2) / (2 * sigma**2))
    if before == "log":
        scores = scores - distance**2 / (2 * sigma**2)
    elif before == "times":
        scores = scores * gaussian
    weights = F.softmax(scores.masked_fill(outside, -1e9), dim=-1) * ~outside
    if before is None:
        weights = weights * gaussian
    return centres, weights / weights.sum(-1, keepdim=True) if renormalise else weights


def local_p_padded_width(*args):
    return local_p(*args, S="padded")


def local_p_length_minus_one(*args):
    return local_p(*args, S="minus_one")


def local_p_no_tanh(*args):
    return local_p(*args, tanh=False)


def local_p_untransposed_W_p(*args):
    return local_p(*args, linear=False)


def local_p_sigma_d(queries, scores, W_p, v_p, window, valid_lens):
    return local_p(queries, scores, W_p, v_p, window, valid_lens, sigma=window)


def local_p_no_window(*args):
    return local_p(*args, use_window=False)


def local_p_window_past_end(*args):
    return local_p(*args, cut_padding=False)


def local_p_gaussian_added_to_scores(*args):
    return local_p(*args, before="log")


def local_p_gaussian_times_scores(*args):
    return local_p(*args, before="times")


def local_p_open_window(*args):
    return local_p(*args, edges=False)


def local_p_renormalised(*args):
    return local_p(*args, renormalise=True)


def local_p_one_sentence_at_a_time(queries, scores, W_p, v_p, window, valid_lens):
    """A correct alternative: a Python loop over the sentences, nn.Linear-free, sigma written as D / 2."""
    centres, weights = [], []
    for i in range(queries.shape[0]):
        n = int(valid_lens[i])
        p = n * torch.sigmoid(torch.tanh(queries[i] @ W_p.T) @ v_p[0])
        s = torch.arange(scores.shape[-1], dtype=scores.dtype)
        inside = ((s[None, :] - p[:, None]).abs() <= window) & (s < n)
        a = torch.softmax(torch.where(inside, scores[i], torch.tensor(-torch.inf, dtype=scores.dtype)), -1)
        centres.append(p)
        weights.append(
            torch.where(inside, a, 0) * torch.exp(-((s[None, :] - p[:, None]) ** 2) / (2 * (window / 2) ** 2))
        )
    return torch.stack(centres), torch.stack(weights)


def hunted(queries, keys, values, valid_lens, *, axis=False, dim=False, fill="fixed"):
    """ch2.q5's masked_attention with some planted bugs fixed, as a learner would fix them."""
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    mask = real[:, :, None] if axis else real.unsqueeze(1)
    value = {"fixed": torch.finfo(scores.dtype).min, "planted": -1e6, "number": torch.finfo(scores.dtype).min}
    filled = scores.masked_fill(~mask, value.get(fill, -1e6) if fill != "inf" else -math.inf)
    weights = F.softmax(filled, dim=1 if dim else -1)
    if fill in ("fixed", "zeroed"):
        weights = weights * mask
    return weights @ values, weights


def hunt_axis_left(*args):
    return hunted(*args, axis=True)


def hunt_dim_left(*args):
    return hunted(*args, dim=True)


def hunt_fill_left(*args):
    return hunted(*args, fill="planted")


def hunt_only_number_changed(*args):
    return hunted(*args, fill="number")


def hunt_axis_and_dim_left(*args):
    return hunted(*args, axis=True, dim=True)


def hunt_axis_and_fill_left(*args):
    return hunted(*args, axis=True, fill="planted")


def hunt_dim_and_fill_left(*args):
    return hunted(*args, dim=True, fill="planted")


def hunt_number_changed_only(*args):
    return hunted(*args, axis=True, dim=True, fill="number")


def hunt_zeroed_but_minus_1e6(*args):
    return hunted(*args, fill="zeroed")


def hunt_minus_inf(*args):
    return hunted(*args, fill="inf")


def hunt_with_where(queries, keys, values, valid_lens):
    """A correct alternative: torch.where, -inf replaced after the softmax, the context by einsum."""
    scores = torch.einsum("bqd,bkd->bqk", queries, keys) / queries.shape[-1] ** 0.5
    real = (torch.arange(keys.shape[1])[None, :] < valid_lens[:, None])[:, None, :]
    weights = torch.softmax(torch.where(real, scores, torch.finfo(scores.dtype).min), dim=2)
    weights = torch.where(real, weights, torch.zeros((), dtype=weights.dtype))
    return torch.einsum("bqk,bkv->bqv", weights, values), weights


def greedy(
    model,
    src,
    src_valid_lens,
    *,
    bos,
    eos,
    max_len,
    keep_eos=False,
    stop=True,
    stop_all_at_first=False,
    feed_bos=False,
    steps_offset=0,
    skip_finished=True,
    drop_rows=True,
    truncate=False,
):
    """Greedy search with one bug switched on; by default it drops finished rows, like the solution."""
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos)
    tokens = [[] for _ in range(src.shape[0])]
    done = [False] * src.shape[0]
    active = list(range(src.shape[0]))
    drop_rows = drop_rows and stop and skip_finished and not stop_all_at_first and not truncate
    for _ in range(max_len + steps_offset):
        logits, state, _ = model.decoder.step(y, state)
        choice = logits.argmax(-1)
        y = torch.full_like(choice, bos) if feed_bos else choice
        for i, token in zip(active, choice.tolist(), strict=True):
            if done[i] and stop and skip_finished:
                continue
            if token == eos:
                done[i] = True
                if keep_eos or not stop:
                    tokens[i].append(token)
            else:
                tokens[i].append(token)
        if truncate:
            continue
        if stop and (all(done) or (stop_all_at_first and any(done))):
            break
        if drop_rows:
            keep = [j for j, i in enumerate(active) if not done[i]]
            index = torch.tensor(keep, dtype=torch.long)
            active, y, state = [active[j] for j in keep], y[index], state.index_select(index)
    return tokens


def greedy_masks_rows(model, src, src_valid_lens, *, bos, eos, max_len):
    """A correct alternative: finished rows leave through boolean masks, tokens collected in a tensor."""
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    out = torch.full((src.shape[0], max_len), eos)
    alive = torch.ones(src.shape[0], dtype=torch.bool)
    y = torch.full((src.shape[0],), bos)
    for t in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        out[alive, t] = y
        still = y != eos
        alive = alive.clone()
        alive[alive.clone()] = still
        if not alive.any():
            break
        y, state = y[still], state.index_select(torch.arange(len(still))[still])
    return [[token for token in row if token != eos] for row in out.tolist()]


def greedy_truncates(*args, **kwargs):
    return greedy(*args, **kwargs, truncate=True)


def greedy_keeps_finished_rows(*args, **kwargs):
    return greedy(*args, **kwargs, drop_rows=False)


def greedy_keeps_eos(*args, **kwargs):
    return greedy(*args, **kwargs, keep_eos=True)


def greedy_never_stops(*args, **kwargs):
    return greedy(*args, **kwargs, stop=False)


def greedy_stops_at_first_eos(*args, **kwargs):
    return greedy(*args, **kwargs, stop_all_at_first=True)


def greedy_feeds_bos(*args, **kwargs):
    return greedy(*args, **kwargs, feed_bos=True)


def greedy_one_step_short(*args, **kwargs):
    return greedy(*args, **kwargs, steps_offset=-1)


def greedy_one_step_long(*args, **kwargs):
    return greedy(*args, **kwargs, steps_offset=1)


def greedy_keeps_tokens_after_eos(*args, **kwargs):
    return greedy(*args, **kwargs, skip_finished=False)


def beam_without_prefix_scores(beam_scores, log_probs, beam_size):
    top, index = log_probs.reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
    return top, index // log_probs.shape[-1], index % log_probs.shape[-1]


def beam_best_token_per_beam(beam_scores, log_probs, beam_size):
    best, tokens = (beam_scores[:, :, None] + log_probs).max(-1)
    return best, torch.arange(beam_size).expand_as(tokens), tokens


def beam_swapped(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] + log_probs).reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
    return top, index % log_probs.shape[-1], index // log_probs.shape[-1]


def beam_divided_by_beam_size(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] + log_probs).reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
    return top, index // beam_size, index % beam_size


def beam_topk_per_beam(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] + log_probs).topk(beam_size, dim=-1)
    return top.reshape(top.shape[0], -1), index, index


# Mutants for the mistakes named since the checks ask for gradients, large scores, rows shorter than the
# longest, several queries per call and window edges.


def mask_first_row_length(X, valid_len, value=0):
    Y = X.clone()
    Y[:, int(valid_len[0]) :] = value
    return Y


def softmax_unstabilised(scores, valid_lens=None):
    keep = torch.ones_like(scores, dtype=torch.bool)
    if valid_lens is not None:
        keep = keep_mask(valid_lens, scores.shape[1], scores.shape[2])
    e = torch.exp(scores) * keep
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


def softmax_keeps_one_too_many(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    return written_masked_softmax(scores, valid_lens + 1)


def softmax_zero_filled(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    return F.softmax(scores * keep_mask(valid_lens, scores.shape[1], scores.shape[2]), dim=-1)


def divide_by_value_size(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, divisor=math.sqrt(values.shape[-1]))


def divide_by_num_queries(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens, divisor=math.sqrt(queries.shape[1]))


def attention_weights_first(queries, keys, values, valid_lens=None):
    return attention(queries, keys, values, valid_lens)[::-1]


class AdditiveFirstQueryOnly(AdditiveBase):
    def attend(self, queries, memory):
        return super().attend(queries[:, :1], memory)


class AdditiveMemoryOnSelf(AdditiveBase):
    def prepare(self, keys, values, valid_lens=None):
        self.memory = super().prepare(keys, values, valid_lens)

    def attend(self, queries, memory):
        return super().attend(queries, self.memory)


def general_tanh(queries, keys, W_a):
    return torch.tanh(queries @ (keys @ W_a.T).transpose(1, 2))


def general_first_query(queries, keys, W_a):
    return queries[:, :1] @ (keys @ W_a.T).transpose(1, 2)


def concat_first_query(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries[:, :1] @ W_a[:, :qs].T)[:, :, None] + (keys @ W_a[:, qs:].T)[:, None])
    return (h @ v_a.T).squeeze(-1)


def concat_bare_squeeze(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries @ W_a[:, :qs].T)[:, :, None] + (keys @ W_a[:, qs:].T)[:, None])
    return (h @ v_a.T).squeeze()


def ce_drops_eos(logits, tgt_out, tgt_valid_lens):
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None] - 1
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * real).sum() / real.sum()


def ce_log_softmax_over_time(logits, tgt_out, tgt_valid_lens):
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    picked = F.log_softmax(logits, dim=1).gather(-1, tgt_out[..., None])[..., 0]
    return -(picked * real).sum() / real.sum()


def state_every_length(outputs, valid_lens):
    return outputs[:, valid_lens - 1]


def state_gather_unexpanded(outputs, valid_lens):
    return outputs.gather(1, (valid_lens - 1).view(-1, 1, 1)).squeeze(1)


def state_batch_axis(outputs, valid_lens):
    return outputs[valid_lens - 1, -1]


def location_last_rows(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a[-num_keys:].T, valid_lens)


def location_first_query(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries[:, :1] @ W_a[:num_keys].T, valid_lens)


def luong_swapped_states(*args):
    h_t, attentional, weights = luong(*args)
    return attentional, h_t, weights


def luong_attentional_from_h_prev(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h_t = rnn(torch.cat([y_emb, feed], -1), h_prev)
    context, weights = attention.attend(h_t[:, None], memory)
    return h_t, torch.tanh(torch.cat([context[:, 0], h_prev], -1) @ W_c.T), weights[:, 0]


def local_edges_left_out(scores, centres, window, valid_lens):
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]
    outside = (distance.abs() >= window) | (positions >= valid_lens[:, None, None])
    weights = F.softmax(scores.masked_fill(outside, -1e9), dim=-1) * ~outside
    return weights * torch.exp(-(distance**2) / (2 * (window / 2) ** 2))


def local_unstabilised(scores, centres, window, valid_lens):
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]
    inside = (distance.abs() <= window) & (positions < valid_lens[:, None, None])
    e = torch.exp(scores) * inside
    weights = e / e.sum(-1, keepdim=True).clamp_min(1e-30)
    return weights * torch.exp(-(distance**2) / (2 * (window / 2) ** 2))


def bahdanau_first_embedding(embedded, s_0, memory, attention, rnn):
    return bahdanau(embedded[:, :1].expand_as(embedded), s_0, memory, attention, rnn)


def bahdanau_stacked_on_axis_0(embedded, s_0, memory, attention, rnn):
    return tuple(r.transpose(0, 1) for r in bahdanau(embedded, s_0, memory, attention, rnn))


def aer_floor_division(predicted, sure, possible):
    return 1 - (len(predicted & sure) + len(predicted & possible)) // (len(predicted) + len(sure))


def aer_links_swapped(predicted, sure, possible):
    swapped = {(t, s) for s, t in predicted}
    return 1 - (len(swapped & sure) + len(swapped & possible)) / (len(swapped) + len(sure))


def aer_rounded(predicted, sure, possible):
    return round(1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure)), 2)


def beam_smallest(beam_scores, log_probs, beam_size):
    candidates = (beam_scores[:, :, None] + log_probs).reshape(log_probs.shape[0], -1)
    top, index = candidates.topk(beam_size, dim=-1, largest=False)
    return top, index // log_probs.shape[-1], index % log_probs.shape[-1]


def beam_worst_first(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] + log_probs).reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
    top, index = top.flip(-1), index.flip(-1)
    return top, index // log_probs.shape[-1], index % log_probs.shape[-1]


def beam_scores_last(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] + log_probs).reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
    return index // log_probs.shape[-1], index % log_probs.shape[-1], top


def softmax_first_column(scores, valid_lens=None):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return written_masked_softmax(scores, valid_lens)


def attention_first_column(queries, keys, values, valid_lens=None):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return attention(queries, keys, values, valid_lens)


class AdditiveRelu(AdditiveBase):
    def attend(self, queries, memory):
        projected_keys, values, valid_lens = memory
        scores = self.w_v(torch.relu(self.features(queries, projected_keys))).squeeze(-1)
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(weights, values), weights


def ce_probabilities(logits, tgt_out, tgt_valid_lens):
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    p = F.softmax(logits, dim=-1).gather(-1, tgt_out[..., None])[..., 0]
    return -(p * real).sum() / real.sum()


def aer_without_possible(predicted, sure, possible):
    return 1 - len(predicted & sure) / (len(predicted) + len(sure))


def local_window_after_softmax(scores, centres, window, valid_lens):
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions[None, None, :] - centres[:, :, None]
    weights = masked_softmax(scores, valid_lens) * (distance.abs() <= window)
    return weights * torch.exp(-(distance**2) / (2 * (window / 2) ** 2))


def beam_multiplied(beam_scores, log_probs, beam_size):
    top, index = (beam_scores[:, :, None] * log_probs).reshape(log_probs.shape[0], -1).topk(beam_size, dim=-1)
    return top, index // log_probs.shape[-1], index % log_probs.shape[-1]


def beam(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha, bug=""):
    """The solution's beam search with one classic bug switched on (`bug`)."""
    batch_size, K = src.shape[0], beam_size
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    state = state.index_select(torch.arange(batch_size).repeat_interleave(K))
    scores = torch.full((batch_size, K), -math.inf, dtype=torch.float64)
    scores[:, 0] = 0.0
    prefixes = [[] for _ in range(batch_size * K)]
    y = torch.full((batch_size * K,), bos, dtype=torch.long)
    finished = [[] for _ in range(batch_size)]
    done = [False] * batch_size
    lp = (lambda length: 1.0) if bug == "no_norm" else (lambda length: length**alpha)
    for t in range(max_len):
        logits, new_state, _ = model.decoder.step(y, state)
        log_probs = F.log_softmax(logits.float(), dim=-1).double()
        vocab_size = log_probs.shape[-1]
        candidates = (scores.view(-1, 1) + log_probs).view(batch_size, K * vocab_size)
        top, index = candidates.topk(2 * K, dim=-1)
        rows, tokens = (index // vocab_size).tolist(), (index % vocab_size).tolist()
        keep = []
        for b in range(batch_size):
            for j in range(K):
                if bug != "eos_ignored" and tokens[b][j] == eos and top[b, j] > -math.inf and not done[b]:
                    finished[b].append((top[b, j].item() / lp(t + 1), prefixes[b * K + rows[b][j]]))
            if bug in ("keeps_finished", "eos_ignored"):
                live = list(range(K))
            else:
                live = [j for j in range(2 * K) if tokens[b][j] != eos][:K]
            keep += [(b * K + rows[b][j], tokens[b][j]) for j in live]
            scores[b] = top[b, live]
        prefixes = [prefixes[row] + [token] for row, token in keep]
        rows_kept = torch.tensor([row for row, _ in keep])
        state = new_state if bug == "no_reorder" else new_state.index_select(rows_kept)
        y = torch.tensor([token for _, token in keep])
        for b in range(batch_size):
            if not done[b] and t + 1 == max_len:
                room = K if bug == "eos_ignored" else max(0, K - len(finished[b]))
                live = [k for k in range(K) if scores[b, k] > -math.inf][:room]
                finished[b] += [(scores[b, k].item() / lp(t + 1), prefixes[b * K + k]) for k in live]
            enough = len(finished[b]) >= (1 if bug == "first_stops" else K)
            done[b] = done[b] or enough or t + 1 == max_len
        if all(done):
            break
    return [max(candidates, key=lambda c: c[0])[1] for candidates in finished]


def beam_search_without_reordering(*args, **kwargs):
    return beam(*args, **kwargs, bug="no_reorder")


def beam_search_by_raw_score(*args, **kwargs):
    return beam(*args, **kwargs, bug="no_norm")


def beam_search_keeping_finished_beams(*args, **kwargs):
    return beam(*args, **kwargs, bug="keeps_finished")


def beam_search_ignoring_eos(*args, **kwargs):
    return beam(*args, **kwargs, bug="eos_ignored")


def beam_search_stopping_at_first_finished(*args, **kwargs):
    return beam(*args, **kwargs, bug="first_stops")


def beam_search_sentence_by_sentence(model, src, src_valid_lens, **kwargs):
    """A correct alternative: one sentence at a time, through the batched solution."""
    solve = define("ch6.q3", checks.EXERCISES["ch6.q3"].solution_code)
    return [solve(model, src[i : i + 1], src_valid_lens[i : i + 1], **kwargs)[0] for i in range(src.shape[0])]


# ch11: the causal + padding mask and multi-head attention, written wrong as learners write them.
def causal_mask_triu(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).triu()
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_strict(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril(-1)
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_padding_on_queries(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return causal[None] & (torch.arange(num_steps)[None, :, None] < valid_lens[:, None, None])


def causal_mask_no_padding(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return causal[None].expand(len(valid_lens), -1, -1)


def causal_mask_inverted(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return ~(causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None]))


def causal_mask_plus_one(valid_lens, num_steps):
    causal = torch.ones(num_steps, num_steps, dtype=torch.bool).tril(1)
    return causal[None] & (torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None])


def causal_mask_padding_only(valid_lens, num_steps):
    keep = torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None]
    return keep.expand(-1, num_steps, -1)


def heads(bug=None):
    """A multi-head attention with one learner's bug (None: right)."""
    def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
        b, n_q, d = queries.shape
        d_head = d // num_heads

        def split(X):
            if bug == "view":
                return X.reshape(b * num_heads, X.shape[1], d_head)
            if bug == "strided":
                X = X.reshape(b, X.shape[1], d_head, num_heads).permute(0, 3, 1, 2)
                return X.reshape(-1, X.shape[2], d_head)
            X = X.reshape(b, X.shape[1], num_heads, d_head).transpose(1, 2)
            return X.reshape(b * num_heads, -1, d_head)

        q, k, v = split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)
        if valid_lens is not None and bug == "unmasked":
            valid_lens = None
        if valid_lens is not None:
            valid_lens = (valid_lens.repeat(num_heads, *([1] * (valid_lens.dim() - 1))) if bug == "tile"
                          else valid_lens.repeat_interleave(num_heads, dim=0))
        scale = 1.0 if bug == "unscaled" else math.sqrt(d if bug == "sqrt_d" else d_head)
        weights = masked_softmax(q @ k.transpose(1, 2) / scale, valid_lens)
        context = weights @ v
        if bug in ("view", "merge_view"):
            context = context.reshape(b, n_q, d)
        elif bug == "strided":
            context = context.reshape(b, num_heads, n_q, d_head).permute(0, 2, 3, 1).reshape(b, n_q, d)
        else:
            context = context.reshape(b, num_heads, n_q, d_head).transpose(1, 2).reshape(b, n_q, d)
        outputs = context if bug == "no_W_o" else context @ W_o.T
        return outputs, weights.reshape(b, num_heads, n_q, -1)

    return multi_head_attention


def mha_view_split(*args):
    return heads("view")(*args)


def mha_merge_without_transpose(*args):
    return heads("merge_view")(*args)


def mha_strided_heads(*args):
    return heads("strided")(*args)


def mha_unmasked(*args):
    return heads("unmasked")(*args)


def mha_unscaled(*args):
    return heads("unscaled")(*args)


def mha_scaled_by_d(*args):
    return heads("sqrt_d")(*args)


def mha_tiled_lens(*args):
    return heads("tile")(*args)


def mha_no_output_layer(*args):
    return heads("no_W_o")(*args)


MUTANTS = [
    ("ch1.q1", mask_d2l_in_place, "changed its input `X` in place"),
    ("ch1.q1", mask_keeps_one_too_many, "kept one padded position too many"),
    ("ch1.q1", mask_drops_last_real, "masked the last real position too"),
    ("ch1.q1", mask_last_axis, "masked along the last axis"),
    ("ch1.q1", mask_ignores_value, "`value` argument was ignored"),
    ("ch1.q1", mask_inverted, "mask is inverted"),
    ("ch1.q2", softmax_wrong_axis, "wrong axis"),
    ("ch1.q2", softmax_no_mask, "mask is not applied"),
    ("ch1.q2", softmax_d2l_fill, "came out uniform"),
    ("ch1.q2", softmax_neg_inf, "came out NaN"),
    ("ch1.q2", softmax_then_zero, "no longer sum to 1"),
    ("ch1.q2", softmax_fill_minus_1e6, "-1e6 does not fit in float16"),
    ("ch1.q2", softmax_fill_minus_1e6_in_dtype, "NaN in float16"),
    ("ch1.q2", softmax_float32_out, "return weights of the same dtype"),
    ("ch1.q2", softmax_detached, "cuts the gradient"),
    ("ch1.q3", nw_softmax_over_queries, "The softmax ran over the queries"),
    ("ch1.q3", nw_divided_by_total, "sum over the whole"),
    ("ch1.q3", nw_keys_by_queries, "your weights are (num_keys, num_queries)"),
    ("ch1.q3", nw_keys_by_queries_last_axis, "normalised over the queries"),
    ("ch1.q3", nw_no_minus, "The minus sign is missing"),
    ("ch1.q3", nw_no_half, "missing the 1/2"),
    ("ch1.q3", nw_sigma_not_squared, "You divided by 2σ, not by 2σ²"),
    ("ch1.q3", nw_precedence, "multiplied by σ² instead of divided"),
    ("ch1.q3", nw_cdist_not_squared, "not its square"),
    ("ch1.q3", nw_exp_unnormalised, "The weights are not normalised"),
    ("ch1.q3", nw_exp_over_sum, "NaN for a query far from every key"),
    ("ch1.q3", nw_mean_of_weighted_values, "You averaged the weighted values"),
    ("ch1.q3", nw_averages_keys, "The predictions average the keys"),
    ("ch1.q3", nw_predictions_first, "the weights first"),
    ("ch1.q3", nw_only_predictions, "You returned only the predictions"),
    ("ch1.q3", nw_only_weights, "You returned only the weights"),
    ("ch2.q1", no_scaling, "not scaled"),
    ("ch2.q1", divide_by_d, "divided by d"),
    ("ch2.q1", divide_by_num_keys, "sqrt(num_keys)"),
    ("ch2.q1", attention_wrong_axis, "wrong axis"),
    ("ch2.q1", attention_no_mask, "mask is not applied"),
    ("ch2.q1", attention_d2l_masking, "came out uniform instead of all zeros"),
    ("ch2.q1", attention_transposed, "keys · queriesᵀ"),
    ("ch2.q1", attention_over_keys, "must average the values"),
    ("ch2.q2", AdditiveProjectsEveryStep, "projected again at every decoder step"),
    ("ch2.q2", AdditiveNoTanh, "tanh is missing"),
    ("ch2.q2", AdditiveTanhOutside, "tanh is applied after w_v"),
    ("ch2.q2", AdditiveSwapped, "W_q and W_k are swapped"),
    ("ch2.q2", AdditiveNoMask, "mask is not applied"),
    ("ch2.q2", AdditiveD2lMasking, "came out uniform instead of all zeros"),
    ("ch2.q2", AdditiveWrongAxis, "wrong axis"),
    ("ch2.q2", AdditiveNoBroadcast, "give them axes to broadcast over"),
    ("ch2.q3", general_untransposed, "W_a is used untransposed"),
    ("ch2.q3", general_ignores_W_a, "W_a is ignored"),
    ("ch2.q3", general_scaled, "not scaled"),
    ("ch2.q3", general_softmaxed, "returned softmax weights"),
    ("ch2.q3", general_transposed, "scores are transposed"),
    ("ch2.q4", concat_key_first, "You built [k; q]"),
    ("ch2.q4", concat_no_tanh, "tanh is missing"),
    ("ch2.q4", concat_tanh_outside, "tanh is applied after v_a"),
    ("ch2.q4", concat_softmaxed, "returned softmax weights"),
    ("ch2.q4", concat_no_expand, "torch.cat needs both halves shaped alike"),
    ("ch2.q4", concat_keys_by_queries, "The scores are transposed"),
    ("ch2.q5", hunt_axis_left, "One planted bug remains. The mask is broadcast along the wrong axis"),
    ("ch2.q5", hunt_dim_left, "One planted bug remains. The softmax runs over the wrong axis"),
    ("ch2.q5", hunt_fill_left, "One planted bug remains. A sentence of valid length 0 gets uniform weights"),
    ("ch2.q5", hunt_only_number_changed, "One planted bug remains. A sentence of valid length 0"),
    ("ch2.q5", hunt_axis_and_dim_left, "2 of the 3 planted bugs remain"),
    ("ch2.q5", hunt_axis_and_fill_left, "2 of the 3 planted bugs remain"),
    ("ch2.q5", hunt_dim_and_fill_left, "2 of the 3 planted bugs remain"),
    ("ch2.q5", hunt_number_changed_only, "All 3 planted bugs remain"),
    ("ch2.q5", hunt_zeroed_but_minus_1e6, "-1e6 does not fit in float16"),
    ("ch2.q5", hunt_minus_inf, "came out NaN"),
    ("ch3.q1", ce_unmasked, "Padding is not masked"),
    ("ch3.q1", ce_over_all_positions, "divided by batch_size * T"),
    ("ch3.q1", ce_per_sentence, "averaged each sentence, then the sentences"),
    ("ch3.q1", ce_sum, "returned the sum"),
    ("ch3.q1", ce_ignore_index, "can be any id"),
    ("ch3.q1", ce_keeps_one_padded, "position `tgt_valid_len` is already padding"),
    ("ch3.q1", ce_classes_last, "expects the classes on axis 1"),
    ("ch3.q2", state_last_padded, "last *padded* position"),
    ("ch3.q2", state_mean, "averaged the real positions"),
    ("ch3.q2", state_off_by_one, "Off by one"),
    ("ch3.q2", state_mean_with_padding, "averaged every position, padding included"),
    ("ch3.q2", state_first, "took the first position"),
    ("ch3.q3", EncoderUnpacked, "The GRU ran over the padding"),
    ("ch3.q3", EncoderUnpackedZeroed, "but the GRU still ran over the padding"),
    ("ch3.q3", EncoderSorted, "pass `enforce_sorted=False`"),
    ("ch3.q3", EncoderShortOutputs, "`total_length=src.shape[1]`"),
    ("ch3.q3", EncoderBridgeLastColumn, "the last *padded* position"),
    ("ch3.q3", EncoderBridgeLastWord, "the backward GRU has read a single word"),
    ("ch3.q3", EncoderBridgeFirstPosition, "the forward GRU has read a single word"),
    ("ch3.q3", EncoderBackwardFirst, "The directions are swapped"),
    ("ch3.q3", EncoderReshapedStates, "mixes the sentences of the batch"),
    ("ch3.q3", EncoderBackwardOnly, "both directions' final states side by side"),
    ("ch3.q3", EncoderNoTanh, "tanh is missing"),
    ("ch3.q3", EncoderNoLayerAxis, "s_0 has no layer axis"),
    ("ch4.q1", bahdanau_queries_with_s_t, "needs the previous one, s_{t-1}"),
    ("ch4.q1", bahdanau_context_first, "the embedding first"),
    ("ch4.q1", bahdanau_context_once, "context never changes"),
    ("ch4.q1", bahdanau_returns_s_0, "yours start at s_0"),
    ("ch4.q1", bahdanau_calls_forward, "project the keys again"),
    ("ch4.q1", bahdanau_query_without_axis, "give the state a query axis"),
    ("ch4.q2", aer_sure_only, "only the sure links"),
    ("ch4.q2", aer_possible_denominator, "not |A| + |P|"),
    ("ch4.q2", aer_agreement, "1 - AER"),
    ("ch4.q2", aer_precision, "1 - precision"),
    ("ch4.q2", aer_possible_twice, "Both counts in the numerator used P"),
    ("ch5.q1", location_uncut, "keep the first num_keys rows"),
    ("ch5.q1", location_cut_after, "cut afterwards"),
    ("ch5.q1", location_unmasked, "mask is not applied"),
    ("ch5.q1", location_wrong_axis, "wrong axis"),
    ("ch5.q1", location_untransposed, "`queries @ W_a.T`"),
    ("ch5.q2", luong_h_before_c, "You built [h_t; c_t]"),
    ("ch5.q2", luong_queries_with_h_prev, "used h_{t-1} where Luong's decoder needs the current state h_t"),
    ("ch5.q2", luong_feeds_h_prev, "not the previous hidden state h_{t-1}"),
    ("ch5.q2", luong_feed_first, "the embedding first"),
    ("ch5.q2", luong_no_tanh, "tanh is missing"),
    ("ch5.q2", luong_query_without_axis, "give h_t a query axis"),
    ("ch5.q3", local_sigma_d, "you used sigma = D"),
    ("ch5.q3", local_no_two, "factor 2 is missing"),
    ("ch5.q3", local_no_window, "There is no window"),
    ("ch5.q3", local_window_past_end, "reaches past the end of the sentence"),
    ("ch5.q3", local_no_gaussian, "The Gaussian is missing"),
    ("ch5.q3", local_renormalised, "renormalised"),
    ("ch5.q3", local_rounded, "p_t was rounded"),
    ("ch5.q4", local_p_padded_width, "not the batch's padded width"),
    ("ch5.q4", local_p_length_minus_one, "You used S_i - 1"),
    ("ch5.q4", local_p_no_tanh, "tanh is missing"),
    ("ch5.q4", local_p_untransposed_W_p, "`queries @ W_p.T`"),
    ("ch5.q4", local_p_sigma_d, "you used sigma = D"),
    ("ch5.q4", local_p_no_window, "There is no window"),
    ("ch5.q4", local_p_window_past_end, "not clipped to the sentence"),
    ("ch5.q4", local_p_gaussian_added_to_scores, "were renormalised after the Gaussian"),
    ("ch5.q4", local_p_gaussian_times_scores, "the Gaussian scaled the scores"),
    ("ch5.q4", local_p_open_window, "edges are left out"),
    ("ch5.q4", local_p_renormalised, "were renormalised after the Gaussian"),
    ("ch6.q1", greedy_keeps_eos, "end with <eos>"),
    ("ch6.q1", greedy_truncates, "ran every sentence to max_len and cut the lists"),
    ("ch6.q1", greedy_keeps_finished_rows, "finished sentences stayed in the batch"),
    ("ch6.q1", greedy_never_stops, "never stop"),
    ("ch6.q1", greedy_stops_at_first_eos, "first sentence produced <eos>"),
    ("ch6.q1", greedy_feeds_bos, "fed <bos> at every step"),
    ("ch6.q1", greedy_one_step_short, "one fewer"),
    ("ch6.q1", greedy_one_step_long, "yours got one more"),
    ("ch6.q1", greedy_keeps_tokens_after_eos, "Tokens after a sentence's <eos> were kept"),
    ("ch6.q2", beam_without_prefix_scores, "scores are not added"),
    ("ch6.q3", beam_search_without_reordering, "state does not follow the beams"),
    ("ch6.q3", beam_search_by_raw_score, "picked by raw log P"),
    ("ch6.q3", beam_search_keeping_finished_beams, "stayed in the beam and were extended"),
    ("ch6.q3", beam_search_ignoring_eos, "treated as an ordinary token"),
    ("ch6.q3", beam_search_stopping_at_first_finished, "stopped when its first hypothesis finished"),
    ("ch6.q2", beam_best_token_per_beam, "kept each beam's best token"),
    ("ch6.q2", beam_swapped, "Beam and token are swapped"),
    ("ch6.q2", beam_divided_by_beam_size, "Divide by vocab_size"),
    ("ch6.q2", beam_topk_per_beam, "shape (2, 9), expected (2, 3)"),
    ("ch1.q1", mask_first_row_length, "cut at the first row's valid length"),
    ("ch1.q2", softmax_unstabilised, "Large scores overflow"),
    ("ch1.q2", softmax_keeps_one_too_many, "one key too many gets weight"),
    ("ch1.q2", softmax_zero_filled, "a score of 0 still gets weight"),
    ("ch2.q1", divide_by_value_size, "sqrt(value_size)"),
    ("ch2.q1", divide_by_num_queries, "sqrt(num_queries)"),
    ("ch2.q1", attention_weights_first, "the context first"),
    ("ch2.q2", AdditiveFirstQueryOnly, "only the first of several queries"),
    ("ch2.q2", AdditiveMemoryOnSelf, "keep nothing on `self`"),
    ("ch2.q3", general_tanh, "You applied tanh"),
    ("ch2.q3", general_first_query, "Only the first query was scored"),
    ("ch2.q4", concat_first_query, "Only the first query was scored"),
    ("ch2.q4", concat_bare_squeeze, "`.squeeze(-1)`"),
    ("ch3.q1", ce_drops_eos, "its <eos>"),
    ("ch3.q1", ce_log_softmax_over_time, "not over the time steps"),
    ("ch3.q2", state_every_length, "every sentence at every sentence's length"),
    ("ch3.q2", state_gather_unexpanded, "expand it over the features"),
    ("ch3.q2", state_batch_axis, "You indexed the batch axis"),
    ("ch5.q1", location_last_rows, "the last num_keys rows"),
    ("ch5.q1", location_first_query, "Only the first query was scored"),
    ("ch5.q2", luong_swapped_states, "h_t and h̃_t are swapped"),
    ("ch5.q2", luong_attentional_from_h_prev, "built from the previous state h_{t-1}"),
    ("ch5.q3", local_edges_left_out, "edges included"),
    ("ch5.q3", local_unstabilised, "Large scores overflow"),
    ("ch4.q1", bahdanau_first_embedding, "`embedded[:, t]`"),
    ("ch4.q1", bahdanau_stacked_on_axis_0, "stacked along axis 0"),
    ("ch4.q2", aer_floor_division, "Integer division"),
    ("ch4.q2", aer_links_swapped, "(src_index, tgt_index)"),
    ("ch4.q2", aer_rounded, "The AER was rounded"),
    ("ch6.q2", beam_smallest, "You kept the smallest scores"),
    ("ch6.q2", beam_worst_first, "best first"),
    ("ch6.q2", beam_scores_last, "the new scores first"),
    ("ch1.q2", softmax_first_column, "one length per query"),
    ("ch2.q1", attention_first_column, "one length per query"),
    ("ch2.q2", AdditiveRelu, "You used ReLU"),
    ("ch3.q1", ce_probabilities, "not their logarithms"),
    ("ch4.q2", aer_without_possible, "you left out |A ∩ P|"),
    ("ch5.q3", local_window_after_softmax, "the window was applied after it"),
    ("ch6.q2", beam_multiplied, "You multiplied the scores"),
]


MUTANTS += [
    ("ch11.q1", causal_mask_triu, "This is the upper triangle"),
    ("ch11.q1", causal_mask_strict, "the diagonal is masked"),
    ("ch11.q1", causal_mask_padding_on_queries, "runs along the queries"),
    ("ch11.q1", causal_mask_no_padding, "The padding is not masked"),
    ("ch11.q1", causal_mask_inverted, "The mask is inverted"),
    ("ch11.q1", causal_mask_plus_one, "also sees position i + 1"),
    ("ch11.q1", causal_mask_padding_only, "The causal triangle is missing"),
    ("ch11.q2", mha_strided_heads, "every num_heads-th feature"),
    ("ch11.q2", mha_unmasked, "The mask is not applied"),
    ("ch11.q2", mha_view_split, "plain reshape to (batch_size * num_heads, n, d_head)"),
    ("ch11.q2", mha_merge_without_transpose, "merged with a plain reshape"),
    ("ch11.q2", mha_unscaled, "The scores are not scaled"),
    ("ch11.q2", mha_scaled_by_d, "divided by sqrt(d), the full width"),
    ("ch11.q2", mha_tiled_lens, "The lengths are tiled"),
    ("ch11.q2", mha_no_output_layer, "output projection W_o is missing"),
]


def learner(key: str, label: str) -> object:
    """The wrong answer of tests/learner_answers.py labelled `label`, as a mutant."""
    (answer,) = [a for a in ANSWERS if a.key == key and a.label == label]
    return define_answer(answer)


# Mistakes found by learners' answers: each is the verdict on one of them.
MUTANTS += [
    ("ch1.q3", learner("ch1.q3", "no minus"), "The minus sign is missing"),
    ("ch1.q3", learner("ch1.q3", "no minus naive exp"), "inf / inf is NaN"),
    ("ch1.q3", learner("ch1.q3", "naive exp with an epsilon in the denominator"), "the epsilon"),
    ("ch1.q3", learner("ch1.q3", "sum without keepdim"), "keepdim=True"),
    ("ch1.q3", learner("ch1.q3", "max subtracted without keepdim"), "keepdim=True"),
    ("ch1.q3", learner("ch1.q3", "squeeze() drops the key axis of a single key"), "without a dim"),
    ("ch1.q3", learner("ch1.q3", "calls the course's nadaraya_watson"), "calls the course's own"),
    ("ch2.q5", learner("ch2.q5", "softmax over all keys, padding zeroed afterwards"), "*before* the softmax"),
    ("ch2.q5", learner("ch2.q5", "<= in the mask"), "keeps one padded key"),
    ("ch2.q5", learner("ch2.q5", "rewritten with the course's masked_softmax"), "own `attn_course.attention.masking"),
    ("ch3.q3", learner("ch3.q3", "calls the course's encoder"), "calls the course's own"),
    ("ch5.q4", learner("ch5.q4", "centre detached"), "No gradient reaches W_p and v_p"),
    ("ch5.q4", learner("ch5.q4", "centre computed under no_grad"), "No gradient reaches W_p and v_p"),
    ("ch5.q4", learner("ch5.q4", "centre rounded to a position"), "p_t was rounded"),
    ("ch6.q3", learner("ch6.q3", "every beam starts with score 0"), "Every beam started with score 0"),
    ("ch6.q3", learner("ch6.q3", "length without the <eos>"), "left out the <eos>"),
    ("ch6.q3", learner("ch6.q3", "every live beam joins at max_len"), "every live beam joined"),
    ("ch6.q3", learner("ch6.q3", "new beams only among the beam_size best"), "enough candidates"),
    ("ch6.q3", learner("ch6.q3", "<eos> continued like any token, cut at the end"), "cut at their"),
    ("ch6.q3", learner("ch6.q3", "done at the first finished hypothesis"), "stopped when its first"),
    ("ch6.q3", learner("ch6.q3", "calls the course's beam_search"), "calls the course's own"),
    ("ch11.q1", learner("ch11.q1", "padding masked on both axes"), "alone or on both axes"),
    ("ch11.q1", learner("ch11.q1", "or instead of and"), "combined with `|`"),
    ("ch11.q1", learner("ch11.q1", "calls the course's attention_lens"), "calls the course's own"),
    ("ch11.q2", learner("ch11.q2", "projections applied as X @ W"), "applied as `X @ W`"),
    ("ch11.q2", learner("ch11.q2", "features dealt to the heads in turn"), "every num_heads-th feature"),
    ("ch11.q2", learner("ch11.q2", "calls the course's MultiHeadAttention"), "calls the course's own"),
    ("ch12.q1", learner("ch12.q1", "each source word's target word"), "The argmax ran down the columns"),
    ("ch12.q1", learner("ch12.q1", "cuts off the last row and column"), "padded as in a batch"),
    ("ch12.q1", learner("ch12.q1", "ties count"), "Ties were counted as crossings"),
    ("ch12.q1", learner("ch12.q1", "calls the course's attention_to_links"), "calls the course's own"),
    ("ch12.q2", learner("ch12.q2", "first reference with corpus_bleu"), "Only the first reference"),
    ("ch12.q2", learner("ch12.q2", "upper edge included"), "the bins are half-open"),
    ("ch12.q2", learner("ch12.q2", "average of sentence scores"), "the mean of the sentences' BLEU"),
    ("ch12.q2", learner("ch12.q2", "calls the course's bleu_by_length"), "calls the course's own"),
]


#: Chapters 9, 10 and 12's exercises have their mutation tests in tests/library/checks/test_checks_ch9_ch10.py and
#: tests/library/checks/test_checks_ch12.py (chapter 12's learners' mutants above also give the grading benchmark its cells).
ELSEWHERE = ("ch9.", "ch10.", "ch12.")
MUTATED = [key for key in checks.EXERCISES if not key.startswith(ELSEWHERE)]


@functools.cache
def verdict(key: str, mutant: object) -> checks.CheckResult:
    """The check's verdict on a mutant (computed once: two tests read it)."""
    return checks.EXERCISES[key].evaluate(mutant)


@pytest.mark.parametrize(
    ("key", "mutant", "expected"), MUTANTS, ids=[f"{key}-{mutant.__name__}" for key, mutant, _ in MUTANTS]
)
def test_known_wrong_answer_is_rejected_with_its_hint(key: str, mutant: object, expected: str) -> None:
    result = verdict(key, mutant)
    assert result.status == checks.FAILED
    assert expected in result.message, result.message
    assert "Traceback" not in result.message


@pytest.mark.parametrize("key", MUTATED)
def test_every_named_mistake_is_the_verdict_on_some_mutant(key: str) -> None:
    # A mistake that always shares its output with another (never the only match of a case, never ahead on
    # the cases for and against it) never fires; only a mutant whose verdict is that mistake's hint shows that
    # it can.
    verdicts = [verdict(key, mutant).message for k, mutant, _ in MUTANTS if k == key]
    unreached = [
        mistake.hint
        for mistake in checks.EXERCISES[key].mistakes
        if not any(message.startswith(mistake.hint + "\n") for message in verdicts)
    ]
    assert not unreached, "no mutant is diagnosed with:\n" + "\n".join(unreached)


def test_every_exercise_has_at_least_three_mutants() -> None:
    counts = {key: sum(k == key for k, _, _ in MUTANTS) for key in MUTATED}
    assert min(counts.values()) >= 3, counts


def test_nadaraya_watson_cases_hold_what_the_check_says_they_cover() -> None:
    exercise = checks.EXERCISES["ch1.q3"]
    cases = {case.spec["seed"]: case.inputs for case in exercise.cases()}
    assert exercise._reference(cases[23])[0].eq(1).all()  # a single key gets all the weight
    wide = cases[24]
    _, predictions = exercise._reference(wide)
    torch.testing.assert_close(predictions, wide["values"].mean().expand_as(predictions), rtol=0, atol=1e-3)
    narrow = cases[25]
    nearest = (narrow["queries"][:, None] - narrow["keys"][None, :]).abs().argmin(-1)
    torch.testing.assert_close(exercise._reference(narrow)[1], narrow["values"][nearest], rtol=0, atol=1e-6)
    for seed, dtype in ((26, torch.float32), (27, torch.float64)):  # far from every key: exp underflows
        far = cases[seed]
        assert far["queries"].dtype == dtype
        assert torch.isnan(nw_exp_over_sum(**far)[1]).all()
        weights, predictions = exercise._reference(far)
        assert torch.isfinite(predictions).all() and weights.max(-1).values.gt(0.999).all()


# ------------------------------------------------------------------------------------------------
# What a learner sees


def test_check_finds_the_answer_in_the_callers_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    q1 = checks.EXERCISES["ch1.q1"]
    namespace = learner_namespace("ch1.q1")
    exec(q1.solution_code, namespace)
    namespace["q1"] = q1
    exec("result = q1.check()", namespace)
    assert namespace["result"].passed
    assert "Correct" in capsys.readouterr().out  # outside IPython, display() prints the plain text


def test_check_of_an_undefined_answer_says_which_cell_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = {"q2": checks.EXERCISES["ch1.q2"]}
    exec("result = q2.check()", namespace)
    result = namespace["result"]
    assert not result.passed
    assert "`masked_softmax` is not defined yet" in result.message
    assert "# EXERCISE ch1.q2" in capsys.readouterr().out


def test_exception_is_summarised_with_the_learners_line() -> None:
    def broken(X, valid_len, value=0):
        length = X.shape[1]
        return X[:, :length] / 0 + valid_len.undefined_attribute

    result = checks.EXERCISES["ch1.q1"].evaluate(broken)
    assert not result.passed
    assert "AttributeError" in result.message
    assert "`return X[:, :length] / 0 + valid_len.undefined_attribute`" in result.message
    assert "Traceback" not in result.message


@pytest.mark.parametrize(
    "answer",
    [
        42,
        None,
        "masked_softmax",
        lambda scores, valid_lens=None: None,
        lambda scores, valid_lens=None: scores.numpy(),
    ],
)
def test_check_of_a_nonsense_answer_fails_instead_of_raising(
    answer: object, capsys: pytest.CaptureFixture[str]
) -> None:
    result = checks.EXERCISES["ch1.q2"].check(answer)
    assert result.status == checks.FAILED
    assert result.message
    capsys.readouterr()


def test_numpy_result_is_named_as_such() -> None:
    result = checks.EXERCISES["ch1.q2"].evaluate(
        lambda scores, valid_lens=None: F.softmax(scores, -1).numpy()
    )
    assert "numpy.ndarray" in result.message and "expected a torch.Tensor" in result.message


def test_missing_return_is_reported_as_none() -> None:
    result = checks.EXERCISES["ch1.q1"].evaluate(lambda X, valid_len, value=0: None)
    assert "is None, expected a torch.Tensor" in result.message, result.message


def test_the_packages_own_function_is_not_accepted_as_an_answer() -> None:
    result = checks.EXERCISES["ch1.q2"].evaluate(masked_softmax)
    assert not result.passed
    assert "package's own" in result.message


def test_a_library_not_implemented_error_is_an_error_not_a_missing_attempt() -> None:
    def uses_sparse(X, valid_len, value=0):
        return torch.empty(0).to_sparse().to_dense() @ X  # raises inside torch, not in the stub

    result = checks.EXERCISES["ch1.q1"].evaluate(uses_sparse)
    assert result.status == checks.FAILED


def test_an_unfinished_branch_is_incorrect_not_unattempted() -> None:
    def per_sequence_only(scores, valid_lens=None):
        if valid_lens is not None and valid_lens.dim() == 2:
            raise NotImplementedError
        return written_masked_softmax(scores.clone(), valid_lens)

    result = checks.EXERCISES["ch1.q2"].evaluate(per_sequence_only)
    assert result.status == checks.FAILED
    assert "a branch is still unfinished" in result.message and "(batch_size, num_queries)" in result.message


def test_result_renders_html_and_plain_text() -> None:
    result = checks.EXERCISES["ch1.q1"].evaluate(mask_inverted)
    bundle = result._rich()._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Incorrect (ch1.q1, sequence_mask):")
    assert "#c62828" in bundle["text/html"] and "<code>" in bundle["text/html"]
    assert str(result) == bundle["text/plain"]


def test_hint_and_solution_show_the_hint_and_the_model_answer(capsys: pytest.CaptureFixture[str]) -> None:
    q2 = checks.EXERCISES["ch1.q2"]
    assert q2.hint() is None and q2.solution() is None
    out = capsys.readouterr().out
    assert "Hint" in out and "def masked_softmax" in out


def test_inputs_are_not_shared_between_attempts() -> None:
    exercise = checks.EXERCISES["ch1.q1"]
    case = exercise.cases()[0]
    before = case.inputs["X"].clone()
    exercise.attempt(mask_d2l_in_place, case)
    assert torch.equal(case.inputs["X"], before)


# ------------------------------------------------------------------------------------------------
# Hidden cases


def test_hidden_seeds_and_cases_are_added_after_the_shipped_ones() -> None:
    exercise = checks.EXERCISES["ch1.q2"]
    shipped = exercise.cases()
    hidden = {"seeds": [101], "cases": [{"batch_size": 4, "num_keys": 9, "dtype": "float64", "seed": 7}]}
    cases = exercise.cases(hidden)
    assert len(cases) == 2 * len(shipped) + 1
    assert cases[-1].inputs["scores"].shape == (4, 3, 9)
    assert not torch.equal(cases[len(shipped)].inputs["scores"], shipped[0].inputs["scores"])


def test_hidden_cases_can_fail_an_answer_the_shipped_cases_pass() -> None:
    def works_for_small_keys_only(scores, valid_lens=None):
        weights = written_masked_softmax(scores, valid_lens)
        return weights if scores.shape[-1] <= 6 else weights.flip(-1)

    exercise = checks.EXERCISES["ch1.q2"]
    assert exercise.evaluate(works_for_small_keys_only).passed
    hidden = {"cases": [{"num_keys": 9, "seed": 5}]}
    assert not exercise.evaluate(works_for_small_keys_only, hidden).passed


@pytest.mark.parametrize(
    "hidden",
    [{"extra": 1}, {"seeds": ["x"]}, {"cases": [{"num_heads": 2}]}, {"cases": [{"valid_lens": [9, 9]}]}],
)
def test_malformed_hidden_inputs_are_refused(hidden: dict) -> None:
    with pytest.raises(ValueError, match="ch1.q2"):
        checks.EXERCISES["ch1.q2"].cases(hidden)


@pytest.mark.parametrize(
    ("key", "hidden", "named"),
    [
        ("ch1.q2", {"seeds": [True]}, "hidden seed for ch1.q2 must be an int, got True"),
        ("ch1.q2", {"cases": [{"seed": 1.5}]}, "seed must be an int, got 1.5"),
        ("ch1.q2", {"cases": [{"num_keys": 0}]}, "num_keys must be an int >= 1, got 0"),
        ("ch1.q1", {"cases": [{"shape": [2, 0]}]}, r"shape\[1\] must be an int >= 1, got 0"),
        ("ch1.q1", {"cases": [{"shape": [2, True]}]}, r"shape\[1\] must be an int >= 1, got True"),
    ],
)
def test_a_malformed_hidden_case_names_the_key_and_the_value(key: str, hidden: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        checks.EXERCISES[key].cases(hidden)


# ------------------------------------------------------------------------------------------------
# The notebooks


def code_cells(path: Path) -> list[str]:
    notebook = json.loads(path.read_text())
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def all_cells(path: Path) -> list[tuple[str, str]]:
    notebook = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]


EXERCISE_NOTEBOOKS = sorted((ROOT / "exercises").glob("ex[0-9]*.ipynb"))


def test_every_chapter_with_exercises_has_an_exercise_and_a_solution_notebook() -> None:
    chapters = {int(p.name[2:4]) for p in EXERCISE_NOTEBOOKS}
    assert chapters == set(checks.chapters())
    for path in EXERCISE_NOTEBOOKS:
        assert (ROOT / "solutions" / path.name).exists()


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_solution_notebook_is_the_exercise_notebook_with_the_stubs_filled_in(path: Path) -> None:
    exercise_cells, solution_cells = all_cells(path), all_cells(ROOT / "solutions" / path.name)
    assert len(exercise_cells) == len(solution_cells)
    chapter = int(path.name[2:4])
    found = []
    for (kind, stub), (_, solution) in zip(exercise_cells, solution_cells, strict=True):
        if kind == "code" and stub.startswith("# EXERCISE "):
            exercise = checks.EXERCISES[stub.splitlines()[0].removeprefix("# EXERCISE ").strip()]
            assert stub == f"{exercise.marker}\n{exercise.stub_code}".rstrip("\n")
            assert solution == f"{exercise.marker}\n{exercise.solution_code}".rstrip("\n")
            found.append(exercise)
        else:
            assert stub == solution
    assert tuple(found) == checks.chapter(chapter)


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_no_hint_spells_out_the_code(key: str) -> None:
    # A hint points at the idea; a code span with a call, an index or an operator would be the answer.
    assert not re.findall(r"`[^`]*[(\[@=][^`]*`", checks.EXERCISES[key].hint_text)


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_no_exercise_prompt_gives_the_answers_expression(path: Path) -> None:
    prompts = "\n".join(source for kind, source in all_cells(path) if kind == "markdown")
    for give_away in ("keys @ W_a.T", "Sets make it one line", "torch.bmm("):
        assert give_away not in prompts


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_set_up_cell_imports_the_graders_preamble_and_binds_every_question(path: Path) -> None:
    chapter = int(path.name[2:4])
    setup = code_cells(path)[0]
    for line in checks.PREAMBLES[chapter].splitlines():
        assert line in setup.splitlines()
    names = ", ".join(f"q{i + 1}" for i in range(len(checks.chapter(chapter))))
    assert f"{names} = checks.chapter({chapter})" in setup
    for i in range(len(checks.chapter(chapter))):
        assert f"q{i + 1}.check()" in code_cells(path)


# ------------------------------------------------------------------------------------------------
# The references of the decoder exercises are the package's decoders, taken apart


def copy_gru(cell_params: dict, rnn: nn.GRU) -> None:
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(rnn, f"{name}_l0").copy_(cell_params[name])


@pytest.mark.parametrize("encoder", [EncoderSortsByHand, EncoderOutputHalves], ids=lambda c: c.__name__)
def test_encoder_exercise_accepts_other_correct_encoders(encoder: type) -> None:
    result = checks.EXERCISES["ch3.q3"].evaluate(encoder)
    assert result.passed, result.message


def test_bug_hunt_accepts_another_correct_fix() -> None:
    assert checks.EXERCISES["ch2.q5"].evaluate(hunt_with_where).passed


def test_bug_hunt_names_each_remaining_bug_of_a_partial_fix() -> None:
    message = verdict("ch2.q5", hunt_dim_and_fill_left).message
    assert "softmax runs over the wrong axis" in message and "gets uniform weights" in message
    assert "broadcast along the wrong axis" not in message


def test_bug_hunt_stub_is_the_buggy_function_and_an_edit_that_fixes_nothing_is_not_attempted() -> None:
    exercise = checks.EXERCISES["ch2.q5"]
    assert "-1e6" in exercise.stub_code and "raise NotImplementedError" not in exercise.stub_code
    renamed = exercise.stub_code.replace("weights = ", "w = ").replace(
        "return weights @ values, weights", "return w @ values, w"
    )
    result = exercise.evaluate(define("ch2.q5", renamed))
    assert (
        result.status == checks.NOT_ATTEMPTED and "still behaves like the function as given" in result.message
    )


def test_bahdanau_exercise_agrees_with_the_packages_bahdanau_decoder() -> None:
    from attn_course.models.decoders import BahdanauDecoder
    from attn_course.models.encoders import EncoderOutput

    exercise = checks.EXERCISES["ch4.q1"]
    case = exercise.cases()[0]
    i = case.inputs
    (a, enc), h = i["attention"]["W_k.weight"].shape, i["attention"]["W_q.weight"].shape[1]
    e = i["embedded"].shape[-1]
    decoder = BahdanauDecoder(11, e, h, enc_size=enc, attn_hiddens=a).eval()
    decoder.attention.load_state_dict(i["attention"])
    copy_gru(i["rnn"], decoder.rnn)
    tgt_in = torch.randint(3, 11, i["embedded"].shape[:2])
    inputs = dict(i, embedded=decoder.embedding(tgt_in).detach())
    states, contexts, weights, _ = exercise._reference(inputs)
    _, attention = decoder(tgt_in, EncoderOutput(i["enc_outputs"], i["s_0"][None], i["valid_lens"]))
    torch.testing.assert_close(weights, attention)


def test_luong_step_exercise_agrees_with_the_packages_luong_decoder_step() -> None:
    from attn_course.models.decoders import DecoderState, LuongDecoder

    exercise = checks.EXERCISES["ch5.q2"]
    i = exercise.cases()[0].inputs
    h, enc = i["W_a"].shape
    e = i["y_emb"].shape[-1]
    decoder = LuongDecoder(11, e, h, enc_size=enc, score="general", input_feeding=True).eval()
    decoder.attention.load_state_dict({"W_a.weight": i["W_a"]})
    copy_gru(i["rnn"], decoder.rnn)
    with torch.no_grad():
        decoder.W_c.weight.copy_(i["W_c"])
    y_prev = torch.randint(3, 11, (i["y_emb"].shape[0],))
    inputs = dict(i, y_emb=decoder.embedding(y_prev).detach())
    h_t, attentional, weights = exercise._reference(inputs)
    memory = decoder.attention.prepare(i["enc_outputs"], i["enc_outputs"], i["valid_lens"])
    state = DecoderState(i["h_prev"][None], memory, i["feed"], 0, i["valid_lens"])
    _, new_state, step_weights = decoder.step(y_prev, state)
    torch.testing.assert_close(h_t, new_state.hidden[-1])
    torch.testing.assert_close(attentional, new_state.feed)
    torch.testing.assert_close(weights, step_weights)


def test_local_p_exercise_agrees_with_the_packages_local_p_alignment() -> None:
    from attn_course.models.decoders import LuongDecoder

    decoder = LuongDecoder(11, 4, 6, enc_size=6, score="general", attention="local-p", window=2).eval()
    keys, lens = torch.randn(3, 9, 6), torch.tensor([9, 5, 7])
    queries = torch.randn(3, 4, 6)
    memory = decoder.attention.prepare(keys, keys, lens)
    inputs = {
        "scores": decoder.attention.scores(queries, memory),
        "centres": decoder.centres(queries, 0, lens),
        "window": 2,
        "valid_lens": lens,
    }
    expected = decoder.align(queries, memory, 0)[1]
    torch.testing.assert_close(checks.EXERCISES["ch5.q3"]._reference(inputs), expected)


def test_local_p_attention_accepts_a_loop_over_sentences() -> None:
    assert checks.EXERCISES["ch5.q4"].evaluate(local_p_one_sentence_at_a_time).passed


def test_local_p_attention_exercise_agrees_with_the_packages_local_p_decoder() -> None:
    from attn_course.models.decoders import LuongDecoder

    decoder = LuongDecoder(11, 4, 6, enc_size=6, score="general", attention="local-p", window=2).eval()
    keys, lens = torch.randn(3, 9, 6), torch.tensor([9, 5, 7])
    queries = torch.randn(3, 4, 6)
    memory = decoder.attention.prepare(keys, keys, lens)
    inputs = {
        "queries": queries,
        "scores": decoder.attention.scores(queries, memory),
        "W_p": decoder.W_p.weight.detach(),
        "v_p": decoder.v_p.weight.detach(),
        "window": 2,
        "valid_lens": lens,
    }
    with torch.no_grad():
        centres, weights = checks.EXERCISES["ch5.q4"]._reference(inputs)
        torch.testing.assert_close(centres, decoder.centres(queries, 0, lens))
        torch.testing.assert_close(weights, decoder.align(queries, memory, 0)[1])


def test_scripted_model_decodes_like_a_seq2seq_under_the_packages_greedy_search() -> None:
    exercise = checks.EXERCISES["ch6.q1"]
    lengths = {len(tokens) for case in exercise.cases() for tokens in exercise._reference(case.inputs)[0]}
    assert 0 in lengths and 8 in lengths and len(lengths) >= 6  # empty, cut by max_len, and in between


def test_greedy_check_counts_the_rows_fed_at_each_step() -> None:
    # 4 sentences ending after 6, 5, 6 and 3 steps: the decoder sees 4 rows 3 times, then 3, 3, 2.
    case = next(c for c in checks.EXERCISES["ch6.q1"].cases() if c.spec["seed"] == 135)
    assert checks.EXERCISES["ch6.q1"]._reference(case.inputs)[1] == [4, 4, 4, 3, 3, 2]


def test_greedy_that_drops_rows_with_boolean_masks_passes() -> None:
    result = checks.EXERCISES["ch6.q1"].evaluate(greedy_masks_rows)
    assert result.passed, result.message


def test_beam_search_one_sentence_at_a_time_passes() -> None:
    result = checks.EXERCISES["ch6.q3"].evaluate(beam_search_sentence_by_sentence)
    assert result.passed, result.message


def test_beam_search_variants_without_a_bug_are_the_packages_beam_search() -> None:
    from attn_course.checks.ch6_decoding import _beam_search_variant

    exercise = checks.EXERCISES["ch6.q3"]
    for case in exercise.cases():
        assert _beam_search_variant("")(case.inputs) == exercise._reference(case.inputs)


def test_beam_step_of_size_one_is_the_greedy_choice() -> None:
    exercise = checks.EXERCISES["ch6.q2"]
    log_probs = F.log_softmax(torch.randn(3, 1, 7, dtype=torch.float64), -1)
    scores, beams, tokens = exercise._reference(
        {"beam_scores": torch.zeros(3, 1, dtype=torch.float64), "log_probs": log_probs, "beam_size": 1}
    )
    assert torch.equal(tokens[:, 0], log_probs[:, 0].argmax(-1)) and not beams.any()


@pytest.mark.parametrize("key", list(checks.EXERCISES))
def test_solution_passes_the_hidden_template_cases_too(key: str) -> None:
    exercise = checks.EXERCISES[key]
    hidden = hidden_template([int(key[2 : key.index(".")])])[key]
    result = exercise.evaluate(define(key, exercise.solution_code), hidden)
    assert result.passed, result.message
    assert result.cases_total == 3 * len(exercise.specs) + 1


# ------------------------------------------------------------------------------------------------
# How a check chooses a diagnosis, and delegation to the course's own functions


def doubling(mistakes: list[checks.Mistake], error_hints: tuple[checks.ErrorHint, ...] = ()) -> object:
    """A toy exercise: return 2 x, on x = 1, 2 and 3."""
    return checks.Exercise(
        "toy.q1", "double", "double", solution="def double(x):\n    return 2 * x\n", hint="", covers="",
        defaults={"x": 1}, specs=[{"x": 1}, {"x": 2}, {"x": 3}],
        build=lambda spec: checks.Case(f"x = {spec['x']}", {"x": spec["x"]}, spec),
        call=lambda answer, i: answer(i["x"]), reference=lambda i: 2 * i["x"],
        mistakes=mistakes, error_hints=error_hints,
    )


TRIPLES = checks.Mistake("You tripled x.", lambda i: 3 * i["x"])


def test_a_mistake_is_named_when_every_failing_case_agrees_on_it() -> None:
    result = doubling([TRIPLES]).evaluate(lambda x: 3 * x)
    assert result.message.startswith("You tripled x.\n")


def test_no_mistake_is_named_when_a_failing_case_disagrees() -> None:
    result = doubling([TRIPLES]).evaluate(lambda x: 3 * x if x == 1 else 5 * x)
    assert not result.passed and "tripled" not in result.message
    assert result.message.startswith("The result is 3, expected 2.")


def test_a_failing_case_the_mistake_would_get_right_speaks_against_it() -> None:
    only_odd = checks.Mistake("You tripled odd x.", lambda i: 3 * i["x"] if i["x"] % 2 else 2 * i["x"])
    result = doubling([only_odd]).evaluate(lambda x: 3 * x)
    assert "odd" not in result.message


def test_a_case_that_raised_counts_neither_for_nor_against_a_mistake() -> None:
    def triples_or_raises(x):
        if x == 2:
            raise ValueError("no")
        return 3 * x

    assert doubling([TRIPLES]).evaluate(triples_or_raises).message.startswith("You tripled x.\n")


def test_the_fallback_says_which_outputs_differ() -> None:
    exercise = checks.EXERCISES["ch5.q4"]
    solve = define("ch5.q4", exercise.solution_code)

    def wrong_weights(*args):
        centres, weights = solve(*args)
        return centres, weights.flip(-1)

    message = exercise.evaluate(wrong_weights).message
    assert "What differs: the weights in" in message and "the centres p_t agree" in message


def cell_function(source: str, filename: str) -> object:
    """The function `source` defines, compiled as a notebook cell is (its lines in linecache)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["double"]


def test_an_error_hint_can_require_the_learners_line() -> None:
    exercise = doubling([], (checks.ErrorHint("ValueError", "Mind the keepdim.", line=r"keepdim"),))
    elsewhere = cell_function("def double(x):\n    raise ValueError(x)\n", "<cell 1>")
    on_the_line = cell_function("def double(x):\n    raise ValueError(x)  # keepdim\n", "<cell 2>")
    assert exercise.evaluate(elsewhere).message.startswith("Your code raised ValueError")
    assert exercise.evaluate(on_the_line).message.startswith("Mind the keepdim.")


def test_an_answer_that_calls_the_course_function_it_re_implements_fails() -> None:
    def nadaraya_watson(queries, keys, values, sigma):
        from attn_course.attention import lookup as mine

        return mine.nadaraya_watson(queries, keys, values, sigma)

    result = checks.EXERCISES["ch1.q3"].evaluate(nadaraya_watson)
    assert not result.passed
    assert "calls the course's own `attn_course.attention.lookup.nadaraya_watson`" in result.message


def test_an_answer_may_call_what_its_prompt_allows_but_not_what_it_forbids() -> None:
    allowed = checks.EXERCISES["ch2.q1"]  # its model answer calls masked_softmax
    assert allowed.evaluate(define("ch2.q1", allowed.solution_code)).passed
    forbidden = learner("ch2.q5", "rewritten with the course's masked_softmax")
    result = checks.EXERCISES["ch2.q5"].evaluate(forbidden)
    assert "calls the course's own `attn_course.attention.masking.masked_softmax`" in result.message


def test_a_function_switched_off_while_grading_reads_as_delegation() -> None:
    exercise = checks.EXERCISES["ch1.q3"]
    cases = exercise.cases()
    message = (
        "attn_course.attention.lookup.nadaraya_watson is switched off while grading: ch1.q3 asks you to write "
        "`nadaraya_watson` yourself"
    )
    error = {"type": "RuntimeError", "where": "line 2", "message": message}
    result = exercise.judge(cases, [{"status": "error", "error": error}] * len(cases))
    assert "calls the course's own `attn_course.attention.lookup.nadaraya_watson`" in result.message


def test_the_call_watch_restores_the_profiler_it_found() -> None:
    before = sys.getprofile()
    checks.EXERCISES["ch1.q3"].evaluate(learner("ch1.q3", "calls the course's nadaraya_watson"))
    assert sys.getprofile() is before
