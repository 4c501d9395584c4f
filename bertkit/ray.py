"""Predict and embed on a Ray cluster with Ray Data (``pip install 'bertkit[ray]'``).

For people already in Ray::

    import ray
    from bertkit.ray import predict_dataset, embed_dataset

    ds = ray.data.read_parquet("s3://bucket/shards/")
    predict_dataset(ds, "runs/sst2", actors=8).write_parquet("s3://bucket/predictions/")
    embed_dataset(ds, "minilm", actors=8, normalize=True).write_parquet("s3://bucket/vectors/")

and ``run`` behind ``bertkit predict|embed ... --ray``: Ray's own readers in, ``map_batches`` over
a pool of ``actors`` actors, Ray's Parquet writer out. Each actor builds the class the
single-process commands use (``Predictor``, the server's too, or ``Embedder``) and loads the model
once, in its constructor; every Ray batch it then gets is one ``examples`` + ``predict`` (or
``vectors``) call. Ray schedules the batches; nothing here does.

Output columns. predict: ``id`` when the input has an ``id`` column, then the task's prediction
fields (``bertkit predict``'s row, e.g. text, label, score, probabilities, truncated). Scalars stay
typed (string, int64, double, bool; null where a row has no such field, e.g. ``truncated`` for a
text that fit); nested values (a dict of probabilities, lists of entities, words, tags, n-best
answers) are JSON strings, so every batch has the same Arrow schema: ``json.loads`` gives back
what ``bertkit predict`` prints. embed: ``id`` (a string, as ``bertkit embed --output x.parquet``
writes it) when the input has an id column (id, idx, guid, index or ``id_column``), then
``vector``: a fixed-size list of float32. Rows come out in input order: ``predict_dataset`` and
``embed_dataset`` turn on ``preserve_order`` in the dataset's ``DataContext`` (Ray's switch for it)
unless told not to.

The model directory (or model name) must be readable on every node that runs an actor.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import time
from pathlib import Path

from bertkit.errors import BertkitError

INPUT_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".tsv", ".txt")
COMMANDS = ("predict", "embed")


def require_ray():
    """The ``ray`` module, or the one-line error saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401  (the `data` extra: pandas, pyarrow, fsspec)
    except ImportError as exc:
        raise BertkitError(f"Ray is not installed ({exc})", "pip install 'bertkit[ray]'") from None
    return ray


# --- the actors ------------------------------------------------------------------------------

class _PredictActor:
    """One per Ray actor: a Predictor loaded once; each call predicts one Ray batch (a pyarrow Table)."""

    def __init__(self, model_dir: str, model_batch_size: int, lines: bool, options: dict):
        from bertkit.api.prediction import Predictor

        self.predictor = Predictor(model_dir, batch_size=model_batch_size, quiet=True, **options).load()
        self.lines = lines
        fields = self.predictor.adapter.prediction_fields
        self.fields = [name for name in fields if name != "id"]

    def __call__(self, batch):
        records = batch.to_pylist()
        if self.lines:  # a text file's lines (ray.data.read_text): a TAB separates a pair's two texts
            records = [record["text"] for record in records]
        with _user_errors():
            rows = self.predictor.predict(self.predictor.examples(records, _batch_name(records)))
        has_id = "id" in batch.column_names or "id" in self.predictor.adapter.prediction_fields
        id_type = batch.schema.field("id").type if "id" in batch.column_names else None
        return _table(rows, (["id"] if has_id else []) + self.fields, _id_type(id_type))


class _EmbedActor:
    """One per Ray actor: an Embedder loaded once; each call embeds one Ray batch."""

    def __init__(self, model: str, columns: tuple, lines: bool, options: dict):
        from bertkit.api.embedder import Embedder

        self.embedder = Embedder(model, **options)
        self.embedder.quiet = True
        self.embedder.load()
        self.columns, self.lines = columns, lines

    def __call__(self, batch):
        import numpy as np
        import pyarrow as pa

        from bertkit.api.embedding import Columns, rows_of

        records = batch.to_pylist()
        if self.lines:
            records = [dict(zip(("text", "text_pair"), record["text"].split("\t", 1))) for record in records]
        with _user_errors():
            ids, texts, pairs, _, used = rows_of(records, _batch_name(records), False, Columns(*self.columns))
            vectors = np.ascontiguousarray(self.embedder.vectors(texts, pairs), dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1])
        if used.id is None:  # no id column: Ray gives a batch no global row number, so order is the key
            return pa.table({"vector": column})
        return pa.table({"id": pa.array(ids, pa.string()), "vector": column})


@contextlib.contextmanager
def _user_errors():
    """A BertkitError (a bad row) leaves the actor as a RayBertkitError: still a BertkitError, and
    a UserCodeException, which Ray Data reports as an error in user code (two log lines), not as
    an internal error with a page of traceback. Needs ``raise_original_map_exception`` (``_configure``)."""
    try:
        yield
    except BertkitError as exc:
        raise _ray_bertkit_error()(exc.message, exc.hint) from None


@functools.cache
def _ray_bertkit_error() -> type:
    from ray.exceptions import UserCodeException

    class RayBertkitError(BertkitError, UserCodeException):
        """A BertkitError raised in a Ray actor (see ``_user_errors``)."""

    RayBertkitError.__module__, RayBertkitError.__qualname__ = __name__, "RayBertkitError"
    return RayBertkitError


def __getattr__(name: str):
    if name == "RayBertkitError":  # built on first use (ray is imported lazily); found here when unpickled
        return _ray_bertkit_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _id_type(input_type):
    """The id column keeps the input's type when it is a string or a number (as `predict` keeps
    the value); anything else, or no id column, gives strings."""
    import pyarrow as pa

    if input_type is not None and (pa.types.is_integer(input_type) or pa.types.is_floating(input_type)):
        return pa.int64() if pa.types.is_integer(input_type) else pa.float64()
    return pa.string()


def _batch_name(records: list) -> str:
    """How an error names a batch: Ray hands out batches without their place in the input, so
    row numbers count within the batch; its first id (when rows have ids) finds it."""
    first = records[0] if records else None
    given = first.get("id") if isinstance(first, dict) else None
    return f"Ray batch of {len(records)} row(s)" + (f" starting at id {given!r}" if given is not None else "")


def _table(rows: list[dict], fields: list[str], id_type=None):
    """Prediction rows as an Arrow table with the same schema for every batch: ``fields`` in order
    (absent values null), then any other key; nested values as JSON strings; each column typed by
    FIELD_TYPES (``id`` as the input's id column) even where a batch has only nulls in it."""
    import pyarrow as pa

    names = list(dict.fromkeys([*fields, *(key for row in rows for key in row)]))
    columns = {}
    for name in names:
        values = [_cell(row.get(name)) for row in rows]
        wanted = id_type if name == "id" else FIELD_TYPES.get(name)
        try:
            columns[name] = pa.array(values, type=pa.type_for_alias(wanted) if isinstance(wanted, str) else wanted)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # e.g. numeric label names: inferred instead
            columns[name] = pa.array(values)
        if columns[name].type == pa.null():  # a field no row of this batch has: a type all batches share
            columns[name] = columns[name].cast(pa.string())
    return pa.table(columns)


# Fields whose values are dicts or lists in some task's rows: JSON strings (string columns).
NESTED = frozenset({"probabilities", "labels", "entities", "words", "tags", "n_best"})
# The Arrow type of each prediction field any task writes (a field not named here is inferred).
FIELD_TYPES = {"text": "string", "text_pair": "string", "label": "string", "score": "float64", "truncated": "bool",
               "answer": "string", "start": "int64", "end": "int64", "null_score_diff": "float64",
               "best_span_answer": "string", **{name: "string" for name in NESTED}}


def _cell(value):
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
        return value.item()
    return value


# --- the API for people already in Ray ----------------------------------------------------------

def predict_dataset(ds, model_dir: str, *, actors: int = 2, batch_size: int = 256, model_batch_size: int = 64,
                    num_cpus: float = 1, num_gpus: float = 0, preserve_order: bool = True, _lines: bool = False,
                    **predictor_options):
    """``bertkit predict`` over a Ray Dataset: returns a lazy Dataset of prediction rows (see the
    module docstring for the columns). ``actors``: the size of the pool, each with a model loaded
    once; ``batch_size``: rows per Ray batch (one ``predict`` call); ``model_batch_size``: rows per
    forward pass inside it; ``num_cpus``/``num_gpus``: resources per actor. ``predictor_options``
    go to ``Predictor`` (precision, backend, threads, the task's predict options such as top_k)."""
    ray = require_ray()
    _check_pool(actors, batch_size)
    from bertkit.api.prediction import Predictor

    # Validated here, on the driver, before any actor starts: a wrong option fails in one line.
    Predictor(model_dir, batch_size=model_batch_size, quiet=True, **predictor_options)
    options = {k: v for k, v in predictor_options.items() if v is not None}
    _configure(ds, preserve_order)
    return ds.map_batches(_PredictActor, fn_constructor_kwargs={"model_dir": str(model_dir),
                                                                "model_batch_size": model_batch_size,
                                                                "lines": _lines, "options": options},
                          compute=ray.data.ActorPoolStrategy(size=actors), batch_size=batch_size,
                          batch_format="pyarrow", num_cpus=num_cpus, num_gpus=num_gpus or None)


def embed_dataset(ds, model: str, *, actors: int = 2, batch_size: int = 256, model_batch_size: int = 64,
                  text_column: str | None = None, text_pair_column: str | None = None, id_column: str | None = None,
                  num_cpus: float = 1, num_gpus: float = 0, preserve_order: bool = True, _lines: bool = False,
                  **embedder_options):
    """``bertkit embed`` over a Ray Dataset: returns a lazy Dataset of ``id`` (when the input has
    an id column) and ``vector`` (fixed-size float32 list). Columns are found as ``embed`` finds
    them (text, sentence, ...; ``text_column`` etc. to name them). ``embedder_options`` go to
    ``Embedder`` (pooling, max_length, stride, normalize, precision, threads)."""
    ray = require_ray()
    _check_pool(actors, batch_size)
    from bertkit.api.embedder import Embedder

    Embedder(model, batch_size=model_batch_size, **embedder_options)  # checks the options
    _configure(ds, preserve_order)
    return ds.map_batches(_EmbedActor, fn_constructor_kwargs={
        "model": str(model), "columns": (text_column, text_pair_column, id_column), "lines": _lines,
        "options": {**embedder_options, "batch_size": model_batch_size}},
        compute=ray.data.ActorPoolStrategy(size=actors), batch_size=batch_size, batch_format="pyarrow",
        num_cpus=num_cpus, num_gpus=num_gpus or None)


def _check_pool(actors: int, batch_size: int) -> None:
    if not isinstance(actors, int) or actors < 1:
        raise BertkitError(f"--actors must be >= 1, got {actors}", "e.g. --actors 2 (one model copy per actor)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BertkitError(f"the Ray batch size must be >= 1, got {batch_size}", "e.g. 256 rows per batch")


def _configure(ds, preserve_order: bool) -> None:
    """Settings of the dataset's DataContext (Ray's per-dataset settings): rows in input order, and
    an error an actor raises (a BertkitError naming a bad row) re-raised as itself, not wrapped."""
    if preserve_order:
        ds.context.execution_options.preserve_order = True
    ds.context.raise_original_map_exception = True


# --- `bertkit predict|embed --ray` ------------------------------------------------------------

def run(command: str, model_dir: str, input: str, output: str, *, address: str | None = None, actors: int = 2,
        batch_size: int = 256, overwrite: bool = False, **options) -> dict:
    """``bertkit predict|embed MODEL --input IN --output OUT --ray``: read ``input`` with Ray's
    readers (a file, a directory, a glob, local or a URL such as s3://...; Parquet, JSONL, CSV,
    TSV or text lines), predict or embed on ``actors`` actors, write a directory of Parquet files
    to ``output`` (refused if it exists and is not empty, unless ``overwrite``). Connects to the
    cluster at ``address`` (None: RAY_ADDRESS, else a new local cluster, shut down at the end);
    an already initialised Ray is used as it is. ``options`` go to ``predict_dataset`` /
    ``embed_dataset``. Returns {rows, seconds, rows_per_second, actors, output, ...}; ``seconds``
    counts from reading to the last file written (actor start-up included, cluster start-up not)."""
    if command not in COMMANDS:
        raise BertkitError(f"--ray runs {' or '.join(COMMANDS)}, not {command!r}", "use bertkit predict or embed")
    ray = require_ray()
    _check_pool(actors, batch_size)
    _check_options(command, model_dir, options)  # all before a cluster starts
    paths, suffix = _input_paths(input)
    target = _check_output(output, overwrite)
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        began = time.perf_counter()
        ds = _read(ray, paths, suffix)
        work = predict_dataset if command == "predict" else embed_dataset
        out = work(ds, model_dir, actors=actors, batch_size=batch_size, _lines=suffix == ".txt", **options)
        from ray.data.datasource import SaveMode

        try:
            out.write_parquet(target, mode=SaveMode.OVERWRITE if overwrite else SaveMode.ERROR)
        except Exception as exc:
            if isinstance(exc, ValueError) and "already exists" in str(exc):  # SaveMode.ERROR: not ours
                raise BertkitError(f"--output {output} already exists",
                                   "choose a new directory, or pass --overwrite") from None
            _discard(target)
            error = _user_error(exc)  # a bad row: the BertkitError an actor raised
            if error is None:
                raise
            raise error from None
        seconds = time.perf_counter() - began
        rows = _count_rows(target)
    finally:
        if started_ray:
            ray.shutdown()
    return {"command": command, "rows": rows, "seconds": round(seconds, 3),
            "rows_per_second": round(rows / seconds, 1) if seconds > 0 else None, "actors": actors,
            "batch_size": batch_size, "input": input, "output": target,
            "address": address or ("local" if started_ray else "existing")}


def _check_options(command: str, model_dir: str, options: dict) -> None:
    if command == "predict":
        from bertkit.api.prediction import Predictor

        keys = ("model_batch_size", "num_cpus", "num_gpus", "preserve_order")
        given = {k: v for k, v in options.items() if k not in keys}
        Predictor(model_dir, batch_size=options.get("model_batch_size", 64), quiet=True, **given)
    else:
        from bertkit.api.embedder import Embedder

        keys = ("model_batch_size", "num_cpus", "num_gpus", "preserve_order", "text_column", "text_pair_column",
                "id_column")
        Embedder(model_dir, batch_size=options.get("model_batch_size", 64),
                 **{k: v for k, v in options.items() if k not in keys})


def _discard(target: str) -> None:
    """A failed run's partial output goes (a local directory only: it was new or empty before)."""
    if not _is_url(target):
        import shutil

        shutil.rmtree(target, ignore_errors=True)


def _is_url(path: str) -> bool:
    return "://" in path


def _input_paths(spec: str) -> tuple[list[str] | str, str]:
    """(what Ray's reader gets, the format's suffix). Ray's readers take files and directories but
    no wildcards, so a glob is expanded here (sorted, as `bertkit predict` reads shards)."""
    if not _is_url(spec):
        from bertkit.data.streams import shard_paths

        found = shard_paths(spec)  # local: the same checks and order as the single-process commands
        return [str(path) for path in found], _format_of(spec, found)
    import pyarrow.fs as pafs

    try:
        filesystem, base = pafs.FileSystem.from_uri(spec.split("*")[0].split("?")[0].split("[")[0] or spec)
    except Exception as exc:  # an unknown scheme, a missing filesystem library, bad credentials
        raise BertkitError(f"cannot open --input {spec} ({exc})", "check the URL (s3://bucket/path, gs://...)") \
            from None
    scheme = spec.split("://", 1)[0]
    if any(ch in spec for ch in "*?["):
        pattern = spec.split("://", 1)[1]
        base = base if base.endswith("/") or not base else base.rsplit("/", 1)[0]
        selector = pafs.FileSelector(base.rstrip("/"), recursive=pattern.count("/") > base.rstrip("/").count("/") + 1)
        found = sorted(info.path for info in filesystem.get_file_info(selector)
                       if info.type == pafs.FileType.File and fnmatch.fnmatchcase(info.path, pattern)
                       and info.path.count("/") == pattern.count("/"))
        if not found:
            raise BertkitError(f"no file matches {spec}", "check the pattern (quote it so the shell leaves it alone)")
        return [f"{scheme}://{path}" for path in found], _format_of(spec, [Path(p) for p in found])
    info = filesystem.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise BertkitError(f"--input {spec} does not exist", "check the URL")
    if info.type == pafs.FileType.Directory:
        inside = filesystem.get_file_info(pafs.FileSelector(base, recursive=False))
        return spec, _format_of(spec, [Path(i.path) for i in inside if i.type == pafs.FileType.File])
    return spec, _format_of(spec, [Path(base)])


def _format_of(spec: str, files: list) -> str:
    suffixes = sorted({Path(f).suffix.lower() for f in files} & set(INPUT_SUFFIXES))
    if len(suffixes) != 1:
        found = ", ".join(suffixes) if suffixes else "no data files"
        raise BertkitError(f"--input {spec}: Ray reads one format at a time, found {found}",
                           f"point at files of one format ({', '.join(INPUT_SUFFIXES)})")
    return suffixes[0]


def _read(ray, paths, suffix: str):
    data = ray.data
    if suffix == ".parquet":
        return data.read_parquet(paths)
    if suffix in (".jsonl", ".json"):  # pyarrow's reader: one object per line (a .json array is read whole)
        return data.read_json(paths, lines=suffix == ".jsonl")
    if suffix in (".csv", ".tsv"):
        import pyarrow.csv as pacsv

        return data.read_csv(paths, parse_options=pacsv.ParseOptions(delimiter="\t" if suffix == ".tsv" else ","),
                             file_extensions=[suffix[1:]])
    return data.read_text(paths, drop_empty_lines=True)


def _check_output(output: str, overwrite: bool) -> str:
    """The output directory (Ray writes one Parquet file per write task into it)."""
    if not output or output == "-":
        raise BertkitError("--ray writes files: --output is required", "e.g. --output predictions/ (a directory)")
    suffix = Path(output.rstrip("/")).suffix.lower()
    if suffix in (".jsonl", ".json", ".csv", ".npy", ".npz", ".txt"):
        raise BertkitError(f"--ray writes a directory of Parquet files, not {suffix}",
                           "give a directory, e.g. --output predictions/ (read it back with pyarrow or "
                           "ray.data.read_parquet)")
    if _is_url(output):
        return output  # Ray's writer refuses an existing one (SaveMode.ERROR), unless overwrite
    path = Path(output).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise BertkitError(f"--output {output} is a file", "give a directory for Ray's Parquet files")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise BertkitError(f"--output {output} already exists and is not empty",
                           "choose a new directory, or pass --overwrite")
    if path.is_dir() and not any(path.iterdir()):
        path.rmdir()  # Ray's writer refuses an existing directory, even an empty one
    return str(path)


def _count_rows(output: str) -> int:
    import pyarrow.dataset as pads

    return pads.dataset(output, format="parquet").count_rows()


def _user_error(exc: BaseException) -> BertkitError | None:
    """The BertkitError an actor raised, as a plain one (Ray re-raises it as a RayTaskError that
    is also a BertkitError, its ``cause`` the original)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        cause = getattr(exc, "cause", None)
        if isinstance(exc, BertkitError):
            source = cause if isinstance(cause, BertkitError) else exc
            return BertkitError(source.message, source.hint)
        exc = cause if isinstance(cause, BaseException) else (exc.__cause__ or exc.__context__)
    return None
