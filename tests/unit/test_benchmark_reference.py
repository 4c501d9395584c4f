"""The benchmark's headline divides by the Trainer's best recipe in its faster precision on the CPU
that ran it: bf16 where bf16 is native, fp32 where it is emulated (an AVX2-only CPU)."""

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.machine import CAP_SWITCHES
from benchmarks.report import _reference, headline

REPO = Path(__file__).resolve().parents[2]


def _rows(bf16: float | None, fp32: float | None) -> list[dict]:
    rows = [{"workload": "sst2", "side": "bertkit", "examples_per_s": 300.0}]
    for side, speed in (("hf_best_bf16", bf16), ("hf_best", fp32)):
        if speed is not None:
            rows.append({"workload": "sst2", "side": side, "examples_per_s": speed})
    return rows


def test_the_faster_trainer_precision_is_the_reference():
    assert _reference("sst2", _rows(200.0, 80.0))["side"] == "hf_best_bf16"  # native bf16
    assert _reference("sst2", _rows(2.0, 100.0))["side"] == "hf_best"  # emulated bf16
    assert _reference("sst2", _rows(None, 100.0))["side"] == "hf_best"  # bf16 not run
    assert _reference("sst2", _rows(None, None)) == {}


def test_predict_keeps_its_fixed_reference():
    rows = [
        {"workload": "predict", "side": s, "examples_per_s": v}
        for s, v in (("pipeline_bf16_bs64", 5.0), ("hf_best", 9.0))
    ]
    assert _reference("predict", rows)["side"] == "pipeline_bf16_bs64"


def test_headline_reads_the_bertkit_rows_ratio():
    rows = [
        {"workload": "sst2", "side": "bertkit", "ratio_vs_hf_best_bf16": 1.4},
        {"workload": "sst2", "side": "hf_best"},
    ]
    assert headline(rows) == {"sst2": 1.4}


def test_a_capped_run_says_its_caps_before_the_flags():
    from benchmarks.report import cpu_flags

    every = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    machine = {"cpu_flags": ["avx2", "amx_bf16"], "isa_caps": every}
    assert cpu_flags(machine) == (
        "capped: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2; "
        "CPU flags avx2 amx_bf16"
    )
    # the first AVX2 runs left oneMKL (torch's fp32 matmuls) on AVX-512: their reports say so
    machine["isa_caps"] = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert cpu_flags(machine).startswith(
        "capped: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2 (MKL_ENABLE_INSTRUCTIONS unset: that library"
    )
    assert cpu_flags({"cpu_flags": ["avx2"]}) == "avx2; no AMX"


def test_kernel_caps_come_from_the_environment_for_every_benchmark(monkeypatch):
    from benchmarks.machine import kernel_caps
    from benchmarks.packing import cpu_flags as packing_flags

    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert kernel_caps() == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert packing_flags().endswith(
        "(kernels capped: ONEDNN_MAX_CPU_ISA=AVX2; ATEN_CPU_CAPABILITY unset; MKL_ENABLE_INSTRUCTIONS unset)"
    )
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert kernel_caps() == {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert kernel_caps() == {} and "capped" not in packing_flags()


def test_reproduce_says_an_emulated_bf16_peak_was_not_measured_instead_of_zero():
    from benchmarks.reproduce import _bf16_peak

    assert _bf16_peak({"fp32": 430.0}) == "– (emulated here: not measured)"
    assert _bf16_peak({"fp32": 430.0, "bf16": 2794.3}) == "2794"


def test_cap_avx2_sets_every_library_switch_before_torch_loads():
    """`--cap avx2` (benchmarks run, run_profile): all three switches, so oneMKL's fp32 matmuls are
    capped too (the first AVX2 runs set two by hand), and torch then dispatches its own kernels at AVX2."""
    script = (
        "import os, sys\n"
        "from benchmarks.machine import cap_kernels, kernel_caps\n"
        "cap_kernels('avx2')\n"
        "import torch\n"
        "print(sorted(kernel_caps()), torch.backends.cpu.get_cpu_capability())\n"
        "try:\n"
        "    cap_kernels('avx2')\n"
        "except RuntimeError as late:\n"
        "    print('refused:', late)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in CAP_SWITCHES}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    caps, refused = done.stdout.splitlines()
    assert caps == "['ATEN_CPU_CAPABILITY', 'MKL_ENABLE_INSTRUCTIONS', 'ONEDNN_MAX_CPU_ISA'] AVX2"
    assert refused.startswith("refused: --cap must take effect before torch is imported")


def test_benchmarks_run_caps_before_it_runs(monkeypatch):
    from benchmarks import run as runner

    asked = []
    monkeypatch.setattr(runner, "cap_kernels", asked.append)
    monkeypatch.setattr(runner, "run", lambda args: 0)
    assert runner.main(["run", "--cap", "avx2", "--only", "sst2"]) == 0 and asked == ["avx2"]
    assert runner.main(["run", "--only", "sst2"]) == 0 and asked == ["avx2"]
