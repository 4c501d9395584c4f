"""The accepted method combinations train: one representative per shared code path, on the tiny
2-layer BERT and a handful of rows, each checked for what it recorded against what it trained.

tests/unit/test_method_declarations.py checks every combination by declaration (accepted or refused
in one line). Those accepted run through one spine (api/finetuning.py), so the paths that differ are
the methods' hooks and what they meet:
- a method's network hook x the task's head: LoRA on a classifier (merged; adapter files), LoRA on a
  listwise reranker (a training wrapper: merged only), a student with fewer layers, a student with
  adapters; every finetune task shares the plain model's path, so cls stands for pair, ner and qa;
- a method's features hook x the input options: a teacher that read long texts in windows or its
  document's context (the student reads as it did), SetFit's pairs (rows, never windows);
- a method x a run mode: SetFit under --seeds and bertkit tune (its model is scored once finished,
  not while training), LoRA under --folds (every fold's model gets adapters).
"""

from __future__ import annotations

import json

import pytest
from hostile import CLS_CSV, NER_CONLL
from safetensors.torch import load_file

LONG_CSV = "text,label\n" + "".join(
    f"{' '.join([word] * 40)} the film was {word},{label}\n"
    for word, label in [("good", "pos"), ("bad", "neg"), ("great", "pos"), ("awful", "neg")] * 4
)
RERANK_JSONL = "".join(
    json.dumps({"query": f"who is {name}", "passage": passage, "label": label}) + "\n"
    for name in ("john", "mary", "anna", "paul")
    for passage, label in ((f"{name} lives in paris", 1), ("the weather is fine", 0), ("trains are late", 0))
)


def word_embeddings(directory) -> "object":
    weights = load_file(str(directory / "model.safetensors"))
    return next(v for k, v in weights.items() if k.endswith("word_embeddings.weight"))


def meta_of(directory) -> dict:
    return json.loads((directory / "bertkit.json").read_text())


@pytest.fixture
def cls_data(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(CLS_CSV)
    return path


def train(run_cli, *args):
    code, out, err = run_cli(*map(str, args), "--epochs", "1", "--batch-size", "8")
    assert code == 0, err
    return out + err


def test_lora_merged_trains_only_adapters_and_head(run_cli, tiny_bert, cls_data, tmp_path):
    out = tmp_path / "lora"
    train(run_cli, "finetune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", out, "--lora", 4)
    meta = meta_of(out)
    assert meta["methods"] == ["finetune", "lora"] and meta["lora"]["saved"] == "merged"
    assert (word_embeddings(out) == word_embeddings(tiny_bert)).all()  # frozen: LoRA was applied
    full = tmp_path / "full"
    train(run_cli, "finetune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", full, "--lr", "1e-3")
    assert meta_of(full)["methods"] == ["finetune"] and meta_of(full)["lora"] is None
    assert not (word_embeddings(full) == word_embeddings(tiny_bert)).all()  # the control: full fine-tuning moves them


def test_lora_adapter_directory_evaluates(run_cli, tiny_bert, cls_data, tmp_path):
    out = tmp_path / "adapter"
    args = ("--lora", 4, "--save-adapter")
    train(run_cli, "finetune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", out, *args)
    assert (out / "adapter_model.safetensors").is_file() and not (out / "model.safetensors").exists()
    code, stdout, err = run_cli("eval", out, "--data", cls_data)
    assert code == 0 and "accuracy" in stdout, err


def test_listwise_reranker_with_lora_merges_and_refuses_adapter_files(run_cli, tiny_bert, tmp_path):
    data = tmp_path / "rerank.jsonl"
    data.write_text(RERANK_JSONL)
    out = tmp_path / "rerank"
    common = ("finetune", "rerank", "--data", data, "--model", tiny_bert, "--rerank-loss", "listwise", "--lora", 4)
    code, _, err = run_cli(*map(str, common), "--output", str(tmp_path / "refused"), "--save-adapter")
    assert code == 2 and "--save-adapter does not compose with rerank" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "refused").exists()
    train(run_cli, *common, "--output", out)
    assert meta_of(out)["methods"] == ["finetune", "lora"] and meta_of(out)["lora"]["saved"] == "merged"
    code, stdout, err = run_cli("eval", out, "--data", data)
    assert code == 0, err


def test_a_student_with_adapters_has_the_layers_it_records(run_cli, trained, cls_data, tmp_path):
    teacher, out = trained("cls"), tmp_path / "student"
    train(run_cli, "distill", teacher, "--data", cls_data, "--output", out, "--student-layers", 1, "--lora", 4)
    meta = meta_of(out)
    assert meta["methods"] == ["finetune", "lora", "distill"]
    assert meta["distillation"]["student"]["layers"] == 1 and meta["lora"]["saved"] == "merged"
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    assert (word_embeddings(out) == word_embeddings(teacher)).all()  # LoRA on the student: its embeddings frozen
    code, _, err = run_cli("eval", out, "--data", cls_data)
    assert code == 0, err


def test_a_windows_teacher_gets_a_student_that_reads_windows(run_cli, tiny_bert, tmp_path):
    data = tmp_path / "long.csv"
    data.write_text(LONG_CSV)
    teacher, out = tmp_path / "teacher", tmp_path / "student"
    windows = ("--long-text", "windows", "--max-length", 32)
    train(run_cli, "finetune", "cls", "--data", data, "--model", tiny_bert, "--output", teacher, *windows)
    said = train(run_cli, "distill", teacher, "--data", data, "--output", out, "--student-layers", 1)
    meta = meta_of(out)
    assert meta["task"]["options"]["long_text"] == "windows" and meta["task"]["max_length"] == 32
    assert meta["preprocessing"]["train_features"] > meta["data"]["train_examples"]  # windows, not rows
    assert "windows" in said
    code, _, err = run_cli("distill", teacher, "--data", data, "--output", tmp_path / "x", "--long-text", "truncate")
    assert code == 2 and "--long-text truncate: the teacher read its input with --long-text windows" in err
    assert not (tmp_path / "x").exists()


def test_a_document_context_teacher_gets_a_student_that_reads_the_context(run_cli, tiny_bert, tmp_path):
    data = tmp_path / "train.txt"
    data.write_text("-DOCSTART- O\n\n" + NER_CONLL)
    teacher, out = tmp_path / "teacher", tmp_path / "student"
    train(
        run_cli, "finetune", "ner", "--data", data, "--model", tiny_bert, "--output", teacher, "--context", "document"
    )
    train(run_cli, "distill", teacher, "--data", data, "--output", out, "--student-layers", 1)
    assert meta_of(out)["task"]["options"]["context"] == "document"
    code, _, err = run_cli("eval", out, "--data", data)
    assert code == 0, err


def test_setfit_under_seeds_and_tune_is_scored_by_its_head(run_cli, tiny_bert, cls_data, tmp_path):
    setfit = ("--recipe", "setfit", "--pairs-per-example", 2, "--eval-data", cls_data)
    out = tmp_path / "seeds"
    train(run_cli, "finetune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", out, "--seeds", 2, *setfit)
    meta = meta_of(out)
    assert meta["methods"] == ["setfit"] and meta["probe"]["setfit"]["pairs"] == 32
    assert len(meta["seeds"]["runs"]) == 2 and all("accuracy" in run["metrics"] for run in meta["seeds"]["runs"])
    tuned = tmp_path / "tuned"
    code, _, err = run_cli(
        *map(str, ("tune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", tuned, "--trials", 2)),
        *map(str, setfit),
    )
    assert code == 0, err
    assert meta_of(tuned)["methods"] == ["setfit"] and "accuracy" in meta_of(tuned)["metrics"]


def test_lora_under_folds_gives_every_fold_adapters(run_cli, tiny_bert, cls_data, tmp_path):
    out = tmp_path / "folds"
    args = ("--folds", 2, "--lora", 4, "--keep-all")
    train(run_cli, "finetune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", out, *args)
    assert meta_of(out)["methods"] == ["finetune", "lora"]
    kept = [p for p in (tmp_path / "folds.folds").iterdir() if (p / "bertkit.json").is_file()]
    runs = [out, *kept]  # the chosen fold's model became the output; the other one is kept
    assert len(runs) == 2
    for run in runs:
        assert meta_of(run)["lora"]["rank"] == 4 and (word_embeddings(run) == word_embeddings(tiny_bert)).all()


@pytest.mark.parametrize(
    "method",
    [("--lora", "4"), ("--lora", "4", "--save-adapter"), ("--recipe", "setfit", "--pairs-per-example", "2")],
    ids=["lora-merged", "lora-adapter", "setfit"],
)
def test_every_methods_directory_exports_to_onnx_with_parity_or_is_refused_in_one_line(
    method, run_cli, tiny_bert, cls_data, tmp_path
):
    """The backends x methods part of the walk: a method's directory runs under ONNX Runtime with the
    torch model's outputs, or `export` says in one line that it cannot (nothing half-written)."""
    pytest.importorskip("onnxruntime")
    out = tmp_path / "model"
    train(run_cli, "finetune", "cls", "--data", cls_data, "--model", tiny_bert, "--output", out, *method)
    code, stdout, err = run_cli("export", "onnx", out, "--data", cls_data)
    if code == 0:
        report = json.loads((out / "onnx" / "export.json").read_text())
        assert report["parity_examples"] == 16 and report["fp32"]["max_abs_diff"] < 1e-4, report
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert not (out / "onnx").exists()
