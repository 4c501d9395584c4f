"""Progress output in every medium: a tqdm bar on a terminal; elsewhere (a file, a pipe, a
scheduler's log, CI) a plain line at a steady pace, about every ``BERTKIT_PROGRESS_SECONDS``
(30 by default), with the position, the speed, the loss when training, the time spent and an ETA;
nothing on other ranks or for a quiet engine (the server).

Torch-free and tqdm-free at import: ``Pace``, ``progress_text`` and ``duration`` are also what a
long stream (predict, embed) uses to say where it is in the same words.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager

from bertkit.errors import BertkitError

PACE_ENV = "BERTKIT_PROGRESS_SECONDS"
DEFAULT_PACE = 30.0


def pace_seconds() -> float:
    """Seconds between two progress lines off a terminal: ``BERTKIT_PROGRESS_SECONDS`` or 30
    (0: a line at every update, for tests and very slow steps)."""
    value = os.environ.get(PACE_ENV, "").strip()
    if not value:
        return DEFAULT_PACE
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise BertkitError(
            f"{PACE_ENV}={value!r} is not a number of seconds", f"set {PACE_ENV} to e.g. 30, or unset it"
        )
    return seconds


class Pace:
    """Says when the next line is due: ``seconds`` after the last one (``clock``: for tests)."""

    def __init__(self, seconds: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.seconds = pace_seconds() if seconds is None else seconds
        self.clock = clock
        self.started = self.last = clock()

    def due(self) -> bool:
        return self.clock() - self.last >= self.seconds

    def said(self) -> None:
        self.last = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started


_batch_observers: list[Callable[[int], None]] = []


@contextmanager
def observing_batches(observer: Callable[[int], None]):
    """While the block runs, ``observer(examples)`` is called after each inference batch of any
    engine, quiet ones too: a stream (predict, embed) keeps its engine quiet and says itself where
    it is, also inside a chunk that takes minutes."""
    _batch_observers.append(observer)
    try:
        yield observer
    finally:
        _batch_observers.remove(observer)


def batch_done(examples: int) -> None:
    for observer in list(_batch_observers):
        observer(examples)


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: short enough for a log line."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def progress_text(
    label: str,
    done: int,
    total: int | None,
    unit: str,
    elapsed: float,
    rate: float | None = None,
    rate_unit: str = "examples",
    loss: float | None = None,
    new: int | None = None,
) -> str:
    """One progress line, e.g. ``train: step 12/40 (30%), 45.2 examples/s, loss 0.6931, 31s
    elapsed, ETA 1m12s``. ``new``: the units done in this process's ``elapsed`` (a resumed run
    started at ``done - new``); the ETA is the rest at that speed."""
    text = f"{label}: {unit} {done:,}" + (f"/{total:,} ({100 * done / total:.0f}%)" if total else "")
    if rate is not None:
        text += f", {rate:,.1f} {rate_unit}/s"
    if loss is not None:
        text += f", loss {loss:.4f}"
    text += f", {duration(elapsed)} elapsed"
    new = done if new is None else new
    if total and new > 0 and done < total:
        text += f", ETA {duration((total - done) * elapsed / new)}"
    return text


def progress_bar(total: int, description: str, show: bool, fitting: bool):
    """``show``: this process may print (the main one, not quiet). ``fitting``: inside ``Engine.fit``
    (an evaluation there says when it is done, not where it is: the training line does that)."""
    from tqdm.auto import tqdm  # not at import: `bertkit --help` imports this module's callers

    if not show:
        return tqdm(total=total, disable=True)
    if not sys.stderr.isatty():  # CI logs and files: a line at a steady pace, no \r redraws
        return LineProgress(total, description, says_done=fitting and description == "eval")
    return tqdm(total=total, desc=description, unit="batch", leave=False, file=sys.stderr, dynamic_ncols=True)


class LineProgress:
    """tqdm's interface for output that is not a terminal: no redraws. A line when the pace says
    one is due, one per ``line()`` call (an epoch, an evaluation), and with ``says_done`` one when
    the pass closes without having said anything (an evaluation while training). Training sets
    ``step`` and ``loss`` (``set_position``): the line then counts optimizer steps, otherwise batches."""

    def __init__(self, total: int, description: str, says_done: bool = False, pace: Pace | None = None):
        self.total, self.description, self.says_done = total, description, says_done
        self.pace = pace or Pace()
        self.done, self.first, self.examples, self.lines = 0, 0, 0, 0
        self.step: tuple[int, int, int] | None = None  # (step, total steps, the step this run began at)
        self.loss: Callable[[], float | None] = lambda: None

    def resume_at(self, done: int) -> None:
        """A resumed run's batches already done: counted in the position, not in the speed."""
        self.done = self.first = done

    def update(self, n: int = 1, examples: int = 0) -> None:
        self.done += n
        self.examples += examples
        if self.pace.due():
            self.say()

    def set_postfix(self, **_values) -> None:
        pass

    def set_position(self, step: int, total: int, began: int, loss: Callable[[], float | None]) -> None:
        self.step, self.loss = (step, total, began), loss

    def at_step(self, step: int) -> None:
        if self.step is not None:
            self.step = (step, *self.step[1:])

    def say(self) -> None:
        elapsed = self.pace.elapsed()
        rate = self.examples / elapsed if elapsed > 0 and self.examples else None
        if self.step is not None:
            step, total, began = self.step
            text = progress_text(
                self.description, step, total, "step", elapsed, rate, loss=self.loss(), new=step - began
            )
        else:
            text = progress_text(
                self.description, self.done, self.total, "batch", elapsed, rate, new=self.done - self.first
            )
        self._print(text)

    def line(self, text: str) -> None:
        self._print(f"{self.description}: {text} ({self.done}/{self.total} batches, {self.pace.elapsed():.1f}s)")

    def _print(self, text: str) -> None:
        self.lines += 1
        self.pace.said()
        print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if not self.lines and self.says_done:
            self.line("done")
