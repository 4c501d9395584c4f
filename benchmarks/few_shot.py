"""Few-shot SST-2: `bertkit finetune cls --recipe setfit` against SetFit's own Trainer, plain
`--recipe finetune` and `bertkit probe`, on the same rows, model (the bundled MiniLM), seeds.

For each size (labelled sentences per class) and seed, the rows are drawn from SST-2's train.tsv
(a seeded shuffle, the first N of each label), and every side is scored on the whole dev set (872).

* bertkit setfit and SetFit: the same pairs per row (``--pairs-per-example 2k`` is SetFit's
  ``num_iterations=k``), batch size, body learning rate, epochs, max length; fp32 on both by default,
  or bertkit in bf16 with ``--precision bf16`` (each side's best on a CPU with bf16: SetFit trains
  in fp32 there, its ``use_amp`` is CUDA's); their training wall time is compared (SetFit's:
  ``trainer.train()``, body and head; bertkit's: the whole command, data reading, pairs, head,
  evaluation and the directory written included).
* bertkit finetune: the same rows, batch size and epochs of steps as setfit (one epoch of setfit is
  rows x pairs / batch steps: finetune gets that many steps, at fine-tuning's lr 5e-5), scored
  once at the end as setfit is.
* bertkit probe: frozen MiniLM, logistic regression (C chosen on a quarter of the rows).

    flock /tmp/heavy.lock python -m benchmarks.few_shot [--sizes 8,16,64] [--seeds 0,1,2] [--pairs 10]

Writes benchmarks/results/few_shot.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from bertkit.options import RunOptions

RESULTS = Path(__file__).resolve().parent / "results"
SIDES = ("bertkit_setfit", "setfit", "bertkit_finetune", "bertkit_probe")
BATCH, LR, EPOCHS, MAX_LENGTH, FINETUNE_LR = 16, 2e-5, 1, 64, 5e-5
MODEL = {"name": "minilm", "precision": "no"}  # --model, --precision (bertkit's sides; "no": fp32)


def data_dir() -> Path:
    return Path(os.environ.get("BERTKIT_DATA_DIR", "../shared/data")).resolve()


def sst2_rows(name: str) -> list[tuple[str, str]]:
    lines = (data_dir() / "sst2" / name).read_text(encoding="utf-8").splitlines()[1:]
    return [(text.strip(), label) for text, label in (line.rsplit("\t", 1) for line in lines)]


def few_rows(per_class: int, seed: int) -> list[tuple[str, str]]:
    rows = sst2_rows("train.tsv")
    random.Random(seed).shuffle(rows)
    return [r for r in rows if r[1] == "0"][:per_class] + [r for r in rows if r[1] == "1"][:per_class]


def write_tsv(path: Path, rows) -> Path:
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{lab}\n" for t, lab in rows), encoding="utf-8")
    return path


def run_bertkit_setfit(train: Path, dev: Path, out: Path, seed: int, pairs: int) -> dict:
    from bertkit import api
    from bertkit.options import TrainConfig

    options = {"recipe": "setfit", "pairs_per_example": pairs}
    config = TrainConfig(
        epochs=EPOCHS,
        lr=LR,
        batch_size=BATCH,
        seed=seed,
        max_length=MAX_LENGTH,
        precision=MODEL["precision"],
        task_options=options,
    )
    started = time.perf_counter()
    result = api.finetune(
        "cls", RunOptions(data=str(train), eval_data=str(dev), model=MODEL["name"], output=str(out)), config=config
    )
    wall = time.perf_counter() - started
    return {
        "accuracy": result.metrics["accuracy"],
        "wall_s": round(wall, 2),  # the whole command: reading, pairs, body, head, evaluation, directory
        "train_s": result.throughput["train_seconds"],  # the body's training loop alone
        "steps": result.throughput["optimizer_steps"],
    }


def run_setfit(train_rows, dev_rows, seed: int, pairs: int) -> dict:
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    from bertkit.models import resolve_model

    model = SetFitModel.from_pretrained(resolve_model(MODEL["name"]))
    args = TrainingArguments(
        batch_size=BATCH,
        num_epochs=EPOCHS,
        body_learning_rate=LR,
        num_iterations=pairs // 2,
        max_length=MAX_LENGTH,
        seed=seed,
        report_to="none",
        save_strategy="no",
        show_progress_bar=False,
        output_dir=tempfile.mkdtemp(prefix="setfit-"),
    )
    train = Dataset.from_dict({"text": [t for t, _ in train_rows], "label": [int(lab) for _, lab in train_rows]})
    trainer = Trainer(model=model, args=args, train_dataset=train)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    predicted = model.predict([t for t, _ in dev_rows], as_numpy=True)
    accuracy = sum(int(p) == int(lab) for p, (_, lab) in zip(predicted, dev_rows)) / len(dev_rows)
    return {"accuracy": round(accuracy, 6), "wall_s": round(wall, 2)}


def run_bertkit_finetune(train: Path, dev: Path, out: Path, seed: int, steps: int, rows: int) -> dict:
    from bertkit import api
    from bertkit.options import TrainConfig

    epochs = max(1, round(steps * BATCH / rows))  # the setfit run's optimizer steps, in epochs of these rows
    config = TrainConfig(
        epochs=epochs,
        lr=FINETUNE_LR,
        batch_size=BATCH,
        seed=seed,
        max_length=MAX_LENGTH,
        precision=MODEL["precision"],
        eval_every=epochs * -(-rows // BATCH),  # one evaluation, at the end: as setfit's
    )
    started = time.perf_counter()
    result = api.finetune(
        "cls", RunOptions(data=str(train), eval_data=str(dev), model=MODEL["name"], output=str(out)), config=config
    )
    return {"accuracy": result.metrics["accuracy"], "wall_s": round(time.perf_counter() - started, 2), "epochs": epochs}


def run_bertkit_probe(train: Path, dev: Path, out: Path, seed: int) -> dict:
    from bertkit import api
    from bertkit.options import ProbeOptions, RunOptions, TrainConfig

    started = time.perf_counter()
    result = api.probe(
        "cls",
        RunOptions(data=str(train), output=str(out), model=MODEL["name"], eval_data=str(dev)),
        TrainConfig(seed=seed),
        ProbeOptions(holdout=0.25, precision=MODEL["precision"]),
    )
    return {"accuracy": result.metrics["accuracy"], "wall_s": round(time.perf_counter() - started, 2)}


def one_cell(size: int, seed: int, pairs: int, work: Path, sides) -> dict:
    """Every side on one draw of ``size`` rows per class."""
    rows, dev_rows = few_rows(size, seed), sst2_rows("dev.tsv")
    train, dev = write_tsv(work / f"train-{size}-{seed}.tsv", rows), data_dir() / "sst2" / "dev.tsv"
    cell = {}
    if "bertkit_setfit" in sides:
        cell["bertkit_setfit"] = run_bertkit_setfit(train, dev, work / f"setfit-{size}-{seed}", seed, pairs)
    if "setfit" in sides:
        cell["setfit"] = run_setfit(rows, dev_rows, seed, pairs)
    if "bertkit_finetune" in sides:
        steps = cell.get("bertkit_setfit", {}).get("steps") or -(-2 * size * pairs // BATCH)
        cell["bertkit_finetune"] = run_bertkit_finetune(train, dev, work / f"ft-{size}-{seed}", seed, steps, 2 * size)
    if "bertkit_probe" in sides:
        cell["bertkit_probe"] = run_bertkit_probe(train, dev, work / f"probe-{size}-{seed}", seed)
    return cell


def summary(runs: dict, sides) -> dict:
    """size -> side -> mean, std of accuracy over seeds, mean wall seconds."""
    table = {}
    for size, by_seed in runs.items():
        table[size] = {}
        for side in sides:
            cells = [cell[side] for cell in by_seed.values() if side in cell]
            if not cells:
                continue
            accuracies = [c["accuracy"] for c in cells]
            table[size][side] = {
                "mean": round(statistics.mean(accuracies), 4),
                "std": round(statistics.stdev(accuracies), 4) if len(accuracies) > 1 else 0.0,
                "wall_s": round(statistics.mean(c["wall_s"] for c in cells), 1),
                **(
                    {"train_s": round(statistics.mean(c["train_s"] for c in cells), 1)} if "train_s" in cells[0] else {}
                ),
                "seeds": len(cells),
            }
    return table


def markdown(table: dict, settings: dict) -> str:
    lines = [
        "# Few-shot SST-2 (dev accuracy, 872 rows): mean ± std over seeds; mean training wall seconds",
        "",
        "Settings: " + ", ".join(f"{k} {v}" for k, v in settings.items()),
        "",
        "| per class | " + " | ".join(SIDES) + " | SetFit train() s / bertkit body loop s (whole command s) |",
        "|---|" + "---|" * (len(SIDES) + 1),
    ]
    for size, row in table.items():
        cells = [
            f"{row[s]['mean']:.4f} ± {row[s]['std']:.4f} ({row[s]['wall_s']:.0f}s)" if s in row else "-" for s in SIDES
        ]
        ours, theirs = row.get("bertkit_setfit"), row.get("setfit")
        ratio = "-"
        if ours and theirs:
            ratio = (
                f"{theirs['wall_s'] / ours['train_s']:.2f}x ({theirs['wall_s'] / ours['wall_s']:.2f}x): "
                f"{theirs['wall_s']:.0f} / {ours['train_s']:.0f} ({ours['wall_s']:.0f})"
            )
        lines.append(f"| {size} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="8,16,64")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--pairs", type=int, default=10, help="pairs per example (SetFit: num_iterations = pairs/2)")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--name", default="few_shot")
    parser.add_argument("--model", default="minilm")
    parser.add_argument(
        "--precision", choices=("no", "bf16"), default="no", help="bertkit's (SetFit trains in fp32 on a CPU)"
    )
    args = parser.parse_args()
    MODEL["name"], MODEL["precision"] = args.model, args.precision
    sizes, seeds = [int(s) for s in args.sizes.split(",")], [int(s) for s in args.seeds.split(",")]
    sides = tuple(args.sides.split(","))
    settings = {
        "model": args.model,
        "batch": BATCH,
        "lr (setfit body)": LR,
        "lr (finetune)": FINETUNE_LR,
        "epochs": EPOCHS,
        "max_length": MAX_LENGTH,
        "pairs per example": args.pairs,
        "precision": f"bertkit {'fp32' if args.precision == 'no' else args.precision}, SetFit fp32",
        "seeds": seeds,
        "cpu cores": os.cpu_count(),
    }
    runs = {}
    with tempfile.TemporaryDirectory(prefix="few-shot-") as work:
        for size in sizes:
            runs[size] = {}
            for seed in seeds:
                runs[size][seed] = one_cell(size, seed, args.pairs, Path(work), sides)
                print(json.dumps({"size": size, "seed": seed, **runs[size][seed]}), flush=True)
    table = summary(runs, sides)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"settings": settings, "summary": table, "runs": runs}, indent=2)
    )
    (RESULTS / f"{args.name}.md").write_text(markdown(table, settings))
    print(markdown(table, settings))


if __name__ == "__main__":
    main()
