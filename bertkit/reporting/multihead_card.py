"""The model card (README.md) of a multi-head directory (`bertkit finetune multi`): what each head
is, what it scored, and how to run it, in bertkit and in plain transformers (its head exported)."""

from __future__ import annotations

from pathlib import Path

from bertkit.reporting.card import public_name


def multihead_card(meta: dict, model_name: str, figures: list[str] = ()) -> str:
    """The card's Markdown for bertkit.json ``meta`` of a directory called ``model_name``;
    ``figures``: paths relative to it (reporting/build.py draws them)."""
    heads = meta["heads"]
    lines = [
        f"# {model_name}",
        "",
        f"{len(heads)} task heads over one `{public_name(meta.get('base_model'))}` encoder, trained together by "
        "`bertkit finetune multi` (each batch one head's; the saved weights are those of the evaluation with the "
        f"best mean of the heads' main metrics: {_number(meta.get('metrics', {}).get('mean'))}).",
        "",
        "| head | kind | labels | trained on | examples | main metric |",
        "|---|---|---|---|---|---|",
    ]
    for head in heads:
        labels, data = head["task"].get("labels"), head["data"]
        main = head.get("main_metric")
        value = (head.get("metrics") or {}).get(main)
        lines.append(
            f"| {head['name']} | {head['kind']} | {len(labels) if labels else '-'} | "
            f"{public_name(data.get('name') or data.get('train'))} | {data.get('train_examples')} "
            f"| {main} {_number(value)} |"
        )
    lines += _seeds_lines(meta)
    lines += [line for figure in figures for line in ("", f"![{Path(figure).stem}]({figure})")]
    lines += ["", "## Usage", "", "Every head's answer per input row, or one head's (`--head NAME`):", "", "```bash"]
    lines += [f"bertkit predict {model_name} --input rows.jsonl --output predictions.jsonl"]
    lines += [f"bertkit predict {model_name} --input rows.jsonl --head {h['name']}" for h in heads]
    lines += [f"bertkit serve {model_name}   # POST /predict (every head), POST /predict/<head>", "```", ""]
    first = heads[0]["name"]
    lines += [
        "In Python:",
        "",
        "```python",
        "from bertkit.api import MultiHeadPredictor",
        "from bertkit.data.registry import Source",
        "",
        f'predictor = MultiHeadPredictor("{model_name}")',
        f'adapter = predictor.adapters["{first}"]',
        f'rows = adapter.from_records([{_row(heads[0]["kind"])}], Source("example"), "predict")',
        f'print(predictor.predict("{first}", rows))',
        "```",
        "",
        "One head as an ordinary one-task directory, which plain transformers loads:",
        "",
        "```bash",
        f"bertkit export head {model_name} {first} --output {first}-model",
        "```",
        "",
    ]
    return "\n".join(lines)


def _seeds_lines(meta: dict) -> list[str]:
    """After ``--seeds``: each head's main metric and the mean over every seed (the honest numbers)."""
    section = meta.get("seeds")
    if not section:
        return []
    summary, metrics = section["summary"], meta.get("metrics") or {}
    lines = [
        "",
        f"Trained {len(section['seeds'])} times (seeds {', '.join(map(str, section['seeds']))}); this model is seed "
        f"{section['chosen_seed']}'s, the best by the mean of the heads' main metrics on their evaluation data, "
        "which flatters it: expect the mean over seeds.",
        "",
        "| metric | this model | mean ± std | min | max |",
        "|---|---|---|---|---|",
    ]
    names = [f"{h['name']}/{h['main_metric']}" for h in meta["heads"] if h.get("main_metric")] + ["mean"]
    for name in (n for n in names if n in summary):
        found = summary[name]
        lines.append(
            f"| {name} | {_number(metrics.get(name))} | {found['mean']:.4f} ± {found['std']:.4f} "
            f"| {found['min']:.4f} | {found['max']:.4f} |"
        )
    return lines


def _number(value) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "-"


def _row(kind: str) -> str:
    """An input row the head reads (a pair head: two texts)."""
    if kind.startswith("pair"):
        return '{"text": "a first sentence", "text_pair": "a second one"}'
    return '{"text": "a sentence to read"}'
