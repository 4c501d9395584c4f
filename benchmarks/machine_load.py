"""How much of the machine something else took while the suite ran.

The 1-minute load average cannot say it: it counts the suite's own runs, and read at the end it
still holds the last run's load, so a quiet run was flagged busy. Instead: the CPU time every
process on the machine used (``/proc/stat``) minus the suite's own (this process and its
children, ``getrusage``), plus the time the hypervisor gave our cores to others (steal), over the
wall time, in cores: 0.0 on a quiet machine, 1.0 when another process kept one core busy.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

STAT = Path("/proc/stat")
# more than this many cores taken by others, on average over the suite: its timings are suspect
BUSY_CORES = 0.25


def _jiffies(stat: Path) -> tuple[int, int] | None:
    """(busy, steal) clock ticks of all CPUs since boot; None without /proc/stat (macOS, Windows)."""
    try:
        fields = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu" or len(fields) < 9:
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return user + nice + system + irq + softirq, steal


def _own_cpu_seconds() -> float:
    own = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(r.ru_utime + r.ru_stime for r in own)


def snapshot(stat: Path = STAT) -> dict:
    return {"jiffies": _jiffies(stat), "own_cpu_seconds": _own_cpu_seconds(), "wall": time.perf_counter()}


def others(start: dict, end: dict, tick: float | None = None) -> dict:
    """``{"others_cores", "steal_cores", "busy"}`` between two snapshots (the cores None where
    /proc/stat is missing: then ``busy`` is None, unknown)."""
    if start["jiffies"] is None or end["jiffies"] is None:
        return {"others_cores": None, "steal_cores": None, "busy": None}
    tick = tick or 1.0 / os.sysconf("SC_CLK_TCK")
    wall = max(end["wall"] - start["wall"], 1e-9)
    busy = (end["jiffies"][0] - start["jiffies"][0]) * tick
    steal = (end["jiffies"][1] - start["jiffies"][1]) * tick
    own = end["own_cpu_seconds"] - start["own_cpu_seconds"]
    # ticks are coarse (10 ms): a quiet machine can come out a hair below zero
    other = max(busy - own, 0.0) / wall
    steal_cores = steal / wall
    return {
        "others_cores": round(other, 3),
        "steal_cores": round(steal_cores, 3),
        "busy": other + steal_cores > BUSY_CORES,
    }
