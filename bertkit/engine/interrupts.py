"""Stopping a run on purpose: Ctrl-C / SIGTERM at a step boundary, and the test-only self-kill.

With ``--save-every``, the first SIGINT or SIGTERM (what schedulers send before preemption) is only
remembered; the loop finishes its step, saves a checkpoint and raises ``TrainingInterrupted``.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

# Test-only: "KILL@step-5" (after optimizer step 5), "KILL@save-6" (while writing step 6's
# checkpoint), "INT@step-4", "KILL@trial-1" (tune, as trial 1 starts): the process sends itself that
# signal there, a real kill.
TEST_SIGNAL_ENV = "BERTKIT_TEST_SIGNAL"


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped training at a step boundary after saving a checkpoint."""

    def __init__(self, step: int, path: Path):
        super().__init__(f"stopped after step {step}; checkpoint saved to {path}")
        self.step, self.path = step, path


class StopRequests:
    """SIGINT / SIGTERM while training with checkpoints: finish the step, save, stop. The first
    signal is remembered and the previous handlers come back, so a second one stops at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.requested, self._previous = False, {}

    def __enter__(self):
        if self.enabled:
            self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def _handle(self, signum, frame) -> None:
        self.requested = True
        self.__exit__()

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def agreed(self, acc) -> bool:
        """Whether any rank was asked to stop; every rank must call this at the same steps."""
        if not self.enabled:
            return False
        if acc.num_processes == 1:
            return self.requested
        import torch

        flag = torch.tensor(float(self.requested), device=acc.device)
        return bool(acc.reduce(flag, "sum").item() > 0)


def test_signal(point: str, step: int) -> None:
    wanted = os.environ.get(TEST_SIGNAL_ENV)
    if wanted and wanted.partition("@")[2] == f"{point}-{step}":
        signal.raise_signal(getattr(signal, "SIG" + wanted.partition("@")[0]))
