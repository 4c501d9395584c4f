"""Every random generator a training step draws from (Python, NumPy, torch, CUDA), as one value a
checkpoint saves per process and a resumed run puts back."""

from __future__ import annotations

import random

import numpy as np


def rng_state(generators: dict | None = None) -> dict:
    """``generators``: torch.Generator objects of the run's own (a masking collator's), by name."""
    import torch

    name, keys, position, has_gauss, gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), position, has_gauss, gauss],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "generators": {key: g.get_state() for key, g in (generators or {}).items()},
    }


def set_rng_state(state: dict, generators: dict | None = None) -> None:
    import torch

    for key, generator in (generators or {}).items():
        if key in state.get("generators", {}):
            generator.set_state(state["generators"][key])

    random.setstate(state["python"])
    name, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
