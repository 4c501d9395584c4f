"""The numbers the benchmark suite (and any user) reads from the public API, checked against
values computed by hand from the data: no monkeypatching of bertkit internals is needed."""

from __future__ import annotations

from test_cli_classification import write_sentiment_csv

from bertkit import api
from bertkit.config import TrainConfig
from bertkit.data import registry
from bertkit.options import PredictOptions, RunOptions
from bertkit.tasks import get_task_class


def test_finetune_throughput_counts_tokens_and_attention_pairs(tiny_bert, tmp_path):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 37, seed=1)
    write_sentiment_csv(dev, 12, seed=2)
    config = TrainConfig(epochs=2, lr=1e-3, batch_size=8, precision="no")
    result = api.finetune(
        "cls",
        RunOptions(data=str(train), eval_data=str(dev), model=str(tiny_bert), output=str(tmp_path / "m")),
        config=config,
    )

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert))
    adapter = get_task_class("cls")(128, {})
    examples = adapter.read(registry.resolve(str(train), "train", None, "cls"), "train")
    adapter.fit_labels(examples)
    lengths = [len(f["input_ids"]) for f in adapter.preprocess(examples, tokenizer, train=True)]
    counted = result.throughput
    assert counted["examples"] == 2 * 37
    assert counted["tokens"] == 2 * sum(lengths)
    assert counted["token_pairs"] == 2 * sum(n * n for n in lengths)
    assert 0 < counted["eval_seconds"] and 0 < counted["train_seconds"]
    assert 0 <= counted["padding_share"] < 1

    rows = api.predict(str(tmp_path / "m"), PredictOptions(input=str(dev)))
    assert len(rows) == 12
    assert set(rows.timings) == {"load_seconds", "preprocess_seconds", "model_seconds", "postprocess_seconds"}
    assert all(v >= 0 for v in rows.timings.values()) and rows.timings["model_seconds"] > 0

    report = api.evaluate(str(tmp_path / "m"))
    assert set(report["timings"]) == {"load_seconds", "preprocess_seconds", "score_seconds"}
    assert report["timings"]["score_seconds"] > 0
