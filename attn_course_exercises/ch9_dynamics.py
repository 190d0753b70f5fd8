"""Chapter 9's exercises, training dynamics: the exposure gap measured by hand, the free-running accuracy of
a small trained model position by position (ch9.q1); the decay constant k of scheduled sampling's inverse
sigmoid that puts the teacher-forcing ratio at one half on a chosen step (ch9.q2); and the chapter's question,
real effect or seed noise, asked of a seed study: paired differences, the sign test and the correction for
many questions (ch9.q3).

Each exercise is an `Exercise` with its cases, its reference (the package's
`attn_course.measure.evaluation.accuracy_by_position`; the decay
`attn_course.training.loop.inverse_sigmoid_decay`; `attn_course.course.dynamics.paired` and
`attn_course.measure.significance`) and its known mistakes, each written as the wrong answer that makes it; an
answer that calls the package's versions is refused by `Exercise` itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict
from numbers import Real
from typing import Any

import torch

from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, edit_of, resolve
from attn_course_exercises.inputs import spec_generator, spec_size

# ----------------------------------------------------------------------------------------------------
# Python numbers, not tensors


def no_tensor_numbers(output: Any, what: str) -> Any:
    """output, refused (TypeError) if it holds a torch.Tensor where the prompt asks for Python numbers."""
    parts = output if isinstance(output, (tuple, list)) else (output,)
    for part in parts:
        items = part if isinstance(part, (tuple, list)) else (part,)
        if any(isinstance(item, torch.Tensor) for item in items):
            raise TypeError(f"{what} returned a torch.Tensor where a Python number is asked")
    return output


TENSOR_NUMBER_HINT = ErrorHint(
    r"returned a torch\.Tensor where a Python number",
    "You returned torch tensors where the prompt asks for Python numbers: turn each one into a float (or an "
    "int for a count) before returning it, so the result no longer depends on torch or on a device.",
)


# ---------------------------------------------------------------------------------------------- ch9.q1
#: The small reversal task and model of ch9.q1: 100 updates, a couple of seconds on one CPU core.
_TASK = {"num_pairs": 800, "min_len": 4, "max_len": 9, "vocab_size": 12, "seed": 0}
_SIZES = {"embed_size": 16, "decoder_hiddens": 32}
_TRAINING = {"epochs": 5, "batch_size": 32, "lr": 1e-2}
_EXPOSURE_PACKAGE = ["attn_course.measure.evaluation.accuracy_by_position",
                     "attn_course.course.dynamics.exposure"]
#: Package functions that do the decoding an answer must write (calling one is refused too).
_EXPOSURE_AVOID = ["attn_course.training.loop.scheduled_sampling_logits",
                   "attn_course.models.decoding.greedy_decode"]


@functools.cache
def _exposure_task() -> Any:
    return resolve("attn_course.course.chapters.reversal_data")(**_TASK)


@functools.cache
def exposure_weights(trained: bool) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(ModelConfig as a dict, state_dict) of the ch9.q1 model, trained or as built; the same numbers each
    time (seed 0), and the caller's random state left as it was."""
    chapters, training = resolve("attn_course.course.chapters"), resolve("attn_course.training.loop")
    data = _exposure_task()
    config = chapters.variant_config("bahdanau", data, chapters.Recipe(**_SIZES))
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = resolve("attn_course.models.seq2seq.Seq2Seq").from_config(config)
        if trained:
            recipe = training.TrainConfig(**_TRAINING)
            loader = data.loader(data.train, recipe.batch_size, shuffle=True, seed=0)
            torch.set_num_threads(1)             # small matrices: one thread is fastest, and never waits
            try:
                training.train(model, loader, recipe, device="cpu", progress=False)
            finally:
                torch.set_num_threads(threads)
    return asdict(config), {k: v.detach().clone() for k, v in model.state_dict().items()}


def exposure_model(inputs: dict[str, Any]) -> Any:
    """A fresh copy of the case's model, in eval mode and the case's dtype, on the CPU."""
    config = resolve("attn_course.models.seq2seq.ModelConfig")(**inputs["config"])
    model = resolve("attn_course.models.seq2seq.Seq2Seq").from_config(config)
    model.load_state_dict(inputs["state_dict"])
    return model.to(inputs["state_dict"]["decoder.output.weight"].dtype).eval()


def _exposure_case(spec: dict[str, Any]) -> Case:
    data, gen = _exposure_task(), spec_generator(spec)
    size = min(spec_size(spec, "batch_size"), len(data.test))
    picked = torch.randperm(len(data.test), generator=gen)[:size].tolist()
    config, state = exposure_weights(spec["model"] == "trained")
    dtype = {"float32": torch.float32, "float64": torch.float64}[spec["dtype"]]
    batch = resolve("attn_course.data.tasks.make_batch")(
        [data.test[i] for i in picked], data.src_vocab, data.tgt_vocab
    )
    # The batch's tensors are inputs of their own ("batch.tgt_in", ...), so that the check sees an answer that
    # writes into the caller's batch (say, its own words into batch.tgt_in) as an input changed in place.
    inputs = {
        "config": config,
        "state_dict": {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()},
        **{f"batch.{name}": tensor for name, tensor in batch._asdict().items()},
        "picked": picked,
    }
    label = (
        f"the {spec['model']} model ({spec['dtype']}) on {size} test sentences, tgt_valid_lens "
        f"{batch.tgt_valid_lens.tolist()}"
    )
    return Case(label, inputs, spec, ("the accuracy by position", "the count by position"))


def exposure_batch(inputs: dict[str, Any]) -> Any:
    """The case's batch, an `attn_course.data.tasks.Batch` of the case's own tensors (not copies)."""
    fields = resolve("attn_course.data.tasks.Batch")._fields
    return resolve("attn_course.data.tasks.Batch")(*(inputs[f"batch.{name}"] for name in fields))


def _exposure_call(answer: Any, inputs: dict[str, Any]) -> Any:
    return no_tensor_numbers(answer(exposure_model(inputs), exposure_batch(inputs)), "free_running_accuracy")


def reference_exposure(inputs: dict[str, Any], free_running: bool = True) -> tuple[list[float], list[int]]:
    """The package's accuracy by position on the case (free running, or teacher forced)."""
    data = _exposure_task()
    accuracy, count = resolve("attn_course.measure.evaluation.accuracy_by_position")(
        exposure_model(inputs), [data.test[i] for i in inputs["picked"]], data, free_running=free_running)
    return accuracy, count


# The mistakes of ch9.q1, each written as a learner writes it. `_own_words` is the decoding every one of them
# gets right but the first two: each step fed the argmax of the step before, never stopping early.
_EOS = 2                                                   # <eos> in the course's vocabularies


@torch.no_grad()
def _own_words(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, preds = batch.tgt_in[:, 0], []
    for _ in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(-1)
        preds.append(y)
    return torch.stack(preds, 1)


def _by_position(preds, batch):
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_out) & real).sum(0) / n).tolist(), n.tolist()


@torch.no_grad()
def exposure_teacher_forced(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    preds = []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(batch.tgt_in[:, t], state)
        preds.append(logits.argmax(-1))
    return _by_position(torch.stack(preds, 1), batch)


@torch.no_grad()
def exposure_fed_bos(model, batch):
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    preds = []
    for _ in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(batch.tgt_in[:, 0], state)
        preds.append(logits.argmax(-1))
    return _by_position(torch.stack(preds, 1), batch)


def exposure_compared_with_tgt_in(model, batch):
    preds = _own_words(model, batch)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    n = real.sum(0)
    return (((preds == batch.tgt_in) & real).sum(0) / n).tolist(), n.tolist()


def exposure_padding_counted(model, batch):
    preds = _own_words(model, batch)
    return [float(x) for x in (preds == batch.tgt_out).double().mean(0)], [preds.shape[0]] * preds.shape[1]


def exposure_eos_scored_as_miss(model, batch):
    preds = _own_words(model, batch)
    is_eos = (preds == _EOS).long()
    done = (is_eos.cumsum(1) - is_eos) > 0                          # after the first <eos>: stopped
    return _by_position(preds.masked_fill(done, -1), batch)


def exposure_eos_left_out(model, batch):
    preds = _own_words(model, batch)
    is_eos = (preds == _EOS).long()
    done = (is_eos.cumsum(1) - is_eos) > 0
    real = (torch.arange(preds.shape[1])[None] < batch.tgt_valid_lens[:, None]) & ~done
    hits, count = ((preds == batch.tgt_out) & real).sum(0).tolist(), real.sum(0).tolist()
    return [h / n if n else 0.0 for h, n in zip(hits, count, strict=True)], count


def exposure_one_number(model, batch):
    preds = _own_words(model, batch)
    real = torch.arange(preds.shape[1], device=preds.device)[None] < batch.tgt_valid_lens[:, None]
    return int(((preds == batch.tgt_out) & real).sum()) / int(real.sum())


def exposure_accuracy_only(model, batch):
    return _by_position(_own_words(model, batch), batch)[0]


EXPOSURE = Exercise(
    "ch9.q1",
    "free_running_accuracy",
    "Exposure bias measured: next-word accuracy by position when the decoder is fed its own words",
    solution='''
@torch.no_grad()
def free_running_accuracy(model, batch):
    """Next-word accuracy at every target position when each decoder step is fed the model's own
    previous word (its argmax), never the reference; greedy decoding that never stops early.

    model: a trained Seq2Seq in eval mode; batch: an attn_course.data.tasks.Batch with src (B, S),
    src_valid_lens (B,), tgt_in (B, T) = <bos> y_1 ..., tgt_out (B, T) = y_1 ... <eos>, tgt_valid_lens (B,).
    Step 0 reads <bos>; step t > 0 reads the argmax of step t - 1's logits (Bengio et al. 2015).
    Returns (accuracy, count): two lists of T Python numbers; count[t] (an int) is how many sentences
    have a real token at position t, accuracy[t] (a float) the share of them whose argmax at step t is
    tgt_out[b, t].
    """
    state = model.decoder.init_state(model.encode(batch.src, batch.src_valid_lens))
    y, predictions = batch.tgt_in[:, 0], []
    for _ in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decoder.step(y, state)
        y = logits.argmax(dim=-1)                       # the model's own word feeds the next step
        predictions.append(y)
    predicted = torch.stack(predictions, dim=1)                                     # (B, T)
    positions = torch.arange(batch.tgt_out.shape[1], device=batch.tgt_out.device)
    real = positions[None, :] < batch.tgt_valid_lens[:, None]                       # (B, T)
    hits = ((predicted == batch.tgt_out) & real).sum(dim=0)
    count = real.sum(dim=0)
    return (hits / count).tolist(), count.tolist()
''',
    hint=(
        "Step the decoder one word at a time, as chapter 9's scheduled sampling does, but with the coin "
        "always tails: what each step reads is decided by the step before it.",
        "Free running is greedy decoding that never stops: step 0 reads <bos>, every later step reads the "
        "highest-scoring word of the step before, and nothing stops at <eos>. The accuracy at position t "
        "counts only the sentences still real there, compared with tgt_out, not tgt_in; both lists hold "
        "plain Python numbers.",
        "The line that chooses the next input: the argmax over the vocabulary (the last axis) of the logits "
        "the step just produced, kept in a variable of your own, never written into the batch. Then stack "
        "the predictions, mask the positions at or past tgt_valid_lens, and divide each position's hits by "
        "its count.",
    ),
    covers="a trained model, the same model in float64 and an untrained one; batches of 1 to 40 sentences of "
    "different lengths (padded positions not counted); sentences whose own words go wrong early",
    defaults={"seed": 0, "model": "trained", "batch_size": 8, "dtype": "float32"},
    specs=[
        {"seed": 1},
        {"seed": 2, "batch_size": 1},
        {"seed": 3, "batch_size": 40, "dtype": "float64"},
        {"seed": 4, "model": "untrained", "batch_size": 6},
        {"seed": 5, "batch_size": 16},
    ],
    build=_exposure_case,
    call=_exposure_call,
    reference=reference_exposure,
    mistakes=[
        Mistake(
            "That is the teacher-forced accuracy: your steps read the reference word. Free running feeds "
            "each step the model's own previous word, the argmax of the step before.",
            wrong=exposure_teacher_forced,
        ),
        Mistake(
            "Every step was fed <bos>: the input never changed. After step 0, feed each step the argmax of "
            "the logits the step before produced.",
            wrong=exposure_fed_bos,
        ),
        Mistake(
            "The predictions were compared with tgt_in, which is shifted by one (<bos> first): step t "
            "predicts tgt_out[:, t].",
            wrong=exposure_compared_with_tgt_in,
        ),
        Mistake(
            "Padded positions were counted: every sentence counts at every position. Count a sentence at "
            "position t only when t < tgt_valid_lens, and divide by that count.",
            wrong=exposure_padding_counted,
        ),
        Mistake(
            "Your decoder stopped at the first <eos> it predicted and scored the later positions as misses: "
            "this measure never stops early; each later step is fed the model's own word too.",
            wrong=exposure_eos_scored_as_miss,
        ),
        Mistake(
            "Your decoder stopped at the first <eos> it predicted and left the later positions out of the "
            "count: this measure never stops early; each later step is fed the model's own word too.",
            wrong=exposure_eos_left_out,
        ),
        Mistake(
            "One number over all tokens: the exercise asks for the accuracy at every position (and the "
            "counts), to see where the free-running decoder falls behind.",
            wrong=exposure_one_number,
        ),
        Mistake(
            "Only the accuracies were returned: return (accuracy, count), the counts too.",
            wrong=exposure_accuracy_only,
        ),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(
            r"y_prev has shape",
            "A decoder step reads one word per sentence, (batch_size,) long: the model's word is the argmax "
            "over the vocabulary, the last axis of the step's logits.",
        ),
        ErrorHint(
            r"Expected all tensors to be on the same device",
            "A tensor was made on another device than the batch: create new tensors on the batch's device.",
        ),
    ],
    package=_EXPOSURE_PACKAGE,
    avoid=_EXPOSURE_AVOID,
)


# ---------------------------------------------------------------------------------------------- ch9.q2
def _half_way_case(spec: dict[str, Any]) -> Case:
    steps = [int(s) for s in spec["steps"]]
    if spec["seed"]:                       # a hidden seed adds three steps, from 0 to a million
        steps += torch.randint(0, 10**6, (3,), generator=spec_generator(spec)).tolist()
    return Case(f"steps {steps}", {"steps": steps}, spec, "the ratios your k gives, one per step")


def _ratio(step: int, k: Any) -> Any:
    """The teacher-forcing ratio k gives at `step` (the package's decay), or the problem with k in words."""
    if isinstance(k, bool) or not isinstance(k, Real):
        return k
    if not math.isfinite(k) or k <= 0:
        return f"k = {k}, not a positive decay constant"
    if step / k > 700:                     # the decay is 0 to every digit there (and exp would overflow)
        return 0.0
    return resolve("attn_course.training.loop.inverse_sigmoid_decay")(step, k=float(k))


def _half_way_call(answer: Any, inputs: dict[str, Any]) -> list[Any]:
    ks = [_k_at(answer, step) for step in inputs["steps"]]
    return [_ratio(step, k) for step, k in zip(inputs["steps"], ks, strict=True)]


def _k_at(answer: Any, step: int) -> Any:
    """The answer's k for `step`; an arithmetic error it raises says at which step ("... (in k_for_half(2))"),
    so that the check can tell a log of 0 at step 0 from an iteration that ran below k = 1 later."""
    try:
        return no_tensor_numbers(answer(step), "k_for_half")
    except (ArithmeticError, ValueError) as exc:
        exc.args = (f"{exc} (in k_for_half({step}))",)
        raise


# The mistakes of ch9.q2, each written as a learner writes it.
def k_equals_step(step):
    return float(step)


def k_searched_up_to_step(step):
    low, high = 1.0, max(1.0, float(step))
    for _ in range(200):
        middle = (low + high) / 2
        if middle * math.log(middle) < step:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def k_one_iteration(step):
    return step / math.log(step)


def k_log10(step):
    low, high = 1.0, step + 2.0
    for _ in range(200):
        middle = (low + high) / 2
        if middle * math.log10(middle) < step:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def k_one_step_late(step):
    low, high = 1.0, step + 3.0
    for _ in range(200):
        middle = (low + high) / 2
        if middle * math.log(middle) < step + 1:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def k_denominator_one(step):
    low, high = 1.0, step + 2.0
    for _ in range(200):
        middle = (low + high) / 2
        if 2 * middle - 1 - math.exp(min(step / middle, 700)) < 0:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _reference_half_way(inputs: dict[str, Any]) -> list[float]:
    return [0.5 for _ in inputs["steps"]]


HALF_WAY = Exercise(
    "ch9.q2",
    "k_for_half",
    "Scheduling scheduled sampling: the k that puts the teacher-forcing ratio at one half on a given step",
    solution='''
def k_for_half(step):
    """The decay constant k of scheduled sampling's inverse-sigmoid schedule eps_i = k / (k + exp(i / k))
    (Bengio et al. 2015, sec. 2.4) whose teacher-forcing ratio is exactly 1/2 at training step i = step.

    step: an int from 0 to 10**9. Returns k, a Python float >= 1, with eps_step = 1/2 to six significant
    digits.
    """
    # eps_i = 1/2  <=>  exp(i / k) = k  <=>  k ln k = i. k ln k grows from 0 (at k = 1) without bound, so the
    # root is unique and lies in [1, i + 2] (at k = i + 2, k ln k > i); there is no closed form with the usual
    # functions. Bisection on the logarithmic form (exp(i / k) overflows), to the last bit.
    low, high = 1.0, step + 2.0
    for _ in range(200):
        middle = (low + high) / 2
        if middle * math.log(middle) < step:
            low = middle
        else:
            high = middle
    return (low + high) / 2
''',
    hint=(
        "Set the ratio to one half and simplify until k appears on one side with a logarithm.",
        "The ratio is 1/2 where exp(i / k) = k, that is where k ln k = i. There is no closed form with the "
        "usual functions, but k ln k only grows for k of 1 or more, from 0 at k = 1, so exactly one k "
        "works and a search between two values that surely enclose it closes in on it. Mind the small "
        "steps: for i below e the root lies above i.",
        "Search the interval from 1 to i + 2 by halving it some 200 times, comparing k ln k with i (never "
        "exp of i / k, which overflows for a small trial k and a large step), and return the middle as a "
        "float.",
    ),
    covers="steps 0 (k = 1), 1 and 2 (k above the step), the chapter's 190 updates, a million and a billion",
    defaults={"seed": 0, "steps": [0, 5, 190]},
    specs=[
        {"steps": [0, 1, 2, 3]},
        {"steps": [10, 50, 189, 190]},
        {"steps": [1000, 12345]},
        {"steps": [10**6, 10**9]},
    ],
    build=_half_way_case,
    call=_half_way_call,
    reference=_reference_half_way,
    mistakes=[
        Mistake(
            "k = i is not the answer: the ratio is 1/2 where exp(i / k) = k, that is where k ln k = i.",
            wrong=k_equals_step,
        ),
        Mistake(
            "Your search interval [1, i] does not hold the root for small steps: when i < e, the k with "
            "k ln k = i is larger than i (1.76 for i = 1). Widen the upper end.",
            wrong=k_searched_up_to_step,
        ),
        Mistake(
            "That is one step of the iteration k = i / ln k, started at k = i: repeat it until k stops "
            "changing (or search for the root of k ln k = i).",
            wrong=k_one_iteration,
        ),
        Mistake(
            "The logarithm's base: exp(i / k) = k gives k ln k = i with the natural log, not log10 or log2.",
            wrong=k_log10,
        ),
        Mistake(
            "Your k puts the ratio at one half one step late (k ln k = i + 1): steps count from 0, and the "
            "ratio must be 1/2 at step i itself.",
            wrong=k_one_step_late,
        ),
        Mistake(
            "The decay's denominator is k + exp(i / k); with 1 + exp(i / k) you solved another equation "
            "(2k = 1 + exp(i / k)).",
            wrong=k_denominator_one,
        ),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(
            r"OverflowError",
            "exp(i / k) overflows for a small trial k and a large step: solve the equation in its "
            "logarithmic "
            "form (k ln k = i), which stays small.",
        ),
        ErrorHint(
            r"^(ValueError: math domain error|ZeroDivisionError: .*) \(in k_for_half\(0\)\)$",
            "At step 0 your code took the log of 0 or divided by ln 1 = 0: the answer there is k = 1, "
            "where ln k = 0; start any iteration or interval so that it never divides by ln k or takes the "
            "log of 0.",
        ),
        ErrorHint(
            r"^ZeroDivisionError: .*\(in k_for_half\([1-9][0-9]*\)\)$",
            "A division by ln k at a trial k of exactly 1 (ln 1 = 0), at a step above 0: an iteration "
            "started at k = i divides by ln 1 at step 1. k = 1 is the answer only at step 0: keep every "
            "trial above it.",
        ),
        ErrorHint(
            r"^ValueError: math domain error \(in k_for_half\([1-9][0-9]*\)\)$",
            "A trial k went to 0 or below (the log of a number <= 0 failed), at a step above 0: your "
            "iteration left k >= 1, where the root lies. The fixed-point iteration k = i / ln k does that "
            "for small steps: its swings grow (at the root its slope, -1 / ln k, is steeper than -1 when "
            "k < e) until k falls below 1, ln k turns negative, and the next k with it. Use a method whose "
            "every trial stays inside an interval that holds the root.",
        ),
    ],
)


# ---------------------------------------------------------------------------------------------- ch9.q3
#: The package functions that answer ch9.q3 (calling one is refused; the grading sandbox switches them off).
_SEED_NOISE_PACKAGE = [
    "attn_course.measure.significance.sign_test",
    "attn_course.measure.significance.compare",
    "attn_course.course.dynamics.paired",
    "attn_course.course.dynamics.compare",
]
#: Other package functions of the study's reading that the prompt asks to do without.
_SEED_NOISE_AVOID = [
    "attn_course.measure.significance.counts",
    "attn_course.measure.significance.bonferroni",
    "attn_course.measure.significance.t_interval",
]
#: The names of the three outputs, in messages.
_SEED_NOISE_NAMES = ("the differences", "the p-values", "which rows survive")


@functools.cache
def _committed_runs() -> tuple[dict[str, Any], ...]:
    """The runs of chapter 9's committed seed study (attn_course/course/results/dynamics_seeds.json)."""
    import json

    path = resolve("attn_course.course.RESULTS") / "dynamics_seeds.json"
    return tuple(json.loads(path.read_text(encoding="utf-8"))["runs"])


def _study_rows(which: Any) -> list[tuple[str, str, str]]:
    """(variant, baseline, measure) rows: "questions", the chapter's 20; "all", every variant x measure."""
    dynamics = resolve("attn_course.course.dynamics")
    every = [(v, b, m) for v, b in dynamics.BASELINES.items() for m in dynamics.MEASURES]
    if which == "questions":
        return [(v, dynamics.BASELINES[v], m) for v, m in dynamics.QUESTIONS]
    if which == "all":
        return every
    raise ValueError(f"rows must be 'questions' or 'all' for the committed study, got {which!r}")


def _synthetic_study(spec: dict[str, Any], gen: torch.Generator) -> tuple[list[dict[str, Any]], list[tuple]]:
    """A made-up study with the chapter's variants and measures: each seed's luck shared by all its runs, an
    effect on some (variant, measure) rows (none if spec["null"]), values rounded to spec["digits"]
    decimals (so that some differences tie), seeds that are not 0, 1, 2, ...; and spec["rows"] rows of it."""
    dynamics = resolve("attn_course.course.dynamics")
    every = _study_rows("all")
    count, num_seeds = spec_size(spec, "rows"), spec_size(spec, "num_seeds")
    if count > len(every):
        raise ValueError(f"rows must be at most {len(every)} for a synthetic study, got {count}")
    seeds = sorted(torch.randperm(40, generator=gen)[:num_seeds].tolist())
    measures = list(dynamics.MEASURES)
    variants = [*dynamics.BASELINES, *sorted(set(dynamics.BASELINES.values()))]
    luck = torch.randn(num_seeds, len(measures), generator=gen, dtype=torch.float64)
    sizes = torch.tensor([0.0, 0.0, 0.0, 0.4, -0.4, 1.5, -1.5], dtype=torch.float64)
    effect = sizes[torch.randint(0, len(sizes), (len(variants), len(measures)), generator=gen)]
    effect = effect * (not spec["null"])
    noise = 0.6 * torch.randn(len(variants), num_seeds, len(measures), generator=gen, dtype=torch.float64)
    runs = [
        {
            "seed": seed,
            "variant": variant,
            **{
                m: round(float(luck[s, j] + effect[v, j] + noise[v, s, j]), spec["digits"])
                for j, m in enumerate(measures)
            },
        }
        for v, variant in enumerate(variants)
        for s, seed in enumerate(seeds)
    ]
    picked = torch.randperm(len(every), generator=gen)[:count].tolist()
    return runs, [every[i] for i in picked]


def _seed_noise_case(spec: dict[str, Any]) -> Case:
    """A case of ch9.q3: the committed study or a made-up one, its runs shuffled, and the rows asked."""
    gen = spec_generator(spec)
    if spec["source"] == "committed":
        runs, rows = [dict(run) for run in _committed_runs()], _study_rows(spec["rows"])
        asked = "the chapter's {} questions" if spec["rows"] == "questions" else "all {} rows"
        seeds = len({r["seed"] for r in runs})
        what = f"chapter 9's committed study ({seeds} seeds), {asked.format(len(rows))}"
    elif spec["source"] == "synthetic":
        runs, rows = _synthetic_study(spec, gen)
        what = (
            f"a made-up study of {spec['num_seeds']} seeds {sorted({r['seed'] for r in runs})}, "
            f"{len(rows)} rows, {'no change doing anything, ' if spec['null'] else ''}"
            f"values rounded to the nearest {10.0 ** -spec['digits']:g}"
        )
    else:
        raise ValueError(f"source must be 'committed' or 'synthetic', got {spec['source']!r}")
    order = torch.randperm(len(runs), generator=gen).tolist()  # the runs in no particular order
    runs = [runs[i] for i in order]
    return Case(f"{what}; the runs in shuffled order", {"runs": runs, "rows": rows}, spec, _SEED_NOISE_NAMES)


def _no_tensors(value: Any, what: str) -> None:
    """TypeError if `value` holds a torch.Tensor anywhere (lists and tuples searched)."""
    if isinstance(value, torch.Tensor):
        raise TypeError(f"{what} returned a torch.Tensor where a Python number is asked")
    if isinstance(value, (tuple, list)):
        for item in value:
            _no_tensors(item, what)


def _seed_noise_call(answer: Any, inputs: dict[str, Any]) -> Any:
    """The answer's (differences, p_values, survives) on the case; tensors anywhere in them are refused."""
    output = answer(inputs["runs"], inputs["rows"])
    _no_tensors(output, "sign_test_rows")
    return output


def _reference_seed_noise(inputs: dict[str, Any]) -> tuple[list[list[float]], list[float], list[bool]]:
    """The package's reading: `dynamics.paired` differences, `significance.sign_test`, and each row kept when
    its p-value is below 1 - `significance.bonferroni`(0.95, number of rows)."""
    dynamics = resolve("attn_course.course.dynamics")
    significance = resolve("attn_course.measure.significance")
    alpha = 1 - significance.bonferroni(0.95, len(inputs["rows"]))
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in inputs["rows"]:
        if dynamics.BASELINES.get(variant) != baseline:
            raise ValueError(
                f"row ({variant!r}, {baseline!r}, {measure!r}): the study's baseline of "
                f"{variant!r} is {dynamics.BASELINES.get(variant)!r}"
            )
        paired = list(dynamics.paired(inputs["runs"], variant, measure).values())
        p = significance.sign_test(paired) if paired else 1.0
        differences.append(paired)
        p_values.append(p)
        survives.append(p < alpha)
    return differences, p_values, survives


_SEED_NOISE_SOLUTION = '''
def sign_test_rows(runs, rows):
    """Real effect, or seed noise? For each row asked of a seed study: the paired differences over the
    seeds, the sign test's p-value, and whether the row survives when all the rows are read together.

    runs: a list of dicts in any order, one per training run, each with "seed" (an int), "variant" (a
    str) and one Python float per measure ("bleu", "gap", ...); every variant has one run per seed.
    rows: a list of (variant, baseline, measure) triples, the questions asked of the study.
    Returns (differences, p_values, survives), three lists with one item per row: differences[r], the
    variant's measure minus the baseline's, seed by seed in increasing seed order (Python floats);
    p_values[r], the two-sided sign test of those differences, where a difference of exactly 0 is
    evidence for neither side (1.0 when every difference is 0); survives[r], True when the row stays
    significant at 95 % with all len(rows) rows asked together (Bonferroni), else False.
    """
    run = {(r["variant"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    differences, p_values, survives = [], [], []
    for variant, baseline, measure in rows:
        # Paired: the change and its baseline trained with the same seed share its start and its batches.
        paired = [run[variant, s][measure] - run[baseline, s][measure] for s in seeds]
        up, down = sum(d > 0 for d in paired), sum(d < 0 for d in paired)        # a tie is neither
        n, fewer = up + down, min(up, down)
        # If the change did nothing, up ~ Binomial(n, 1/2): two-sided, both tails, at most 1.
        p = min(1.0, 2 * sum(math.comb(n, k) for k in range(fewer + 1)) / 2**n)
        differences.append(paired)
        p_values.append(p)
        survives.append(p < 0.05 / len(rows))     # Bonferroni: all the rows hold together at 95 %
    return differences, p_values, survives
'''


def _seed_noise_mistake(name: str, *edits: tuple[str, str]) -> Any:
    """A mistake of ch9.q3 written as an edit of its model answer."""
    return edit_of(
        _SEED_NOISE_SOLUTION, "sign_test_rows", *edits, namespace={"math": math, "torch": torch}, rename=name
    )


_PAIRED = "paired = [run[variant, s][measure] - run[baseline, s][measure] for s in seeds]"
_P = "p = min(1.0, 2 * sum(math.comb(n, k) for k in range(fewer + 1)) / 2**n)"
_SURVIVES = "survives.append(p < 0.05 / len(rows))"
_TIES_HINT = (
    "Ties were counted: a difference of exactly 0 is evidence for neither side, so it is neither "
    "an up nor a down, and the fair coin is tossed only for the nonzero differences."
)
_ONE_SIDED_HINT = (
    "That is a one-sided p-value: the question is whether the change moved the measure either "
    "way, so count the splits at least as uneven on both sides: twice the smaller tail, at "
    "most 1 (two-sided)."
)
_UNPAIRED_HINT = (
    "Your differences do not pair each variant run with the baseline run of the same seed: the "
    "two share that seed's initial weights and batch order, and only the same seed's runs "
    "cancel its luck. Match them by seed, whatever order the runs come in."
)

rows_unpaired = _seed_noise_mistake(
    "rows_unpaired",
    (
        _PAIRED,
        (
            'paired = [a[measure] - b[measure] for a, b in zip([r for r in runs if r["variant"] == variant], '
            '[r for r in runs if r["variant"] == baseline])]'
        ),
    ),
)
rows_against_the_baselines_mean = _seed_noise_mistake(
    "rows_against_the_baselines_mean",
    (
        _PAIRED,
        (
            "paired = [run[variant, s][measure] - sum(run[baseline, t][measure] for t in seeds) / len(seeds) "
            "for s in seeds]"
        ),
    ),
)
rows_baseline_minus_variant = _seed_noise_mistake(
    "rows_baseline_minus_variant",
    (_PAIRED, ("paired = [run[baseline, s][measure] - run[variant, s][measure] for s in seeds]")),
)
rows_in_run_order = _seed_noise_mistake(
    "rows_in_run_order",
    (
        _PAIRED,
        (
            'paired = [r[measure] - run[baseline, r["seed"]][measure] for r in runs '
            'if r["variant"] == variant]'
        ),
    ),
)
rows_not_corrected = _seed_noise_mistake("rows_not_corrected", (_SURVIVES, "survives.append(p < 0.05)"))
rows_correction_multiplied = _seed_noise_mistake(
    "rows_correction_multiplied", (_SURVIVES, "survives.append(p < 0.05 * len(rows))")
)
rows_one_tail = _seed_noise_mistake(
    "rows_one_tail", (_P, "p = sum(math.comb(n, k) for k in range(fewer + 1)) / 2**n")
)
rows_rises_only = _seed_noise_mistake(
    "rows_rises_only", (_P, "p = sum(math.comb(n, k) for k in range(up, n + 1)) / 2**n")
)
rows_tie_as_a_fall = _seed_noise_mistake(
    "rows_tie_as_a_fall",
    (
        "up, down = sum(d > 0 for d in paired), sum(d < 0 for d in paired)",
        "up, down = sum(d > 0 for d in paired), sum(d <= 0 for d in paired)",
    ),
)
rows_ties_tossed = _seed_noise_mistake(
    "rows_ties_tossed", ("n, fewer = up + down, min(up, down)", "n, fewer = len(paired), min(up, down)")
)
rows_p_above_one = _seed_noise_mistake(
    "rows_p_above_one", (_P, "p = 2 * sum(math.comb(n, k) for k in range(fewer + 1)) / 2**n")
)


SEED_NOISE = Exercise(
    "ch9.q3",
    "sign_test_rows",
    "Real effect, or seed noise? Paired differences over seeds, the sign test, and many questions at once",
    solution=_SEED_NOISE_SOLUTION,
    hint=(
        "Three steps per row: set each variant run against its baseline run of the same seed, keep only the "
        "sign of each difference, then ask how surprising such a split would be from a fair coin, with all "
        "the rows asked at once in mind.",
        "Pairing cancels the luck two runs of one seed share. The sign test: if the change did nothing, each "
        "nonzero difference is a fair coin's toss, so the number of ups is binomial with p = 1/2 over the "
        "nonzero differences, and the two-sided p-value counts every split at least as uneven, either way. "
        "With m rows asked, each must clear 0.05 / m (Bonferroni) for all of them to hold together at 95 %.",
        "The p-value line: twice the probability of the smaller side's count or fewer among the nonzero "
        "differences (binomial coefficients over 2 to the n), capped at 1; the survival line compares it "
        "with 0.05 divided by the number of rows.",
    ),
    covers="chapter 9's committed study, its 20 questions and all 50 rows; made-up studies of 5 to 12 seeds "
    "with ties, seeds out of order, real and null effects, 6 to 50 rows",
    defaults={"seed": 0, "source": "synthetic", "rows": 20, "num_seeds": 12, "null": False, "digits": 2},
    specs=[
        {"seed": 1, "source": "committed", "rows": "questions"},
        {"seed": 2, "source": "committed", "rows": "all"},
        {"seed": 3, "rows": 20, "digits": 1},
        {"seed": 4, "rows": 50, "null": True, "digits": 3},
        {"seed": 5, "rows": 6, "num_seeds": 5, "digits": 0},
    ],
    build=_seed_noise_case,
    call=_seed_noise_call,
    reference=_reference_seed_noise,
    mistakes=[
        Mistake(_UNPAIRED_HINT, wrong=rows_unpaired),
        Mistake(
            "You took each run minus the baseline's mean over the seeds: that is not a paired "
            "difference. Set each seed's variant run against the baseline run of the same seed, so that "
            "the luck the two share cancels.",
            wrong=rows_against_the_baselines_mean,
        ),
        Mistake(
            "Your differences are baseline minus variant: the study reads variant minus baseline, so "
            "that a change that raises the measure gives positive differences.",
            wrong=rows_baseline_minus_variant,
        ),
        Mistake(
            "Your differences are right but not in increasing seed order: list them seed by seed, the "
            "smallest seed first, whatever order the runs come in.",
            wrong=rows_in_run_order,
        ),
        Mistake(
            "Rows survive at p < 0.05, as if each were the only question: with m rows asked, each must "
            "clear 0.05 / m (Bonferroni) for all of them to hold together at 95 %. Uncorrected, 50 rows "
            "of pure noise let through two or three.",
            wrong=rows_not_corrected,
        ),
        Mistake(
            "The correction goes the other way: more questions must make each row's test stricter, so "
            "divide 0.05 by the number of rows; multiplied, almost every row survives.",
            wrong=rows_correction_multiplied,
        ),
        Mistake(_ONE_SIDED_HINT, wrong=rows_one_tail),
        Mistake(_ONE_SIDED_HINT, wrong=rows_rises_only),
        Mistake(_TIES_HINT, wrong=rows_tie_as_a_fall),
        Mistake(_TIES_HINT, wrong=rows_ties_tossed),
        Mistake(
            "A p-value above 1: when the ups and downs split evenly, twice the smaller tail counts the "
            "middle split twice and passes 1; a probability is capped at 1.",
            wrong=rows_p_above_one,
        ),
    ],
    error_hints=[
        TENSOR_NUMBER_HINT,
        ErrorHint(
            r"^KeyError",
            "A run your code looked up is not there: read each run's seed, variant and measure from "
            "its own keys, and take the seeds from the runs themselves (they need not be 0, 1, 2, "
            "...).",
        ),
        ErrorHint(
            r"ZeroDivisionError",
            "A division by 0: a row whose differences are all 0 has no nonzero difference to toss a "
            "coin for; its p-value is 1.",
        ),
    ],
    package=_SEED_NOISE_PACKAGE,
    avoid=_SEED_NOISE_AVOID,
)
