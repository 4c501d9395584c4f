"""`bertkit eval --metric`: local `evaluate` modules offline, and the Hub-name path failing in one line."""

from __future__ import annotations

import json

import pytest
from conftest import assert_user_error
from extras_models import train_tiny

pytest.importorskip("evaluate")

AGREE = """
import datasets
import evaluate


class Agree(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="share of equal labels", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("int64"),
                                                               "references": datasets.Value("int64")}))

    def _compute(self, predictions, references):
        return {"share": sum(p == r for p, r in zip(predictions, references)) / len(references),
                "n": len(references), "note": "not a number: not reported"}
"""

ENTITY_COUNT = """
import datasets
import evaluate


class EntityCount(evaluate.Metric):
    def _info(self):
        seq = datasets.Sequence(datasets.Value("string"))
        return evaluate.MetricInfo(description="", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": seq, "references": seq}))

    def _compute(self, predictions, references):
        return {"gold_b": sum(t.startswith("B-") for tags in references for t in tags),
                "sentences": len(references)}
"""


@pytest.fixture(scope="module")
def cls_dir(tmp_path_factory, tiny_bert):
    return train_tiny("cls", tmp_path_factory.mktemp("metric-cls"), tiny_bert)


def test_local_metric_script_and_directory_offline(cls_dir, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    folder = tmp_path / "agree_dir"  # evaluate's layout: a directory with <name>.py inside
    folder.mkdir()
    (folder / "agree_dir.py").write_text(AGREE)
    out = tmp_path / "metrics.json"
    code, stdout, stderr = run_cli("eval", cls_dir, "--metric", script, "--metric", folder, "--output", out)
    assert code == 0, stderr
    metrics = json.loads(out.read_text())["metrics"]
    # the module's share of equal labels is the built-in accuracy, on the same 24 dev rows
    assert metrics["agree/share"] == pytest.approx(metrics["accuracy"])
    assert metrics["agree/n"] == 24 and metrics["agree_dir/n"] == 24
    assert "agree/note" not in metrics and "agree/share" in stdout


def test_ner_metric_gets_tag_sequences(tmp_path, tiny_bert, run_cli):
    ner = train_tiny("ner", tmp_path / "ner", tiny_bert)
    (tmp_path / "count.py").write_text(ENTITY_COUNT)
    dev = tmp_path / "ner" / "dev.txt"
    gold_b = sum(line.split()[-1].startswith("B-") for line in dev.read_text().splitlines() if line.strip())
    code, _, stderr = run_cli("eval", ner, "--metric", tmp_path / "count.py", "--output", tmp_path / "m.json")
    assert code == 0, stderr
    metrics = json.loads((tmp_path / "m.json").read_text())["metrics"]
    assert metrics["count/gold_b"] == gold_b and metrics["count/sentences"] == 16


def test_bad_metrics_fail_in_one_line_before_work(cls_dir, run_cli, tmp_path, monkeypatch):
    assert_user_error(run_cli("eval", cls_dir, "--metric", tmp_path / "missing.py"), "no such file")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a Hub name offline, not in the cache
    assert_user_error(
        run_cli("eval", cls_dir, "--metric", "not-a-cached-metric-xyz"),
        "--metric not-a-cached-metric-xyz could not be loaded",
    )
    (tmp_path / "count.py").write_text(ENTITY_COUNT)  # tag sequences, given label ids
    assert_user_error(
        run_cli("eval", cls_dir, "--metric", tmp_path / "count.py", "--output", tmp_path / "x.json"),
        "--metric count failed on cls predictions",
    )
    assert not (tmp_path / "x.json").exists()


def test_default_eval_does_not_import_evaluate(cls_dir, tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    code = (
        "import sys; from bertkit import api; from bertkit.options import EvalOptions; "
        "api.evaluate(sys.argv[1], EvalOptions(output=sys.argv[2])); "
        "assert 'evaluate' not in sys.modules, 'evaluate imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(cls_dir), str(tmp_path / "m.json")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
