"""Progress output: a tqdm bar on a terminal, one line per epoch elsewhere, nothing on other ranks."""

from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm


def progress_bar(total: int, description: str, show: bool, fitting: bool):
    """``show``: this process may print (the main one, not quiet). ``fitting``: inside ``Engine.fit``."""
    if not show:
        return tqdm(total=total, disable=True)
    if not sys.stderr.isatty():  # CI logs and files: a line per epoch / evaluation, no \r redraws
        # only while training: a lone eval or predict keeps stderr for notices and errors
        return LineProgress(total, description) if fitting else tqdm(total=total, disable=True)
    return tqdm(total=total, desc=description, unit="batch", leave=False, file=sys.stderr, dynamic_ncols=True)


class LineProgress:
    """tqdm's interface for output that is not a terminal: no redraws, one line per ``line()``
    call (an epoch) and one when an evaluation pass closes."""

    def __init__(self, total: int, description: str):
        self.total, self.description, self.done, self.started = total, description, 0, time.perf_counter()
        self.lines = 0

    def update(self, n: int = 1) -> None:
        self.done += n

    def set_postfix(self, **_values) -> None:
        pass

    def line(self, text: str) -> None:
        self.lines += 1
        print(
            f"{self.description}: {text} ({self.done}/{self.total} batches, {time.perf_counter() - self.started:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if not self.lines and self.description == "eval":  # predict output stays quiet
            self.line("done")
