"""How many CPU threads torch computes with: ``--threads``, else ``OMP_NUM_THREADS``, else torch's
default (one per core, or Accelerate's share of the cores per process under a CPU launch).

On a shared machine more threads than free cores is slower than fewer: each matmul waits for its
slowest thread, and a descheduled thread stalls them all (measured here with one other busy
process on 2 cores: 55.6 examples/s at 2 threads, 97.8 at 1). So when the load average says the
cores are taken, ``configure`` returns a notice that suggests ``--threads``; it does not change the
count by itself, because the load average is a minute-long, noisy estimate.
"""

from __future__ import annotations

import os

from bertkit.errors import BertkitError

ENV = "OMP_NUM_THREADS"


def check(threads: int | None, command: str) -> None:
    """Validate before any work: a bad count fails in one line, nothing started."""
    most = max_threads()
    if threads is not None and not 1 <= threads <= most:
        raise BertkitError(
            f"--threads must be between 1 and {most} (4 per usable core), got {threads}",
            f"see `bertkit {command} --help`",
        )
    if threads is None and os.environ.get(ENV, "").strip():
        value = os.environ[ENV].strip()
        if not value.isdigit() or not 1 <= int(value) <= most:
            raise BertkitError(
                f"{ENV}={value!r} is not a thread count between 1 and {most}",
                f"set {ENV} to a number from 1 to {most}, or pass --threads",
            )


def max_threads() -> int:
    # More threads than cores only wait on each other; tens of thousands exhaust the process limit
    # (OpenBLAS then aborts the process).
    return 4 * usable_cores()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def configure(threads: int | None, load: float | None = None, cores: int | None = None) -> dict:
    """Apply the thread count; returns ``{"threads", "source"}`` plus ``"notice"`` when the machine
    looks busy. ``load``/``cores`` are for tests (default: the 1-minute load average, the usable cores)."""
    import torch

    check(threads, "COMMAND")  # every command's count, wherever it came from, before torch is given it
    if threads is not None:
        source = "--threads"
    elif os.environ.get(ENV, "").strip():
        threads, source = int(os.environ[ENV]), ENV
    else:
        source = "default"
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    info = {"threads": torch.get_num_threads(), "source": source}
    cores = cores or usable_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    # Our own process is still loading data here, so the load is the others' work.
    free = cores - load
    if source == "default" and info["threads"] > 1 and free < info["threads"] - 0.5:
        suggestion = max(1, int(free + 0.5))
        info["notice"] = (
            f"the machine is busy (load {load:.1f} on {cores} cores): {info['threads']} threads may "
            f"run slower than fewer; try --threads {suggestion} (or set {ENV})"
        )
    return info
