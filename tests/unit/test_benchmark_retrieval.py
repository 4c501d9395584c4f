"""benchmarks/retrieval.py's report: with --skip-rerank (embedding models only) the table holds the
zero-shot and MNRL rows and nothing of the rerankers."""

from __future__ import annotations

from conftest import REPO  # noqa: F401  (puts the repository on sys.path for `benchmarks`)

from benchmarks.retrieval import MEASURES, markdown


def test_a_run_without_rerankers_reports_the_embedding_rows_only():
    metrics = {measure: 0.5 for measure in MEASURES}
    record = {
        "settings": {"seed": 43},
        "scores": {name: {"metrics": metrics, "queries": 1988} for name in ("zero-shot", "mnrl bertkit", "mnrl st")},
        "trainings": {
            "mnrl bertkit": {"train_s": 100.0, "steps": 63},
            "mnrl st": {"train_s": 250.0, "process_s": 270.0, "steps": 63},
        },
    }
    rows = [line for line in markdown(record).splitlines() if line.startswith("| ") and not line.startswith("| row")]
    assert [row.split(" | ")[0] for row in rows] == ["| zero-shot", "| mnrl bertkit", "| mnrl st"]
    assert "| 100.0 | 0.40x | 100.0 | 0.37x | 63 |" in rows[1]  # bertkit's time over ST's train() and process
    assert "rerank" not in markdown(record).split("Training s:")[0]
