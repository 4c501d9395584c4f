"""The Ray actors: each loads a model once, in its constructor, and predicts or embeds one Ray
batch (a pyarrow Table) per call."""

from __future__ import annotations

import contextlib
import functools

from bertkit.errors import BertkitError
from bertkit.ray.rows import arrow_table, batch_name, id_column_type


class PredictActor:
    """One per Ray actor: a Predictor loaded once; each call predicts one Ray batch (a pyarrow Table)."""

    def __init__(self, model_dir: str, lines: bool, options, run):
        self.predictor = predictor(model_dir, options, run).load()
        self.lines = lines
        fields = self.predictor.adapter.prediction_fields
        self.fields = [name for name in fields if name != "id"]

    def __call__(self, batch):
        records = batch.to_pylist()
        if self.lines:  # a text file's lines (ray.data.read_text): a TAB separates a pair's two texts
            records = [record["text"] for record in records]
        with user_errors():
            rows = self.predictor.predict(self.predictor.examples(records, batch_name(records)))
        has_id = "id" in batch.column_names or "id" in self.predictor.adapter.prediction_fields
        id_type = batch.schema.field("id").type if "id" in batch.column_names else None
        return arrow_table(rows, (["id"] if has_id else []) + self.fields, id_column_type(id_type))


def predictor(model_dir: str, options, run):
    """The Predictor of ``options`` (PredictOptions: backend, task options) and ``run``
    (InferenceOptions), quiet: Ray reports the progress."""
    from bertkit.api.prediction import Predictor

    return Predictor(model_dir, run, options.backend, options.task_options, quiet=True)


class EmbedActor:
    """One per Ray actor: an Embedder loaded once; each call embeds one Ray batch."""

    def __init__(self, model: str, lines: bool, options):
        from bertkit.api.embedder import Embedder

        self.embedder = Embedder(model, options)
        self.embedder.quiet = True
        self.embedder.load()
        self.options, self.lines = options, lines

    def __call__(self, batch):
        import numpy as np
        import pyarrow as pa

        from bertkit.api.embedding import columns_of, rows_of

        records = batch.to_pylist()
        if self.lines:
            records = [dict(zip(("text", "text_pair"), record["text"].split("\t", 1))) for record in records]
        with user_errors():
            ids, texts, pairs, _, used = rows_of(records, batch_name(records), False, columns_of(self.options))
            vectors = np.ascontiguousarray(self.embedder.vectors(texts, pairs), dtype=np.float32)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1])
        if used.id is None:  # no id column: Ray gives a batch no global row number, so order is the key
            return pa.table({"vector": column})
        return pa.table({"id": pa.array(ids, pa.string()), "vector": column})


@contextlib.contextmanager
def user_errors():
    """A BertkitError (a bad row) leaves the actor as a RayBertkitError: still a BertkitError, and
    a UserCodeException, which Ray Data reports as an error in user code (two log lines), not as
    an internal error with a page of traceback. Needs ``raise_original_map_exception`` (``_configure``)."""
    try:
        yield
    except BertkitError as exc:
        raise ray_bertkit_error()(exc.message, exc.hint) from None


@functools.cache
def ray_bertkit_error() -> type:
    from ray.exceptions import UserCodeException

    class RayBertkitError(BertkitError, UserCodeException):
        """A BertkitError raised in a Ray actor (see ``user_errors``)."""

    RayBertkitError.__module__, RayBertkitError.__qualname__ = __name__, "RayBertkitError"
    return RayBertkitError


def __getattr__(name: str):
    # A class built on first use (ray is imported lazily), found here when unpickled by name.
    if name == "RayBertkitError":
        return ray_bertkit_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
