"""`bertkit embed MODEL --input FILE --output FILE`: one vector per row (or per word), in input order.

Row vectors stream in chunks (bertkit.api.embedding.embed_stream); per-word vectors and .npz are
built in memory (bertkit.api.embedding.embed).
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from bertkit.cli.app import app
from bertkit.cli.common import echo_notices, runtime_line
from bertkit.cli.features import MODEL_HELP, POOLING_HELP
from bertkit.cli.on_ray import check_ray_flags, run_on_ray
from bertkit.cli.options import Actors, ChunkRows, Precision, Ray, RayAddress, Resume, ThreadsOption
from bertkit.config import PRECISION_HELP
from bertkit.errors import BertkitError

CHUNK_ROWS = 10_000


@app.command("embed")
def embed(
    model: str = typer.Argument(..., help=MODEL_HELP),
    input: str = typer.Option(..., "--input", help="Text lines (TAB: a pair), JSONL, JSON, CSV, TSV, Parquet; a "
                              "directory or glob of shards; '-' = stdin. --per-word also reads 'tokens' lists."),
    output: str = typer.Option(..., help=".npy (rows x dim), .parquet (id + vector), .jsonl, .npz (vectors + ids, "
                               "built in memory); '-' = JSONL on stdout; --ray: a directory of Parquet files."),
    pooling: Optional[str] = typer.Option(None, help=POOLING_HELP),
    per_word: bool = typer.Option(False, "--per-word", help="One vector per word, at its first sub-word (as in ner)."),
    max_length: int = typer.Option(128, help="Tokens per window; longer inputs become overlapping windows."),
    stride: Optional[int] = typer.Option(None, help="Tokens shared by consecutive windows of a long row (default "
                                         "max-length/4; --per-word windows share half their words, as in ner)."),
    batch_size: int = typer.Option(64, help="Inference batch size."),
    normalize: bool = typer.Option(False, "--normalize", help="Scale every vector to unit length (for cosine)."),
    text_column: Optional[str] = typer.Option(None, help="Column with the text (default: sentence/text/...)."),
    text_pair_column: Optional[str] = typer.Option(None, help="Column with a second text, embedded as a pair."),
    id_column: Optional[str] = typer.Option(None, help="Column with row ids (default: id/idx/guid/index, else the "
                                            "row number from 0)."),
    precision: Precision = typer.Option(Precision.auto, help=PRECISION_HELP),
    threads: ThreadsOption = None,
    chunk_rows: ChunkRows = CHUNK_ROWS,
    resume: Resume = False,
    ray: Ray = False,
    ray_address: RayAddress = None,
    actors: Actors = 2,
):
    """One vector per input row (or per word), in input order, from any checkpoint; rows stream in chunks."""
    from bertkit.api import embedding as features

    check_ray_flags(ray, ray_address, actors, chunk_rows=chunk_rows, default_chunk_rows=CHUNK_ROWS, resume=resume,
                    per_word=per_word)
    if ray:
        run_on_ray("embed", model, input, output, address=ray_address, actors=actors, batch_size=batch_size,
                   pooling=pooling, max_length=max_length, stride=stride, normalize=normalize, precision=precision.value,
                   threads=threads, text_column=text_column, text_pair_column=text_pair_column, id_column=id_column)
        return
    if per_word or output.lower().endswith(".npz"):  # ragged per-word vectors, and one zip: built in memory
        if resume:
            raise BertkitError(f"--resume streams rows; {'--per-word' if per_word else '.npz'} is built in memory",
                               "drop --resume, or write .npy/.parquet/.jsonl row vectors")
        return _embed_in_memory(features, model, input, output, pooling, per_word, max_length, stride, batch_size,
                                normalize, text_column, text_pair_column, id_column, precision, threads)
    summary = features.embed_stream(model, input, None if output == "-" else output, chunk_rows=chunk_rows,
                                    resume=resume, pooling=pooling, max_length=max_length, stride=stride,
                                    batch_size=batch_size, normalize=normalize, text_column=text_column,
                                    text_pair_column=text_pair_column, id_column=id_column,
                                    precision=precision.value, threads=threads, long_lived=True)
    echo_notices({"notices": summary.notices}, err=True)
    if summary.windowed_rows:
        typer.echo(_windowed_line(summary.windowed_rows, False, summary.stride, summary.pooling, max_length), err=True)
    typer.echo(f"embedded {summary.rows:,} rows: dim {summary.dim}, pooling {summary.pooling}, "
               f"{summary.rows_per_second:,.1f} rows/s" + (f"; written to {summary.written_to}"
                                                          if summary.written_to else ""), err=True)
    if summary.runtime:
        typer.echo(runtime_line(summary.runtime), err=True)  # stderr: stdout may carry the vectors (--output -)


def _embed_in_memory(features, model, input, output, pooling, per_word, max_length, stride, batch_size, normalize,
                     text_column, text_pair_column, id_column, precision, threads):
    result = features.embed(model, input, None if output == "-" else output, pooling=pooling, per_word=per_word,
                            max_length=max_length, stride=stride, batch_size=batch_size, normalize=normalize,
                            text_column=text_column, text_pair_column=text_pair_column, id_column=id_column,
                            precision=precision.value, threads=threads)
    if output == "-":
        sys.stdout.writelines(features.jsonl_lines(result))
    if result.windowed_rows:
        typer.echo(_windowed_line(result.windowed_rows, per_word, result.stride, result.pooling, max_length), err=True)
    words = f", {sum(len(w) for w in result.words)} words" if result.words else ""
    typer.echo(f"embedded {result.rows} rows{words}: dim {result.dim}, pooling {result.pooling}, {result.features} "
               f"model inputs in {result.seconds:.2f}s ({result.rows / max(result.seconds, 1e-9):.1f} rows/s)"
               + (f"; written to {result.written_to}" if result.written_to else ""), err=True)
    typer.echo(runtime_line(result.runtime), err=True)  # stderr: stdout may carry the vectors (--output -)


def _windowed_line(rows: int, per_word: bool, stride, pooling: str, max_length: int) -> str:
    unit = "sentence(s)" if per_word else "row(s)"
    how = ("each word's vector comes from the window where it has the most context" if per_word else
           f"{stride} tokens of overlap; their vectors were combined ({_combine_note(pooling)})")
    return f"{rows} {unit} longer than --max-length {max_length} were split into overlapping windows ({how})"


def _combine_note(pooling: str) -> str:
    return {"max": "element-wise max", "cls": "mean of the windows' [CLS] vectors"}.get(
        pooling, "mean weighted by window length")
