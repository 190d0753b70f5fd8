"""Device choice and seeding: every chapter picks its device and draws the same numbers on every run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from attn_course.runtime import get_device, seed_everything


def draws(seed: int) -> tuple:
    generator = seed_everything(seed)
    return (random.random(), np.random.rand(), torch.rand(3).tolist(),  # noqa: NPY002
            torch.rand(2, generator=generator).tolist())


def test_seed_everything_repeats_every_generator_and_a_new_seed_changes_them():
    assert draws(7) == draws(7)
    assert all(a != b for a, b in zip(draws(7), draws(8), strict=True))


def test_seed_everything_turns_tf32_off_for_cudnn(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    assert torch.backends.cudnn.rnn.fp32_precision == "tf32"         # torch's default for cuDNN RNNs
    seed_everything(0)
    assert torch.backends.cudnn.allow_tf32 is False                 # readable: conv and RNN set alike
    assert torch.backends.cudnn.rnn.fp32_precision != "tf32"
    assert torch.backends.cudnn.conv.fp32_precision != "tf32"


def test_get_device_picks_cuda_only_where_there_is_one():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert get_device().type == expected
    assert get_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"prefer='cuda'.*is_available\(\) is False"):
            get_device("cuda")
