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


def export_model(fmt: Format, model_dir: str, int8: bool = False, data: str | None = None,
                 samples: int = PARITY_SAMPLES, batch_size: int = 32) -> dict:
    for module in fmt.modules:
        if importlib.util.find_spec(module) is None:
            raise BertkitError(f"{fmt.name} export needs {module}", f"pip install 'bertkit[{fmt.extra}]'")
    if samples < 1:
        raise BertkitError(f"--samples must be >= 1, got {samples}", "give how many examples parity runs on")
    from bertkit.data import registry
    from bertkit.engine.batching import Collator, sorted_batches
    from bertkit.inference import load_for_inference
    from bertkit.tasks import task_from_state
    from bertkit.tasks.base import EVAL

    directory = Path(model_dir)
    meta = load_meta(model_dir)
    _check_exportable(meta, model_dir, fmt.name)
    target = directory / fmt.name
    _check_replaceable(target, fmt)
    adapter = task_from_state(meta["task"])
    data = data or recorded_eval_data(meta)
    split = registry.DATASETS[data].dev_split if registry.is_known(data) else "dev"
    data_dir = None if registry.data_dir() else meta.get("data", {}).get("data_dir")  # where training found it
    source = registry.resolve(data, split, data_dir, adapter.name, command=f"export {fmt.name}")
    examples = adapter.read(source, EVAL)[:samples]
    adapter.check_eval_examples(examples, source)  # label ids read as the model's labels, unseen ones refused
    engine, network, tokenizer = load_for_inference(model_dir, adapter, "no", meta=meta)
    features = adapter.preprocess(examples, tokenizer, train=False)

    def run(runner, net=None) -> tuple[dict, float]:
        started = time.perf_counter()
        outputs = runner.infer(net, features, batch_size, adapter.output_names, adapter.per_token_outputs,
                               tokenizer.pad_token_id, description="torch")
        return outputs, round(len(examples) / max(time.perf_counter() - started, 1e-9), 1)

    with staged_output(target) as staging:  # an old export stays until the new one is complete
        started = time.perf_counter()
        fmt.write(engine.unwrap(network), adapter, tokenizer, staging)
        report = {"format": fmt.name, "export_seconds": round(time.perf_counter() - started, 2),
                  "parity_data": source.description, "parity_examples": len(examples)}
        files = {"fp32": staging / fmt.files()["fp32"]}
        if int8:
            collate = Collator(tokenizer.pad_token_id)
            feeds = [{k: v.numpy() for k, v in collate([features[j] for j in batch]).items() if k in MODEL_INPUTS}
                     for batch in sorted_batches([len(f["input_ids"]) for f in features], batch_size)]
            report["int8_method"] = fmt.quantize(staging, feeds)
            files["int8"] = staging / fmt.files()["int8"]
        gold = _has_gold(examples)
        reference, torch_speed = run(engine, network)
        report["torch"] = {"main_metric": adapter.main_metric, "examples_per_second": torch_speed,
                           "value": _main_metric(adapter, examples, features, reference) if gold else None}
        auto_engine, auto_network, _ = load_for_inference(model_dir, adapter, "auto", meta=meta)
        if auto_engine.runtime("auto")["precision"] != "no":  # what --backend torch runs by default (bf16)
            report["torch"].update(auto_precision=auto_engine.runtime("auto")["precision"],
                                   auto_examples_per_second=run(auto_engine, auto_network)[1])
        for name, path in files.items():
            runner = make_runner(path)
            outputs, speed = run(runner)
            megabytes = sum(p.stat().st_size for p in [path, *(path.with_suffix(s) for s in fmt.companions)])
            entry = {"file": f"{fmt.name}/{path.name}", "megabytes": round(megabytes / 2 ** 20, 2),
                     "computes_in": runner.precision, "examples_per_second": speed,
                     "speedup_vs_torch_fp32": round(speed / torch_speed, 3) if torch_speed else None,
                     "max_abs_diff": _max_abs_diff(reference, outputs, adapter.output_names)}
            if gold:
                value = _main_metric(adapter, examples, features, outputs)
                entry.update(value=value, delta=round(value - report["torch"]["value"], 6))
            report[name] = entry
        write_json(staging / "export.json", report)
    report["written_to"] = str(target)
    return report


def _check_exportable(meta: dict, model_dir: str, name: str) -> None:
    """A `pretrain mlm` output is a starting point, not a task model: its scorer masks tokens at
    random inside the graph (no exported equivalent) and nothing serves its exported file (predict
    and serve run task models), so it is refused rather than exported half-way."""
    if meta.get("kind") == "pretrain":
        raise BertkitError(f"{model_dir} is a `bertkit pretrain mlm` output (a masked-LM starting point), which has "
                           f"no task to export to {name}", f"fine-tune it first (`bertkit finetune TASK --model "
                           f"{model_dir} ...`) and export that model")


def _check_replaceable(target: Path, fmt: Format) -> None:
    """The new export replaces DIR/<format>/ whole: it may hold only what an export wrote, and the
    model directory must be writable, both found out before the model is loaded."""
    ours = {"export.json", *fmt.files().values()}
    ours |= {Path(f).with_suffix(suffix).name for f in fmt.files().values() for suffix in fmt.companions}
    if target.exists() and not target.is_dir():
        raise BertkitError(f"{target} is a file an export did not write, which a new export would delete",
                           f"move or rename {target} first")
    foreign = sorted(p.name for p in target.iterdir() if p.name not in ours) if target.is_dir() else []
    if foreign:
        raise BertkitError(f"{target} holds files an export did not write ({', '.join(foreign[:3])}), which a new "
                           "export would delete", f"move them out of {target} first")
    probe_writable(target.parent, f"export to {target}")
    clean_stale(target, "export.json")  # what a killed export left beside it: its staging folder, the old export moved aside


def _has_gold(examples) -> bool:
    return bool(examples) and all(("label" in ex) or ("tags" in ex) or ("answers" in ex) for ex in examples)


def _main_metric(adapter, examples, features, outputs) -> float:
    predictions = adapter.postprocess(examples, features, outputs)
    return round(float(adapter.metrics(examples, predictions)[adapter.main_metric]), 6)


def _max_abs_diff(reference: dict, outputs: dict, names) -> float:
    return float(max(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)))
                     for name in names for a, b in zip(reference[name], outputs[name])))
