"""eval and predict on a multi-head directory (`bertkit finetune multi`): every head (or ``--head``)
run as its task alone runs (its preprocessing, inference.score, its decoding), over the one encoder
the directory holds."""

from __future__ import annotations

import time
from pathlib import Path

from bertkit.api.prediction import with_id
from bertkit.data import registry
from bertkit.errors import BertkitError
from bertkit.inference import score, speed_up
from bertkit.model_dir import check_inputs_kept, check_output_file, load_meta, recorded_eval_data, write_json
from bertkit.model_dir.ownership import check_results_kept
from bertkit.options import EvalOptions, InferenceOptions
from bertkit.tasks import task_from_state
from bertkit.tasks.base import EVAL
from bertkit.tasks.multihead import DIRECTORY_KIND, combined_metrics

EVAL_FILE = "eval-heads.json"  # eval's scores of every head (an eval-* result: model_dir/ownership.py)


def is_multi_head(meta: dict) -> bool:
    return meta.get("kind") == DIRECTORY_KIND


def check_single_head(meta: dict, head: str | None, command: str) -> None:
    """--head on a one-task directory, or a multi-head directory where ``command`` cannot take one."""
    if head is not None and not is_multi_head(meta):
        raise BertkitError(f"--head {head}: this model has one task ({meta['task']['task']}), not heads", "drop --head")
    if head is None and is_multi_head(meta) and command:
        names = ", ".join(h["name"] for h in meta["heads"])
        raise BertkitError(
            f"{command} does not take a multi-head model yet (its heads: {names})",
            "use bertkit eval or bertkit predict, which run every head",
        )


class MultiHeadPredictor:
    """A multi-head directory loaded once; ``predict(name, examples)`` is that head's task's
    predictions, as a one-task directory's Predictor makes them. ``backend``: torch, or an exported
    graph of every head (`bertkit export onnx|openvino DIR`: api/multihead_export.py)."""

    def __init__(
        self,
        model_dir: str,
        run: InferenceOptions | None = None,
        head: str | None = None,
        meta=None,
        backend: str = "torch",
    ):
        self.model_dir, self.run = str(model_dir), (run or InferenceOptions()).validate("bertkit predict")
        self.backend = "torch" if backend == "auto" else backend  # auto: torch (what an export is measured against)
        if self.backend != "torch":
            from bertkit.export.runtime import exported_file

            if self.run.precision not in ("no", "auto"):
                raise BertkitError(
                    f"--precision {self.run.precision} applies to the torch backend only",
                    "drop --precision (an exported backend picks its own; docs: serving.md)",
                )
            exported_file(self.model_dir, self.backend)  # exported, and from these weights? before any work
        self.meta = meta or load_meta(self.model_dir)
        recorded = {h["name"]: h for h in self.meta["heads"]}
        if head is not None and head not in recorded:
            raise BertkitError(
                f"--head {head}: this model has no such head (its heads: {', '.join(recorded)})",
                f"use one of {', '.join(recorded)}",
            )
        self.recorded = recorded
        self.names = [head] if head else list(recorded)
        self.adapters = {name: task_from_state(recorded[name]["task"]) for name in self.names}
        self.engine = self.model = self.tokenizer = self.runner = None
        self.views: dict = {}

    def load(self) -> "MultiHeadPredictor":
        if self.engine is not None:
            return self
        from bertkit.engine import Engine
        from bertkit.models import load_config
        from bertkit.models.tokenizer import load_tokenizer
        from bertkit.networks.multihead import load_multihead

        self.tokenizer = load_tokenizer(self.model_dir, self.model_dir, load_config(self.model_dir, self.model_dir))
        if self.backend != "torch":  # the exported graph alone: no torch weights held
            from bertkit.export.runtime import exported_file, make_runner

            self.runner = self.engine = make_runner(exported_file(self.model_dir, self.backend), self.run.threads)
            return self
        self.engine = Engine(self.run.precision, threads=self.run.threads)
        heads = [(h["name"], h["model_class"], h["model_config"]) for h in self.recorded.values()]
        self.model = load_multihead(self.model_dir, heads)
        if all(a.reads_first_token_only for a in self.adapters.values()):  # as one-task directories load
            speed_up(next(iter(self.adapters.values())), self.model.heads[self.names[0]])
        self.views = {name: self.engine.prepare_model(self.model.view(name)) for name in self.names}
        return self

    def runtime(self) -> dict:
        """The torch engine's precision and threads, or what the exported graph computes in."""
        if self.runner is not None:
            return {"precision": self.runner.precision, "backend": self.backend}
        return self.load().engine.runtime(self.run.precision)

    def outputs(self, name: str, examples: list, features: list, runner=None) -> dict:
        """Head ``name``'s outputs for ``features``: torch's, or an exported graph's (``runner``, else
        the backend's), whose outputs are every head's under ``NAME/KEY``."""
        adapter = self.adapters[name]
        runner = runner or self.load().runner
        if runner is not None:
            found = self._run_graph(runner, [name], features)
            return {key: found[f"{name}/{key}"] for key in adapter.output_names}
        return self.load().engine.infer(
            self.views[name],
            features,
            self.run.batch_size,
            adapter.output_names,
            adapter.per_token_outputs,
            self.tokenizer.pad_token_id,
            description=f"{name}",
        )

    def predict(self, name: str, examples: list) -> list:
        adapter = self.adapters[name]
        features = adapter.preprocess(examples, self.load().tokenizer, train=False)
        predictions = adapter.postprocess(examples, features, self.outputs(name, examples, features))
        return [with_id(ex, adapter.format_prediction(ex, p)) for ex, p in zip(examples, predictions)]

    def predict_many(self, examples: dict) -> dict:
        """Each head's rows for its examples (``{name: examples}``): heads whose rows tokenize to the
        same ids share one encoder pass (networks/multihead.SharedPass), the others run alone."""
        tokenizer = self.load().tokenizer
        features = {
            name: self.adapters[name].preprocess(found, tokenizer, train=False) for name, found in examples.items()
        }
        answers = {}
        # an exported graph answers every head in one run: heads of the same ids share it, taggers too
        for names in shared_passes(features, self.adapters, by_ids_only=self.runner is not None):
            outputs = self._outputs_of(names, features[names[0]]) if len(names) > 1 else None
            for name in names:
                adapter = self.adapters[name]
                own = outputs[name] if outputs else self.outputs(name, examples[name], features[name])
                predictions = adapter.postprocess(examples[name], features[name], own)
                answers[name] = [
                    with_id(ex, adapter.format_prediction(ex, p)) for ex, p in zip(examples[name], predictions)
                ]
        return answers

    def shared_pass(self, names: list):
        """The heads ``names`` over one encoder pass (outputs ``NAME/KEY``), as a module (torch backend)."""
        from bertkit.networks.multihead import SharedPass

        return SharedPass(self.load().model.encoder, {n: self.model.heads[n] for n in names})

    def _outputs_of(self, names: list, features: list) -> dict:
        if self.runner is not None:
            found = self._run_graph(self.runner, names, features)
        else:
            found = self._run_graph(self.engine, names, features, self.engine.prepare_model(self.shared_pass(names)))
        return {n: {key: found[f"{n}/{key}"] for key in self.adapters[n].output_names} for n in names}

    def _run_graph(self, runner, names: list, features: list, network=None) -> dict:
        """``NAME/KEY`` outputs of the heads ``names`` for ``features`` (torch: all per token or none)."""
        wanted = tuple(f"{n}/{key}" for n in names for key in self.adapters[n].output_names)
        per_token = {
            f"{n}/{key}" for n in names if self.adapters[n].per_token_outputs for key in self.adapters[n].output_names
        }
        if network is not None:  # torch's SharedPass groups heads that are all per token or all per row
            per_token = bool(per_token)
        return runner.infer(
            network,
            features,
            self.run.batch_size,
            wanted,
            per_token,
            self.tokenizer.pad_token_id,
            description="+".join(names),
        )

    def score(self, name: str, examples: list) -> dict:
        adapter = self.adapters[name]
        features = adapter.preprocess(examples, self.load().tokenizer, train=False)
        metrics, _ = score(
            self.engine, adapter, self.views[name], examples, features, self.run.batch_size, self.tokenizer.pad_token_id
        )
        return metrics


def shared_passes(features: dict, adapters: dict, by_ids_only: bool = False) -> list[list[str]]:
    """The heads in groups whose features are the same token ids, row by row (one encoder pass
    each), in head order; taggers apart from per-row heads unless ``by_ids_only``."""
    groups: list[list[str]] = []
    for name, found in features.items():
        key = _pass_key(found, adapters[name], by_ids_only)
        same = next((g for g in groups if _pass_key(features[g[0]], adapters[g[0]], by_ids_only) == key), None)
        if same is None:
            groups.append([name])
        else:
            same.append(name)
    return groups


def _pass_key(features: list, adapter, by_ids_only: bool = False) -> tuple:
    ids = tuple((tuple(f["input_ids"]), tuple(f.get("token_type_ids") or ())) for f in features)
    return (None if by_ids_only else adapter.per_token_outputs), ids


def evaluate_multi(model_dir: str, options: EvalOptions | None = None, run: InferenceOptions | None = None) -> dict:
    """Every head (or ``options.head``) scored on its recorded evaluation data (``options.data``:
    other data, for one ``--head``); the report and ``eval-heads.json`` (or ``--output``) hold
    each head's metrics and ``mean``, the mean of the heads' main metrics."""
    options = (options or EvalOptions()).validate("bertkit eval")
    refuse_given("bertkit eval", metric=options.metric, store_threshold=options.store_threshold, **options.task_options)
    predictor = MultiHeadPredictor(model_dir, run, options.head)
    if options.data is not None and options.head is None:
        raise BertkitError(
            "--data on a multi-head model needs --head (each head reads its own data)",
            f"add --head NAME (one of {', '.join(predictor.names)})",
        )
    target = Path(options.output) if options.output else Path(model_dir) / EVAL_FILE
    check_output_file(target, "--output" if options.output else "the metrics file")
    sources = {name: head_source(predictor.recorded[name], options) for name in predictor.names}
    check_inputs_kept(target, *sources.values())
    check_results_kept(model_dir, target, "--output" if options.output else "the metrics file", {})
    started = time.perf_counter()
    per_head, examples = {}, {}
    for name in predictor.names:
        adapter = predictor.adapters[name]
        read = adapter.read(sources[name], EVAL)
        examples[name] = read[: options.max_eval_samples] if options.max_eval_samples else read
        adapter.check_eval_examples(examples[name], sources[name])
    for name in predictor.names:
        per_head[name] = predictor.score(name, examples[name])
    mains = {
        name: predictor.recorded[name].get("main_metric") or predictor.adapters[name].main_metric
        for name in predictor.names
    }
    combined = combined_metrics(per_head, mains, {name: a.metric_scale for name, a in predictor.adapters.items()})
    report = {
        "model": str(model_dir),
        "heads": {
            n: {"data": sources[n].description, "examples": len(examples[n]), "metrics": per_head[n]}
            for n in predictor.names
        },
        "metrics": combined,
        "mean": combined.get("mean"),
        "runtime": predictor.runtime(),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if predictor.engine.is_main_process:
        write_json(target, {k: v for k, v in report.items() if k != "runtime"})
    report["written_to"] = str(target)
    return report


def head_source(recorded: dict, options: EvalOptions, split: str | None = None):
    """A head's evaluation data: ``--data`` (with --head), else what its training evaluated on
    (``split`` "train": what it trained on)."""
    data_dir = options.data_dir or (None if registry.data_dir() else recorded["data"].get("data_dir"))
    try:
        if split == "train":
            data = recorded["data"].get("name") or recorded["data"]["train"]
        else:
            data = options.data or recorded_eval_data({"data": recorded["data"]})
        split = split or options.split or "dev"
        return registry.resolve(data, split, data_dir, recorded["task"]["task"], command="eval")
    except BertkitError as exc:
        hint = f"pass --head {recorded['name']} --data FILE" if exc.hint == "pass --data FILE" else exc.hint
        raise BertkitError(f"head {recorded['name']}: {exc.message}", hint) from None


def refuse_given(command: str, **given) -> None:
    """The first option given that a multi-head model does not take yet (a task's flag, eval's
    --metric): refused, not ignored."""
    for name, value in given.items():
        if value not in (None, False, (), []):
            flag = f"--{name.replace('_', '-')}"
            raise BertkitError(f"{command} on a multi-head model does not compose with {flag} yet", f"drop {flag}")
