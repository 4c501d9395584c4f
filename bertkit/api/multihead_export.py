"""`bertkit export onnx|openvino DIR [--int8]` on a multi-head directory: one graph whose outputs are
every head's (``NAME/KEY``: ``topic/logits``, ``tags/logits``), computed from one encoder pass
(networks/multihead.SharedPass), so an exported runtime answers every head as the torch model does.

Parity is measured head by head, on the first ``samples`` rows of each head's own evaluation data
(its training data where it recorded none): the largest output difference against torch fp32 and,
with gold labels, the head's main metric under each; export.json holds them with the fingerprint of
the weights it was made from, as a one-task export's does (bertkit/export/parity.py), and
`predict`/`serve --backend onnx|openvino[-int8]` run it (api/multihead_inference.py)."""

from __future__ import annotations

import time
from pathlib import Path

from bertkit.api.multihead_inference import MultiHeadPredictor, head_source
from bertkit.errors import BertkitError
from bertkit.export.parity import PARITY_SAMPLES, Format, Parity, check_replaceable, check_request, max_abs_diff
from bertkit.export.runtime import make_runner
from bertkit.model_dir import staged_output, write_json
from bertkit.model_dir.fingerprint import KEY as FINGERPRINT_KEY
from bertkit.model_dir.fingerprint import fingerprint
from bertkit.options import EvalOptions, InferenceOptions
from bertkit.tasks.base import EVAL, TRAIN


class AllHeads:
    """What the graph writer reads of a task (its outputs' names, which are per token), for every head."""

    def __init__(self, predictor: MultiHeadPredictor):
        adapters = predictor.adapters
        self.output_names = tuple(f"{n}/{key}" for n, a in adapters.items() for key in a.output_names)
        self.per_token_names = tuple(
            f"{n}/{key}" for n, a in adapters.items() if a.per_token_outputs for key in a.output_names
        )
        self.per_token_outputs = False


def export_heads(
    fmt: Format,
    model_dir: str,
    int8: bool = False,
    data: str | None = None,
    samples: int = PARITY_SAMPLES,
    batch_size: int = 32,
    threads: int | None = None,
) -> dict:
    """Write ``fmt``'s files of the multi-head ``model_dir`` and measure every head against torch."""
    check_request(fmt, samples)
    if data is not None:
        raise BertkitError(
            "--data on a multi-head model: each head's parity reads its own evaluation data",
            "drop --data (or export one head as a one-task directory: bertkit export head DIR NAME)",
        )
    target = Path(model_dir) / fmt.name
    check_replaceable(target, fmt)
    predictor = MultiHeadPredictor(model_dir, InferenceOptions(precision="no", threads=threads, batch_size=batch_size))
    sources, examples = _parity_rows(predictor, samples)
    made_from = fingerprint(model_dir)  # before loading: the files these weights come from
    predictor.load()
    parities = {}
    for name, adapter in predictor.adapters.items():
        features = adapter.preprocess(examples[name], predictor.tokenizer, train=False)
        parities[name] = Parity(adapter, examples[name], features, predictor.tokenizer, batch_size, threads)
    with staged_output(target) as staging:  # an old export stays until the new one is complete
        started = time.perf_counter()
        fmt.write(predictor.shared_pass(predictor.names), AllHeads(predictor), predictor.tokenizer, staging)
        report = {
            "format": fmt.name,
            "heads": list(predictor.names),
            "export_seconds": round(time.perf_counter() - started, 2),
            "parity_data": {name: source.description for name, source in sources.items()},
            "parity_examples": sum(len(rows) for rows in examples.values()),
            FINGERPRINT_KEY: made_from,
        }
        files = {"fp32": staging / fmt.files()["fp32"]}
        if int8:
            report["int8_method"] = fmt.quantize(staging, [feed for p in parities.values() for feed in p.feeds()])
            files["int8"] = staging / fmt.files()["int8"]
        reference = {name: _head_outputs(parity, predictor, name, None) for name, parity in parities.items()}
        report["torch"] = {name: _scored(parities[name], out) for name, out in reference.items()}
        for kind, path in files.items():
            report[kind] = _file_entry(fmt, path, parities, predictor, reference, report["torch"], threads)
        write_json(staging / "export.json", report)
    report["written_to"] = str(target)
    return report


def _parity_rows(predictor: MultiHeadPredictor, samples: int) -> tuple[dict, dict]:
    """Each head's parity rows: its evaluation data's first ``samples``, else its training data's."""
    sources, examples = {}, {}
    for name in predictor.names:
        recorded, adapter = predictor.recorded[name], predictor.adapters[name]
        try:
            source, purpose = head_source(recorded, EvalOptions()), EVAL
        except BertkitError:  # no evaluation data recorded: the rows it trained on (parity needs rows, not gold)
            source, purpose = head_source(recorded, EvalOptions(), split="train"), TRAIN
        sources[name], examples[name] = source, adapter.read(source, purpose)[:samples]
    return sources, examples


def _head_outputs(parity: Parity, predictor: MultiHeadPredictor, name: str, runner) -> tuple[dict, float]:
    """(the head's outputs by its own names, examples per second): torch's (``runner`` None) or a file's."""
    started = time.perf_counter()
    outputs = predictor.outputs(name, parity.examples, parity.features, runner=runner)
    return outputs, round(len(parity.examples) / max(time.perf_counter() - started, 1e-9), 1)


def _scored(parity: Parity, found: tuple) -> dict:
    outputs, speed = found
    value = parity.main_metric(outputs)
    return {"main_metric": parity.adapter.main_metric, "examples_per_second": speed, "value": value}


def _file_entry(fmt, path: Path, parities: dict, predictor, reference: dict, torch_entry: dict, threads) -> dict:
    """One written file, head by head: the largest output difference, its speed, its score change."""
    runner = make_runner(path, threads)
    heads = {}
    for name, parity in parities.items():
        outputs, speed = _head_outputs(parity, predictor, name, runner)
        entry = {
            "max_abs_diff": max_abs_diff(reference[name][0], outputs, parity.adapter.output_names),
            "examples_per_second": speed,
        }
        if parity.gold:
            value = parity.main_metric(outputs)
            entry.update(value=value, delta=round(value - torch_entry[name]["value"], 6))
        heads[name] = entry
    megabytes = sum(p.stat().st_size for p in [path, *(path.with_suffix(s) for s in fmt.companions)])
    return {
        "file": f"{fmt.name}/{path.name}",
        "megabytes": round(megabytes / 2**20, 2),
        "computes_in": runner.precision,
        "max_abs_diff": max(entry["max_abs_diff"] for entry in heads.values()),
        "heads": heads,
    }
