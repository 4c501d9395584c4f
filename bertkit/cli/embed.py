"""`bertkit embed MODEL --input FILE --output FILE`: one vector per row (or per word), in input order.

Row vectors stream in chunks (bertkit.api.embedding.embed_stream); per-word vectors and .npz are
built in memory (bertkit.api.embedding.embed).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, echo_runtime
from bertkit.cli.on_ray import check_ray_flags, run_on_ray
from bertkit.cli.options import chosen, command, from_dataclass, positional
from bertkit.errors import BertkitError
from bertkit.options import MODEL_HELP, EmbeddingOptions, StreamOptions

MODEL = positional("model", Annotated[str, typer.Argument(help=MODEL_HELP, show_default=False)])


def embed(model: str, **values):
    """One vector per input row (or per word), in input order, from any checkpoint; rows stream in chunks."""
    from bertkit.api import embedding as features

    # validated here, not only by the api: the Ray path and the in-memory choice read them first
    options = chosen(values, EmbeddingOptions).validate("bertkit embed")
    stream = chosen(values, StreamOptions).validate("bertkit embed")
    check_ray_flags(stream, per_word=options.per_word)
    if stream.ray:
        run_on_ray("embed", model, stream, options)
        return
    if options.per_word or options.output.lower().endswith(".npz"):  # ragged per-word vectors, one zip: in memory
        if stream.resume:
            raise BertkitError(
                f"--resume streams rows; {'--per-word' if options.per_word else '.npz'} is built in memory",
                "drop --resume, or write .npy/.parquet/.jsonl row vectors",
            )
        return _embed_in_memory(features, model, options)
    stream.long_lived = True
    summary = features.embed_stream(model, options, stream)
    echo_notices({"notices": summary.notices}, err=True)
    if summary.windowed_rows:
        typer.echo(
            _windowed_line(summary.windowed_rows, False, summary.stride, summary.pooling, options.max_length), err=True
        )
    typer.echo(
        f"embedded {summary.rows:,} rows: dim {summary.dim}, pooling {summary.pooling}, "
        f"{summary.rows_per_second:,.1f} rows/s" + (f"; written to {summary.written_to}" if summary.written_to else ""),
        err=True,
    )
    if summary.runtime:
        echo_runtime(summary.runtime, err=True)  # stderr: stdout may carry the vectors (--output -)


def _embed_in_memory(features, model: str, options: EmbeddingOptions):
    output = options.output
    result = features.embed(model, options)
    if output == "-":
        sys.stdout.writelines(features.jsonl_lines(result))
    if result.windowed_rows:
        typer.echo(
            _windowed_line(result.windowed_rows, options.per_word, result.stride, result.pooling, options.max_length),
            err=True,
        )
    words = f", {sum(len(w) for w in result.words)} words" if result.words else ""
    typer.echo(
        f"embedded {result.rows} rows{words}: dim {result.dim}, pooling {result.pooling}, {result.features} "
        f"model inputs in {result.seconds:.2f}s ({result.rows / max(result.seconds, 1e-9):.1f} rows/s)"
        + (f"; written to {result.written_to}" if result.written_to else ""),
        err=True,
    )
    echo_runtime(result.runtime, err=True)  # stderr: stdout may carry the vectors (--output -)


def _windowed_line(rows: int, per_word: bool, stride, pooling: str, max_length: int) -> str:
    unit = "sentence(s)" if per_word else "row(s)"
    how = (
        "each word's vector comes from the window where it has the most context"
        if per_word
        else f"{stride} tokens of overlap; their vectors were combined ({_combine_note(pooling)})"
    )
    return f"{rows} {unit} longer than --max-length {max_length} were split into overlapping windows ({how})"


def _combine_note(pooling: str) -> str:
    return {"max": "element-wise max", "cls": "mean of the windows' [CLS] vectors"}.get(
        pooling, "mean weighted by window length"
    )


app.command("embed")(command(embed, from_dataclass(EmbeddingOptions) + from_dataclass(StreamOptions), (MODEL,)))
