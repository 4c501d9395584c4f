"""Every random generator a training step draws from (Python, NumPy, torch, CUDA), as one value a
checkpoint saves per process and a resumed run puts back."""

from __future__ import annotations

import random

import numpy as np


def rng_state() -> dict:
    import torch

    name, keys, position, has_gauss, gauss = np.random.get_state()
    return {"python": random.getstate(), "numpy": [name, keys.tolist(), position, has_gauss, gauss],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict) -> None:
    import torch

    random.setstate(state["python"])
    name, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
