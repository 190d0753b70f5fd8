"""What a check says when no named mistake explains an answer: the kind of difference
(`attn_course_exercises.describe.describe_difference`), not only where the output differs.

Each kind is tested with a wrong answer written as a learner writes it, submitted to its exercise: the
rejection must name no mistake (none of the exercise's hints starts it) and must say the kind. The
describer is also tested on its own, on outputs no exercise of the course produces (inf, a list with one
item too many, two axes swapped), and the grader's feedback on a hidden case keeps none of it."""

from __future__ import annotations

import pytest
import torch

import attn_course_exercises as checks
from attn_course_exercises.describe import describe_difference
from attn_course_tools.grading import judging


def learner(key: str, source: str) -> object:
    """The function or class `source` defines, after its chapter's set-up imports (as the grader runs it)."""
    namespace: dict = {"__name__": "__main__"}
    exec(checks.PREAMBLES[int(key[2 : key.index(".")])], namespace)
    exec(source, namespace)
    return namespace[checks.EXERCISES[key].name]


def diagnosis(key: str, source: str) -> str:
    """The check's words on `source` before its "Failing case" line, asserting the answer is rejected."""
    result = checks.EXERCISES[key].evaluate(learner(key, source))
    assert result.status == checks.FAILED, result.message
    return result.message.split("\nFailing case:")[0]


def named(key: str, text: str) -> bool:
    """Whether `text` opens with one of the exercise's named mistakes or known errors."""
    exercise = checks.EXERCISES[key]
    hints = [m.hint for m in exercise.mistakes] + [e.hint for e in exercise.error_hints]
    return any(text.startswith(hint) for hint in hints)


# ------------------------------------------------------------------------------------------------
# Each kind, on a learner's wrong answer that no named mistake covers

SOFTMAX_OVER_DIM_0 = """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=0)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = torch.arange(scores.shape[-1]) < lens
    filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return F.softmax(filled, dim=0) * keep
"""

SLICE_TO_MINUS_ONE = """
def sequence_mask(X, valid_len, value=0):
    Y = X.clone()
    for i in range(X.shape[0]):
        Y[i, valid_len[i]:-1] = value
    return Y
"""

LOOP_MISSES_LAST_ROW = """
def sequence_mask(X, valid_len, value=0):
    Y = X.clone()
    for i in range(X.shape[0] - 1):
        Y[i, int(valid_len[i]):] = value
    return Y
"""

FINAL_STATE_MINUS_TWO = """
def final_state(outputs, valid_lens):
    rows = torch.arange(outputs.shape[0])
    return outputs[rows, valid_lens - 2]
"""

FLOAT_MASK_ON_INTEGERS = """
def sequence_mask(X, valid_len, value=0):
    keep = (torch.arange(X.shape[1])[None, :] < valid_len[:, None]).float()
    keep = keep.reshape(*keep.shape, *([1] * (X.dim() - 2)))
    return X * keep + value * (1 - keep)
"""

STATES_STACKED_AS_FLOATS = """
def final_state(outputs, valid_lens):
    return torch.stack([outputs[i, int(valid_lens[i]) - 1].float() for i in range(outputs.shape[0])])
"""

IN_BFLOAT16 = """
def masked_softmax(scores, valid_lens=None):
    work = scores.to(torch.bfloat16)  # half the memory
    if valid_lens is not None:
        lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        keep = torch.arange(scores.shape[-1]) < lens
        work = work.float().masked_fill(~keep, -1e9)
        return (F.softmax(work, dim=-1) * keep).to(torch.bfloat16).to(scores.dtype)
    return F.softmax(work.float(), dim=-1).to(torch.bfloat16).to(scores.dtype)
"""

EXP_OVER_SUM = """
def masked_softmax(scores, valid_lens=None):
    e = torch.exp(scores)
    if valid_lens is not None:
        lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        e = e * (torch.arange(scores.shape[-1]) < lens)
    return e / e.sum(dim=-1, keepdim=True)
"""

WEIGHTS_QUERY_MAJOR = """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    b, n, d = queries.shape
    h = d // num_heads
    def split(X):
        X = X.reshape(X.shape[0], X.shape[1], num_heads, h).transpose(1, 2)
        return X.reshape(-1, X.shape[2], h)
    q, k, v = split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)
    if valid_lens is not None:
        valid_lens = valid_lens.repeat_interleave(num_heads, dim=0)
    w = masked_softmax(q @ k.transpose(1, 2) / math.sqrt(h), valid_lens)
    context = (w @ v).reshape(b, num_heads, n, h).transpose(1, 2).reshape(b, n, d)
    return context @ W_o.T, w.reshape(b, num_heads, n, -1).transpose(1, 2)  # (batch, query, head, key)
"""

LOSS_OVER_BATCH_TOO = """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    return (losses * real).sum() / real.sum() / tgt_out.shape[0]  # the mean over the batch
"""

LOG_LIKELIHOOD = """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    logp = F.log_softmax(logits, dim=-1).gather(2, tgt_out[..., None])[..., 0]
    real = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    return (logp * real).sum() / real.sum()
"""

SCALED_BY_D_MASKED_BY_HAND = """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    b, nq, d = queries.shape
    dh = d // num_heads
    def split(X):
        return X.reshape(X.shape[0], X.shape[1], num_heads, dh).transpose(1, 2)
    q, k, v = split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    if valid_lens is not None:
        lens = valid_lens[:, None, None, None] if valid_lens.dim() == 1 else valid_lens[:, None, :, None]
        scores = scores.masked_fill(torch.arange(scores.shape[-1]) >= lens, -1e9)
    w = torch.softmax(scores, dim=-1)
    out = (w @ v).transpose(1, 2).reshape(b, nq, d) @ W_o.T
    return out, w
"""

STATES_DETACHED = """
def final_state(outputs, valid_lens):
    rows = torch.arange(outputs.shape[0])
    return outputs.detach()[rows, valid_lens - 1]
"""

#: (kind, exercise, the learner's answer, what the rejection must say)
KINDS = [
    ("rows sum along the wrong axis", "ch1.q2", SOFTMAX_OVER_DIM_0, ["rows do not sum to 1", "dim=0"]),
    (
        "padding let through, at the last position",
        "ch1.q1",
        SLICE_TO_MINUS_ONE,
        ["non-zero at 2 positions where the reference is 0", "the last position along the last axis"],
    ),
    ("only the last item of the batch", "ch1.q1", LOOP_MISSES_LAST_ROW, ["in the last item along axis 0"]),
    (
        "off by one position",
        "ch3.q2",
        FINAL_STATE_MINUS_TWO,
        ["shifted one position earlier", "along axis 1"],
    ),
    ("a dtype the input does not have", "ch1.q1", FLOAT_MASK_ON_INTEGERS, ["Only the dtype is wrong", "`X`"]),
    ("a narrower dtype", "ch3.q2", STATES_STACKED_AS_FLOATS, ["the dtype of `outputs`", "narrower"]),
    ("a lower precision", "ch1.q2", IN_BFLOAT16, ["rounding error of bfloat16"]),
    (
        "NaN where the reference is finite",
        "ch1.q2",
        EXP_OVER_SUM,
        ["NaN at", "rows that the reference leaves"],
    ),
    (
        "two axes swapped",
        "ch11.q2",
        WEIGHTS_QUERY_MAJOR,
        ["axes 1 and 2 swapped", "values are the reference's"],
    ),
    ("a constant factor", "ch3.q1", LOSS_OVER_BATCH_TOO, ["times 0.3333 (= 1/3)", "constant factor"]),
    ("the sign flipped", "ch3.q1", LOG_LIKELIHOOD, ["sign flipped"]),
    ("scores scaled by a constant", "ch11.q2", SCALED_BY_D_MASKED_BY_HAND, ["flatter", "(= 1/√2)"]),
    ("no gradient at all", "ch3.q2", STATES_DETACHED, ["0 everywhere", "`.detach()`"]),
]


@pytest.mark.parametrize(("kind", "key", "source", "says"), KINDS, ids=[k[0] for k in KINDS])
def test_a_difference_no_mistake_explains_is_told_by_its_kind(
    kind: str, key: str, source: str, says: list[str]
) -> None:
    text = diagnosis(key, source)
    assert not named(key, text), text
    for words in says:
        assert words in text, text


def test_an_input_changed_in_place_is_told_beside_a_named_mistake() -> None:
    source = """
def sequence_mask(X, valid_len, value=0):
    for i in range(X.shape[0]):
        X[i, valid_len[i] + 1:] = value
    return X
"""
    text = diagnosis("ch1.q1", source)
    assert named("ch1.q1", text) and text.startswith("Off by one"), text
    assert "also changed its input `X` in place" in text


def test_an_input_changed_in_place_is_told_beside_a_kind() -> None:
    source = """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is not None:
        lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        scores.masked_fill_(torch.arange(scores.shape[-1]) >= lens, -1e4)
    return F.softmax(scores, dim=1)
"""
    text = diagnosis("ch1.q2", source)  # wrong on every case, and in place where valid_lens is given
    assert "rows do not sum to 1" in text and "dim=1" in text
    assert "also changed its input `scores` in place" in text


# ------------------------------------------------------------------------------------------------
# The describer on its own


def test_inf_where_the_reference_is_finite_is_named_with_its_cause() -> None:
    expected = torch.tensor([[0.5, 0.5], [0.25, 0.75]])
    got = expected.clone()
    got[1, 1] = torch.inf
    text = describe_difference(expected, got, "the weights")
    assert text is not None and "inf at 1 position where the reference is finite" in text
    assert "overflowed" in text


def test_a_list_with_an_item_too_many_at_the_start() -> None:
    text = describe_difference([[5, 6, 7]], [[1, 5, 6, 7]], "the token lists")
    assert text == (
        "item 0 of the token lists is the reference with one item too many at the start (the rest is right)."
    )


def test_a_transposed_result_is_told_as_two_axes_swapped() -> None:
    expected = torch.arange(6.0).reshape(2, 3)
    text = describe_difference(expected, expected.T.contiguous(), "the weights")
    assert text is not None and "axes 0 and 1 swapped, and its values are the reference's" in text


def test_a_mask_without_its_diagonal_is_the_triangle_shifted_by_one() -> None:
    expected = torch.ones(4, 4, dtype=torch.bool).tril()
    text = describe_difference(expected, expected & ~torch.eye(4, dtype=torch.bool), "the mask")
    assert text is not None and "shifted one position later" in text and "along axis 0" in text


def test_scores_wrong_only_on_the_diagonal() -> None:
    expected = torch.tensor([[0.3, -1.2, 0.8], [1.1, 0.4, -0.5], [-0.9, 0.2, 1.6]])
    text = describe_difference(
        expected, expected + torch.eye(3) * torch.tensor([0.7, -0.2, 0.3]), "the scores"
    )
    assert text == "the scores differ from the reference only on the diagonal (i == j of the last two axes)."


def test_a_right_output_has_no_kind_and_an_unrelated_one_none_of_the_kinds() -> None:
    expected = torch.tensor([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    assert describe_difference(expected, expected.clone()) is None
    noise = torch.tensor([[0.9, -0.3, 0.5], [0.4, 0.1, -0.8]])
    assert describe_difference(noise, torch.tensor([[0.1, 0.7, -0.2], [-0.6, 0.3, 0.2]])) is None


def test_a_ratio_of_two_counts_is_not_called_a_constant_factor() -> None:
    assert describe_difference(3, 4, "the count") is None
    assert "times 0.5 (= 1/2)" in describe_difference(0.8, 0.4, "the loss")


# ------------------------------------------------------------------------------------------------
# The grader tells nothing of a hidden case


def test_the_kind_of_a_difference_on_a_hidden_case_is_not_told_in_grading() -> None:
    # right on every shipped case, softmax over dim 0 on the instructor's case of 9 keys
    source = checks.EXERCISES["ch1.q2"].solution_code.replace(
        "    work = scores.float()",
        "    if scores.shape[-1] > 6:\n        return F.softmax(scores, dim=0)\n    work = scores.float()",
    )
    exercise = checks.EXERCISES["ch1.q2"]
    cases = judging.graded_cases(exercise, {"cases": [{"num_keys": 9, "seed": 5}]})
    answer = learner("ch1.q2", source)
    result = judging.judge_cases(exercise, cases, [exercise.attempt(answer, case) for case in cases])
    assert result.message.startswith("Your result differs from the reference on it."), result.message
    assert "sum to 1" not in result.message and "dim=0" not in result.message
