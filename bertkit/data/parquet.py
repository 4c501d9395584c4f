"""Parquet input (pyarrow, a dependency of `datasets`): a whole file's records, its records one
record batch at a time, its row count from the metadata. Records are what ``Table.to_pylist``
gives: a list column a list, a struct column a dict, so token/tag lists and SQuAD's answers read as
they do from JSON Lines."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from bertkit.errors import BertkitError

BATCH_ROWS = 4096


def read_records(path: Path) -> list[dict]:
    """Every record of the file; one clear error for a file pyarrow cannot read."""
    check_file(path)
    import pyarrow.parquet as pq

    with unreadable(path):
        table = pq.read_table(path)
    if table.num_rows == 0:
        raise BertkitError(f"{path} has no data rows", f"columns found: {', '.join(table.column_names) or 'none'}")
    return table.to_pylist()


def batches(path: Path, opened=None) -> Iterator[tuple[int, dict]]:
    """(row number from 1, record), one record batch at a time (``opened``: unused, text files' hook)."""
    import pyarrow.parquet as pq

    with unreadable(path):
        number = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            for record in batch.to_pylist():
                number += 1
                yield number, record


def count_rows(path: Path) -> int:
    """The file's rows, from its metadata alone."""
    import pyarrow.parquet as pq

    with unreadable(path):
        return pq.ParquetFile(path).metadata.num_rows


def columns(path: Path) -> list[str]:
    """The file's column names, from its schema alone."""
    import pyarrow.parquet as pq

    with unreadable(path):
        return list(pq.read_schema(path).names)


class unreadable:
    """Turns pyarrow's errors (a damaged or truncated file, not Parquet at all) into one BertkitError."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, trace):
        import pyarrow as pa

        if exc is None or isinstance(exc, (BertkitError, GeneratorExit)):
            return False
        if isinstance(exc, PermissionError):
            raise BertkitError(f"cannot read {self.path} (Permission denied)", "check the file's permissions") from exc
        if isinstance(exc, (pa.ArrowException, OSError)):
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise BertkitError(f"{self.path} is not a readable Parquet file ({said})", "check the file") from exc
        return False


def check_file(path: Path) -> None:
    """A regular file that exists (pyarrow's own errors for these say less)."""
    if path.is_dir():
        raise BertkitError(f"{path} is a directory", "pass the data file itself")
    if path.exists() and not path.is_file():
        raise BertkitError(f"{path} is not a regular file", "pass the data file itself")
    if not path.is_file():
        raise BertkitError(f"file not found: {path}", "check the path")
    if path.stat().st_size == 0:
        raise BertkitError(f"file is empty: {path}", "point at a file with data rows")
