"""What every export shares: the checks, the parity run and the report, around one ``Format``'s way
of writing (and quantising) its files.

Parity runs PyTorch (fp32) and every written file over the same features (the model's own
evaluation data, or ``data``): the largest absolute difference of any output (logits), with gold
labels the main metric of each, so int8's accuracy cost is a measured number, and each one's
examples per second over the same batches, so the speed-up is one too. The numbers are returned
and stored in ``DIR/<format>/export.json``; the files appear all at once (written beside, then
renamed), and a failed export leaves the previous one in place.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from bertkit.errors import BertkitError
from bertkit.export.runtime import BACKEND_FILES, make_runner
from bertkit.model_dir import load_meta, recorded_eval_data, staged_output, write_json
from bertkit.model_dir.files import clean_stale, probe_writable
from bertkit.model_dir.fingerprint import KEY as FINGERPRINT_KEY
from bertkit.model_dir.fingerprint import fingerprint

PARITY_SAMPLES = 500
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Format:
    name: str  # the directory and the backend: onnx, openvino (int8: "<name>-int8")
    modules: tuple  # what it needs installed
    extra: str  # the pip extra that brings them
    write: Callable  # (network, adapter, tokenizer, staging: Path) -> None: writes the fp32 file
    quantize: Callable  # (staging: Path, feeds: list[dict]) -> str: writes the int8 file, says how
    companions: tuple = ()  # further files a written file has beside it (suffixes: OpenVINO's .bin)

    def files(self) -> dict:
        return {"fp32": BACKEND_FILES[self.name][1], "int8": BACKEND_FILES[f"{self.name}-int8"][1]}


def export_model(
    fmt: Format,
    model_dir: str,
    int8: bool = False,
    data: str | None = None,
    samples: int = PARITY_SAMPLES,
    batch_size: int = 32,
    threads: int | None = None,
    dataset=None,
) -> dict:
    """Write ``fmt``'s files of ``model_dir`` (fp32, and int8 with ``int8``) and measure each against
    torch on the same evaluation examples; the report is returned and stored beside the files, with
    the fingerprint of the weights, config and tokenizer it was made from (a backend refuses the
    export once they change). ``threads``: torch's and each runtime's CPU threads."""
    check_request(fmt, samples)
    from bertkit.engine.threads import check as check_threads
    from bertkit.inference import load_for_inference

    check_threads(threads, f"export {fmt.name}")
    meta = load_meta(model_dir)
    _check_exportable(meta, model_dir, fmt.name)
    target = Path(model_dir) / fmt.name
    check_replaceable(target, fmt)
    adapter, source, examples = _parity_examples(meta, data, samples, fmt.name, dataset)
    made_from = fingerprint(model_dir)  # before loading: the files these weights come from
    engine, network, tokenizer = load_for_inference(model_dir, adapter, "no", threads, meta=meta)
    parity = Parity(
        adapter, examples, adapter.preprocess(examples, tokenizer, train=False), tokenizer, batch_size, threads
    )
    with staged_output(target) as staging:  # an old export stays until the new one is complete
        started = time.perf_counter()
        fmt.write(engine.unwrap(network), adapter, tokenizer, staging)
        report = {
            "format": fmt.name,
            "export_seconds": round(time.perf_counter() - started, 2),
            "parity_data": source.description,
            "parity_examples": len(examples),
            FINGERPRINT_KEY: made_from,
        }
        files = {"fp32": staging / fmt.files()["fp32"]}
        if int8:
            report["int8_method"] = fmt.quantize(staging, parity.feeds())
            files["int8"] = staging / fmt.files()["int8"]
        reference, report["torch"] = _torch_entry(parity, engine, network, model_dir, meta)
        for name, path in files.items():
            report[name] = _file_entry(parity, fmt, path, reference, report["torch"])
        write_json(staging / "export.json", report)
    report["written_to"] = str(target)
    return report


def check_request(fmt: Format, samples: int) -> None:
    for module in fmt.modules:
        if importlib.util.find_spec(module) is None:
            raise BertkitError(f"{fmt.name} export needs {module}", f"pip install 'bertkit[{fmt.extra}]'")
    if samples < 1:
        raise BertkitError(f"--samples must be >= 1, got {samples}", "give how many examples parity runs on")


def _parity_examples(meta: dict, data: str | None, samples: int, name: str, dataset=None) -> tuple:
    """(task, source, examples): the first ``samples`` of ``data``, else of what training evaluated on."""
    from bertkit.data import registry
    from bertkit.data.hub_datasets import DatasetChoice
    from bertkit.tasks import task_from_state
    from bertkit.tasks.base import EVAL

    adapter = task_from_state(meta["task"])
    choice = dataset or DatasetChoice()
    if data is None and not choice.given():  # what training evaluated on: its dataset's config and splits too
        choice = DatasetChoice.of(meta.get("config") or {})
    data = data or recorded_eval_data(meta)
    registry.check_choice(data, None, choice)
    split = registry.DATASETS[data].dev_split if registry.is_known(data) else "dev"
    data_dir = None if registry.data_dir() else meta.get("data", {}).get("data_dir")  # where training found it
    source = registry.resolve(data, split, data_dir, adapter.name, f"export {name}", choice, limit=samples)
    examples = adapter.read(source, EVAL)[:samples]
    adapter.check_eval_examples(examples, source)  # label ids read as the model's labels, unseen ones refused
    return adapter, source, examples


@dataclass
class Parity:
    """The examples every runner is measured on, and how one run is timed."""

    adapter: object
    examples: list
    features: list
    tokenizer: object
    batch_size: int
    threads: int | None = None

    @property
    def gold(self) -> bool:
        return has_gold(self.examples)

    def run(self, runner, net=None) -> tuple[dict, float]:
        """(outputs, examples per second) of one runner over every feature."""
        started = time.perf_counter()
        outputs = runner.infer(
            net,
            self.features,
            self.batch_size,
            self.adapter.output_names,
            self.adapter.per_token_outputs,
            self.tokenizer.pad_token_id,
            description="torch",
        )
        return outputs, round(len(self.examples) / max(time.perf_counter() - started, 1e-9), 1)

    def main_metric(self, outputs: dict) -> float | None:
        return _main_metric(self.adapter, self.examples, self.features, outputs) if self.gold else None

    def feeds(self) -> list[dict]:
        """The model inputs batch by batch, as int8 calibration reads them."""
        from bertkit.engine.batching import sorted_batches
        from bertkit.networks.collate import Collator

        collate = Collator(self.tokenizer.pad_token_id)
        return [
            {k: v.numpy() for k, v in collate([self.features[j] for j in batch]).items() if k in MODEL_INPUTS}
            for batch in sorted_batches([len(f["input_ids"]) for f in self.features], self.batch_size)
        ]


def _torch_entry(parity: Parity, engine, network, model_dir: str, meta: dict) -> tuple:
    """(fp32 outputs, the torch entry): fp32's speed and score, and auto precision's speed where it differs."""
    from bertkit.inference import load_for_inference

    reference, speed = parity.run(engine, network)
    entry = {
        "main_metric": parity.adapter.main_metric,
        "examples_per_second": speed,
        "value": parity.main_metric(reference),
    }
    auto_engine, auto_network, _ = load_for_inference(model_dir, parity.adapter, "auto", parity.threads, meta=meta)
    if auto_engine.runtime("auto")["precision"] != "no":  # what --backend torch runs by default (bf16)
        entry.update(
            auto_precision=auto_engine.runtime("auto")["precision"],
            auto_examples_per_second=parity.run(auto_engine, auto_network)[1],
        )
    return reference, entry


def _file_entry(parity: Parity, fmt: Format, path: Path, reference: dict, torch_entry: dict) -> dict:
    """One written file measured: size, speed against torch fp32, largest output difference, score change."""
    runner = make_runner(path, parity.threads)
    outputs, speed = parity.run(runner)
    megabytes = sum(p.stat().st_size for p in [path, *(path.with_suffix(s) for s in fmt.companions)])
    torch_speed = torch_entry["examples_per_second"]
    entry = {
        "file": f"{fmt.name}/{path.name}",
        "megabytes": round(megabytes / 2**20, 2),
        "computes_in": runner.precision,
        "examples_per_second": speed,
        "speedup_vs_torch_fp32": round(speed / torch_speed, 3) if torch_speed else None,
        "max_abs_diff": max_abs_diff(reference, outputs, parity.adapter.output_names),
    }
    if parity.gold:
        value = parity.main_metric(outputs)
        entry.update(value=value, delta=round(value - torch_entry["value"], 6))
    return entry


def _check_exportable(meta: dict, model_dir: str, name: str) -> None:
    """A `pretrain mlm|bert` output is a starting point, not a task model: its scorer masks tokens at
    random inside the graph (no exported equivalent) and nothing serves its exported file (predict
    and serve run task models), so it is refused rather than exported half-way."""
    if meta.get("kind") == "pretrain":
        command = f"bertkit pretrain {(meta.get('task') or {}).get('task', 'mlm')}"
        raise BertkitError(
            f"{model_dir} is a `{command}` output (a pre-training starting point), which has "
            f"no task to export to {name}",
            f"fine-tune it first (`bertkit finetune TASK --model {model_dir} ...`) and export that model",
        )


def check_replaceable(target: Path, fmt: Format) -> None:
    """The new export replaces DIR/<format>/ whole: it may hold only what an export wrote, and the
    model directory must be writable, both found out before the model is loaded."""
    ours = {"export.json", *fmt.files().values()}
    ours |= {Path(f).with_suffix(suffix).name for f in fmt.files().values() for suffix in fmt.companions}
    if target.exists() and not target.is_dir():
        raise BertkitError(
            f"{target} is a file an export did not write, which a new export would delete",
            f"move or rename {target} first",
        )
    foreign = sorted(p.name for p in target.iterdir() if p.name not in ours) if target.is_dir() else []
    if foreign:
        raise BertkitError(
            f"{target} holds files an export did not write ({', '.join(foreign[:3])}), which a new export would delete",
            f"move them out of {target} first",
        )
    try:
        probe_writable(target.parent, f"export to {target}")
    except BertkitError as exc:  # export has no option for another location: the export lives in the model
        raise BertkitError(
            exc.message, f"an export is written inside the model directory: copy {target.parent} somewhere writable"
        ) from exc
    clean_stale(
        target, "export.json"
    )  # what a killed export left beside it: its staging folder, the old export moved aside


def has_gold(examples) -> bool:
    return bool(examples) and all(("label" in ex) or ("tags" in ex) or ("answers" in ex) for ex in examples)


def _main_metric(adapter, examples, features, outputs) -> float:
    predictions = adapter.postprocess(examples, features, outputs)
    return round(float(adapter.metrics(examples, predictions)[adapter.main_metric]), 6)


def max_abs_diff(reference: dict, outputs: dict, names) -> float:
    return float(
        max(
            np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)))
            for name in names
            for a, b in zip(reference[name], outputs[name])
        )
    )
