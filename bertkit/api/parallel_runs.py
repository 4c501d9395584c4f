"""Several whole ``finetune`` runs at once (``--seeds``/``--folds`` with spare cores): each in its own
spawned process with ``--threads`` threads, so as many run side by side as the usable cores hold.

Without ``--threads`` a run takes every core and the runs go one after another: two runs sharing
cores only slow each other down. Under ``accelerate launch`` the processes are already the ranks'.
Each child's progress lines are prefixed with its run's name, so interleaved lines stay readable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator


def parallel_runs(runs: int, threads: int | None) -> int:
    """How many runs go at once: the usable cores divided by ``threads``, at most ``runs``."""
    from bertkit.engine.threads import usable_cores

    if not threads or runs < 2 or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return 1
    return max(1, min(runs, usable_cores() // threads))


def run_all(jobs: dict, parallel: int, label: str, target=None) -> Iterator[tuple]:
    """``jobs``: key (a seed, a fold) -> kwargs of ``target`` (default ``finetune``; a module-level
    function, which a spawned child can import); yields (key, its result) as runs finish (in order
    when one at a time); a child's lines are prefixed ``[label key]``. A child's error is raised
    here, as the run would have raised it."""
    if target is None:
        from bertkit.api.finetuning import finetune as target

    if parallel <= 1:
        for key, kwargs in jobs.items():
            yield key, target(**kwargs)
        return
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(parallel, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending = {pool.submit(_child, f"[{label} {key}] ", target, kwargs): key for key, kwargs in jobs.items()}
        try:
            for future in concurrent.futures.as_completed(pending):
                yield pending[future], future.result()
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _child(prefix: str, target, kwargs: dict):
    stream = sys.stderr
    while isinstance(stream, PrefixedStream):  # a pool worker runs run after run: one prefix, this run's
        stream = stream.stream
    sys.stderr = PrefixedStream(stream, prefix)
    return target(**kwargs)


class PrefixedStream:
    """A text stream that starts every line with ``prefix`` and never redraws (not a terminal)."""

    def __init__(self, stream, prefix: str):
        self.stream, self.prefix, self.at_line_start = stream, prefix, True

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            self.stream.write((self.prefix if self.at_line_start else "") + piece)
            self.at_line_start = piece.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False  # one line per epoch (engine.progress.LineProgress), no \r bars
