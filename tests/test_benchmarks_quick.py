"""The benchmark runner on a reduced quick set, so `python -m benchmarks run` never rots.

Runs ``--quick --only sst2,startup,decode`` with even smaller sizes in a subprocess (about a minute on
2 quiet cores) and checks the JSON report's keys and that its numbers are sane.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import DATA_DIR, REPO, minilm_or_skip, require_data

pytestmark = pytest.mark.learning

SIZES = ("sst2_train=64,sst2_eval=64,default_rows=32,capped_eval_rows=16,qa_train=16,qa_eval=16,"
         "startup_repeats=2,matmul_seconds=0.5")


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_quick_benchmarks_report(tmp_path):
    require_data("sst2", "train.tsv")
    require_data("sst2", "dev.tsv")
    require_data("squad", "dev-v1.1.json")
    minilm_or_skip()
    cmd = [sys.executable, "-m", "benchmarks", "run", "--quick", "--only", "sst2,startup,decode", "--set", SIZES,
           "--out-dir", str(tmp_path), "--name", "test", "--no-print"]
    env = dict(os.environ, BERTKIT_DATA_DIR=str(DATA_DIR))
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((tmp_path / "test.json").read_text())
    markdown = (tmp_path / "test.md").read_text()
    assert "| workload | side | ex/s | tokens/s | padding | peak RSS | metric | ratio vs bertkit |" in markdown

    # header: machine, peak, model, sizes
    for key in ("machine", "matmul_peak_gflops", "model", "sizes", "workloads", "rows", "errors", "wall_seconds"):
        assert key in report, key
    assert report["errors"] == []
    assert report["quick"] is True
    for key in ("cpu_model", "usable_cores", "torch", "transformers", "date"):
        assert report["machine"].get(key), key
    assert _positive(report["matmul_peak_gflops"])
    assert report["model"]["non_embedding_params"] > 1e6
    assert report["model"]["same_checkpoint_both_sides"] is True

    # SST-2: four sides on identical data, same measurement keys
    sst2 = report["workloads"]["sst2"]
    assert sst2["data_check"]["identical"] is True
    assert sst2["data_check"]["hf_train"] == sst2["data_check"]["bertkit_train"] == 64
    assert set(sst2["runs"]) == {"bertkit", "hf_default", "hf_best", "hf_best_bf16"}
    for side, run in sst2["runs"].items():
        for key in ("train_seconds", "train_examples_per_s", "train_tokens_per_s", "eval_seconds", "peak_rss_mb"):
            assert _positive(run.get(key)), (side, key, run.get(key))
        assert 0.0 <= run["train_padding_share"] < 1.0, side
        assert 0.0 <= run["eval_accuracy"] <= 1.0, side
    assert sst2["runs"]["bertkit"]["n_train"] == 64 and sst2["runs"]["bertkit"]["n_eval"] == 64
    assert sst2["runs"]["hf_default"]["metric_comparable"] is False  # capped to default_rows=32
    assert sst2["runs"]["hf_default"]["n_train"] == 32
    # pad-to-128 wastes far more than bertkit's length-grouped dynamic padding
    assert sst2["runs"]["bertkit"]["train_padding_share"] < sst2["runs"]["hf_default"]["train_padding_share"]

    rows = [r for r in report["rows"] if "error" not in r]
    assert not [r for r in report["rows"] if "error" in r]
    assert {r["workload"] for r in rows} == {"sst2", "decode", "startup"}
    for row in rows:
        assert _positive(row.get("ratio_vs_bertkit")), row
        if row["side"] in ("bertkit", "bertkit_exact", "bertkit --help"):
            assert row["ratio_vs_bertkit"] == pytest.approx(1.0)
    for row in (r for r in rows if r["workload"] == "sst2"):
        assert _positive(row["flop_utilisation"]), row  # > 1 only when the peak was measured on a busy machine
        assert 0.0 <= row["metric"] <= 1.0

    # QA decoding on the same logits
    decode = report["workloads"]["decode"]["result"]
    n = decode["n_questions"]
    assert n == 16 and decode["n_features"] >= n
    for prefix in ("bertkit", "loop"):
        assert 0.0 <= decode[f"{prefix}_exact_match"] <= 100.0
        assert 0.0 <= decode[f"{prefix}_f1"] <= 100.0
        assert _positive(decode[f"{prefix}_questions_per_s"])
    assert decode["questions_loop_has_true_max"] + decode["questions_loop_misses_true_max"] == n
    assert decode["identical_where_loop_has_true_max"] is True

    # start-up
    startup = report["workloads"]["startup"]["runs"]
    assert _positive(startup["bertkit --help"]["best_seconds"])
