"""Training a seq2seq model: masked cross-entropy, teacher forcing, Adam, clipping, checkpoints.

    history = train(model, loader, epochs=..., lr=..., val_loader=..., callback=...)

`train` moves the model and every batch to the device (CUDA when present), shows a tqdm.auto progress
bar, and calls ``callback(epoch, history, model)`` after each epoch: the hook a notebook uses to redraw
a live loss/validation plot (return True from it to stop early).
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

from attn_course import fast
from attn_course.runtime import eval_mode, get_device, seed_everything
from attn_course.seq2seq import ModelConfig, Seq2Seq
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


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained: `epochs` passes over batches of `batch_size` sentence pairs, Adam with
    learning rate `lr`, multiplied by `lr_decay` after every epoch (None: a constant rate), gradients
    clipped to norm `clip` (None: not clipped). The arguments of `train`, plus the loader's batch size."""

    epochs: int = 12
    batch_size: int = 64
    lr: float = 5e-3
    lr_decay: float | None = None
    clip: float | None = 1.0


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
        raise ValueError(f"a batch must have the fields {names} (attn_course.data.Batch), "
                         f"got {type(batch).__name__}")
    return tuple(t.to(device, non_blocking=True) for t in tensors)


@dataclass
class History:
    """What happened during `train`, epoch by epoch (and batch by batch for the loss).

    train_loss / val_loss: mean cross-entropy per real target token (nats); exp() is the perplexity.
    seconds / cpu_seconds: wall-clock and process CPU time of each epoch (validation included).
    """

    step_loss: list[float] = field(default_factory=list)
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
    with eval_mode(model), fast.enabled(model):  # no gradients here: the faster score form applies
        for batch in loader:
            src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens = _unpack(batch, device)
            logits, _ = model(src, src_valid_lens, tgt_in)
            total += float(masked_cross_entropy(logits, tgt_out, tgt_valid_lens, reduction="sum"))
            tokens += int(tgt_valid_lens.sum())
    if tokens == 0:
        raise ValueError("loader yielded no target tokens: cannot average the loss")
    return total / tokens


def train(
    model: Seq2Seq,
    loader: Iterable,
    *,
    epochs: int,
    lr: float = 5e-3,
    lr_decay: float | None = None,
    clip: float | None = 1.0,
    device: torch.device | str | None = None,
    val_loader: Iterable | None = None,
    callback: Callback | None = None,
    progress: bool = True,
    seed: int | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> History:
    """Train with teacher forcing: Adam on the masked cross-entropy, gradients clipped to norm `clip`.

    loader yields batches with src (B, S), src_valid_lens (B,), tgt_in (B, T), tgt_out (B, T),
    tgt_valid_lens (B,) (attn_course.data.Batch); the decoder reads tgt_in = <bos> y_1 ... (teacher
    forcing) and is scored on tgt_out = y_1 ... <eos>. The model and batches move to `device` (default:
    CUDA when present). seed (optional) seeds torch/NumPy/random first, for reproducible dropout.
    optimizer defaults to Adam(lr); pass one to continue training with its state. lr_decay (optional,
    in (0, 1]): the learning rate is multiplied by it after every epoch (torch's ExponentialLR), which
    lets a short run take large steps first and settle later.
    val_loader: its loss is recorded after every epoch. callback(epoch, history, model), after every
    epoch: a live plot, a BLEU check...; returning True stops training. Returns the History.
    """
    check_int("epochs", epochs, low=0)
    if clip is not None:
        check_number("clip", clip, low=0, low_open=True)  # a gradient norm
    if lr_decay is not None:
        check_number("lr_decay", lr_decay, low=0, high=1, low_open=True)  # a factor per epoch
    if seed is not None:
        seed_everything(seed)
    device = get_device() if device is None else torch.device(device)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr) if optimizer is None else optimizer
    scheduler = None if lr_decay is None else torch.optim.lr_scheduler.ExponentialLR(optimizer, lr_decay)
    history = History()
    bar = _progress_bar(loader, epochs, progress)
    try:
        for epoch in range(epochs):
            wall, cpu = time.perf_counter(), time.process_time()
            step_loss, train_loss = _train_epoch(model, loader, optimizer, clip, device, bar, epoch)
            history.step_loss.extend(step_loss)
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


def _train_epoch(model: Seq2Seq, loader: Iterable, optimizer: torch.optim.Optimizer, clip: float | None,
                 device: torch.device, bar: tqdm, epoch: int) -> tuple[list[float], float]:
    """One pass of teacher forcing over `loader`: the loss of every batch, and the epoch's mean loss per
    real target token."""
    model.train()
    step_loss, total, tokens = [], 0.0, 0
    for batch in loader:
        src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens = _unpack(batch, device)
        logits, _ = model(src, src_valid_lens, tgt_in)
        loss = masked_cross_entropy(logits, tgt_out, tgt_valid_lens)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        n, value = int(tgt_valid_lens.sum()), loss.item()
        step_loss.append(value)
        total, tokens = total + value * n, tokens + n
        bar.update(1)
        bar.set_postfix(epoch=epoch + 1, loss=f"{value:.3f}", refresh=False)
    return step_loss, total / max(tokens, 1)


def save_checkpoint(model: Seq2Seq, path: str | Path, **metadata: Any) -> Path:
    """Save the model's config and weights (and plain-Python metadata, e.g. vocab tokens) to `path`.

    The file holds only tensors and plain values (no pickled classes): ``asdict`` of the model's
    `ModelConfig`, so `load_checkpoint` reads it with torch.load(weights_only=True) and rebuilds the model.
    """
    if not isinstance(model.config, ModelConfig):
        raise ValueError("the model has no ModelConfig (it was assembled from modules): build it with "
                         "attn_course.seq2seq.build_model or Seq2Seq.from_config to save it")
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
