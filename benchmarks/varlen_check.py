"""Packed rows through the variable-length attention against the padded batch, on a given device:
the check to run first on a lent GPU (engine/varlen_attention.py is tested on the CPU only).

For each packable family (the unit tests' tiny random models, tests/tiny_models.py) and three heads
(cls, ner, qa with bertkit's span loss), single texts and pairs: the padded batch through SDPA, then
the same batch packed through the variable-length attention; the largest differences of the
logits at real positions, the loss and every gradient (relative to the largest padded gradient).
fp32 must agree to float rounding (on CUDA: SDPA's memory-efficient kernel on both sides), bf16 to
bf16's (flash attention on the packed side). Then, with attention dropout 0.5 in training mode,
two packed passes must differ (dropout is applied) and a no-grad pass must not drop anything.

    python -m benchmarks.varlen_check [--device cuda] [--precisions fp32,bf16] [--name varlen_check]

Writes benchmarks/results/<name>.{json,md}; exits 1 when a case is over its tolerance.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TEXTS = ["a", "the film was good and the plot was fine", "ok", "john lives in paris with mary", "it was bad", "no"]
HEADS = {"cls": "AutoModelForSequenceClassification", "ner": "AutoModelForTokenClassification", "qa": "span"}
TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2}  # the largest difference allowed, relative to the padded values' largest


def _model(family: str, head: str, directory: Path, device, dtype):
    import torch
    import transformers

    from bertkit.networks.losses import SpanLoss

    torch.manual_seed(0)
    if head == "qa":
        qa = transformers.AutoModelForQuestionAnswering
        model = SpanLoss(qa.from_pretrained(directory, attn_implementation="sdpa"))
    else:
        model = getattr(transformers, HEADS[head]).from_pretrained(directory, attn_implementation="sdpa", num_labels=5)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model.to(device=device, dtype=dtype).train()


def _batch(tokenizer, head: str, pairs: bool, device):
    import torch

    batch = dict(tokenizer(*((TEXTS, TEXTS[::-1]) if pairs else (TEXTS,)), padding=True, return_tensors="pt"))
    mask, lengths = batch["attention_mask"], batch["attention_mask"].sum(1)
    if head == "qa":
        batch["start_positions"], batch["end_positions"] = (lengths - 1) // 2, lengths - 1
    elif head == "ner":
        batch["labels"] = (torch.arange(mask.numel()).view(mask.shape) % 5).masked_fill(mask == 0, -100)
    else:
        batch["labels"] = torch.arange(len(TEXTS)) % 5
    return {k: v.to(device) for k, v in batch.items()}


def _run(model, batch):
    """Loss, logits at real positions, gradients, all in fp32 on the CPU."""
    import torch

    model.zero_grad(set_to_none=True)
    out = model(**batch)
    out.loss.float().backward()
    real = batch["attention_mask"].bool()
    logits = torch.stack([out.start_logits[real], out.end_logits[real]]) if hasattr(out, "start_logits") else out.logits
    logits = logits[real] if logits.dim() == 3 else logits
    grads = {n: p.grad.float().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.float().cpu(), logits.float().detach().cpu(), grads


def _relative(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-6))


def compare(family: str, head: str, pairs: bool, precision: str, device, root: Path) -> dict:
    import torch
    import transformers

    from bertkit.engine.varlen_attention import VarlenAttention
    from bertkit.networks.packed_heads import pack_encoder, unpack_encoder

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tiny_models import build_family

    directory = root / family
    if not directory.exists():
        build_family(family, directory)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    model = _model(family, head, directory, device, dtype)
    batch = _batch(transformers.AutoTokenizer.from_pretrained(directory), head, pairs, device)
    padded = _run(model, batch)
    attention = VarlenAttention(model)
    attention.apply()
    assert pack_encoder(model), family
    packed = _run(model, batch)
    unpack_encoder(model)
    attention.undo()
    # against the largest gradient of all: a weight whose gradient sums to about zero (the span head's
    # bias: softmax gradients) would make its own ratio rounding noise over nothing
    largest = max(float(g.abs().max()) for g in padded[2].values())
    grads = max(float((packed[2][n] - padded[2][n]).abs().max()) for n in padded[2]) / largest
    return {
        "family": family,
        "head": head,
        "pairs": pairs,
        "precision": precision,
        "logits": _relative(packed[1], padded[1]),
        "loss": _relative(packed[0], padded[0]),
        "gradients": grads,
        "same_gradients": sorted(packed[2]) == sorted(padded[2]),
    }


def dropout_check(device) -> dict:
    """Attention dropout in training mode: two packed passes differ; under no_grad nothing drops."""
    from types import SimpleNamespace

    import torch

    from bertkit.engine.varlen_attention import varlen_attention
    from bertkit.networks.packed import PACKING, Packing

    torch.manual_seed(0)
    mask = torch.tensor([[1] * n + [0] * (9 - n) for n in (9, 4, 7)], device=device)
    packing = Packing.of(mask)
    qkv = [torch.randn(1, 2, packing.total, 8, device=device) for _ in range(3)]
    training = SimpleNamespace(training=True)
    first, second = (varlen_attention(training, *qkv, None, dropout=0.5, **{PACKING: packing})[0] for _ in range(2))
    plain = varlen_attention(training, *qkv, None, dropout=0.0, **{PACKING: packing})[0]
    with torch.no_grad():
        quiet = varlen_attention(training, *qkv, None, dropout=0.5, **{PACKING: packing})[0]
    return {
        "passes_differ": not torch.allclose(first, second),
        "no_grad_drops_nothing": bool(torch.allclose(quiet, plain)),
    }


def markdown(record: dict) -> str:
    lines = [
        f"# Packed (variable-length attention) vs padded, on {record['device_name']}",
        "",
        "Largest difference relative to the padded side's largest value; tolerance "
        + ", ".join(f"{p} {t:g}" for p, t in TOLERANCE.items())
        + f". Over tolerance: **{record['failures']}** of {len(record['cases'])} cases.",
        "",
        "| precision | family | head | texts | logits | loss | gradients |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in record["cases"]:
        texts = "pairs" if c["pairs"] else "single"
        differences = " | ".join(f"{c[k]:.1e}" for k in ("logits", "loss", "gradients"))
        lines.append(f"| {c['precision']} | {c['family']} | {c['head']} | {texts} | {differences} |")
    lines += ["", f"Attention dropout: {record['dropout']}", "", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    import torch

    from benchmarks.side_by_side import write_results
    from bertkit.networks.packed import PACKED_TYPES

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--name", default="varlen_check")
    args = p.parse_args()
    started, device = time.perf_counter(), torch.device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            compare(family, head, pairs, precision, device, Path(tmp))
            for precision in args.precisions.split(",")
            for family in PACKED_TYPES
            for head in HEADS
            for pairs in (False, True)
        ]
    over = [c for c in cases if max(c["logits"], c["loss"], c["gradients"]) > TOLERANCE[c["precision"]]]
    over += [c for c in cases if not c["same_gradients"] and c not in over]
    dropout = dropout_check(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU (SDPA's math kernel)"
    record = {"device_name": name, "torch": torch.__version__, "cases": cases, "failures": len(over)}
    record["dropout"] = dropout
    print(write_results(record, args.name, markdown, started))
    sys.exit(1 if over or not all(dropout.values()) else 0)


if __name__ == "__main__":
    main()
