"""Where bertkit's training step spends its time beyond the operator profile: by phase, at a tiny
batch (what is fixed per step), without dropout (what any dropout kernel could save at most), and
what flattening the bf16 weights' copy would buy. One process, medians of interleaved rounds.

    python -m benchmarks.step_phases [--variant lazy] [--rounds 5]

benchmarks/README.md ("Speed round three") quotes its output.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.profile_step import build


def timed(fn, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        fn()
    return 1000 * (time.perf_counter() - started) / steps


def phases(variant: str, batch: int, length: int, steps: int = 20) -> dict[str, float]:
    """ms per step of each phase of bertkit's step (profile_step.build's), averaged over ``steps``."""
    step = build(variant, batch, length, phases=True)
    for _ in range(5):
        step()
    totals: dict[str, float] = {}
    for _ in range(steps):
        for name, ms in step().items():
            totals[name] = totals.get(name, 0.0) + ms / steps
    return totals


def flat_copy(rounds: int) -> tuple[float, float]:
    """ms to round MiniLM's dense fp32 masters into bf16 weights: one copy per tensor vs one flat copy."""
    from transformers import AutoModel

    from bertkit.models import resolve_model

    dense = [
        p.detach()
        for n, p in AutoModel.from_pretrained(resolve_model("minilm")).named_parameters()
        if "word_embeddings" not in n
    ]
    masters, weights = [p.clone() for p in dense], [p.to(torch.bfloat16) for p in dense]
    flat_master = torch.cat([p.reshape(-1) for p in masters])
    flat_weights = flat_master.to(torch.bfloat16)
    per_tensor, flat = [], []
    for _ in range(rounds):
        per_tensor.append(timed(lambda: torch._foreach_copy_(weights, masters), 20))
        flat.append(timed(lambda: flat_weights.copy_(flat_master), 20))
    return statistics.median(per_tensor), statistics.median(flat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="lazy", help="a profile_step variant (default lazy)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{torch.get_num_threads()} threads, variant {args.variant}")
    for batch, length in ((32, 16), (1, 4)):
        split = phases(args.variant, batch, length)
        print(
            f"  phases at {batch} x {length}: "
            + ", ".join(f"{k} {v:.1f}" for k, v in split.items())
            + f"; total {sum(split.values()):.1f} ms"
        )
    with_dropout, without = (
        build(args.variant, 32, 16),
        build(args.variant, 32, 16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    )
    times = {"dropout 0.1": [], "no dropout": []}
    for fn in (with_dropout, without):
        timed(fn, 3)
    for _ in range(args.rounds):
        times["dropout 0.1"].append(timed(with_dropout, 10))
        times["no dropout"].append(timed(without, 10))
    print("  step at 32 x 16: " + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in times.items()))
    per_tensor, flat = flat_copy(args.rounds)
    print(f"  masters -> bf16 weights: {per_tensor:.2f} ms as 104 tensor copies, {flat:.2f} ms as one flat copy")


if __name__ == "__main__":
    main()
