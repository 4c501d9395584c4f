"""Learning test for retrieval: the bundled MiniLM, zero-shot, on the SQuAD retrieval set's held-out
articles (1,988 questions over all 2,067 paragraphs of dev-v1.1.json). A random ranking scores
nDCG@10 about 0.002 here; a sane search path (pooling, the streamed corpus, the run, the measures)
scores far above it. Sized for a few minutes on two CPU cores."""

from __future__ import annotations

import json
import time

import pytest
from conftest import minilm_or_skip, require_data

pytestmark = pytest.mark.learning


def test_zero_shot_minilm_ndcg_on_held_out_squad_articles_is_far_above_random(tmp_path):
    from bertkit.api.datasets import build_squad_retrieval
    from bertkit.api.retrieval import evaluate_retrieval

    squad = require_data("squad", "dev-v1.1.json")
    minilm_or_skip()
    built = build_squad_retrieval(str(squad), str(tmp_path / "squad-retrieval"))
    assert built["queries"]["test"] == 1988 and built["passages"] == 2067
    started = time.perf_counter()
    report = evaluate_retrieval(
        "minilm", str(tmp_path / "squad-retrieval"), "test", output=str(tmp_path / "zero-shot.json"), corpus_chunk=500
    )
    wall = time.perf_counter() - started
    print(f"SQuAD retrieval, MiniLM zero-shot: {report['metrics']}, wall {wall:.1f}s")
    assert json.loads((tmp_path / "zero-shot.json").read_text())["metrics"] == report["metrics"]
    assert report["metrics"]["ndcg@10"] > 0.5 and report["metrics"]["recall@100"] > 0.8
