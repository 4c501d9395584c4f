"""What attention in groups of rows buys a padded batch (networks/attention_groups.py): one process,
MiniLM token classifier in bf16 weights with bertkit's CPU training kernels, 32 rows of random
tokens of one length, forward and backward; for each length the arms run one step each,
interleaved, round after round: the attention of all 32 rows at once, and in groups of 16, 8, 4
and 2 rows (``SCORE_BYTES`` set so that the group has that many rows). The first round warms every
arm up and is not counted; the fastest counted round is reported.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.attention_groups [--lengths 48,128,256,384] [--rounds 3]

Prints milliseconds a step for each length and group size.
"""

from __future__ import annotations

import argparse
import time

GROUPS = (32, 16, 8, 4, 2)


def main() -> None:
    import torch

    from benchmarks.packing_steps import model_for
    from bertkit.networks import attention_groups

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="48,128,256,384")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    torch.manual_seed(0)
    model, budget = model_for("ner"), attention_groups.SCORE_BYTES
    heads = model.config.num_attention_heads
    for length in (int(n) for n in args.lengths.split(",")):
        ids = torch.randint(1000, 20000, (32, length))
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, 9, (32, length))}
        seconds = {rows: [] for rows in GROUPS}
        for round_ in range(args.rounds + 1):
            for rows in GROUPS:
                attention_groups.SCORE_BYTES = rows * heads * length * length * 2  # bf16: exactly `rows` rows a group
                started = time.perf_counter()
                model(**batch).loss.backward()
                model.zero_grad(set_to_none=True)
                if round_:
                    seconds[rows].append(time.perf_counter() - started)
        attention_groups.SCORE_BYTES = budget
        print(
            f"{length} tokens:",
            ", ".join(f"{rows} rows {min(s) * 1000:.0f} ms" for rows, s in seconds.items()),
            flush=True,
        )


if __name__ == "__main__":
    main()
