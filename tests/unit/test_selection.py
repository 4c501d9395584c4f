"""Targets beyond class ids in the engine: the training-data fingerprint sees float targets, and
fit keeps the best evaluation by the lowest main metric when lower is better."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest

from bertkit.engine.run_identity import features_sha1


def _old_sha1(features: list[dict]) -> str:
    """The fingerprint as it was before target kinds: every target as int64."""
    digest = hashlib.sha1()
    for key in ("input_ids", "token_type_ids", "labels", "start_positions", "end_positions"):
        values = [f.get(key) for f in features]
        if all(v is None for v in values):
            continue
        if isinstance(values[0], list):
            digest.update(np.array([len(v) for v in values], dtype=np.int64).tobytes())
            values = itertools.chain.from_iterable(values)
        digest.update(key.encode() + np.fromiter(values, dtype=np.int64).tobytes())
    return digest.hexdigest()


def _features(labels: list) -> list[dict]:
    return [
        {"input_ids": [2, 5 + i, 3], "token_type_ids": [0, 0, 0], "labels": label} for i, label in enumerate(labels)
    ]


def test_float_targets_are_hashed_as_floats():
    regression = {"labels": "float"}
    assert features_sha1(_features([0.5, 1.0]), regression) != features_sha1(_features([0.25, 1.0]), regression)
    assert features_sha1(_features([0.5, 1.0]), regression) == features_sha1(_features([0.5, 1.0]), regression)
    # without declared kinds a float target is cut to an int, as it always was: why tasks declare them
    assert features_sha1(_features([0.5, 1.0])) == features_sha1(_features([0.25, 1.0]))


def test_multi_hot_targets_are_hashed_row_by_row():
    multi = {"labels": "multi_hot"}
    assert features_sha1(_features([[1, 0, 1], [0, 1, 0]]), multi) != features_sha1(
        _features([[1, 0, 0], [1, 1, 0]]), multi
    )
    assert features_sha1(_features([[1, 0, 1]]), multi) == features_sha1(_features([[1.0, 0.0, 1.0]]), multi)


def test_int_targets_keep_the_old_fingerprint():
    classes = _features([1, 0, 2])
    tags = _features([[-100, 3, -100], [-100, 1, -100]])
    qa = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "start_positions": 1, "end_positions": 2}]
    for features in (classes, tags, qa):
        assert features_sha1(features) == _old_sha1(features)  # existing checkpoints stay resumable
    assert features_sha1(classes, {"labels": "class"}) == _old_sha1(classes)
    assert features_sha1(tags, {"labels": "token_class"}) == _old_sha1(tags)
    assert features_sha1(qa, {"end_positions": "class", "start_positions": "class"}) == _old_sha1(qa)


# --- fit: the best evaluation by the main metric, either way ------------------------------------
LOSSES = [0.9, 0.5, 0.3, 0.6, 0.8]  # one evaluation per step: lowest at step 3, highest at step 1


@pytest.mark.parametrize("greater_is_better, best_step", [(False, 3), (True, 1)])
def test_fit_keeps_the_best_evaluation_either_way(tiny_bert, tmp_path, greater_is_better, best_step):
    import torch
    from transformers import AutoModelForSequenceClassification

    from bertkit.config import TrainConfig
    from bertkit.engine import Engine
    from bertkit.engine.checkpoints import Checkpoints, complete_checkpoints

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    seen = []  # the weights at each evaluation

    def evaluate(current) -> dict:
        seen.append({k: v.detach().clone() for k, v in current.state_dict().items()})
        return {"loss": LOSSES[len(seen) - 1]}

    checkpoints = Checkpoints(tmp_path / "run.checkpoints", save_every=1, keep=1, identity={})
    config = TrainConfig(max_steps=len(LOSSES), batch_size=2, lr=1e-2, eval_every=1, log_every=1)
    trained, report = Engine("no").fit(
        model,
        _features([i % 2 for i in range(4)]),
        config,
        0,
        evaluate,
        "loss",
        checkpoints=checkpoints,
        greater_is_better=greater_is_better,
    )
    assert report.best_step == best_step and report.best_metric == LOSSES[best_step - 1]
    assert [h["metrics"]["loss"] for h in report.history] == LOSSES
    assert all(torch.equal(trained.state_dict()[k], v) for k, v in seen[best_step - 1].items())
    assert not torch.equal(trained.state_dict()["classifier.weight"], seen[-1]["classifier.weight"])
    # --keep-checkpoints 1 keeps the newest and the one saved right after the best evaluation
    assert [step for step, _ in complete_checkpoints(checkpoints.root)] == sorted({best_step, len(LOSSES)})
