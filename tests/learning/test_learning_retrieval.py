"""Learning tests for retrieval on the SQuAD retrieval set (questions -> the paragraph each was asked
on; the last 10 articles' 1,988 questions held out, every one of the 2,067 paragraphs in the corpus):

* zero-shot, the bundled MiniLM scores far above a random ranking (nDCG@10 about 0.002 here): a sane
  search path (pooling, the streamed corpus, the run, the measures);
* `finetune embedding` with in-batch negatives (MNRL) on the train articles' question-paragraph pairs
  raises the held-out nDCG@10 above that zero-shot score.

The training settings are benchmarks/retrieval.py's (fp32, batch 32, lr 2e-5, one epoch, max length
256), where sentence-transformers' trainer ran beside it (benchmarks/results/retrieval.md)."""

from __future__ import annotations

import json
import time

import pytest
from conftest import minilm_or_skip, require_data

from bertkit.options import EvalOptions, RunOptions
from bertkit.options.retrieval import RetrievalOptions

pytestmark = pytest.mark.learning

TRAIN_PAIRS = 2000
GAIN = 0.01


def test_mnrl_on_train_articles_raises_held_out_ndcg_above_zero_shot(tmp_path):
    from bertkit import api
    from bertkit.api.datasets import build_squad_retrieval
    from bertkit.api.retrieval import evaluate_retrieval
    from bertkit.config import TrainConfig

    squad = require_data("squad", "dev-v1.1.json")
    minilm_or_skip()
    beir = tmp_path / "squad-retrieval"
    built = build_squad_retrieval(str(squad), str(beir))
    assert built["queries"]["test"] == 1988 and built["passages"] == 2067
    started = time.perf_counter()
    zero = evaluate_retrieval(
        "minilm",
        EvalOptions(data=str(beir), split="test", output=str(tmp_path / "zero-shot.json")),
        RetrievalOptions(corpus_chunk=500),
    )
    print(f"SQuAD retrieval, MiniLM zero-shot: {zero['metrics']}, wall {time.perf_counter() - started:.1f}s")
    assert json.loads((tmp_path / "zero-shot.json").read_text())["metrics"] == zero["metrics"]
    assert zero["metrics"]["ndcg@10"] > 0.5 and zero["metrics"]["recall@100"] > 0.8

    rows = (beir / "train-pairs.jsonl").read_text().splitlines()[:TRAIN_PAIRS]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(rows) + "\n")
    config = TrainConfig(epochs=1, lr=2e-5, batch_size=32, max_length=256, seed=42, precision="no")
    api.finetune("embedding", RunOptions(data=str(pairs), model="minilm", output=str(tmp_path / "mnrl")), config=config)
    trained = evaluate_retrieval(
        str(tmp_path / "mnrl"), EvalOptions(data=str(beir), split="test", output=str(tmp_path / "mnrl.json"))
    )
    print(f"after MNRL on {TRAIN_PAIRS} train pairs: {trained['metrics']}")
    # Measured at exactly these settings (benchmarks/results/retrieval.md): zero-shot 0.800, after MNRL
    # 0.826 (sentence-transformers' trainer on the same pairs: 0.828). One standard error of nDCG@10
    # over 1,988 queries is about 0.008 and both are scored on the same queries (the difference's
    # error is smaller): the bar asks for 0.01 of the 0.026 gained.
    assert trained["metrics"]["ndcg@10"] >= zero["metrics"]["ndcg@10"] + GAIN
