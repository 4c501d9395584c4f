"""The `bertkit` command line: parse, call bertkit.api, print. Heavy imports stay inside commands."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from typing import Optional

import typer

from bertkit.errors import BertkitError

DEBUG_ENV = "BERTKIT_DEBUG"
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fine-tune, evaluate and serve BERT-family models on classic NLP tasks.")


class TaskName(str, Enum):
    cls = "cls"
    pair = "pair"
    ner = "ner"
    qa = "qa"


class Precision(str, Enum):
    no = "no"
    fp16 = "fp16"
    bf16 = "bf16"


DATA_DIR_HELP = "Local data directory with the original files (<dir>/sst2/train.tsv ...); default $BERTKIT_DATA_DIR."


@app.command()
def finetune(
    task: TaskName = typer.Argument(..., help="cls: one text; pair: two texts; ner: token tags; qa: answer spans."),
    data: str = typer.Option(..., help="A known dataset name (see `bertkit datasets`) or a file path."),
    eval_data: Optional[str] = typer.Option(None, help="Evaluation data; default: the known dataset's dev split."),
    data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP),
    model: str = typer.Option("bert-base-uncased", help="Hub name, local directory, or 'minilm' (bundled, offline)."),
    output: Optional[str] = typer.Option(None, help="Model directory to create; default runs/<task>-<data>."),
    overwrite: bool = typer.Option(False, help="Replace a non-empty --output directory (only once training succeeded)."),
    epochs: float = typer.Option(3.0, help="Training epochs (fractions allowed)."),
    lr: float = typer.Option(2e-5, help="Peak learning rate (BERT paper: 2e-5 .. 5e-5)."),
    batch_size: int = typer.Option(32, help="Training batch size per device (BERT paper: 16 or 32)."),
    eval_batch_size: int = typer.Option(64, help="Batch size for evaluation."),
    max_length: Optional[int] = typer.Option(None, help="Max tokens per sequence; default 128 (qa: 384)."),
    warmup_ratio: float = typer.Option(0.1, help="Share of steps with linear warmup, then linear decay to 0."),
    weight_decay: float = typer.Option(0.01, help="AdamW weight decay (not on biases and LayerNorm)."),
    grad_accum: int = typer.Option(1, help="Gradient accumulation steps."),
    max_grad_norm: float = typer.Option(1.0, help="Gradient clipping norm (0: off)."),
    precision: Precision = typer.Option(Precision.no, help="Mixed precision: no, fp16 (GPU), bf16."),
    seed: int = typer.Option(42, help="Random seed (data order, head initialisation, dropout)."),
    max_train_samples: Optional[int] = typer.Option(None, help="Use only the first N training examples."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Use only the first N evaluation examples."),
    patience: Optional[int] = typer.Option(None, help="Stop after N epochs without improvement of the main metric."),
    text_column: Optional[str] = typer.Option(None, help="cls/pair: column with the (first) text."),
    text_pair_column: Optional[str] = typer.Option(None, help="pair: column with the second text."),
    label_column: Optional[str] = typer.Option(None, help="cls/pair: column with the label."),
    doc_stride: Optional[int] = typer.Option(None, help="qa: tokens of OVERLAP between consecutive windows of a long "
                                             "context (as in HF, not the step between windows; default 128). ner: "
                                             "words shared by consecutive windows of a long sentence (default: half)."),
    max_answer_length: Optional[int] = typer.Option(None, help="qa: longest answer in tokens (default 30)."),
):
    """Fine-tune a pretrained model and save a directory that plain transformers can load."""
    from bertkit import api
    from bertkit.config import TrainConfig

    options = {"text_column": text_column, "text_pair_column": text_pair_column, "label_column": label_column,
               "doc_stride": doc_stride, "max_answer_length": max_answer_length}
    config = TrainConfig(epochs=epochs, lr=lr, batch_size=batch_size, eval_batch_size=eval_batch_size,
                         max_length=max_length, warmup_ratio=warmup_ratio, weight_decay=weight_decay,
                         grad_accum=grad_accum, max_grad_norm=max_grad_norm, precision=precision.value, seed=seed,
                         max_train_samples=max_train_samples, max_eval_samples=max_eval_samples, patience=patience,
                         task_options={k: v for k, v in options.items() if v is not None})
    output = output or os.path.join("runs", f"{task.value}-{os.path.splitext(os.path.basename(data))[0]}")
    result = api.finetune(task.value, data, output, model=model, eval_data=eval_data, data_dir=data_dir,
                          config=config, overwrite=overwrite)
    t = result.throughput
    for entry in result.history:
        typer.echo(f"epoch {entry['epoch']}: train loss {entry['train_loss']:.4f}" +
                   "".join(f", {k} {v:.4f}" for k, v in entry.get("metrics", {}).items() if isinstance(v, float)))
    typer.echo(f"train: {result.train_examples} examples ({result.preprocessing.get('train_features')} features), "
               f"{t['examples_per_s']:.1f} examples/s, {t['tokens_per_s']:.0f} tokens/s, "
               f"padding {100 * t['padding_share']:.1f}%, {t['train_seconds']:.1f}s")
    _echo_windows(result.preprocessing.get("train", {}))
    if result.metrics:
        typer.echo(f"best (epoch {result.best_epoch}): {_format_metrics(result.metrics)}")
    typer.echo(f"saved to {result.output_dir}")


@app.command("eval")
def eval_command(
    model_dir: str = typer.Argument(..., help="A directory written by `bertkit finetune`."),
    data: Optional[str] = typer.Option(None, help="Dataset name or file; default: the dataset it was trained on."),
    split: str = typer.Option("dev", help="Split of a known dataset: train, dev, test (mnli: dev_mismatched too)."),
    data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP),
    batch_size: int = typer.Option(64, help="Inference batch size."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Use only the first N examples."),
    output: Optional[str] = typer.Option(None, help="Metrics JSON file; default <model_dir>/eval-<data>-<split>.json."),
    precision: Precision = typer.Option(Precision.no, help="Mixed precision for inference."),
    strict: bool = typer.Option(False, "--strict", help="ner: strict IOB2 entity matching; default: conlleval rules."),
):
    """Score a fine-tuned model; prints the metrics and writes them as JSON."""
    from bertkit import api
    from bertkit.checkpoint import load_meta

    if data is None:
        data = load_meta(model_dir).get("data", {}).get("name")
        if not data:
            raise BertkitError("this model was not trained on a known dataset, so --data is needed", "pass --data FILE")
    report = api.evaluate(model_dir, data, split=split, data_dir=data_dir, batch_size=batch_size,
                          max_eval_samples=max_eval_samples, output=output, precision=precision.value,
                          task_options={"strict": True} if strict else None)
    typer.echo(f"{report['data']}: {report['examples']} examples")
    _echo_windows(report["preprocessing"])
    typer.echo(_format_metrics(report["metrics"]))
    for key, value in report.get("tuned", {}).items():
        typer.echo(f"tuned {key} = {value} (stored with the model)")
    typer.echo(f"written to {report['written_to']}")


@app.command()
def predict(
    model_dir: str = typer.Argument(..., help="A directory written by `bertkit finetune`."),
    input: str = typer.Option(..., "--input", help="Text lines (pair: TAB between texts), JSONL, JSON, CSV, TSV; '-' = stdin."),
    output: str = typer.Option("-", help="JSONL output file; '-' = stdout."),
    batch_size: int = typer.Option(64, help="Inference batch size."),
    n_best: Optional[int] = typer.Option(None, help="qa: also return the N best distinct answers."),
    precision: Precision = typer.Option(Precision.no, help="Mixed precision for inference."),
):
    """Predict for every input row; one JSON line per row, in input order."""
    from bertkit import api

    rows = api.predict(model_dir, input, batch_size=batch_size, precision=precision.value, n_best=n_best)
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if output == "-":
        sys.stdout.write(lines)
    else:
        from pathlib import Path

        target = Path(output)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(lines, encoding="utf-8")
        tmp.replace(target)
        typer.echo(f"{len(rows)} predictions written to {output}", err=True)


@app.command()
def datasets(data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP)):
    """List the known dataset names, their task, and where each would load from."""
    from bertkit.data.registry import describe_all

    rows = describe_all(data_dir)
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        typer.echo(f"{row['name']:<{width}}  {row['task']:<4}  {row['source']}")


def _echo_windows(stats: dict) -> None:
    windowed = stats.get("windowed_sentences") or stats.get("windowed_examples")
    if windowed:
        typer.echo(f"{windowed} example(s) longer than --max-length were split into overlapping windows")


def _format_metrics(metrics: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()
                     if not isinstance(v, dict))


from bertkit.cli_features import register as _register_feature_commands  # noqa: E402

_register_feature_commands(app)  # embed, probe, pretrain mlm, inspect attention|tokens


def main() -> None:
    """Entry point: user mistakes become one line on stderr and exit code 2 (traceback with BERTKIT_DEBUG=1)."""
    try:
        app()
    except BertkitError as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
