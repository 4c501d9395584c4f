"""Run the bertkit-vs-HuggingFace benchmark suite and write the JSON + Markdown report.

    python -m benchmarks run [--quick] [--only sst2,ner,qa,predict,startup,decode] [--default-rows N]

Every training / prediction run happens in a fresh spawned process (``run_isolated``), so each gets its
own peak RSS; within a workload the sides run one after the other (bertkit, HF default, HF best; with
``--repeats`` the order is reversed every other round), with the same data, model, hyperparameters and
seed.  See benchmarks/README.md for what is compared and how to read the ratios.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from benchmarks._hf_common import run_isolated

WORKLOADS = ("sst2", "ner", "qa", "predict", "startup", "decode")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parent.parent

# Full sizes (the owner's run on a quiet machine) and --quick sizes (a couple of minutes on 2 cores).
# None = the whole split.  default_rows / default_qa_rows cap the slow HF "default" recipes (pad to
# 128 / 384): their numbers on a capped run are throughput only.
FULL = dict(sst2_train=8000, sst2_eval=None, ner_train=4000, ner_eval=None, qa_train=2000, qa_eval=None,
            predict_n=872, default_rows=1000, default_qa_rows=200, capped_eval_rows=128, startup_repeats=5,
            matmul_seconds=3.0)
QUICK = dict(sst2_train=256, sst2_eval=128, ner_train=200, ner_eval=128, qa_train=64, qa_eval=32,
             predict_n=128, default_rows=64, default_qa_rows=16, capped_eval_rows=32, startup_repeats=3,
             matmul_seconds=1.5)
# The same recipe for every side: 1 epoch, batch 32, lr 5e-5, seed 42, warmup 0.1, weight decay 0.01.
HP = dict(epochs=1.0, lr=5e-5, batch_size=32, seed=42)
QA_MAX_LENGTH, QA_STRIDE, QA_MAX_ANSWER = 384, 128, 30
BK_EVAL_BATCH = 64  # bertkit's default eval batch; HF default = Trainer default (8); HF best = 64
CAPPED_NOTE = "throughput on first {n} rows; accuracy not comparable"

METRIC = {"sst2": ("accuracy", "eval_accuracy"), "ner": ("entity F1", "eval_f1"), "qa": ("F1 (EM in JSON)", "eval_f1")}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ helpers
def _call(fn: Callable, *args, **kwargs) -> tuple[dict, float]:
    """run_isolated(fn, ...) -> (result or {"error"}, wall seconds of the whole child incl. start-up)."""
    import resource

    load = load_average()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        result = run_isolated(fn, *args, **kwargs)
    except Exception as exc:  # keep going; the report shows the error
        cause = getattr(exc, "__cause__", None)
        result = {"error": f"{type(exc).__name__}: {exc}",
                  "traceback": str(cause) if cause is not None else traceback.format_exc()}
    wall = time.perf_counter() - started
    if isinstance(result, dict):
        result["process_wall_seconds"] = wall
        result["load_average_before"] = load
        # CPU seconds (user + sys, all threads) of the whole child: less sensitive to a busy machine than wall time
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result["process_cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result, wall


def _num(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _ok(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _ratio(a, b):
    a, b = _num(a), _num(b)
    if not (_ok(a) and _ok(b)) or b == 0:
        return None
    return a / b


def _clean(obj):
    """JSON-safe: NaN/inf -> None, numpy scalars -> python, tuples -> lists, unknown -> str."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return _clean(obj.item())
    except ImportError:
        pass
    return str(obj)


def machine_info() -> dict[str, Any]:
    import torch
    import transformers

    info: dict[str, Any] = {"date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                            "hostname": platform.node(), "platform": platform.platform(),
                            "python": platform.python_version(), "torch": torch.__version__,
                            "transformers": transformers.__version__, "torch_threads": torch.get_num_threads(),
                            "cpu_count": os.cpu_count()}
    try:
        info["usable_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["usable_cores"] = os.cpu_count()
    for pkg in ("accelerate", "datasets", "tokenizers", "numpy"):
        try:
            from importlib.metadata import version

            info[pkg] = version(pkg)
        except Exception:
            pass
    try:
        from importlib.metadata import version

        info["bertkit"] = version("bertkit")
    except Exception:
        info["bertkit"] = "unknown"
    model = flags = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model is None:
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and flags is None:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    if model is None:
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
            model = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), None)
        except Exception:
            pass
    info["cpu_model"] = model or platform.processor() or "unknown"
    if flags:
        info["cpu_simd"] = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    info["cuda_available"] = torch.cuda.is_available()
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                            text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=10).stdout.splitlines()
        info["git_dirty_files"] = len(dirty)
    except Exception:
        pass
    return info


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def model_info(model_path: str) -> dict[str, Any]:
    """Encoder (non-embedding) parameter count from the config: what 6 x N x tokens multiplies."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path)
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h  # attention, 2 LayerNorms, FFN
    return {"path": model_path, "model_type": config.model_type, "layers": layers, "hidden": h,
            "intermediate": i, "heads": config.num_attention_heads, "non_embedding_params": layers * per_layer}


# ------------------------------------------------------------------------------------------ FLOPs
def flop_fields(run: dict, model: dict, peak_gflops: float | None, attn_tokens_factor: float | None,
                epochs: float) -> dict[str, Any]:
    """Model FLOPs on REAL tokens: 6 x non-embedding params x real tokens + 12 x layers x hidden x sum(len^2).

    sum(len^2) is exact for bertkit (the probe sees every feature's length); for an HF side it is
    estimated as real_tokens x (sum len^2 / sum len) of bertkit's features for the same data.
    """
    real = _num(run.get("train_real_tokens"))
    seconds = _num(run.get("train_seconds"))
    if not (_ok(real) and _ok(seconds)) or seconds <= 0:
        return {}
    dense = 6.0 * model["non_embedding_params"] * real
    sq = run.get("train_feature_lengths_sq_sum")
    if sq is not None:
        attention, exact = 12.0 * model["layers"] * model["hidden"] * sq * epochs, True
    elif attn_tokens_factor:
        attention, exact = 12.0 * model["layers"] * model["hidden"] * real * attn_tokens_factor, False
    else:
        attention, exact = 0.0, False
    flops = dense + attention
    out = {"useful_train_flops": flops, "useful_train_gflops_per_s": flops / seconds / 1e9,
           "attention_term_exact": exact}
    if peak_gflops:
        out["flop_utilisation"] = flops / seconds / 1e9 / peak_gflops
    return out


# ------------------------------------------------------------------------------------------ data checks
def _fingerprint(items) -> str:
    import hashlib

    h = hashlib.sha1()
    for item in items:
        h.update(json.dumps(item, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def check_data(workload: str, hf_train: list, hf_eval: list, root: str, n_train: int | None,
               n_eval: int | None) -> dict[str, Any]:
    """Read the same slice through bertkit's own readers and assert it equals what the HF side gets."""
    from bertkit.data import registry
    from bertkit.tasks import get_task_class
    from bertkit.tasks.base import EVAL, TRAIN

    def first(xs, n):
        return xs[:n] if n else xs

    if workload == "sst2":
        task = get_task_class("cls")(128, {})
        bk_tr = first(task.read(registry.resolve("sst2", "train", root, "cls"), TRAIN), n_train)
        bk_ev = first(task.read(registry.resolve("sst2", "dev", root, "cls"), EVAL), n_eval)
        names = ["negative", "positive"]
        hf_key = [(r["sentence"], names[r["label"]]) for r in hf_train], [(r["sentence"], names[r["label"]]) for r in hf_eval]
        bk_key = [(e["text"], e["label"]) for e in bk_tr], [(e["text"], e["label"]) for e in bk_ev]
    elif workload == "ner":
        task = get_task_class("ner")(128, {})
        bk_tr = first(task.read(registry.resolve("conll2003", "train", root, "ner"), TRAIN), n_train)
        bk_ev = first(task.read(registry.resolve("conll2003", "dev", root, "ner"), EVAL), n_eval)
        hf_key = [(s["tokens"], s["tags"]) for s in hf_train], [(s["tokens"], s["tags"]) for s in hf_eval]
        bk_key = [(e["tokens"], e["tags"]) for e in bk_tr], [(e["tokens"], e["tags"]) for e in bk_ev]
    elif workload == "qa":
        from bertkit.data.registry import Source
        from benchmarks.bertkit_side import write_squad_split

        task = get_task_class("qa")(QA_MAX_LENGTH, {})
        with tempfile.TemporaryDirectory(prefix="bertkit-bench-check-") as tmp:
            tr_path, ev_path = write_squad_split(tmp, root)
            bk_tr = first(task.read(Source(tr_path, path=Path(tr_path)), TRAIN), n_train)
            bk_ev = first(task.read(Source(ev_path, path=Path(ev_path)), EVAL), n_eval)

        def key(ex, hf):
            answers = ex["answers"]["text"] if hf else [a["text"] for a in ex["answers"]]
            starts = ex["answers"]["answer_start"] if hf else [a["start"] for a in ex["answers"]]
            return (ex["id"], ex["question"], ex["context"], list(answers), list(starts))

        hf_key = [key(e, True) for e in hf_train], [key(e, True) for e in hf_eval]
        bk_key = [key(e, False) for e in bk_tr], [key(e, False) for e in bk_ev]
    else:
        raise ValueError(workload)
    result = {"hf_train": len(hf_key[0]), "bertkit_train": len(bk_key[0]), "hf_eval": len(hf_key[1]),
              "bertkit_eval": len(bk_key[1]), "train_fingerprint": _fingerprint(hf_key[0]),
              "eval_fingerprint": _fingerprint(hf_key[1])}
    result["identical"] = hf_key == bk_key
    if not result["identical"]:
        raise AssertionError(f"{workload}: bertkit and the HF side would not see identical data: {result}")
    return result


# ------------------------------------------------------------------------------------------ runner
class Suite:
    def __init__(self, args, sizes: dict):
        self.args = args
        self.sizes = sizes
        self.repeats = max(1, args.repeats)
        self.work = tempfile.mkdtemp(prefix="bertkit-bench-")
        self.results: dict[str, Any] = {}
        self.errors: list[str] = []
        self.sst2_model_dir: str | None = None
        self.qa_dump: str | None = None
        self.attn_factor: dict[str, float] = {}

    # each side: name -> (callable, args, kwargs); run them alternating, `repeats` rounds
    def alternate(self, workload: str, sides: list[tuple[str, Callable, tuple, dict]]) -> dict[str, dict]:
        all_runs: dict[str, list[dict]] = {name: [] for name, *_ in sides}
        for rep in range(self.repeats):
            order = sides if rep % 2 == 0 else list(reversed(sides))
            for name, fn, a, k in order:
                log(f"{workload}: {name} (round {rep + 1}/{self.repeats}) ...")
                res, wall = _call(fn, *a, **k)
                if "error" in res:
                    self.errors.append(f"{workload}/{name}: {res['error']}")
                    log(f"{workload}: {name} FAILED: {res['error']}")
                else:
                    log(f"{workload}: {name} done in {wall:.1f}s")
                res["round"] = rep + 1
                all_runs[name].append(res)
        chosen = {}
        for name, runs in all_runs.items():
            good = [r for r in runs if "error" not in r]
            if not good:
                chosen[name] = runs[-1]
                continue
            key = "train_seconds" if "train_seconds" in good[0] else "predict_seconds"
            good.sort(key=lambda r: _num(r.get(key)))
            chosen[name] = dict(good[len(good) // 2])  # the median run (by time)
            if len(runs) > 1:
                chosen[name]["all_rounds_" + key] = [r.get(key) for r in runs]
        return chosen

    # --- training workloads ----------------------------------------------------------------------
    def training(self, workload: str) -> None:
        from benchmarks import baselines, bertkit_side
        from benchmarks.workloads import data_dir, default_model_path, load_conll, load_squad, load_sst2

        s = self.sizes
        root = str(data_dir())
        model = default_model_path()
        if workload == "sst2":
            n_train, n_eval, cap = s["sst2_train"], s["sst2_eval"], s["default_rows"]
            train, evals = load_sst2(n_train, n_eval)
            bk_fn, hf_fn = bertkit_side.bk_sst2, baselines.hf_sst2
        elif workload == "ner":
            n_train, n_eval, cap = s["ner_train"], s["ner_eval"], None  # run_ner default pads dynamically
            train, evals = load_conll(n_train, n_eval)
            bk_fn, hf_fn = bertkit_side.bk_ner, baselines.hf_ner
        else:
            n_train, n_eval = s["qa_train"], s["qa_eval"]
            # --default-rows caps QA too; default_qa_rows (smaller: windows of 384) is the QA ceiling
            caps = [c for c in (s["default_rows"], s["default_qa_rows"]) if c is not None]
            cap = min(caps) if caps else None
            train, evals = load_squad(n_train, n_eval)
            bk_fn, hf_fn = bertkit_side.bk_qa, baselines.hf_qa
        entry: dict[str, Any] = {"n_train": len(train), "n_eval": len(evals), "hyperparameters": dict(HP)}
        self.results[workload] = entry
        try:
            entry["data_check"] = check_data(workload, train, evals, root, n_train, n_eval)
        except Exception as exc:
            entry["error"] = f"data check failed: {exc}"
            self.errors.append(f"{workload}: {entry['error']}")
            log(entry["error"])
            return

        bk_kwargs: dict[str, Any] = dict(HP, root=root, expected=(len(train), len(evals)),
                                         eval_batch_size=BK_EVAL_BATCH)
        hf_kwargs: dict[str, Any] = dict(HP)
        if workload == "sst2":
            self.sst2_model_dir = os.path.join(self.work, "sst2-bertkit-model")
            bk_kwargs["save_dir"] = self.sst2_model_dir
        if workload == "qa":
            bk_kwargs.update(max_length=QA_MAX_LENGTH, doc_stride=QA_STRIDE, max_answer_length=QA_MAX_ANSWER)
            hf_kwargs.update(max_seq_length=QA_MAX_LENGTH, doc_stride=QA_STRIDE, max_answer_length=QA_MAX_ANSWER)
            self.qa_dump = os.path.join(self.work, "qa-eval-logits.pkl")
            bk_kwargs["dump_path"] = self.qa_dump

        sides = [("bertkit", bk_fn, (len(train), n_eval), bk_kwargs)]
        capped = cap is not None and 0 < cap < len(train)
        if cap is None or cap != 0:
            d_train = train[:cap] if capped else train
            d_eval = evals[: s["capped_eval_rows"]] if capped else evals
            sides.append(("hf_default", hf_fn, (d_train, d_eval, model), dict(hf_kwargs, best=False, eval_batch_size=8)))
        sides.append(("hf_best", hf_fn, (train, evals, model), dict(hf_kwargs, best=True, eval_batch_size=64)))
        # the headline: the Trainer's best options plus its bf16 mixed precision, as bertkit's auto picks bf16
        sides.append(("hf_best_bf16", hf_fn, (train, evals, model),
                      dict(hf_kwargs, best=True, eval_batch_size=64, bf16=True)))
        runs = self.alternate(workload, sides)
        entry["runs"] = runs
        if capped:
            entry["hf_default_capped_rows"] = cap
            entry["hf_default_capped_eval_rows"] = len(evals[: s["capped_eval_rows"]])
            runs["hf_default"]["note"] = CAPPED_NOTE.format(n=cap)
            runs["hf_default"]["metric_comparable"] = False
        bk = runs["bertkit"]
        if bk.get("train_feature_lengths_sum"):
            self.attn_factor[workload] = bk["train_feature_lengths_sq_sum"] / bk["train_feature_lengths_sum"]

    # --- prediction ---------------------------------------------------------------------------------
    def predict(self) -> None:
        from benchmarks import baselines, bertkit_side
        from benchmarks.workloads import data_dir, load_sst2

        s = self.sizes
        entry: dict[str, Any] = {}
        self.results["predict"] = entry
        if not self.sst2_model_dir or not os.path.isdir(self.sst2_model_dir):
            # --only predict: fine-tune a bertkit SST-2 model first (not part of the comparison)
            self.sst2_model_dir = os.path.join(self.work, "sst2-bertkit-model")
            log("predict: fine-tuning a bertkit SST-2 model to predict with ...")
            res, _ = _call(bertkit_side.bk_sst2, s["sst2_train"], 64, save_dir=self.sst2_model_dir,
                           root=str(data_dir()), **HP)
            entry["model_source"] = {"trained_for_predict": True, "n_train": s["sst2_train"], "error": res.get("error")}
            if "error" in res:
                entry["error"] = "could not train the model to predict with: " + res["error"]
                self.errors.append("predict: " + entry["error"])
                return
        else:
            entry["model_source"] = {"trained_for_predict": False, "from": "the bertkit SST-2 run"}
        _, dev = load_sst2(0, s["predict_n"])
        sentences, labels = [r["sentence"] for r in dev], [r["label"] for r in dev]
        entry["n_sentences"] = len(sentences)
        entry["model_dir"] = "<the bertkit SST-2 model, deleted after the run>"
        sides = [
            ("bertkit_bs64", bertkit_side.bk_predict, (self.sst2_model_dir, sentences, 64), {"labels": labels}),
            ("pipeline_bs_default", baselines.hf_pipeline_predict, (sentences, self.sst2_model_dir, None),
             {"labels": labels}),
            ("pipeline_bs64", baselines.hf_pipeline_predict, (sentences, self.sst2_model_dir, 64), {"labels": labels}),
        ]
        entry["runs"] = self.alternate("predict", sides)

    # --- QA decoding ----------------------------------------------------------------------------------
    def decode(self) -> None:
        from benchmarks import bertkit_side
        from benchmarks.workloads import data_dir

        entry: dict[str, Any] = {}
        self.results["decode"] = entry
        if not self.qa_dump or not os.path.isfile(self.qa_dump):
            s = self.sizes
            self.qa_dump = os.path.join(self.work, "qa-eval-logits.pkl")
            log("decode: fine-tuning a bertkit QA model for the logits ...")
            res, _ = _call(bertkit_side.bk_qa, s["qa_train"], s["qa_eval"], root=str(data_dir()),
                           max_length=QA_MAX_LENGTH, doc_stride=QA_STRIDE, max_answer_length=QA_MAX_ANSWER,
                           dump_path=self.qa_dump, eval_batch_size=BK_EVAL_BATCH, **HP)
            entry["logits_source"] = {"trained_for_decode": True, "qa_train": s["qa_train"], "qa_eval": s["qa_eval"],
                                      "bertkit_f1": res.get("eval_f1"), "error": res.get("error")}
            if "error" in res:
                entry["error"] = "could not produce QA logits: " + res["error"]
                self.errors.append("decode: " + entry["error"])
                return
        else:
            entry["logits_source"] = {"trained_for_decode": False, "from": "the bertkit QA run's eval features"}
        log("decode: bertkit exact decoder vs the top-20 x top-20 loop ...")
        res, _ = _call(bertkit_side.decode_compare, self.qa_dump, 20)
        if "error" in res:
            entry["error"] = res["error"]
            self.errors.append("decode: " + res["error"])
        entry["result"] = res

    # --- start-up -------------------------------------------------------------------------------------
    def startup(self) -> None:
        n = self.sizes["startup_repeats"]
        bindir = Path(sys.executable).parent
        bertkit_bin = bindir / "bertkit"
        commands = [
            ("bertkit --help", [str(bertkit_bin), "--help"], n),
            ("python -c pass", [sys.executable, "-c", "pass"], max(2, n // 2)),
            ("python -c 'import torch, transformers'", [sys.executable, "-c", "import torch, transformers"],
             max(2, n // 2)),
        ]
        entry: dict[str, Any] = {"repeats": n, "runs": {}}
        self.results["startup"] = entry
        for name, cmd, reps in commands:
            if not Path(cmd[0]).exists():
                entry["runs"][name] = {"error": f"{cmd[0]} not found"}
                self.errors.append(f"startup: {cmd[0]} not found")
                continue
            times = []
            log(f"startup: {name} x{reps} ...")
            for _ in range(reps):
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.work)
                times.append(time.perf_counter() - t0)
                if proc.returncode != 0:
                    entry["runs"][name] = {"error": f"exit {proc.returncode}: {proc.stderr.decode()[-500:]}"}
                    self.errors.append(f"startup: {name} failed")
                    break
            else:
                entry["runs"][name] = {"best_seconds": min(times), "median_seconds": statistics.median(times),
                                       "all_seconds": times, "command": cmd}

    def cleanup(self) -> None:
        if self.args.keep:
            log(f"kept work dir {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


# ------------------------------------------------------------------------------------------ report rows
def build_rows(results: dict, model: dict, peak: float | None) -> list[dict]:
    rows: list[dict] = []
    for workload in ("sst2", "ner", "qa"):
        entry = results.get(workload)
        if not entry or "runs" not in entry:
            if entry and "error" in entry:
                rows.append({"workload": workload, "side": "-", "error": entry["error"]})
            continue
        runs = entry["runs"]
        metric_name, metric_key = METRIC[workload]
        bk = runs.get("bertkit", {})
        factor = (bk.get("train_feature_lengths_sq_sum") / bk["train_feature_lengths_sum"]
                  if bk.get("train_feature_lengths_sum") else None)
        for side, run in runs.items():
            row: dict[str, Any] = {"workload": workload, "side": side, "kind": "train"}
            if "error" in run:
                row["error"] = run["error"]
                rows.append(row)
                continue
            row.update({
                "examples_per_s": run.get("train_examples_per_s"),
                "tokens_per_s": run.get("train_tokens_per_s"),
                "padding_share": run.get("train_padding_share"),
                "peak_rss_mb": run.get("peak_rss_mb"),
                "metric_name": metric_name,
                "metric": run.get(metric_key),
                "metric_comparable": run.get("metric_comparable", True),
                "train_seconds": run.get("train_seconds"),
                "eval_seconds": run.get("eval_seconds"),
                "wall_seconds": run.get("process_wall_seconds"),
                "n_train": run.get("n_train"),
                "note": run.get("note"),
            })
            if workload == "qa":
                row["exact_match"] = run.get("eval_exact_match")
            row.update(flop_fields(run, model, peak, factor, HP["epochs"]))
            rows.append(row)
        _add_ratios(rows, workload, "examples_per_s")
    entry = results.get("predict")
    if entry and "runs" in entry:
        for side, run in entry["runs"].items():
            row = {"workload": "predict", "side": side, "kind": "predict"}
            if "error" in run:
                row["error"] = run["error"]
            else:
                row.update({"examples_per_s": run.get("sentences_per_s"), "peak_rss_mb": run.get("peak_rss_mb"),
                            "metric_name": "accuracy", "metric": run.get("accuracy"), "metric_comparable": True,
                            "predict_seconds": run.get("predict_seconds"), "load_seconds": run.get("load_seconds"),
                            "total_seconds": _num(run.get("predict_seconds")) + _num(run.get("load_seconds")),
                            "wall_seconds": run.get("process_wall_seconds"),
                            "note": None if run.get("load_separated", True) else "load not separable: total time"})
            rows.append(row)
        _add_ratios(rows, "predict", "examples_per_s")
        _add_time_ratio(rows, "predict", "bertkit_bs64", "total_seconds", "ratio_total_time")
    elif entry and "error" in entry:
        rows.append({"workload": "predict", "side": "-", "error": entry["error"]})
    entry = results.get("decode")
    if entry and isinstance(entry.get("result"), dict) and "error" not in entry["result"]:
        r = entry["result"]
        sides = [("bertkit_exact", "bertkit", "exact band search"),
                 ("loop_lists", "loop", "top-20 x top-20, python lists"),
                 ("loop_arrow", "loop_arrow", "top-20 x top-20 over Arrow rows, as run_qa")]
        for side, prefix, note in sides:
            if f"{prefix}_seconds" not in r:
                continue
            metric_prefix = "bertkit" if prefix == "bertkit" else "loop"
            rows.append({"workload": "decode", "side": side, "kind": "decode",
                         "examples_per_s": r.get(f"{prefix}_questions_per_s"),
                         "decode_seconds": r.get(f"{prefix}_seconds"), "peak_rss_mb": None,
                         "metric_name": "F1", "metric": r.get(f"{metric_prefix}_f1"),
                         "exact_match": r.get(f"{metric_prefix}_exact_match"), "metric_comparable": True,
                         "note": note})
        _add_ratios(rows, "decode", "examples_per_s")
    elif entry and ("error" in entry or "error" in (entry.get("result") or {})):
        rows.append({"workload": "decode", "side": "-", "error": entry.get("error") or entry["result"]["error"]})
    entry = results.get("startup")
    if entry and "runs" in entry:
        bk = entry["runs"].get("bertkit --help", {})
        for side, run in entry["runs"].items():
            row = {"workload": "startup", "side": side, "kind": "startup"}
            if "error" in run:
                row["error"] = run["error"]
            else:
                row.update({"seconds": run["best_seconds"], "median_seconds": run["median_seconds"],
                            "ratio_vs_bertkit": _ratio(run["best_seconds"], bk.get("best_seconds")),
                            "note": "best of %d" % len(run["all_seconds"])})
            rows.append(row)
    return rows


def _add_ratios(rows: list[dict], workload: str, key: str) -> None:
    """ratio_vs_bertkit = bertkit's speed / this side's speed (> 1: bertkit is faster), plus per-quantity ratios."""
    mine = [r for r in rows if r["workload"] == workload and "error" not in r]
    bk = next((r for r in mine if r["side"].startswith("bertkit")), None)
    if bk is None:
        return
    for r in mine:
        r["ratio_vs_bertkit"] = _ratio(bk.get(key), r.get(key))
        r["ratios"] = {
            "examples_per_s": r["ratio_vs_bertkit"],
            "tokens_per_s": _ratio(bk.get("tokens_per_s"), r.get("tokens_per_s")),
            "peak_rss": _ratio(bk.get("peak_rss_mb"), r.get("peak_rss_mb")),
            "metric_minus_bertkit": (_num(r.get("metric")) - _num(bk.get("metric"))
                                     if _ok(r.get("metric")) and _ok(bk.get("metric")) else None),
        }


def _add_time_ratio(rows, workload, bk_side, key, name) -> None:
    bk = next((r for r in rows if r["workload"] == workload and r["side"] == bk_side and "error" not in r), None)
    if bk is None:
        return
    for r in rows:
        if r["workload"] == workload and "error" not in r:
            r.setdefault("ratios", {})[name] = _ratio(r.get(key), bk.get(key))


# ------------------------------------------------------------------------------------------ Markdown
def _f(value, fmt: str, dash: str = "–") -> str:
    return format(value, fmt) if _ok(value) else dash


def render_markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"# bertkit benchmarks{' (quick)' if report['quick'] else ''}",
        "",
        f"- date: {m.get('date')}; CPU: {m.get('cpu_model')} ({m.get('usable_cores')} usable cores, torch threads "
        f"{m.get('torch_threads')}, SIMD {', '.join(m.get('cpu_simd', [])) or '?'}); RAM {m.get('mem_total_gb')} GB",
        f"- torch {m.get('torch')}, transformers {m.get('transformers')}, accelerate {m.get('accelerate')}, "
        f"python {m.get('python')}; bertkit commit {str(m.get('git_commit', ''))[:10]} "
        f"({m.get('git_dirty_files', '?')} uncommitted files)",
        f"- model: MiniLM-L6 ({report['model']['layers']} x {report['model']['hidden']}, "
        f"{report['model']['non_embedding_params'] / 1e6:.2f} M non-embedding params); measured fp32 matmul peak "
        f"**{_f(report.get('matmul_peak_gflops'), '.1f')} GFLOP/s** (higher of start / end: "
        f"{', '.join(_f(p, '.1f') for p in report.get('matmul_peak_gflops_start_end') or [])})",
        f"- load average at start / end: {report.get('load_average_start')} / {report.get('load_average_end')}"
        + ("  **(machine was busy: timings are not reliable)**" if report.get("busy") else ""),
        f"- recipe for every training side: {HP['epochs']:g} epoch, batch {HP['batch_size']}, lr {HP['lr']:g}, "
        f"seed {HP['seed']}, warmup 0.1, weight decay 0.01; sizes: {json.dumps(report['sizes'])}",
        f"- suite wall time: {report['wall_seconds']:.0f} s",
        "",
        "ratio vs bertkit = bertkit's speed / this row's speed (examples/s, sentences/s, questions/s; start-up: "
        "this row's seconds / bertkit's): **> 1 means bertkit is faster**.",
        "",
        "| workload | side | ex/s | tokens/s | padding | peak RSS | metric | ratio vs bertkit | MFU | time (s) | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["rows"]:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['side']} | error | | | | | | | | {r['error'][:120]} |")
            continue
        if r["kind"] == "startup":
            lines.append(f"| startup | `{r['side']}` | | | | | | {_f(r.get('ratio_vs_bertkit'), '.2f')}x | | "
                         f"{_f(r.get('seconds'), '.2f')} | {r.get('note') or ''} |")
            continue
        metric = r.get("metric")
        if r["workload"] == "qa" or r["kind"] == "decode":
            metric_text = (f"F1 {_f(metric, '.1f')} / EM {_f(r.get('exact_match'), '.1f')}" if _ok(metric) else "–")
        else:
            metric_text = f"{r.get('metric_name')} {_f(metric, '.3f')}" if _ok(metric) else "–"
        if not r.get("metric_comparable", True):
            metric_text += " †"
        if r["kind"] == "train":
            time_text = f"train {_f(r.get('train_seconds'), '.1f')} + eval {_f(r.get('eval_seconds'), '.1f')}"
        elif r["kind"] == "predict":
            time_text = (f"predict {_f(r.get('predict_seconds'), '.2f')} + load {_f(r.get('load_seconds'), '.2f')}"
                         f" (process {_f(r.get('wall_seconds'), '.1f')})")
        else:
            time_text = f"decode {_f(r.get('decode_seconds'), '.2f')}"
        lines.append(
            f"| {r['workload']} | {r['side']} | {_f(r.get('examples_per_s'), '.1f')} | "
            f"{_f(r.get('tokens_per_s'), ',.0f')} | "
            f"{_f(r.get('padding_share') * 100 if _ok(r.get('padding_share')) else None, '.1f')}"
            f"{'%' if _ok(r.get('padding_share')) else ''} | "
            f"{_f(r.get('peak_rss_mb'), ',.0f')}{' MB' if _ok(r.get('peak_rss_mb')) else ''} | {metric_text} | "
            f"{_f(r.get('ratio_vs_bertkit'), '.2f')}{'x' if _ok(r.get('ratio_vs_bertkit')) else ''} | "
            f"{_f(r.get('flop_utilisation') * 100 if _ok(r.get('flop_utilisation')) else None, '.1f')}"
            f"{'%' if _ok(r.get('flop_utilisation')) else ''} | {time_text} | {r.get('note') or ''} |")
    if report.get("mfu_above_one"):
        lines += ["", f"**MFU above 100% ({', '.join(report['mfu_above_one'])}): the matmul peak was measured while "
                      "the machine was busier than during training, so it is too low; MFU is not meaningful here.**"]
    lines += [
        "",
        "† " + "HF default rows marked † ran on the first N training rows only (and a small eval slice): their "
        "examples/s and tokens/s are comparable, their metric is not.",
        "",
        "Columns: ex/s = training examples (sentences / questions) per second of the training loop, or sentences/s "
        "of prediction (model load excluded), or questions/s of decoding; tokens/s and padding count REAL tokens "
        "(attention mask = 1) in the training batches; peak RSS is the whole child process's ru_maxrss; "
        "MFU = model FLOPs on real tokens (6 x non-embedding params x tokens + 12 x layers x hidden x sum len^2) / "
        "train seconds / the measured matmul peak (for HF sides the attention term is estimated from bertkit's "
        "length distribution).",
    ]
    dec = (report["workloads"].get("decode") or {}).get("result")
    if isinstance(dec, dict) and "error" not in dec:
        lines += [
            "",
            "## QA decoding on the same logits",
            "",
            f"{dec['n_questions']} questions / {dec['n_features']} windows. Answers differ on "
            f"**{dec['questions_answers_differ']}** questions; the loop's top-20 x top-20 shortlist contains the "
            f"exact best legal span for {dec['questions_loop_has_true_max']} questions and misses it for "
            f"{dec['questions_loop_misses_true_max']}. Where it contains it, answers are identical: "
            f"**{dec['identical_where_loop_has_true_max']}** ({dec['differ_where_loop_has_true_max']} differ, "
            f"{dec.get('differ_by_score_tie', 0)} more differ only by a score tie). "
            f"EM/F1 bertkit {dec['bertkit_exact_match']:.2f}/{dec['bertkit_f1']:.2f}, loop "
            f"{dec['loop_exact_match']:.2f}/{dec['loop_f1']:.2f} (same squad_em_f1 for both).",
        ]
    checks = {w: (report["workloads"].get(w) or {}).get("data_check") for w in ("sst2", "ner", "qa")}
    checks = {w: c for w, c in checks.items() if c}
    if checks:
        lines += ["", "## Data parity", ""]
        for w, c in checks.items():
            lines.append(f"- {w}: train {c['hf_train']} (HF) = {c['bertkit_train']} (bertkit reader), eval "
                         f"{c['hf_eval']} = {c['bertkit_eval']}, identical: {c['identical']} "
                         f"(train fp {c['train_fingerprint']}, eval fp {c['eval_fingerprint']})")
    if report.get("errors"):
        lines += ["", "## Errors", ""] + [f"- {e}" for e in report["errors"]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ main
def parse_sizes(args) -> dict:
    sizes = dict(QUICK if args.quick else FULL)
    if args.default_rows is not None:
        sizes["default_rows"] = args.default_rows
    for item in args.set or []:
        for pair in item.split(","):
            if not pair.strip():
                continue
            key, _, value = pair.partition("=")
            key = key.strip()
            if key not in sizes:
                raise SystemExit(f"--set: unknown size {key!r} (known: {', '.join(sizes)})")
            value = value.strip()
            sizes[key] = None if value.lower() in ("none", "all") else (float(value) if "." in value else int(value))
    return sizes


def run(args) -> int:
    from benchmarks.baselines import matmul_peak_gflops
    from benchmarks.workloads import data_dir, default_model_path

    only = [w.strip() for w in (args.only or ",".join(WORKLOADS)).split(",") if w.strip()]
    unknown = [w for w in only if w not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--only: unknown workload(s) {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    sizes = parse_sizes(args)
    name = args.name or ("quick" if args.quick else "latest")
    out_dir = Path(args.out_dir) if args.out_dir else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    report: dict[str, Any] = {"suite": "bertkit vs HuggingFace Trainer", "quick": bool(args.quick), "only": only,
                              "sizes": sizes, "repeats": args.repeats, "hyperparameters": dict(HP),
                              "load_average_start": load_average()}
    report["machine"] = machine_info()
    report["data_dir"] = str(data_dir())
    mpath = default_model_path()
    report["model"] = model_info(mpath)
    try:
        from bertkit.models import resolve_model

        report["model"]["same_checkpoint_both_sides"] = os.path.realpath(resolve_model("minilm")) == os.path.realpath(mpath)
    except Exception as exc:
        report["model"]["same_checkpoint_both_sides"] = f"unknown ({exc})"

    log(f"matmul peak ({sizes['matmul_seconds']} s) ...")
    peak_start, _ = _call(matmul_peak_gflops, seconds=float(sizes["matmul_seconds"]))

    suite = Suite(args, sizes)
    try:
        if "startup" in only:
            suite.startup()
        for workload in ("sst2", "ner", "qa"):
            if workload in only:
                suite.training(workload)
        if "predict" in only:
            suite.predict()
        if "decode" in only:
            suite.decode()
    finally:
        suite.cleanup()
    # measured again at the end: a peak taken while the machine is busy is too low; the higher one is used
    log(f"matmul peak again ({sizes['matmul_seconds']} s) ...")
    peak_end, _ = _call(matmul_peak_gflops, seconds=float(sizes["matmul_seconds"]))
    peaks = [p for p in (peak_start, peak_end) if isinstance(p, float)]
    report["matmul_peak_gflops_start_end"] = [p if isinstance(p, float) else None for p in (peak_start, peak_end)]
    report["matmul_peak_gflops"] = max(peaks) if peaks else None
    report["workloads"] = suite.results
    report["errors"] = suite.errors
    report["load_average_end"] = load_average()
    cores = report["machine"].get("usable_cores") or 1
    loads = [l[0] for l in (report["load_average_start"], report["load_average_end"]) if l]
    report["busy"] = bool(loads and max(loads) > 0.5 * cores + 0.5)
    report["wall_seconds"] = time.perf_counter() - started
    report["rows"] = build_rows(suite.results, report["model"], report["matmul_peak_gflops"])
    report["mfu_above_one"] = [f"{r['workload']}/{r['side']}" for r in report["rows"]
                               if _num(r.get("flop_utilisation")) > 1.0]
    report = _clean(report)

    json_path, md_path = out_dir / f"{name}.json", out_dir / f"{name}.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(render_markdown(report))
    log(f"wrote {json_path} and {md_path} ({report['wall_seconds']:.0f} s)")
    if not args.no_print:
        print(md_path.read_text())
    return 1 if suite.errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the suite and write benchmarks/results/{latest,quick}.{json,md}")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a couple of minutes); writes quick.json/quick.md")
    p.add_argument("--only", help=f"comma-separated subset of: {','.join(WORKLOADS)}")
    p.add_argument("--default-rows", type=int, default=None,
                   help="train the slow HF default recipes (SST-2 pad to 128, QA pad to 384) on the first N rows "
                        "only, for their throughput (default 1000; quick 64; QA at most default_qa_rows: 200, "
                        "quick 16; 0 skips them)")
    p.add_argument("--repeats", type=int, default=1, help="rounds per workload, order reversed every other round; "
                                                          "the median run is reported")
    p.add_argument("--set", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="override a size, e.g. --set qa_train=500,default_qa_rows=100 (see FULL in run.py)")
    p.add_argument("--out-dir", help="write results here instead of benchmarks/results/")
    p.add_argument("--name", help="result file stem (default latest, or quick with --quick)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work dir (models, QA logits)")
    p.add_argument("--no-print", action="store_true", help="do not print the Markdown table at the end")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
