"""``bertkit eval --metric NAME_OR_PATH``: extra scores from Hugging Face `evaluate` modules.

Never on the default path: the built-in metrics need neither `evaluate` nor a network. A local
metric script or directory loads offline; a Hub name needs the Hub (checked with one short probe,
so an offline machine fails in one line). Each module gets the task's usual inputs: label ids
(cls/pair), tag sequences (ner), SQuAD-style dicts (qa). Its numbers are reported as
``<module>/<key>``, so they never replace a built-in score.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError


def load_metrics(names) -> list:
    try:
        import evaluate
    except ImportError as exc:
        raise BertkitError("--metric needs the `evaluate` package", "pip install 'bertkit[evaluate]'") from exc
    modules = []
    for name in names:
        local = Path(name).expanduser()
        if not local.exists():
            if name.startswith((".", "/", "~")) or name.endswith(".py"):
                raise BertkitError(f"--metric {name}: no such file or directory", "give a metric script, its "
                                   "directory, or an `evaluate` Hub name")
            from bertkit.hub import use_hub_or_cache

            use_hub_or_cache()  # offline: the libraries read the cache once instead of retrying
        try:
            modules.append((_short_name(name), evaluate.load(str(local) if local.exists() else name)))
        except Exception as exc:  # evaluate raises many types (FileNotFoundError, ConnectionError, ImportError...)
            raise BertkitError(f"--metric {name} could not be loaded ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]})",
                               "give a local metric script/directory, or a Hub name with the Hub reachable") from exc
    return modules


def score_extra(modules: list, adapter, examples: list[dict], predictions: list) -> dict:
    predicted, references = _inputs(adapter, examples, predictions)
    scores = {}
    for name, module in modules:
        try:
            result = module.compute(predictions=predicted, references=references) or {}
        except Exception as exc:
            raise BertkitError(f"--metric {name} failed on {adapter.name} predictions ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]})",
                               f"a {adapter.name} metric must accept {_INPUTS[adapter.name]}") from exc
        for key, value in result.items():
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
                scores[f"{name}/{key}"] = round(float(value), 6)
    return scores


_INPUTS = {"cls": "label ids", "pair": "label ids", "ner": "lists of BIO tags",
           "qa": "SQuAD dicts (id + prediction_text / id + answers)"}


def _inputs(adapter, examples, predictions):
    if adapter.name in ("cls", "pair"):
        ids = {label: i for i, label in enumerate(adapter.labels)}
        return ([int(np.asarray(p["probabilities"]).argmax()) for p in predictions],
                [ids[ex["label"]] for ex in examples])
    if adapter.name == "ner":
        return [list(p) for p in predictions], [list(ex["tags"]) for ex in examples]
    if adapter.name == "qa":
        return ([{"id": str(ex["id"]), "prediction_text": p["answer"]} for ex, p in zip(examples, predictions)],
                [{"id": str(ex["id"]), "answers": {"text": [a["text"] for a in ex["answers"]],
                                                   "answer_start": [a["start"] for a in ex["answers"]]}}
                 for ex in examples])
    raise BertkitError(f"--metric does not support {adapter.name} models", "drop --metric")


def _short_name(name: str) -> str:
    path = Path(name)
    return path.stem if path.suffix == ".py" else path.name or name
