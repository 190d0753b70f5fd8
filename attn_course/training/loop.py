"""Training a seq2seq model: masked cross-entropy, teacher forcing or scheduled sampling, Adam, warm-up
and the Noam schedule, clipping, initialisation schemes, checkpoints.

    history = train(model, loader, TrainConfig(epochs=4, lr=4e-3), val_loader=..., callback=...)
    history = train(model, loader, TrainConfig(epochs=5, teacher_forcing=Decay("inverse_sigmoid", k=50),
                                               warmup_steps=20))   # scheduled sampling, warm-up (chapter 9)
    history = train(model, loader, TrainConfig(teacher_forcing=0.75, coin="sequence", feed="sample",
                                               lr=1.0, lr_schedule=Noam(d_model=32, warmup_steps=30)))

How to train is one value, a `TrainConfig`, checked when it is made; `train` takes it whole. `train` moves
the model and every batch to the device (CUDA when present), shows a tqdm.auto progress bar, and calls
``callback(epoch, history, model)`` after each epoch: the hook a notebook uses to redraw a live
loss/validation plot (return True from it to stop early).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from attn_course.models.modes import eval_mode
from attn_course.models.seq2seq import ModelConfig, Seq2Seq
from attn_course.training.runtime import get_device, seed_everything
from attn_course.validation import (
    check_floating,
    check_int,
    check_number,
    check_shape,
    check_tensor,
    check_tokens,
    check_valid_lens,
)

#: The checkpoint layout: format 2 records `dataclasses.asdict` of the model's `ModelConfig` (format 1, before
#: it, recorded each module's arguments); a file of another format is refused with a clear error.
CHECKPOINT_FORMAT = "attn_course.seq2seq/2"

Callback = Callable[[int, "History", Seq2Seq], "bool | None"]
#: A teacher-forcing ratio in [0, 1], or a schedule: a callable from the global optimizer step (0, 1, ...)
#: to the ratio at that step.
TeacherForcing = float | Callable[[int], float]
INIT_SCHEMES = ("torch", "xavier", "orthogonal")
#: Scheduled sampling's coin: one per sentence and word ("word", Bengio et al. 2015) or one per sentence,
#: kept for all its words ("sequence"). What a tails feeds: the previous step's argmax or a word sampled
#: from its softmax ("sample", Bengio et al. 2015, sec. 2.4).
COINS = ("word", "sequence")
FEEDS = ("argmax", "sample")


# ------------------------------------------------------------------------------ scheduled sampling's decays
def linear_decay(step: int, *, c: float, k: float = 1.0, epsilon: float = 0.0) -> float:
    """Teacher-forcing ratio eps_i = max(epsilon, k - c i) at step i (Bengio et al. 2015, sec. 2.4)."""
    check_int("step", step, low=0)
    return max(epsilon, k - c * step)


def exponential_decay(step: int, *, k: float) -> float:
    """Teacher-forcing ratio eps_i = k^i at step i, k < 1 (Bengio et al. 2015, sec. 2.4)."""
    check_int("step", step, low=0)
    return k**step


def inverse_sigmoid_decay(step: int, *, k: float) -> float:
    """Teacher-forcing ratio eps_i = k / (k + exp(i / k)) at step i, k >= 1 (Bengio et al. 2015, sec. 2.4).

    Starts near 1 (k / (k + 1) at i = 0), stays there for about k log k steps, then falls to 0.
    """
    check_int("step", step, low=0)
    ratio = step / k
    return 0.0 if ratio > 700 else k / (k + math.exp(ratio))  # exp overflows past ~709


_DECAYS = {"linear": linear_decay, "exponential": exponential_decay, "inverse_sigmoid": inverse_sigmoid_decay}


@dataclass(frozen=True)
class Decay:
    """One of Bengio et al. 2015's decays as a value a `TrainConfig` (and a checkpoint) can record.

    kind: "linear" (max(epsilon, k - c i)), "exponential" (k^i, k < 1) or "inverse_sigmoid"
    (k / (k + exp(i / k)), k >= 1). Calling it with the step i gives the teacher-forcing ratio.
    """

    kind: str
    k: float
    c: float = 0.0
    epsilon: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in _DECAYS:
            raise ValueError(f"kind={self.kind!r}, expected one of {sorted(_DECAYS)}")
        if self.kind == "exponential":
            check_number("k", self.k, low=0, high=1, low_open=True)
        elif self.kind == "inverse_sigmoid":
            check_number("k", self.k, low=1)
        else:
            check_number("epsilon", self.epsilon, low=0, high=1)
            check_number("c", self.c, low=0)

    def __call__(self, step: int) -> float:
        if self.kind == "linear":
            return linear_decay(step, c=self.c, k=self.k, epsilon=self.epsilon)
        return _DECAYS[self.kind](step, k=self.k)


# ------------------------------------------------------------------------------ learning-rate schedules
def noam_rate(step: int, *, d_model: int, warmup_steps: int) -> float:
    """The Transformer's learning rate at optimizer step `step` (0-based), Vaswani et al. 2017, eq. 3:
    d_model^-0.5 * min(n^-0.5, n * warmup_steps^-1.5) with n = step + 1 (the paper counts from 1).

    A linear ramp up to n = warmup_steps, where it peaks at (d_model * warmup_steps)^-0.5, then a decay
    as 1 / sqrt(n).
    """
    check_int("step", step, low=0)
    check_int("d_model", d_model, low=1)
    check_int("warmup_steps", warmup_steps, low=1)
    n = step + 1
    return d_model**-0.5 * min(n**-0.5, n * warmup_steps**-1.5)


@dataclass(frozen=True)
class Noam:
    """`noam_rate` as a value a `TrainConfig` can record; calling it with the step gives the rate.

    As `train(..., lr_schedule=Noam(...))` it multiplies `lr`: lr = 1 is the paper's schedule, another lr
    scales it (`peak` is its largest value, reached at step warmup_steps - 1).
    """

    d_model: int
    warmup_steps: int

    def __post_init__(self) -> None:
        check_int("d_model", self.d_model, low=1)
        check_int("warmup_steps", self.warmup_steps, low=1)

    @property
    def peak(self) -> float:
        return (self.d_model * self.warmup_steps) ** -0.5

    def __call__(self, step: int) -> float:
        return noam_rate(step, d_model=self.d_model, warmup_steps=self.warmup_steps)


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained; `train(model, loader, config)` reads every field but batch_size, which is
    for whoever batches the data (`attn_course.course.chapters.fit`). Checked when made.

    epochs: passes over the loader. batch_size: sentence pairs per batch. lr: Adam's learning rate.
    lr_decay (in (0, 1], None: a constant rate): the rate is multiplied by it after every epoch (torch's
    ExponentialLR), so a short run takes large steps first and settles later. clip (> 0, None: not
    clipped): the global gradient norm is clipped to it. teacher_forcing: the probability that a step is
    fed the gold previous word, a ratio in [0, 1] or a schedule, global step -> ratio (a `Decay`); 1 is
    plain teacher forcing, below 1 scheduled sampling (`scheduled_sampling_logits`, Bengio et al. 2015).
    coin: "word" (a coin per sentence and word) or "sequence" (one per sentence, kept). feed: what a tails
    feeds, the model's argmax ("argmax") or a sample of its softmax ("sample"). warmup_steps N (>= 1,
    None: no warm-up): update i (0-based) uses the rate times min(1, (i + 1) / N), on top of lr_decay.
    lr_schedule (None: 1): update i's rate is also multiplied by lr_schedule(i) (`Noam`, with lr = 1).
    """

    epochs: int = 12
    batch_size: int = 64
    lr: float = 5e-3
    lr_decay: float | None = None
    clip: float | None = 1.0
    teacher_forcing: TeacherForcing = 1.0
    warmup_steps: int | None = None
    coin: str = "word"
    feed: str = "argmax"
    lr_schedule: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs, low=0)
        check_int("batch_size", self.batch_size, low=1)
        check_number("lr", self.lr, low=0, low_open=True)
        if self.lr_decay is not None:
            check_number("lr_decay", self.lr_decay, low=0, high=1, low_open=True)  # a factor per epoch
        if self.clip is not None:
            check_number("clip", self.clip, low=0, low_open=True)  # a gradient norm
        if not callable(self.teacher_forcing):
            check_number("teacher_forcing", self.teacher_forcing, low=0, high=1)  # a probability
        if self.warmup_steps is not None:
            check_int("warmup_steps", self.warmup_steps, low=1)
        _check_sampling(self.coin, self.feed)
        if self.lr_schedule is not None and not callable(self.lr_schedule):
            raise ValueError(f"lr_schedule={self.lr_schedule!r}, expected None or a callable step -> factor "
                             "(e.g. Noam)")


def masked_cross_entropy(logits: Tensor, tgt_out: Tensor, tgt_valid_lens: Tensor, *,
                         reduction: str = "mean") -> Tensor:
    """Cross-entropy over the real target tokens only; padding positions contribute nothing.

    logits: (batch_size, T, vocab_size) floating; tgt_out: (batch_size, T) long labels;
    tgt_valid_lens: (batch_size,) integer in [0, T], real tokens per sentence (<eos> included).
    Returns a scalar: the mean over real tokens (reduction="mean", the training loss; exp of it is the
    perplexity) or their sum (reduction="sum", to average over a whole data set).
    -log p(y_t | y_<t, x) summed over t < len_i (the negative log of Bahdanau et al. 2014, eq. 2), divided
    by sum_i len_i.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction={reduction!r}, expected 'mean' or 'sum'")
    check_floating("logits", logits)
    check_shape("logits", logits, {"batch_size": None, "T": None, "vocab_size": None})
    batch_size, num_steps, _ = logits.shape
    check_tokens("tgt_out", tgt_out, batch_size)
    check_shape("tgt_out", tgt_out, {"batch_size": batch_size, "T": num_steps})
    check_tensor("tgt_valid_lens", tgt_valid_lens)
    check_valid_lens(tgt_valid_lens, batch_size, None, num_steps, low=0, per_query=False, upper="T",
                     name="tgt_valid_lens")
    lens = tgt_valid_lens.to(logits.device)
    real = torch.arange(num_steps, device=logits.device)[None] < lens[:, None]     # (B, T)
    num_tokens = int(real.sum())
    if reduction == "mean" and num_tokens == 0:
        raise ValueError("tgt_valid_lens sums to 0: there are no real tokens to average the loss over")
    # Padding labels may be any id (even out of range for a tiny vocabulary): replace them before the loss.
    labels = tgt_out.to(logits.device).masked_fill(~real, 0)
    losses = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")     # (B, T)
    total = losses.masked_fill(~real, 0.0).sum()
    return total / num_tokens if reduction == "mean" else total


def _unpack(batch: Any, device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens) on `device`, from a data.Batch or a tuple."""
    names = ("src", "src_valid_lens", "tgt_in", "tgt_out", "tgt_valid_lens")
    if all(hasattr(batch, name) for name in names):
        tensors = [getattr(batch, name) for name in names]
    elif isinstance(batch, (tuple, list)) and len(batch) >= 5:
        tensors = list(batch[:5])
    else:
        raise ValueError(f"a batch must have the fields {names} (attn_course.data.tasks.Batch), "
                         f"got {type(batch).__name__}")
    return tuple(t.to(device, non_blocking=True) for t in tensors)


@dataclass
class History:
    """What happened during `train`, epoch by epoch (and batch by batch for the loss).

    train_loss / val_loss: mean cross-entropy per real target token (nats); exp() is the perplexity.
    seconds / cpu_seconds: wall-clock and process CPU time of each epoch (validation included).
    Per optimizer step: step_loss, grad_norm (the global gradient norm before clipping, what
    `clip_grad_norm_` returns; measured also when nothing is clipped), lr (the learning rate of the step,
    warm-up included) and teacher_forcing (the ratio the step was trained with).
    """

    step_loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    teacher_forcing: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)

    @property
    def train_perplexity(self) -> list[float]:
        return [math.exp(loss) for loss in self.train_loss]

    @property
    def val_perplexity(self) -> list[float]:
        return [math.exp(loss) for loss in self.val_loss]


@torch.no_grad()
def evaluate_loss(model: Seq2Seq, loader: Iterable, *, device: torch.device | str | None = None) -> float:
    """Mean cross-entropy per real target token over a whole loader (teacher forcing, eval mode)."""
    device = get_device() if device is None else torch.device(device)
    model.to(device)
    total, tokens = 0.0, 0
    # No gradients here: an RNN model's attention scores take their faster form (attn_course.attention.fast)
    options = {"fast_scores": True} if isinstance(model, Seq2Seq) else {}
    with eval_mode(model):
        for batch in loader:
            src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens = _unpack(batch, device)
            logits, _ = model(src, src_valid_lens, tgt_in, **options)
            total += float(masked_cross_entropy(logits, tgt_out, tgt_valid_lens, reduction="sum"))
            tokens += int(tgt_valid_lens.sum())
    if tokens == 0:
        raise ValueError("loader yielded no target tokens: cannot average the loss")
    return total / tokens


def train(model: Seq2Seq, loader: Iterable, config: TrainConfig, *, val_loader: Iterable | None = None,
          device: torch.device | str | None = None, seed: int | None = None,
          optimizer: torch.optim.Optimizer | None = None, callback: Callback | None = None,
          progress: bool = True) -> History:
    """Train `model` on `loader` as `config` says: Adam on the masked cross-entropy; returns the History.

    loader yields batches with src (B, S), src_valid_lens (B,), tgt_in (B, T), tgt_out (B, T),
    tgt_valid_lens (B,) (attn_course.data.tasks.Batch); the decoder reads tgt_in = <bos> y_1 ... (teacher
    forcing, or scheduled sampling when config.teacher_forcing is below 1) and is scored on
    tgt_out = y_1 ... <eos>. val_loader: its loss is recorded after every epoch. The model and batches
    move to `device` (default: CUDA when present). seed (optional) seeds torch/NumPy/random first, for
    reproducible dropout; scheduled sampling's coins and samples come from a torch.Generator seeded with
    it (0 when None), so the global random state is left alone. optimizer defaults to Adam(config.lr);
    pass one to continue training with its state. callback(epoch, history, model), after every epoch: a
    live plot, a BLEU check...; returning True stops training. The model is left in eval mode.
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config is a {type(config).__name__}, expected a TrainConfig: "
                         "train(model, loader, TrainConfig(epochs=..., lr=...))")
    if seed is not None:
        seed_everything(seed)
    device = get_device() if device is None else torch.device(device)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr) if optimizer is None else optimizer
    scheduler = None
    if config.lr_decay is not None:                      # the rate times lr_decay after every epoch
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, config.lr_decay)
    schedule = _Schedule(config, torch.Generator().manual_seed(seed or 0))
    history = History()
    bar = _progress_bar(loader, config.epochs, progress)
    try:
        for epoch in range(config.epochs):
            wall, cpu = time.perf_counter(), time.process_time()
            train_loss = _train_epoch(model, loader, optimizer, device, bar, epoch, schedule, history)
            history.train_loss.append(train_loss)
            if scheduler is not None:
                scheduler.step()
            if val_loader is not None:
                history.val_loss.append(evaluate_loss(model, val_loader, device=device))
            history.seconds.append(time.perf_counter() - wall)
            history.cpu_seconds.append(time.process_time() - cpu)
            if callback is not None and callback(epoch, history, model):
                break
    finally:
        bar.close()
    model.eval()
    return history


def _check_sampling(coin: str, feed: str) -> None:
    if coin not in COINS:
        raise ValueError(f"coin={coin!r}, expected one of {COINS}")
    if feed not in FEEDS:
        raise ValueError(f"feed={feed!r}, expected one of {FEEDS}")


@dataclass
class _Schedule:
    """What changes from one optimizer step to the next under `config`: the teacher-forcing ratio and the
    factor on the learning rate (warm-up times lr_schedule); scheduled sampling draws from `generator`."""

    config: TrainConfig
    generator: torch.Generator
    step: int = 0

    def ratio(self) -> float:
        teacher_forcing = self.config.teacher_forcing
        if not callable(teacher_forcing):
            return float(teacher_forcing)
        return check_number("teacher_forcing(step)", teacher_forcing(self.step), low=0, high=1)

    def rate_factor(self) -> float:
        factor = warmup_factor(self.step, self.config.warmup_steps)
        if self.config.lr_schedule is None:
            return factor
        return factor * check_number("lr_schedule(step)", self.config.lr_schedule(self.step), low=0)


def warmup_factor(step: int, warmup_steps: int | None) -> float:
    """The factor linear warm-up puts on the learning rate of optimizer step `step` (0-based):
    min(1, (step + 1) / warmup_steps), rising from 1 / warmup_steps to 1; 1 when warmup_steps is None."""
    check_int("step", step, low=0)
    if warmup_steps is None:
        return 1.0
    return min(1.0, (step + 1) / check_int("warmup_steps", warmup_steps, low=1))


def _progress_bar(loader: Iterable, epochs: int, progress: bool) -> tqdm:
    """A bar over every batch of every epoch (no total when the loader has no length)."""
    try:
        num_batches = len(loader)
    except TypeError:
        num_batches = None
    # Redrawn at most twice a second: in a notebook every redraw is a widget message, and a kernel that
    # sends thousands of them during one cell can lose messages (ZMQ's high-water mark) before a front
    # end such as nbval, which reads them only when the cell ends, gets to them.
    return tqdm(total=None if num_batches is None else epochs * num_batches, disable=not progress,
                leave=False, desc="training", unit="batch", mininterval=0.5)


def scheduled_sampling_logits(model: Seq2Seq, src: Tensor, src_valid_lens: Tensor, tgt_in: Tensor,
                              ratio: float, generator: torch.Generator | None = None, *,
                              coin: str = "word", feed: str = "argmax") -> Tensor:
    """Decoder logits when each step is fed the gold word with probability `ratio`, else the model's own.

    src (batch_size, S) long, src_valid_lens (batch_size,) long, tgt_in (batch_size, T) long, starting
    with <bos>; returns logits (batch_size, T, vocab_size). Step 0 reads <bos>; at step t > 0 a coin with
    P(heads) = ratio picks tgt_in[:, t] (heads) or the model's word from step t - 1's logits (tails), which
    carries no gradient (Bengio et al. 2015, sec. 2.4). coin="word": a coin per sentence at every step;
    "sequence": one coin per sentence, drawn before step 1 and kept, so each sentence is either teacher
    forced or free running throughout. feed="argmax": the model's word is the argmax; "sample": a draw
    from softmax(logits), as Bengio et al. do. Coins, then samples, are drawn at each step from
    `generator` (on the CPU; None: torch's global generator). ratio = 1 is teacher forcing step by step,
    ratio = 0 free running (never stopping early); neither draws a coin.
    """
    check_number("ratio", ratio, low=0, high=1)
    check_tokens("tgt_in", tgt_in, src.shape[0])
    _check_sampling(coin, feed)
    decoder = model.decoder
    state = decoder.init_state(model.encode(src, src_valid_lens))
    y, logits = tgt_in[:, 0], []
    kept = _coins(tgt_in.shape[0], ratio, generator) if coin == "sequence" else None
    for t in range(tgt_in.shape[1]):
        if t > 0:
            coins = kept if coin == "sequence" else _coins(tgt_in.shape[0], ratio, generator)
            y = _next_inputs(tgt_in[:, t], logits[-1].detach(), ratio, coins, feed, generator)
        step_logits, state, _ = decoder.step(y, state)
        logits.append(step_logits)
    return torch.stack(logits, 1)


def _coins(batch_size: int, ratio: float, generator: torch.Generator | None) -> Tensor | None:
    """batch_size uniform draws in [0, 1) on the CPU; None at ratio 0 or 1, where no coin is needed."""
    return None if ratio <= 0 or ratio >= 1 else torch.rand(batch_size, generator=generator)


def _next_inputs(gold: Tensor, previous: Tensor, ratio: float, coins: Tensor | None, feed: str,
                 generator: torch.Generator | None) -> Tensor:
    """Per sentence, gold (batch_size,) where its coin < ratio, else the model's word from `previous`
    logits (batch_size, vocab_size): their argmax or a sample from their softmax."""
    if ratio >= 1:
        return gold
    if feed == "argmax":
        predicted = previous.argmax(-1)
    else:
        probs = previous.float().softmax(-1).cpu()
        predicted = torch.multinomial(probs, 1, generator=generator)[:, 0].to(gold.device)
    if ratio <= 0:
        return predicted
    return torch.where(coins.to(gold.device) < ratio, gold, predicted)


def _train_epoch(model: Seq2Seq, loader: Iterable, optimizer: torch.optim.Optimizer, device: torch.device,
                 bar: tqdm, epoch: int, schedule: _Schedule, history: History) -> float:
    """One pass over `loader`, every step recorded in `history`; returns the epoch's mean loss per real
    target token."""
    model.train()
    total, tokens = 0.0, 0
    for batch in loader:
        src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens = _unpack(batch, device)
        ratio = schedule.ratio()
        if ratio >= 1:
            logits, _ = model(src, src_valid_lens, tgt_in)   # teacher forcing: the fast path
        else:
            logits = scheduled_sampling_logits(model, src, src_valid_lens, tgt_in, ratio, schedule.generator,
                                               coin=schedule.config.coin, feed=schedule.config.feed)
        loss = masked_cross_entropy(logits, tgt_out, tgt_valid_lens)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        history.grad_norm.append(float(_clip(model, schedule.config.clip)))
        history.lr.append(_step(optimizer, schedule.rate_factor()))
        history.teacher_forcing.append(ratio)
        schedule.step += 1
        n, value = int(tgt_valid_lens.sum()), loss.item()
        history.step_loss.append(value)
        total, tokens = total + value * n, tokens + n
        bar.update(1)
        bar.set_postfix(epoch=epoch + 1, loss=f"{value:.3f}", refresh=False)
    return total / max(tokens, 1)


def _clip(model: Seq2Seq, clip: float | None) -> Tensor:
    """The global gradient norm before clipping; the gradients clipped to `clip` (None: left as they are)."""
    if clip is not None:
        return nn.utils.clip_grad_norm_(model.parameters(), clip)
    return nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])


def _step(optimizer: torch.optim.Optimizer, factor: float) -> float:
    """optimizer.step() with every group's rate times `factor` (warm-up, lr_schedule) for this step; returns
    the rate of the first group used. The scheduled rates are put back, so an epoch's ExponentialLR
    composes."""
    rates = [group["lr"] for group in optimizer.param_groups]
    if factor != 1.0:
        for group, rate in zip(optimizer.param_groups, rates, strict=True):
            group["lr"] = rate * factor
    optimizer.step()
    for group, rate in zip(optimizer.param_groups, rates, strict=True):
        group["lr"] = rate
    return rates[0] * factor


# ------------------------------------------------------------------------------------------ initialisation
@torch.no_grad()
def initialize(model: nn.Module, scheme: str = "torch") -> nn.Module:
    """Re-initialise the weights of `model`'s linear and recurrent layers by `scheme`; returns the model.

    "torch": leave torch's defaults (Linear: uniform in ±1/sqrt(fan_in); GRU and LSTM: every weight and
    bias uniform in ±1/sqrt(hidden_size)).
    "xavier": Glorot & Bengio 2010's uniform init, U(±sqrt(6 / (fan_in + fan_out))), for every Linear weight
        and every gate block of the recurrent input and hidden weights; biases 0.
    "orthogonal": as "xavier", but each gate block of the recurrent (hidden-to-hidden) weights a random
        orthogonal matrix (Saxe et al. 2014), so that repeated multiplication neither grows nor shrinks the
        state: the usual choice for RNNs.
    Embeddings are left as they are. Draws from torch's global generator: seed first to reproduce.
    """
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"scheme={scheme!r}, expected one of {INIT_SCHEMES}")
    if scheme == "torch":
        return model
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.RNNBase):
            for name, param in module.named_parameters():
                if name.startswith("bias"):
                    nn.init.zeros_(param)
                    continue
                for block in param.chunk(param.shape[0] // module.hidden_size, 0):   # one per gate
                    if name.startswith("weight_hh") and scheme == "orthogonal":
                        nn.init.orthogonal_(block)
                    else:
                        nn.init.xavier_uniform_(block)
    return model


def save_checkpoint(model: Seq2Seq, path: str | Path, **metadata: Any) -> Path:
    """Save the model's config and weights (and plain-Python metadata, e.g. vocab tokens) to `path`.

    The file holds only tensors and plain values (no pickled classes): ``asdict`` of the model's
    `ModelConfig`, so `load_checkpoint` reads it with torch.load(weights_only=True) and rebuilds the model.
    """
    if not isinstance(model.config, ModelConfig):
        raise ValueError("the model has no ModelConfig (it was assembled from modules): build it with "
                         "attn_course.models.seq2seq.build_model or Seq2Seq.from_config to save it")
    path = Path(path)
    state = {key: value.detach().cpu() for key, value in model.state_dict().items()}
    torch.save({"format": CHECKPOINT_FORMAT, "config": asdict(model.config), "state_dict": state,
                "metadata": metadata}, path)
    return path


def load_checkpoint(path: str | Path, *, device: torch.device | str | None = None
                    ) -> tuple[Seq2Seq, dict[str, Any]]:
    """Rebuild a model saved by `save_checkpoint`: returns (model in eval mode on `device`, metadata).

    A file of another format (another program's, or one saved by an older attn_course) is refused with a
    ValueError that names its format: train the model again.
    """
    checkpoint = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        found = checkpoint.get("format") if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f"{path} is not an attn_course checkpoint of this version: format {found!r}, "
                         f"expected {CHECKPOINT_FORMAT!r} (train the model again)")
    model = Seq2Seq.from_config(ModelConfig(**checkpoint["config"]))
    model.load_state_dict(checkpoint["state_dict"])
    device = get_device() if device is None else torch.device(device)
    return model.to(device).eval(), checkpoint["metadata"]
