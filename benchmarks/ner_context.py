"""CoNLL-2003 with and without document context (ner --context document, FLERT), side by side.

    flock /tmp/heavy.lock python -m benchmarks.ner_context [--train N] [--epochs E] [--context-tokens T]

Both arms train the bundled MiniLM with the same recipe, data, seed and budget (the benchmarks'
recipe: batch 32, lr 5e-5, warmup 10 %, weight decay 0.01, seed 42), in one process after the
other; each is scored on the whole CoNLL-2003 dev (valid.txt) and test (test.txt) files. Written:
benchmarks/results/ner_context.{json,md}. The published effect beside it: FLERT (Schweter & Akbik
2020, table 2/3: XLM-R large, about +1 F1 on CoNLL-03 English test with 64 sub-tokens of context
each side); the BERT paper's CoNLL numbers (Devlin et al. 2019, section 5.3 and table 7) use
maximal document context.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bertkit.options import RunOptions

RECIPE = dict(batch_size=32, lr=5e-5, warmup_ratio=0.1, weight_decay=0.01, seed=42)
PUBLISHED = (
    "FLERT (Schweter & Akbik 2020): document context (64 sub-tokens each side) adds about +1 test F1 "
    "on CoNLL-03 English (XLM-R large, fine-tuned); BERT (Devlin et al. 2019, table 7) reports "
    "96.4 dev / 92.4 test F1 (base) with maximal document context"
)
RESULTS = Path(__file__).parent / "results"


def arm(context: str, train: int | None, epochs: float, tokens: int, work: str, model: str, n_eval: int | None) -> dict:
    """Fine-tune one arm, then score its model on dev and test; F1 (0..100) and examples/s."""
    from benchmarks.bertkit_side import _prepare
    from benchmarks.workloads import data_dir
    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.options import EvalOptions

    _prepare()
    options = {"context": context, **({"context_tokens": tokens} if context == "document" else {})}
    config = TrainConfig(
        epochs=epochs,
        eval_batch_size=64,
        max_train_samples=train,
        max_eval_samples=n_eval,
        task_options=options,
        **RECIPE,
    )
    output = os.path.join(work, context)
    started = time.perf_counter()
    result = api.finetune(
        "ner", RunOptions(data="conll2003", data_dir=str(data_dir()), model=model, output=output), config=config
    )
    finetune_seconds = time.perf_counter() - started
    # dev: finetune's own evaluation of the model it saved (1 epoch: the last); test: `eval`, timed
    scores = {"dev": {"f1": round(100 * result.metrics["f1"], 2), "examples": result.eval_examples}}
    began = time.perf_counter()
    report = api.evaluate(
        output,
        EvalOptions(
            split="test", data_dir=str(data_dir()), max_eval_samples=n_eval, output=os.path.join(work, "test.json")
        ),
    )
    seconds = time.perf_counter() - began
    scores["test"] = {
        "f1": round(100 * report["metrics"]["f1"], 2),
        "examples": report["examples"],
        "seconds": round(seconds, 1),
        "examples_per_s": round(report["examples"] / seconds, 1),
    }
    return {
        "context": context,
        "context_tokens": tokens if context == "document" else None,
        "train_sentences": result.train_examples,
        "train_examples_per_s": result.throughput.get("examples_per_s"),
        "train_tokens_per_s": result.throughput.get("tokens_per_s"),
        "finetune_seconds": round(finetune_seconds, 1),
        "sentences_with_context": result.preprocessing.get("train", {}).get("sentences_with_context"),
        "dev": scores["dev"],
        "test": scores["test"],
        "precision": result.runtime.get("precision"),
    }


# What one train sentence costs, both arms together, on 2 shared cores: the sentence arm trains at
# about 112 sentences/s (benchmarks/README.md, full-budget CoNLL), and document context at
# --max-length 128 gives a CoNLL train sentence 109 word pieces instead of 20 (5.5x the tokens);
# plus a contended machine's margin. FIXED: loading, preprocessing, dev and test in both arms.
SECONDS_PER_SENTENCE, FIXED_SECONDS, TRAIN_SENTENCES = 0.075, 240, 14041


def budget_for(finish_by: str) -> int:
    """Train sentences (the same for both arms) that should let the run end by ``finish_by`` (UTC)."""
    now = time.gmtime()
    hours, minutes = (int(part) for part in finish_by.split(":"))
    left = (hours * 60 + minutes) * 60 - (now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec)
    fits = int((left - FIXED_SECONDS) / SECONDS_PER_SENTENCE)
    if fits < 500:
        raise SystemExit(f"--finish-by {finish_by}: {left} s left, too little for a meaningful run")
    return min(fits, TRAIN_SENTENCES)


def markdown(report: dict) -> str:
    lines = [
        "| arm | train sentences | epochs | train ex/s | dev F1 | test F1 | test eval ex/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["arms"]:
        name = "sentence" if row["context"] == "sentence" else f"document ({row['context_tokens']} pieces a side)"
        lines.append(
            f"| {name} | {row['train_sentences']:,} | {report['epochs']:g} | {row['train_examples_per_s']} | "
            f"{row['dev']['f1']:.2f} | {row['test']['f1']:.2f} | {row['test']['examples_per_s']} |"
        )
    arms = {row["context"]: row for row in report["arms"]}
    if {"sentence", "document"} <= set(arms):
        dev = arms["document"]["dev"]["f1"] - arms["sentence"]["dev"]["f1"]
        test = arms["document"]["test"]["f1"] - arms["sentence"]["test"]["f1"]
        lines.append(f"\nDocument context: {dev:+.2f} dev F1, {test:+.2f} test F1 (one seed, 42; no spread measured).")
    lines.append(f"\nPublished: {PUBLISHED}.")
    lines.append(f"\nCommand: `{report['command']}`; {report['machine']}; {report['when']}, commit {report['commit']}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=int, default=None, help="first N train sentences (default: all 14,041)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--context-tokens", type=int, default=64)
    parser.add_argument("--arms", default="sentence,document")
    parser.add_argument("--name", default="ner_context")
    parser.add_argument("--model", default="minilm", help="a model directory, to check the harness on a tiny one")
    parser.add_argument("--eval", type=int, default=None, help="first N dev/test sentences (default: all)")
    parser.add_argument(
        "--finish-by",
        default=None,
        help="HH:MM (UTC): without --train, the largest train slice that should end by then (budget_for)",
    )
    args = parser.parse_args(argv)
    import subprocess

    given = list(argv if argv is not None else os.sys.argv[1:])
    if args.finish_by and args.train is None:
        args.train = budget_for(args.finish_by)
        given += ["--train", str(args.train)]
        print(f"--finish-by {args.finish_by}: --train {args.train}", flush=True)
    report = {
        "command": "python -m benchmarks.ner_context " + " ".join(given),
        "epochs": args.epochs,
        "recipe": RECIPE,
        "model": "minilm (all-MiniLM-L6-v2)",
        "machine": f"{os.cpu_count()} CPU cores",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        or None,
        "published": PUBLISHED,
        "arms": [],
    }
    RESULTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bertkit-ner-context-") as work:
        for context in args.arms.split(","):
            report["arms"].append(
                arm(context, args.train, args.epochs, args.context_tokens, work, args.model, args.eval)
            )
            (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")  # each arm as it ends
            print(json.dumps(report["arms"][-1]), flush=True)
    (RESULTS / f"{args.name}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
