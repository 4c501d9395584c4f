"""Dropout's masks as multipliers against boolean masks, paired in ONE process: bertkit's MiniLM bf16
training step (benchmarks.profile_step's ``lazy`` variant: forward, backward, clip, AdamW) with the
CPU training kernels' dropout as it is (engine/cpu_kernels.py: a multiplier in the input's dtype,
one multiplication forward and one backward) and as it was before (a boolean mask through
``torch.where`` and a second pass for the scale, forward and backward; kept here as the "before"
arm). The arms alternate round after round, 10 steps each, the order flipped every round (a shared
machine's load falls on both alike); medians.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.dropout_masks [--shapes 32x20,32x40,8x128] [--rounds 10]

Writes benchmarks/results/dropout_masks.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from benchmarks.packing import cpu_flags
from benchmarks.side_by_side import write_results


class _BooleanMask(torch.autograd.Function):
    """The masks before: ``where(keep, x, 0) * scale`` forward and backward, the boolean kept."""

    @staticmethod
    def forward(ctx, x, keep, scale):
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.where(keep, x, 0).mul_(scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, 0).mul_(ctx.scale), None, None


def _boolean_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    from bertkit.engine import cpu_kernels

    threshold, scale = cpu_kernels.keep_threshold(p)
    count = x.numel()
    bits = cpu_kernels.random_words((count + 3) // 4).view(torch.int16)[:count].view(x.shape)
    return _BooleanMask.apply(x, bits >= threshold, scale)


def _boolean_forward(self, x: torch.Tensor) -> torch.Tensor:
    if not self.training or self.p == 0:
        return torch.nn.Dropout.forward(self, x)
    return _boolean_dropout(x, self.p)


def measure(batch: int, length: int, rounds: int) -> dict:
    from benchmarks.profile_step import build
    from bertkit.engine import cpu_kernels

    now = (cpu_kernels.fast_dropout, cpu_kernels.FastDropout.forward)
    arms = {"boolean (before)": (_boolean_dropout, _boolean_forward), "multiplier (now)": now}
    step = build("lazy", batch, length)
    for _ in range(5):
        step()
    ms = {arm: [] for arm in arms}
    try:
        for round_ in range(rounds):
            for arm in list(arms) if round_ % 2 == 0 else list(arms)[::-1]:
                cpu_kernels.fast_dropout, cpu_kernels.FastDropout.forward = arms[arm]
                start = time.perf_counter()
                for _ in range(10):
                    step()
                ms[arm].append((time.perf_counter() - start) * 100)
    finally:
        cpu_kernels.fast_dropout, cpu_kernels.FastDropout.forward = now
    before, after = (statistics.median(ms[arm]) for arm in arms)
    return {
        "shape": f"{batch}x{length}",
        "ms_per_step": {arm: round(statistics.median(v), 1) for arm, v in ms.items()},
        "speedup": round(before / after, 3),
    }


def markdown(record: dict) -> str:
    lines = [
        "# Dropout masks: multipliers (now) against booleans (before), MiniLM bf16 training steps, paired",
        "",
        f"CPU flags: {record['cpu_flags']}; torch threads {record['threads']}; {record['rounds']} rounds of 10 "
        f"steps an arm; load average {record['load_avg']} at the end.",
        "",
        "| rows x tokens | boolean (before), ms a step | multiplier (now), ms a step | speed-up |",
        "|---|---|---|---|",
    ]
    for r in record["shapes"]:
        before, now = r["ms_per_step"].values()
        lines.append(f"| {r['shape']} | {before} | {now} | {r['speedup']}x |")
    lines += ["", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="32x20,32x40,8x128")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--name", default="dropout_masks")
    args = p.parse_args()
    started = time.perf_counter()
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes.split(",")]
    record = {
        "threads": torch.get_num_threads(),
        "cpu_flags": cpu_flags(),
        "rounds": args.rounds,
        "shapes": [measure(batch, length, args.rounds) for batch, length in shapes],
        "load_avg": round(os.getloadavg()[0], 2),
    }
    print(write_results(record, args.name, markdown, started))


if __name__ == "__main__":
    main()
