"""Where the course runs: device choice and seeding, so every chapter is reproducible."""

from __future__ import annotations

import random

import numpy as np
import torch


def get_device(prefer: str | None = None) -> torch.device:
    """The device a chapter should use: CUDA when present, CPU otherwise.

    ``prefer`` ("cpu" or "cuda") overrides the automatic choice; asking for CUDA where
    there is none is an error rather than a silent fall-back.
    """
    if prefer is not None:
        if prefer.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"prefer={prefer!r}, but torch.cuda.is_available() is False")
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA); return a torch.Generator seeded the same way."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - seeds the legacy global RNG that older code still draws from
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)
