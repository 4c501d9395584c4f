"""What ``--ray`` writes: a directory of Parquet files in row order, through Ray's Datasink API."""

from __future__ import annotations

import functools
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir.removal import discard_owned, remove_matching
from bertkit.model_dir.writer_lock import lock_for_writing
from bertkit.ray.datasets import require_ray

PARTS = ("part-[0-9]*.parquet",)  # all the sink writes (a Parquet dataset holds no manifest)


def write_parquet(ds, output: str, *, overwrite: bool = False) -> int:
    """Write ``ds`` as a directory of Parquet files ``part-000000.parquet``, ... in the dataset's
    order (file names sort in row order), through Ray's Datasink API; returns the rows written.
    ``output``: a local directory or a URL (s3://...); refused if it exists and is not empty,
    unless ``overwrite`` (its files are deleted first).

    Why not ``Dataset.write_parquet``: Ray (2.60) writes each task's blocks with pyarrow's
    ``write_dataset(use_threads=True)`` and without its ``preserve_order``, which reorders rows
    inside a file (apache/arrow#26818), whatever ``preserve_order`` Ray Data itself keeps."""
    require_ray()
    filesystem, path = output_filesystem(output)
    check_target(filesystem, path, output, overwrite)
    return write_ordered(ds, output)


def write_ordered(ds, output: str) -> int:
    sink = _ordered_parquet_sink()(output)
    ds.write_datasink(sink)
    return int(sink.rows) if sink.rows is not None else _count_rows(output)


def output_filesystem(output: str):
    import pyarrow.fs as pafs

    if is_url(output):
        try:
            return pafs.FileSystem.from_uri(output)
        except Exception as exc:
            raise BertkitError(
                f"cannot open --output {output} ({exc})", "check the URL (s3://bucket/path, ...)"
            ) from None
    return pafs.LocalFileSystem(), str(Path(output).expanduser().resolve())


def check_target(filesystem, path: str, output: str, overwrite: bool) -> None:
    import pyarrow.fs as pafs

    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise BertkitError(f"--output {output} is a file", "give a directory for the Parquet files")
    if info.type == pafs.FileType.Directory and filesystem.get_file_info(pafs.FileSelector(path, recursive=False)):
        if not overwrite:
            raise BertkitError(
                f"--output {output} already exists and is not empty",
                "choose a new or empty directory (the Python API's overwrite=True replaces its files)",
            )
        remove_matching(filesystem, path, output, PARTS, "--overwrite")


@functools.cache
def _ordered_parquet_sink() -> type:
    from ray.data import Datasink

    class OrderedParquetSink(Datasink):
        """One Parquet file per write task, its blocks written in order (see ``write_parquet``)."""

        def __init__(self, output: str):
            self.output, self.rows = output, None

        def on_write_start(self, *args, **kwargs) -> None:
            filesystem, path = output_filesystem(self.output)
            filesystem.create_dir(path, recursive=True)

        def write(self, blocks, ctx) -> int:
            import pyarrow as pa
            import pyarrow.parquet as pq
            from ray.data.block import BlockAccessor

            tables = [BlockAccessor.for_block(block).to_arrow() for block in blocks]
            tables = [table for table in tables if table.num_rows]
            if not tables:
                return 0
            table = pa.concat_tables(tables, promote_options="default")
            filesystem, path = output_filesystem(self.output)
            pq.write_table(table, f"{path.rstrip('/')}/part-{ctx.task_idx:06}.parquet", filesystem=filesystem)
            return table.num_rows

        def on_write_complete(self, result, *args, **kwargs) -> None:
            self.rows = getattr(result, "num_rows", None)

        def get_name(self) -> str:
            return "OrderedParquet"

    OrderedParquetSink.__module__, OrderedParquetSink.__qualname__ = __name__, "OrderedParquetSink"
    return OrderedParquetSink


def discard_partial(target: str) -> None:
    """A failed run's partial output goes (a local directory only: it was new or empty before)."""
    if not is_url(target):
        discard_owned(Path(target), "removing the failed run's partial output", also=PARTS)


def is_url(path: str) -> bool:
    return "://" in path


def check_output(output: str, overwrite: bool) -> str:
    """The output directory, checked before a cluster starts (``write_parquet`` checks again)."""
    if not output or output == "-":
        raise BertkitError("--ray writes files: --output is required", "e.g. --output predictions/ (a directory)")
    suffix = Path(output.rstrip("/")).suffix.lower()
    if suffix in (".jsonl", ".json", ".csv", ".npy", ".npz", ".txt"):
        raise BertkitError(
            f"--ray writes a directory of Parquet files, not {suffix}",
            "give a directory, e.g. --output predictions/ (read it back with pyarrow or ray.data.read_parquet)",
        )
    if is_url(output):
        return output
    filesystem, path = output_filesystem(output)
    lock_for_writing(Path(path))  # a second run's parts would replace this one's, file by file
    if not overwrite:
        check_target(filesystem, path, output, overwrite=False)
    return path


def _count_rows(output: str) -> int:
    import pyarrow.dataset as pads

    return int(pads.dataset(output, format="parquet").count_rows())


def __getattr__(name: str):
    # A class built on first use (ray is imported lazily), found here when unpickled by name.
    if name == "OrderedParquetSink":
        return _ordered_parquet_sink()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
