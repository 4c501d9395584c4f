"""One multi-head model (`bertkit finetune multi`) against one single-task model per head: a reduced
GLUE-style mix on MiniLM (SST-2 cls, MRPC and RTE pair, STS-B pair regression, CoNLL-2003 ner), each head
and each single-task model trained on the same first ``--rows`` training rows, for the same epochs,
batch size, learning rate and seed, and scored on the same first ``--eval-rows`` dev rows.

Then serving cost: the resident memory (VmRSS) of one process holding the multi-head directory
against the sum over the processes holding the single-task directories, each after answering the
same ``--predict-rows`` rows for every head, and the seconds those answers took.

Each training runs in its own process; a seed's five runs finish before the next seed starts, and
``--budget`` (seconds) stops before a seed that would not fit, so the results hold whole seeds.
Results go to benchmarks/results/multihead.json and multihead.md:

    flock /tmp/bertkit-heavy.lock python benchmarks/multihead.py --seeds 42,43 --rows 600 --budget 1200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
# head name -> (multi kind, single-task command args, the metrics shown: the first is the main one)
HEADS = {
    "sst2": ("cls", ["cls", "--data", "sst2"], ("accuracy",)),
    "mrpc": ("pair", ["pair", "--data", "mrpc"], ("accuracy", "f1")),
    "rte": ("pair", ["pair", "--data", "rte"], ("accuracy",)),
    "stsb": ("pair-regression", ["pair", "--data", "stsb", "--problem-type", "regression"], ("pearson", "spearman")),
    "conll": ("ner", ["ner", "--data", "conll2003"], ("f1",)),
}
DATA = {"sst2": "sst2", "mrpc": "mrpc", "rte": "rte", "stsb": "stsb", "conll": "conll2003"}


def common(args, seed: int, out: Path) -> list[str]:
    return [
        "--model",
        "minilm",
        "--max-train-samples",
        str(args.rows),
        "--max-eval-samples",
        str(args.eval_rows),
        "--epochs",
        str(args.epochs),
        "--batch-size",
        "16",
        "--lr",
        str(args.lr),
        "--max-length",
        "128",
        "--seed",
        str(seed),
        "--threads",
        str(args.threads),
        "--output",
        str(out),
        "--overwrite",
    ]


def bertkit(arguments: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bertkit", *arguments], cwd=REPO, env=env, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"bertkit {' '.join(arguments)} failed:\n{done.stderr.decode(errors='replace')[-3000:]}")
    return time.perf_counter() - started


def run_seed(seed: int, args, work: Path) -> dict:
    multi = work / f"multi-{seed}"
    tasks = [a for name, (kind, _, _) in HEADS.items() for a in ("--task", f"{name}:{kind}:{DATA[name]}")]
    seconds = {"multi": bertkit(["finetune", "multi", *tasks, *common(args, seed, multi)])}
    meta = json.loads((multi / "bertkit.json").read_text())
    found = {"seed": seed, "multi": {h["name"]: h["metrics"] for h in meta["heads"]}, "single": {}}
    for name, (_, single_args, _) in HEADS.items():
        out = work / f"{name}-{seed}"
        seconds[name] = bertkit(["finetune", *single_args, *common(args, seed, out)])
        meta = json.loads((out / "bertkit.json").read_text())
        found["single"][name] = meta["metrics"]
        found.setdefault("baselines", {})[name] = {  # what each metric must beat (the trivial model's)
            b["name"]: b["metrics"] for b in meta.get("baselines") or []
        }
    found["train_seconds"] = seconds
    return found


PROBE = r"""
import json, sys, time
from bertkit.data.registry import Source
from bertkit.tasks.base import PREDICT
kind, model_dir, heads, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
records = {
    "single": [{"text": f"the film was {w} and the acting was fine ."} for w in ["good", "bad"] * (rows // 2)],
    "pair": [{"text": "a good film .", "text_pair": f"the film was {w} ."} for w in ["good", "bad"] * (rows // 2)],
}
started = time.perf_counter()
if kind.startswith("multi"):
    from bertkit.api.multihead_inference import MultiHeadPredictor
    predictor = MultiHeadPredictor(model_dir, backend="onnx" if kind == "multi-onnx" else "torch").load()
    loaded = time.perf_counter()
    def answer(rows):
        examples = {n: predictor.adapters[n].from_records(rows[s], Source("probe"), PREDICT) for n, s in heads.items()}
        predictor.predict_many(examples)
else:
    from bertkit.api.prediction import Predictor
    predictor = Predictor(model_dir, quiet=True).load()
    loaded = time.perf_counter()
    (shape,) = heads.values()
    def answer(rows):
        predictor.predict(predictor.examples(rows[shape]))
answer({shape: found[:8] for shape, found in records.items()})  # the first call's kernel warm-up: not timed
warmed = time.perf_counter()
timings = []
for _ in range(3):  # the best of three: a shared machine's other jobs only ever add time
    begun = time.perf_counter()
    answer(records)
    timings.append(time.perf_counter() - begun)
done = warmed + min(timings)
rss = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
print(json.dumps({"rss_mib": rss / 1024, "load_seconds": loaded - started, "warm_up_seconds": warmed - loaded,
                  "predict_seconds": done - warmed}))
"""
SHAPES = {"sst2": "single", "mrpc": "pair", "rte": "pair", "stsb": "pair", "conll": "single"}


def probe(kind: str, model_dir: Path, heads: dict, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(args.threads)}
    command = [sys.executable, "-c", PROBE, kind, str(model_dir), json.dumps(heads), str(args.predict_rows)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"probe {model_dir} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def serving(seed: int, args, work: Path) -> dict:
    multi = probe("multi", work / f"multi-{seed}", SHAPES, args)
    bertkit(["export", "onnx", str(work / f"multi-{seed}"), "--samples", "64"])  # one graph, every head
    multi_onnx = probe("multi-onnx", work / f"multi-{seed}", SHAPES, args)
    singles = {name: probe("single", work / f"{name}-{seed}", {name: SHAPES[name]}, args) for name in HEADS}
    return {
        **disk(seed, work),
        "multi": multi,
        "multi_onnx": multi_onnx,
        "single": singles,
        "single_rss_mib_total": sum(s["rss_mib"] for s in singles.values()),
        "single_predict_seconds_total": sum(s["predict_seconds"] for s in singles.values()),
    }


def disk(seed: int, work: Path) -> dict:
    """The model directories' size on disk (MiB): the multi-head one, the single-task ones summed."""

    def size(directory: Path) -> float:
        return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 2**20

    return {
        "multi_disk_mib": size(work / f"multi-{seed}"),
        "single_disk_mib_total": sum(size(work / f"{name}-{seed}") for name in HEADS),
    }


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def write(results: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "multihead.json").write_text(json.dumps(results, indent=2) + "\n")
    runs = results["runs"]
    lines = [
        "# Multi-head vs single-task models (MiniLM)",
        "",
        f"Command: `{results['command']}`"
        + "".join(f"; more seeds: `{command}`" for command in results.get("appended", [])),
        "",
        f"Machine: {results['machine']['cpu']} ({results['machine']['cores']} cores), flags: "
        f"{', '.join(results['machine']['flags'])}; threads per run: {results['args']['threads']}.",
        "",
        f"Each head and each single-task model: the first {results['args']['rows']} training rows, "
        f"{results['args']['epochs']} epoch(s), batch 16, lr {results['args']['lr']}, max length 128; "
        f"dev metrics on the first {results['args']['eval_rows']} dev rows; seeds {[r['seed'] for r in runs]} "
        "(mean ± sample std over seeds).",
        "",
        "| head | metric | multi-head | single-task | difference | trivial baseline |",
        "|---|---|---|---|---|---|",
    ]
    for name, (_, _, metrics) in HEADS.items():
        for metric in metrics:
            multi = [r["multi"][name][metric] for r in runs]
            single = [r["single"][name][metric] for r in runs]
            gap = statistics.mean(multi) - statistics.mean(single)
            floor = _baseline(runs[-1], name, metric)
            lines.append(f"| {name} | {metric} | {spread(multi)} | {spread(single)} | {gap:+.4f} | {floor} |")
    seconds = {k: statistics.mean(r["train_seconds"][k] for r in runs) for k in runs[0]["train_seconds"]}
    single_total = sum(v for k, v in seconds.items() if k != "multi")
    lines += [
        "",
        f"Training wall time (mean over seeds, process start to exit): multi-head {seconds['multi']:.0f} s, "
        f"the {len(HEADS)} single-task runs {single_total:.0f} s together.",
    ]
    serve = results.get("serving")
    if serve:
        lines += [
            "",
            f"Serving (seed {serve['seed']}'s directories, {results['args']['predict_rows']} rows answered by every "
            "head after 8 warm-up rows, the best of 3 times, one process per directory, VmRSS after answering"
            + (f"; measured again by `{serve['command']}`" if serve.get("command") else "")
            + "):",
            "",
            "| setup | resident memory (MiB) | predict seconds (all heads) |",
            "|---|---|---|",
            f"| one multi-head process | {serve['multi']['rss_mib']:.0f} | {serve['multi']['predict_seconds']:.2f} |",
            *(
                [
                    f"| one multi-head process, its ONNX graph (`--backend onnx`) | "
                    f"{serve['multi_onnx']['rss_mib']:.0f} | {serve['multi_onnx']['predict_seconds']:.2f} |"
                ]
                if "multi_onnx" in serve
                else []
            ),
            f"| {len(HEADS)} single-task processes (sum) | {serve['single_rss_mib_total']:.0f} | "
            f"{serve['single_predict_seconds_total']:.2f} |",
        ]
        if "multi_disk_mib" in serve:
            lines += [
                "",
                f"On disk: the multi-head directory {serve['multi_disk_mib']:.0f} MiB, the {len(HEADS)} single-task "
                f"directories {serve['single_disk_mib_total']:.0f} MiB together.",
            ]
    (RESULTS / "multihead.md").write_text("\n".join(lines) + "\n")


def _baseline(run: dict, name: str, metric: str) -> str:
    """The trivial model's value of ``metric`` on that head's dev rows (majority class, mean score)."""
    for baseline, metrics in (run.get("baselines") or {}).get(name, {}).items():
        if metric in metrics:
            return f"{metrics[metric]:.4f} ({baseline})"
    return "-"


RECIPE = ("rows", "eval_rows", "epochs", "lr", "threads")  # what seeds of one comparison share


def _appended(fresh: dict, args) -> dict:
    saved = json.loads((RESULTS / "multihead.json").read_text())
    differs = [key for key in RECIPE if saved["args"].get(key) != getattr(args, key)]
    if differs:
        raise SystemExit(f"--append: the saved runs used other {', '.join(differs)}; rerun them all instead")
    done = {run["seed"] for run in saved["runs"]}
    args.seeds = ",".join(s for s in args.seeds.split(",") if int(s) not in done)
    saved["appended"] = saved.get("appended", []) + [fresh["command"]]
    return saved


def machine() -> dict:
    flags = []
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = [f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "amx", "fma", "sse4"))]
            break
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    return {"cpu": model, "cores": os.cpu_count(), "flags": flags}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="42,43")
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--eval-rows", type=int, default=500)
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--predict-rows", type=int, default=200)
    parser.add_argument("--budget", type=float, default=1200, help="seconds; a seed that would not fit is skipped")
    parser.add_argument("--work", default="/tmp/bertkit-multihead-bench")
    parser.add_argument(
        "--serving-only",
        action="store_true",
        help="measure serving again on the saved results' directories (this code's predict)",
    )
    parser.add_argument("--append", action="store_true", help="add --seeds to the saved results (the same recipe)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.serving_only:
        results = json.loads((RESULTS / "multihead.json").read_text())
        seed = results["runs"][0]["seed"]
        results["serving"] = {
            "seed": seed,
            "command": "python benchmarks/multihead.py " + " ".join(sys.argv[1:]),
            **serving(seed, args, work),
        }
        write(results)
        return
    results = {
        "command": "python benchmarks/multihead.py " + " ".join(sys.argv[1:]),
        "args": vars(args),
        "machine": machine(),
        "runs": [],
    }
    if args.append:  # more seeds of the same recipe: the saved runs kept, their serving numbers too
        results = _appended(results, args)
    started, per_seed = time.perf_counter(), 0.0
    for seed in [int(s) for s in args.seeds.split(",")]:
        if per_seed and time.perf_counter() - started + per_seed > args.budget:
            print(f"budget: seed {seed} skipped", file=sys.stderr)
            break
        begun = time.perf_counter()
        results["runs"].append(run_seed(seed, args, work))
        per_seed = time.perf_counter() - begun
        write(results)
        print(f"seed {seed} done in {per_seed:.0f}s", file=sys.stderr)
    if not args.append:
        seed = results["runs"][0]["seed"]
        results["serving"] = {"seed": seed, **serving(seed, args, work)}
    write(results)


if __name__ == "__main__":
    main()
