"""Chapters 2, 4, 5 and 6's checks: wrong answers written as learners write them are told their own mistake,
not a neighbour's whose output agrees with theirs on the cases (each diagnosis below was once wrong); and
the checks' mistakes are the one model answer with a few lines changed, so that no check holds a second
copy of the algorithm."""

from __future__ import annotations

import difflib

import pytest
from learner_answers import ANSWERS, Answer, beam, define

import attn_course_exercises as checks

#: (key, label, source, what the verdict must say, what it must not say: the diagnosis it used to give).
WRONG = [
    (
        "ch6.q3",
        "length penalty L * alpha",
        beam("s / step**alpha", "s / (step * alpha)").replace(
            "scores[b, k].item() / max_len**alpha", "scores[b, k].item() / (max_len * alpha)"
        ),
        "The length penalty is a power, L^alpha",
        "left out the <eos>",
    ),
    (
        "ch6.q3",
        "state reordered by the beam within its sentence",
        beam(
            "state = state.index_select((torch.arange(B)[:, None] * K + new_beams).view(-1))",
            "state = state.index_select(new_beams.view(-1))",
        ),
        "add the sentence's offset",
        "",
    ),
    (
        "ch6.q3",
        "finished hypotheses keep their <eos>",
        beam(
            "finished[b].append((s / step**alpha, history[b, k].tolist()))",
            "finished[b].append((s / step**alpha, history[b, k].tolist() + [eos]))",
        ),
        "The finished hypotheses kept their <eos>",
        "",
    ),
    (
        "ch2.q5",
        "exp by hand, an empty row divided by its zero sum",
        """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = (torch.arange(keys.shape[1]) < valid_lens[:, None])[:, None, :]
    scores = scores.masked_fill(~real, torch.finfo(scores.dtype).min)
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values) * real
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ values, weights
""",
        "a row of zeros divided by its zero sum",
        "NaN: filled with -inf",
    ),
    (
        "ch2.q5",
        "softmax over every key, renormalised over the real ones",
        """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = (torch.arange(keys.shape[1]) < valid_lens[:, None])[:, None, :]
    weights = F.softmax(scores, dim=-1) * real
    weights = weights / weights.sum(-1, keepdim=True)
    return weights @ values, weights
""",
        "its weights are 0 / 0",
        "NaN: filled with -inf",
    ),
    (
        "ch4.q1",
        "s_0 kept among the states",
        """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    states, contexts, weights = [s_0], [], []
    for t in range(embedded.shape[1]):
        context, weight = attention.attend(states[-1][:, None, :], memory)
        states.append(rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), states[-1]))
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
        "The states hold one too many: s_0 is the state before the first step",
        "an axis dropped",
    ),
    (
        "ch4.q1",
        "one step short",
        """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1] - 1):
        context, weight = attention.attend(s[:, None, :], memory)
        s = rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), s)
        states.append(s)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
        "One step short",
        "an axis dropped",
    ),
    (
        "ch4.q1",
        "lists returned",
        """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        context, weight = attention.attend(s[:, None, :], memory)
        s = rnn(torch.cat([embedded[:, t], context[:, 0]], dim=-1), s)
        states.append(s)
        contexts.append(context[:, 0])
        weights.append(weight[:, 0])
    return states, contexts, weights
""",
        "You returned Python lists",
        "an axis dropped",
    ),
    (
        "ch4.q1",
        "query axis in front",
        """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        context, weight = attention.attend(s[None], memory)
        s = rnn(torch.cat([embedded[:, t], context[0]], dim=-1), s)
        states.append(s)
        contexts.append(context[0])
        weights.append(weight[0])
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
        "give the state a query axis, in the middle",
        "",
    ),
    (
        "ch2.q3",
        "W_a transposed on the queries' side",
        """
def general_scores(queries, keys, W_a):
    return queries @ W_a.T @ keys.transpose(1, 2)
""",
        "W_a is applied the wrong way round",
        "W_a is used untransposed",
    ),
    (
        "ch2.q4",
        "W_a's halves swapped",
        """
def concat_scores(queries, keys, W_a, v_a):
    ks = keys.shape[-1]
    h = torch.tanh((queries @ W_a[:, ks:].T)[:, :, None] + (keys @ W_a[:, :ks].T)[:, None])
    return (h @ v_a.T).squeeze(-1)
""",
        "gave the query W_a's key columns",
        "You built [k; q].",
    ),
    (
        "ch2.q1",
        "scaled after the softmax",
        """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2))
    weights = masked_softmax(scores, valid_lens) / math.sqrt(queries.shape[-1])
    return torch.bmm(weights, values), weights
""",
        "divided by sqrt(d) after the softmax",
        "",
    ),
    (
        "ch6.q1",
        "tokens appended by row, not by sentence",
        """
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos, dtype=torch.long)
    tokens = [[] for _ in range(src.shape[0])]
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        for j, tok in enumerate(y.tolist()):
            if tok != eos:
                tokens[j].append(tok)
        keep = (y != eos).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        y, state = y[keep], state.index_select(keep)
    return tokens
""",
        "row j is no longer sentence j",
        "",
    ),
    (
        "ch6.q1",
        "argmax without dim",
        """
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos, dtype=torch.long)
    tokens = [[] for _ in range(src.shape[0])]
    rows = torch.arange(src.shape[0])
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax()
        for i, tok in zip(rows.tolist(), y.reshape(-1).tolist()):
            if tok != eos:
                tokens[i].append(tok)
        keep = (y.reshape(-1) != eos).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        rows, y, state = rows[keep], y.reshape(-1)[keep], state.index_select(keep)
    return tokens
""",
        "the argmax over the vocabulary",
        "",
    ),
]


@pytest.mark.parametrize(
    ("key", "label", "source", "says", "not_says"), WRONG, ids=[f"{key}:{label}" for key, label, *_ in WRONG]
)
def test_wrong_answer_is_told_its_own_mistake(
    key: str, label: str, source: str, says: str, not_says: str
) -> None:
    result = checks.EXERCISES[key].evaluate(define(Answer(key, label, (says,), source)))
    assert result.status == checks.FAILED
    assert says in result.message, result.message
    assert not not_says or not_says not in result.message, result.message
    assert "Traceback" not in result.message


def test_a_search_cut_by_max_len_is_not_told_its_tokens_are_right() -> None:
    # Finished rows kept in the batch and one step short: the tokens of a sentence cut by max_len are wrong.
    (answer,) = [a for a in ANSWERS if a.key == "ch6.q1" and a.label == "max_len - 1 steps"]
    result = checks.EXERCISES["ch6.q1"].evaluate(define(answer))
    assert result.status == checks.FAILED and "tokens are right" not in result.message, result.message


#: The mistakes of these chapters that are a different algorithm, not an edit of the model answer.
WRITTEN_WHOLE = {"attention_d2l_masking", "beam_best_token_per_beam", "beam_search_cut_at_eos"}
CHAPTERS = ("ch2.", "ch4.", "ch5.", "ch6.")
EDITS = [
    (key, mistake)
    for key, exercise in checks.EXERCISES.items()
    if key.startswith(CHAPTERS)
    for mistake in exercise.mistakes
    if mistake.wrong is not None and mistake.wrong.__name__ not in WRITTEN_WHOLE
]


@pytest.mark.parametrize(("key", "mistake"), EDITS, ids=[f"{k}-{m.wrong.__name__}" for k, m in EDITS])
def test_a_mistake_is_the_model_answer_with_a_few_lines_changed(key: str, mistake: checks.Mistake) -> None:
    solution = checks.EXERCISES[key].solution_code.splitlines()
    code = mistake.code
    assert code is not None, mistake.wrong.__name__
    changed = [
        line
        for line in difflib.unified_diff(solution, code.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    # ch2.q5's planted bugs are edits of the fixed function without its "# fix" comments (3 lines more).
    assert 0 < len(changed) <= (14 if key == "ch2.q5" else 8), "\n".join(changed)


def test_every_exercise_of_these_chapters_gives_three_hints() -> None:
    keys = [key for key in checks.EXERCISES if key.startswith(CHAPTERS)]
    assert len(keys) == 14
    assert all(len(checks.EXERCISES[key].hints) == 3 for key in keys)
    assert all(checks.EXERCISES[key].hints[0].endswith("?") for key in keys)
