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
    """Seed Python, NumPy and torch (CPU and CUDA); return a torch.Generator seeded the same way.

    It also keeps float32 at full precision on GPUs: on Ampere and later, torch lets cuDNN run float32 RNNs
    (GRU, LSTM) in TensorFloat-32 by default, which rounds the factors of their matrix products to 10 of
    float32's 23 mantissa bits. With TF32 off, a GPU computes a chapter's float32 numbers at the precision
    the CPU does, which the tolerances of its asserts assume. The legacy flag is used because it sets
    cuDNN's convolutions and RNNs alike (setting only one through the newer fp32_precision API makes
    reading the legacy flag raise). Nothing changes on a CPU.
    """
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - seeds the legacy global RNG that older code still draws from
    torch.manual_seed(seed)  # also seeds every CUDA device
    torch.backends.cudnn.allow_tf32 = False
    return torch.Generator().manual_seed(seed)
