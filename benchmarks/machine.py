"""What the machine is, for every benchmark's header: its CPU and the flags that decide matmul speed,
kernel caps set in the environment, the matmul peaks MFU divides by, the load average, the commit."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# the CPU features that decide matmul speed (AMX: bf16 tiles, several times AVX-512's bf16 rate)
MATRIX_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
REPOSITORY = Path(__file__).resolve().parent.parent


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# Each kernel library's own switch below the CPU's best instructions, all three needed to try an
# AVX2-only CPU's code paths on a newer one: oneDNN's (bf16, its matmuls), PyTorch's own vectorized
# kernels, and oneMKL's, which torch's fp32 CPU matmul calls (sgemm). Without the last, fp32 matmuls
# keep AVX-512: 2048 x 384 x 1536 ran at 398 GFLOP/s with the first two set, 233 with all three.
CAP_SWITCHES = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")


# Every library's switch at an AVX2-only CPU's instructions (bf16 is emulated there: fp32 trains).
CAPS = {"avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}


def cap_kernels(isa: str) -> None:
    """Cap every kernel library at ``isa`` for this process and the ones it starts (``--cap``): all three
    switches at once, so none is forgotten. Each library reads its switch once, when torch loads it."""
    if "torch" in sys.modules:
        raise RuntimeError("--cap must take effect before torch is imported; this process imported it already")
    os.environ.update(CAPS[isa])


def kernel_caps() -> dict:
    """The kernels' ISA caps set in the environment (an AVX2-only CPU's code paths tried on a newer one)."""
    return {k: os.environ[k] for k in CAP_SWITCHES if os.environ.get(k)}


def uncapped_libraries(caps: dict) -> list[str]:
    """The switches a capped run left unset: those libraries ran at the CPU's best instructions."""
    return [k for k in CAP_SWITCHES if k not in caps] if caps else []


def matmul_peak(seconds: float) -> dict:
    """Best single 2048 x 2048 torch.matmul, fp32 and bf16 tensors, in GFLOP/s: MFU's denominators. bf16
    only where it is native (an emulated bf16 matmul of that size takes minutes; no side trains in it)."""
    import torch

    from bertkit.engine.precision import native_bf16

    peaks = {}
    dtypes = (
        (("fp32", torch.float32), ("bf16", torch.bfloat16)) if native_bf16("cpu")[0] else (("fp32", torch.float32),)
    )
    for name, dtype in dtypes:
        a, b = (torch.randn(2048, 2048, generator=torch.Generator().manual_seed(s)).to(dtype) for s in (0, 1))
        torch.matmul(a, b)  # warm-up
        best, end = 0.0, time.perf_counter() + seconds / 2
        while time.perf_counter() < end:
            started = time.perf_counter()
            torch.matmul(a, b)
            best = max(best, 2 * 2048**3 / (time.perf_counter() - started) / 1e9)
        peaks[name] = best
    return peaks


def machine() -> dict:
    import torch
    import transformers

    fields = {}
    for line in open("/proc/cpuinfo"):  # the first core's fields are every core's here
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    cpu, flags = fields.get("model name") or platform.processor(), set(fields.get("flags", "").split())

    def git(*args) -> str:
        return subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True).stdout

    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_model": cpu,
        "cpu_flags": [f for f in MATRIX_FLAGS if f in flags],
        "usable_cores": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "isa_caps": kernel_caps(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "git_commit": git("rev-parse", "HEAD").strip(),
        "git_uncommitted_files": len(git("status", "--porcelain").splitlines()),
    }
