"""Device choice and seeding: every chapter picks its device and draws the same numbers on every run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from attn_course.models.modes import eval_mode
from attn_course.training.runtime import get_device, seed_everything


def draws(seed: int) -> tuple:
    generator = seed_everything(seed)
    return (random.random(), np.random.rand(), torch.rand(3).tolist(),  # noqa: NPY002
            torch.rand(2, generator=generator).tolist())


def test_seed_everything_repeats_every_generator_and_a_new_seed_changes_them():
    assert draws(7) == draws(7)
    assert all(a != b for a, b in zip(draws(7), draws(8), strict=True))


def test_seed_everything_refuses_a_seed_numpy_cannot_take_by_name():
    for bad in (-1, 2**32, 1.5, True):
        with pytest.raises(ValueError, match=r"seed must be an int in \[0, 4294967295\], got "):
            seed_everything(bad)
    assert draws(np.int64(7)) == draws(7)                           # a NumPy integer is an int


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


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_turns_dropout_off_and_restores_the_mode_even_when_the_block_raises(training):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train(training)
    with eval_mode(model) as inside:
        assert inside is model and not model.training and not model[1].training
    assert model.training is training and model[1].training is training
    with pytest.raises(RuntimeError, match="decoding failed"), eval_mode(model):
        assert not model.training
        raise RuntimeError("decoding failed")
    assert model.training is training and model[1].training is training
