"""Output formats of `predict` and `embed`, written one chunk at a time (a part file per chunk)
and assembled into the final file at the end, reading one part at a time.

Prediction rows go to JSONL or Parquet (the input's id and text columns, then the prediction
fields; nested fields such as multi-label probabilities become Parquet structs). Vectors go to
.npy (rows x dim float32), JSONL ({"id", "vector"}) or Parquet (id, a fixed-size float32 list).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from bertkit.errors import BertkitError

ROW_SUFFIXES = (".jsonl", ".parquet")
VECTOR_SUFFIXES = (".npy", ".jsonl", ".parquet")


def sink_for(path: Path | None, vectors: bool) -> "Sink":
    suffix = path.suffix.lower() if path is not None else ".jsonl"
    if vectors:
        return {".npy": NpyVectors, ".jsonl": JsonlVectors, ".parquet": ParquetVectors}[suffix]()
    return ParquetRows() if suffix == ".parquet" else JsonlRows()  # predict has always written JSONL by default


class Sink:
    part_suffix = ".jsonl"

    def lines(self, payload) -> str:
        """JSONL text of one chunk (what standard output receives)."""
        raise NotImplementedError

    def write_part(self, payload, handle) -> None:
        handle.write(self.lines(payload).encode("utf-8"))

    def assemble(self, parts: list[Path], handle) -> None:
        for part in parts:
            with open(part, "rb") as source:
                shutil.copyfileobj(source, handle, 1 << 20)


class JsonlRows(Sink):
    def lines(self, rows) -> str:
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


class JsonlVectors(Sink):
    def lines(self, payload) -> str:
        ids, vectors = payload
        return "".join(
            json.dumps({"id": i, "vector": floats(v)}, ensure_ascii=False) + "\n" for i, v in zip(ids, vectors)
        )


def floats(vector) -> list[float]:
    """Seven significant digits: float32's precision, without its binary noise."""
    return [float(f"{x:.7g}") for x in np.asarray(vector).tolist()]


class _Parquet(Sink):
    part_suffix = ".parquet"

    def table(self, payload):
        raise NotImplementedError

    def write_part(self, payload, handle) -> None:
        import pyarrow.parquet as pq

        pq.write_table(self.table(payload), handle)

    def assemble(self, parts: list[Path], handle) -> None:
        """One file, one row group per chunk; a column that one chunk left all-null (a field present
        only on some rows, such as `truncated`) takes the type the other chunks give it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.unify_schemas([pq.read_schema(p) for p in parts], promote_options="permissive")
        with pq.ParquetWriter(handle, schema) as writer:
            for part in parts:
                table = pq.read_table(part)
                for name in schema.names:
                    if name not in table.column_names:
                        table = table.append_column(name, pa.nulls(len(table), schema.field(name).type))
                writer.write_table(table.select(schema.names).cast(schema))

    def lines(self, payload) -> str:  # standard output is always JSONL
        raise BertkitError("Parquet cannot be written to standard output", "give --output FILE.parquet")


class ParquetRows(_Parquet):
    def table(self, rows):
        import pyarrow as pa

        names = list(dict.fromkeys(key for row in rows for key in row))  # every row's fields, first seen first
        try:
            return pa.Table.from_pylist([{name: row.get(name) for name in names} for row in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # e.g. an id that is a number on one row, text on another
            raise BertkitError(
                f"the predictions do not fit one Parquet schema ({exc})",
                "give every row's id the same type, or write JSONL",
            ) from exc


class ParquetVectors(_Parquet):
    def table(self, payload):
        import pyarrow as pa

        ids, vectors = payload
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
        return pa.table({"id": pa.array([str(i) for i in ids], pa.string()), "vector": column})


class NpyVectors(Sink):
    part_suffix = ".npy"

    def lines(self, payload) -> str:
        raise BertkitError(".npy cannot be written to standard output", "give --output FILE.npy")

    def write_part(self, payload, handle) -> None:
        np.save(handle, np.ascontiguousarray(payload[1], dtype=np.float32))

    def assemble(self, parts: list[Path], handle) -> None:
        """The header for all rows, then each part's data: byte for byte what np.save of the
        whole array writes, copying one part's bytes at a time (no part mapped or loaded)."""
        shapes, offsets = [], []
        for part in parts:
            with open(part, "rb") as source:
                version = np.lib.format.read_magic(source)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, _, _ = read_header(source)
                shapes.append(shape)
                offsets.append(source.tell())
        rows, dim = sum(shape[0] for shape in shapes), shapes[0][1]
        np.lib.format.write_array_header_1_0(
            handle,
            {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False, "shape": (rows, dim)},
        )
        for part, offset in zip(parts, offsets):
            with open(part, "rb") as source:
                source.seek(offset)
                shutil.copyfileobj(source, handle, 1 << 20)
