"""The `bertkit` command line: parse, call bertkit.api, print. Heavy imports stay inside commands."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from typing import Optional

import typer

from bertkit.errors import BertkitError

try:  # recent Typer vendors click and raises its own exception types
    from typer import TyperException as CommandLineError
except ImportError:  # older Typer raises click's
    from click import ClickException as CommandLineError

DEBUG_ENV = "BERTKIT_DEBUG"
RANK_ENV = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")  # set by torchrun / mpirun
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fine-tune, evaluate and serve BERT-family models on classic NLP tasks.")


class TaskName(str, Enum):
    cls = "cls"
    pair = "pair"
    ner = "ner"
    qa = "qa"


class Precision(str, Enum):
    auto = "auto"
    no = "no"
    fp16 = "fp16"
    bf16 = "bf16"


PRECISION_HELP = ("auto: bf16 where the hardware has it natively (CPU avx512_bf16/amx_bf16, recent GPUs, TPU), "
                  "else no (fp32); bf16; fp16 (GPU).")
THREADS_HELP = "CPU threads for torch; default $OMP_NUM_THREADS, else every core (shared machine: see README)."
DATA_DIR_HELP = "Local data directory with the original files (<dir>/sst2/train.tsv ...); default $BERTKIT_DATA_DIR."


def _show_version(value: bool) -> None:
    if value:
        from bertkit import __version__

        typer.echo(f"bertkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                       help="Print the version and exit.")):
    """Fine-tune, evaluate and serve BERT-family models on classic NLP tasks."""


@app.command()
def finetune(
    task: TaskName = typer.Argument(..., help="cls: one text; pair: two texts; ner: token tags; qa: answer spans."),
    data: str = typer.Option(..., help="A known dataset name (see `bertkit datasets`) or a file path."),
    eval_data: Optional[str] = typer.Option(None, help="Evaluation data; default: the known dataset's dev split."),
    data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP),
    model: str = typer.Option("bert-base-uncased", help="Hub name, local directory, or 'minilm' (bundled, offline)."),
    output: Optional[str] = typer.Option(None, help="Model directory to create (parents too); default "
                                         "runs/<task>-<data>."),
    overwrite: bool = typer.Option(False, help="Replace an existing model directory written by bertkit (only once "
                                   "training succeeded); other directories are never replaced."),
    epochs: float = typer.Option(3.0, help="Training epochs (fractions allowed)."),
    lr: float = typer.Option(2e-5, help="Peak learning rate (BERT paper: 2e-5 .. 5e-5)."),
    batch_size: int = typer.Option(32, help="Training batch size per device (BERT paper: 16 or 32)."),
    eval_batch_size: int = typer.Option(64, help="Batch size for evaluation."),
    max_length: Optional[int] = typer.Option(None, help="Max tokens per sequence; default 128 (qa: 384)."),
    warmup_ratio: float = typer.Option(0.1, help="Share of steps with linear warmup, then linear decay to 0."),
    weight_decay: float = typer.Option(0.01, help="AdamW weight decay (not on biases and LayerNorm)."),
    grad_accum: int = typer.Option(1, help="Gradient accumulation steps."),
    max_grad_norm: float = typer.Option(1.0, help="Gradient clipping norm (0: off)."),
    precision: Precision = typer.Option(Precision.auto, help=PRECISION_HELP),
    threads: Optional[int] = typer.Option(None, help=THREADS_HELP),
    freeze_embeddings: bool = typer.Option(False, "--freeze-embeddings", help="Do not train the word embeddings "
                                           "(faster; see README for the accuracy cost)."),
    save_memory: bool = typer.Option(False, "--save-memory", help="Recompute attention in backward: same numbers, "
                                     "much less memory for long sequences (qa), slower steps."),
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
                         freeze_embeddings=freeze_embeddings, save_memory=save_memory,
                         max_train_samples=max_train_samples, max_eval_samples=max_eval_samples, patience=patience,
                         task_options={k: v for k, v in options.items() if v is not None})
    output = output or os.path.join("runs", f"{task.value}-{os.path.splitext(os.path.basename(data))[0]}")
    result = api.finetune(task.value, data, output, model=model, eval_data=eval_data, data_dir=data_dir,
                          config=config, overwrite=overwrite, threads=threads)
    if not _is_main_process():
        return
    t = result.throughput
    for entry in result.history:
        typer.echo(f"epoch {entry['epoch']}: train loss {entry['train_loss']:.4f}" +
                   "".join(f", {k} {v:.4f}" for k, v in entry.get("metrics", {}).items() if isinstance(v, float)))
    typer.echo(f"train: {result.train_examples} examples ({result.preprocessing.get('train_features')} features), "
               f"{t['examples_per_s']:.1f} examples/s, {t['tokens_per_s']:.0f} tokens/s, "
               f"padding {100 * t['padding_share']:.1f}%, {t['train_seconds']:.1f}s")
    typer.echo(_runtime_line(result.runtime))
    _echo_notices(result.preprocessing.get("train", {}), prefix="train: ")
    _echo_notices(result.preprocessing.get("eval", {}), prefix="eval: ")
    if result.metrics:
        typer.echo(f"best (epoch {result.best_epoch}): {_format_metrics(result.metrics)}")
    typer.echo(f"saved to {result.output_dir}")


@app.command("eval")
def eval_command(
    model_dir: str = typer.Argument(..., help="A directory written by `bertkit finetune`."),
    data: Optional[str] = typer.Option(None, help="Dataset name or file; default: what training evaluated on "
                                       "(the known dataset, or the --eval-data file)."),
    split: Optional[str] = typer.Option(None, help="Split of a known dataset: train, dev (default), test "
                                        "(mnli: dev_mismatched too)."),
    data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP),
    batch_size: int = typer.Option(64, help="Inference batch size."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Use only the first N examples."),
    output: Optional[str] = typer.Option(None, help="Metrics JSON file in an existing directory; default "
                                         "<model_dir>/eval-<name>-<split>.json (a file: eval-<file stem>.json)."),
    precision: Precision = typer.Option(Precision.auto, help=PRECISION_HELP),
    threads: Optional[int] = typer.Option(None, help=THREADS_HELP),
    strict: bool = typer.Option(False, "--strict", help="ner: strict IOB2 entity matching; default: conlleval rules."),
    store_threshold: Optional[bool] = typer.Option(None, "--store-threshold/--no-store-threshold", help="qa v2: store "
                                                   "the tuned null threshold; default: only from a full evaluation "
                                                   "on the model's dev data."),
):
    """Score a fine-tuned model; prints the metrics and writes them as JSON."""
    from bertkit import api

    report = api.evaluate(model_dir, data, split=split, data_dir=data_dir, batch_size=batch_size,
                          max_eval_samples=max_eval_samples, output=output, precision=precision.value,
                          task_options={"strict": True} if strict else None, store_tuned=store_threshold,
                          threads=threads)
    if not _is_main_process():
        return
    typer.echo(f"{report['data']}: {report['examples']} examples")
    typer.echo(_runtime_line(report["runtime"]))
    _echo_notices(report["preprocessing"], report)
    typer.echo(_format_metrics(report["metrics"]))
    for key, value in report.get("tuned", {}).items():
        typer.echo(f"tuned {key} = {value} (stored with the model)")
    typer.echo(f"written to {report['written_to']}")


@app.command()
def predict(
    model_dir: str = typer.Argument(..., help="A directory written by `bertkit finetune`."),
    input: str = typer.Option(..., "--input", help="Text lines (pair: TAB between texts), JSONL, JSON, CSV, TSV; '-' = stdin."),
    output: str = typer.Option("-", help="JSONL output file in an existing directory; '-' = stdout."),
    batch_size: int = typer.Option(64, help="Inference batch size."),
    n_best: Optional[int] = typer.Option(None, help="qa: also return the N best distinct answers."),
    precision: Precision = typer.Option(Precision.auto, help=PRECISION_HELP),
    threads: Optional[int] = typer.Option(None, help=THREADS_HELP),
):
    """Predict for every input row; one JSON line per row, in input order."""
    from bertkit import api
    from bertkit.checkpoint import check_output_file, write_text

    target = None if output == "-" else check_output_file(output)  # before the work, not after it
    rows = api.predict(model_dir, input, batch_size=batch_size, precision=precision.value, threads=threads,
                       n_best=n_best)
    if not _is_main_process():
        return
    typer.echo(_runtime_line(rows.runtime), err=True)
    _echo_notices(rows.preprocessing, err=True)  # stdout stays pure JSONL
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if target is None:
        sys.stdout.write(lines)
    else:
        write_text(target, lines)
        typer.echo(f"{len(rows)} predictions written to {output}", err=True)


@app.command()
def datasets(data_dir: Optional[str] = typer.Option(None, help=DATA_DIR_HELP)):
    """List the known dataset names, their task, and where each would load from."""
    from bertkit.data.registry import describe_all

    rows = describe_all(data_dir)
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        typer.echo(f"{row['name']:<{width}}  {row['task']:<4}  {row['source']}")


def _echo_notices(*reports: dict, prefix: str = "", err: bool = False) -> None:
    """Print the human-readable notices that tasks (truncated texts, windows, skipped rows) and api
    (settings not stored) put under "notices", one line each."""
    for report in reports:
        for notice in report.get("notices", ()):
            typer.echo(f"{prefix}{notice}", err=err)


def _runtime_line(runtime: dict) -> str:
    """e.g. `precision: bf16 (auto: CPU has avx512_bf16), 2 threads`, plus a busy-machine notice."""
    line = (f"precision: {runtime['precision_name']} ({runtime['precision_reason']}), {runtime['threads']} "
            f"thread{'s' if runtime['threads'] != 1 else ''}")
    return line + (f"\n{runtime['notice']}" if runtime.get("notice") else "")


def _is_main_process() -> bool:
    """Under a multi-process launch only rank 0 prints and writes (the others ran the same work)."""
    return int(next((os.environ[k] for k in RANK_ENV if k in os.environ), "0")) == 0


def _format_metrics(metrics: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()
                     if not isinstance(v, dict))


def main() -> None:
    """Entry point: user mistakes, bertkit's own and the command line's, become one line on stderr
    and exit code 2 (traceback with BERTKIT_DEBUG=1)."""
    try:
        # Not standalone: Typer would print its usage errors as a multi-line box and exit itself.
        code = app(prog_name="bertkit", standalone_mode=False)
    except CommandLineError as exc:  # bad values, missing arguments, unknown options
        if type(exc).__name__ == "NoArgsIsHelpError":  # plain `bertkit`: the help, as asked
            typer.echo(exc.ctx.get_help())
            sys.exit(0)
        if os.environ.get(DEBUG_ENV):
            raise
        typer.echo(f"error: {_usage_message(exc)}", err=True)
        sys.exit(2)
    except BertkitError as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        if _is_main_process():
            typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    if code == 130 and _is_main_process():  # Typer turns Ctrl-C into this exit code
        typer.echo("interrupted", err=True)
    sys.exit(code if isinstance(code, int) else 0)  # --help and --version return 0


def _usage_message(exc) -> str:
    """The command line parser's message on one line, with a hint naming the command's own help."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "bertkit"
    if ctx is None or ctx.parent is None:  # some parse errors carry no or the root context: find the command
        commands = {info.name or info.callback.__name__ for info in app.registered_commands}
        command = next((f"bertkit {arg}" for arg in sys.argv[1:] if arg in commands), command)
    return f"{message} (hint: see `{command} --help`)"


if __name__ == "__main__":
    main()
