"""The models' modes: `eval_mode`, which runs a block with a model's dropout off and restores its mode."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run a block with `model` in evaluation mode (dropout off), then restore the mode it had.

    The mode is restored even when the block raises, so a failed decode in a notebook never leaves a model
    training without dropout or evaluating with it.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
