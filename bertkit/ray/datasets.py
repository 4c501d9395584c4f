"""``predict_dataset`` and ``embed_dataset``: bertkit over a Ray Dataset, for code already in Ray."""

from __future__ import annotations

from bertkit.errors import BertkitError
from bertkit.options import EmbeddingOptions, InferenceOptions, PredictOptions
from bertkit.ray.actors import EmbedActor, PredictActor, predictor


def require_ray():
    """The ``ray`` module, or the one-line error saying how to install it."""
    try:
        import ray
        import ray.data  # the `data` extra: pandas, pyarrow, fsspec
    except ImportError as exc:
        raise BertkitError(f"Ray is not installed ({exc})", "pip install 'bertkit[ray]'") from None
    return ray


def predict_dataset(
    ds,
    model_dir: str,
    *,
    actors: int = 2,
    batch_size: int = 256,
    options: PredictOptions | None = None,
    run: InferenceOptions | None = None,
    num_cpus: float | None = None,
    num_gpus: float = 0,
    preserve_order: bool = True,
    _lines: bool = False,
):
    """``bertkit predict`` over a Ray Dataset: returns a lazy Dataset of prediction rows (see the
    module docstring for the columns). ``actors``: the size of the pool, each with a model loaded
    once; ``batch_size``: rows per Ray batch (one ``predict`` call); ``options``: predict's backend
    and task options (top_k...; its input and output are Ray's); ``run``: rows per forward pass
    inside a batch, precision, threads; ``num_cpus``/``num_gpus``: resources per actor."""
    ray = require_ray()
    check_pool(actors, batch_size)
    options = options or PredictOptions()
    # Validated here, on the driver, before any actor starts: a wrong option fails in one line.
    check_rows_apart(predictor(model_dir, options, run))
    _configure(ds, preserve_order)
    ds = _in_batches(ds, batch_size)
    return ds.map_batches(
        PredictActor,
        fn_constructor_kwargs={"model_dir": str(model_dir), "lines": _lines, "options": options, "run": run},
        compute=ray.data.ActorPoolStrategy(size=actors),
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=_actor_cpus(ray, actors, num_cpus),
        num_gpus=num_gpus or None,
    )


def embed_dataset(
    ds,
    model: str,
    *,
    actors: int = 2,
    batch_size: int = 256,
    options: EmbeddingOptions | None = None,
    num_cpus: float | None = None,
    num_gpus: float = 0,
    preserve_order: bool = True,
    _lines: bool = False,
):
    """``bertkit embed`` over a Ray Dataset: returns a lazy Dataset of ``id`` (when the input has
    an id column) and ``vector`` (fixed-size float32 list). Columns are found as ``embed`` finds
    them (text, sentence, ...; ``options.text_column`` etc. to name them). ``options``: embed's
    (pooling, max_length, stride, normalize, batch_size: rows per forward pass, precision, threads;
    its input and output are Ray's)."""
    ray = require_ray()
    check_pool(actors, batch_size)
    from bertkit.api.embedder import Embedder

    options = options or EmbeddingOptions()
    if options.per_word:
        raise BertkitError("--per-word is not available with --ray (ragged rows)", "leave out --ray or --per-word")
    Embedder(model, options)  # checks the options
    _configure(ds, preserve_order)
    ds = _in_batches(ds, batch_size)
    return ds.map_batches(
        EmbedActor,
        fn_constructor_kwargs={"model": str(model), "lines": _lines, "options": options},
        compute=ray.data.ActorPoolStrategy(size=actors),
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=_actor_cpus(ray, actors, num_cpus),
        num_gpus=num_gpus or None,
    )


def _actor_cpus(ray, actors: int, num_cpus: float | None) -> float:
    """CPUs each actor reserves: ``num_cpus`` when given, else 1 while the pool leaves one of the
    cluster's CPUs to Ray Data's own tasks, less when it would not. Those tasks (listing and
    reading files, writing) need a CPU each; a fixed pool that reserves every CPU of the cluster
    starves them and the run waits forever (Ray 2.60: 2 actors on a 2-CPU cluster never start
    reading a Parquet file). Ray gives an actor with less than 1 CPU one torch thread
    (OMP_NUM_THREADS=1)."""
    if num_cpus is not None:
        if num_cpus < 0:
            raise BertkitError(f"num_cpus must be >= 0, got {num_cpus}", "CPUs per actor, e.g. 1")
        return num_cpus
    total = float(ray.cluster_resources().get("CPU", 0)) if ray.is_initialized() else 0.0
    if total == 0:
        return 1.0  # Ray not started yet: it starts at the first run, with this machine's CPUs
    spare = total - 1 if total > 1 else total / 2
    return max(0.01, min(1.0, round(spare / actors, 2)))


def check_pool(actors: int, batch_size: int) -> None:
    if not isinstance(actors, int) or actors < 1:
        raise BertkitError(f"--actors must be >= 1, got {actors}", "e.g. --actors 2 (one model copy per actor)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BertkitError(f"the Ray batch size must be >= 1, got {batch_size}", "e.g. 256 rows per batch")


def _in_batches(ds, batch_size: int):
    """Blocks of ``batch_size`` rows (Ray's streaming repartition: no shuffle, no barrier). Ray
    hands an actor a block at a time, and reads a small input as one block, which would keep one
    actor busy and the others idle; one batch per block spreads the work over the whole pool."""
    return ds.repartition(target_num_rows_per_block=batch_size)


def _configure(ds, preserve_order: bool) -> None:
    """Settings of the dataset's DataContext (Ray's per-dataset settings): rows in input order, and
    an error an actor raises (a BertkitError naming a bad row) re-raised as itself, not wrapped."""
    if preserve_order:
        ds.context.execution_options.preserve_order = True
    ds.context.raise_original_map_exception = True


def check_rows_apart(predictor) -> None:
    """Ray predicts batches of rows apart: refuse a model whose rows need their neighbours."""
    if predictor.adapter.whole_input:  # ner --context document: a batch boundary would cut a document
        raise BertkitError(
            "--context document needs each document whole, and --ray splits the input into batches",
            "drop --ray, or give --context sentence",
        )
