"""Run the bertkit-vs-HuggingFace suite and write the report (see benchmarks/README.md).

    python -m benchmarks run [--quick] [--only sst2,ner,qa,predict,eval,startup] [--sides ...]
                             [--repeats R] [--once SIDES] [--default-rows N] [--set key=value,...]
                             [--out-dir D] [--name N]

Every (workload, side) run happens in its own freshly spawned process (own peak RSS, cold caches).
With --repeats R the sides run R rounds, their order reversed every other round, and the table
shows medians; the JSON keeps every round.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.machine import CAPS, cap_kernels, load_average, machine, matmul_peak

WORKLOADS = ("sst2", "ner", "qa", "predict", "eval", "startup")
TRAIN_SIDES = (
    "bertkit",
    "bertkit_grouped",  # --grouped: ner's order before its default became random batches
    "bertkit_fp32",
    "bertkit_fp32_dense",  # fp32 --no-lazy: as fp32 trained before lazy embeddings applied to it
    "bertkit_frozen",
    "bertkit_lazy",
    "bertkit_dense",  # --no-lazy: the default before lazy embeddings were (CPU, bf16)
    "bertkit_packed",  # --packing (bertkit_side.SIDES); also its random-batch sides below
    "bertkit_packed_random",
    "bertkit_padded_random",
    "hf_best_bf16",
    "hf_best",
    "hf_default",
)
DEFAULT_SIDES = ("bertkit", "bertkit_dense", "hf_best_bf16", "hf_best", "hf_default")
# fp32 and run_*-default reference rows: slow, and not the headline, so measured in round 1 only
ONCE = ("hf_best", "hf_default", "pipeline_fp32_bs_default")
RESULTS = Path(__file__).resolve().parent / "results"
HP = dict(epochs=1.0, batch_size=32, lr=5e-5, warmup=0.1, weight_decay=0.01, seed=42)
# None = the whole split. default_rows / default_qa_rows cap the slow hf_default recipes that pad
# to a fixed length (SST-2 128, QA 384): those rows measure throughput only.
FULL = dict(
    sst2_train=8000,
    sst2_eval=None,
    ner_train=4000,
    ner_eval=None,
    qa_train=1000,
    qa_eval=None,
    predict_n=872,
    default_rows=1000,
    default_qa_rows=200,
    capped_eval_rows=128,
    startup_repeats=5,
    matmul_seconds=3.0,
)
QUICK = dict(
    sst2_train=256,
    sst2_eval=128,
    ner_train=200,
    ner_eval=128,
    qa_train=64,
    qa_eval=32,
    predict_n=128,
    default_rows=64,
    default_qa_rows=16,
    capped_eval_rows=32,
    startup_repeats=3,
    matmul_seconds=1.0,
)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _call(module: str, name: str, args, kwargs):
    import importlib

    return getattr(importlib.import_module(module), name)(*args, **kwargs)


def run_isolated(fn, *args, **kwargs) -> dict:
    """``fn(*args)`` in a freshly spawned process; adds its wall and CPU seconds and the load
    average before it; an exception becomes {"error"} so one failed side does not stop the suite."""
    import concurrent.futures
    import multiprocessing

    before, load, started = resource.getrusage(resource.RUSAGE_CHILDREN), load_average(), time.perf_counter()
    try:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            result = pool.submit(_call, fn.__module__, fn.__name__, args, kwargs).result()
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": str(exc.__cause__ or traceback.format_exc())}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if isinstance(result, dict):
        result.update(
            process_wall_seconds=time.perf_counter() - started,
            load_average_before=load,
            process_cpu_seconds=after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
        )
    return result


class Suite:
    def __init__(self, args, sizes: dict):
        self.args, self.sizes, self.errors, self.results = args, sizes, [], {}
        self.work = tempfile.mkdtemp(prefix="bertkit-bench-")
        self.model_dir = None  # the bertkit SST-2 model that predict / eval use
        # predict's exported backends (bertkit_side.BACKEND_SIDES) where their runtimes are installed
        self.backends = not args.no_backends and all(
            importlib.util.find_spec(m) for m in ("onnxruntime", "openvino", "nncf")
        )

    def rounds(self, workload: str, sides: list[tuple]) -> dict:
        """Every side once per round, the order reversed every other round; all rounds kept."""
        runs = {name: [] for name, *_ in sides}
        for r in range(self.args.repeats):
            for name, fn, fn_args in sides if r % 2 == 0 else sides[::-1]:
                if r and name in self.args.once:  # a reference row, not the headline: one round
                    continue
                log(f"{workload}: {name} (round {r + 1}/{self.args.repeats}) ...")
                result = run_isolated(fn, *fn_args)
                if "error" in result:
                    self.errors.append(f"{workload}/{name}: {result['error']}")
                log(
                    f"{workload}: {name} "
                    + (
                        f"FAILED: {result['error']}"
                        if "error" in result
                        else f"done in {result['process_wall_seconds']:.1f} s"
                    )
                )
                runs[name].append(dict(result, round=r + 1))
        return runs

    def training(self, workload: str) -> None:
        from benchmarks import bertkit_side, hf_ner, hf_qa, hf_sst2, workloads

        s, root = self.sizes, str(workloads.data_dir())
        n_train, n_eval = s[f"{workload}_train"], s[f"{workload}_eval"]
        train, evals = workloads.LOADERS[workload](n_train, n_eval)
        entry = self.results[workload] = {"n_train": len(train), "n_eval": len(evals)}
        try:
            entry["data_check"] = workloads.check_identical(workload, train, evals, n_train, n_eval)
        except Exception as exc:
            entry["error"] = f"data check failed: {exc}"
            self.errors.append(f"{workload}: {entry['error']}")
            return
        # run_ner pads dynamically, so only SST-2's and QA's fixed-length defaults are capped
        caps = [c for c in (s["default_rows"], s["default_qa_rows"] if workload == "qa" else None) if c is not None]
        cap = None if workload == "ner" or not caps else min(caps)
        capped = bool(cap) and cap < len(train)
        hf = {"sst2": hf_sst2.run, "ner": hf_ner.run, "qa": hf_qa.run}[workload]
        model, sides = str(workloads.model_path()), []
        for side in self.args.sides:
            if side.startswith("bertkit"):
                keep = os.path.join(self.work, "sst2-model") if (workload, side) == ("sst2", "bertkit") else None
                self.model_dir = keep or self.model_dir
                sides.append(
                    (
                        side,
                        bertkit_side.train,
                        (workload, side, n_train, n_eval, root, HP, (len(train), len(evals)), keep),
                    )
                )
            elif side == "hf_default" and capped:
                entry["hf_default_rows"] = cap
                sides.append((side, hf, (side, train[:cap], evals[: s["capped_eval_rows"]], model, HP)))
            elif side != "hf_default" or cap != 0:  # --default-rows 0 skips the defaults
                sides.append((side, hf, (side, train, evals, model, HP)))
        entry["runs"] = self.rounds(workload, sides)

    def inference(self, workload: str) -> None:
        """predict: api.predict vs pipeline (bf16 at batch 64, fp32 at its default batch); eval:
        api.evaluate vs the bf16 pipeline plus accuracy. Both on the bertkit SST-2 model."""
        from benchmarks import bertkit_side, hf_sst2, workloads

        entry = self.results[workload] = {}
        root = str(workloads.data_dir())
        if not self.model_dir or not os.path.isdir(self.model_dir):
            self.model_dir = os.path.join(self.work, "sst2-model")
            n = min(self.sizes["sst2_train"], 2000)
            log(f"{workload}: fine-tuning a bertkit SST-2 model on {n} rows first ...")
            made = run_isolated(bertkit_side.train, "sst2", "bertkit", n, 64, root, HP, None, self.model_dir)
            entry["model"] = {"trained_here_rows": n, "error": made.get("error")}
            if "error" in made:
                self.model_dir = None
                entry["error"] = "no SST-2 model: " + made["error"]
                self.errors.append(f"{workload}: {entry['error']}")
                return
        _, dev = workloads.load_sst2(1, self.sizes["predict_n"])
        texts, labels = [r["sentence"] for r in dev], [r["label"] for r in dev]
        bf16 = (
            "pipeline_bf16_bs64",
            hf_sst2.pipeline_run,
            ("pipeline_bf16_bs64", self.model_dir, texts, labels, 64, True),
        )
        if workload == "predict":
            sides = [
                ("bertkit", bertkit_side.predict, ("bertkit", self.model_dir, texts, labels)),
                bf16,
                (
                    "pipeline_fp32_bs_default",
                    hf_sst2.pipeline_run,
                    ("pipeline_fp32_bs_default", self.model_dir, texts, labels, None, False),
                ),
            ]
            if self.backends:
                log("predict: exporting the int8 ONNX and OpenVINO models ...")
                exported = run_isolated(
                    bertkit_side.export_backends, self.model_dir, root, min(500, self.sizes["predict_n"])
                )
                entry["exports"] = exported
                if "error" in exported:
                    self.errors.append(f"predict: export: {exported['error']}")
                else:
                    sides += [
                        (name, bertkit_side.predict, (name, self.model_dir, texts, labels))
                        for name in bertkit_side.BACKEND_SIDES
                    ]
        else:
            sides = [("bertkit", bertkit_side.evaluate, ("bertkit", self.model_dir, root, len(texts))), bf16]
        entry["runs"] = self.rounds(workload, sides)

    def startup(self) -> None:
        """`bertkit --help` against the interpreter floor and the import of torch + transformers."""
        n = self.sizes["startup_repeats"]
        commands = [
            ("bertkit --help", [str(Path(sys.executable).parent / "bertkit"), "--help"], n),
            ("python -c pass", [sys.executable, "-c", "pass"], max(2, n // 2)),
            (
                "python -c 'import torch, transformers'",
                [sys.executable, "-c", "import torch, transformers"],
                max(2, n // 2),
            ),
        ]
        runs = self.results.setdefault("startup", {"runs": {}})["runs"]
        for name, command, repeats in commands:
            log(f"startup: {name} x{repeats} ...")
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                proc = subprocess.run(command, capture_output=True, cwd=self.work)
                times.append(time.perf_counter() - started)
                if proc.returncode:
                    runs[name] = {"error": f"exit {proc.returncode}: {proc.stderr.decode()[-300:]}"}
                    self.errors.append(f"startup: {name} failed")
                    break
            else:
                runs[name] = {"best_seconds": min(times), "all_seconds": times}


def parse_sizes(args) -> dict:
    sizes = dict(QUICK if args.quick else FULL)
    if args.default_rows is not None:
        sizes["default_rows"] = args.default_rows
    for pair in ",".join(args.set or []).split(","):
        if pair.strip():
            key, _, value = (p.strip() for p in pair.partition("="))
            if key not in sizes:
                raise SystemExit(f"--set: unknown size {key!r} (known: {', '.join(sizes)})")
            sizes[key] = None if value.lower() in ("none", "all") else (float(value) if "." in value else int(value))
    return sizes


def run(args) -> int:
    from benchmarks import machine_load
    from benchmarks import report as reporting
    from benchmarks.workloads import data_dir, model_path

    only = [w for w in (args.only or ",".join(WORKLOADS)).split(",") if w]
    args.sides = [s for s in (args.sides or ",".join(DEFAULT_SIDES)).split(",") if s]
    for given, known, flag in ((only, WORKLOADS, "--only"), (args.sides, TRAIN_SIDES, "--sides")):
        if set(given) - set(known):
            raise SystemExit(
                f"{flag}: unknown {', '.join(sorted(set(given) - set(known)))} (known: {', '.join(known)})"
            )
    sizes, started, machine_at_start = parse_sizes(args), time.perf_counter(), machine_load.snapshot()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    report = {
        "quick": args.quick,
        "only": only,
        "sides": args.sides,
        "sizes": sizes,
        "repeats": args.repeats,
        "hyperparameters": HP,
        "load_average_start": load_average(),
        "machine": machine(),
        "data_dir": str(data_dir()),
        "model": reporting.model_info(model_path()),
    }
    log("matmul peaks (fp32, bf16) ...")
    peak_start = run_isolated(matmul_peak, sizes["matmul_seconds"])
    suite = Suite(args, sizes)
    try:
        if "startup" in only:
            suite.startup()
        for workload in ("sst2", "ner", "qa"):
            if workload in only:
                suite.training(workload)
        for workload in ("predict", "eval"):
            if workload in only:
                suite.inference(workload)
    finally:
        shutil.rmtree(suite.work, ignore_errors=True)
    # again at the end: a peak measured while the machine was busy is too low; the higher one counts
    peak_end = run_isolated(matmul_peak, sizes["matmul_seconds"])
    report["matmul_peaks_start_end"] = [peak_start, peak_end]
    report["matmul_peak_gflops"] = {  # None: not measured (bf16 where it is emulated)
        k: max((p[k] for p in (peak_start, peak_end) if k in p), default=None) for k in ("fp32", "bf16")
    }
    report["load_average_end"] = load_average()
    # busy: other processes (and the hypervisor's steal) took a share of the cores while the suite ran
    report.update(machine_load.others(machine_at_start, machine_load.snapshot()))
    report.update(workloads=suite.results, errors=suite.errors, wall_seconds=time.perf_counter() - started)
    name = args.name or ("quick" if args.quick else "latest")
    markdown = reporting.write(report, Path(args.out_dir) if args.out_dir else RESULTS, name)
    log(f"wrote {markdown.with_suffix('.json')} and {markdown}")
    if not args.no_print:
        print(markdown.read_text())
    return 1 if suite.errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p = parser.add_subparsers(dest="command", required=True).add_parser("run", help="run the suite")
    p.add_argument("--quick", action="store_true", help="small sizes; writes results/quick.{json,md}")
    p.add_argument("--only", help=f"comma-separated subset of {','.join(WORKLOADS)}")
    p.add_argument("--sides", help=f"training sides (default {','.join(DEFAULT_SIDES)}; known {','.join(TRAIN_SIDES)})")
    p.add_argument("--repeats", type=int, default=1, help="rounds, order reversed every other one; medians shown")
    p.add_argument(
        "--once",
        default=",".join(ONCE),
        help=f"sides that run in the first round only (default {','.join(ONCE)}; '' = every round)",
    )
    p.add_argument("--default-rows", type=int, help="rows for the fixed-padding hf_default recipes (0 skips them)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE[,...]", help="override a size of FULL / QUICK")
    p.add_argument("--out-dir", help="instead of benchmarks/results/")
    p.add_argument("--name", help="result file stem (default latest, or quick with --quick)")
    p.add_argument("--no-print", action="store_true", help="do not print the table at the end")
    p.add_argument("--no-backends", action="store_true", help="predict with torch only (no ONNX / OpenVINO exports)")
    p.add_argument(
        "--cap", choices=sorted(CAPS), help="every side with oneDNN, ATen and oneMKL capped (an AVX2-only CPU)"
    )
    args = parser.parse_args(argv)
    if args.cap:
        cap_kernels(args.cap)
    args.once = {s for s in args.once.split(",") if s}
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
