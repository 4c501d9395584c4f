"""`bertkit serve`'s predictor: what bertkit/serving/app.py answers with (``examples``, ``predict``,
``info``), a multi-head directory's or one task's; kept apart from api/prediction.py so that the
multi-head server (which builds on prediction's helpers) is not imported by it."""

from __future__ import annotations

from bertkit.api.prediction import Predictor
from bertkit.errors import BertkitError
from bertkit.options import CoverageOptions, InferenceOptions


def served_predictor(model_dir, run: InferenceOptions, backend: str, conformal: CoverageOptions):
    """`bertkit serve`'s predictor, loaded: a multi-head directory's (every head on /predict, one on
    /predict/<head>), or one task's with --coverage's quantile fixed before the server starts, so
    that every answered row carries its label set (prediction_set)."""
    from bertkit.api.calibration import set_quantile
    from bertkit.api.multihead_inference import is_multi_head
    from bertkit.model_dir import load_meta

    if is_multi_head(load_meta(model_dir)):
        from bertkit.api.multihead_serving import MultiHeadServing

        if conformal.coverage is not None:  # no head's conformal scores are stored
            raise BertkitError("serve on a multi-head model does not compose with --coverage yet", "drop --coverage")
        served = MultiHeadServing(model_dir, run, backend).load()
        _pack_padded_batches(served.heads.engine)
        return served
    predictor = Predictor(model_dir, run, backend, quiet=True)
    predictor.coverage = set_quantile(predictor, conformal, "bertkit serve")
    _pack_padded_batches(predictor.load().engine)
    return predictor


def _pack_padded_batches(engine) -> None:
    """Requests are batched as they arrive, half padding on short texts: the torch engine packs a
    mostly padded batch (engine/packed_inference.py; an exported graph's runner has no such switch)."""
    if hasattr(engine, "pack_padded"):
        engine.pack_padded = True
