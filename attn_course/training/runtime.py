"""Where the course runs: device, seeds and the artifacts folder, so every chapter is reproducible."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attn_course.validation import check_int


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
    reading the legacy flag raise). Nothing changes on a CPU. seed: an int in [0, 2**32 - 1], NumPy's range.
    """
    seed = check_int("seed", seed, low=0, high=2**32 - 1)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - seeds the legacy global RNG that older code still draws from
    torch.manual_seed(seed)  # also seeds every CUDA device
    torch.backends.cudnn.allow_tf32 = False
    return torch.Generator().manual_seed(seed)


#: The environment variable that picks the chapters' model seed (default 0, the seed of the stored outputs).
SEED_VARIABLE = "ATTN_COURSE_SEED"
#: The environment variable that moves the folder where chapters keep trained models (`artifacts_dir`).
ARTIFACTS_VARIABLE = "ATTN_COURSE_ARTIFACTS"


def course_seed() -> int:
    """The seed a chapter trains its models with: $ATTN_COURSE_SEED, or 0 (the stored outputs' seed).

    `make robustness` runs every chapter under several seeds this way, to check that its claims about
    trained models hold for any seed, not only for the one its outputs were stored with.
    """
    value = os.environ.get(SEED_VARIABLE, "0")
    try:
        seed = int(value)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE}={value!r}, expected a non-negative integer") from None
    if seed < 0:
        raise ValueError(f"{SEED_VARIABLE}={value!r}, expected a non-negative integer")
    return seed


def artifacts_dir() -> Path:
    """The folder where chapters keep the models they train: $ATTN_COURSE_ARTIFACTS, or attn-course/ in the
    user's cache ($XDG_CACHE_HOME, default ~/.cache), never inside the installed package. A second run
    under another CPU kernel points $ATTN_COURSE_ARTIFACTS elsewhere, so that it trains its own models
    instead of loading the first run's. The folder is created by whoever saves into it."""
    value = os.environ.get(ARTIFACTS_VARIABLE)
    if value:
        return Path(value)
    cache = os.environ.get("XDG_CACHE_HOME")
    return (Path(cache) if cache else Path.home() / ".cache") / "attn-course"


def artifact_path(stem: str, suffix: str = ".pt", **key: Any) -> Path:
    """Where a chapter keeps a model trained for `key`: artifacts_dir() / "{stem}-{hash of key}{suffix}".

    key: what the model was trained on and how, as keyword arguments of JSON values or dataclasses (e.g.
    pairs=the pair file's hash, recipe=the Recipe, seed=0). Models trained on other data or with other
    settings get other files, so that no run overwrites the model another run trained and will load again.
    Raises TypeError naming a key whose value is neither.
    """
    for name, value in key.items():
        try:
            json.dumps(value, default=_as_dict)
        except TypeError:
            raise TypeError(f"key {name}={value!r} is a {type(value).__name__}, expected JSON values (str, "
                            "int, float, bool, None, lists, dicts) or a dataclass of them") from None
    text = json.dumps(key, sort_keys=True, default=_as_dict)
    return artifacts_dir() / f"{stem}-{hashlib.sha256(text.encode()).hexdigest()[:12]}{suffix}"


def _as_dict(value: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(type(value).__name__)
