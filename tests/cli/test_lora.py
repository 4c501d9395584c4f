"""finetune --lora (bertkit/networks/lora.py) on a tiny BERT: only the adapters and the head train,
the merged directory is base + (alpha/R) B A in plain transformers, the adapter directory predicts
what the merged one does (and plain peft loads it), resume and --seeds work with adapters. Bad
input: tests/corpus/test_hostile_lora.py."""

from __future__ import annotations

import json

import pytest
import torch
from test_cli_classification import write_sentiment_csv

pytest.importorskip("peft")

RANK, ALPHA = 4, 8.0
HEAD = ("classifier.", "bert.pooler.")
ADAPTED = (".attention.self.query.weight", ".attention.self.value.weight")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("lora-data")
    train, dev = directory / "train.csv", directory / "dev.csv"
    write_sentiment_csv(train, 32, seed=1)
    write_sentiment_csv(dev, 12, seed=2)
    return train, dev


def lora_args(data, model, output, *extra) -> tuple:
    train, dev = data
    return (
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        model,
        "--output",
        output,
        "--batch-size",
        8,
        "--lr",
        "1e-2",
        "--precision",
        "no",
        "--threads",
        1,
        "--lora",
        RANK,
        "--lora-alpha",
        ALPHA,
        *extra,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_bert, data):
    """The same run (one epoch, 4 steps) saved merged and as an adapter: the two directories."""
    import sys

    from bertkit import cli

    root = tmp_path_factory.mktemp("lora-runs")
    saved = {}
    argv = sys.argv
    try:
        for name, extra in (("merged", ()), ("adapter", ("--save-adapter",))):
            saved[name] = root / name
            sys.argv = ["bertkit", *map(str, lora_args(data, tiny_bert, saved[name], "--epochs", 1, *extra))]
            with pytest.raises(SystemExit) as done:
                cli.main()
            assert done.value.code in (0, None)
    finally:
        sys.argv = argv
    return saved


def test_only_the_adapted_layers_and_the_head_change(runs, tiny_bert):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    base = AutoModelForSequenceClassification.from_pretrained(tiny_bert).state_dict()
    merged = load_file(str(runs["merged"] / "model.safetensors"))
    encoder = [k for k in merged if k.startswith("bert.") and not k.startswith("bert.pooler.")]
    assert len(encoder) > 20
    changed = [k for k in encoder if not torch.equal(merged[k], base[k])]
    # every adapted weight moved (B starts at 0: one step makes it nonzero), nothing else did, biases included
    assert sorted(changed) == sorted(k for k in encoder if k.endswith(ADAPTED)) and len(changed) == 4
    meta = json.loads((runs["merged"] / "bertkit.json").read_text())
    lora = meta["lora"]
    assert lora["rank"] == RANK and lora["alpha"] == ALPHA and lora["saved"] == "merged"
    assert lora["targets"] == ["query", "value"] and lora["adapted_layers"] == 4
    hidden = 32  # tiny_bert: 2 layers of 32, 2 labels: A is R x 32, B is 32 x R per adapted layer
    assert lora["adapter_parameters"] == 4 * 2 * RANK * hidden
    assert lora["head_parameters"] == hidden * hidden + hidden + 2 * hidden + 2  # pooler + classifier
    assert lora["trainable_parameters"] == lora["adapter_parameters"] + lora["head_parameters"]
    assert meta["config"]["lora"] == RANK


def test_merged_directory_is_base_plus_scaled_ba_in_plain_transformers(runs, tiny_bert):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    base = AutoModelForSequenceClassification.from_pretrained(tiny_bert).state_dict()
    merged = AutoModelForSequenceClassification.from_pretrained(runs["merged"]).state_dict()
    adapter = load_file(str(runs["adapter"] / "adapter_model.safetensors"))
    prefix = "base_model.model."
    for layer in range(2):
        for name in ("query", "value"):
            at = f"bert.encoder.layer.{layer}.attention.self.{name}"
            a, b = adapter[f"{prefix}{at}.lora_A.weight"], adapter[f"{prefix}{at}.lora_B.weight"]
            assert a.shape == (RANK, 32) and b.shape == (32, RANK) and b.abs().sum() > 0
            expected = base[f"{at}.weight"] + (ALPHA / RANK) * (b @ a)
            assert torch.allclose(merged[f"{at}.weight"], expected, atol=1e-6, rtol=0)
    for name in ("classifier.weight", "classifier.bias", "bert.pooler.dense.weight"):  # the head: trained whole
        assert torch.equal(merged[name], adapter[prefix + name]) and not torch.equal(merged[name], base[name])


def test_adapter_directory_predicts_what_the_merged_one_does(runs, run_cli, data, tmp_path):
    assert not (runs["adapter"] / "model.safetensors").exists()
    assert (runs["adapter"] / "adapter_config.json").is_file()
    rows = {}
    for name, directory in runs.items():
        out = tmp_path / f"{name}.jsonl"
        code, _, stderr = run_cli("predict", directory, "--input", data[1], "--output", out, "--precision", "no")
        assert code == 0, stderr
        rows[name] = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows["merged"]) == 12
    for merged, adapter in zip(rows["merged"], rows["adapter"]):
        assert merged["label"] == adapter["label"]
        for label, p in merged["probabilities"].items():
            assert adapter["probabilities"][label] == pytest.approx(p, abs=1e-5)
    code, stdout, stderr = run_cli("eval", runs["adapter"], "--output", tmp_path / "a.json", "--precision", "no")
    assert code == 0, stderr
    recorded = json.loads((runs["merged"] / "bertkit.json").read_text())["metrics"]
    scored = json.loads((tmp_path / "a.json").read_text())["metrics"]
    assert scored["accuracy"] == recorded["accuracy"] and scored["loss"] == pytest.approx(recorded["loss"], abs=1e-5)


def test_plain_peft_loads_the_adapter_directory(runs, tiny_bert, data):
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(runs["adapter"])
    base = AutoModelForSequenceClassification.from_pretrained(tiny_bert, config=config)
    model = PeftModel.from_pretrained(base, str(runs["adapter"])).eval()
    merged = AutoModelForSequenceClassification.from_pretrained(runs["merged"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(runs["merged"])
    batch = tokenizer(["the film was good", "a dull plot"], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.allclose(model(**batch).logits, merged(**batch).logits, atol=1e-5)


def test_trainable_parameters_are_said(run_cli, tiny_bert, data, tmp_path):
    code, stdout, stderr = run_cli(*lora_args(data, tiny_bert, tmp_path / "m", "--max-steps", 1))
    assert code == 0, stderr
    assert "LoRA rank 4, alpha 8, dropout 0.1 on 4 layers (query, value): trainable parameters" in stderr + stdout


def test_interrupted_lora_run_resumes_to_the_same_weights(tmp_path, tiny_bert, data, run_cli, monkeypatch):
    """The checkpoint holds the adapters (and the optimizer's state for them): a resumed run ends
    with the uninterrupted run's bytes, merged and as an adapter."""
    from safetensors.torch import load_file

    def command(name, *extra):
        return lora_args(data, tiny_bert, tmp_path / name, "--epochs", 2, "--save-every", 3, *extra)

    code, _, stderr = run_cli(*command("reference", "--save-adapter"))
    assert code == 0, stderr
    monkeypatch.setenv("BERTKIT_TEST_SIGNAL", "INT@step-5")
    code, _, stderr = run_cli(*command("resumed", "--save-adapter"))
    assert code == 130 and "interrupted: stopped after step 5" in stderr
    monkeypatch.delenv("BERTKIT_TEST_SIGNAL")
    checkpoint = load_file(str(tmp_path / "resumed.checkpoints" / "step-5" / "model.safetensors"))
    assert any(".lora_A." in k for k in checkpoint) and any(".lora_B." in k for k in checkpoint)
    code, stdout, stderr = run_cli(*command("resumed"), "--resume")  # --save-adapter may change: merged now
    assert code == 0 and stdout.startswith("resumed from"), stderr
    code, _, stderr = run_cli(*command("uninterrupted"))
    assert code == 0, stderr
    reference, resumed = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("uninterrupted", "resumed"))
    assert reference.keys() == resumed.keys() and all(torch.equal(reference[k], resumed[k]) for k in reference)
    adapter = load_file(str(tmp_path / "reference" / "adapter_model.safetensors"))
    assert all(".lora_" in k or ".pooler." in k or "classifier" in k for k in adapter)


def test_seeds_train_adapters_per_seed(run_cli, tiny_bert, data, tmp_path):
    out = tmp_path / "seeded"
    code, stdout, stderr = run_cli(*lora_args(data, tiny_bert, out, "--epochs", 1, "--seeds", 2, "--save-adapter"))
    assert code == 0, stderr
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["seeds"]["seeds"] == [42, 43] and meta["lora"]["saved"] == "adapter"
    first, second = meta["seeds"]["runs"]
    assert first["train_loss"] != second["train_loss"]
    assert (out / "adapter_model.safetensors").is_file() and not (out / "model.safetensors").exists()
    code, _, stderr = run_cli("predict", out, "--input", data[1], "--output", tmp_path / "p.jsonl")
    assert code == 0, stderr


@pytest.mark.parametrize("task", ["ner", "qa"])
def test_ner_and_qa_adapters_predict_what_their_merged_models_do(task, run_cli, tiny_bert, tmp_path):
    from hostile import NER_CONLL, QA_JSONL

    data = tmp_path / ("train.txt" if task == "ner" else "train.jsonl")
    data.write_text(NER_CONLL if task == "ner" else QA_JSONL)
    rows = {}
    for name, extra in (("merged", ()), ("adapter", ("--save-adapter",))):
        out = tmp_path / name
        common = ("--model", tiny_bert, "--output", out, "--epochs", 1, "--batch-size", 4, "--max-length", 64)
        code, _, stderr = run_cli(
            "finetune", task, "--data", data, *common, "--lr", "1e-2", "--precision", "no", "--lora", 2, *extra
        )
        assert code == 0, stderr
        head = json.loads((out / "bertkit.json").read_text())["lora"]["head_parameters"]
        assert head == (32 * 5 + 5 if task == "ner" else 32 * 2 + 2)  # classifier (O, B/I-PER, B/I-LOC) or qa_outputs
        code, stdout, stderr = run_cli("predict", out, "--input", data, "--precision", "no")
        assert code == 0, stderr
        rows[name] = [json.loads(line) for line in stdout.splitlines()]
    assert rows["merged"] == rows["adapter"] and len(rows["merged"]) == 8  # 8 sentences, 8 questions
