"""CLI commands for features: probe, pretrain mlm, inspect attention|tokens (embed: bertkit/cli/embed.py).

Thin Typer layer over bertkit.api.probing, bertkit.api.pretraining and bertkit.api.inspection;
heavy imports stay inside the commands so `bertkit --help` stays instant.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from typing import Optional

import typer
from typer.core import TyperGroup

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, format_metrics, runtime_line
from bertkit.cli.options import Precision, command, config_file_parameter, from_dataclass, from_task, plain, split
from bertkit.config import PRECISION_HELP, RunOptions, TrainConfig

POOLING_HELP = ("cls | mean | max | last4-concat | last4-sum | layer:N (N as in hidden_states: 0 = embeddings, "
                "-1 = last). mean/max use real tokens only; the layer modes average their layer(s) over the tokens. "
                "Default: mean (one vector per row), the last layer (--per-word).")
DATA_DIR_HELP = "Local data directory with the original files (<dir>/sst2/train.tsv ...); default $BERTKIT_DATA_DIR."
MODEL_HELP = "Hub name, local directory (pretrained, fine-tuned, probe or pretrain output), or 'minilm'."


class ProbeTask(str, Enum):
    cls = "cls"
    pair = "pair"


pretrain_app = typer.Typer(cls=None, no_args_is_help=True,
                            help="Continued pre-training of a BERT-family checkpoint.")
inspect_app = typer.Typer(no_args_is_help=True, help="Look inside a model: word pieces, attention heads.")


def probe(
    task: ProbeTask = typer.Argument(..., help="cls: one text; pair: two texts."),
    data: str = typer.Option(..., help="A known dataset name (see `bertkit datasets`) or a file path."),
    eval_data: Optional[str] = typer.Option(None, help="Evaluation data; default: the known dataset's dev split."),
    data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP),
    model: str = typer.Option("bert-base-uncased", help=MODEL_HELP),
    output: Optional[str] = typer.Option(None, help="Model directory to create; default runs/probe-<task>-<data>."),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace a non-empty --output directory (only once the probe succeeded)."),
    pooling: Optional[str] = typer.Option(None, help=POOLING_HELP),
    max_length: Optional[int] = typer.Option(None, help="Max tokens per row (truncated, as in finetune); default 128."),
    batch_size: int = typer.Option(64, help="Inference batch size for the frozen encoder."),
    holdout: float = typer.Option(0.1, help="Share of the training rows held out to choose C (then refit on all)."),
    max_train_samples: Optional[int] = typer.Option(None, help="Use only the first N training examples."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Use only the first N evaluation examples."),
    seed: int = typer.Option(42, help="Seed of the held-out split."),
    text_column: Optional[str] = typer.Option(None, help="Column with the (first) text."),
    text_pair_column: Optional[str] = typer.Option(None, help="pair: column with the second text."),
    label_column: Optional[str] = typer.Option(None, help="Column with the label."),
    precision: Precision = typer.Option(Precision.auto, help=PRECISION_HELP),
):
    """Frozen features + logistic regression; saves a directory that `eval` and `predict` take."""
    from bertkit.api.probing import probe as run_probe

    options = {"text_column": text_column, "text_pair_column": text_pair_column, "label_column": label_column}
    output = output or os.path.join("runs", f"probe-{task.value}-{os.path.splitext(os.path.basename(data))[0]}")
    result = run_probe(task.value, data, output, model=model, eval_data=eval_data, data_dir=data_dir, pooling=pooling,
                       max_length=max_length, batch_size=batch_size, max_train_samples=max_train_samples,
                       max_eval_samples=max_eval_samples, holdout=holdout, seed=seed, precision=precision.value,
                       overwrite=overwrite, task_options={k: v for k, v in options.items() if v is not None})
    search = ", ".join(f"{row['C']:g}: {row['holdout_score']:.4f}" for row in result.c_search)
    typer.echo(f"held-out score by C ({holdout:.0%} of training rows): {search}")
    s = result.seconds
    typer.echo(f"probe: {result.train_examples} examples, pooling {result.pooling} (dim {result.dim}), C {result.c:g}; "
               f"embedding {s['embed_seconds']:.1f}s ({s['embedded_rows_per_s']:.0f} rows/s), fit {s['fit_seconds']:.1f}s")
    if result.metrics:
        typer.echo(f"eval ({result.eval_examples} examples): {format_metrics(result.metrics)}")
    typer.echo(runtime_line(result.runtime))
    typer.echo(f"saved to {result.output_dir}")


PRETRAIN_DEFAULTS = {"lr": 5e-5}  # continued pre-training takes larger steps than fine-tuning
PRETRAIN_HELP = {"data": "Text file (documents separated by blank lines) or JSONL with 'text'.",
                 "eval_data": "Held-out text; default: --eval-share of the documents.",
                 "output": "Model directory to create; default runs/mlm-<data>.",
                 "max_train_samples": "Use only the first N training documents.",
                 "max_eval_samples": "Use only the first N held-out documents.",
                 "max_length": "Tokens per block, [CLS] and [SEP] included; default 128."}


def _pretrain_mlm(**values):
    """Continued masked-LM pre-training; the output directory is a --model for `bertkit finetune`."""
    from bertkit.api.pretraining import pretrain_mlm as run_pretrain
    from bertkit.engine.interrupts import TrainingInterrupted

    values = plain(values)
    values.pop("config")  # read already: its values arrived as the options' defaults
    run = split(values, RunOptions)
    data, output = run.pop("data"), run.pop("output")
    from bertkit.tasks.mlm import MaskedLMTask

    task_options = {o.name: values.pop(o.name) for o in MaskedLMTask.options_for("pretrain")}
    task_options = {k: v for k, v in task_options.items() if v is not None}
    config = TrainConfig(**values)
    output = output or os.path.join("runs", f"mlm-{os.path.splitext(os.path.basename(data))[0]}")
    try:
        result = run_pretrain(data, output, config=config, **task_options, **run)
    except TrainingInterrupted as stop:
        typer.echo(f"interrupted: {stop}; to continue, run the same command with --resume", err=True)
        sys.exit(130)
    if result.resumed_from:
        typer.echo(f"resumed from {result.resumed_from}")
    for part, stats in result.preprocessing.items():
        if isinstance(stats, dict) and "blocks" in stats:
            typer.echo(f"{part}: {stats['documents']} documents, {stats['tokens']} tokens, packed into "
                       f"{stats['blocks']} blocks of at most {config.max_length or 128} tokens")
    if result.before:
        typer.echo(f"before: held-out {format_metrics(result.before)}")
    for entry in result.history:
        typer.echo(f"epoch {entry['epoch']}: train loss {entry['train_loss']:.4f}" +
                   (f", held-out {format_metrics(entry['metrics'])}" if entry.get("metrics") else ""))
    t = result.throughput
    typer.echo(f"train: {t['examples_per_s']:.1f} blocks/s, {t['tokens_per_s']:.0f} tokens/s, {t['train_seconds']:.1f}s;"
               f" pooler {result.pooler}")
    typer.echo(runtime_line(result.runtime))
    echo_notices({"notices": result.notices})
    typer.echo(f"saved to {result.output_dir}")


def _pretrain_parameters() -> list:
    from bertkit.tasks.mlm import MaskedLMTask

    return (from_dataclass(RunOptions, helps=PRETRAIN_HELP) + from_dataclass(TrainConfig, PRETRAIN_DEFAULTS,
            helps=PRETRAIN_HELP) + from_task(MaskedLMTask, "pretrain") + [config_file_parameter("mlm", "pretrain")])


class PretrainGroup(TyperGroup):
    """`pretrain mlm` is built when asked for: its options come from the mlm task's module."""

    def list_commands(self, ctx):
        return ["mlm"]

    def get_command(self, ctx, name):
        if name != "mlm":
            return None
        single = typer.Typer(add_completion=False)
        single.command(name="mlm")(command(_pretrain_mlm, _pretrain_parameters()))
        return typer.main.get_command(single)


pretrain_app = typer.Typer(cls=PretrainGroup, no_args_is_help=True, rich_markup_mode=None,
                           help="Continued pre-training of a BERT-family checkpoint.")


@inspect_app.command("attention")
def inspect_attention(
    model: str = typer.Argument(..., help=MODEL_HELP),
    text: str = typer.Option(..., help="The text to run."),
    text_pair: Optional[str] = typer.Option(None, help="A second text (segment 1)."),
    layer: int = typer.Option(-1, help="Layer 1..L as in hidden_states (-1: the last)."),
    head: int = typer.Option(0, help="Head 0..H-1."),
    all_heads: bool = typer.Option(False, "--all-heads", help="A grid with every head of the layer."),
    as_json: bool = typer.Option(False, "--json", help="Write the raw weights as JSON instead of a figure."),
    output: Optional[str] = typer.Option(None, help="Figure file (.png, .svg, .pdf); with --json a JSON file "
                                         "(default: stdout)."),
    max_length: int = typer.Option(128, help="Longer inputs are truncated (and it is said so)."),
    dpi: int = typer.Option(100, help="Figure resolution."),
):
    """Heatmap of one attention head (tokens on both axes), every head of a layer, or the raw weights."""
    from bertkit.api import inspection
    from bertkit.model_dir import write_text

    target = inspection.check_output(output, model, figure=not as_json)
    result = inspection.attention(model, text, text_pair, layer=layer, head=None if all_heads else head,
                                  max_length=max_length)
    if result["truncated"]:
        typer.echo(f"the input was truncated to --max-length {max_length} tokens", err=True)
    if as_json:
        payload = json.dumps(result, ensure_ascii=False) + "\n"
        if target is None:
            sys.stdout.write(payload)
        else:
            write_text(target, payload)
            typer.echo(f"weights written to {output}", err=True)
        return
    width, height = inspection.plot_attention(result, target, dpi=dpi)
    heads = "all heads" if all_heads else f"head {result['heads'][0]}"
    typer.echo(f"layer {result['layer']}, {heads}, {len(result['tokens'])} tokens: {width}x{height} px written to "
               f"{output}", err=True)


@inspect_app.command("tokens")
def inspect_tokens(
    model: str = typer.Argument(..., help=MODEL_HELP),
    text: str = typer.Option(..., help="The text to tokenize."),
    text_pair: Optional[str] = typer.Option(None, help="A second text (segment 1)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object instead of a table."),
    max_length: int = typer.Option(512, help="Longer inputs are truncated (and it is said so)."),
):
    """Word pieces with ids, segment ids, positions, word index and character offsets."""
    from bertkit.api import inspection

    result = inspection.tokens(model, text, text_pair, max_length=max_length)
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
    else:
        width = max(len(row["token"]) for row in result["tokens"])
        typer.echo(f"{'pos':>4}  {'token':<{width}}  {'id':>7}  seg  word  chars")
        for row in result["tokens"]:
            word = "-" if row["word"] is None else row["word"]
            typer.echo(f"{row['position']:>4}  {row['token']:<{width}}  {row['id']:>7}  {row['segment']:>3}  "
                       f"{word:>4}  {row['start']}-{row['end']}")
    if result["truncated"]:
        typer.echo(f"the input was truncated to --max-length {max_length} tokens", err=True)


app.command("probe")(probe)
app.add_typer(pretrain_app, name="pretrain")
app.add_typer(inspect_app, name="inspect")
