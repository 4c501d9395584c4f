"""`bertkit export onnx`: torch.onnx (dynamic batch and sequence axes), optionally ONNX Runtime's
dynamic int8 quantisation of the weights; the checks and the parity report are bertkit.export.parity's."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from bertkit.export.parity import PARITY_SAMPLES, Format, export_model
from bertkit.export.runtime import BACKEND_FILES

OPSET = 18
FP32_FILE, INT8_FILE = BACKEND_FILES["onnx"][1], BACKEND_FILES["onnx-int8"][1]


def export_onnx(
    model_dir: str,
    int8: bool = False,
    data: str | None = None,
    samples: int = PARITY_SAMPLES,
    batch_size: int = 32,
    threads: int | None = None,
    dataset=None,  # --data's config and splits, where it is a Hub dataset (data.hub_datasets.DatasetChoice)
) -> dict:
    report = export_model(ONNX, model_dir, int8, data, samples, batch_size, threads, dataset)
    report["opset"] = OPSET
    return report


def write_onnx(model, adapter, tokenizer, directory: Path, name: str = FP32_FILE) -> Path:
    import warnings

    import torch

    names = ["input_ids", "attention_mask"] + (
        ["token_type_ids"] if "token_type_ids" in tokenizer.model_input_names else []
    )

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

    # the export runs on the CPU whatever device loaded the model (a GPU's copy stays where it is)
    model = (copy.deepcopy(model).cpu() if next(model.parameters()).device.type != "cpu" else model).float().eval()
    example = tokenizer(
        ["an example to trace", "a second, longer example to trace the model with"], padding=True, return_tensors="pt"
    )
    args = tuple(example[name] for name in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    # per output: a multi-head graph mixes a tagger's per-token outputs with classifiers' per-row ones
    per_token = getattr(adapter, "per_token_names", None)
    per_token = (
        set(per_token) if per_token is not None else set(adapter.output_names if adapter.per_token_outputs else ())
    )
    axes.update(
        {name: ({0: "batch", 1: "sequence"} if name in per_token else {0: "batch"}) for name in adapter.output_names}
    )
    path = directory / name
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about constants; parity is the real check
        # the TorchScript exporter: dynamic axes without shape guards, and no onnxscript needed
        torch.onnx.export(
            Outputs(model),
            args,
            str(path),
            input_names=names,
            output_names=list(adapter.output_names),
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    return path


def _quantize(staging: Path, _feeds: list) -> str:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is for CNNs
    quantize_dynamic(str(staging / FP32_FILE), str(staging / INT8_FILE), weight_type=QuantType.QInt8)
    return "ONNX Runtime dynamic quantisation: int8 weights, activations quantised per batch at run time"


ONNX = Format("onnx", ("onnx", "onnxruntime"), "onnx", write_onnx, _quantize)
