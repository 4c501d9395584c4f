"""The benchmark runner end to end on tiny sizes, so `python -m benchmarks run` never rots.

Runs SST-2 (bertkit and the Trainer's best bf16 recipe), eval and start-up with 2 rounds in a
subprocess and checks the report: the headline ratio columns, medians over the rounds (every
round kept in the JSON), and MFU measured against the bf16 peak for the bf16 sides.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys

import pytest
from conftest import DATA_DIR, REPO, minilm_or_skip, require_data

pytestmark = pytest.mark.learning

SIZES = "sst2_train=48,sst2_eval=48,predict_n=48,startup_repeats=2,matmul_seconds=0.4"
HEADER = (
    "| workload | side | ex/s | tokens/s | padding | peak RSS | metric | ratio vs hf_best_bf16 | ratio vs bertkit "
    "| MFU | time (s) | note |"
)


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_quick_benchmarks_report(tmp_path):
    require_data("sst2", "train.tsv")
    require_data("sst2", "dev.tsv")
    minilm_or_skip()
    cmd = [
        sys.executable,
        "-m",
        "benchmarks",
        "run",
        "--quick",
        "--only",
        "sst2,eval,startup",
        "--sides",
        "bertkit,hf_best_bf16",
        "--repeats",
        "2",
        "--set",
        SIZES,
        "--out-dir",
        str(tmp_path),
        "--name",
        "t",
        "--no-print",
    ]
    env = dict(os.environ, BERTKIT_DATA_DIR=str(DATA_DIR))
    env.setdefault("OMP_NUM_THREADS", "1")  # robust on a busy machine: 2 threads there took twice as long
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((tmp_path / "t.json").read_text())
    assert HEADER in (tmp_path / "t.md").read_text()
    cpuinfo = open("/proc/cpuinfo").read()
    for flag in ("avx512_bf16", "amx_bf16"):  # the matmul features the reader needs, and their absence
        assert (flag in report["machine"]["cpu_flags"]) == (f" {flag} " in cpuinfo.replace("\n", " "))
    assert ("no AMX" in (tmp_path / "t.md").read_text()) == ("amx_bf16" not in report["machine"]["cpu_flags"])
    assert report["errors"] == [] and report["quick"] is True and report["repeats"] == 2
    peaks = report["matmul_peak_gflops"]
    from bertkit.engine.precision import native_bf16

    # bf16's peak only where bf16 is native (emulated, one 2048^3 matmul takes minutes)
    assert _positive(peaks["fp32"]) and _positive(peaks["bf16"]) == native_bf16("cpu")[0]
    assert report["workloads"]["sst2"]["data_check"]["identical"] is True

    rows = {(r["workload"], r["side"]): r for r in report["rows"]}
    assert not [r for r in report["rows"] if "error" in r]
    assert set(rows) >= {
        ("sst2", "bertkit"),
        ("sst2", "hf_best_bf16"),
        ("eval", "bertkit"),
        ("eval", "pipeline_bf16_bs64"),
        ("startup", "bertkit --help"),
    }
    for (workload, side), row in rows.items():
        assert _positive(row["ratio_vs_bertkit"]), row
        if workload != "startup":
            assert _positive(row["ratio_vs_hf_best_bf16"]) and 0 <= row["metric"] <= 1, row
    assert rows["sst2", "hf_best_bf16"]["ratio_vs_hf_best_bf16"] == pytest.approx(1.0)
    assert rows["sst2", "bertkit"]["ratio_vs_bertkit"] == pytest.approx(1.0)
    assert report["headline"]["sst2"] == pytest.approx(rows["sst2", "bertkit"]["ratio_vs_hf_best_bf16"])

    epochs = report["hyperparameters"]["epochs"]
    for side in ("bertkit", "hf_best_bf16"):
        rounds = report["workloads"]["sst2"]["runs"][side]
        assert [r["round"] for r in rounds] == [1, 2]
        speeds = [r["n_train"] * epochs / r["train_seconds"] for r in rounds]
        row = rows["sst2", side]
        assert row["rounds"] == 2 and row["examples_per_s"] == pytest.approx(statistics.median(speeds))
        # bertkit's auto precision is bf16 on a CPU with native bf16, fp32 elsewhere
        assert row["precision"] == rounds[0]["precision"] and row["mfu_peak"] == (
            "bf16" if row["precision"] == "bf16" else "fp32"
        )
        assert row["mfu_peak_gflops"] == pytest.approx(peaks[row["mfu_peak"]])
        assert 0 < row["mfu"] == pytest.approx(row["gflops_per_s"] / peaks[row["mfu_peak"]], rel=1e-6)
        assert 0 <= row["padding_share"] < 1 and _positive(row["tokens_per_s"])
    assert rows["sst2", "hf_best_bf16"]["mfu_peak"] == "bf16"
    assert _positive(rows["eval", "bertkit"]["load_seconds"])
