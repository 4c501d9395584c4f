"""Learning test: one MiniLM encoder with an SST-2 head and a CoNLL-2003 head (`finetune multi`)
learns both tasks clearly above their trivial baselines in one run, and `eval` on the saved
directory gives each head the numbers training recorded."""

from __future__ import annotations

import pytest
from conftest import DATA_DIR, minilm_or_skip, require_data

from bertkit.options import EvalOptions, InferenceOptions, RunOptions

pytestmark = pytest.mark.learning

# benchmarks/results/multihead.md (600 rows a head, 1 epoch, lr 5e-5, four heads): SST-2 0.609 ±
# 0.056, CoNLL F1 0.310 ± 0.051. Here two heads, 800 rows each and lr 1e-4: more steps each. SST-2
# dev is 51% positive (chance), a tagger that tags nothing has F1 0; the bars sit well above both.
SST2_BAR, CONLL_BAR = 0.65, 0.30


def test_two_heads_on_one_encoder_learn_both_tasks(tmp_path):
    from bertkit import api
    from bertkit.options import TrainConfig
    from bertkit.options.multihead import MultiOptions

    require_data("sst2", "train.tsv")
    require_data("conll2003", "train.txt")
    minilm_or_skip()
    heads = MultiOptions(["sst2:cls:sst2", "conll:ner:conll2003"])
    config = TrainConfig(epochs=1, lr=1e-4, batch_size=16, max_train_samples=800, max_eval_samples=300, max_length=64)
    run = RunOptions(data="", data_dir=str(DATA_DIR), model="minilm", output=str(tmp_path / "mix"))
    result = api.finetune_multi(heads, run, config)
    print("multi-head SST-2 + CoNLL dev", result.heads)
    assert result.heads["sst2"]["accuracy"] >= SST2_BAR
    assert result.heads["conll"]["f1"] >= CONLL_BAR
    report = api.evaluate(str(tmp_path / "mix"), EvalOptions(max_eval_samples=300), InferenceOptions())
    for name in ("sst2", "conll"):
        main = "accuracy" if name == "sst2" else "f1"
        assert report["heads"][name]["metrics"][main] == pytest.approx(result.heads[name][main], abs=2e-3)
