"""Turn the runner's raw runs into table rows (medians over rounds, ratios, MFU) and write
<name>.json (everything, every round) and <name>.md (the table)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from benchmarks.machine import uncapped_libraries

TRAINING = ("sst2", "ner", "qa")
# the HF reference of each workload: "ratio vs hf_best_bf16" divides by its speed. For training, the
# Trainer's best recipe in its faster precision on this CPU (REFERENCE_CHOICES, where both ran): bf16 on a
# CPU with native bf16, fp32 where bf16 is emulated (an AVX2-only CPU, or ONEDNN_MAX_CPU_ISA=AVX2)
REFERENCE_CHOICES = ("hf_best_bf16", "hf_best")
REFERENCE = {
    "sst2": "hf_best_bf16",
    "ner": "hf_best_bf16",
    "qa": "hf_best_bf16",
    "predict": "pipeline_bf16_bs64",
    "eval": "pipeline_bf16_bs64",
}
METRIC_NAME = {"sst2": "accuracy", "ner": "entity F1", "predict": "accuracy", "eval": "accuracy"}
CAPPED = "† throughput only: trained on the first {n} rows"


def model_info(model_path: str) -> dict:
    """Non-embedding parameters from the config: what 6 x N x tokens multiplies."""
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(model_path)
    h, i = c.hidden_size, c.intermediate_size
    per_layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h  # attention, FFN, 2 LayerNorms
    return {
        "layers": c.num_hidden_layers,
        "hidden": h,
        "intermediate": i,
        "non_embedding_params": c.num_hidden_layers * per_layer,
    }


def _ok(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _ratio(a, b):
    return a / b if _ok(a) and _ok(b) and b else None


def run_row(workload: str, run: dict, model: dict, peaks: dict, epochs: float) -> dict:
    """One round's numbers. MFU = model FLOPs on real tokens (6 x non-embedding params x tokens +
    12 x layers x hidden x sum of squared lengths) / train-loop seconds / the matmul peak of the
    run's precision: the same formula for every side, so padding counts as waste."""
    row = {k: run.get(k) for k in ("precision", "metric", "exact_match", "peak_rss_mb", "process_wall_seconds")}
    if workload in TRAINING:
        seconds = run["train_seconds"]
        flops = (
            6 * model["non_embedding_params"] * run["tokens"]
            + 12 * model["layers"] * model["hidden"] * run["token_pairs"]
        )
        peak_name = "bf16" if run.get("precision") == "bf16" else "fp32"
        row.update(
            examples_per_s=run["n_train"] * epochs / seconds,
            tokens_per_s=run["tokens"] / seconds,
            padding_share=run["padding_share"],
            train_seconds=seconds,
            eval_seconds=run["eval_seconds"],
            gflops_per_s=flops / seconds / 1e9,
            mfu_peak=peak_name,
            mfu_peak_gflops=peaks.get(peak_name),
        )
        row["mfu"] = _ratio(row["gflops_per_s"], row["mfu_peak_gflops"])
    else:  # predict / eval: sentences per second, the model load excluded
        row.update(examples_per_s=run["n"] / run["seconds"], seconds=run["seconds"], load_seconds=run["load_seconds"])
    return row


def _median(rows: list[dict]) -> dict:
    out = dict(rows[0])
    for key in out:
        values = [r.get(key) for r in rows]
        if all(_ok(v) for v in values):
            out[key] = statistics.median(values)
    out["rounds"] = len(rows)
    return out


def build_rows(report: dict) -> list[dict]:
    rows = []
    for workload in ("sst2", "ner", "qa", "predict", "eval"):
        entry = report["workloads"].get(workload)
        if not entry:
            continue
        if "error" in entry:
            rows.append({"workload": workload, "side": "-", "error": entry["error"]})
        mine = []
        for side, rounds in entry.get("runs", {}).items():
            good = [r for r in rounds if "error" not in r]
            row = {"workload": workload, "side": side}
            if good:
                row.update(
                    _median(
                        [
                            run_row(
                                workload,
                                r,
                                report["model"],
                                report["matmul_peak_gflops"],
                                report["hyperparameters"]["epochs"],
                            )
                            for r in good
                        ]
                    )
                )
                if side == "hf_default" and entry.get("hf_default_rows"):
                    row["note"] = CAPPED.format(n=entry["hf_default_rows"])
                mine.append(row)
            else:
                row["error"] = rounds[-1]["error"] if rounds else "not run"
            rows.append(row)
        reference = _reference(workload, mine)
        if reference and workload in TRAINING:
            report.setdefault("references", {})[workload] = reference["side"]
        bertkit = next((r for r in mine if r["side"] == "bertkit"), {})
        for r in mine:
            r["ratio_vs_hf_best_bf16"] = _ratio(r["examples_per_s"], reference.get("examples_per_s"))
            r["ratio_vs_bertkit"] = _ratio(bertkit.get("examples_per_s"), r["examples_per_s"])
    startup = report["workloads"].get("startup", {}).get("runs", {})
    base = startup.get("bertkit --help", {}).get("best_seconds")
    for side, run in startup.items():
        rows.append(
            {
                "workload": "startup",
                "side": side,
                **(
                    {"error": run["error"]}
                    if "error" in run
                    else {
                        "seconds": run["best_seconds"],
                        "ratio_vs_bertkit": _ratio(run["best_seconds"], base),
                        "note": f"best of {len(run['all_seconds'])}",
                    }
                ),
            }
        )
    return rows


def _reference(workload: str, rows: list[dict]) -> dict:
    """The row every ratio divides by: for training the faster of the Trainer's best recipes that ran."""
    if workload not in TRAINING:
        return next((r for r in rows if r["side"] == REFERENCE[workload]), {})
    ran = [r for r in rows if r["side"] in REFERENCE_CHOICES and _ok(r.get("examples_per_s"))]
    return max(ran, key=lambda r: r["examples_per_s"], default={})


def headline(rows: list[dict]) -> dict:
    """bertkit's examples/s divided by the HF reference's, per workload: the issue's headline."""
    return {r["workload"]: r.get("ratio_vs_hf_best_bf16") for r in rows if r["side"] == "bertkit"}


def _f(value, fmt: str, suffix: str = "") -> str:
    return format(value, fmt) + suffix if _ok(value) else "–"


def _row_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['workload']} | {r['side']} | error | | | | | | | | | {str(r['error'])[:150]} |"
    if r["workload"] == "startup":
        return (
            f"| startup | `{r['side']}` | | | | | | | {_f(r.get('ratio_vs_bertkit'), '.2f', 'x')} | | "
            f"{_f(r.get('seconds'), '.2f')} | {r.get('note', '')} |"
        )
    if r["workload"] == "qa":
        metric = f"F1 {_f(r.get('metric'), '.1f')} / EM {_f(r.get('exact_match'), '.1f')}"
    else:
        metric = f"{METRIC_NAME[r['workload']]} {_f(r.get('metric'), '.3f')}"
    if r["workload"] in TRAINING:
        time_text = f"train {_f(r['train_seconds'], '.1f')} + eval {_f(r['eval_seconds'], '.1f')}"
        padding = _f(100 * r["padding_share"] if _ok(r.get("padding_share")) else None, ".1f", "%")
    else:
        time_text, padding = f"{_f(r['seconds'], '.2f')} + load {_f(r['load_seconds'], '.2f')}", "–"
    mfu = r.get("mfu")
    return (
        f"| {r['workload']} | {r['side']} | {_f(r['examples_per_s'], ',.1f')} | {_f(r.get('tokens_per_s'), ',.0f')} | "
        f"{padding} | {_f(r.get('peak_rss_mb'), ',.0f', ' MB')} | {metric}{' †' if r.get('note') else ''} | "
        f"**{_f(r.get('ratio_vs_hf_best_bf16'), '.2f', 'x')}** | {_f(r.get('ratio_vs_bertkit'), '.2f', 'x')} | "
        f"{_f(100 * mfu if _ok(mfu) else None, '.1f', '%')}{' (' + r['mfu_peak'] + ')' if _ok(mfu) else ''} | "
        f"{time_text} | {r.get('note', '')} |"
    )


def cpu_flags(machine: dict) -> str:
    flags = machine.get("cpu_flags")
    if flags is None:
        return "flags not recorded"
    caps = machine.get("isa_caps") or {}
    if caps:  # the kernels were kept below the CPU's flags: say so before the flags, and what was not capped
        left = uncapped_libraries(caps)
        uncapped = f" ({', '.join(left)} unset: that library kept the CPU's best)" if left else ""
        return "capped: " + ", ".join(f"{k}={v}" for k, v in caps.items()) + uncapped + "; CPU flags " + " ".join(flags)
    return " ".join(flags) + ("" if "amx_bf16" in flags else "; no AMX")


def machine_load_line(report: dict) -> str:
    """What else ran: other processes' cores and steal (benchmarks.machine_load), the load averages."""
    loads = f"load average start / end {report['load_average_start']} / {report['load_average_end']}"
    if report.get("others_cores") is None:  # no /proc/stat, or a report from before the measure
        return loads + ("  **(busy machine: timings not reliable)**" if report.get("busy") else "")
    line = (
        f"other processes used {report['others_cores']:.2f} cores on average and steal "
        f"{report['steal_cores']:.2f} ({loads})"
    )
    return line + ("  **(busy machine: timings not reliable)**" if report["busy"] else ", a quiet machine")


def _references(report: dict) -> str:
    chosen = report.get("references") or {}
    return ", ".join(f"{w} {side}" for w, side in chosen.items()) or "–"


def render_markdown(report: dict) -> str:
    m, peaks, hp = report["machine"], report["matmul_peak_gflops"], report["hyperparameters"]
    head = ", ".join(f"{w} **{_f(v, '.2f', 'x')}**" for w, v in report["headline"].items())
    lines = (
        [
            f"# bertkit benchmarks{' (quick: checks the suite works; not the comparison)' if report['quick'] else ''}",
            "",
            f"- {m['date']}; {m['cpu_model']} ({cpu_flags(m)}), {m['usable_cores']} cores, torch threads "
            f"{m['torch_threads']}; torch {m['torch']}, transformers {m['transformers']}; "
            f"bertkit commit {m.get('git_commit', '?')[:10]} ({m.get('git_uncommitted_files', '?')} uncommitted files)",
            f"- matmul peak (higher of start / end), GFLOP/s: fp32 **{_f(peaks.get('fp32'), '.1f')}**, "
            f"bf16 **{_f(peaks.get('bf16'), '.1f')}**; {machine_load_line(report)}",
            f"- recipe, every side: {hp['epochs']:g} epoch, batch {hp['batch_size']}, lr {hp['lr']:g}, warmup "
            f"{hp['warmup']}, weight decay {hp['weight_decay']}, seed {hp['seed']}; "
            f"{report['repeats']} round(s), medians; suite {report['wall_seconds']:.0f} s",
            f"- **headline, bertkit ex/s ÷ HF best ex/s** (the Trainer's best recipe in its faster precision here: "
            f"{_references(report)}): {head or '–'}",
            "",
            "| workload | side | ex/s | tokens/s | padding | peak RSS | metric | ratio vs hf_best_bf16 "
            "| ratio vs bertkit | MFU | time (s) | note |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        + [_row_line(r) for r in report["rows"]]
        + [
            "",
            "ratio vs hf_best_bf16 = this row's ex/s ÷ the HF reference's (the Trainer's best recipe in the faster "
            "of bf16 and fp32 where both ran, else in bf16; for predict / eval the bf16 pipeline at batch 64), "
            "so the bertkit row is the headline. ratio vs bertkit = "
            "bertkit's ex/s ÷ this row's (start-up: this row's seconds ÷ bertkit's): above 1, bertkit is faster. "
            "MFU divides by the matmul peak of the row's precision (in brackets). † throughput only: the metric "
            "of a run on the first rows is not comparable.",
        ]
    )
    checks = {w: e["data_check"] for w, e in report["workloads"].items() if isinstance(e, dict) and "data_check" in e}
    if checks:
        lines += [
            "",
            "Identical data: "
            + "; ".join(
                f"{w} train {c['hf_train']}={c['bertkit_train']}, eval {c['hf_eval']}={c['bertkit_eval']}"
                for w, c in checks.items()
            ),
        ]
    if report["errors"]:
        lines += ["", "## Errors", ""] + [f"- {e}" for e in report["errors"]]
    return "\n".join(lines) + "\n"


def _clean(obj):
    """JSON-safe: NaN / inf -> null, numpy scalars -> Python, anything else unknown -> str."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return _clean(obj.item()) if hasattr(obj, "item") else str(obj)


def write(report: dict, out_dir: Path, name: str) -> Path:
    report["rows"] = build_rows(report)
    report["headline"] = headline(report["rows"])
    report = _clean(report)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = out_dir / f"{name}.md"
    markdown.write_text(render_markdown(report))
    return markdown
