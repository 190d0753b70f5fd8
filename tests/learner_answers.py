"""Learners' answers to every exercise, written from the prompts alone (before reading the checks' mistakes):
wrong answers as learners write them, each with the words a message that names or locates its mistake would
contain, and correct alternatives (einsum, loops, other valid masking) that every check must accept.

`ANSWERS` is data: (key, label, phrases, source); phrases is None for a correct alternative. `define` execs an
answer after the chapter's set-up imports, as the grader does.
"""

from __future__ import annotations

import linecache
from typing import NamedTuple

import attn_course_exercises as checks


class Answer(NamedTuple):
    key: str
    label: str
    phrases: tuple[str, ...] | None  # None: a correct alternative
    source: str


def define(answer: Answer) -> object:
    """The function or class `answer.source` defines, in a namespace holding its chapter's set-up imports.
    Its lines are registered with linecache, as a notebook's cells are, so errors quote the learner's line."""
    namespace: dict = {"__name__": "__main__"}
    exec(checks.PREAMBLES[int(answer.key[2 : answer.key.index(".")])], namespace)
    filename = f"<{answer.key}: {answer.label}>"
    linecache.cache[filename] = (len(answer.source), None, answer.source.splitlines(True), filename)
    exec(compile(answer.source, filename, "exec"), namespace)
    return namespace[checks.EXERCISES[answer.key].name]


ANSWERS: list[Answer] = []


def ok(key: str, label: str, source: str) -> None:
    ANSWERS.append(Answer(key, label, None, source))


def wrong(key: str, label: str, phrases: list[str], source: str) -> None:
    ANSWERS.append(Answer(key, label, tuple(phrases), source))


# ---------------------------------------------------------------------------------------------------------
# ch1.q1 sequence_mask

K = "ch1.q1"
ok(
    K,
    "torch.where with a broadcast mask",
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1], device=X.device)[None, :] < valid_len[:, None]
    mask = mask.reshape(mask.shape + (1,) * (X.dim() - 2))
    return torch.where(mask, X, torch.tensor(value, dtype=X.dtype))
""",
)
ok(
    K,
    "loop over rows on a clone",
    """
def sequence_mask(X, valid_len, value=0):
    Y = X.clone()
    for i in range(X.shape[0]):
        Y[i, int(valid_len[i]):] = value
    return Y
""",
)
ok(
    K,
    "masked_fill with view",
    """
def sequence_mask(X, valid_len, value=0):
    keep = torch.arange(X.size(1)).unsqueeze(0) < valid_len.unsqueeze(1)
    keep = keep.view(*keep.shape, *([1] * (X.dim() - 2)))
    return X.masked_fill(~keep, value)
""",
)
wrong(
    K,
    "d2l: writes into X",
    ["in place", "changed its input", "copy"],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    X[~mask] = value
    return X
""",
)
wrong(
    K,
    "<= keeps one padding position",
    ["off by one", "off-by-one", "one position too many", "<="],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1])[None, :] <= valid_len[:, None]
    mask = mask.reshape(mask.shape + (1,) * (X.dim() - 2))
    return torch.where(mask, X, torch.tensor(value, dtype=X.dtype))
""",
)
wrong(
    K,
    "masks along the last axis",
    ["axis 1", "last axis", "trailing", "features"],
    """
def sequence_mask(X, valid_len, value=0):
    n = X.shape[-1]
    mask = torch.arange(n)[None, :] < valid_len[:, None]
    mask = mask.reshape((X.shape[0],) + (1,) * (X.dim() - 2) + (n,))
    return torch.where(mask, X, torch.tensor(value, dtype=X.dtype))
""",
)
wrong(
    K,
    "mask only for 2-D X",
    ["trailing", "axes", "*rest", "features"],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    return X.masked_fill(~mask, value)
""",
)
wrong(
    K,
    "multiplies by the mask, ignores value",
    ["value"],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    mask = mask.reshape(mask.shape + (1,) * (X.dim() - 2))
    return X * mask
""",
)
wrong(
    K,
    "float fill promotes integer X",
    ["dtype"],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    mask = mask.reshape(mask.shape + (1,) * (X.dim() - 2))
    return torch.where(mask, X, float(value))
""",
)
wrong(
    K,
    "inverted mask",
    ["invert", "real positions", "the wrong side", "padding instead"],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(X.shape[1])[None, :] >= valid_len[:, None]
    mask = mask.reshape(mask.shape + (1,) * (X.dim() - 2))
    return torch.where(mask, X, torch.tensor(value, dtype=X.dtype))
""",
)
wrong(
    K,
    "arange up to the longest valid length",
    ["maxlen", "X.shape[1]", "longest", "max()"],
    """
def sequence_mask(X, valid_len, value=0):
    mask = torch.arange(int(valid_len.max()))[None, :] < valid_len[:, None]
    mask = mask.reshape(mask.shape + (1,) * (X.dim() - 2))
    return torch.where(mask, X, torch.tensor(value, dtype=X.dtype))
""",
)
wrong(
    K,
    "first row's length for every row",
    ["each row", "every row", "per row", "valid_len[i]"],
    """
def sequence_mask(X, valid_len, value=0):
    Y = X.clone()
    Y[:, int(valid_len[0]):] = value
    return Y
""",
)
wrong(
    K,
    "loop writing into X",
    ["in place", "changed its input", "copy"],
    """
def sequence_mask(X, valid_len, value=0):
    for i in range(X.shape[0]):
        X[i, int(valid_len[i]):] = value
    return X
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch1.q2 masked_softmax

K = "ch1.q2"
ok(
    K,
    "finfo.min fill, then times the mask",
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1) * mask
""",
)
ok(
    K,
    "hand-written stabilised exp",
    """
def masked_softmax(scores, valid_lens=None):
    B, Q, K = scores.shape
    if valid_lens is None:
        mask = torch.ones(B, Q, K, dtype=torch.bool)
    else:
        lens = valid_lens.reshape(B, -1, 1).expand(B, Q, 1)
        mask = torch.arange(K).reshape(1, 1, K) < lens
    s = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    e = torch.exp(s - s.amax(dim=-1, keepdim=True)) * mask
    return e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
""",
)
ok(
    K,
    "loop over rows",
    """
def masked_softmax(scores, valid_lens=None):
    B, Q, K = scores.shape
    out = torch.zeros_like(scores)
    for b in range(B):
        for q in range(Q):
            if valid_lens is None:
                n = K
            elif valid_lens.dim() == 1:
                n = int(valid_lens[b])
            else:
                n = int(valid_lens[b, q])
            if n > 0:
                out[b, q, :n] = torch.softmax(scores[b, q, :n], dim=-1)
    return out
""",
)
wrong(
    K,
    "d2l's -1e6 fill",
    ["-1e6", "uniform", "valid length is 0", "valid length 0", "empty row", "attends to nothing"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    return F.softmax(scores.masked_fill(~mask, -1e6), dim=-1)
""",
)
wrong(
    K,
    "-inf fill, NaN in empty rows",
    ["NaN", "-inf", "empty row", "valid length is 0", "valid length 0"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
""",
)
wrong(
    K,
    "softmax over dim=1",
    ["axis", "dim"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    s = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return F.softmax(s, dim=1) * mask
""",
)
wrong(
    K,
    "2-D valid_lens read as one per sequence",
    ["(batch_size, num_queries)", "per query", "one length per query", "2-D", "2D"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    mask = torch.arange(scores.shape[-1])[None, None, :] < valid_lens[:, None, None]
    s = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return F.softmax(s, dim=-1) * mask
""",
)
wrong(
    K,
    "unstabilised exp",
    ["overflow", "max", "stabil", "large"],
    """
def masked_softmax(scores, valid_lens=None):
    B, Q, K = scores.shape
    if valid_lens is None:
        mask = torch.ones(B, Q, K, dtype=torch.bool)
    else:
        lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        mask = torch.arange(K)[None, None, :] < lens
    e = torch.exp(scores) * mask
    return e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
""",
)
wrong(
    K,
    "softmax over all keys, then zero the padding",
    ["renormal", "before the softmax", "sum to 1", "sums to 1"],
    """
def masked_softmax(scores, valid_lens=None):
    w = F.softmax(scores, dim=-1)
    if valid_lens is None:
        return w
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    return w * mask
""",
)
wrong(
    K,
    "masked_fill_ on scores",
    ["in place", "changed its input"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    return F.softmax(scores, dim=-1) * mask
""",
)
wrong(
    K,
    "<= in the mask",
    ["off by one", "off-by-one", "one key too many", "<="],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] <= lens
    s = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return F.softmax(s, dim=-1) * mask
""",
)
wrong(
    K,
    "computed under no_grad",
    ["gradient", "no_grad", "detach"],
    """
def masked_softmax(scores, valid_lens=None):
    with torch.no_grad():
        if valid_lens is None:
            return F.softmax(scores, dim=-1)
        lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        mask = torch.arange(scores.shape[-1])[None, None, :] < lens
        s = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        return F.softmax(s, dim=-1) * mask
""",
)
wrong(
    K,
    "float32 result for half inputs",
    ["dtype"],
    """
def masked_softmax(scores, valid_lens=None):
    s = scores.float()
    if valid_lens is None:
        return F.softmax(s, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(s.shape[-1])[None, None, :] < lens
    return F.softmax(s.masked_fill(~mask, -1e30), dim=-1) * mask
""",
)
wrong(
    K,
    "no None branch",
    ["None"],
    """
def masked_softmax(scores, valid_lens):
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    s = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return F.softmax(s, dim=-1) * mask
""",
)
wrong(
    K,
    "masked scores set to 0",
    ["score of 0", "scores to 0", "set to 0", "filled with 0", "-inf", "large negative"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    mask = torch.arange(scores.shape[-1])[None, None, :] < lens
    return F.softmax(scores * mask, dim=-1)
""",
)
wrong(
    K,
    "softmax over dim=0",
    ["dim=0", "wrong axis"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=0)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = torch.arange(scores.shape[-1]) < lens
    filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return F.softmax(filled, dim=0) * keep
""",
)
wrong(
    K,
    "float32's minimum as the fill, in every dtype",
    ["torch.finfo(torch.float32).min"],
    """
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = torch.arange(scores.shape[-1]) < lens
    filled = scores.masked_fill(~keep, torch.finfo(torch.float32).min)
    return F.softmax(filled, dim=-1) * keep
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch1.q3 nadaraya_watson

K = "ch1.q3"
ok(
    K,
    "cdist",
    """
def nadaraya_watson(queries, keys, values, sigma):
    sq = torch.cdist(queries[:, None], keys[:, None]) ** 2
    weights = F.softmax(-sq / (2 * sigma ** 2), dim=-1)
    return weights, weights @ values
""",
)
ok(
    K,
    "logsumexp",
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(queries.unsqueeze(1) - keys.unsqueeze(0)) ** 2 / (2 * sigma ** 2)
    weights = torch.exp(scores - torch.logsumexp(scores, dim=1, keepdim=True))
    return weights, (weights * values).sum(dim=1)
""",
)
ok(
    K,
    "max subtracted by hand",
    """
def nadaraya_watson(queries, keys, values, sigma):
    d = queries.reshape(-1, 1) - keys.reshape(1, -1)
    s = -0.5 * (d / sigma) ** 2
    e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
    w = e / e.sum(dim=-1, keepdim=True)
    return w, torch.einsum("qk,k->q", w, values)
""",
)
ok(
    K,
    "loop over queries",
    """
def nadaraya_watson(queries, keys, values, sigma):
    rows = []
    for q in queries:
        rows.append(torch.softmax(-(q - keys) ** 2 / (2 * sigma ** 2), dim=0))
    weights = torch.stack(rows)
    return weights, torch.mv(weights, values)
""",
)
wrong(
    K,
    "softmax over dim 0",
    ["over the queries"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2)
    weights = torch.softmax(scores, dim=0)
    return weights, weights @ values
""",
)
wrong(
    K,
    "normalised by the total",
    ["whole"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    k = torch.exp(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2))
    weights = k / k.sum()
    return weights, weights @ values
""",
)
wrong(
    K,
    "keys as rows",
    ["swapped"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(keys[:, None] - queries[None, :]) ** 2 / (2 * sigma ** 2)
    weights = torch.softmax(scores, dim=0)
    return weights, values @ weights
""",
)
wrong(
    K,
    "keys as rows softmax last",
    ["swapped", "over the queries"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(keys.unsqueeze(1) - queries.unsqueeze(0)) ** 2 / (2 * sigma ** 2)
    weights = torch.softmax(scores, dim=-1)
    return weights, values @ weights
""",
)
wrong(
    K,
    "no minus",
    ["minus sign"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = (queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2)
    weights = F.softmax(scores, dim=-1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "no minus naive exp",
    ["minus sign", "NaN"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    k = torch.exp((queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2))
    weights = k / k.sum(dim=1, keepdim=True)
    return weights, weights @ values
""",
)
wrong(
    K,
    "sigma squared only",
    ["1/2", "2σ²"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(queries[:, None] - keys[None, :]) ** 2 / sigma ** 2
    weights = F.softmax(scores, dim=-1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "2 sigma",
    ["2σ²", "squared"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma)
    weights = F.softmax(scores, dim=-1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "precedence",
    ["parentheses", "multiplied by σ²"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(queries[:, None] - keys[None, :]) ** 2 / 2 * sigma ** 2
    weights = F.softmax(scores, dim=-1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "cdist not squared",
    ["square", "distance"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    dist = torch.cdist(queries[:, None], keys[:, None])
    weights = F.softmax(-dist / (2 * sigma ** 2), dim=-1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "exp no normalising",
    ["not normalised", "sum to 1"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = torch.exp(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2))
    return weights, weights @ values
""",
)
wrong(
    K,
    "naive exp over sum",
    ["NaN", "underflow"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    k = torch.exp(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2))
    weights = k / k.sum(-1, keepdim=True)
    return weights, weights @ values
""",
)
wrong(
    K,
    "mean of weighted values",
    ["weighted *sum*", "averaged"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = F.softmax(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights, (weights * values).mean(dim=-1)
""",
)
wrong(
    K,
    "averages the keys",
    ["average the values"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = F.softmax(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights, weights @ keys
""",
)
wrong(
    K,
    "predictions first",
    ["wrong order"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = F.softmax(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights @ values, weights
""",
)
wrong(
    K,
    "only predictions",
    ["only the predictions", "return both"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = F.softmax(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights @ values
""",
)
wrong(
    K,
    "only weights",
    ["only the weights", "return both"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    return F.softmax(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
""",
)
wrong(
    K,
    "elementwise difference",
    ["column", "row", "shape"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = F.softmax(-(queries - keys) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights, weights * values
""",
)
wrong(
    K,
    "float32 work",
    ["dtype"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    q, k, v = queries.float(), keys.float(), values.float()
    weights = F.softmax(-(q[:, None] - k[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights, weights @ v
""",
)
wrong(
    K,
    "in place",
    ["in place"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    queries.unsqueeze_(1)
    weights = F.softmax(-(queries - keys) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "values @ weights",
    ["keys axis", "row of weights"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = F.softmax(-(queries[:, None] - keys[None, :]) ** 2 / (2 * sigma ** 2), dim=-1)
    return weights, values @ weights
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch1.q3 nadaraya_watson: more learners' answers

K = "ch1.q3"
ok(
    K,
    "einsum and a softmax of the scaled differences",
    """
def nadaraya_watson(queries, keys, values, sigma):
    diff = (queries.unsqueeze(1) - keys.unsqueeze(0)) / sigma
    weights = F.softmax(-0.5 * diff**2, dim=1)
    return weights, torch.einsum("qk,k->q", weights, values)
""",
)
ok(
    K,
    "log_softmax, exp, values @ weights.T",
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -((queries.reshape(-1, 1) - keys.reshape(1, -1)) ** 2) / (2 * sigma * sigma)
    weights = torch.log_softmax(scores, dim=-1).exp()
    return weights, values @ weights.T
""",
)
wrong(
    K,
    "max subtracted without keepdim",
    ["keepdim"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2)
    e = torch.exp(scores - scores.max(dim=1).values)
    weights = e / e.sum(dim=1, keepdim=True)
    return weights, weights @ values
""",
)
wrong(
    K,
    "sum without keepdim",
    ["keepdim"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2)
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    weights = e / e.sum(dim=1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "calls the course's nadaraya_watson",
    ["calls the course", "attn_course.attention.lookup"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    from attn_course.attention import lookup

    return lookup.nadaraya_watson(queries, keys, values, sigma)
""",
)
wrong(
    K,
    "absolute distance instead of its square",
    ["square"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    scores = -(queries[:, None] - keys[None, :]).abs() / (2 * sigma**2)
    weights = torch.softmax(scores, dim=1)
    return weights, weights @ values
""",
)
wrong(
    K,
    "naive exp with an epsilon in the denominator",
    ["far", "underflow", "sum to 1", "0 / 0"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    k = torch.exp(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2))
    weights = k / (k.sum(dim=1, keepdim=True) + 1e-12)
    return weights, weights @ values
""",
)
wrong(
    K,
    "squeeze() drops the key axis of a single key",
    ["single key", "squeeze"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = torch.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=1).squeeze()
    return weights, (weights * values).sum(dim=-1)
""",
)
wrong(
    K,
    "predictions kept as a column",
    ["(num_queries,)", "shape"],
    """
def nadaraya_watson(queries, keys, values, sigma):
    weights = torch.softmax(-((queries[:, None] - keys[None, :]) ** 2) / (2 * sigma**2), dim=1)
    return weights, weights @ values[:, None]
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch2.q1 scaled_dot_product_attention

K = "ch2.q1"
ok(
    K,
    "bmm",
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
""",
)
ok(
    K,
    "einsum",
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.einsum("bqd,bkd->bqk", queries, keys) / queries.size(-1) ** 0.5
    weights = masked_softmax(scores, valid_lens)
    return torch.einsum("bqk,bkv->bqv", weights, values), weights
""",
)
ok(
    K,
    "queries scaled first, matmul",
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    q = queries / math.sqrt(keys.shape[-1])
    weights = masked_softmax(q @ keys.transpose(-2, -1), valid_lens)
    return weights @ values, weights
""",
)
wrong(
    K,
    "no scaling",
    ["sqrt", "scale", "scaling"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    weights = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)), valid_lens)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "divides by sqrt(value_size)",
    ["value_size", "wrong axis", "divisor", "sqrt(d)"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "divides by sqrt(num_keys)",
    ["num_keys", "wrong axis", "divisor", "sqrt(d)"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[1])
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "divides by d",
    ["sqrt"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / queries.shape[-1]
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "softmax over the queries",
    ["axis", "dim", "queries"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = torch.softmax(scores, dim=1)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "valid_lens ignored",
    ["valid_lens", "mask", "padding"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "scores of keys against queries",
    ["transpos", "shape"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(keys, queries.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = masked_softmax(scores.transpose(1, 2).contiguous(), valid_lens).transpose(1, 2)
    return torch.bmm(weights.transpose(1, 2), values), weights
""",
)
wrong(
    K,
    "returns (weights, context)",
    ["order", "(context, weights)"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = masked_softmax(scores, valid_lens)
    return weights, torch.bmm(weights, values)
""",
)
wrong(
    K,
    "context from the keys",
    ["values", "keys"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, keys), weights
""",
)
wrong(
    K,
    "divides by sqrt(num_queries)",
    ["num_queries", "wrong axis", "divisor", "sqrt(d)"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[1])
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
""",
)
wrong(
    K,
    "own mask, per-sequence lengths only",
    ["per query", "(batch_size, num_queries)", "2-D", "2D"],
    """
def scaled_dot_product_attention(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        if valid_lens.dim() == 2:
            valid_lens = valid_lens[:, 0]
        mask = torch.arange(keys.shape[1])[None, None, :] < valid_lens[:, None, None]
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    return torch.bmm(weights, values), weights
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch2.q2 AdditiveAttention (prepare / attend)

ADDITIVE = """
class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def prepare(self, keys, values, valid_lens=None):
{prepare}

    def attend(self, queries, memory):
{attend}

    def forward(self, queries, keys, values, valid_lens=None):
        return self.attend(queries, self.prepare(keys, values, valid_lens))
"""


def additive(prepare: str, attend: str) -> str:
    def indent(body: str) -> str:
        return "\n".join("        " + line for line in body.strip("\n").splitlines())

    return ADDITIVE.replace("{prepare}", indent(prepare)).replace("{attend}", indent(attend))


PREPARE = "return self.W_k(keys), values, valid_lens"
ATTEND = """
proj_keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1))
weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
return torch.bmm(weights, values), weights
"""
K = "ch2.q2"
ok(K, "tuple memory, broadcast sum", additive(PREPARE, ATTEND))
ok(
    K,
    "dict memory, einsum with w_v's weight",
    additive(
        'return {"k": self.W_k(keys), "v": values, "lens": valid_lens}',
        """
h = torch.tanh(self.W_q(queries)[:, :, None, :] + memory["k"][:, None, :, :])
scores = torch.einsum("bqkh,h->bqk", h, self.w_v.weight[0])
weights = masked_softmax(scores, memory["lens"])
return torch.einsum("bqk,bkv->bqv", weights, memory["v"]), weights
""",
    ),
)
ok(
    K,
    "loop over queries",
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
q = self.W_q(queries)
rows = []
for j in range(q.shape[1]):
    rows.append(self.w_v(torch.tanh(q[:, j:j + 1, :] + proj_keys)).squeeze(-1).unsqueeze(1))
weights = masked_softmax(torch.cat(rows, dim=1), valid_lens)
return weights @ values, weights
""",
    ),
)
wrong(
    K,
    "keys projected in attend",
    ["W_k", "prepare", "once", "every step", "project"],
    additive(
        "return keys, values, valid_lens",
        """
keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "prepare under no_grad",
    ["no_grad", "gradient", "detach"],
    additive(
        """
with torch.no_grad():
    proj_keys = self.W_k(keys)
return proj_keys, values, valid_lens
""",
        ATTEND,
    ),
)
wrong(
    K,
    "memory kept on self",
    ["self", "state", "memory", "return"],
    additive(
        """
self.proj_keys, self.values, self.valid_lens = self.W_k(keys), values, valid_lens
""",
        """
features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.proj_keys.unsqueeze(1))
weights = masked_softmax(self.w_v(features).squeeze(-1), self.valid_lens)
return torch.bmm(weights, self.values), weights
""",
    ),
)
wrong(
    K,
    "squeeze() without a dim",
    ["squeeze"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1))
weights = masked_softmax(self.w_v(features).squeeze(), valid_lens)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "valid_lens ignored",
    ["valid_lens", "mask", "padding"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1))
weights = torch.softmax(self.w_v(features).squeeze(-1), dim=-1)
return torch.bmm(weights, values), weights
""",
    ),
)
ok(
    K,
    "keys-first broadcast, transposed back",
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(1) + proj_keys.unsqueeze(2))
scores = self.w_v(features).squeeze(-1).transpose(1, 2)
weights = masked_softmax(scores, valid_lens)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "no tanh",
    ["tanh"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1)
weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "one query only",
    ["several queries", "num_queries", "more than one query"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
q = self.W_q(queries[:, 0, :])
features = torch.tanh(q.unsqueeze(1) + proj_keys)
weights = masked_softmax(self.w_v(features).transpose(1, 2), valid_lens)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "softmax over dim=1",
    ["axis", "dim"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1))
scores = self.w_v(features).squeeze(-1)
weights = torch.softmax(scores, dim=1)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "context from the projected keys",
    ["values"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = torch.tanh(self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1))
weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
return torch.bmm(weights, proj_keys), weights
""",
    ),
)
wrong(
    K,
    "relu instead of tanh",
    ["tanh"],
    additive(
        PREPARE,
        """
proj_keys, values, valid_lens = memory
features = torch.relu(self.W_q(queries).unsqueeze(2) + proj_keys.unsqueeze(1))
weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
return torch.bmm(weights, values), weights
""",
    ),
)
wrong(
    K,
    "projected keys detached",
    ["detach", "gradient"],
    additive("return self.W_k(keys).detach(), values, valid_lens", ATTEND),
)

# ---------------------------------------------------------------------------------------------------------
# ch2.q3 general_scores

K = "ch2.q3"
ok(
    K,
    "project the keys",
    """
def general_scores(queries, keys, W_a):
    return queries @ (keys @ W_a.T).transpose(1, 2)
""",
)
ok(
    K,
    "einsum",
    """
def general_scores(queries, keys, W_a):
    return torch.einsum("bqi,ij,bkj->bqk", queries, W_a, keys)
""",
)
ok(
    K,
    "project the queries",
    """
def general_scores(queries, keys, W_a):
    return torch.bmm(queries @ W_a, keys.transpose(1, 2))
""",
)
wrong(
    K,
    "keys @ W_a, untransposed",
    ["W_a.T", "transpose", "W_a"],
    """
def general_scores(queries, keys, W_a):
    return queries @ (keys @ W_a).transpose(1, 2)
""",
)
wrong(
    K,
    "queries @ W_a.T",
    ["W_a.T", "transpose", "W_a"],
    """
def general_scores(queries, keys, W_a):
    return (queries @ W_a.T) @ keys.transpose(1, 2)
""",
)
wrong(
    K,
    "scaled by sqrt(d)",
    ["scale", "sqrt", "raw"],
    """
def general_scores(queries, keys, W_a):
    return queries @ (keys @ W_a.T).transpose(1, 2) / math.sqrt(queries.shape[-1])
""",
)
wrong(
    K,
    "softmax applied",
    ["softmax", "raw"],
    """
def general_scores(queries, keys, W_a):
    return torch.softmax(queries @ (keys @ W_a.T).transpose(1, 2), dim=-1)
""",
)
wrong(
    K,
    "(batch_size, num_keys, num_queries)",
    ["transpos", "shape", "(batch_size, num_queries, num_keys)"],
    """
def general_scores(queries, keys, W_a):
    return (keys @ W_a.T) @ queries.transpose(1, 2)
""",
)
wrong(
    K,
    "query i with key i only",
    ["every query", "pair", "each key", "every key"],
    """
def general_scores(queries, keys, W_a):
    return (queries * (keys @ W_a.T)).sum(-1, keepdim=True)
""",
)
wrong(
    K,
    "one query only",
    ["several queries", "num_queries", "more than one query"],
    """
def general_scores(queries, keys, W_a):
    q = queries[:, 0, :]
    return torch.bmm(keys @ W_a.T, q.unsqueeze(2)).transpose(1, 2)
""",
)
wrong(
    K,
    "W_a detached",
    ["gradient", "no_grad", "detach"],
    """
def general_scores(queries, keys, W_a):
    return queries @ (keys @ W_a.detach().T).transpose(1, 2)
""",
)
wrong(
    K,
    "tanh applied",
    ["tanh", "raw"],
    """
def general_scores(queries, keys, W_a):
    return torch.tanh(queries @ (keys @ W_a.T).transpose(1, 2))
""",
)
wrong(
    K,
    "computed in float32",
    ["dtype"],
    """
def general_scores(queries, keys, W_a):
    return queries.float() @ (keys.float() @ W_a.float().T).transpose(1, 2)
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch2.q4 concat_scores

K = "ch2.q4"
ok(
    K,
    "W_a split into query and key halves",
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    q = queries @ W_a[:, :qs].T
    k = keys @ W_a[:, qs:].T
    return (torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ v_a.T).squeeze(-1)
""",
)
ok(
    K,
    "explicit concatenation of every pair",
    """
def concat_scores(queries, keys, W_a, v_a):
    B, Q, _ = queries.shape
    K = keys.shape[1]
    q = queries.unsqueeze(2).expand(B, Q, K, -1)
    k = keys.unsqueeze(1).expand(B, Q, K, -1)
    pairs = torch.cat([q, k], dim=-1)
    return torch.tanh(pairs @ W_a.T) @ v_a[0]
""",
)
ok(
    K,
    "einsum",
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.size(-1)
    h = torch.einsum("bqi,hi->bqh", queries, W_a[:, :qs])[:, :, None] + torch.einsum(
        "bki,hi->bkh", keys, W_a[:, qs:])[:, None]
    return torch.einsum("bqkh,h->bqk", torch.tanh(h), v_a.squeeze(0))
""",
)
wrong(
    K,
    "key first",
    ["order", "query first", "[q; k]", "[k; q]"],
    """
def concat_scores(queries, keys, W_a, v_a):
    ks = keys.shape[-1]
    k = keys @ W_a[:, :ks].T
    q = queries @ W_a[:, ks:].T
    return (torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ v_a.T).squeeze(-1)
""",
)
wrong(
    K,
    "no tanh",
    ["tanh"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = (queries @ W_a[:, :qs].T).unsqueeze(2) + (keys @ W_a[:, qs:].T).unsqueeze(1)
    return (h @ v_a.T).squeeze(-1)
""",
)
wrong(
    K,
    "query i concatenated with key i",
    ["every key", "pair", "every query"],
    """
def concat_scores(queries, keys, W_a, v_a):
    h = torch.tanh(torch.cat([queries, keys], dim=-1) @ W_a.T)
    return (h @ v_a.T).transpose(1, 2)
""",
)
wrong(
    K,
    "squeeze() without a dim",
    ["squeeze"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries @ W_a[:, :qs].T).unsqueeze(2) + (keys @ W_a[:, qs:].T).unsqueeze(1))
    return (h @ v_a.T).squeeze()
""",
)
wrong(
    K,
    "v_a untransposed",
    ["v_a", "transpose", "v_a.T"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries @ W_a[:, :qs].T).unsqueeze(2) + (keys @ W_a[:, qs:].T).unsqueeze(1))
    return (h @ v_a).squeeze(-1)
""",
)
wrong(
    K,
    "W_a split at key_size",
    ["split", "query_size", "columns"],
    """
def concat_scores(queries, keys, W_a, v_a):
    ks = keys.shape[-1]
    q = queries @ W_a[:, :ks].T
    k = keys @ W_a[:, ks:].T
    return (torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ v_a.T).squeeze(-1)
""",
)
wrong(
    K,
    "softmax applied",
    ["softmax", "raw"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries @ W_a[:, :qs].T).unsqueeze(2) + (keys @ W_a[:, qs:].T).unsqueeze(1))
    return torch.softmax((h @ v_a.T).squeeze(-1), dim=-1)
""",
)
wrong(
    K,
    "sum instead of v_a",
    ["v_a"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries @ W_a[:, :qs].T).unsqueeze(2) + (keys @ W_a[:, qs:].T).unsqueeze(1))
    return h.sum(-1)
""",
)
wrong(
    K,
    "(batch_size, num_keys, num_queries)",
    ["shape", "transpos", "(batch_size, num_queries, num_keys)"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    h = torch.tanh((queries @ W_a[:, :qs].T).unsqueeze(1) + (keys @ W_a[:, qs:].T).unsqueeze(2))
    return (h @ v_a.T).squeeze(-1)
""",
)
wrong(
    K,
    "one query only",
    ["several queries", "num_queries", "more than one query"],
    """
def concat_scores(queries, keys, W_a, v_a):
    qs = queries.shape[-1]
    q = queries[:, :1, :] @ W_a[:, :qs].T
    h = torch.tanh(q + keys @ W_a[:, qs:].T)
    return (h @ v_a.T).transpose(1, 2)
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch2.q5 masked_attention (find the bugs)

K = "ch2.q5"
ok(
    K,
    "-inf fill, softmax, NaN of empty rows set to 0",
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1], device=keys.device) < valid_lens[:, None]
    scores = scores.masked_fill(~real[:, None, :], float("-inf"))
    weights = torch.nan_to_num(F.softmax(scores, dim=-1), nan=0.0)
    return weights @ values, weights
""",
)
ok(
    K,
    "exp by hand, shifted by the largest real score",
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = torch.einsum("bqd,bkd->bqk", queries, keys) / d**0.5
    real = (torch.arange(keys.shape[1], device=keys.device)[None, :] < valid_lens[:, None])[:, None, :]
    low = torch.finfo(scores.dtype).min
    top = scores.masked_fill(~real, low).amax(dim=-1, keepdim=True)
    e = torch.exp(scores - top).masked_fill(~real, 0.0)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ values, weights
""",
)
wrong(
    K,
    "mask and axis fixed, -1e6 kept",
    ["-1e6", "valid length 0", "float16"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    scores = scores.masked_fill(~real[:, None, :], -1e6)
    weights = F.softmax(scores, dim=-1)
    return weights @ values, weights
""",
)
wrong(
    K,
    "-inf fill: NaN in a sentence of length 0",
    ["NaN", "valid length 0"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    scores = scores.masked_fill(~real[:, None, :], float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ values, weights
""",
)
wrong(
    K,
    "finfo.min fill, empty rows left uniform",
    ["valid length 0", "uniform"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    scores = scores.masked_fill(~real[:, None, :], torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)
    return weights @ values, weights
""",
)
wrong(
    K,
    "softmax axis fixed, mask still along the queries",
    ["queries", "mask"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    scores = scores.masked_fill(~real[:, :, None], torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1) * real[:, None, :]
    return weights @ values, weights
""",
)
wrong(
    K,
    "rewritten with the course's masked_softmax",
    ["masked_softmax", "without"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    weights = masked_softmax(queries @ keys.transpose(1, 2) / math.sqrt(d), valid_lens)
    return weights @ values, weights
""",
)
wrong(
    K,
    "float32 minimum used as the fill of float16 scores",
    ["float16", "dtype"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    scores = scores.masked_fill(~real[:, None, :], torch.finfo(torch.float32).min)
    weights = F.softmax(scores, dim=-1) * real[:, None, :]
    return weights @ values, weights
""",
)
wrong(
    K,
    "softmax over all keys, padding zeroed afterwards",
    ["sum to 1", "renormal", "padded keys"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) < valid_lens[:, None]
    weights = F.softmax(scores, dim=-1) * real[:, None, :]
    return weights @ values, weights
""",
)
wrong(
    K,
    "<= in the mask",
    ["<=", "one padded key", "padded key"],
    """
def masked_attention(queries, keys, values, valid_lens):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)
    real = torch.arange(keys.shape[1]) <= valid_lens[:, None]
    scores = scores.masked_fill(~real[:, None, :], torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1) * real[:, None, :]
    return weights @ values, weights
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch3.q1 masked_cross_entropy

K = "ch3.q1"
ok(
    K,
    "per-token loss times the mask",
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * mask).sum() / mask.sum()
""",
)
ok(
    K,
    "log_softmax and gather",
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    logp = torch.log_softmax(logits, dim=-1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    mask = (torch.arange(logits.size(1)).unsqueeze(0) < tgt_valid_lens.unsqueeze(1)).to(logp.dtype)
    return -(logp * mask).sum() / mask.sum()
""",
)
ok(
    K,
    "boolean indexing",
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    return F.cross_entropy(logits[mask], tgt_out[mask])
""",
)
wrong(
    K,
    "ignore_index=0",
    ["pad", "ignore_index", "tgt_valid_lens"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=0)
""",
)
wrong(
    K,
    "mean over every position",
    ["padding", "padded", "mask"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out)
""",
)
wrong(
    K,
    "sentence by sentence",
    ["per sentence", "sentence by sentence", "each sentence", "all real tokens"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return ((losses * mask).sum(1) / tgt_valid_lens).mean()
""",
)
wrong(
    K,
    "drops <eos>",
    ["eos", "off by one", "off-by-one"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < (tgt_valid_lens[:, None] - 1)
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * mask).sum() / mask.sum().clamp_min(1)
""",
)
wrong(
    K,
    "sum, not mean",
    ["sum", "divide", "count", "number of real tokens"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * mask).sum()
""",
)
wrong(
    K,
    "divides by every position",
    ["count", "number of real tokens", "divide", "padding", "padded"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * mask).sum() / tgt_out.numel()
""",
)
wrong(
    K,
    "returns .item()",
    ["item", "scalar tensor", "float", "gradient", "backward"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return ((losses * mask).sum() / mask.sum()).item()
""",
)
wrong(
    K,
    "tensor rebuilt from .item()",
    ["item", "gradient", "backward", "detach"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return torch.tensor((losses * mask).sum().item() / mask.sum().item(), dtype=logits.dtype)
""",
)
wrong(
    K,
    "classes on the last axis",
    ["axis 1", "transpose", "(batch_size, vocab_size, T)", "class"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits, tgt_out, reduction="none")
    return (losses * mask).sum() / mask.sum()
""",
)
wrong(
    K,
    "softmax without log",
    ["log", "log_softmax"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    p = torch.softmax(logits, dim=-1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    return -(p * mask).sum() / mask.sum()
""",
)
wrong(
    K,
    "log_softmax over the time axis",
    ["axis", "dim", "vocab"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    logp = torch.log_softmax(logits, dim=1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    return -(logp * mask).sum() / mask.sum()
""",
)
wrong(
    K,
    "logits detached",
    ["gradient", "no_grad", "detach", "backward"],
    """
def masked_cross_entropy(logits, tgt_out, tgt_valid_lens):
    logits = logits.detach()
    mask = torch.arange(tgt_out.shape[1])[None, :] < tgt_valid_lens[:, None]
    losses = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    return (losses * mask).sum() / mask.sum()
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch3.q2 final_state

K = "ch3.q2"
ok(
    K,
    "advanced indexing",
    """
def final_state(outputs, valid_lens):
    return outputs[torch.arange(outputs.shape[0]), valid_lens - 1]
""",
)
ok(
    K,
    "gather",
    """
def final_state(outputs, valid_lens):
    index = (valid_lens - 1).view(-1, 1, 1).expand(-1, 1, outputs.size(-1))
    return outputs.gather(1, index).squeeze(1)
""",
)
ok(
    K,
    "loop and stack",
    """
def final_state(outputs, valid_lens):
    return torch.stack([outputs[i, int(n) - 1] for i, n in enumerate(valid_lens)])
""",
)
wrong(
    K,
    "last padded position",
    ["last position", "padding", "valid_lens", "last real"],
    """
def final_state(outputs, valid_lens):
    return outputs[:, -1]
""",
)
wrong(
    K,
    "outputs[i, valid_lens[i]]",
    ["off by one", "off-by-one", "- 1"],
    """
def final_state(outputs, valid_lens):
    return outputs[torch.arange(outputs.shape[0]), valid_lens]
""",
)
wrong(
    K,
    "every sentence at every length",
    ["arange", "each sentence", "its own", "row i"],
    """
def final_state(outputs, valid_lens):
    return outputs[:, valid_lens - 1]
""",
)
wrong(
    K,
    "indexes the batch axis",
    ["axis", "batch"],
    """
def final_state(outputs, valid_lens):
    return outputs[valid_lens - 1, -1]
""",
)
wrong(
    K,
    "gather index not expanded",
    ["gather", "expand", "index"],
    """
def final_state(outputs, valid_lens):
    return outputs.gather(1, (valid_lens - 1).view(-1, 1, 1)).squeeze(1)
""",
)
wrong(
    K,
    "longest sentence's end for all",
    ["longest", "max", "each sentence"],
    """
def final_state(outputs, valid_lens):
    return outputs[:, int(valid_lens.max()) - 1]
""",
)
wrong(
    K,
    "mean of the real positions",
    ["mean", "average", "last real"],
    """
def final_state(outputs, valid_lens):
    mask = torch.arange(outputs.shape[1])[None, :, None] < valid_lens[:, None, None]
    return (outputs * mask).sum(1) / valid_lens[:, None].to(outputs.dtype)
""",
)
wrong(
    K,
    "first position",
    ["first", "last real"],
    """
def final_state(outputs, valid_lens):
    return outputs[:, 0]
""",
)
wrong(
    K,
    "detached",
    ["gradient", "detach"],
    """
def final_state(outputs, valid_lens):
    return outputs.detach()[torch.arange(outputs.shape[0]), valid_lens - 1]
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch3.q3 BiEncoder.forward (the class around it is given)

K = "ch3.q3"
BI_ENCODER_INIT = """
class BiEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, decoder_hiddens):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=0)
        self.rnn = nn.GRU(embed_size, num_hiddens, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * num_hiddens, decoder_hiddens)
"""
BI_ENCODER = BI_ENCODER_INIT + """
    def forward(self, src, valid_lens):
        X = self.embedding(src)
        packed = pack_padded_sequence(X, valid_lens.cpu(), batch_first=True, enforce_sorted=False)
        outputs, h_n = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        s_0 = torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], dim=-1)))
        return outputs, s_0.unsqueeze(0)
"""


def bi_encoder(old: str, new: str) -> str:
    """BI_ENCODER with one learner's change (old must occur in it)."""
    assert old in BI_ENCODER, old
    return BI_ENCODER.replace(old, new)


ok(
    K,
    "sorted by hand, packed, unsorted",
    BI_ENCODER_INIT
    + """
    def forward(self, src, valid_lens):
        order = torch.argsort(valid_lens, descending=True)
        back = torch.argsort(order)
        X = self.embedding(src[order])
        packed = pack_padded_sequence(X, valid_lens[order].cpu(), batch_first=True)
        outputs, h_n = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        final = torch.cat([h_n[0], h_n[1]], dim=1)[back]
        return outputs[back], torch.tanh(self.bridge(final))[None]
""",
)
ok(
    K,
    "one sentence at a time, zero-padded by hand",
    BI_ENCODER_INIT
    + """
    def forward(self, src, valid_lens):
        outs, finals = [], []
        for i in range(src.shape[0]):
            n = int(valid_lens[i])
            out, h = self.rnn(self.embedding(src[i : i + 1, :n]))
            outs.append(F.pad(out[0], (0, 0, 0, src.shape[1] - n)))
            finals.append(torch.cat([h[0, 0], h[1, 0]]))
        s_0 = torch.tanh(self.bridge(torch.stack(finals)))
        return torch.stack(outs), s_0.unsqueeze(0)
""",
)
wrong(
    K,
    "no packing: the GRU reads the padding",
    ["pack", "padding"],
    bi_encoder(
        """        packed = pack_padded_sequence(X, valid_lens.cpu(), batch_first=True, enforce_sorted=False)
        outputs, h_n = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
""",
        """        outputs, h_n = self.rnn(X)
        keep = torch.arange(src.shape[1])[None, :] < valid_lens[:, None]
        outputs = outputs * keep[..., None]
""",
    ),
)
wrong(
    K,
    "no total_length",
    ["total_length"],
    bi_encoder(", total_length=src.shape[1])", ")"),
)
wrong(
    K,
    "enforce_sorted left at True",
    ["enforce_sorted", "sorted"],
    bi_encoder(", enforce_sorted=False)", ")"),
)
wrong(
    K,
    "bridge reads the outputs at the last real word",
    ["backward", "h_n", "first word"],
    bi_encoder(
        "torch.cat([h_n[0], h_n[1]], dim=-1)",
        "outputs[torch.arange(src.shape[0]), valid_lens - 1]",
    ),
)
wrong(
    K,
    "bridge reads the last padded position",
    ["last real", "h_n", "padded position", "final state"],
    bi_encoder("torch.cat([h_n[0], h_n[1]], dim=-1)", "outputs[:, -1]"),
)
wrong(
    K,
    "final states concatenated backward first",
    ["order", "forward", "backward"],
    bi_encoder("torch.cat([h_n[0], h_n[1]], dim=-1)", "torch.cat([h_n[1], h_n[0]], dim=-1)"),
)
wrong(
    K,
    "h_n reshaped to (batch_size, 2 * num_hiddens) with view",
    ["h_n", "batch", "view", "mix"],
    bi_encoder("torch.cat([h_n[0], h_n[1]], dim=-1)", "h_n.reshape(src.shape[0], -1)"),
)
wrong(
    K,
    "no tanh in the bridge",
    ["tanh"],
    bi_encoder("torch.tanh(self.bridge(", "(self.bridge("),
)
wrong(
    K,
    "s_0 without the layer axis",
    ["layer axis", "(1, batch_size"],
    bi_encoder("return outputs, s_0.unsqueeze(0)", "return outputs, s_0"),
)
wrong(
    K,
    "calls the course's encoder",
    ["calls the course", "attn_course.models.encoders"],
    BI_ENCODER_INIT
    + """
    def forward(self, src, valid_lens):
        from attn_course.models.encoders import Encoder

        enc = Encoder(self.embedding.num_embeddings, self.embedding.embedding_dim, self.num_hiddens,
                      bidirectional=True, decoder_hiddens=self.bridge.out_features)
        enc.embedding, enc.rnn, enc.bridge = self.embedding, self.rnn, self.bridge
        out = enc(src, valid_lens)
        return out.outputs, out.state
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch4.q1 bahdanau_decode

K = "ch4.q1"
ok(
    K,
    "loop, lists, stack",
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
ok(
    K,
    "unbind and cat along axis 1",
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s = s_0
    out_s, out_c, out_a = [], [], []
    for e in embedded.unbind(1):
        c, a = attention.attend(s[:, None, :], memory)
        s = rnn(torch.cat((e, c[:, 0]), -1), s)
        out_s.append(s[:, None])
        out_c.append(c)
        out_a.append(a)
    return torch.cat(out_s, 1), torch.cat(out_c, 1), torch.cat(out_a, 1)
""",
)
wrong(
    K,
    "query s_t: GRU first",
    ["s_{t-1}", "before", "previous state"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    c = torch.zeros(s_0.shape[0], rnn.input_size - embedded.shape[-1])
    for t in range(embedded.shape[1]):
        s = rnn(torch.cat([embedded[:, t], c], dim=-1), s)
        c, a = attention.attend(s.unsqueeze(1), memory)
        c = c.squeeze(1)
        states.append(s)
        contexts.append(c)
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "[c_t; e] order",
    ["order", "[e(y_{t-1}); c_t]", "embedding first", "concat"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([c.squeeze(1), embedded[:, t]], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "query s_0 at every step",
    ["s_0", "previous state", "s_{t-1}"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s_0.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "state detached every step",
    ["detach", "gradient", "through time"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s.detach())
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "weights not squeezed",
    ["squeeze", "shape"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a)
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "states s_0..s_{T-1}",
    ["s_1", "s_0", "off by one", "one step", "shifted"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        states.append(s)
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "<bos> embedding at every step",
    ["embedded[:, t]", "step t", "y_{t-1}", "same embedding"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, 0], c.squeeze(1)], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "stacked along axis 0",
    ["axis 1", "stack", "dim=1"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states), torch.stack(contexts), torch.stack(weights)
""",
)
wrong(
    K,
    "query without the step axis",
    ["unsqueeze", "(batch_size, 1, num_hiddens)", "query"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s, memory)
        s = rnn(torch.cat([embedded[:, t], c], dim=-1), s)
        states.append(s)
        contexts.append(c)
        weights.append(a)
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "context not squeezed",
    ["squeeze", "context"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c], dim=-1), s)
        states.append(s)
        contexts.append(c)
        weights.append(a)
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)
wrong(
    K,
    "attention under no_grad",
    ["gradient", "no_grad", "detach"],
    """
def bahdanau_decode(embedded, s_0, memory, attention, rnn):
    s, states, contexts, weights = s_0, [], [], []
    for t in range(embedded.shape[1]):
        with torch.no_grad():
            c, a = attention.attend(s.unsqueeze(1), memory)
        s = rnn(torch.cat([embedded[:, t], c.squeeze(1)], dim=-1), s)
        states.append(s)
        contexts.append(c.squeeze(1))
        weights.append(a.squeeze(1))
    return torch.stack(states, 1), torch.stack(contexts, 1), torch.stack(weights, 1)
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch4.q2 alignment_error_rate

K = "ch4.q2"
ok(
    K,
    "set operators",
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))
""",
)
ok(
    K,
    "counting loops",
    """
def alignment_error_rate(predicted, sure, possible):
    a_s = sum(1 for link in predicted if link in sure)
    a_p = sum(1 for link in predicted if link in possible)
    return 1.0 - float(a_s + a_p) / float(len(predicted) + len(sure))
""",
)
ok(
    K,
    "intersection methods",
    """
def alignment_error_rate(predicted, sure, possible):
    A, S, P = set(predicted), set(sure), set(possible)
    num = len(A.intersection(S)) + len(A.intersection(P))
    return 1.0 - num / (len(A) + len(S))
""",
)
wrong(
    K,
    "|P| in the denominator",
    ["denominator", "|S|", "sure"],
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(possible))
""",
)
wrong(
    K,
    "|A ∩ S| twice",
    ["possible", "|A ∩ P|", "P"],
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - 2 * len(predicted & sure) / (len(predicted) + len(sure))
""",
)
wrong(
    K,
    "no 1 -",
    ["1 -", "1 minus", "lower is better", "agreement"],
    """
def alignment_error_rate(predicted, sure, possible):
    return (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))
""",
)
wrong(
    K,
    "integer division",
    ["integer division", "//"],
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - (len(predicted & sure) + len(predicted & possible)) // (len(predicted) + len(sure))
""",
)
wrong(
    K,
    "|A ∩ S| only",
    ["|A ∩ P|", "possible"],
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - len(predicted & sure) / (len(predicted) + len(sure))
""",
)
wrong(
    K,
    "links read as (tgt, src)",
    ["order", "(src_index, tgt_index)", "swap"],
    """
def alignment_error_rate(predicted, sure, possible):
    A = {(t, s) for s, t in predicted}
    return 1 - (len(A & sure) + len(A & possible)) / (len(A) + len(sure))
""",
)
wrong(
    K,
    "1 - precision",
    ["formula", "recall", "precision"],
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - len(predicted & possible) / len(predicted)
""",
)
wrong(
    K,
    "rounded",
    ["round"],
    """
def alignment_error_rate(predicted, sure, possible):
    return round(1 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure)), 2)
""",
)
wrong(
    K,
    "|A ∪ S| in the denominator",
    ["denominator", "|A| + |S|"],
    """
def alignment_error_rate(predicted, sure, possible):
    return 1 - (len(predicted & sure) + len(predicted & possible)) / len(predicted | sure)
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch5.q1 location_weights

K = "ch5.q1"
ok(
    K,
    "cut W_a, then masked_softmax",
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a[:num_keys].T, valid_lens)
""",
)
ok(
    K,
    "einsum",
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(torch.einsum("bqh,kh->bqk", queries, W_a[:num_keys]), valid_lens)
""",
)
ok(
    K,
    "F.linear, then cut the scores",
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(F.linear(queries, W_a)[..., :num_keys].contiguous(), valid_lens)
""",
)
wrong(
    K,
    "softmax over max_len, then cut",
    ["cut", "before the softmax", "max_len", "num_keys", "sum to 1"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    w = torch.softmax(queries @ W_a.T, dim=-1)[..., :num_keys]
    if valid_lens is None:
        return w
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    return w * (torch.arange(num_keys)[None, None, :] < lens)
""",
)
wrong(
    K,
    "not cut to num_keys",
    ["num_keys", "max_len", "cut"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a.T, valid_lens)
""",
)
wrong(
    K,
    "last num_keys rows of W_a",
    ["first num_keys", "W_a[:num_keys]", "rows"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a[-num_keys:].T, valid_lens)
""",
)
wrong(
    K,
    "valid_lens ignored",
    ["valid_lens", "mask"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return torch.softmax(queries @ W_a[:num_keys].T, dim=-1)
""",
)
wrong(
    K,
    "W_a untransposed",
    ["W_a.T", "transpose"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax((queries @ W_a)[..., :num_keys], valid_lens)
""",
)
wrong(
    K,
    "softmax over dim=1",
    ["axis", "dim"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    s = queries @ W_a[:num_keys].T
    if valid_lens is None:
        return torch.softmax(s, dim=1)
    return masked_softmax(s, valid_lens)
""",
)
ok(
    K,
    "scores up to the longest valid length, zero-padded to num_keys",
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    n = num_keys if valid_lens is None else int(valid_lens.max())
    w = masked_softmax(queries @ W_a[:n].T, valid_lens)
    return F.pad(w, (0, num_keys - n))
""",
)
wrong(
    K,
    "one query only",
    ["several queries", "num_queries", "more than one query"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    s = (queries[:, 0] @ W_a[:num_keys].T).unsqueeze(1)
    return masked_softmax(s, valid_lens)
""",
)
wrong(
    K,
    "cut after masking, max_len kept without valid_lens",
    ["num_keys", "max_len", "None"],
    """
def location_weights(queries, W_a, num_keys, valid_lens=None):
    return masked_softmax(queries @ W_a.T, valid_lens)[..., :num_keys]
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch5.q2 luong_step

K = "ch5.q2"
ok(
    K,
    "cat and matmul",
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    c, a = c.squeeze(1), a.squeeze(1)
    return h, torch.tanh(torch.cat([c, h], dim=-1) @ W_c.T), a
""",
)
ok(
    K,
    "F.linear",
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h_t = rnn(torch.cat((y_emb, feed), 1), h_prev)
    context, weights = attention.attend(h_t[:, None], memory)
    return h_t, torch.tanh(F.linear(torch.cat((context[:, 0], h_t), 1), W_c)), weights[:, 0]
""",
)
ok(
    K,
    "W_c split in two",
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    E = c.shape[-1]
    ht = torch.tanh(c.squeeze(1) @ W_c[:, :E].T + h @ W_c[:, E:].T)
    return h, ht, a.squeeze(1)
""",
)
wrong(
    K,
    "attends with h_prev",
    ["h_t", "h_prev", "new state", "after the RNN", "h_{t-1}"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    c, a = attention.attend(h_prev.unsqueeze(1), memory)
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    return h, torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T), a.squeeze(1)
""",
)
wrong(
    K,
    "feeds h_prev instead of feed",
    ["feed", "h̃_{t-1}", "input feeding"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, h_prev], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T), a.squeeze(1)
""",
)
wrong(
    K,
    "[h_t; c_t] order",
    ["[c_t; h_t]", "order"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([h, c.squeeze(1)], dim=-1) @ W_c.T), a.squeeze(1)
""",
)
wrong(
    K,
    "[feed; y_emb] order",
    ["[e(y_{t-1}); h̃_{t-1}]", "order", "y_emb first"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([feed, y_emb], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T), a.squeeze(1)
""",
)
wrong(
    K,
    "no tanh",
    ["tanh"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T, a.squeeze(1)
""",
)
wrong(
    K,
    "returns (h̃_t, h_t, a_t)",
    ["order", "h_t, h̃_t", "swapped"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T), h, a.squeeze(1)
""",
)
wrong(
    K,
    "a_t not squeezed",
    ["squeeze", "shape", "a_t"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T), a
""",
)
wrong(
    K,
    "W_c untransposed",
    ["W_c.T", "transpose"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c), a.squeeze(1)
""",
)
wrong(
    K,
    "h_t detached",
    ["detach", "gradient"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev).detach()
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([c.squeeze(1), h], dim=-1) @ W_c.T), a.squeeze(1)
""",
)
wrong(
    K,
    "h̃ from [c_t; h_prev]",
    ["h_t", "h_prev", "h_{t-1}"],
    """
def luong_step(y_emb, h_prev, feed, memory, attention, rnn, W_c):
    h = rnn(torch.cat([y_emb, feed], dim=-1), h_prev)
    c, a = attention.attend(h.unsqueeze(1), memory)
    return h, torch.tanh(torch.cat([c.squeeze(1), h_prev], dim=-1) @ W_c.T), a.squeeze(1)
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch5.q3 local_p_weights

LOCAL = """
def local_p_weights(scores, centres, window, valid_lens):
    K = scores.shape[-1]
    s = torch.arange(K, dtype=scores.dtype)[None, None, :]
    p = {centre}
    inside = {inside}
    inside = inside & (torch.arange(K)[None, None, :] < valid_lens[:, None, None])
    {align}
    sigma = {sigma}
    return align * torch.exp(-((s - p) ** 2) / {denominator}){tail}
"""
ALIGN = "align = torch.softmax(scores.masked_fill(~inside, torch.finfo(scores.dtype).min), dim=-1) * inside"


def local(
    centre="centres[:, :, None]",
    inside="(s - p).abs() <= window",
    align=ALIGN,
    sigma="window / 2",
    denominator="(2 * sigma**2)",
    tail="",
) -> str:
    return (
        LOCAL.replace("{centre}", centre)
        .replace("{inside}", inside)
        .replace("{align}", align)
        .replace("{sigma}", sigma)
        .replace("{denominator}", denominator)
        .replace("{tail}", tail)
    )


K = "ch5.q3"
ok(K, "finfo.min fill, times the window mask", local())
ok(K, "two-sided comparison", local(inside="(s >= p - window) & (s <= p + window)"))
ok(
    K,
    "loop with integer bounds",
    """
def local_p_weights(scores, centres, window, valid_lens):
    B, Q, K = scores.shape
    out = torch.zeros_like(scores)
    sigma = window / 2
    for b in range(B):
        for q in range(Q):
            p = centres[b, q]
            lo = max(0, math.ceil(float(p) - window))
            hi = min(int(valid_lens[b]) - 1, math.floor(float(p) + window))
            if lo > hi:
                continue
            align = torch.softmax(scores[b, q, lo:hi + 1], dim=-1)
            pos = torch.arange(lo, hi + 1, dtype=scores.dtype)
            out[b, q, lo:hi + 1] = align * torch.exp(-((pos - p) ** 2) / (2 * sigma**2))
    return out
""",
)
wrong(K, "centres rounded", ["round", "real", "p_t"], local(centre="centres.round()[:, :, None]"))
wrong(
    K,
    "renormalised after the Gaussian",
    ["renormal", "sum"],
    local(
        tail=" / (align * torch.exp(-((s - p) ** 2) / (2 * sigma**2))).sum(-1, keepdim=True).clamp_min(1e-30)"
    ),
)
wrong(K, "sigma = D", ["sigma", "D / 2", "D/2"], local(sigma="window"))
wrong(
    K,
    "window edges excluded",
    ["edge", "<= D", "p_t + D", "p_t - D", "inclusive", "window"],
    local(inside="(s - p).abs() < window"),
)
wrong(
    K,
    "softmax over every position",
    ["inside the window", "window", "softmax"],
    local(align="align = masked_softmax(scores, valid_lens) * inside"),
)
wrong(
    K,
    "valid_lens ignored",
    ["valid_lens", "sentence", "padding", "real positions"],
    """
def local_p_weights(scores, centres, window, valid_lens):
    K = scores.shape[-1]
    s = torch.arange(K, dtype=scores.dtype)[None, None, :]
    p = centres[:, :, None]
    inside = (s - p).abs() <= window
    align = torch.softmax(scores.masked_fill(~inside, torch.finfo(scores.dtype).min), dim=-1) * inside
    return align * torch.exp(-((s - p) ** 2) / (2 * (window / 2) ** 2))
""",
)
wrong(K, "sigma^2 without the 2", ["2 sigma", "2σ", "2 * sigma", "sigma"], local(denominator="sigma**2"))
wrong(K, "window of total width D", ["window", "D"], local(inside="(s - p).abs() <= window / 2"))
wrong(K, "no window", ["window", "outside"], local(inside="torch.ones_like(s - p, dtype=torch.bool)"))
wrong(
    K,
    "unstabilised exp",
    ["overflow", "large", "stabil", "max"],
    local(align="e = torch.exp(scores) * inside\n    align = e / e.sum(-1, keepdim=True).clamp_min(1e-30)"),
)

# ---------------------------------------------------------------------------------------------------------
# ch5.q4 local_p_attention

K = "ch5.q4"
LOCAL_P = """
def local_p_attention(queries, scores, W_p, v_p, window, valid_lens):
    S = valid_lens.to(queries.dtype)[:, None]
    centres = S * torch.sigmoid(torch.tanh(queries @ W_p.T) @ v_p.T).squeeze(-1)
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions - centres[..., None]
    inside = (distance.abs() <= window) & (positions < valid_lens[:, None, None])
    align = F.softmax(scores.masked_fill(~inside, float("-inf")), dim=-1).nan_to_num(0.0)
    sigma = window / 2
    return centres, align * torch.exp(-distance**2 / (2 * sigma**2))
"""


def local_p(old: str, new: str) -> str:
    """LOCAL_P with one learner's change (old must occur in it)."""
    assert old in LOCAL_P, old
    return LOCAL_P.replace(old, new)


ok(
    K,
    "F.linear, finfo.min fill, mask multiplied back",
    """
def local_p_attention(queries, scores, W_p, v_p, window, valid_lens):
    p = torch.sigmoid(F.linear(torch.tanh(F.linear(queries, W_p)), v_p))[..., 0]
    centres = valid_lens[:, None] * p
    s = torch.arange(scores.size(-1), device=scores.device).to(scores.dtype)[None, None, :]
    keep = ((s - centres[..., None]).abs() <= window) & (s < valid_lens[:, None, None])
    filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    align = torch.softmax(filled, dim=-1) * keep
    gauss = torch.exp(-((s - centres[..., None]) ** 2) / (2 * (window / 2) ** 2))
    return centres, align * gauss
""",
)
ok(
    K,
    "loop over sentences and steps with integer bounds",
    """
def local_p_attention(queries, scores, W_p, v_p, window, valid_lens):
    B, Q, N = scores.shape
    centres = torch.stack([
        int(valid_lens[b]) * torch.sigmoid(torch.tanh(queries[b] @ W_p.T) @ v_p[0]) for b in range(B)
    ])
    rows = []
    for b in range(B):
        for q in range(Q):
            p = centres[b, q]
            lo = max(0, math.ceil(float(p.detach()) - window))
            hi = min(int(valid_lens[b]) - 1, math.floor(float(p.detach()) + window))
            row = scores.new_zeros(N)
            if lo <= hi:
                s = torch.arange(lo, hi + 1, dtype=scores.dtype)
                gauss = torch.exp(-((s - p) ** 2) / (2 * (window / 2) ** 2))
                inside = torch.softmax(scores[b, q, lo : hi + 1], 0) * gauss
                row = torch.cat([row[:lo], inside, row[hi + 1 :]])
            rows.append(row)
    return centres, torch.stack(rows).view(B, Q, N)
""",
)
wrong(
    K,
    "centre predicted over the padded length",
    ["S_i", "valid length", "padded"],
    local_p("S = valid_lens.to(queries.dtype)[:, None]", "S = scores.shape[-1]"),
)
wrong(
    K,
    "centre detached",
    ["gradient", "detach", "W_p"],
    local_p(".squeeze(-1)\n", ".squeeze(-1).detach()\n"),
)
wrong(
    K,
    "centre computed under no_grad",
    ["gradient", "no_grad", "W_p"],
    local_p(
        "    centres = S * torch.sigmoid(torch.tanh(queries @ W_p.T) @ v_p.T).squeeze(-1)\n",
        "    with torch.no_grad():\n"
        "        centres = S * torch.sigmoid(torch.tanh(queries @ W_p.T) @ v_p.T).squeeze(-1)\n",
    ),
)
wrong(
    K,
    "window edges left out",
    ["edge", "<="],
    local_p("distance.abs() <= window", "distance.abs() < window"),
)
wrong(
    K,
    "Gaussian inside the softmax",
    ["inside the softmax", "Gaussian"],
    """
def local_p_attention(queries, scores, W_p, v_p, window, valid_lens):
    S = valid_lens.to(queries.dtype)[:, None]
    centres = S * torch.sigmoid(torch.tanh(queries @ W_p.T) @ v_p.T).squeeze(-1)
    positions = torch.arange(scores.shape[-1], dtype=scores.dtype)
    distance = positions - centres[..., None]
    inside = (distance.abs() <= window) & (positions < valid_lens[:, None, None])
    logits = scores - distance**2 / (2 * (window / 2) ** 2)
    weights = F.softmax(logits.masked_fill(~inside, float("-inf")), dim=-1).nan_to_num(0.0)
    return centres, weights
""",
)
wrong(
    K,
    "sigma = D",
    ["sigma", "D / 2"],
    local_p("sigma = window / 2", "sigma = window"),
)
wrong(
    K,
    "centre rounded to a position",
    ["round", "real"],
    local_p("distance = positions - centres[..., None]", "distance = positions - centres.round()[..., None]"),
)
wrong(
    K,
    "W_p applied untransposed",
    ["W_p", "transpose", "nn.Linear"],
    local_p("queries @ W_p.T", "queries @ W_p"),
)
wrong(
    K,
    "window not cut to the sentence",
    ["valid length", "padding", "padded", "beyond"],
    local_p(" & (positions < valid_lens[:, None, None])", ""),
)
wrong(
    K,
    "S_i - 1 instead of S_i",
    ["S_i", "valid length"],
    local_p("S = valid_lens.to(queries.dtype)[:, None]", "S = (valid_lens - 1).to(queries.dtype)[:, None]"),
)


# ---------------------------------------------------------------------------------------------------------
# ch6.q1 greedy_decode

GREEDY = """
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    batch_size = src.shape[0]
    y = torch.full((batch_size,), bos, dtype=torch.long)
    done = torch.zeros(batch_size, dtype=torch.bool)
    out = [[] for _ in range(batch_size)]
    for _ in range({steps}):
        logits, state, _ = model.decoder.step({feed}, state)
        y = logits.argmax({dim})
        for i in range(batch_size):
            if not done[i]{keep}:
                out[i].append(int(y[i]))
        done = done | (y == eos)
        {stop}
    return {result}
"""


def greedy(
    steps="max_len",
    feed="y",
    dim="dim=-1",
    keep=" and y[i] != eos",
    stop="if done.all():\n            break",
    result="out",
) -> str:
    return (
        GREEDY.replace("{steps}", steps)
        .replace("{feed}", feed)
        .replace("{dim}", dim)
        .replace("{keep}", keep)
        .replace("{stop}", stop)
        .replace("{result}", result)
    )


K = "ch6.q1"
# Chapter 6 asks for more than the right tokens: finished sentences leave the batch, and decoding stops
# once all have finished. These two give the right tokens the way the chapter argues against.
wrong(K, "finished flags, stop when all are done", ["finished", "batch"], greedy())
wrong(
    K,
    "run max_len steps, then cut at the first <eos>",
    ["max_len"],
    """
def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    y = torch.full((src.shape[0],), bos, dtype=torch.long)
    steps = []
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        steps.append(y)
    tokens = torch.stack(steps, 1).tolist()
    return [row[: row.index(eos)] if eos in row else row for row in tokens]
""",
)
wrong(
    K,
    "whole batch stops at the first <eos>",
    ["own <eos>", "each sentence", "stops", "other sentences"],
    greedy(
        keep="",
        stop="if (y == eos).any():\n            break",
        result="[[t for t in row if t != eos] for row in out]",
    ),
)
wrong(K, "<eos> kept", ["<eos>", "without"], greedy(keep=""))
wrong(K, "<bos> kept", ["<bos>"], greedy(result="[[bos] + row for row in out]"))
wrong(
    K,
    "never stops",
    ["<eos>", "stop"],
    greedy(keep="", stop="", result="[[t for t in row] for row in out]").replace(
        "if not done[i]:", "if True:"
    ),
)
wrong(K, "max_len - 1 steps", ["max_len", "off by one", "steps", "one token"], greedy(steps="max_len - 1"))
wrong(
    K,
    "feeds <bos> at every step",
    ["feed", "y_prev", "back"],
    greedy(feed="torch.full((batch_size,), bos, dtype=torch.long)"),
)
wrong(K, "argmax over the batch", ["axis", "dim", "argmax"], greedy(dim="dim=0"))
wrong(
    K,
    "returns a tensor",
    ["list"],
    greedy(result="torch.tensor([row + [eos] * (max_len - len(row)) for row in out])"),
)
wrong(
    K,
    "pads finished sentences with <eos>",
    ["<eos>", "without", "stop"],
    greedy(keep="", stop="")
    .replace("if not done[i]:", "if True:")
    .replace("out[i].append(int(y[i]))", "out[i].append(eos if done[i] else int(y[i]))"),
)
wrong(
    K,
    "init_state on src",
    ["encode", "init_state"],
    greedy().replace(
        "model.decoder.init_state(model.encode(src, src_valid_lens))", "model.decoder.init_state(src)"
    ),
)

# ---------------------------------------------------------------------------------------------------------
# ch6.q2 beam_step

K = "ch6.q2"
ok(
    K,
    "flatten and topk",
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    total = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1)
    scores, index = total.topk(beam_size, dim=-1)
    return scores, index // V, index % V
""",
)
ok(
    K,
    "sort, then slice, floor division",
    """
def beam_step(beam_scores, log_probs, beam_size):
    V = log_probs.size(-1)
    total = (beam_scores[:, :, None] + log_probs).flatten(1)
    scores, index = total.sort(dim=-1, descending=True)
    index = index[:, :beam_size]
    return scores[:, :beam_size], torch.div(index, V, rounding_mode="floor"), torch.remainder(index, V)
""",
)
ok(
    K,
    "loop over sentences",
    """
def beam_step(beam_scores, log_probs, beam_size):
    V = log_probs.shape[-1]
    rows = [torch.topk((beam_scores[b, :, None] + log_probs[b]).reshape(-1), beam_size)
            for b in range(log_probs.shape[0])]
    scores = torch.stack([r.values for r in rows])
    index = torch.stack([r.indices for r in rows])
    return scores, index // V, index % V
""",
)
wrong(
    K,
    "best token of each beam",
    ["over all beams", "all beams", "flatten", "per beam", "each beam"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    best, tokens = (beam_scores.unsqueeze(-1) + log_probs).max(-1)
    scores, beams = best.sort(-1, descending=True)
    return scores, beams, tokens.gather(1, beams)
""",
)
wrong(
    K,
    "beam and token swapped",
    ["//", "%", "swapped", "beam and token"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1).topk(beam_size)
    return scores, index % V, index // V
""",
)
wrong(
    K,
    "index // beam_size",
    ["vocab_size", "divide", "//"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1).topk(beam_size)
    return scores, index // beam_size, index % beam_size
""",
)
wrong(
    K,
    "beam_scores ignored",
    ["beam_scores", "prefix"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = log_probs.reshape(B, -1).topk(beam_size)
    return scores, index // V, index % V
""",
)
wrong(
    K,
    "scores multiplied",
    ["add", "sum", "log"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) * log_probs).reshape(B, -1).topk(beam_size)
    return scores, index // V, index % V
""",
)
wrong(
    K,
    "smallest scores",
    ["smallest", "largest", "best"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1).topk(beam_size, largest=False)
    return scores, index // V, index % V
""",
)
wrong(
    K,
    "worst first",
    ["best first", "order", "sorted"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1).topk(beam_size)
    return scores.flip(-1), index.flip(-1) // V, index.flip(-1) % V
""",
)
wrong(
    K,
    "true division",
    ["long", "integer", "dtype"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1).topk(beam_size)
    return scores, index / V, index % V
""",
)
wrong(
    K,
    "flattened vocab-major",
    ["reshape", "flatten", "order", "transpose"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, K, V = log_probs.shape
    total = (beam_scores.unsqueeze(-1) + log_probs).transpose(1, 2).reshape(B, -1)
    scores, index = total.topk(beam_size)
    return scores, index // V, index % V
""",
)
wrong(
    K,
    "returns (beams, tokens, scores)",
    ["order"],
    """
def beam_step(beam_scores, log_probs, beam_size):
    B, _, V = log_probs.shape
    scores, index = (beam_scores.unsqueeze(-1) + log_probs).reshape(B, -1).topk(beam_size)
    return index // V, index % V, scores
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch6.q3 beam_search

K = "ch6.q3"
BEAM_SEARCH = """
def beam_search(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha):
    B, K = src.shape[0], beam_size
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    state = state.index_select(torch.arange(B).repeat_interleave(K))
    scores = torch.full((B, K), float("-inf"))
    scores[:, 0] = 0.0
    y = torch.full((B * K,), bos, dtype=torch.long)
    history = torch.zeros(B, K, 0, dtype=torch.long)
    finished = [[] for _ in range(B)]
    done = [False] * B
    for step in range(1, max_len + 1):
        logits, state, _ = model.decoder.step(y, state)
        log_probs = F.log_softmax(logits, dim=-1).view(B, K, -1)
        V = log_probs.shape[-1]
        top, index = (scores[:, :, None] + log_probs).view(B, -1).topk(2 * K, dim=-1)
        new_scores = torch.full((B, K), float("-inf"))
        new_beams = torch.zeros(B, K, dtype=torch.long)
        new_tokens = torch.zeros(B, K, dtype=torch.long)
        for b in range(B):
            kept = 0
            for r in range(2 * K):
                s, k, w = top[b, r].item(), index[b, r].item() // V, index[b, r].item() % V
                if w == eos:
                    if r < K and s > float("-inf") and not done[b]:
                        finished[b].append((s / step**alpha, history[b, k].tolist()))
                elif kept < K:
                    new_scores[b, kept], new_beams[b, kept], new_tokens[b, kept] = s, k, w
                    kept += 1
        history = torch.cat([history[torch.arange(B)[:, None], new_beams], new_tokens[..., None]], dim=-1)
        scores = new_scores
        state = state.index_select((torch.arange(B)[:, None] * K + new_beams).view(-1))
        y = new_tokens.view(-1)
        done = [d or len(f) >= K for d, f in zip(done, finished)]
        if all(done):
            break
    for b in range(B):
        if not done[b]:
            live = [(scores[b, k].item() / max_len**alpha, history[b, k].tolist())
                    for k in range(K) if scores[b, k] > float("-inf")]
            finished[b].extend(live[: max(0, K - len(finished[b]))])
    return [max(candidates, key=lambda c: c[0])[1] for candidates in finished]
"""


def beam(old: str, new: str) -> str:
    """BEAM_SEARCH with one learner's change (old must occur in it)."""
    assert old in BEAM_SEARCH, old
    return BEAM_SEARCH.replace(old, new)


ok(K, "batched, a Python loop over each sentence's 2K best", BEAM_SEARCH)
ok(
    K,
    "one sentence at a time, beams as lists",
    """
def beam_search(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha):
    results = []
    for i in range(src.shape[0]):
        state = model.decoder.init_state(model.encode(src[i : i + 1], src_valid_lens[i : i + 1]))
        beams = [(0.0, [])]  # (log P, tokens) of each live prefix
        state = state.index_select(torch.zeros(1, dtype=torch.long))
        done = []
        for step in range(1, max_len + 1):
            y = torch.tensor([t[-1] if t else bos for _, t in beams])
            logits, state, _ = model.decoder.step(y, state)
            log_probs = torch.log_softmax(logits, dim=-1)
            cands = [(s + log_probs[r, w].item(), r, w) for r, (s, _) in enumerate(beams)
                     for w in range(log_probs.shape[-1])]
            cands.sort(key=lambda c: -c[0])
            keep = []
            for rank, (s, r, w) in enumerate(cands):
                if w == eos:
                    if rank < beam_size:
                        done.append((s / step**alpha, beams[r][1]))
                elif len(keep) < beam_size:
                    keep.append((s, r, w))
                if len(keep) == beam_size and rank >= beam_size - 1:
                    break
            state = state.index_select(torch.tensor([r for _, r, _ in keep]))
            beams = [(s, beams[r][1] + [w]) for s, r, w in keep]
            if len(done) >= beam_size:
                break
        else:
            done += [(s / max_len**alpha, t) for s, t in beams[: beam_size - len(done)]]
        best = done[0]
        for candidate in done[1:]:
            if candidate[0] > best[0]:
                best = candidate
        results.append(best[1])
    return results
""",
)
wrong(
    K,
    "every beam starts with score 0",
    ["first step", "-inf", "score 0", "same token"],
    beam(
        'scores = torch.full((B, K), float("-inf"))\n    scores[:, 0] = 0.0\n',
        "scores = torch.zeros(B, K)\n",
    ),
)
wrong(
    K,
    "length without the <eos>",
    ["<eos>", "length"],
    beam("finished[b].append((s / step**alpha,", "finished[b].append((s / max(step - 1, 1) ** alpha,"),
)
wrong(
    K,
    "every live beam joins at max_len",
    ["max_len", "reach beam_size", "as many as"],
    beam(
        """        done = [d or len(f) >= K for d, f in zip(done, finished)]
        if all(done):
            break
    for b in range(B):
        if not done[b]:
            live = [(scores[b, k].item() / max_len**alpha, history[b, k].tolist())
                    for k in range(K) if scores[b, k] > float("-inf")]
            finished[b].extend(live[: max(0, K - len(finished[b]))])
""",
        """        for b in range(B):
            if step == max_len and not done[b]:
                finished[b].extend((scores[b, k].item() / max_len**alpha, history[b, k].tolist())
                                   for k in range(K) if scores[b, k] > float("-inf"))
        done = [d or len(f) >= K for d, f in zip(done, finished)]
        if all(done):
            break
""",
    ),
)
wrong(
    K,
    "state does not follow the beams",
    ["state", "follow"],
    beam("        state = state.index_select((torch.arange(B)[:, None] * K + new_beams).view(-1))\n", ""),
)
wrong(
    K,
    "alpha ignored: raw log P",
    ["alpha", "normalis"],
    beam("finished[b].append((s / step**alpha,", "finished[b].append((s,").replace(
        "scores[b, k].item() / max_len**alpha", "scores[b, k].item()"
    ),
)
wrong(
    K,
    "new beams only among the beam_size best",
    ["enough candidates", "beam_size best", "do not end in <eos>"],
    beam("elif kept < K:", "elif kept < K and r < K:"),
)
wrong(
    K,
    "done at the first finished hypothesis",
    ["beam_size finished", "first finished"],
    beam("len(f) >= K for d, f", "len(f) >= 1 for d, f"),
)
wrong(
    K,
    "<eos> continued like any token, cut at the end",
    ["<eos>", "finished"],
    """
def beam_search(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha):
    B, K = src.shape[0], beam_size
    state = model.decoder.init_state(model.encode(src, src_valid_lens))
    state = state.index_select(torch.arange(B).repeat_interleave(K))
    scores = torch.full((B, K), float("-inf"))
    scores[:, 0] = 0.0
    y = torch.full((B * K,), bos, dtype=torch.long)
    history = torch.zeros(B, K, 0, dtype=torch.long)
    for _ in range(max_len):
        logits, state, _ = model.decoder.step(y, state)
        log_probs = F.log_softmax(logits, dim=-1).view(B, K, -1)
        V = log_probs.shape[-1]
        scores, index = (scores[:, :, None] + log_probs).view(B, -1).topk(K, dim=-1)
        beams, tokens = index // V, index % V
        history = torch.cat([history[torch.arange(B)[:, None], beams], tokens[..., None]], dim=-1)
        state = state.index_select((torch.arange(B)[:, None] * K + beams).view(-1))
        y = tokens.view(-1)
    results = []
    for b in range(B):
        best, best_score = [], float("-inf")
        for k in range(K):
            tokens = history[b, k].tolist()
            length = tokens.index(eos) + 1 if eos in tokens else len(tokens)
            normalised = scores[b, k].item() / length**alpha
            if normalised > best_score:
                best, best_score = tokens[: length - (eos in tokens)], normalised
        results.append(best)
    return results
""",
)
wrong(
    K,
    "calls the course's beam_search",
    ["calls the course", "attn_course.models.decoding"],
    """
def beam_search(model, src, src_valid_lens, *, bos, eos, max_len, beam_size, alpha):
    from attn_course.models import decoding

    found = decoding.beam_search(model, src, src_valid_lens, bos=bos, eos=eos, max_len=max_len,
                                 beam_size=beam_size, length_penalty_alpha=alpha)
    return [h.tokens for h in found]
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch11.q1 causal_padding_mask

K = "ch11.q1"
ok(
    K,
    "tril of ones and a padding row",
    """
def causal_padding_mask(valid_lens, num_steps):
    causal = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
    padding = torch.arange(num_steps)[None, :] < valid_lens[:, None]
    return causal.unsqueeze(0) & padding.unsqueeze(1)
""",
)
ok(
    K,
    "loops over the batch and the queries",
    """
def causal_padding_mask(valid_lens, num_steps):
    mask = torch.zeros(len(valid_lens), num_steps, num_steps, dtype=torch.bool)
    for b in range(len(valid_lens)):
        for i in range(num_steps):
            mask[b, i, : min(i + 1, int(valid_lens[b]))] = True
    return mask
""",
)
wrong(
    K,
    "triu instead of tril",
    ["upper triangle", "triu"],
    """
def causal_padding_mask(valid_lens, num_steps):
    causal = torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool))
    padding = torch.arange(num_steps)[None, :] < valid_lens[:, None]
    return causal.unsqueeze(0) & padding.unsqueeze(1)
""",
)
wrong(
    K,
    "tril(-1): the diagonal left out",
    ["diagonal", "off by one"],
    """
def causal_padding_mask(valid_lens, num_steps):
    causal = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=-1)
    padding = torch.arange(num_steps)[None, :] < valid_lens[:, None]
    return causal.unsqueeze(0) & padding.unsqueeze(1)
""",
)
wrong(
    K,
    "padding <= valid length",
    ["padding", "off by one", "differs"],
    """
def causal_padding_mask(valid_lens, num_steps):
    causal = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
    padding = torch.arange(num_steps)[None, :] <= valid_lens[:, None]
    return causal.unsqueeze(0) & padding.unsqueeze(1)
""",
)
wrong(
    K,
    "padding mask on the rows",
    ["queries", "rows"],
    """
def causal_padding_mask(valid_lens, num_steps):
    causal = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
    padding = torch.arange(num_steps)[None, :] < valid_lens[:, None]
    return causal.unsqueeze(0) & padding.unsqueeze(2)
""",
)
wrong(
    K,
    "masked_fill convention: True where masked",
    ["inverted"],
    """
def causal_padding_mask(valid_lens, num_steps):
    future = torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=1)
    padding = torch.arange(num_steps)[None, :] >= valid_lens[:, None]
    return future.unsqueeze(0) | padding.unsqueeze(1)
""",
)

# ---------------------------------------------------------------------------------------------------------
# ch11.q1 causal_padding_mask: more learners' answers

K = "ch11.q1"
ok(
    K,
    "key index at most min(i, valid_len - 1)",
    """
def causal_padding_mask(valid_lens, num_steps):
    i = torch.arange(num_steps, device=valid_lens.device)
    last = torch.minimum(i[None, :, None], valid_lens[:, None, None] - 1)
    return i[None, None, :] <= last
""",
)
ok(
    K,
    "triu(1) negated, expanded, and a padding row",
    """
def causal_padding_mask(valid_lens, num_steps):
    future = torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)
    padding = torch.arange(num_steps)[None, :] >= valid_lens[:, None]
    return ~(future.expand(len(valid_lens), -1, -1) | padding.unsqueeze(1))
""",
)
wrong(
    K,
    "padding masked on both axes",
    ["both axes", "padded queries"],
    """
def causal_padding_mask(valid_lens, num_steps):
    i = torch.arange(num_steps)
    real = i[None, :] < valid_lens[:, None]
    return (i[:, None] >= i[None, :])[None] & real[:, None, :] & real[:, :, None]
""",
)
wrong(
    K,
    "0/1 floats instead of booleans",
    ["bool", "dtype"],
    """
def causal_padding_mask(valid_lens, num_steps):
    causal = torch.tril(torch.ones(num_steps, num_steps))
    real = (torch.arange(num_steps)[None, :] < valid_lens[:, None]).float()
    return causal[None] * real[:, None, :]
""",
)
wrong(
    K,
    "or instead of and",
    ["and", "both"],
    """
def causal_padding_mask(valid_lens, num_steps):
    i = torch.arange(num_steps)
    causal = i[:, None] >= i[None, :]
    real = i[None, :] < valid_lens[:, None]
    return causal[None] | real[:, None, :]
""",
)
wrong(
    K,
    "longest valid length for every sequence",
    ["valid_lens[b]", "each sequence", "every sequence"],
    """
def causal_padding_mask(valid_lens, num_steps):
    i = torch.arange(num_steps)
    causal = i[:, None] >= i[None, :]
    return (causal & (i[None, :] < valid_lens.max()))[None].expand(len(valid_lens), -1, -1)
""",
)
wrong(
    K,
    "valid_lens compared without its column axis",
    ["valid_lens", "shape"],
    """
def causal_padding_mask(valid_lens, num_steps):
    i = torch.arange(num_steps)
    causal = i[:, None] >= i[None, :]
    real = i[None, :] < valid_lens
    return causal[None] & real[:, None, :]
""",
)
wrong(
    K,
    "a head axis added for sdpa",
    ["shape", "(batch_size, num_steps, num_steps)"],
    """
def causal_padding_mask(valid_lens, num_steps):
    i = torch.arange(num_steps)
    mask = (i[:, None] >= i[None, :])[None] & (i[None, :] < valid_lens[:, None])[:, None, :]
    return mask[:, None]
""",
)
wrong(
    K,
    "calls the course's attention_lens",
    ["calls the course", "attn_course.attention.multihead"],
    """
def causal_padding_mask(valid_lens, num_steps):
    from attn_course.attention.multihead import attention_lens

    lens = attention_lens(valid_lens, len(valid_lens), num_steps, num_steps, True, valid_lens.device)
    return torch.arange(num_steps)[None, None, :] < lens[..., None]
""",
)
wrong(
    K,
    "causal triangle as large as the longest sentence",
    ["longest valid length", "num_steps"],
    """
def causal_padding_mask(valid_lens, num_steps):
    n = int(valid_lens.max())
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    mask = torch.zeros(len(valid_lens), num_steps, num_steps, dtype=torch.bool)
    mask[:, :n, :n] = causal
    keys = torch.arange(num_steps)[None, None, :] < valid_lens[:, None, None]
    return mask & keys
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch11.q2 multi_head_attention

K = "ch11.q2"
MHA_LOOP = """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    d = queries.shape[-1]
    d_head = d // num_heads
    q, k, v = queries @ W_q.T, keys @ W_k.T, values @ W_v.T
    outputs, weights = [], []
    for h in range(num_heads):
        part = slice(h * d_head, (h + 1) * d_head)
        scores = q[..., part] @ k[..., part].transpose(1, 2) / SCALE
        alpha = masked_softmax(scores, valid_lens)
        outputs.append(alpha @ v[..., part])
        weights.append(alpha)
    return torch.cat(outputs, dim=-1) @ W_o.T, torch.stack(weights, dim=1)
"""
ok(K, "a loop over heads", MHA_LOOP.replace("SCALE", "math.sqrt(d_head)"))
ok(
    K,
    "einsum on (batch, heads, n, d_head)",
    """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    B, Q, d = queries.shape
    K = keys.shape[1]
    h, dh = num_heads, d // num_heads
    q = (queries @ W_q.T).view(B, Q, h, dh)
    k = (keys @ W_k.T).view(B, K, h, dh)
    v = (values @ W_v.T).view(B, K, h, dh)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / dh ** 0.5
    lens = None if valid_lens is None else valid_lens.repeat_interleave(h, dim=0)
    weights = masked_softmax(scores.reshape(B * h, Q, K), lens).view(B, h, Q, K)
    context = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, Q, d)
    return context @ W_o.T, weights
""",
)
wrong(K, "a loop over heads, scaled by sqrt(d)", ["sqrt(d)", "d_head"],
      MHA_LOOP.replace("SCALE", "math.sqrt(d)"))
wrong(K, "a loop over heads, not scaled", ["not scaled", "sqrt"], MHA_LOOP.replace("/ SCALE", ""))
wrong(
    K,
    "view straight to (B * h, n, d_head)",
    ["plain reshape", "split"],
    """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    B, Q, d = queries.shape
    dh = d // num_heads
    q = (queries @ W_q.T).reshape(B * num_heads, -1, dh)
    k = (keys @ W_k.T).reshape(B * num_heads, -1, dh)
    v = (values @ W_v.T).reshape(B * num_heads, -1, dh)
    lens = None if valid_lens is None else valid_lens.repeat_interleave(num_heads, dim=0)
    weights = masked_softmax(q @ k.transpose(1, 2) / math.sqrt(dh), lens)
    outputs = (weights @ v).reshape(B, Q, d) @ W_o.T
    return outputs, weights.reshape(B, num_heads, Q, -1)
""",
)
wrong(
    K,
    "lengths tiled with repeat",
    ["tiled", "repeat_interleave"],
    """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    B, Q, d = queries.shape
    dh = d // num_heads

    def split(X):
        X = X.reshape(B, X.shape[1], num_heads, dh).permute(0, 2, 1, 3)
        return X.reshape(B * num_heads, -1, dh)

    q, k, v = split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)
    if valid_lens is not None:
        tiles = (num_heads,) if valid_lens.dim() == 1 else (num_heads, 1)
        valid_lens = valid_lens.repeat(*tiles)
    weights = masked_softmax(q @ k.transpose(1, 2) / math.sqrt(dh), valid_lens)
    context = (weights @ v).reshape(B, num_heads, Q, dh).permute(0, 2, 1, 3).reshape(B, Q, d)
    return context @ W_o.T, weights.reshape(B, num_heads, Q, -1)
""",
)
wrong(
    K,
    "heads concatenated without W_o",
    ["W_o"],
    """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    d = queries.shape[-1]
    d_head = d // num_heads
    q, k, v = queries @ W_q.T, keys @ W_k.T, values @ W_v.T
    outputs, weights = [], []
    for h in range(num_heads):
        part = slice(h * d_head, (h + 1) * d_head)
        alpha = masked_softmax(q[..., part] @ k[..., part].transpose(1, 2) / math.sqrt(d_head), valid_lens)
        outputs.append(alpha @ v[..., part])
        weights.append(alpha)
    return torch.cat(outputs, dim=-1), torch.stack(weights, dim=1)
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch11.q2 multi_head_attention: more learners' answers

K = "ch11.q2"
MULTI_HEAD = """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    B, nq, d = queries.shape
    nk, h = keys.shape[1], num_heads

    def split(X):
        return X.reshape(X.shape[0], X.shape[1], h, d // h).transpose(1, 2).reshape(B * h, X.shape[1], d // h)

    Q, K_, V = split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)
    lens = None if valid_lens is None else valid_lens.repeat_interleave(h, dim=0)
    weights = masked_softmax(Q @ K_.transpose(1, 2) / math.sqrt(d // h), lens)
    out = (weights @ V).reshape(B, h, nq, d // h).transpose(1, 2).reshape(B, nq, d)
    return out @ W_o.T, weights.reshape(B, h, nq, nk)
"""


def multi_head(old: str, new: str) -> str:
    """MULTI_HEAD with one learner's change (old must occur in it)."""
    assert old in MULTI_HEAD, old
    return MULTI_HEAD.replace(old, new)


ok(K, "batch and heads folded, repeat_interleave on dim 0", MULTI_HEAD)
ok(
    K,
    "a loop over the heads, torch.cat",
    """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    d = queries.shape[-1]
    d_head = d // num_heads
    Q, K_, V = queries @ W_q.T, keys @ W_k.T, values @ W_v.T
    outs, all_weights = [], []
    for k in range(num_heads):
        part = slice(k * d_head, (k + 1) * d_head)
        scores = torch.bmm(Q[..., part], K_[..., part].transpose(1, 2)) / d_head**0.5
        weights = masked_softmax(scores, valid_lens)
        outs.append(torch.bmm(weights, V[..., part]))
        all_weights.append(weights)
    return torch.cat(outs, dim=-1) @ W_o.T, torch.stack(all_weights, dim=1)
""",
)
wrong(
    K,
    "features dealt to the heads in turn",
    ["split", "features"],
    multi_head(
        "X.reshape(X.shape[0], X.shape[1], h, d // h).transpose(1, 2)",
        "X.reshape(X.shape[0], X.shape[1], d // h, h).permute(0, 3, 1, 2)",
    ),
)
wrong(
    K,
    "scaled by sqrt(d)",
    ["sqrt", "d_head"],
    multi_head("/ math.sqrt(d // h)", "/ math.sqrt(d)"),
)
wrong(
    K,
    "projections applied as X @ W",
    ["W.T", "transpose", "nn.Linear"],
    multi_head("split(queries @ W_q.T), split(keys @ W_k.T), split(values @ W_v.T)",
               "split(queries @ W_q), split(keys @ W_k), split(values @ W_v)"),
)
wrong(
    K,
    "valid_lens ignored",
    ["valid_lens", "padding", "padded"],
    multi_head("masked_softmax(Q @ K_.transpose(1, 2) / math.sqrt(d // h), lens)",
               "torch.softmax(Q @ K_.transpose(1, 2) / math.sqrt(d // h), dim=-1)"),
)
wrong(
    K,
    "weights returned with heads folded into the batch",
    ["weights", "shape", "(batch_size, num_heads"],
    multi_head("weights.reshape(B, h, nq, nk)", "weights"),
)
wrong(
    K,
    "merged without moving the heads back",
    ["merge", "head order", "concatenat"],
    multi_head("(weights @ V).reshape(B, h, nq, d // h).transpose(1, 2).reshape(B, nq, d)",
               "(weights @ V).reshape(B, nq, d)"),
)
wrong(
    K,
    "per-query lengths flattened by repeat_interleave",
    ["(batch_size, num_queries)", "per-query", "valid_lens"],
    multi_head("valid_lens.repeat_interleave(h, dim=0)", "valid_lens.repeat_interleave(h)"),
)
wrong(
    K,
    "calls the course's MultiHeadAttention",
    ["calls the course", "attn_course.attention.multihead"],
    """
def multi_head_attention(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
    from attn_course.attention.multihead import MultiHeadAttention

    layer = MultiHeadAttention(queries.shape[-1], num_heads, bias=False).to(queries.dtype)
    with torch.no_grad():
        layer.W_q.weight.copy_(W_q)
        layer.W_k.weight.copy_(W_k)
        layer.W_v.weight.copy_(W_v)
        layer.W_o.weight.copy_(W_o)
    return layer(queries, keys, values, valid_lens)
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch12.q1 crossings

K = "ch12.q1"
ok(
    K,
    "each word against the words before it",
    """
def crossings(weights, src_len, tgt_len):
    real = weights[:tgt_len, :src_len].to(torch.float64)
    positions = [int(torch.argmax(real[t])) for t in range(tgt_len)]
    total = 0
    for later, p in enumerate(positions):
        total += sum(1 for q in positions[:later] if q > p)
    return total
""",
)
ok(
    K,
    "numpy counts of the source words seen so far",
    """
import numpy as np

def crossings(weights, src_len, tgt_len):
    links = np.argmax(weights.detach().cpu().float().numpy()[:tgt_len, :src_len], axis=-1)
    seen = np.zeros(src_len, dtype=np.int64)
    result = 0
    for s in links:
        result += int(seen[s + 1:].sum())
        seen[s] += 1
    return result
""",
)
ok(
    K,
    "a comparison matrix masked above the diagonal",
    """
def crossings(weights, src_len, tgt_len):
    block = weights.float()[:tgt_len, :src_len]
    src_of = block.max(dim=1)[1]
    earlier_right = src_of.unsqueeze(1) > src_of.unsqueeze(0)
    upper = torch.ones_like(earlier_right).triu(1)
    return int(upper.logical_and(earlier_right).sum().item())
""",
)
wrong(
    K,
    "each source word's target word",
    ["down the columns", "the other way round"],
    """
def crossings(weights, src_len, tgt_len):
    cols = weights.T[:src_len, :tgt_len].argmax(1).tolist()
    return sum(cols[i] > cols[j] for i in range(len(cols)) for j in range(i + 1, len(cols)))
""",
)
wrong(
    K,
    "loop runs to tgt_len inclusive",
    ["<eos> row"],
    """
def crossings(weights, src_len, tgt_len):
    a = [int(weights[t, :src_len].argmax()) for t in range(tgt_len + 1)]
    n = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            if a[i] > a[j]:
                n += 1
    return n
""",
)
wrong(
    K,
    "argmax of the whole row",
    ["<eos> column"],
    """
def crossings(weights, src_len, tgt_len):
    a = [int(weights[t].argmax()) for t in range(tgt_len)]
    return sum(a[i] > a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))
""",
)
wrong(
    K,
    "cuts off the last row and column",
    ["padding", "tensor's last"],
    """
def crossings(weights, src_len, tgt_len):
    w = weights[:-1, :-1]
    a = w.argmax(-1)
    return int((a[:, None] > a[None, :]).triu(1).sum())
""",
)
wrong(
    K,
    "ties count",
    ["ties"],
    """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(-1)
    return int((a[:, None] >= a[None, :]).triu(1).sum())
""",
)
wrong(
    K,
    "every ordered pair that disagrees",
    ["twice"],
    """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(-1).tolist()
    return sum((a[i] - a[j]) * (i - j) < 0 for i in range(tgt_len) for j in range(tgt_len))
""",
)
wrong(
    K,
    "the sum left as a tensor",
    ["tensor"],
    """
def crossings(weights, src_len, tgt_len):
    a = weights[:tgt_len, :src_len].argmax(-1)
    return (a[:, None] > a[None, :]).triu(1).sum()
""",
)
wrong(
    K,
    "numpy straight from the weights",
    ["bfloat16"],
    """
import numpy as np

def crossings(weights, src_len, tgt_len):
    a = weights.numpy()[:tgt_len, :src_len].argmax(axis=1)
    return int(sum((a[i] > a[i + 1:]).sum() for i in range(tgt_len)))
""",
)
wrong(
    K,
    "row 0 skipped as <bos>",
    ["shifted"],
    """
def crossings(weights, src_len, tgt_len):
    a = weights[1:tgt_len + 1, :src_len].argmax(-1).tolist()
    return sum(a[i] > a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))
""",
)
wrong(
    K,
    "calls the course's attention_to_links",
    ["calls the course", "attention_to_links"],
    """
from attn_course.measure.metrics import attention_to_links

def crossings(weights, src_len, tgt_len):
    by_target = {t: s for s, t in attention_to_links(weights, src_len=src_len, tgt_len=tgt_len)}
    a = [by_target[t] for t in range(tgt_len)]
    return sum(a[i] > a[j] for i in range(tgt_len) for j in range(i + 1, tgt_len))
""",
)


# ---------------------------------------------------------------------------------------------------------
# ch12.q2 crossing_kinds

K = "ch12.q2"
ok(
    K,
    "the right rows as a set, pairs from combinations",
    """
from itertools import combinations

def crossing_kinds(weights, src_words, tgt_words, links):
    n_src, n_tgt = len(src_words), len(tgt_words)
    peak = [int(torch.argmax(weights[t, :n_src])) for t in range(n_tgt)]
    good = {t for t in range(n_tgt) if (peak[t], t) in set(links)}
    moved, wrong = [], []
    for u, v in combinations(range(n_tgt), 2):
        if peak[u] > peak[v]:
            (moved if u in good and v in good else wrong).append((u, v))
    return moved, wrong
""",
)
ok(
    K,
    "links grouped by target word, a while loop",
    """
def crossing_kinds(weights, src_words, tgt_words, links):
    sources = [set() for _ in tgt_words]
    for s, t in links:
        sources[t].add(s)
    best = weights[: len(tgt_words), : len(src_words)].argmax(-1).tolist()
    ok_row = [best[t] in sources[t] for t in range(len(best))]
    both, either = [], []
    i = 0
    while i < len(best):
        for j in range(i + 1, len(best)):
            if best[i] > best[j]:
                if ok_row[i] and ok_row[j]:
                    both.append((i, j))
                else:
                    either.append((i, j))
        i += 1
    return both, either
""",
)
wrong(
    K,
    "a crossing with one right row called a reordering",
    ["both"],
    """
def crossing_kinds(weights, src_words, tgt_words, links):
    n = len(tgt_words)
    peak = weights[:n, : len(src_words)].argmax(-1).tolist()
    good = [(peak[t], t) in links for t in range(n)]
    moved, wrong = [], []
    for u in range(n):
        for v in range(u + 1, n):
            if peak[u] > peak[v]:
                (moved if good[u] or good[v] else wrong).append((u, v))
    return moved, wrong
""",
)
wrong(
    K,
    "links looked up as (t, i)",
    ["(i, t)", "other way round"],
    """
def crossing_kinds(weights, src_words, tgt_words, links):
    n = len(tgt_words)
    peak = weights[:n, : len(src_words)].argmax(-1).tolist()
    good = [(t, peak[t]) in set(links) for t in range(n)]
    moved, wrong = [], []
    for u in range(n):
        for v in range(u + 1, n):
            if peak[u] > peak[v]:
                (moved if good[u] and good[v] else wrong).append((u, v))
    return moved, wrong
""",
)
wrong(
    K,
    "misaligned means the row's peak is under one half",
    ["links", "certainty"],
    """
def crossing_kinds(weights, src_words, tgt_words, links):
    n = len(tgt_words)
    rows = weights[:n, : len(src_words)]
    peak = rows.argmax(-1).tolist()
    clear = (rows.max(-1).values > 0.5).tolist()
    moved, wrong = [], []
    for u in range(n):
        for v in range(u + 1, n):
            if peak[u] > peak[v]:
                (moved if clear[u] and clear[v] else wrong).append((u, v))
    return moved, wrong
""",
)
wrong(
    K,
    "the <eos> row and column kept",
    ["<eos>"],
    """
def crossing_kinds(weights, src_words, tgt_words, links):
    peak = weights.argmax(-1).tolist()
    good = [(peak[t], t) in set(links) for t in range(len(peak))]
    moved, wrong = [], []
    for u in range(len(peak)):
        for v in range(u + 1, len(peak)):
            if peak[u] > peak[v]:
                (moved if good[u] and good[v] else wrong).append((u, v))
    return moved, wrong
""",
)
wrong(
    K,
    "the kinds given as numbers",
    ["pairs", "how many"],
    """
def crossing_kinds(weights, src_words, tgt_words, links):
    n = len(tgt_words)
    peak = weights[:n, : len(src_words)].argmax(-1).tolist()
    good = [(peak[t], t) in set(links) for t in range(n)]
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if peak[u] > peak[v]]
    moved = sum(1 for u, v in pairs if good[u] and good[v])
    return moved, len(pairs) - moved
""",
)
