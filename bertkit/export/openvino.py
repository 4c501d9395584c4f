"""`bertkit export openvino`: the model as OpenVINO IR (converted from bertkit's ONNX graph, dynamic
batch and sequence), optionally quantised to int8 by NNCF's post-training quantisation (weights and
activations, the transformer preset, calibrated on the parity batches); the checks and the parity
report are bertkit.export.parity's. OpenVINO's CPU plugin computes the fp32 graph in bf16 by itself
on CPUs with native bf16 (avx512_bf16, AMX); export.json says what each file computes in."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from bertkit.export.openvino_core import openvino_core, signal_stack_kept
from bertkit.export.parity import PARITY_SAMPLES, Format, export_model
from bertkit.export.runtime import BACKEND_FILES
from bertkit.model_dir.removal import remove_temporary

FP32_FILE, INT8_FILE = BACKEND_FILES["openvino"][1], BACKEND_FILES["openvino-int8"][1]


def export_openvino(
    model_dir: str,
    int8: bool = False,
    data: str | None = None,
    samples: int = PARITY_SAMPLES,
    batch_size: int = 32,
    threads: int | None = None,
    dataset=None,  # --data's config and splits, where it is a Hub dataset (data.hub_datasets.DatasetChoice)
) -> dict:
    return export_model(OPENVINO, model_dir, int8, data, samples, batch_size, threads, dataset)


def _write(model, adapter, tokenizer, staging: Path) -> None:
    import openvino

    from bertkit.export.onnx import write_onnx

    graph = write_onnx(model, adapter, tokenizer, staging, name="graph.onnx")
    try:
        openvino.save_model(openvino.convert_model(str(graph)), str(staging / FP32_FILE), compress_to_fp16=False)
    finally:
        remove_temporary(graph)  # inside the staging folder


def _quantize(staging: Path, feeds: list) -> str:
    import logging

    import nncf
    import openvino

    nncf.set_log_level(logging.ERROR)  # its progress and advice would fill the user's terminal
    model = openvino_core().read_model(str(staging / FP32_FILE))
    with signal_stack_kept(), _bars_quiet():
        quantized = nncf.quantize(
            model, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds)
        )  # every batch (an item of the dataset is one batch)
    openvino.save_model(quantized, str(staging / INT8_FILE), compress_to_fp16=False)
    return (
        f"NNCF post-training quantisation (transformer preset): int8 weights and activations, calibrated on "
        f"the {sum(len(feed['input_ids']) for feed in feeds)} parity examples"
    )


@contextmanager
def _bars_quiet():
    """NNCF draws its progress bars with rich's shared console, on standard output: in a log they
    are pages of bars between bertkit's lines. Quiet unless BERTKIT_DEBUG asks for everything."""
    import rich

    console = rich.get_console()
    before = console.quiet
    console.quiet = before or not os.environ.get("BERTKIT_DEBUG")
    try:
        yield
    finally:
        console.quiet = before


OPENVINO = Format("openvino", ("openvino", "nncf"), "openvino", _write, _quantize, companions=(".bin",))
