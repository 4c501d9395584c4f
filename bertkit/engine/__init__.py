"""The engine: the only importer of Accelerate. ``Engine`` (core.py) runs training (``fit``) and
inference (``infer``) for any task; the other modules are the parts of its loop: batching,
precision and bf16 master weights, CPU training kernels, threads, model rewrites, checkpoints and
resume, interrupts, history and trackers.

``from bertkit.engine import Engine`` loads torch and Accelerate on first use only.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name in ("Engine", "TrainReport", "parameter_groups"):
        from bertkit.engine import core

        return getattr(core, name)
    raise AttributeError(f"module 'bertkit.engine' has no attribute {name!r}")
