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
        return MultiHeadServing(model_dir, run, backend).load()
    predictor = Predictor(model_dir, run, backend, quiet=True)
    predictor.coverage = set_quantile(predictor, conformal, "bertkit serve")
    return predictor.load()
