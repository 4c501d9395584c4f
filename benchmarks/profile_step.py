"""Where one training step's time goes, and what each precision lever buys, in ONE process.

    python -m benchmarks.profile_step [--batch 32] [--length 16] [--rounds 5] [--profile VARIANT [--groups]]

Variants, run interleaved round after round (medians reported, so a busy machine hurts them alike):
  fp32          fp32 weights, fused AdamW
  autocast      fp32 weights under torch.autocast(bf16): every forward re-casts every weight
  master        bf16 weights + fp32 master weights (bertkit.engine.master_weights.MasterWeights): bertkit's bf16
  master_frozen master, word embeddings frozen (bertkit finetune --freeze-embeddings)
  sparse        master + sparse word-embedding gradients
  kernels       sparse + bertkit.engine.cpu_kernels (FastDropout, eager attention with it) + the last layer
                for [CLS] alone (networks/first_token_head.py, as finetune cls/pair does): bertkit's step now
  lazy          kernels + --lazy-embeddings (bertkit.engine.lazy_embeddings: only the batch's embedding rows)
  compiled      kernels + torch.compile of the model (inductor; fixed shapes here, its best case)
  compiled_encoder  kernels + torch.compile(dynamic=True) of the encoder alone (the embeddings'
                sparse backward stays eager): what variable lengths need; try with --lengths 8,39
``--lengths LO,HI``: each step draws its length in [LO, HI] (the same draws for every variant).
The step is bertkit's (engine.fit's body): forward, backward, clip, AdamW, zero. MiniLM as a sequence
classifier on random token ids. ``--profile VARIANT`` prints torch.profiler's top operators (5 steps); with
``--groups``, self CPU ms per step by operator family (10 steps, as benchmarks/README.md's before/after table).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time

import torch

VARIANTS = ("fp32", "autocast", "master", "master_frozen", "sparse", "kernels", "lazy", "compiled", "compiled_encoder")
KERNELS = ("kernels", "lazy", "compiled", "compiled_encoder")
PHASES = ("forward", "backward", "gradients to fp32", "clipping", "AdamW", "bf16 weights and zeroing")
# operator families of the before/after table; the rest is "everything else"
GROUPS = (
    ("matmuls (mm, addmm, bmm)", ("aten::mm", "aten::addmm", "aten::bmm")),
    (
        "dropout masks (bernoulli_ / random_; before: ge, where; now: clamp, sub_)",
        (
            "aten::bernoulli_",
            "aten::random_",
            "aten::ge",
            "aten::where",
            "aten::native_dropout",
            "aten::native_dropout_backward",
            "_MaskedScaleBackward",
            "aten::clamp",
            "aten::sub_",
            "_MaskedBackward",
        ),
    ),
    ("dtype casts and copies (copy_)", ("aten::copy_", "aten::_to_copy")),
    ("fused AdamW", ("aten::_fused_adamw_",)),
    ("gradient zeroing (fill_, zero_)", ("aten::fill_", "aten::zero_")),
    ("clipping norms and scales", ("aten::linalg_vector_norm", "aten::mul_")),
    (
        "GELU, softmax, LayerNorm (fwd+bwd)",
        (
            "aten::gelu",
            "aten::gelu_backward",
            "aten::_softmax",
            "aten::_softmax_backward_data",
            "aten::native_layer_norm",
            "aten::native_layer_norm_backward",
        ),
    ),
)


def build(
    variant: str, batch: int, length: int, lengths: tuple[int, int] | None = None, phases: bool = False, **config
):
    """bertkit's training step as ``variant`` runs it; ``phases``: the step returns ms per phase;
    ``config``: model config overrides (e.g. hidden_dropout_prob=0.0)."""
    from transformers import AutoModelForSequenceClassification

    from bertkit.engine import parameter_groups
    from bertkit.engine.master_weights import MasterWeights
    from bertkit.engine.optimisation import clip_in_adamw
    from bertkit.models import resolve_model

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(resolve_model("minilm"), num_labels=2, **config)
    model.train()
    if variant == "master_frozen":
        model.get_input_embeddings().weight.requires_grad_(False)
    groups = parameter_groups(model, 0.01)
    if variant in KERNELS:
        from bertkit.engine.cpu_kernels import CpuTrainingKernels
        from bertkit.networks.first_token_head import first_token_only_last_layer

        assert first_token_only_last_layer(model)
        CpuTrainingKernels(model).apply()
    sparse = variant in ("sparse", *KERNELS)
    master = (
        None
        if variant in ("fp32", "autocast")
        else MasterWeights(model, groups, sparse_embeddings=sparse, early_gradients=True)
    )
    if variant == "lazy":
        from bertkit.engine.lazy_embeddings import LazyAdamW

        optimizer = LazyAdamW(master.groups, *master.sparse_master(), lr=5e-5, fused=True)
    else:
        optimizer = torch.optim.AdamW(master.groups if master else groups, lr=5e-5, fused=True)
    forward = torch.compile(model) if variant == "compiled" else model
    if variant == "compiled_encoder":
        model.base_model.encoder.compile(dynamic=True)
    draws = random.Random(0)
    ids = torch.randint(1000, 20000, (batch, length))
    batch_inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, 2, (batch,))}
    autocast = variant == "autocast"

    def step():
        if lengths:
            ids = torch.randint(1000, 20000, (batch, draws.randint(*lengths)))
            batch_inputs.update(input_ids=ids, attention_mask=torch.ones_like(ids))
        marks = [time.perf_counter()]
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            loss = forward(**batch_inputs).loss
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        if master:
            master.accumulate()
            marks.append(time.perf_counter())
            clip_in_adamw(master, optimizer, 1.0)  # as the engine clips on a CPU
        else:
            marks.append(time.perf_counter())
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], 1.0)
        marks.append(time.perf_counter())
        optimizer.step()
        optimizer.grad_scale = None
        marks.append(time.perf_counter())
        if master:
            master.publish(rows_only=variant == "lazy")
        optimizer.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        if phases:
            return {name: 1000 * (b - a) for name, a, b in zip(PHASES, marks, marks[1:])}

    return step


def print_groups(prof, steps: int) -> None:
    per_step: dict[str, float] = {}
    for event in prof.key_averages():
        per_step[event.key] = per_step.get(event.key, 0.0) + event.self_cpu_time_total / 1000 / steps
    grouped = set()
    for name, keys in GROUPS:
        print(f"  {name:<50} {sum(per_step.get(k, 0.0) for k in keys):7.1f} ms")
        grouped.update(keys)
    print(f"  {'everything else':<50} {sum(v for k, v in per_step.items() if k not in grouped):7.1f} ms")
    print(f"  {'total (self CPU per step, profiled)':<50} {sum(per_step.values()):7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=16, help="tokens per row (SST-2 averages ~13)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant per round")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--lengths", help="LO,HI: each step draws its length (default: --length every step)")
    parser.add_argument("--profile", choices=VARIANTS, help="print the profiler's top operators of this variant")
    parser.add_argument("--groups", action="store_true", help="with --profile: ms per step by operator family")
    args = parser.parse_args()

    if args.profile:
        step = build(args.profile, args.batch, args.length)
        for _ in range(5):
            step()
        from torch.profiler import ProfilerActivity, profile

        profiled = 10 if args.groups else 5
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(profiled):
                step()
        print(f"{args.profile}: batch {args.batch} x {args.length}, {profiled} steps")
        if args.groups:
            print_groups(prof, profiled)
            return
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
        return

    variants = args.variants.split(",")
    lengths = tuple(int(x) for x in args.lengths.split(",")) if args.lengths else None
    steps = {v: build(v, args.batch, args.length, lengths) for v in variants}
    times = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    for v in variants:  # warm-up
        for _ in range(3):
            steps[v]()
    for round_ in range(args.rounds):
        for v in variants if round_ % 2 == 0 else reversed(variants):
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                steps[v]()
            times[v].append(1000 * (time.perf_counter() - started) / args.steps)
            cpu[v].append(1000 * (time.process_time() - cpu_started) / args.steps)
    print(
        f"batch {args.batch} x {args.lengths or args.length} tokens, {torch.get_num_threads()} threads, medians over "
        f"{args.rounds} rounds of {args.steps} steps; CPU ms = process CPU time per step (all threads), which a "
        f"busy machine inflates far less than wall time"
    )
    base, base_cpu = statistics.median(times[variants[0]]), statistics.median(cpu[variants[0]])
    for v in variants:
        wall, used = statistics.median(times[v]), statistics.median(cpu[v])
        print(
            f"  {v:<14} wall {wall:7.1f} ms (x{base / wall:4.2f})  CPU {used:7.1f} ms (x{base_cpu / used:4.2f})  "
            f"wall rounds: {', '.join(f'{t:.0f}' for t in times[v])}"
        )


if __name__ == "__main__":
    main()
