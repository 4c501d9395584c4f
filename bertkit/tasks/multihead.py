"""Several task heads over one encoder (`bertkit finetune multi`), as data: what each head is, how it
is written on the command line (``--task NAME:KIND:DATA[:key=value...]``) or in a ``--config`` file
(``heads:``, a list of such strings or of mappings), and the checks that need no model.

A head is an ordinary registered task (cls, pair, ner) with a label kind: the multi-head model is a
composition of task units, each with its own reading, preprocessing, loss, metrics and decoding;
only the encoder is shared (bertkit/networks/multihead.py). Torch-free, as every task module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bertkit.errors import BertkitError
from bertkit.tasks.label_kinds import LIST_KIND, NUMBER_KIND

MULTI = "multi"  # the command's name, bertkit.json's task.task and the directory kind's stem
DIRECTORY_KIND = "multi-head"
# head kind -> (the registered task that trains it, its --problem-type; None: what the data says)
HEAD_KINDS = {
    "cls": ("cls", None),
    "pair": ("pair", None),
    NUMBER_KIND: ("cls", NUMBER_KIND),
    f"pair-{NUMBER_KIND}": ("pair", NUMBER_KIND),
    LIST_KIND: ("cls", LIST_KIND),
    "ner": ("ner", None),
    "qa": ("qa", None),
    "rerank": ("rerank", None),
}
NOT_YET = ("embedding",)  # tasks whose heads a multi-head model cannot hold (yet)
SAMPLINGS = ("proportional", "temperature", "round-robin")
# a head's own keys besides name, kind, data; every other option is the run's, shared by all heads
HEAD_KEYS = ("eval_data", "weight")
SHARED_ONLY = {  # head keys that name something one model can only have once: said, not ignored
    "model": "the heads share one encoder, so there is one --model for the run",
    "max_length": "the heads share one tokenizer and --max-length",
}
REFUSED_HEAD_OPTIONS = {  # a head's task option -> why a multi-head model cannot train with it
    "recipe": "--recipe setfit trains a body on pairs, not a head over a shared encoder",
    "long_text": "--long-text windows pool several encoder passes per row; one head per pass is what multi trains",
}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
HINT = "write each head as NAME:KIND:DATA, e.g. --task sst2:cls:sst2 --task stsb:pair-regression:stsb"


@dataclass(frozen=True)
class HeadSpec:
    """One head: its name (a key of predict's rows and of /predict/<name>), kind, data, loss weight
    and its task's options (label columns, --problem-type, ...)."""

    name: str
    kind: str
    data: str
    eval_data: str | None = None
    weight: float = 1.0
    options: dict = field(default_factory=dict)

    @property
    def task(self) -> str:
        return HEAD_KINDS[self.kind][0]

    def task_options(self) -> dict:
        problem = HEAD_KINDS[self.kind][1]
        return {**self.options, **({"problem_type": problem} if problem else {})}

    def record(self) -> dict:
        """As config.yaml stores it (a replay reads it back with ``head_of``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "data": self.data,
            "eval_data": self.eval_data,
            "weight": self.weight,
            **self.options,
        }


def parse_head(text: str) -> HeadSpec:
    """``NAME:KIND:DATA[:key=value...]`` (``--task``) as a head."""
    parts = str(text).split(":")
    if len(parts) < 3 or not all(parts[:3]):
        raise BertkitError(f"--task {text!r} is not NAME:KIND:DATA", HINT)
    values = {"name": parts[0], "kind": parts[1], "data": parts[2]}
    for extra in parts[3:]:
        key, equals, value = extra.partition("=")
        if not equals or not key:
            raise BertkitError(f"--task {text!r}: {extra!r} is not key=value", HINT + ":weight=2")
        values[key.strip().replace("-", "_")] = value
    return head_of(values, f"--task {text!r}")


def head_of(values, where: str) -> HeadSpec:
    """A head from a mapping (a --config file's entry) or a ``--task`` string."""
    if isinstance(values, str):
        return parse_head(values)
    if not isinstance(values, dict):
        raise BertkitError(f"{where}: a head is a NAME:KIND:DATA string or a mapping", HINT)
    values = {str(k).replace("-", "_"): v for k, v in values.items()}
    missing = [key for key in ("name", "kind", "data") if not values.get(key)]
    if missing:
        raise BertkitError(f"{where}: the head has no {', '.join(missing)}", HINT)
    name, kind, data = str(values.pop("name")), str(values.pop("kind")), str(values.pop("data"))
    _check_name(name, where)
    _check_kind(name, kind)
    for key, why in SHARED_ONLY.items():
        if key in values:
            raise BertkitError(f"head {name}: {key} is set per head; {why}", f"drop {key} from head {name}")
    weight = _weight(name, values.pop("weight", 1.0))
    eval_data = values.pop("eval_data", None)
    for key, why in REFUSED_HEAD_OPTIONS.items():
        if key in values:
            raise BertkitError(
                f"bertkit finetune multi does not compose with --{key.replace('_', '-')}: {why}",
                f"drop {key} from head {name}",
            )
    return HeadSpec(name, kind, data, None if eval_data is None else str(eval_data), weight, values)


def check_heads(heads: list[HeadSpec]) -> list[HeadSpec]:
    """At least one head, each name once."""
    if not heads:
        raise BertkitError("bertkit finetune multi needs at least one head", HINT)
    seen = set()
    for head in heads:
        if head.name in seen:
            raise BertkitError(f"two heads are named {head.name!r}", "give each head its own NAME")
        seen.add(head.name)
    return heads


def combined_metrics(per_head: dict, main_metrics: dict, scales: dict | None = None) -> dict:
    """Every head's metrics as ``head/metric``, then ``mean``: the mean of the heads' main metrics,
    each divided by its full mark (``scales``: a QA head's F1 is a percentage), so that every head
    counts on one 0-1 scale (what selects the best evaluation, and eval's summary)."""
    found = {f"{name}/{key}": value for name, metrics in per_head.items() for key, value in metrics.items()}
    scales = scales or {}
    mains = [(per_head[name].get(main), scales.get(name, 1.0)) for name, main in main_metrics.items()]
    mains = [value / scale for value, scale in mains if isinstance(value, (int, float))]
    if mains:
        found["mean"] = round(sum(mains) / len(mains), 6)
    return found


def _check_name(name: str, where: str) -> None:
    if not _NAME.match(name):
        raise BertkitError(
            f"{where}: head name {name!r} is not a plain name", "use letters, digits, - and _ (40 at most)"
        )


def _check_kind(name: str, kind: str) -> None:
    if kind in NOT_YET:
        raise BertkitError(
            f"head {name}: kind {kind} is not a multi-head kind yet (these are: {', '.join(HEAD_KINDS)})",
            f"train the {kind} head as its own model: bertkit finetune {kind}",
        )
    if kind not in HEAD_KINDS:
        raise BertkitError(f"head {name}: unknown kind {kind!r}", f"use one of {', '.join(HEAD_KINDS)}")


def _weight(name: str, value) -> float:
    try:
        weight = float(value)
    except (TypeError, ValueError):
        raise BertkitError(f"head {name}: weight {value} is not a number", "give a positive number") from None
    if not weight > 0 or weight == float("inf"):
        raise BertkitError(f"head {name}: weight {value} is not positive", "give a positive number, e.g. 1")
    return weight


def head_text(values, where: str) -> str:
    """A head (a --config file's string or mapping) as ``--task`` writes it."""
    head = head_of(values, where)
    extra = {"eval_data": head.eval_data, "weight": head.weight if head.weight != 1.0 else None, **head.options}
    return ":".join([head.name, head.kind, head.data] + [f"{k}={v}" for k, v in extra.items() if v is not None])
