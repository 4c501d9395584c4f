"""report.html: one self-contained page (figures inlined as base64 PNG) with the metrics,
hyperparameters, data and versions of a model directory."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from bertkit.reporting.card_results import repeats

STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}code{background:#f3f3f3}"""


def report_html(meta: dict, name: str, model_dir: Path, figures: list[Path], evaluations: dict[str, dict]) -> str:
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>bertkit report: "
        f"{_e(name)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(name)}</h1>",
        f"<p>Task <code>{_e(_task_name(meta))}</code> fine-tuned from <code>{_e(meta.get('base_model'))}</code>"
        f"; best epoch {_e(meta.get('best_epoch'))}"
        f"{' (stopped early)' if meta.get('stopped_early') else ''}.</p>",
        "<h2>Metrics</h2>",
        _metrics_table(
            {**_training_columns(meta), **{stem: report.get("metrics", {}) for stem, report in evaluations.items()}}
        ),
    ]
    if meta.get("tune"):
        parts += ["<h2>Hyperparameter search</h2>", _trials_table(meta["tune"])]
    parts.append("<h2>Figures</h2>")
    for figure in figures:
        encoded = base64.b64encode(figure.read_bytes()).decode("ascii")
        parts.append(
            f"<figure><img alt='{_e(figure.stem)}' src='data:image/png;base64,{encoded}'>"
            f"<figcaption>{_e(figure.name)}</figcaption></figure>"
        )
    if not figures:
        parts.append("<p>No figures (matplotlib missing, or nothing to draw).</p>")
    parts += [
        "<h2>Hyperparameters</h2>",
        _pairs(meta.get("config", {})),
        "<h2>Data</h2>",
        _pairs(meta.get("data", {})),
        "<h2>Labels</h2>",
        _labels(meta),
        "<h2>Throughput</h2>",
        _pairs(meta.get("throughput", {})),
        "<h2>Versions</h2>",
        _pairs({**(meta.get("versions") or {}), "bertkit": meta.get("bertkit_version")}),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _task_name(meta: dict) -> str:
    heads = meta.get("heads")
    if isinstance(heads, list):  # bertkit finetune multi
        return f"multi ({len(heads)} heads: " + ", ".join(f"{h['name']} {h['kind']}" for h in heads) + ")"
    return meta["task"]["task"]


def _labels(meta: dict) -> str:
    """The label names (a multi-head directory: each head's)."""
    if isinstance(meta.get("heads"), list):
        return _pairs({h["name"]: ", ".join(map(str, h["task"].get("labels") or [])) or "-" for h in meta["heads"]})
    return f"<p>{_e(', '.join(map(str, meta['task'].get('labels') or [])) or '(none)')}</p>"


def _training_columns(meta: dict) -> dict[str, dict]:
    """The saved model's dev metrics; after --seeds or --folds, also their spread over the runs."""
    repeated = repeats(meta)
    if not repeated:
        return {"training dev data": meta.get("metrics") or {}}
    _, section, runs, this = repeated
    kind = this.split()[0]  # seed or fold
    return {
        f"training dev data ({this}, the best)": meta.get("metrics") or {},
        **{
            f"{stat} over {runs} {kind}s" if stat == "mean" else stat: {
                name: values[stat] for name, values in section["summary"].items()
            }
            for stat in ("mean", "std", "min", "max")
        },
    }


def _trials_table(section: dict) -> str:
    names = list(dict.fromkeys(k for trial in section["trials"] for k in trial.get("params", {})))
    head = "".join(f"<th>{_e(n)}</th>" for n in ["trial", "state", "value", *names])
    rows = [
        f"<tr><td>{trial['number']}{' (best)' if trial['number'] == section.get('best_trial') else ''}</td>"
        f"<td>{_e(trial['state'])}</td><td>{_number(trial.get('value'))}</td>"
        + "".join(f"<td>{_number(trial.get('params', {}).get(n))}</td>" for n in names)
        + "</tr>"
        for trial in section["trials"]
    ]
    study = (
        f"<p>Study <code>{_e(section.get('study_name'))}</code> in <code>{_e(section.get('storage'))}</code>; "
        f"importances: {_e(section.get('importances') or 'not computed')}.</p>"
    )
    return study + f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _metrics_table(columns: dict[str, dict]) -> str:
    names = [
        n
        for n in dict.fromkeys(k for metrics in columns.values() for k in metrics)
        if any(isinstance(m.get(n), (int, float)) and not isinstance(m.get(n), bool) for m in columns.values())
    ]
    if not names:
        return "<p>No metrics (no evaluation data).</p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    rows = []
    for name in names:
        cells = "".join(f"<td>{_number(m.get(name))}</td>" for m in columns.values())
        rows.append(f"<tr><th>{_e(name)}</th>{cells}</tr>")
    return f"<table><tr><th>metric</th>{head}</tr>{''.join(rows)}</table>"


def _pairs(values: dict) -> str:
    rows = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(json.dumps(v) if isinstance(v, (dict, list)) else v)}</td></tr>"
        for k, v in values.items()
    )
    return f"<table>{rows}</table>"


def _number(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else _e(value)


def _e(value) -> str:
    return html.escape(str(value), quote=True)
