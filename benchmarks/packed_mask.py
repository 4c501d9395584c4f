"""What the packed row's all-ones attention mask saves (networks/packed.packed_inputs): one process,
MiniLM token classifier in bf16 weights with bertkit's CPU training kernels, 32 rows of random
tokens, forward and backward; for each batch the three arms run one step each, interleaved:
padded, packed without a mask (transformers then reads the restarting positions as packed
sequences and builds a total x total mask the training attention never reads), packed with the
all-ones mask (what bertkit does). The first batch warms every arm up and is not counted.

    flock /tmp/bertkit-heavy.lock python -m benchmarks.packed_mask [--batches 6]

Prints seconds per step for rows of 100-384 tokens (random batches) and 360-384 (length-grouped).
"""

from __future__ import annotations

import argparse
import random
import time

ARMS = ("padded", "packed, no mask (before)", "packed, all-ones mask (now)")


def batch(low: int, high: int, rows: int = 32) -> dict:
    import torch

    lengths = [random.randint(low, high) for _ in range(rows)]
    ids = torch.randint(1000, 20000, (rows, max(lengths)))
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    labels = torch.where(mask.bool(), 1, -100)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": labels}


def main() -> None:
    import torch

    from benchmarks.packing_steps import model_for
    from bertkit.networks import packed_heads

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=6)
    args = p.parse_args()
    random.seed(0)
    torch.manual_seed(0)
    model, with_mask = model_for("ner"), packed_heads.packed_inputs

    def without_mask(*given, **named):
        inputs = with_mask(*given, **named)
        inputs.pop("attention_mask")
        return inputs

    for name, low, high in (("random 100-384", 100, 384), ("grouped 360-384", 360, 384)):
        seconds = dict.fromkeys(ARMS, 0.0)
        for i in range(args.batches):
            inputs = batch(low, high)
            for arm in ARMS:
                if arm == "padded":
                    packed_heads.unpack_encoder(model)
                else:
                    packed_heads.pack_encoder(model)
                    packed_heads.packed_inputs = with_mask if "now" in arm else without_mask
                started = time.perf_counter()
                model(**inputs).loss.backward()
                model.zero_grad(set_to_none=True)
                seconds[arm] += (time.perf_counter() - started) if i else 0.0
        counted = args.batches - 1
        print(name, ", ".join(f"{arm} {s / counted:.2f} s" for arm, s in seconds.items()), flush=True)
    packed_heads.packed_inputs = with_mask


if __name__ == "__main__":
    main()
