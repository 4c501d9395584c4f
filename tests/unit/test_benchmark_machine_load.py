"""The benchmark's busy-machine flag: other processes' CPU time, not the suite's own load.

A quiet run used to be flagged busy by the 1-minute load average its own last runs left behind;
``benchmarks.machine_load`` subtracts the suite's own CPU time from the machine's.
"""

from __future__ import annotations

import subprocess
import sys

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


def test_our_own_cpu_time_counts_a_child_only_once_it_is_waited_for():
    """The part of the busy flag that touches the real machine, without a verdict that depends on
    its load: CPU time, not wall time (a busy machine only stretches the wall clock). The arithmetic
    over /proc/stat is the fake-file test above."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nwhile time.process_time() < 0.5: pass\nprint('burnt', flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        before = machine_load.snapshot()
        assert child.stdout.readline().strip() == "burnt"
        # it burnt 0.5 s of CPU and is still running: its time is someone else's, not ours
        assert machine_load.snapshot()["own_cpu_seconds"] - before["own_cpu_seconds"] < 0.3
    finally:
        child.kill()
        child.wait()
    # waited for: RUSAGE_CHILDREN now holds it, so the suite's own runs are never counted as others
    assert machine_load.snapshot()["own_cpu_seconds"] - before["own_cpu_seconds"] >= 0.5
