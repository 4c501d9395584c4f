"""Inference with ONNX Runtime, shaped like ``Engine.infer`` so that tasks and the predictor use
either backend unchanged: the same length-sorted batches and padding, outputs in feature order."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bertkit.engine.batching import Collator, sorted_batches
from bertkit.errors import BertkitError

ONNX_DIR = "onnx"
FP32_FILE, INT8_FILE = "model.onnx", "model.int8.onnx"


def onnx_file(model_dir, quantized: bool = False) -> Path:
    path = Path(model_dir) / ONNX_DIR / (INT8_FILE if quantized else FP32_FILE)
    if not path.is_file():
        flag = " --int8" if quantized else ""
        raise BertkitError(f"{model_dir} has no exported {'int8 ' if quantized else ''}ONNX model ({path.name})",
                           f"run `bertkit export onnx {model_dir}{flag}` first")
    return path


class OnnxRunner:
    quiet = False

    def __init__(self, path: Path, threads: int | None = None):
        try:
            import onnxruntime
        except ImportError as exc:
            raise BertkitError("the ONNX backend needs onnxruntime", "pip install 'bertkit[onnx]'") from exc
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3  # warnings about unused initialisers are noise to users
        try:
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own error types: invalid protobuf, graph, argument
            raise BertkitError(f"{path} cannot be loaded by onnxruntime ({str(exc).split(':')[-1].strip()[:120]})",
                               "the file is damaged or incomplete: run `bertkit export onnx` again") from exc
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.path = path

    def infer(self, _network, features: list[dict], batch_size: int, output_names: tuple, per_token: bool,
              pad_token_id: int, description: str = "predict") -> dict:
        lengths = [len(f["input_ids"]) for f in features]
        collate = Collator(pad_token_id)
        results = {name: [None] * len(features) for name in output_names}
        for indices in sorted_batches(lengths, batch_size):
            batch = collate([features[j] for j in indices])
            feed = {name: batch[name].numpy() if name in batch else np.zeros_like(batch["input_ids"].numpy())
                    for name in self.inputs}
            values = dict(zip(self.outputs, self.session.run(None, feed)))
            for name in output_names:
                for row, j in enumerate(indices):
                    results[name][j] = values[name][row, :lengths[j]] if per_token else values[name][row]
        return results


def load_onnx_runner(model_dir, adapter, quantized: bool = False):
    from bertkit.models import load_config, load_tokenizer

    path = onnx_file(model_dir, quantized)
    model_config = load_config(str(model_dir), str(model_dir))
    tokenizer = load_tokenizer(str(model_dir), str(model_dir), model_config)
    threads = int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS", "").isdigit() else None
    return OnnxRunner(path, threads), tokenizer
