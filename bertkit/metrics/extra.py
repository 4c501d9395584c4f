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
                raise BertkitError(
                    f"--metric {name}: no such file or directory",
                    "give a metric script, its directory, or an `evaluate` Hub name",
                )
            from bertkit.hub import use_hub_or_cache

            use_hub_or_cache()  # offline: the libraries read the cache once instead of retrying
        try:
            modules.append((_short_name(name), evaluate.load(str(local) if local.exists() else name)))
        except Exception as exc:  # evaluate raises many types (FileNotFoundError, ConnectionError, ImportError...)
            raise BertkitError(
                f"--metric {name} could not be loaded ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
                "give a local metric script/directory, or a Hub name with the Hub reachable",
            ) from exc
    return modules


def score_extra(modules: list, adapter, examples: list[dict], predictions: list) -> dict:
    predicted, references = adapter.metric_inputs(examples, predictions)
    scores = {}
    for name, module in modules:
        try:
            result = module.compute(predictions=predicted, references=references) or {}
        except Exception as exc:
            raise BertkitError(
                f"--metric {name} failed on {adapter.name} predictions ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:200]})",
                f"a {adapter.name} metric must accept {adapter.metric_inputs_description}",
            ) from exc
        for key, value in result.items():
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
                scores[f"{name}/{key}"] = round(float(value), 6)
    return scores


def _short_name(name: str) -> str:
    path = Path(name)
    return path.stem if path.suffix == ".py" else path.name or name
