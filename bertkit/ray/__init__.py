"""Predict and embed on a Ray cluster with Ray Data (``pip install 'bertkit[ray]'``).

For people already in Ray::

    import ray
    from bertkit.options import EmbeddingOptions
    from bertkit.ray import embed_dataset, predict_dataset, write_parquet

    ds = ray.data.read_parquet("s3://bucket/shards/")
    write_parquet(predict_dataset(ds, "runs/sst2", actors=8), "s3://bucket/predictions/")
    write_parquet(embed_dataset(ds, "minilm", actors=8, options=EmbeddingOptions(normalize=True)), "s3://bucket/vectors/")

and ``run`` behind ``bertkit predict|embed ... --ray``: Ray's own readers in, ``map_batches`` over
a pool of ``actors`` actors, Parquet files out through Ray's Datasink API (``write_parquet``: Ray's
``Dataset.write_parquet`` reorders rows inside a file). Each actor builds the class the
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

from bertkit.ray.command import run
from bertkit.ray.datasets import embed_dataset, predict_dataset, require_ray
from bertkit.ray.outputs import write_parquet

__all__ = ["embed_dataset", "predict_dataset", "require_ray", "run", "write_parquet"]
