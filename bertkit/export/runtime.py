"""Inference with ONNX Runtime or OpenVINO, shaped like ``Engine.infer`` so that tasks and the
predictor use any backend unchanged: the same length-sorted batches and padding, outputs in
feature order. Each backend names one exported file (``bertkit export onnx|openvino [--int8]``)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from bertkit.engine.batching import sorted_batches
from bertkit.errors import BertkitError
from bertkit.networks.collate import Collator

ONNX_DIR, OPENVINO_DIR = "onnx", "openvino"
# backend -> (directory, file); an OpenVINO model is an .xml graph with its .bin weights beside it
BACKEND_FILES = {
    "onnx": (ONNX_DIR, "model.onnx"),
    "onnx-int8": (ONNX_DIR, "model.int8.onnx"),
    "openvino": (OPENVINO_DIR, "model.xml"),
    "openvino-int8": (OPENVINO_DIR, "model.int8.xml"),
}


def exported_file(model_dir, backend: str) -> Path:
    """The file ``backend`` runs, or a one-line error naming the export that writes it: a missing
    file, or an export made from other weights than the model directory's now (export.json's
    fingerprint; a stale export would compute another model in silence)."""
    directory, name = BACKEND_FILES[backend]
    path = Path(model_dir) / directory / name
    int8 = backend.endswith("-int8")
    again = f"`bertkit export {directory} {model_dir}{' --int8' if int8 else ''}`"
    if not path.is_file():
        shown = {"onnx": "ONNX", "openvino": "OpenVINO"}[directory]
        raise BertkitError(
            f"{model_dir} has no exported {'int8 ' if int8 else ''}{shown} model ({name})", f"run {again} first"
        )
    reason = export_problem(model_dir, directory)
    if reason:
        raise BertkitError(
            f"{path} cannot be used: {reason}",
            f"run {again} again (or use --backend torch)",
        )
    return path


def read_report(directory: Path) -> tuple[dict | None, str | None]:
    """(export.json, None), (None, why it is unusable), or (None, None) when there is none."""
    import json

    file = directory / "export.json"
    if not file.exists():
        return None, "it has no export.json (an interrupted or hand-made export)" if directory.is_dir() else None
    try:
        report = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"its export.json is damaged ({str(exc)[:80]})"
    if not isinstance(report, dict):
        return None, "its export.json is damaged (not a JSON object)"
    return report, None


def export_problem(model_dir, directory: str) -> str | None:
    """Why ``model_dir``'s export in ``directory`` must not be used (damaged, or made from other
    weights), or None. The weights are hashed once per process for the same files, sizes and times."""
    return _problem(str(Path(model_dir).resolve()), directory, _state(Path(model_dir), directory))


def _state(model_dir: Path, directory: str) -> tuple:
    """What the cached fingerprint check depends on: the files' names, sizes and times."""
    from bertkit.model_dir.fingerprint import made_from_files

    files = [*made_from_files(model_dir), model_dir / directory / "export.json"]
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.exists())


@functools.cache
def _problem(model_dir: str, directory: str, _state: tuple) -> str | None:
    from bertkit.model_dir.fingerprint import stale_reason

    report, damage = read_report(Path(model_dir) / directory)
    if damage or report is None:
        return damage or "it has no export.json"
    return stale_reason(report, model_dir)


def _export_again(path: Path) -> str:
    """The command that writes ``path`` again (an exported file sits in MODEL_DIR/onnx|openvino/)."""
    int8 = ".int8." in path.name
    return f"run `bertkit export {path.parent.name} {path.parent.parent}{' --int8' if int8 else ''}` again"


def _cause(exc: Exception) -> str:
    """OpenVINO's message starts with where it was raised ("Exception from src/...cpp:132:") and
    says what went wrong on its last line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:160]


class BatchRunner:
    """The batching every exported backend shares; ``run(feed) -> {output name: array}`` is each one's."""

    quiet = False
    inputs: list[str] = []

    def run(self, feed: dict) -> dict:
        raise NotImplementedError

    def infer(
        self,
        _network,
        features: list[dict],
        batch_size: int,
        output_names: tuple,
        per_token: bool,
        pad_token_id: int,
        description: str = "predict",
        targets: dict | None = None,
    ) -> dict:
        lengths = [len(f["input_ids"]) for f in features]
        collate = Collator(pad_token_id)
        results = {name: [None] * len(features) for name in output_names}
        for indices in sorted_batches(lengths, batch_size):
            batch = collate([features[j] for j in indices])
            feed = {
                name: batch[name].numpy() if name in batch else np.zeros_like(batch["input_ids"].numpy())
                for name in self.inputs
            }
            values = self.run(feed)
            for name in output_names:
                # ``per_token``: every output, or the names that are (a multi-head graph mixes both)
                token = per_token if isinstance(per_token, bool) else name in per_token
                for row, j in enumerate(indices):
                    results[name][j] = values[name][row, : lengths[j]] if token else values[name][row]
        return results


class OnnxRunner(BatchRunner):
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
            raise BertkitError(
                f"{path} cannot be loaded by onnxruntime ({str(exc).split(':')[-1].strip()[:120]})",
                f"the file is damaged or incomplete: {_export_again(path)}",
            ) from exc
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.path, self.precision = path, "int8" if path.name.endswith(".int8.onnx") else "fp32"

    def run(self, feed: dict) -> dict:
        return dict(zip(self.outputs, self.session.run(None, feed)))


class OpenVinoRunner(BatchRunner):
    """OpenVINO's CPU plugin; it computes in bf16 by itself where the CPU has native bf16
    (avx512_bf16, AMX), which ``precision`` reports, and int8 where the graph was quantised."""

    def __init__(self, path: Path, threads: int | None = None):
        try:
            import openvino  # noqa: F401
        except ImportError as exc:
            raise BertkitError("the OpenVINO backend needs openvino", "pip install 'bertkit[openvino]'") from exc
        config = {"PERFORMANCE_HINT": "LATENCY"}  # one request at a time, every core on it
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        try:
            from bertkit.export.openvino_core import openvino_core

            self.compiled = openvino_core().compile_model(str(path), "CPU", config)
        except Exception as exc:  # OpenVINO raises RuntimeError for unreadable or incomplete files
            cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
            raise BertkitError(
                f"{path} cannot be loaded by OpenVINO ({_cause(exc)})",
                # OpenVINO's CPU plugin reads oneDNN's cap too, and with it finds no kernel for some layers
                # (measured: AVX2 on an AMX CPU, "Supported primitive descriptors list is empty ... Softmax")
                f"OpenVINO may not run with ONEDNN_MAX_CPU_ISA={cap}: unset it, or the files are damaged or "
                f"incomplete: {_export_again(path)}"
                if cap
                else f"the files are damaged or incomplete: {_export_again(path)}",
            ) from exc
        self.inputs = [port.get_any_name() for port in self.compiled.inputs]
        self.outputs = [port.get_any_name() for port in self.compiled.outputs]
        self.request = self.compiled.create_infer_request()
        computed = str(self.compiled.get_property("INFERENCE_PRECISION_HINT")).lower()  # "<Type: 'bfloat16'>"
        self.path = path
        self.precision = ("int8+" if path.name.endswith(".int8.xml") else "") + ("bf16" if "bf" in computed else "fp32")

    def run(self, feed: dict) -> dict:
        result = self.request.infer(feed)
        return {name: np.asarray(result[port]) for name, port in zip(self.outputs, self.compiled.outputs)}


RUNNERS = {"onnx": OnnxRunner, "openvino": OpenVinoRunner}
RUNTIME_MODULES = {"onnx": "onnxruntime", "openvino": "openvino"}


def fastest_backend(model_dir) -> tuple[str, str]:
    """(backend, why) for ``--backend auto``: the exported file whose runtime is installed with the
    highest speed-up over torch (at its default precision) measured beside it, in its export's
    export.json; torch when no export beats it or nothing usable was exported. An export that is
    damaged, made from other weights, or whose runtime is missing is passed over, and the reason
    says so. Speed-ups, not examples/s: each export timed torch itself, maybe minutes apart on a
    machine whose load changed."""
    import importlib.util

    speedups, passed_over = {}, []
    for directory in (ONNX_DIR, OPENVINO_DIR):
        if not (Path(model_dir) / directory).exists():
            continue
        problem = export_problem(model_dir, directory)
        if problem is None and importlib.util.find_spec(RUNTIME_MODULES[directory]) is None:
            problem = f"{RUNTIME_MODULES[directory]} is not installed"
        if problem:
            passed_over.append(f"{directory} passed over: {problem}")
            continue
        report = read_report(Path(model_dir) / directory)[0]
        torch = _section(report, "torch")
        torch_speed = _speed(torch.get("auto_examples_per_second")) or _speed(torch.get("examples_per_second"))
        for kind, suffix in (("fp32", ""), ("int8", "-int8")):
            speed = _speed(_section(report, kind).get("examples_per_second"))
            if speed and torch_speed and (Path(model_dir) / directory / BACKEND_FILES[directory + suffix][1]).is_file():
                speedups[directory + suffix] = speed / torch_speed
    aside = "".join(f"; {line}" for line in passed_over)
    if not speedups:
        return "torch", ("no usable export" if passed_over else "nothing exported") + aside
    best = max(speedups, key=speedups.get)
    if speedups[best] <= 1:
        return (
            "torch",
            f"faster than any export (the best, {best}, ran at {speedups[best]:.2f}x torch beside it){aside}",
        )
    return best, f"fastest export: {best} at {speedups[best]:.2f}x torch, measured side by side (export.json){aside}"


def _section(report: dict, key: str) -> dict:
    value = report.get(key)
    return value if isinstance(value, dict) else {}


def _speed(value) -> float | None:
    """A measured speed, or None for anything a damaged export.json can hold instead (a string,
    a bool, NaN, infinity, zero, a negative or an overflowing number): that export is not ranked."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def make_runner(path: Path, threads: int | None = None) -> BatchRunner:
    return RUNNERS[OPENVINO_DIR if path.suffix == ".xml" else ONNX_DIR](path, threads)


def load_runner(model_dir, backend: str, threads: int | None = None):
    """(runner, tokenizer) for an exported backend of ``model_dir``; ``threads``: --threads, else
    OMP_NUM_THREADS, else the runtime's own default."""
    from bertkit.models import load_config
    from bertkit.models.tokenizer import load_tokenizer

    path = exported_file(model_dir, backend)
    model_config = load_config(str(model_dir), str(model_dir))
    tokenizer = load_tokenizer(str(model_dir), str(model_dir), model_config)
    if threads is None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"])
    return make_runner(path, threads), tokenizer
