"""`bertkit select`: the pool rows a model is least sure of, checked against `predict`'s own
probabilities, with flat memory over a large pool."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from conftest import assert_user_error, require_data

from bertkit.options import InferenceOptions, PredictOptions, RunOptions, SelectOptions

SELECTED = 25


@pytest.fixture(scope="module")
def sst2_model(tiny_bert, tmp_path_factory):
    """A tiny cls model trained on 200 SST-2 rows, and the 872 dev sentences as the pool."""
    from bertkit import api
    from bertkit.config import TrainConfig

    train, dev = require_data("sst2", "train.tsv"), require_data("sst2", "dev.tsv")
    root = tmp_path_factory.mktemp("select")
    subset = root / "train.tsv"
    subset.write_text("\n".join(train.read_text().splitlines()[:201]) + "\n")
    config = TrainConfig(epochs=1, batch_size=16, max_length=64)
    api.finetune(
        "cls",
        RunOptions(data=str(subset), eval_data=str(dev), model=str(tiny_bert), output=str(root / "model")),
        config=config,
    )
    return root / "model", dev, train


def margins_of(rows: list[dict]) -> list[float]:
    """Top-1 minus top-2 of predict's probabilities, per row."""
    result = []
    for row in rows:
        top, second = sorted(row["probabilities"].values(), reverse=True)[:2]
        result.append(top - second)
    return result


def selected_rows(path) -> list[dict]:
    text = path.read_text()
    return json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines()]


def test_margin_selects_the_smallest_margins_of_predict(sst2_model, tmp_path, run_cli):
    from bertkit import api

    model, pool, _ = sst2_model
    # fp32 on both sides: the tiny model's margins sit within 1e-5 of each other, and bf16 inference
    # differs by that much between predict's batches and select's chunks of 100
    margins = margins_of(api.predict(str(model), PredictOptions(input=str(pool)), InferenceOptions(precision="no")))
    output = tmp_path / "next.json"
    code, out, err = run_cli(
        "select",
        model,
        "--input",
        pool,
        "--n",
        SELECTED,
        "--strategy",
        "margin",
        "--output",
        output,
        "--chunk-rows",
        100,
        "--precision",
        "no",
    )
    assert code == 0, err
    assert f"{SELECTED} of 872 rows selected" in out
    tasks = selected_rows(output)
    rows = [task["meta"]["row"] for task in tasks]  # 1-based
    assert len(set(rows)) == SELECTED
    chosen = sorted(margins[r - 1] for r in rows)
    others = [m for i, m in enumerate(margins) if i + 1 not in set(rows)]
    # predict rounds probabilities to 6 decimals: a tie at the boundary may go either way, nothing more
    assert max(chosen) <= min(others) + 2e-6
    assert [round(task["meta"]["margin"], 4) for task in tasks] == sorted(round(margins[r - 1], 4) for r in rows)
    assert all(t["predictions"][0]["result"][0]["type"] == "choices" for t in tasks)
    expected = sorted(range(1, len(margins) + 1), key=lambda r: (margins[r - 1], r))[:SELECTED]
    assert len(set(expected) & set(rows)) >= SELECTED - 1  # the same rows, a 6-decimal tie aside


def test_strategies_and_formats(sst2_model, tmp_path, run_cli):
    model, pool, _ = sst2_model
    chosen = {}
    for strategy in ("margin", "entropy", "least-confidence"):
        output = tmp_path / f"{strategy}.jsonl"
        code, _, err = run_cli(
            "select",
            model,
            "--input",
            pool,
            "--n",
            10,
            "--strategy",
            strategy,
            "--output",
            output,
            "--format",
            "doccano",
        )
        assert code == 0, err
        tasks = selected_rows(output)
        assert all(isinstance(t["label"], list) and "text" in t for t in tasks)
        chosen[strategy] = [t["meta"]["row"] for t in tasks]
    assert chosen["margin"] == chosen["entropy"] == chosen["least-confidence"]  # two classes: one ranking
    draws = []
    for seed in (1, 1, 2):
        output = tmp_path / f"random{seed}.json"
        run_cli("select", model, "--input", pool, "--n", 10, "--strategy", "random", "--seed", seed, "--output", output)
        draws.append(sorted(t["meta"]["row"] for t in selected_rows(output)))
    assert draws[0] == draws[1] != draws[2]


def test_memory_stays_flat_over_a_large_pool(sst2_model, tmp_path):
    from bertkit.api.selection import select

    model, _, train = sst2_model
    sentences = [line.split("\t")[0] for line in train.read_text().splitlines()[1:]]
    warm = tmp_path / "warm.txt"
    warm.write_text("\n".join(sentences[:100]) + "\n")
    select(
        str(model), SelectOptions(chunk_rows=500, input=str(warm), output=str(tmp_path / "warm.json"), n=5)
    )  # imports and caches first
    peaks = {}
    for size in (1_000, 10_000):
        pool = tmp_path / f"pool{size}.txt"
        pool.write_text("\n".join(sentences[:size]) + "\n")
        tracemalloc.start()
        summary = select(
            str(model), SelectOptions(chunk_rows=500, input=str(pool), output=str(tmp_path / f"next{size}.json"), n=5)
        )
        peaks[size] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert summary["rows"] == size and summary["selected"] == 5
    assert peaks[10_000] < 1.3 * peaks[1_000], peaks  # 10x the rows, the same memory


def test_ner_pool_least_sure_sentence_first(tmp_path, trained, run_cli):
    model = trained("ner")
    run_cli("--version")
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"id": f"s{i}", "text": t}) + "\n" for i, t in enumerate(SENTENCES)))
    output = tmp_path / "next.json"
    code, _, err = run_cli("select", model, "--input", pool, "--n", 3, "--output", output)
    assert code == 0, err
    tasks = selected_rows(output)
    assert len(tasks) == 3 and all(task["id"].startswith("s") for task in tasks)
    values = [task["meta"]["margin"] for task in tasks]
    assert values == sorted(values)
    for task in tasks:
        for result in task["predictions"][0]["result"]:
            value = result["value"]
            assert task["data"]["text"][value["start"] : value["end"]] == value["text"]


SENTENCES = ["john lives in paris", "mary visited berlin", "the film was good", "obama met john in london", "what ?"]


def test_select_refusals_write_nothing(tmp_path, trained, run_cli):
    model = trained("cls")
    run_cli("--version")
    pool = tmp_path / "pool.txt"
    pool.write_text("a good film\n")
    output = tmp_path / "next.json"
    assert_user_error(run_cli("select", model, "--input", pool, "--n", 0, "--output", output), "--n must be >= 1")
    assert_user_error(
        run_cli("select", model, "--input", pool, "--n", 1, "--strategy", "vibes", "--output", output), "--strategy"
    )
    assert_user_error(
        run_cli("select", model, "--input", pool, "--n", 1, "--output", tmp_path / "n.parquet"), "writes JSON"
    )
    assert_user_error(run_cli("select", model, "--input", pool, "--n", 1, "--output", pool), "--output")
    assert not output.exists() and pool.read_text() == "a good film\n"


LONG = [
    "the film was good and the acting was great and the plot was fine " * 3,
    "the plot was bad and the acting was awful and the story was poor " * 2,
    "the film was good",
    "it was a great movie and the city was paris and the actor was john " * 4,
    "the story was awful",
    "the film was not very good and not very bad " * 3,
]


def test_select_on_a_windows_model_scores_each_row_as_predict_does(tiny_bert, tmp_path, run_cli):
    """A --long-text windows model: select's margin and entropy of each row are those of the
    probabilities predict gives that row (its windows pooled), the entropy scipy's."""
    scipy_stats = pytest.importorskip("scipy.stats")
    from bertkit import api
    from bertkit.config import TrainConfig

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"{t},{'pos' if 'good' in t else 'neg'}\n" for t in LONG * 3))
    model = tmp_path / "model"
    config = TrainConfig(epochs=1, batch_size=8, max_length=16, precision="no", task_options={"long_text": "windows"})
    api.finetune("cls", RunOptions(data=str(train), model=str(tiny_bert), output=str(model)), config=config)
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(LONG) + "\n")
    rows = api.predict(str(model), PredictOptions(input=str(pool)))
    assert max(row["windows"] for row in rows) > 1 and min(row["windows"] for row in rows) == 1
    margins = margins_of(rows)
    for strategy in ("margin", "entropy"):
        output = tmp_path / f"{strategy}.json"
        code, _, err = run_cli(
            "select", model, "--input", pool, "--n", len(LONG), "--strategy", strategy, "--output", output
        )
        assert code == 0, err
        for task in selected_rows(output):
            row, value = task["meta"]["row"], task["meta"][strategy]
            if strategy == "margin":
                assert value == pytest.approx(margins[row - 1], abs=2e-6)
            else:
                expected = scipy_stats.entropy(list(rows[row - 1]["probabilities"].values()))
                assert value >= 0 and value == pytest.approx(expected, abs=1e-5)
