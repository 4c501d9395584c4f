"""The engine: the only importer of Accelerate. ``Engine`` (core.py) runs training (``fit``) and
inference (``infer``) for any task; the other modules are the parts of its loop: the loop's steps
(training.py), the optimizer step (optimisation.py), batching, precision and bf16 master weights,
CPU training kernels, threads, model rewrites, checkpoints and resume (checkpoints.py,
run_identity.py, rng_state.py), interrupts, history, progress output and trackers.

``from bertkit.engine import Engine`` loads torch and Accelerate on first use only.
"""

from __future__ import annotations

# public name -> the module that defines it
_NAMES = {"Engine": "core", "TrainReport": "training", "parameter_groups": "optimisation"}


def __getattr__(name: str):
    if name in _NAMES:
        import importlib

        return getattr(importlib.import_module(f"bertkit.engine.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'bertkit.engine' has no attribute {name!r}")
