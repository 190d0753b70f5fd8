"""The searches one step at a time: greedy_steps and beam_steps are what greedy_decode and beam_search run."""

from __future__ import annotations

import pytest
import torch

from attn_course.models.decoding import (
    beam_candidates,
    beam_search,
    beam_steps,
    best_candidate,
    greedy_decode,
    greedy_steps,
)
from attn_course.models.seq2seq import build_model

BOS, EOS = 1, 2


def models():
    sizes = dict(embed_size=6, encoder_hiddens=8)
    yield build_model("plain", 12, 9, **sizes)
    yield build_model("bahdanau", 12, 9, **sizes)
    yield build_model("luong", 12, 9, **sizes, score="general", attention="local-p", window=2)


def batch(lengths=(5, 2, 4, 1)):
    lengths = torch.tensor(lengths)
    src = torch.randint(4, 12, (len(lengths), int(lengths.max())))
    src[torch.arange(src.shape[1])[None] >= lengths[:, None]] = 0
    return src, lengths


@pytest.mark.parametrize("model", list(models()), ids=["plain", "bahdanau", "luong local-p"])
def test_greedy_steps_records_are_greedy_decodes_tokens_attention_and_stops(model):
    src, lens = batch()
    hyps = greedy_decode(model, src, lens, bos=BOS, eos=EOS, max_len=6)
    tokens = {i: [] for i in range(len(hyps))}
    rows = {i: [] for i in range(len(hyps))}
    stopped = {}
    for step in greedy_steps(model, src, lens, bos=BOS, eos=EOS, max_len=6):
        assert not set(step.sentences.tolist()) & set(stopped)            # a stopped sentence has left
        for r, i in enumerate(step.sentences.tolist()):
            tokens[i].append(int(step.tokens[r]))
            if step.weights is not None:
                rows[i].append(step.weights[r, : int(lens[i])])
            if step.done[r]:
                stopped[i] = step.t
    assert sorted(stopped) == list(range(len(hyps)))
    for i, hyp in enumerate(hyps):
        assert tokens[i] == hyp.tokens + [EOS] * hyp.finished
        if hyp.attention is not None:
            assert torch.equal(torch.stack(rows[i]), hyp.attention)


def test_greedy_step_feeds_the_previous_choice_and_keeps_states_before_and_after():
    model = build_model("bahdanau", 12, 9, embed_size=6, encoder_hiddens=8)
    src, lens = batch((3,))
    steps = list(greedy_steps(model, src, lens, bos=BOS, eos=EOS, max_len=4))
    assert int(steps[0].fed[0]) == BOS
    for before, after in zip(steps, steps[1:], strict=False):
        assert torch.equal(after.fed, before.tokens) and after.state is before.next_state
        assert before.state.step == before.t and before.next_state.step == before.t + 1


@pytest.mark.parametrize("beam_size", [1, 2, 3])
def test_beam_steps_set_aside_the_candidates_beam_search_chooses_from(beam_size):
    model = build_model("bahdanau", 12, 9, embed_size=6, encoder_hiddens=8)
    src, lens = batch()
    hyps = beam_search(model, src, lens, bos=BOS, eos=EOS, max_len=6, beam_size=beam_size)
    finished = {i: [] for i in range(len(hyps))}
    for step in beam_steps(model, src, lens, bos=BOS, eos=EOS, max_len=6, beam_size=beam_size):
        n = len(step.sentences)
        assert step.prefixes.shape == (n * beam_size, step.t) and step.kept.shape == (n, beam_size)
        assert step.candidate_scores.shape[1] == 2 * beam_size
        assert not step.finishing[:, beam_size:].any()                  # an <eos> finishes among the K best
        assert torch.equal(step.finishing, (step.candidate_tokens == EOS) & step.finishing)
        assert not (step.candidate_tokens.gather(1, step.kept) == EOS).any()
        for sentence, candidate in step.finished:
            finished[sentence].append(candidate)
    for i, hyp in enumerate(hyps):
        best = best_candidate(finished[i])
        assert best.tokens == hyp.tokens and best.score == hyp.score and best.finished == hyp.finished


def test_beam_steps_kept_continuations_are_the_next_steps_prefixes():
    model = build_model("luong", 12, 9, embed_size=6, encoder_hiddens=8, score="dot", input_feeding=False)
    src, lens = batch((4,))
    steps = list(beam_steps(model, src, lens, bos=BOS, eos=EOS, max_len=5, beam_size=3))
    for now, following in zip(steps, steps[1:], strict=False):
        kept = now.kept[0]
        extended = now.prefixes[now.candidate_beams[0, kept]]
        prefixes = torch.cat([extended, now.candidate_tokens[0, kept, None]], 1)
        assert torch.equal(prefixes, following.prefixes)
        assert torch.equal(now.candidate_scores[0, kept], following.prefix_scores[0])


def test_the_step_generators_check_their_arguments_before_the_first_step():
    model = build_model("bahdanau", 12, 9, embed_size=6, encoder_hiddens=8)
    src, lens = batch()
    with pytest.raises(ValueError, match="bos must be an int in"):
        greedy_steps(model, src, lens, bos=-1, eos=EOS)                    # raised here, not at next()
    with pytest.raises(ValueError, match="beam_size must be an int >= 1, got 0"):
        beam_steps(model, src, lens, bos=BOS, eos=EOS, beam_size=0)
    with pytest.raises(ValueError, match="length_norm='mean'"):
        beam_steps(model, src, lens, bos=BOS, eos=EOS, length_norm="mean")


@pytest.mark.parametrize("search", [greedy_steps, beam_steps])
def test_the_model_is_in_eval_mode_while_stepping_and_back_in_training_after(search):
    model = build_model("bahdanau", 12, 9, embed_size=6, encoder_hiddens=8, dropout=0.5).train()
    src, lens = batch()
    steps = search(model, src, lens, bos=BOS, eos=EOS, max_len=3)
    assert model.training                                                # nothing runs before next()
    first = next(steps)
    scores = first.log_probs if search is greedy_steps else first.candidate_scores
    assert not model.training and not scores.requires_grad
    steps.close()
    assert model.training
    list(search(model, src, lens, bos=BOS, eos=EOS, max_len=3))
    assert model.training


@pytest.mark.parametrize("seed", range(5))
def test_beam_candidates_are_the_best_continuations_over_every_beam_and_token(seed):
    gen = torch.Generator().manual_seed(seed)
    B, K, V = 3, 4, 6
    scores = -torch.rand(B, K, generator=gen, dtype=torch.float64) * 5
    scores[0, 1:] = -torch.inf                                          # a first step: one live beam
    log_probs = torch.log_softmax(torch.randn(B, K, V, generator=gen, dtype=torch.float64), -1)
    top, beams, tokens = beam_candidates(scores, log_probs, 2 * K)
    for b in range(B):
        every = sorted(((scores[b, k] + log_probs[b, k, v]).item(), k, v) for k in range(K) for v in range(V))
        best = every[::-1][: 2 * K]
        assert top[b].tolist() == [s for s, _, _ in best]
        found = [(s, int(k), int(v)) for s, k, v in zip(top[b].tolist(), beams[b], tokens[b], strict=True)]
        assert [f for f in found if f[0] > -torch.inf] == [c for c in best if c[0] > -torch.inf]  # ties: -inf


def test_beam_candidates_name_the_argument_and_the_shape_they_expected():
    scores, log_probs = torch.zeros(2, 3), torch.zeros(2, 3, 5)
    with pytest.raises(ValueError, match=r"log_probs has shape \(2, 2, 5\), expected \(batch_size, beam"):
        beam_candidates(scores, log_probs[:, :2], 4)
    with pytest.raises(ValueError, match=r"beam_scores has shape \(3,\)"):
        beam_candidates(scores[0], log_probs, 4)
    with pytest.raises(ValueError, match=r"num must be an int in \[1, beam_size \* vocab_size\] = \[1, 15"):
        beam_candidates(scores, log_probs, 16)
    with pytest.raises(ValueError, match="beam_scores must be a floating-point tensor"):
        beam_candidates(scores.long(), log_probs, 4)
