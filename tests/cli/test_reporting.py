"""Model card, figures and report.html: breakdowns on hand-made predictions, then real directories
of tiny fine-tuned models (cls, ner, qa), with the PNGs decoded and their pixels inspected."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import REPO, assert_user_error
from extras_models import train_tiny

pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402  (matplotlib depends on pillow)


# --- breakdowns on hand-made predictions ---------------------------------------------------------
def test_confusion_matrix_counts_gold_rows_and_predicted_columns():
    from bertkit.metrics.breakdowns import confusion

    result = confusion(["a", "b", "c"], ["a", "a", "b", "c", "c", "c"], ["a", "b", "b", "c", "a", "c"])
    assert result["matrix"] == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]


def test_qa_buckets_by_answer_length_and_first_word():
    from bertkit.metrics.breakdowns import qa_buckets

    examples = [
        {"question": "Who lives in Paris?", "answers": [{"text": "John", "start": 0}]},
        {"question": "where is it?", "answers": [{"text": "city of paris", "start": 0}]},
        {"question": "In which city?", "answers": [{"text": "the big red old house", "start": 0}]},
        {"question": "Who is there?", "answers": []},  # SQuAD v2: unanswerable
    ]
    # EM/F1: 1/1; 0/0.5 (paris vs city of paris: P 1, R 1/3); 0/0; "" on no answer: 1/1
    result = qa_buckets(examples, ["john", "paris", "car", ""], version_2=True)
    assert result["by_answer_length"] == {
        "1": {"count": 1, "exact_match": 100.0, "f1": 100.0},
        "3": {"count": 1, "exact_match": 0.0, "f1": 50.0},
        "4-5": {"count": 1, "exact_match": 0.0, "f1": 0.0},  # "the big red old house": 5 words
        "none": {"count": 1, "exact_match": 100.0, "f1": 100.0},
    }
    assert result["by_first_word"]["who"] == {"count": 2, "exact_match": 100.0, "f1": 100.0}
    assert result["by_first_word"]["where"]["f1"] == 50.0 and result["by_first_word"]["other"]["count"] == 1


def test_step_history_survives_a_cut_last_line(tmp_path):
    from bertkit.reporting.figures import draw_training, read_step_history

    rows = [
        {"type": "train", "step": s, "epoch": s / 10, "loss": 1 / s, "lr": 1e-3 * s / 10, "grad_norm": 1.0}
        for s in range(1, 11)
    ] + [{"type": "eval", "step": 10, "epoch": 1.0, "metrics": {"accuracy": 0.75}}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"type": "tra')
    assert len(read_step_history(tmp_path)) == 11
    target = draw_training({"history": []}, tmp_path, "accuracy", tmp_path / "training.png")
    assert _looks_drawn(target)


# --- real model directories ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def cls_dir(tmp_path_factory, tiny_bert):
    return train_tiny("cls", tmp_path_factory.mktemp("report-cls"), tiny_bert)


def _looks_drawn(path, min_size=(300, 200)) -> bool:
    """A real picture: decodes, is big enough, and is not one flat colour (axes, text, bars)."""
    with Image.open(path) as image:
        image.load()
        pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
        size = image.size
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    return size[0] >= min_size[0] and size[1] >= min_size[1] and pixels.std() > 10 and colours > 20


def _front_matter(card: str) -> dict:
    import yaml

    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_cls_directory_has_card_figures_and_report(cls_dir):
    meta = json.loads((cls_dir / "bertkit.json").read_text())
    figures = cls_dir / "figures"
    assert sorted(p.name for p in figures.iterdir()) == ["confusion_matrix.png", "training.png"]
    assert all(_looks_drawn(p) for p in figures.iterdir())
    # the confusion matrix behind the figure agrees with the reported accuracy of the saved epoch
    matrix = np.asarray(meta["eval_details"]["matrix"])
    assert matrix.sum() == 24 and meta["eval_details"]["labels"] == ["neg", "pos"]
    assert np.trace(matrix) / matrix.sum() == pytest.approx(meta["metrics"]["accuracy"])
    # the confusion figure is mostly blue-white: Blues colour map cells and the colour bar
    with Image.open(figures / "confusion_matrix.png") as image:
        rgb = np.asarray(image.convert("RGB"), dtype=int)
    assert ((rgb[..., 2] - rgb[..., 0]) > 60).mean() > 0.02

    card = (cls_dir / "README.md").read_text()
    yaml = _front_matter(card)
    assert yaml["pipeline_tag"] == "text-classification" and yaml["library_name"] == "transformers"
    assert "base_model" not in yaml  # a local path is no Hub id
    results = yaml["model-index"][0]["results"][0]
    assert results["task"]["type"] == "text-classification"
    values = {m["type"]: m["value"] for m in results["metrics"]}
    assert values["accuracy"] == pytest.approx(meta["metrics"]["accuracy"], abs=1e-4)
    assert 'pipeline("text-classification"' in card and "truncated" in card
    assert "![confusion_matrix](figures/confusion_matrix.png)" in card
    for row in ("| lr | 0.001 |", "| batch_size | 16 |", "| epochs | 2 |"):
        assert row in card

    html = (cls_dir / "report.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([^']+)'", html)
    assert len(images) == 2
    for encoded in images:
        Image.open(io.BytesIO(base64.b64decode(encoded))).verify()
    assert "<th>accuracy</th>" in html and "transformers" in html


def test_card_names_the_public_base_model_and_dataset():
    from bertkit.reporting.card import model_card

    meta = {
        "task": {"task": "cls", "labels": ["negative", "positive"], "max_length": 128},
        "base_model": "minilm",
        "data": {"name": "sst2", "train": "sst2 train", "eval": "sst2 dev"},
        "config": {"lr": 5e-5},
        "metrics": {"accuracy": 0.8956, "f1": 0.9, "positive_label": "positive"},
        "best_epoch": 1,
        "versions": {"torch": "2.13.0"},
        "bertkit_version": "0.1.0",
    }
    yaml = _front_matter(model_card(meta, "demo-sst2"))
    assert yaml["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert yaml["datasets"] == ["nyu-mll/glue"] and yaml["metrics"] == ["accuracy", "f1"]
    dataset = yaml["model-index"][0]["results"][0]["dataset"]
    assert dataset == {"name": "sst2", "type": "nyu-mll/glue", "config": "sst2", "split": "validation"}


def test_eval_adds_its_figure_and_report_redraws(cls_dir, run_cli, tmp_path):
    work = tmp_path / "model"
    shutil.copytree(cls_dir, work)
    code, _, stderr = run_cli("eval", work, "--data", cls_dir.parent / "train.csv")
    assert code == 0, stderr
    report = json.loads((work / "eval-train.json").read_text())
    assert np.asarray(report["details"]["matrix"]).sum() == 64
    assert _looks_drawn(work / "figures" / "eval-train.confusion_matrix.png")
    shutil.rmtree(work / "figures")
    (work / "README.md").unlink()
    code, stdout, stderr = run_cli("report", work)
    assert code == 0, stderr
    assert sorted(p.name for p in (work / "figures").iterdir()) == [
        "confusion_matrix.png",
        "eval-train.confusion_matrix.png",
        "training.png",
    ]
    assert "model card:" in stdout and (work / "README.md").is_file()
    html = (work / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "<th>eval-train</th>" in html


def test_report_errors_in_one_line(run_cli, tmp_path, monkeypatch):
    assert_user_error(run_cli("report", tmp_path / "nope"), "model directory not found")
    (tmp_path / "empty").mkdir()
    assert_user_error(run_cli("report", tmp_path / "empty"), "not a bertkit model")


def test_ner_and_qa_figures(tmp_path, tiny_bert):
    ner = train_tiny("ner", tmp_path / "ner", tiny_bert)
    meta = json.loads((ner / "bertkit.json").read_text())
    assert set(meta["eval_details"]["per_type"]) == {"PER", "LOC", "ORG"}
    assert _looks_drawn(ner / "figures" / "entities.png")
    assert _front_matter((ner / "README.md").read_text())["pipeline_tag"] == "token-classification"

    qa = train_tiny("qa", tmp_path / "qa", tiny_bert)
    meta = json.loads((qa / "bertkit.json").read_text())
    words = meta["eval_details"]["by_first_word"]
    assert list(words) == ["who"] and words["who"]["count"] == 18  # 6 paragraphs x 3 "who lives in ..."
    assert words["who"]["f1"] == pytest.approx(meta["metrics"]["f1"], abs=0.01)
    assert _looks_drawn(qa / "figures" / "qa_breakdown.png")


def test_report_html_in_headless_chromium(cls_dir, tmp_path):
    """Every <img> of report.html loads in a real browser; the screenshot is kept as an artefact
    (runs/test-artifacts/report-screenshot.png). Skipped without a Chromium on PATH: PyPI has no
    installable headless Chromium (playwright's browser download is not a PyPI package); the
    images are then still decoded above with PIL."""
    browser = next(
        (
            shutil.which(n)
            for n in ("chromium-headless-shell", "chromium", "google-chrome", "chrome-headless-shell")
            if shutil.which(n)
        ),
        None,
    )
    if browser is None:
        pytest.skip("no headless Chromium on PATH (e.g. apt-get install chromium-headless-shell)")
    page = tmp_path / "report.html"
    probe = (
        "<script>window.addEventListener('load', () => { document.title = 'IMAGES ' + JSON.stringify("
        "[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])); });</script>"
    )
    page.write_text((cls_dir / "report.html").read_text().replace("</body>", probe + "</body>"))
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"]
    dom = subprocess.run(flags + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    title = re.search(r"<title>IMAGES (.*?)</title>", dom.stdout)
    assert title, dom.stderr[-2000:]
    images = json.loads(title.group(1))
    assert len(images) == 2 and all(done and width > 300 and height > 200 for done, width, height in images)
    artifacts = REPO / "runs" / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report-screenshot.png"
    subprocess.run(
        flags + ["--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert _looks_drawn(shot)
