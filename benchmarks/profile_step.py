"""Where one training step's time goes: forward, backward, clipping, AdamW (fused or foreach).

    python -m benchmarks.profile_step [--batch 32] [--length 14] [--foreach]

Uses the bundled MiniLM as a sequence classifier (stock model, no bertkit shortcut) on random token
ids; prints the mean milliseconds of each phase over 20 steps after 5 warm-up steps. Run it on a
quiet machine: it exists to explain the FLOP-utilisation figure of the full benchmark.
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=14, help="tokens per row (SST-2 averages ~13)")
    parser.add_argument("--foreach", action="store_true", help="the multi-tensor AdamW instead of the fused one")
    args = parser.parse_args()

    from transformers import AutoModelForSequenceClassification

    from bertkit.models import resolve_model

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(resolve_model("minilm"), num_labels=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, fused=not args.foreach)
    ids = torch.randint(1000, 20000, (args.batch, args.length))
    mask, labels = torch.ones_like(ids), torch.randint(0, 2, (args.batch,))
    totals = dict.fromkeys(("forward", "backward", "clip", "optimizer"), 0.0)
    for step in range(25):
        t0 = time.perf_counter()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        t3 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        if step >= 5:
            for name, seconds in zip(totals, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                totals[name] += seconds
    step_ms = {name: 1000 * seconds / 20 for name, seconds in totals.items()}
    whole = sum(step_ms.values())
    print(f"batch {args.batch} x {args.length} tokens, {'foreach' if args.foreach else 'fused'} AdamW, "
          f"{whole:.1f} ms per step:")
    for name, ms in step_ms.items():
        print(f"  {name:<9} {ms:7.1f} ms  {100 * ms / whole:5.1f}%")


if __name__ == "__main__":
    main()
