"""The benchmark's busy-machine flag: other processes' CPU time, not the suite's own load.

A quiet run used to be flagged busy by the 1-minute load average its own last runs left behind;
``benchmarks.machine_load`` subtracts the suite's own CPU time from the machine's.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import REPO  # noqa: F401  (puts the repository on sys.path for `benchmarks`)

from benchmarks import machine_load, report


def _stat(tmp_path, name: str, user: int, system: int, steal: int):
    path = tmp_path / name
    path.write_text(f"cpu  {user} 0 {system} 5000 10 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    return path


def test_others_are_the_machine_minus_our_own_cpu_time(tmp_path):
    start = {"jiffies": machine_load._jiffies(_stat(tmp_path, "a", 1000, 200, 0)), "own_cpu_seconds": 10.0, "wall": 0.0}
    # 4 s: the machine used 300 ticks (3 s at 100 Hz), we used 1 s of it, the hypervisor stole 0.4 s
    end = {"jiffies": machine_load._jiffies(_stat(tmp_path, "b", 1250, 250, 40)), "own_cpu_seconds": 11.0, "wall": 4.0}
    got = machine_load.others(start, end, tick=0.01)
    assert got["others_cores"] == pytest.approx(0.5) and got["steal_cores"] == pytest.approx(0.1)
    assert got["busy"] is True
    # all of the machine's time was ours: quiet, although our own load was two full cores
    quiet = {**end, "jiffies": machine_load._jiffies(_stat(tmp_path, "c", 1800, 200, 0)), "own_cpu_seconds": 18.0}
    assert machine_load.others(start, quiet, tick=0.01) == {"others_cores": 0.0, "steal_cores": 0.0, "busy": False}
    line = report.machine_load_line(
        {
            **quiet,
            "load_average_start": [1.9],
            "load_average_end": [2.0],
            **machine_load.others(start, quiet, tick=0.01),
        }
    )
    assert "0.00 cores" in line and "busy" not in line


def test_no_proc_stat_means_unknown_not_quiet(tmp_path):
    snap = machine_load.snapshot(tmp_path / "missing")
    assert machine_load.others(snap, snap) == {"others_cores": None, "steal_cores": None, "busy": None}


@pytest.mark.skipif(not machine_load.STAT.exists(), reason="needs /proc/stat")
def test_a_process_burning_a_core_shows_as_others_and_our_own_work_does_not():
    start = machine_load.snapshot()
    deadline = time.perf_counter() + 1.0
    while time.perf_counter() < deadline:  # our own busy second: not someone else's
        pass
    mine = machine_load.others(start, machine_load.snapshot())
    burner = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"]
    )
    try:
        start = machine_load.snapshot()
        time.sleep(1.2)
        # read before the burner is waited for: its CPU time is not yet ours (RUSAGE_CHILDREN)
        theirs = machine_load.others(start, machine_load.snapshot())
    finally:
        burner.wait()
    assert theirs["others_cores"] >= 0.6 and theirs["busy"] is True
    assert theirs["others_cores"] > mine["others_cores"] + 0.4
