"""Distillation on SST-2, side by side: the MiniLM teacher, its 3-layer student distilled, the same
3-layer student trained without the teacher (--alpha 0: the same start, data and steps, gold labels
only), a 2-layer student distilled, and MiniLM's pretrained layers 0, 2, 4 fine-tuned without any
teacher. Accuracy on the 872 dev sentences, predict sentences/s (torch, bertkit's Predictor on the
dev sentences), parameters.

    flock /tmp/heavy.lock python -m benchmarks.distill --train 8000 --seeds 3
    -> benchmarks/results/distill.{json,md}

The issue's full setting is the whole train set, 1 epoch, 3 seeds (--train 0 --seeds 3); on 2
shared CPU cores that takes hours, so the table says which slice it used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bertkit.options import RunOptions

ROOT = Path(__file__).resolve().parent
ROWS = (
    ("teacher", None),
    ("--student-layers 3, distilled", {"student_layers": 3}),
    ("--student-layers 3, no teacher (--alpha 0)", {"student_layers": 3, "alpha": 0.0}),
    ("--student-layers 2, distilled", {"student_layers": 2}),
    ("3 pretrained layers (0, 2, 4), no teacher", "pretrained"),
)
# Tang et al. 2019: the teacher labels more text. Opt-in (--with-unlabelled N): the next N SST-2
# training sentences after the --train slice, their labels dropped, as --unlabelled.
UNLABELLED_ROW = "--student-layers 3, distilled + unlabelled"
# Tang et al. 2019 from the labelled rows alone (--with-augment N): each row rewritten N times.
AUGMENT_ROW = "--student-layers 3, distilled + --augment {n}"


def dev_sentences(data_dir: Path) -> list[str]:
    lines = (data_dir / "sst2" / "dev.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[0] for line in lines if line.strip()]


SPEED_BACKENDS = {"torch fp32": ("torch", "no"), "torch": ("torch", "auto"), "openvino int8": ("openvino-int8", "auto")}


def predict_speeds(model_dirs: dict[str, str], sentences: list[str], data_dir: Path, rounds: int = 3) -> dict:
    """Sentences/s of bertkit's Predictor (what predict and serve run) per model and backend: torch in
    fp32, torch at its default precision (bf16 where the CPU has it), and OpenVINO int8 after
    `bertkit export openvino DIR --int8`. Every predictor is loaded once and warmed up, then all run
    round by round, alternating, so machine load hits each alike; the best round counts."""
    from bertkit.api.prediction import Predictor
    from bertkit.export.openvino import export_openvino
    from bertkit.options import InferenceOptions

    predictors = {}
    for name, directory in model_dirs.items():
        if _needs_export(directory):  # calibrated on SST-2 dev rows, as `bertkit export openvino --int8`
            export_openvino(directory, int8=True, data="sst2")
        for backend_name, (backend, precision) in SPEED_BACKENDS.items():
            predictor = Predictor(directory, InferenceOptions(precision=precision), backend, quiet=True).load()
            examples = predictor.examples(sentences)
            predictor.predict(examples[:64])
            predictors[(name, backend_name)] = (predictor, examples)
    best = {key: float("inf") for key in predictors}
    for _ in range(rounds):
        for key, (predictor, examples) in predictors.items():
            started = time.perf_counter()
            predictor.predict(examples)
            best[key] = min(best[key], time.perf_counter() - started)
    speeds: dict = {name: {} for name in model_dirs}
    for (name, backend_name), seconds in best.items():
        speeds[name][backend_name] = round(len(sentences) / seconds, 1)
    return speeds


def _needs_export(directory: str) -> bool:
    from bertkit.export.runtime import BACKEND_FILES

    return not (Path(directory) / BACKEND_FILES["openvino-int8"][1]).is_file()


def parameters(model_dir: str) -> int:
    from safetensors import safe_open

    with safe_open(str(Path(model_dir) / "model.safetensors"), "pt") as weights:
        return sum(_numel(weights, name) for name in weights.keys())


def _numel(weights, name: str) -> int:
    size = 1
    for dim in weights.get_slice(name).get_shape():
        size *= dim
    return size


def pretrained_layers(model: str, layers: list[int], directory: Path) -> str:
    from transformers import AutoModel, AutoTokenizer

    from bertkit.models import resolve_model
    from bertkit.networks.distillation import drop_layers

    ref = resolve_model(model)
    drop_layers(AutoModel.from_pretrained(ref), layers).save_pretrained(directory)
    AutoTokenizer.from_pretrained(ref).save_pretrained(directory)
    return str(directory)


def unlabelled_file(data_dir: Path, skip: int, rows: int, work: Path) -> str:
    """SST-2 training sentences ``skip`` .. ``skip + rows`` (never the labelled slice), one a line."""
    lines = (data_dir / "sst2" / "train.tsv").read_text().splitlines()[1:]
    sentences = [line.split("\t")[0] for line in lines if line.strip()][skip : skip + rows]
    path = work / f"unlabelled-{skip}-{rows}.txt"
    path.write_text("\n".join(sentences) + "\n")
    return str(path)


def chosen_rows(args, data_dir: Path, work: Path) -> list:
    """ROWS, or only --only's (by position), plus the unlabelled row with --with-unlabelled."""
    rows = list(ROWS)
    if args.with_unlabelled:
        if not args.train:
            raise SystemExit("--with-unlabelled needs a --train slice: the sentences after it are the unlabelled text")
        work.mkdir(parents=True, exist_ok=True)
        extra = unlabelled_file(data_dir, args.train, args.with_unlabelled, work)
        rows.append((UNLABELLED_ROW, {"student_layers": 3, "unlabelled": extra}))
    if args.with_augment:
        rows.append((AUGMENT_ROW.format(n=args.with_augment), {"student_layers": 3, "augment": args.with_augment}))
    if args.only:
        rows = [rows[int(i)] for i in args.only.split(",")]
    return rows


def run(args) -> dict:
    from bertkit import api
    from bertkit.api.distillation import distill
    from bertkit.config import TrainConfig
    from bertkit.options.distillation import DistillOptions

    work, data_dir = Path(args.work), Path(args.data_dir)
    train = args.train or None
    sentences = dev_sentences(data_dir)
    rows = chosen_rows(args, data_dir, work)
    results = {name: {"accuracy": [], "seconds": []} for name, _ in rows}
    for seed in range(42, 42 + args.seeds):
        config = TrainConfig(epochs=1, lr=5e-5, batch_size=32, max_train_samples=train, seed=seed, max_length=64)
        teacher = str(work / f"teacher-{seed}")
        for name, student in rows:
            started = time.perf_counter()
            if student == "pretrained":  # the student's shape cut from the checkpoint, not from the teacher
                out = str(work / f"pretrained3-{seed}")
                start = pretrained_layers(args.model, [0, 2, 4], work / "pretrained-layers")
                result = api.finetune(
                    "cls",
                    RunOptions(data="sst2", data_dir=str(data_dir), model=start, output=out, overwrite=True),
                    config=config,
                )
            elif student is None:
                result = api.finetune(
                    "cls",
                    RunOptions(data="sst2", data_dir=str(data_dir), model=args.model, output=teacher, overwrite=True),
                    config=config,
                )
                out = teacher
            else:
                out = str(work / f"{'-'.join(f'{k}{Path(str(v)).stem}' for k, v in student.items())}-{seed}")
                result = distill(
                    teacher,
                    RunOptions(data="sst2", data_dir=str(data_dir), output=out, overwrite=True),
                    options=DistillOptions(**student),
                    config=config,
                )
            row = results[name]
            row["accuracy"].append(result.metrics["accuracy"])
            row["seconds"].append(round(time.perf_counter() - started, 1))
            row["dir"] = out
            print(name, seed, result.metrics, flush=True)
    if args.merge:  # the rows run before, from --out's JSON (their directories still in --work)
        before = json.loads(Path(args.out + ".json").read_text())["rows"]
        results = {**{name: row for name, row in before.items() if name not in results}, **results}
    speeds = predict_speeds({name: row["dir"] for name, row in results.items()}, sentences, data_dir)
    for name, row in results.items():
        row["parameters"] = parameters(row["dir"])
        row["sentences_per_s"] = speeds[name]
    return {
        "model": args.model,
        "train_rows": train or "all",
        "unlabelled_rows": args.with_unlabelled,
        "augment": args.with_augment,
        "seeds": args.seeds,
        "rows": results,
    }


def table(report: dict) -> str:
    teacher = report["rows"][ROWS[0][0]]
    extra = report.get("unlabelled_rows")
    lines = [
        f"SST-2 dev (872), teacher from {report['model']}, {report['train_rows']} train rows, 1 epoch, "
        f"{report['seeds']} seed(s)" + (f"; unlabelled: the next {extra:,} train sentences" if extra else ""),
        "",
        "Predict: sentences/s on the dev sentences, best of 3 alternating rounds; x = against the teacher "
        "in torch fp32.",
        "",
        "| model | accuracy (per seed) | mean | spread | torch fp32 | torch (auto precision) | OpenVINO int8 "
        "| parameters |",
        "|---|---|---|---|---|---|---|---|",
    ]
    reference = teacher["sentences_per_s"]["torch fp32"]
    for name, row in report["rows"].items():
        acc = row["accuracy"]
        spread = f"± {statistics.stdev(acc):.4f}" if len(acc) > 1 else "-"
        cells = [f"{speed} ({speed / reference:.2f}x)" for speed in row["sentences_per_s"].values()]
        per_seed = ", ".join(f"{a:.4f}" for a in acc)
        lines.append(
            f"| {name} | {per_seed} | {statistics.mean(acc):.4f} | {spread} | {' | '.join(cells)} | "
            f"{row['parameters']:,} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=8000, help="SST-2 train rows (0: all)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--model", default="minilm", help="the teacher's starting checkpoint (6 layers or more)")
    parser.add_argument(
        "--data-dir", default=os.environ.get("BERTKIT_DATA_DIR", str(ROOT.parent.parent / "shared" / "data"))
    )
    parser.add_argument("--with-unlabelled", type=int, default=0, help="add the distilled + N unlabelled row")
    parser.add_argument("--with-augment", type=int, default=0, help="add the distilled + --augment N row")
    parser.add_argument("--only", default="", help="run only these rows (positions, e.g. 5)")
    parser.add_argument("--merge", action="store_true", help="keep --out's other rows (their dirs in --work)")
    parser.add_argument("--work", default="/tmp/bertkit-distill-bench")
    parser.add_argument("--out", default=str(ROOT / "results" / "distill"))
    args = parser.parse_args()
    report = run(args)
    Path(args.out + ".json").write_text(json.dumps(report, indent=2) + "\n")
    Path(args.out + ".md").write_text(table(report))
    print(table(report))


if __name__ == "__main__":
    main()
