"""Chapter 9's exercises, training dynamics: the exposure gap measured by hand, the free-running accuracy of
a small trained model position by position (ch9.q1), and the decay constant k of scheduled sampling's
inverse sigmoid that puts the teacher-forcing ratio at one half on a chosen step (ch9.q2).

Each exercise is an `Exercise` with its cases, its reference (the package's
`attn_course.measure.evaluation.accuracy_by_position`; the decay
`attn_course.training.loop.inverse_sigmoid_decay`) and its known mistakes, each written as the wrong answer
that makes it; an answer that calls the package's versions is refused by `Exercise` itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict
from numbers import Real
from typing import Any

import torch

from attn_course_exercises.core import Case, ErrorHint, Exercise, Mistake, resolve
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
    batch = resolve("attn_course.data.tasks.make_batch")([data.test[i] for i in picked], data.src_vocab,
                                                   data.tgt_vocab)
    inputs = {"config": config, "state_dict": {k: v.to(dtype) if v.is_floating_point() else v
                                               for k, v in state.items()},
              "batch": dict(batch._asdict()), "picked": picked}
    label = (f"the {spec['model']} model ({spec['dtype']}) on {size} test sentences, tgt_valid_lens "
             f"{batch.tgt_valid_lens.tolist()}")
    return Case(label, inputs, spec, ("the accuracy by position", "the count by position"))


def exposure_batch(inputs: dict[str, Any]) -> Any:
    """The case's batch, an `attn_course.data.tasks.Batch`."""
    return resolve("attn_course.data.tasks.Batch")(**inputs["batch"])


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
    hint="Step the decoder one word at a time, as chapter 9's scheduled sampling does, but with the coin "
    "always tails: what each step reads is decided by the step before it. Score a position only for the "
    "sentences that are still real there, and count them; both lists hold plain Python numbers.",
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
    ks = [no_tensor_numbers(answer(step), "k_for_half") for step in inputs["steps"]]
    return [_ratio(step, k) for step, k in zip(inputs["steps"], ks, strict=True)]


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
    """The decay constant k >= 1 whose inverse-sigmoid ratio eps_i = k / (k + exp(i / k)) (Bengio et al.
    2015, sec. 2.4) is exactly 1/2 at training step i = step (an int >= 0). Returns a Python float.

    eps_i = 1/2  <=>  exp(i / k) = k  <=>  k ln k = i: k ln k grows from 0 (at k = 1) without bound, so
    the root is unique and lies in [1, i + 2] (at k = i + 2, k ln k > i). Bisection, to the last bit.
    """
    low, high = 1.0, step + 2.0
    for _ in range(200):
        middle = (low + high) / 2
        if middle * math.log(middle) < step:
            low = middle
        else:
            high = middle
    return (low + high) / 2
''',
    hint="Set the ratio to one half and simplify until k appears on one side with a logarithm. The equation "
    "has no closed form with the usual functions, but one side only grows with k for k of 1 or more, so a "
    "search between two values that surely enclose the root closes in on it; check the small steps (0, 1, "
    "2) as well as the large ones, and return a float.",
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
            r"ZeroDivisionError|math domain error",
            "A log of 0 or a division by log 1 = 0: at step 0 the answer is k = 1, where ln k = 0; start any "
            "iteration or interval so that it never divides by ln k or takes the log of 0.",
        ),
    ],
)
