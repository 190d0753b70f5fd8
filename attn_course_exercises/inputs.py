"""Seeded input builders shared by the exercises of every chapter.

Each of `spec_generator`, `spec_dtype`, `spec_size` and `spec_lengths` reads one key of a case's spec and
says which key is wrong when it is; `seeded_randn` builds tensors and `lens_text` describes valid lengths in a
case's label. The rest build what several chapters' references and mistake variants use: padding masks,
masked softmaxes (d2l's, and the package's over any axis), the package's attention modules, and GRU cells
from seeded weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from attn_course.validation import check_int
from attn_course_exercises.core import Case, Exercise, resolve

_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}


def spec_generator(spec: Mapping[str, Any]) -> torch.Generator:
    """A torch.Generator seeded with the spec's "seed" (an int)."""
    return torch.Generator().manual_seed(check_int("seed", spec["seed"]))


def spec_dtype(spec: Mapping[str, Any], key: str = "dtype") -> torch.dtype:
    """The torch dtype the spec names under `key` ("float32", "int64", ...)."""
    name = spec[key]
    if name not in _DTYPES:
        raise ValueError(f"{key} must be one of {sorted(_DTYPES)}, got {name!r}")
    return _DTYPES[name]


def spec_size(spec: Mapping[str, Any], key: str, low: int = 1) -> int:
    """The spec's `key`, an int >= low (a batch size, a number of keys, ...)."""
    return check_int(key, spec[key], low=low)


def spec_lengths(
    value: Any, shape: tuple[int, ...], num_keys: int, gen: torch.Generator, key: str, low: int = 0
) -> torch.Tensor | None:
    """valid_lens from a spec: None, "random" (uniform in [low, num_keys]) or explicit nested lists."""
    if value is None:
        return None
    if value == "random":
        return torch.randint(low, num_keys + 1, shape, generator=gen)
    lens = torch.tensor(value, dtype=torch.long)
    if tuple(lens.shape) != shape or (lens.numel() and (lens.min() < low or lens.max() > num_keys)):
        raise ValueError(f"{key} must have shape {shape} with values in [{low}, {num_keys}], got {value!r}")
    return lens


def seeded_randn(
    shape: Sequence[int], gen: torch.Generator, dtype: torch.dtype = torch.float32, scale: float = 1.0
) -> torch.Tensor:
    """Normal samples of `shape` times `scale`, drawn in float64 (the same numbers for every dtype)."""
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def lens_text(lens: torch.Tensor | None) -> str:
    """valid_lens in words for a case's label: "valid_lens (batch_size,) = [2, 0]"."""
    if lens is None:
        return "valid_lens None"
    form = "(batch_size,)" if lens.dim() == 1 else "(batch_size, num_queries)"
    return f"valid_lens {form} = {lens.tolist()}"


def keep_mask(lens: torch.Tensor | None, num_queries: int, num_keys: int) -> torch.Tensor | None:
    """(batch, num_queries, num_keys) bool, True at real keys; None when nothing is masked."""
    if lens is None:
        return None
    per_query = lens[:, None, None] if lens.dim() == 1 else lens[..., None]
    return (torch.arange(num_keys) < per_query).expand(-1, num_queries, -1)


def d2l_masked_softmax(
    scores: torch.Tensor, lens: torch.Tensor | None, dim: int = -1, fill: float = -1e6
) -> torch.Tensor:
    """d2l's masked_softmax: fill padded scores with `fill` (in the scores' dtype), softmax over `dim`."""
    if lens is None:
        return F.softmax(scores, dim=dim)
    keep = keep_mask(lens, scores.shape[1], scores.shape[2])
    return F.softmax(scores.masked_fill(~keep, fill), dim=dim)


def finite_masked_softmax(
    scores: torch.Tensor, lens: torch.Tensor | None, dim: int = -1, extra: int = 0
) -> torch.Tensor:
    """The package's masked softmax (`attn_course.attention.masking.masked_softmax`); over another axis `dim`,
    or with `extra` keys beyond each valid length kept (off-by-one mistakes), the package's rule on that mask:
    fill with the lowest finite value, zero the masked weights after the softmax."""
    masking = resolve("attn_course.attention.masking")
    if dim % scores.dim() == scores.dim() - 1 and not extra:
        return masking.masked_softmax(scores, lens)
    if lens is None:
        excluded = torch.zeros_like(scores, dtype=torch.bool)
    else:
        excluded = ~keep_mask(lens + extra, scores.shape[1], scores.shape[2])
    weights = masking.softmax_excluding(scores.transpose(dim, -1), excluded.transpose(dim, -1))
    return weights.transpose(dim, -1)


def package_attention(name: str, *args: Any) -> nn.Module:
    """The package's attention layer `name` (e.g. "AdditiveAttention") built from `args`, in eval mode."""
    return getattr(resolve("attn_course.attention.layers"), name)(*args).eval()


def gru_params(gen: torch.Generator, dtype: torch.dtype, input_size: int, hidden: int) -> dict[str, Any]:
    """Seeded weights and biases of a GRU cell, named as nn.GRUCell's state_dict names them."""
    scale = 1 / math.sqrt(hidden)
    return {
        "weight_ih": seeded_randn((3 * hidden, input_size), gen, dtype, scale),
        "weight_hh": seeded_randn((3 * hidden, hidden), gen, dtype, scale),
        "bias_ih": seeded_randn((3 * hidden,), gen, dtype, scale),
        "bias_hh": seeded_randn((3 * hidden,), gen, dtype, scale),
    }


def gru_cell(params: dict[str, torch.Tensor]) -> nn.GRUCell:
    """An nn.GRUCell holding `params` (from `gru_params`)."""
    hidden3, input_size = params["weight_ih"].shape
    cell = nn.GRUCell(input_size, hidden3 // 3).to(params["weight_ih"].dtype)
    cell.load_state_dict(params)
    return cell


def _tensors(value: Any) -> list[torch.Tensor]:
    """The floating tensors of an output (a tensor, or tuples and lists of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def gradients_of(output: Any, leaves: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The gradient of a fixed random linear function of `output`'s floating tensors with respect to each
    of `leaves`; zeros where no gradient reaches a leaf (a `.detach()`, `torch.no_grad()`, `.item()`)."""
    gen = torch.Generator().manual_seed(0)
    tensors = _tensors(output)
    probes = [torch.randn(t.shape, generator=gen, dtype=torch.float64) for t in tensors]
    terms = [(t.double() * p).sum() for t, p in zip(tensors, probes, strict=True) if t.requires_grad]
    if not terms:
        return [torch.zeros_like(leaf).detach() for leaf in leaves]
    found = torch.autograd.grad(sum(terms), list(leaves), allow_unused=True)
    pairs = zip(leaves, found, strict=True)
    return [torch.zeros_like(leaf).detach() if g is None else g for leaf, g in pairs]


def with_gradients(exercise: Exercise, wrt: Sequence[str]) -> None:
    """Check gradients too: on a case whose spec has "grad" true, the exercise's output is followed by the
    gradient, with respect to each input named in `wrt`, of a fixed random linear function of the output, for
    the learner's answer, the reference and every mistake alike; so an answer that cuts the gradient
    (`.detach()`, `torch.no_grad()`, `.item()`) does not pass. Other cases run as before."""

    def differentiated(run: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def wrapped(inputs: dict[str, Any]) -> Any:
            if not inputs.get("gradient"):
                return run(inputs)
            leaves = [inputs[name].requires_grad_(True) for name in wrt]
            output = run(inputs)
            if output is None:
                return None
            parts = tuple(output) if isinstance(output, (tuple, list)) else (output,)
            return (*parts, *gradients_of(output, leaves))

        return wrapped

    build, call = exercise._build, exercise._call

    def graded_build(spec: dict[str, Any]) -> Case:
        case = build(spec)
        if not spec.get("grad"):
            return case
        names = (case.names,) if isinstance(case.names, str) else tuple(case.names)
        names += tuple(f"the gradient with respect to `{name}`" for name in wrt)
        inputs = dict(case.inputs, gradient=True)
        return Case(f"{case.label}, with the gradients of the result", inputs, spec, names)

    exercise._build = graded_build
    exercise._call = lambda answer, inputs: differentiated(lambda i: call(answer, i))(inputs)
    exercise._reference = differentiated(exercise._reference)
    exercise.mistakes = tuple(m.wrapped(differentiated) for m in exercise.mistakes)
