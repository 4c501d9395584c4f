"""The model card: README.md in the Hugging Face format (YAML metadata, then prose), written from
bertkit.json, so that the directory can be pushed to the Hub as it is.

``model_card_template.md`` is the card's layout; ``CardData`` holds its filled-in sections. What
depends on the task (its Hub task, what it does, the usage snippet, its limits) is the task's own
``card_text`` (bertkit/tasks), or the probe's (bertkit/probing/card.py) for a directory that
``bertkit probe`` wrote. The card shows no local paths: the machine that trained the model is
nobody else's business, and its paths mean nothing on the Hub.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template

from bertkit.errors import BertkitError
from bertkit.methods import recorded_methods
from bertkit.model_dir.ownership import CARD_FILE, NEW_CARD_FILE, card_state  # noqa: F401  (CARD_FILE: reporting's name)
from bertkit.reporting.card_results import evaluation_section
from bertkit.tasks.base import CardText, Task

TEMPLATE_FILE = Path(__file__).with_name("model_card_template.md")
# Aliases resolve to a local copy; the card names the public checkpoint it is.
BASE_MODEL_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
HUB_SPLITS = {"dev": "validation"}
CAVEAT = (
    "Scores are on the evaluation data above; text from other domains, languages or time periods can score "
    "much lower, and the model inherits the biases of its base model and training data."
)


@dataclass
class CardData:
    """The card's sections as markdown, in template order."""

    front_matter: str
    model_name: str
    summary: str
    intended_use: str
    usage: str
    training_data: str
    training_procedure: str
    evaluation: str
    limitations: str
    versions: str

    def render(self) -> str:
        text = Template(TEMPLATE_FILE.read_text(encoding="utf-8")).substitute(asdict(self))
        return re.sub(r"\n{3,}", "\n\n", text)  # an empty section leaves no gap


def model_card(meta: dict, model_name: str, figures: list[str] = ()) -> str:
    return card_data(meta, model_name, figures).render()


def card_data(meta: dict, model_name: str, figures: list[str] = ()) -> CardData:
    text, values = card_text(meta, model_name)
    data = meta.get("data") or {}
    metrics = {
        k: v for k, v in (meta.get("metrics") or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    base = meta.get("base_model")
    origin = f" from `{base_model_id(base) or public_name(base)}`" if base else ""
    summary = [
        f"A {(text.title + ' model').lower() if text.title else 'model'} trained with "
        f"[bertkit](https://pypi.org/project/bertkit/){origin}" + (f": it {text.does}." if text.does else ".")
    ]
    labels = meta["task"].get("labels") or []
    if labels:
        summary.append(f"Labels: {', '.join(f'`{label}`' for label in labels)}.")
    for warning in meta.get("warnings") or ():  # a degenerate model: the first thing a reader sees
        summary.append(f"**Warning:** {warning['text'].removeprefix('warning: ')}")
    trained_on = source_name(data.get("name")) or source_name(data.get("train"))
    intended = (
        f"{text.title or 'Prediction'} of English text like its training data"
        + (f" ({trained_on})" if trained_on else "")
        + ". Check it on your own data before relying on it."
    )
    if text.snippet:
        usage = f"```python\n{Template(text.snippet).safe_substitute(values)}\n```\n\nor with bertkit: {text.cli}."
    else:
        usage = f"Use it with bertkit: {text.cli}."
    for method in recorded_methods(meta):  # what each training method made, and how its directory loads
        summary += method.card_lines(meta)
        own_usage = method.card_usage(meta, model_name, base_model_id)
        if own_usage:
            usage = own_usage + f"\n\nor with bertkit: {text.cli}."
    limitations = Template(text.limitations).safe_substitute(values)
    return CardData(
        front_matter=front_matter(meta, model_name, text, metrics),
        model_name=model_name,
        summary="\n".join(summary),
        intended_use=intended,
        usage=usage,
        training_data=_training_data(data),
        training_procedure=_procedure(meta),
        evaluation=evaluation_section(meta, metrics, figures),
        limitations="\n".join(filter(None, (limitations, CAVEAT))),
        versions=_versions(meta),
    )


def card_text(meta: dict, model_name: str) -> tuple[CardText, dict]:
    """The card text of the directory's task (its probe's, for a probe directory) and the Python
    literals its templates are filled with."""
    from bertkit.tasks import get_task_class, task_from_state

    state = meta["task"]
    try:
        task_class = get_task_class(state["task"])
        text = task_from_state(state).card_text  # an instance: a task's text may depend on its settings
    except BertkitError:
        task_class, text = Task, Task.card_text  # a task this installation does not know still gets a card
    if meta.get("probe"):
        from bertkit.probing.card import card_text as probe_card_text

        text = probe_card_text(meta["probe"], text)
    values = {option.name: option.default for option in task_class.options_declared}
    values.update(state.get("options") or {})
    values.update(
        text.example, labels=state.get("labels") or [], max_length=state.get("max_length"), model_dir=model_name
    )
    return text, {name: _literal(value) for name, value in values.items() if value is not None}


def front_matter(meta: dict, model_name: str, text: CardText, metrics: dict) -> str:
    task, data = meta["task"]["task"], meta.get("data") or {}
    base = base_model_id(meta.get("base_model"))
    dataset_id, dataset_config = _dataset(data.get("name"), (meta.get("config") or {}).get("data_config"))
    yaml = ["library_name: transformers"]
    if text.hub_task and text.pipeline:
        yaml.append(f"pipeline_tag: {text.hub_task}")
    yaml += ["tags:", "- bertkit", f"- {task}"]
    if base:
        yaml.append(f"base_model: {_quote(base)}")
    if dataset_id:
        yaml += ["datasets:", f"- {dataset_id}"]
    if metrics:
        yaml += ["metrics:"] + [f"- {name}" for name in metrics]
        yaml += [
            "model-index:",
            f"- name: {_quote(model_name)}",
            "  results:",
            "  - task:",
            f"      type: {_quote(text.hub_task or task)}",
            f"      name: {_quote(text.title or task)}",
            "    dataset:",
            f"      name: {_quote(public_name(data.get('name') or data.get('eval') or 'eval data'))}",
            f"      type: {_quote(dataset_id or 'custom')}",
        ]
        if dataset_config:
            split = re.search(r" split (\S+)$", data.get("eval") or "")  # any dataset's: as recorded
            yaml += [f"      config: {dataset_config}", f"      split: {split.group(1) if split else 'validation'}"]
        yaml.append("    metrics:")
        for name, value in metrics.items():
            yaml += [f"    - type: {name}", f"      value: {round(float(value), 4)}", f"      name: {name}"]
    return "\n".join(yaml)


def _training_data(data: dict) -> str:
    lines = []
    for role, key in (("train", "train"), ("evaluation", "eval")):
        count = data.get(f"{key}_examples")
        where = _dataset_source(data.get(key), data.get("name"))
        lines.append(f"- {role}: {where or 'none'}" + (f" ({count} examples)" if where and count is not None else ""))
    return "\n".join(lines)


def _procedure(meta: dict) -> str:
    lines = ["| hyperparameter | value |", "|---|---|"]
    for key, value in (meta.get("config") or {}).items():
        if value is not None and value != {}:
            shown = json.dumps(value) if isinstance(value, (dict, list)) else public_name(value)
            lines.append(f"| {key} | {shown} |")
    if meta["task"].get("max_length") is not None:
        lines.append(f"| max_length used | {meta['task']['max_length']} |")
    throughput = meta.get("throughput") or {}
    seconds, rate = throughput.get("train_seconds"), throughput.get("examples_per_s")
    if seconds is not None:
        lines += ["", f"Training took {seconds} s" + (f" ({rate} examples/s)." if rate is not None else ".")]
    for method in recorded_methods(meta):
        lines += [line for said in method.card_procedure(meta, public_name) for line in ("", said)]
    return "\n".join(lines)


def _versions(meta: dict) -> str:
    versions = {**(meta.get("versions") or {}), "bertkit": meta.get("bertkit_version")}
    return ", ".join(f"{name} {version}" for name, version in versions.items() if version is not None)


def base_model_id(name: str | None) -> str | None:
    """A Hub id for the card's ``base_model``, or None for a local path (the Hub would reject it)."""
    if not name:
        return None
    if name in BASE_MODEL_IDS:
        return BASE_MODEL_IDS[name]
    if name.startswith(("/", ".", "~")) or Path(name).expanduser().exists() or name.count("/") > 1:
        return None
    return name


def public_name(value) -> str:
    """``value`` as the card shows it: a local path becomes its last part (a file or directory name)."""
    text = str(value)
    return Path(text).name if _is_local_path(text) else text


def source_name(description: str | None) -> str | None:
    return public_name(description) if description else None


def _dataset_source(description: str | None, dataset: str | None) -> str | None:
    """A split's source: a known dataset by name (with its file's name when read from a local
    copy), a file by its name, anything else (a Hub split, held-out documents) as recorded."""
    if not description:
        return None
    if dataset and _is_local_path(dataset):  # a dataset directory: its name, not where it lies
        return description.replace(dataset, Path(dataset).name)
    if dataset and _is_local_path(description):
        return f"{dataset} ({Path(description).name})"
    return public_name(description)


def _is_local_path(text: str) -> bool:
    if text.startswith(("/", "~", "./", "../", "\\")) or re.match(r"^[A-Za-z]:[\\/]", text):
        return True
    # a relative path without spaces ("data/train.csv"); recorded descriptions have spaces
    # ("Hub nyu-mll/glue (sst2) split validation"), and Hub ids have one slash and no suffix
    if " " not in text and ("\\" in text or text.count("/") > 1 or ("/" in text and Path(text).suffix)):
        return True
    try:
        return "/" in text and Path(text).expanduser().exists()
    except OSError:
        return False


def _literal(value) -> str:
    """A Python literal for a template: strings in double quotes, as the snippets are written."""
    if isinstance(value, (str, list, tuple, dict)) and not isinstance(value, bool):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _dataset(name: str | None, config: str | None = None) -> tuple[str | None, str | None]:
    """(Hub id, config) of the training dataset: a known name's, or a Hub id given as --data (a
    local dataset directory has none)."""
    if not name:
        return None, None
    from bertkit.data.registry import DATASETS

    spec = DATASETS.get(name)
    if spec:
        return spec.hub_id, spec.hub_config
    return (None, None) if _is_local_path(name) else (name, config)


def _quote(text: str) -> str:
    return json.dumps(str(text))  # a JSON string is a valid YAML scalar, whatever it holds


# The card bertkit writes ends with a digest of itself, so a later `eval` or `report` can tell a
# card the user edited (or wrote) from its own, and never overwrites the user's words.


def signed_card(text: str) -> str:
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return (
        f"{text}\n<!-- bertkit card sha256:{digest}; once edited, bertkit writes its new cards to {NEW_CARD_FILE} -->\n"
    )


def card_edited(path: Path) -> bool:
    """True when ``path`` holds something other than a card bertkit wrote, unchanged since."""
    return card_state(path) != "ours"


def write_card(directory: Path, text: str) -> tuple[Path, str | None]:
    """Write the card to README.md, or, when README.md is not bertkit's unchanged card, beside it
    to README.bertkit.md; returns the file written and, then, the notice that says so."""
    from bertkit.model_dir import write_text

    card = Path(directory) / CARD_FILE
    state = card_state(card)
    target = card if state == "ours" else card.with_name(NEW_CARD_FILE)
    write_text(target, signed_card(text))
    if state == "ours":
        return card, None
    why = (
        "has edits bertkit did not make"
        if state == "edited"
        else "was not written by this version of bertkit (your own card, or an older bertkit's)"
    )
    return target, (
        f"{card} {why}, so it was kept; the new card is {NEW_CARD_FILE} (merge it in, or delete "
        f"{CARD_FILE} to let bertkit write it there again)"
    )
