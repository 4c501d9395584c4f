"""Export a model directory to ONNX (torch.onnx, dynamic batch and sequence axes), optionally
quantise it to int8 (ONNX Runtime dynamic quantisation of the weights), and check parity.

Parity runs both backends over the same features (the model's own evaluation data, or
``data``): the largest absolute difference of any output (logits) and, with gold labels, the
main metric of each, so int8's accuracy cost is a measured number. The numbers are returned and
stored in ``DIR/onnx/export.json``; the files appear all at once (written beside, then renamed).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from bertkit.model_dir import load_meta, recorded_eval_data, staged_output, write_json
from bertkit.model_dir.files import probe_writable
from bertkit.errors import BertkitError
from bertkit.export.runtime import FP32_FILE, INT8_FILE, ONNX_DIR, OnnxRunner

OPSET = 18
PARITY_SAMPLES = 500


def export_onnx(model_dir: str, int8: bool = False, data: str | None = None, samples: int = PARITY_SAMPLES,
                batch_size: int = 32) -> dict:
    for module in ("onnx", "onnxruntime"):
        if __import__("importlib").util.find_spec(module) is None:
            raise BertkitError(f"ONNX export needs {module}", "pip install 'bertkit[onnx]'")
    if samples < 1:
        raise BertkitError(f"--samples must be >= 1, got {samples}", "give how many examples parity runs on")
    from bertkit.inference import load_for_inference
    from bertkit.data import registry
    from bertkit.tasks import task_from_state
    from bertkit.tasks.base import EVAL

    directory = Path(model_dir)
    meta = load_meta(model_dir)
    _check_exportable(meta, model_dir)
    _check_replaceable(directory / ONNX_DIR)
    adapter = task_from_state(meta["task"])
    data = data or recorded_eval_data(meta)
    split = registry.DATASETS[data].dev_split if registry.is_known(data) else "dev"
    data_dir = None if registry.data_dir() else meta.get("data", {}).get("data_dir")  # where training found it
    source = registry.resolve(data, split, data_dir, adapter.name, command="export onnx")
    examples = adapter.read(source, EVAL)[:samples]
    engine, network, tokenizer = load_for_inference(model_dir, adapter, "no", meta=meta)
    features = adapter.preprocess(examples, tokenizer, train=False)

    target = directory / ONNX_DIR
    with staged_output(target) as staging:  # an old onnx/ stays until the new one is complete
        started = time.perf_counter()
        _export(engine.unwrap(network), adapter, tokenizer, staging / FP32_FILE)
        report = {"opset": OPSET, "export_seconds": round(time.perf_counter() - started, 2),
                  "parity_data": source.description, "parity_examples": len(examples)}
        reference = engine.infer(network, features, batch_size, adapter.output_names, adapter.per_token_outputs,
                                 tokenizer.pad_token_id, description="torch")
        files = {"fp32": staging / FP32_FILE}
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is for CNNs
            quantize_dynamic(str(staging / FP32_FILE), str(staging / INT8_FILE), weight_type=QuantType.QInt8)
            files["int8"] = staging / INT8_FILE
        gold = _has_gold(examples)
        torch_metrics = _main_metric(adapter, examples, features, reference) if gold else None
        report["torch"] = {"main_metric": adapter.main_metric, "value": torch_metrics}
        for name, path in files.items():
            runner = OnnxRunner(path)
            outputs = runner.infer(None, features, batch_size, adapter.output_names, adapter.per_token_outputs,
                                   tokenizer.pad_token_id)
            entry = {"file": f"{ONNX_DIR}/{path.name}", "megabytes": round(path.stat().st_size / 2 ** 20, 2),
                     "max_abs_diff": _max_abs_diff(reference, outputs, adapter.output_names)}
            if gold:
                value = _main_metric(adapter, examples, features, outputs)
                entry.update(value=value, delta=round(value - torch_metrics, 6))
            report[name] = entry
        write_json(staging / "export.json", report)
    report["written_to"] = str(target)
    return report


def _check_exportable(meta: dict, model_dir: str) -> None:
    """A `pretrain mlm` output is a starting point, not a task model: its scorer masks tokens at
    random inside the graph (no ONNX equivalent) and nothing serves its ONNX file (predict and
    serve run task models), so it is refused rather than exported half-way."""
    if meta.get("kind") == "pretrain":
        raise BertkitError(f"{model_dir} is a `bertkit pretrain mlm` output (a masked-LM starting point), which has "
                           "no task to export to ONNX", f"fine-tune it first (`bertkit finetune TASK --model "
                           f"{model_dir} ...`) and export that model")


def _check_replaceable(target: Path) -> None:
    """The new export replaces DIR/onnx/ whole: it may hold only what an export wrote, and the
    model directory must be writable, both found out before the model is loaded."""
    ours = {FP32_FILE, INT8_FILE, "export.json"}
    if target.exists() and not target.is_dir():
        raise BertkitError(f"{target} is a file an export did not write, which a new export would delete",
                           f"move or rename {target} first")
    foreign = sorted(p.name for p in target.iterdir() if p.name not in ours) if target.is_dir() else []
    if foreign:
        raise BertkitError(f"{target} holds files an export did not write ({', '.join(foreign[:3])}), which a new "
                           "export would delete", f"move them out of {target} first")
    probe_writable(target.parent, f"export to {target}")


def _export(model, adapter, tokenizer, path: Path) -> None:
    import torch

    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in tokenizer.model_input_names
                                               else [])

    class Outputs(torch.nn.Module):  # plain tuples out: ONNX has no ModelOutput
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            out = self.inner(**kwargs)
            return tuple(out[name] for name in adapter.output_names)

    model = model.float().eval()
    example = tokenizer(["an example to trace", "a second, longer example to trace the model with"],
                        padding=True, return_tensors="pt")
    args = tuple(example[name] for name in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes.update({name: ({0: "batch", 1: "sequence"} if adapter.per_token_outputs else {0: "batch"})
                 for name in adapter.output_names})
    import warnings

    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about constants; parity below is the real check
        # the TorchScript exporter: dynamic axes without shape guards, and no onnxscript needed
        torch.onnx.export(Outputs(model), args, str(path), input_names=names, output_names=list(adapter.output_names),
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)


def _has_gold(examples) -> bool:
    return bool(examples) and all(("label" in ex) or ("tags" in ex) or ("answers" in ex) for ex in examples)


def _main_metric(adapter, examples, features, outputs) -> float:
    predictions = adapter.postprocess(examples, features, outputs)
    return round(float(adapter.metrics(examples, predictions)[adapter.main_metric]), 6)


def _max_abs_diff(reference: dict, outputs: dict, names) -> float:
    return float(max(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)))
                     for name in names for a, b in zip(reference[name], outputs[name])))
