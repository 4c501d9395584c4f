"""Packed rows through the variable-length attention against the padded batch, on a given device:
the check to run first on a lent GPU (engine/varlen_attention.py's kernel calls are tested on the CPU
only through stand-ins).

Cases, each the padded batch through SDPA and then the same batch packed through the
variable-length attention, with the kernel that ran recorded (flash for bf16/fp16 on Ampere and
later, the memory-efficient one for fp32; on the CPU each row alone through SDPA) and a case that
ran no packed attention counted as a failure:
* every packable family's tiny model (tests/tiny_models.py, head size 16) x cls / ner / qa (bertkit's
  span loss) x single texts and pairs;
* BERT at MiniLM's shape (12 heads of 32) and at BERT-base's head size (64), random weights, cls and
  qa, with and without ``--save-memory``'s recomputed attention;
* on CUDA, fp16 autocast over fp32 weights (``--precision fp16``).
The largest differences of the logits at real positions, the loss and every gradient, each
relative to the padded side's largest value (gradients to the largest gradient of any weight).
Then attention dropout (p 0.5, training): two packed passes differ, a no-grad pass drops nothing,
and the backward uses the forward's mask: for a fixed seed the output is linear in v, so
<out(v + dv) - out(v), g> must equal <dL/dv, dv> for L = <out(v), g>.

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
TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2, "fp16-autocast": 2e-2}  # relative to the padded values' largest
WIDE = {"bert-h32": (384, 12), "bert-h64": (256, 4)}  # hidden size, heads: head sizes 32 (MiniLM) and 64


def _model(family: str, head: str, directory: Path, device, precision: str, save_memory: bool):
    import torch
    import transformers

    from bertkit.engine.attention_recompute import checkpoint_attention
    from bertkit.networks.losses import SpanLoss

    torch.manual_seed(0)
    name = "AutoModelForQuestionAnswering" if head == "qa" else HEADS[head]
    overrides = {} if head == "qa" else {"num_labels": 5}
    if family in WIDE:  # the tiny BERT's vocabulary under a wider random model
        hidden, heads = WIDE[family]
        config = transformers.AutoConfig.from_pretrained(
            directory, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden, **overrides
        )
        model = getattr(transformers, name).from_config(config, attn_implementation="sdpa")
    else:
        model = getattr(transformers, name).from_pretrained(directory, attn_implementation="sdpa", **overrides)
    model = SpanLoss(model) if head == "qa" else model
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    if save_memory:
        checkpoint_attention(model)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
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


def _run(model, batch, precision: str):
    """Loss, logits at real positions, gradients, all in fp32 on the CPU."""
    import contextlib

    import torch

    model.zero_grad(set_to_none=True)
    device = batch["input_ids"].device
    autocast = (
        torch.autocast(device.type, dtype=torch.float16) if precision == "fp16-autocast" else contextlib.nullcontext()
    )
    with autocast:
        out = model(**batch)
    out.loss.float().backward()
    real = batch["attention_mask"].bool()
    logits = torch.stack([out.start_logits[real], out.end_logits[real]]) if hasattr(out, "start_logits") else out.logits
    logits = logits[real] if logits.dim() == 3 else logits
    grads = {n: p.grad.float().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.float().cpu(), logits.float().detach().cpu(), grads


def _relative(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-6))


def compare(family, head, pairs, precision, device, root: Path, save_memory: bool = False) -> dict:
    import transformers

    from bertkit.engine import varlen_attention
    from bertkit.networks.packed_heads import pack_encoder, unpack_encoder

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tiny_models import build_family

    base = "bert" if family in WIDE else family
    directory = root / base
    if not directory.exists():
        build_family(base, directory)
    model = _model(family, head, directory, device, precision, save_memory)
    batch = _batch(transformers.AutoTokenizer.from_pretrained(directory), head, pairs, device)
    padded = _run(model, batch, precision)
    attention = varlen_attention.VarlenAttention(model)
    attention.apply()
    assert pack_encoder(model), family
    before = dict(varlen_attention.kernel_calls)
    packed = _run(model, batch, precision)
    ran = {k: n - before.get(k, 0) for k, n in varlen_attention.kernel_calls.items() if n > before.get(k, 0)}
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
        "save_memory": save_memory,
        "kernels": ran,
        "logits": _relative(packed[1], padded[1]),
        "loss": _relative(packed[0], padded[0]),
        "gradients": grads,
        "same_gradients": sorted(packed[2]) == sorted(padded[2]),
    }


def expected_kernel(precision: str, device) -> str:
    import torch

    if device.type != "cuda":
        return "rows"
    flash = precision != "fp32" and torch.cuda.get_device_capability(device)[0] >= 8
    return "flash" if flash else "efficient"


def dropout_check(device, precision: str) -> dict:
    """Attention dropout in training mode: two packed passes differ, no_grad drops nothing, and the
    backward replays the forward's mask (the output is linear in v for a fixed seed)."""
    from types import SimpleNamespace

    import torch

    from bertkit.engine.varlen_attention import varlen_attention
    from bertkit.networks.packed import PACKING, Packing

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    torch.manual_seed(0)
    mask = torch.tensor([[1] * n + [0] * (40 - n) for n in (40, 17, 29, 8)], device=device)
    packing = Packing.of(mask)
    q, k, v, dv, g = (torch.randn(1, 2, packing.total, 32, device=device, dtype=dtype) for _ in range(5))
    training = SimpleNamespace(training=True)

    def attend(value, p=0.5, seed=1):
        torch.manual_seed(seed)
        return varlen_attention(training, q, k, value, None, dropout=p, **{PACKING: packing})[0]

    first, second, plain = attend(v, seed=1), attend(v, seed=2), attend(v, p=0.0)
    with torch.no_grad():
        quiet = attend(v)
    v_grad = v.clone().requires_grad_()
    out = attend(v_grad)
    (out.float() * g.float().transpose(1, 2)).sum().backward()
    through_backward = float((v_grad.grad.float() * dv.float()).sum())
    real = len(packing.index)
    moved = (attend(v + dv).float() - out.detach().float())[:, :real]
    through_forward = float((moved * g.float().transpose(1, 2)[:, :real]).sum())
    gap = abs(through_backward - through_forward) / max(abs(through_forward), 1e-6)
    return {
        "precision": precision,
        "passes_differ": not torch.allclose(first, second),
        "no_grad_drops_nothing": bool(torch.allclose(quiet, plain)),
        "backward_replays_the_mask": gap < TOLERANCE[precision],
        "backward_gap": gap,
    }


def markdown(record: dict) -> str:
    lines = [
        f"# Packed (variable-length attention) vs padded, on {record['device_name']}",
        "",
        "Largest difference relative to the padded side's largest value; tolerance "
        + ", ".join(f"{p} {t:g}" for p, t in TOLERANCE.items())
        + f". Failing (over tolerance, or not the expected kernel): **{record['failures']}** of "
        + f"{len(record['cases'])} cases.",
        "",
        "| precision | family | head | texts | --save-memory | kernel calls | logits | loss | gradients |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in record["cases"]:
        texts = "pairs" if c["pairs"] else "single"
        differences = " | ".join(f"{c[k]:.1e}" for k in ("logits", "loss", "gradients"))
        kernels = ", ".join(f"{k} {n}" for k, n in c["kernels"].items()) or "none"
        lines.append(
            f"| {c['precision']} | {c['family']} | {c['head']} | {texts} | {c['save_memory']} | {kernels} "
            f"| {differences} |"
        )
    lines += ["", "Attention dropout:", ""]
    lines += [f"- {d}" for d in record["dropout"]]
    lines += ["", f"Command: `{record['command']}`", ""]
    return "\n".join(lines)


def cases(precisions: list[str], device) -> list[tuple]:
    from bertkit.networks.packed import PACKED_TYPES

    found = [(f, h, p, prec, False) for prec in precisions for f in PACKED_TYPES for h in HEADS for p in (False, True)]
    found += [(f, h, True, prec, s) for prec in precisions for f in WIDE for h in ("cls", "qa") for s in (False, True)]
    if device.type == "cuda":
        found += [(f, h, True, "fp16-autocast", False) for f in ("bert", *WIDE) for h in ("cls", "qa")]
    return found


def main() -> None:
    import torch

    from benchmarks.side_by_side import write_results

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--name", default="varlen_check")
    args = p.parse_args()
    started, device = time.perf_counter(), torch.device(args.device)
    precisions = args.precisions.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        found = [compare(*case[:4], device, Path(tmp), save_memory=case[4]) for case in cases(precisions, device)]
    for case in found:
        wanted = expected_kernel("bf16" if case["precision"] == "fp16-autocast" else case["precision"], device)
        case["ok"] = (
            max(case["logits"], case["loss"], case["gradients"]) <= TOLERANCE[case["precision"]]
            and case["same_gradients"]
            and set(case["kernels"]) == {wanted}
        )
    dropout = [dropout_check(device, precision) for precision in precisions]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU (each row alone through SDPA)"
    failures = sum(not case["ok"] for case in found)
    record = {"device_name": name, "torch": torch.__version__, "cases": found, "failures": failures}
    record["dropout"] = dropout
    print(write_results(record, args.name, markdown, started))
    dropout_ok = all(
        d["passes_differ"] and d["no_grad_drops_nothing"] and d["backward_replays_the_mask"] for d in dropout
    )
    sys.exit(1 if failures or not dropout_ok else 0)


if __name__ == "__main__":
    main()
