"""CLI commands for features: probe, pretrain mlm, inspect attention|tokens (embed: bertkit/cli/embed.py;
pretrain bert: bertkit/cli/pretraining.py).

Thin Typer layer over bertkit.api.probing, bertkit.api.pretraining and bertkit.api.inspection;
heavy imports stay inside the commands so `bertkit --help` stays instant.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Annotated

import typer
from typer.core import TyperGroup

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, echo_runtime, format_metrics
from bertkit.cli.options import (
    built_late,
    chosen,
    command,
    config_file_parameter,
    from_dataclass,
    from_registry,
    from_task,
    positional,
    single_command,
    task_values,
)
from bertkit.cli.pretraining import PRETRAIN_DEFAULTS, PRETRAIN_HELP, echo_history, pretrain_bert, run_pretraining
from bertkit.cli.pretraining import parameters as bert_parameters
from bertkit.options import (
    LORA_FIELDS,
    MAX_LENGTHS,
    MODEL_HELP,
    AttentionOptions,
    DatasetOptions,
    InspectOptions,
    ProbeOptions,
    RunOptions,
    TrainConfig,
)


class ProbeTask(str, Enum):
    cls = "cls"
    pair = "pair"


inspect_app = typer.Typer(no_args_is_help=True, help="Look inside a model: word pieces, attention heads.")
PROBE_ABOUT = "Frozen features + logistic regression; saves a directory that `eval` and `predict` take."
PROBE_RUN = ("data", "eval_data", "data_dir", "model", "output", "overwrite")  # finetune's, worded for a probe
PROBE_HELP = {
    "model": MODEL_HELP,
    "output": "Model directory to create; default runs/probe-<task>-<data>.",
    "overwrite": "Replace a non-empty --output directory (only once the probe succeeded).",
    "seed": "Seed of the held-out split.",
}
PROBE_TRAIN = ("max_train_samples", "max_eval_samples", "seed")
PROBE_TASK = positional("task", Annotated[ProbeTask, typer.Argument(help="cls: one text; pair: two texts.")])


def _probe_parameters(with_tasks: bool) -> list:
    """finetune's data and output options, the probe's own, and the probe-tagged task options (columns)."""
    own = (
        from_dataclass(RunOptions, only=PROBE_RUN, helps=PROBE_HELP)
        + from_dataclass(TrainConfig, only=PROBE_TRAIN, helps=PROBE_HELP)
        + from_dataclass(DatasetOptions)
        + from_dataclass(ProbeOptions)
    )
    return own + (from_registry("probe", taken=(p.name for p in own)) if with_tasks else [])


def probe(task: ProbeTask, **values):
    """Frozen features + logistic regression; saves a directory that `eval` and `predict` take."""
    from bertkit.api.probing import probe as run_probe

    task_options = task_values(values, set(values) - _PROBE_OWN)
    options = chosen(values, ProbeOptions)  # validated by the api
    dataset = chosen(values, DatasetOptions)
    run = chosen(values, RunOptions)
    config = TrainConfig(**vars(dataset), **values, task_options=task_options)  # PROBE_TRAIN's
    result = run_probe(task.value, run, config, options)
    search = ", ".join(f"{row['C']:g}: {row['holdout_score']:.4f}" for row in result.c_search)
    typer.echo(f"held-out score by C ({options.holdout:.0%} of training rows): {search}")
    s = result.seconds
    typer.echo(
        f"probe: {result.train_examples} examples, pooling {result.pooling} (dim {result.dim}), "
        f"C {result.c:g}; embedding {s['embed_seconds']:.1f}s ({s['embedded_rows_per_s']:.0f} rows/s), "
        f"fit {s['fit_seconds']:.1f}s"
    )
    if result.metrics:
        typer.echo(f"eval ({result.eval_examples} examples): {format_metrics(result.metrics)}")
    echo_runtime(result.runtime)
    typer.echo(f"saved to {result.output_dir}")


_PROBE_OWN = {p.name for p in _probe_parameters(with_tasks=False)}


def _pretrain_mlm(**values):
    """Continued masked-LM pre-training; the output directory is a --model for `bertkit finetune`."""
    from bertkit.api.pretraining import pretrain_mlm as run_pretrain
    from bertkit.tasks.mlm import MaskedLMTask

    result, config = run_pretraining(values, MaskedLMTask, run_pretrain, "mlm-")
    for part, stats in result.preprocessing.items():
        if isinstance(stats, dict) and "blocks" in stats:
            typer.echo(
                f"{part}: {stats['documents']} documents, {stats['tokens']} tokens, packed into "
                f"{stats['blocks']} blocks of at most {config.max_length or 128} tokens"
            )
    echo_history(result)
    t = result.throughput
    typer.echo(
        f"train: {t['examples_per_s']:.1f} blocks/s, {t['tokens_per_s']:.0f} tokens/s, "
        f"{t['train_seconds']:.1f}s; pooler {result.pooler}"
    )
    echo_runtime(result.runtime)
    echo_notices({"notices": result.notices})
    typer.echo(f"saved to {result.output_dir}")


def _pretrain_parameters() -> list:
    from bertkit.tasks.mlm import MaskedLMTask

    return (
        from_dataclass(RunOptions, helps=PRETRAIN_HELP)
        + from_dataclass(TrainConfig, PRETRAIN_DEFAULTS, exclude=LORA_FIELDS, helps=PRETRAIN_HELP)  # finetune's
        + from_task(MaskedLMTask, "pretrain")
        + [config_file_parameter("mlm", "pretrain")]
    )


# name -> (run, a function returning its parameters)
PRETRAIN_COMMANDS = {"mlm": (_pretrain_mlm, _pretrain_parameters), "bert": (pretrain_bert, bert_parameters)}


class PretrainGroup(TyperGroup):
    """`pretrain mlm|bert` is built when asked for: its options come from the task's module."""

    def list_commands(self, ctx):
        return list(PRETRAIN_COMMANDS)

    def get_command(self, ctx, name):
        if name not in PRETRAIN_COMMANDS:
            return None
        run, parameters = PRETRAIN_COMMANDS[name]
        single = typer.Typer(add_completion=False)
        single.command(name=name)(command(run, parameters()))
        return typer.main.get_command(single)


pretrain_app = typer.Typer(
    cls=PretrainGroup,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Continued pre-training of a BERT-family checkpoint.",
)


INSPECTED = positional("model", Annotated[str, typer.Argument(help=MODEL_HELP, show_default=False)])


def inspect_attention(model: str, **values):
    """Heatmap of one attention head (tokens on both axes), every head of a layer, or the raw weights."""
    from bertkit.api import inspection
    from bertkit.model_dir import write_text

    given = chosen(values, InspectOptions).validate("bertkit inspect attention")
    drawn = chosen(values, AttentionOptions)
    target = inspection.check_output(drawn.output, model, figure=not given.as_json)
    result = inspection.attention(
        model,
        given.text,
        given.text_pair,
        layer=drawn.layer,
        head=None if drawn.all_heads else drawn.head,
        max_length=given.max_length,
    )
    if result["truncated"]:
        typer.echo(_truncation_line(result, given.max_length), err=True)
    if given.as_json:
        payload = json.dumps(result, ensure_ascii=False) + "\n"
        if target is None:
            sys.stdout.write(payload)
        else:
            write_text(target, payload)
            typer.echo(f"weights written to {drawn.output}", err=True)
        return
    width, height = inspection.plot_attention(result, target, dpi=drawn.dpi)
    heads = "all heads" if drawn.all_heads else f"head {result['heads'][0]}"
    typer.echo(
        f"layer {result['layer']}, {heads}, {len(result['tokens'])} tokens: {width}x{height} px written to "
        f"{drawn.output}",
        err=True,
    )


def inspect_tokens(model: str, **values):
    """Word pieces with ids, segment ids, positions, word index and character offsets."""
    from bertkit.api import inspection

    given = chosen(values, InspectOptions).validate("bertkit inspect tokens")
    result = inspection.tokens(model, given.text, given.text_pair, max_length=given.max_length)
    if given.as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
    else:
        width = max(len(row["token"]) for row in result["tokens"])
        typer.echo(f"{'pos':>4}  {'token':<{width}}  {'id':>7}  seg  word  chars")
        for row in result["tokens"]:
            word = "-" if row["word"] is None else row["word"]
            typer.echo(
                f"{row['position']:>4}  {row['token']:<{width}}  {row['id']:>7}  {row['segment']:>3}  "
                f"{word:>4}  {row['start']}-{row['end']}"
            )
    if result["truncated"]:
        typer.echo(_truncation_line(result, given.max_length), err=True)


def _truncation_line(result: dict, max_length: int) -> str:
    """One line: the cut, and what a --long-text head-tail or windows model reads instead."""
    cut = f"the input was truncated to --max-length {max_length} tokens"
    return f"{cut}; {result['long_text']}" if result.get("long_text") else cut


TOKENS_HELP = {"text": "The text to tokenize.", "as_json": "One JSON object instead of a table."}
inspect_app.command("attention")(
    command(inspect_attention, from_dataclass(InspectOptions) + from_dataclass(AttentionOptions), (INSPECTED,))
)
inspect_app.command("tokens")(
    command(
        inspect_tokens,
        from_dataclass(InspectOptions, {"max_length": MAX_LENGTHS["inspect tokens"][0]}, helps=TOKENS_HELP),
        (INSPECTED,),
    )
)
_PROBE = (PROBE_TASK,)
app.command("probe", help=PROBE_ABOUT)(command(probe, _probe_parameters(with_tasks=False), _PROBE))
built_late("probe", lambda: single_command("probe", probe, _probe_parameters(with_tasks=True), _PROBE, PROBE_ABOUT))
app.add_typer(pretrain_app, name="pretrain")
app.add_typer(inspect_app, name="inspect")
