"""Learning test for `finetune embedding`: CoSENT on 3,000 STS-B training pairs raises
the dev Spearman of MiniLM's mean-pooled cosine above its zero-shot value (the same dev pairs,
scored before training by the same evaluation: bertkit.json's ``before``)."""

from __future__ import annotations

import json

import pytest
from conftest import DATA_DIR, minilm_or_skip, require_data

pytestmark = pytest.mark.learning


@pytest.mark.xfail(
    strict=False,
    reason="measured 2026-11-27 (bf16, 2 CPU cores): whole dev 0.8673 zero-shot, 0.8659 after 3,000 pairs x 1 epoch; "
    "the training loss fell (6.46 -> 5.51) but dev did not rise: not yet understood",
)
def test_cosent_on_stsb_raises_dev_spearman_above_zero_shot(tmp_path):
    minilm_or_skip()
    require_data("stsb", "sts-train.csv")
    from bertkit import api
    from bertkit.config import TrainConfig

    # the whole dev split: on its first 600 pairs (one genre) MiniLM is already at 0.926 zero-shot, and
    # 1,500 training pairs left it there (0.923)
    config = TrainConfig(epochs=1, batch_size=16, lr=2e-5, max_train_samples=3000, seed=42)
    result = api.finetune(
        "embedding", "stsb", str(tmp_path / "emb"), model="minilm", data_dir=str(DATA_DIR), config=config
    )
    meta = json.loads((tmp_path / "emb" / "bertkit.json").read_text())
    zero_shot, trained = meta["before"]["spearman"], result.metrics["spearman"]
    assert meta["task"]["options"]["loss"] == "cosent"
    assert 0.5 < zero_shot < trained, (zero_shot, trained)
