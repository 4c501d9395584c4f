"""Bad input for `bertkit finetune multi` and a multi-head directory: one `error:` line each, exit 2,
nothing written or removed (hostile.run_case), before any model loads."""

from __future__ import annotations

import pytest
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, Case, Context, run_case

pytestmark = pytest.mark.corpus


def multi(c: Context, *heads: str, extra: tuple = ()) -> list:
    c.file("cls.csv", CLS_CSV), c.file("pair.tsv", PAIR_TSV), c.file("ner.txt", NER_CONLL), c.file("empty.csv", "")
    tasks = [a for head in heads for a in ("--task", head.replace("DIR", str(c.tmp)))]
    return ["finetune", "multi", *tasks, "--model", c.tiny, "--output", c.tmp / "out", "--epochs", 1, *extra]


def config(c: Context, text: str) -> list:
    c.file("cls.csv", CLS_CSV)
    path = c.file("tasks.yaml", text.replace("DIR", str(c.tmp)))
    return ["finetune", "multi", "--config", path, "--model", c.tiny, "--output", c.tmp / "out"]


CASES = [
    Case(
        "two-heads-one-name",
        lambda c: multi(c, "a:cls:DIR/cls.csv", "a:pair:DIR/pair.tsv"),
        ("two heads are named 'a'",),
    ),
    Case(
        "ner-head-on-sentences",
        lambda c: multi(c, "a:cls:DIR/cls.csv", "t:ner:DIR/cls.csv"),
        ("head t:", "not token tagging"),
    ),
    Case("cls-head-on-conll", lambda c: multi(c, "a:cls:DIR/ner.txt"), ("head a:", "missing label column")),
    Case(
        "known-dataset-of-another-task",
        lambda c: multi(c, "a:cls:DIR/cls.csv", "b:pair:sst2"),
        ("head b: dataset sst2 is for the 'cls' task, not 'pair'",),
    ),
    Case("empty-task", lambda c: multi(c, "a:cls:DIR/cls.csv", "e:cls:DIR/empty.csv"), ("head e: file is empty",)),
    Case("no-task", lambda c: multi(c), ("needs at least one head",)),
    Case(
        "model-per-head",
        lambda c: multi(c, "a:cls:DIR/cls.csv:model=bert-base-uncased"),
        ("head a: model is set per head; the heads share one encoder",),
    ),
    Case(
        "model-per-head-in-config",
        lambda c: config(c, "heads:\n- {name: a, kind: cls, data: DIR/cls.csv, model: x}\n"),
        ("head a: model is set per head",),
    ),
    Case("weight-zero", lambda c: multi(c, "a:cls:DIR/cls.csv:weight=0"), ("head a: weight 0 is not positive",)),
    Case(
        "weight-negative-in-config",
        lambda c: config(c, "heads:\n- {name: a, kind: cls, data: DIR/cls.csv, weight: -2}\n"),
        ("head a: weight -2 is not positive",),
    ),
    Case(
        "embedding-head",
        lambda c: multi(c, "a:cls:DIR/cls.csv", "q:embedding:squad"),
        ("head q: kind embedding is not a multi-head kind yet",),
    ),
    Case(
        "rerank-head-on-classification-rows",
        lambda c: multi(c, "r:rerank:DIR/cls.csv"),
        ("head r: ", "no query and passage columns"),
    ),
    Case("not-name-kind-data", lambda c: multi(c, "a:cls"), ("is not NAME:KIND:DATA",)),
    Case(
        "with-lora",
        lambda c: multi(c, "a:cls:DIR/cls.csv", extra=("--lora", 8)),
        ("bertkit finetune multi does not compose with --lora",),
    ),
    Case(
        "with-calibrate",
        lambda c: multi(c, "a:cls:DIR/cls.csv", extra=("--calibrate",)),
        ("bertkit finetune multi does not compose with --calibrate",),
    ),
    Case(  # the seeds are compared on every head's evaluation data
        "seeds-with-a-head-without-eval-data",
        lambda c: multi(c, "a:cls:DIR/cls.csv:eval_data=DIR/cls.csv", "b:pair:DIR/pair.tsv", extra=("--seeds", 2)),
        ("--seeds compares runs on every head's evaluation data, and head b has none",),
    ),
    Case(
        "seeds-with-from",
        lambda c: multi(c, "a:cls:DIR/cls.csv:eval_data=DIR/cls.csv", extra=("--seeds", 2, "--from", c.tmp)),
        ("--from adds heads to one trained model; it does not compose with --seeds",),
    ),
    Case(
        "keep-all-without-seeds",
        lambda c: multi(c, "a:cls:DIR/cls.csv", extra=("--keep-all",)),
        ("--keep-all applies only with --seeds",),
    ),
    Case(
        "with-folds",
        lambda c: multi(c, "a:cls:DIR/cls.csv", extra=("--folds", 2)),
        ("bertkit finetune multi does not compose with --folds",),
    ),
    Case(
        "with-long-text-windows",
        lambda c: multi(c, "a:cls:DIR/cls.csv:long_text=windows"),
        ("does not compose with --long-text",),
    ),
    Case("with-setfit", lambda c: multi(c, "a:cls:DIR/cls.csv:recipe=setfit"), ("does not compose with --recipe",)),
    Case(
        "unknown-sampling",
        lambda c: multi(c, "a:cls:DIR/cls.csv", extra=("--sampling", "random")),
        ("--sampling 'random' is not one of",),
    ),
    Case(
        "temperature-zero",
        lambda c: multi(c, "a:cls:DIR/cls.csv", extra=("--sampling", "temperature", "--temperature", 0)),
        ("--temperature 0", "not positive"),
    ),
    Case("config-heads-not-a-list-of-heads", lambda c: config(c, "heads:\n- 3\n"), ("a head is a NAME:KIND:DATA",)),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_multi_head_input_fails_in_one_line_and_changes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)


@pytest.fixture(scope="module")
def multi_model(tiny_bert, tmp_path_factory):
    from bertkit import api
    from bertkit.options import RunOptions, TrainConfig
    from bertkit.options.multihead import MultiOptions

    root = tmp_path_factory.mktemp("multi-model")
    (root / "cls.csv").write_text(CLS_CSV)
    (root / "ner.txt").write_text(NER_CONLL)
    heads = MultiOptions([f"s:cls:{root / 'cls.csv'}:eval_data={root / 'cls.csv'}", f"n:ner:{root / 'ner.txt'}"])
    api.finetune_multi(heads, RunOptions(data="", model=str(tiny_bert), output=str(root / "m")), TrainConfig(epochs=1))
    return root / "m"


@pytest.mark.parametrize(
    "args, said",
    [
        (("eval", "--head", "zz"), "--head zz: this model has no such head (its heads: s, n)"),
        (("predict", "--input", "IN", "--head", "zz"), "--head zz: this model has no such head"),
        (("eval", "--data", "IN"), "--data on a multi-head model needs --head"),
        (("export", "--data", "IN"), "--data on a multi-head model: each head's parity reads its own evaluation data"),
        (("predict", "--input", "IN", "--backend", "onnx-int8"), "has no exported int8 ONNX model"),
        (("push", "--repo", "me/mix"), "bertkit push does not take a multi-head model yet"),
        (
            ("inspect attention", "--text", "the film", "--output", "PNG"),
            "is a multi-head model (bertkit finetune multi), not one",
        ),
        (("eval", "--metric", "accuracy"), "bertkit eval on a multi-head model does not compose with --metric yet"),
        (("predict", "--input", "IN", "--top-k", "2"), "does not compose with --top-k yet"),
        (("predict", "--input", "IN", "--ray"), "does not compose with --ray yet"),
        (("distill", "--data", "IN", "--output", "OUT"), "is a multi-head directory; distill takes cls, pair and ner"),
    ],
)
def test_a_multi_head_directory_refuses_in_one_line(multi_model, args, said, run_cli, capsys, tmp_path, monkeypatch):
    from hostile import snapshot

    (tmp_path / "in.txt").write_text("the film was good\n")
    command, *rest = args
    args = [*command.split(), *(["onnx"] if command == "export" else []), multi_model]
    shown = {"IN": str(tmp_path / "in.txt"), "OUT": str(tmp_path / "student"), "PNG": str(tmp_path / "a.png")}
    args += [shown.get(a, a) for a in rest if a != "onnx"]
    before = snapshot(multi_model, tmp_path)
    code, _, stderr = run_cli(*args)
    assert code == 2 and stderr.strip().splitlines()[-1].startswith("error: ") and said in stderr, stderr
    assert "Traceback" not in stderr and snapshot(multi_model, tmp_path) == before


def test_a_multi_head_directory_is_not_a_model_to_start_from(multi_model, tmp_path, run_cli):
    (tmp_path / "t.csv").write_text(CLS_CSV)
    code, _, stderr = run_cli(
        "finetune", "cls", "--data", tmp_path / "t.csv", "--model", multi_model, "--output", tmp_path / "out"
    )
    assert code == 2 and "is a multi-head model (bertkit finetune multi), not one transformers checkpoint" in stderr
    assert not (tmp_path / "out").exists()


def test_head_on_a_one_task_directory_is_refused(trained, run_cli, tmp_path):
    (tmp_path / "in.txt").write_text("the film was good\n")
    code, _, stderr = run_cli("predict", trained("cls"), "--input", tmp_path / "in.txt", "--head", "s")
    assert code == 2 and "--head s: this model has one task (cls), not heads" in stderr
