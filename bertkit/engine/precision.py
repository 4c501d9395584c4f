"""Which precision to run in (``--precision auto``).

``auto`` picks bf16 only where the hardware computes it natively: a CPU with avx512_bf16 or
amx_bf16, a CUDA GPU whose ``is_bf16_supported(including_emulation=False)`` says so, or a TPU.
Elsewhere it picks fp32 ("no"): emulated bf16 is slower than fp32 (PyTorch issue #86270). A CPU whose
oneDNN is capped below bf16 instructions by ``ONEDNN_MAX_CPU_ISA`` (oneDNN's documented "CPU dispatcher
control", e.g. ``AVX2`` to try an AVX2-only CPU's code paths) counts as lacking them: measured here
(AMX CPU capped at AVX2), one 640 x 384 x 1,536 bf16 matmul took 301 ms against fp32's 4 ms.

bf16 training (bf16 weights, fp32 master weights, sparse embedding gradients) is in
``bertkit.engine.master_weights``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")
# ONEDNN_MAX_CPU_ISA values (oneDNN's dnnl::cpu_isa) that leave oneDNN without bf16 instructions
ISA_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str]:
    """The feature flags of the first CPU in ``/proc/cpuinfo`` (empty where there is none: macOS,
    Windows, a sandbox without /proc)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 and ARM spell the line differently
            return set(value.split())
    return set()


def native_bf16(device_type: str, flags: set[str] | None = None) -> tuple[bool, str]:
    """Whether ``device_type`` computes bf16 natively, and why (for the console and bertkit.json)."""
    if device_type == "cuda":
        ok = torch.cuda.is_bf16_supported(including_emulation=False)
        return ok, f"GPU {'has' if ok else 'lacks'} native bf16"
    if device_type == "xla":
        return True, "TPU computes bf16 natively"
    if device_type == "cpu":
        found = sorted(set(BF16_CPU_FLAGS) & (cpu_flags() if flags is None else flags))
        cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
        if found and cap in ISA_WITHOUT_BF16:
            return False, (
                f"CPU has {', '.join(found)} but ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN from them "
                "(emulated bf16 is slower than fp32)"
            )
        if found:
            return True, f"CPU has {', '.join(found)}"
        return False, f"CPU has neither {' nor '.join(BF16_CPU_FLAGS)} (emulated bf16 is slower than fp32)"
    return False, f"no native bf16 check for device {device_type!r}"


def resolve(requested: str, device_type: str, flags: set[str] | None = None) -> tuple[str, str]:
    """``(precision, reason)``: ``auto`` becomes ``bf16`` or ``no``; the others stay as asked."""
    if requested != "auto":
        return requested, "asked for"
    ok, why = native_bf16(device_type, flags)
    return ("bf16" if ok else "no"), f"auto: {why}"


def describe(precision: str) -> str:
    return {"no": "fp32", "bf16": "bf16", "fp16": "fp16"}.get(precision, precision)
