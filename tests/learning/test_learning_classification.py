"""Learning tests: the bundled pretrained MiniLM on real GLUE data must clearly learn."""

from __future__ import annotations

import pytest
from conftest import DATA_DIR, minilm_or_skip, require_data

from bertkit.options import RunOptions

pytestmark = pytest.mark.learning


def test_minilm_learns_sst2(tmp_path):
    from bertkit import api
    from bertkit.config import TrainConfig

    require_data("sst2", "train.tsv")
    minilm_or_skip()
    config = TrainConfig(epochs=2, lr=5e-5, batch_size=32, max_train_samples=2000)
    result = api.finetune(
        "cls",
        RunOptions(data="sst2", data_dir=str(DATA_DIR), model="minilm", output=str(tmp_path / "sst2")),
        config=config,
    )
    assert result.eval_examples == 872 and result.train_examples == 2000
    print("SST-2 dev", result.metrics, result.throughput)
    # Measured at exactly these settings: bertkit 0.794 (seed 42), 0.790 (seed 1); the HF Trainer
    # 0.803 (seed 42). One standard error on 872 rows is 1.4 points, so the bar sits two below.
    assert result.metrics["accuracy"] >= 0.78
    assert result.throughput["padding_share"] < 0.10  # length grouping at work


def test_minilm_beats_majority_on_mrpc(tmp_path):
    from bertkit import api
    from bertkit.config import TrainConfig

    require_data("mrpc", "train.tsv")
    minilm_or_skip()
    config = TrainConfig(epochs=2, lr=5e-5, batch_size=32, max_train_samples=2000)
    result = api.finetune(
        "pair",
        RunOptions(data="mrpc", data_dir=str(DATA_DIR), model="minilm", output=str(tmp_path / "mrpc")),
        config=config,
    )
    majority = 279 / 408  # dev: 279 paraphrases of 408
    print("MRPC dev", result.metrics, result.throughput)
    assert result.eval_examples == 408
    assert result.metrics["accuracy"] >= majority + 0.02  # measured 0.721 (majority 0.684)
