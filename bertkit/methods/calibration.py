"""`finetune --calibrate`: after training, one temperature fitted on held-out labelled rows (the dev
split, or ``--calibration-data FILE``), stored with the model; what it measured goes in bertkit.json's
``calibration`` section (the numbers: bertkit/metrics/calibration.py).

The temperature is the task's ``temperature`` option (bertkit.json's ``task.options``), so every
command that decodes the model's logits (eval, predict, serve, select, the ONNX and OpenVINO
backends, which output logits) decodes softmax(logits / T); the argmax, and so every label and
metric but the probabilities, is unchanged. The ``calibration`` section holds the fit's data, ECE,
Brier and NLL before and after, the reliability table the figure draws, and the sorted conformal
scores (1 - calibrated p(gold label)) that ``predict --coverage`` turns into prediction sets
without a file. Calibration is a method of the registry so that its combinations are declared and
checked like the others'; it trains nothing. `bertkit calibrate` (bertkit/api/calibration.py) does
the same for a directory already trained.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertkit.data.registry import Source
from bertkit.errors import BertkitError
from bertkit.events import notice
from bertkit.methods.base import FOLDS, TUNE, Method
from bertkit.metrics.calibration import calibration_record
from bertkit.tasks.base import EVAL
from bertkit.tasks.label_kinds import make_kind

SECTION = "calibration"
SCOPE = "cls/pair single-label models (temperature scaling of one softmax)"
SETS_SCOPE = "cls/pair single-label and multi-label models"


class Calibration(Method):
    name = "calibrate"
    flag = "--calibrate"
    tasks = ("cls", "pair")
    composes_with = ("finetune", "lora", "distill")  # not setfit: its head is fitted after the spine's model
    # --folds: the out-of-fold probabilities are what `bertkit audit` reads, uncalibrated by design;
    # bertkit tune: a trial's model is not kept
    refused_modes = (FOLDS, TUNE)
    section = SECTION

    @classmethod
    def requested(cls, config) -> bool:
        return bool(getattr(config, "calibrate", False))

    def check_plan(self, plan) -> None:
        """A --problem-type whose kind is not one softmax (the label kinds say which: ``calibrates``)."""
        super().check_plan(plan)
        kind = plan.adapter.options.get("problem_type")
        if kind is not None and not make_kind(kind, {}, None).calibrates:
            raise BertkitError(
                f"--calibrate does not compose with --problem-type {kind}", f"it calibrates {SCOPE}; drop --calibrate"
            )

    def check_data(self, run) -> None:
        check_calibrates(run.adapter, "--calibrate")
        self.examples = None
        if self.request.calibration_data:
            self.examples = read_labelled(run.adapter, self.request.calibration_data, "--calibration-data")
        elif not run.eval_examples:
            raise BertkitError(
                "--calibrate needs held-out labelled rows, and this run has no evaluation data",
                "add --eval-data FILE, or --calibration-data FILE",
            )

    def finish(self, finished, run) -> None:
        adapter, engine, tokenizer = run.adapter, run.engine, run.tokenizer
        examples, features = run.eval_examples, run.eval_features
        source = run.plan.eval_source
        where = source.description if source is not None else f"{len(examples):,} held-out training rows"
        if self.examples is not None:
            examples, where = self.examples, str(self.request.calibration_data)
            features = adapter.preprocess(examples, tokenizer, train=False)
        outputs = engine.infer(
            finished.model,
            features,
            run.plan.config.eval_batch_size,
            adapter.output_names,
            adapter.per_token_outputs,
            tokenizer.pad_token_id,
            description="calibrate",
        )
        self.record = fit_record(adapter, examples, adapter.postprocess(examples, features, outputs), where)
        run.adapter = adapter.with_options({"temperature": self.record["temperature"]})
        said = notice("calibration", summary_line(self.record), **{k: self.record[k] for k in ("before", "after")})
        run.notices.append(said.text)

    def sections(self, finished, run) -> dict:
        return {SECTION: self.record}

    @classmethod
    def card_lines(cls, meta: dict) -> list[str]:
        record = meta.get(SECTION)
        if not record:
            return []
        return [
            f"- Calibration: {summary_line(record)}. bertkit (predict, serve, eval) decodes softmax(logits / "
            f"{record['temperature']:g}); plain transformers gives softmax(logits): divide the logits by it first."
        ]


def check_calibrates(adapter, flag: str) -> None:
    """One line for a model whose probabilities this temperature does not scale."""
    if not adapter.calibrates:
        kind = getattr(getattr(adapter, "kind", None), "name", None)
        what = f"a {adapter.name} {kind} model" if kind else f"a {adapter.name} model"
        raise BertkitError(f"{flag} does not apply to {what}", f"it calibrates {SCOPE}; drop {flag}")


def check_sets(adapter, flag: str) -> None:
    """One line for a model whose rows get no split-conformal label set."""
    if not adapter.conformal_sets:
        kind = getattr(getattr(adapter, "kind", None), "name", None)
        what = f"a {adapter.name} {kind} model" if kind else f"a {adapter.name} model"
        raise BertkitError(f"{flag} does not apply to {what}", f"it gives label sets to {SETS_SCOPE}; drop {flag}")


def read_labelled(adapter, given: str, flag: str) -> list[dict]:
    """The rows of a held-out labelled file, every one with a gold label of the model's label set."""
    path = Path(given).expanduser()
    if not path.is_file():
        raise BertkitError(f"{flag} {given}: file not found", f"pass a labelled file (a format {flag} reads)")
    source = Source(str(path), path=path)
    try:
        examples = adapter.read(source, EVAL)
    except BertkitError as exc:  # which of the command's files it is (a label column missing: no gold labels)
        raise BertkitError(f"{flag}: {exc.message}", exc.hint) from None
    missing = next((i for i, ex in enumerate(examples, 1) if ex.get("label") in (None, "")), None)
    if not examples or missing is not None:
        raise BertkitError(
            f"{flag} {given}: " + (f"row {missing} has no gold label" if examples else "no rows"),
            "calibrate on held-out rows with their gold labels",
        )
    try:
        adapter.check_eval_examples(examples, source)
    except BertkitError as exc:  # its hint names eval's --label-map, which this command has not
        raise BertkitError(
            f"{flag}: {exc.message}",
            f"calibrate on rows labelled with the model's labels ({', '.join(adapter.labels)})",
        ) from None
    return examples


def fit_record(adapter, examples: list[dict], predictions: list, where: str) -> dict:
    """The calibration section from the model's uncalibrated predictions on labelled ``examples``."""
    uncalibrated = adapter.options.get("temperature")
    probabilities = np.stack([np.asarray(p["probabilities"], dtype=np.float64) for p in predictions])
    if uncalibrated:  # the predictions of a model already calibrated: back to T = 1 (log p * T is logits + c)
        probabilities = np.exp(_log(probabilities) * uncalibrated)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
    gold = [adapter.labels.index(ex["label"]) for ex in examples]
    return {"data": where, **calibration_record(probabilities, gold)}


def _log(p: np.ndarray) -> np.ndarray:
    return np.log(np.clip(p, 1e-300, None))


def summary_line(record: dict) -> str:
    before, after = record["before"], record["after"]
    return (
        f"temperature {record['temperature']:.3f} fitted on {record['examples']:,} rows of {record['data']}: "
        f"ECE {before['ece']:.4f} -> {after['ece']:.4f}, Brier {before['brier']:.4f} -> {after['brier']:.4f}"
        + "".join(f"; warning: {said}" for said in record.get("warnings") or ())
    )
