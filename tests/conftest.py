"""Shared fixtures: every test starts from the same seed; `device` is CPU, plus CUDA when present."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

# Tests use tiny tensors: on a busy machine, waking a second intra-op thread for each op costs far more
# than it saves (a float64 gradcheck of masked_softmax takes ~2 s with 2 threads, ~0.03 s with 1).
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)
