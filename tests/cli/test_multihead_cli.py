"""`bertkit finetune multi` end to end on the tiny BERT: one directory with every head; eval scores
each head as its task alone does and their mean; predict answers every head per row (or --head);
a head exported as a one-task directory predicts what the head predicts; a resumed run ends with
the uninterrupted run's bytes."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import assert_user_error
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, QA_JSONL

pytestmark = pytest.mark.cli

ML_JSONL = "".join(
    json.dumps({"text": f"the film was {w}", "labels": labels}) + "\n"
    for w, labels in [("good", ["pos"]), ("bad", ["neg", "plot"]), ("great", ["pos", "plot"]), ("awful", ["neg"])] * 4
)
RERANK_JSONL = "".join(
    json.dumps({"query": f"where does {who} live", "passage": text, "label": label}) + "\n"
    for who in ("john", "mary", "paul", "anna")
    for text, label in ((f"{who} lives in paris", 1), ("the weather is fine", 0), ("a film about dogs", 0))
)
REG_CSV = "text,label\n" + "".join(
    f"the film was {w},{v}\n" for w, v in [("good", 4.5), ("bad", 1.0), ("great", 5.0), ("awful", 0.5)] * 4
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi-data")
    for name, text in (
        ("cls.csv", CLS_CSV),
        ("pair.tsv", PAIR_TSV),
        ("ner.txt", NER_CONLL),
        ("reg.csv", REG_CSV),
        ("ml.jsonl", ML_JSONL),
        ("qa.jsonl", QA_JSONL),
        ("rr.jsonl", RERANK_JSONL),
    ):
        (root / name).write_text(text)
    (root / "in.txt").write_text("the film was good\njohn lives in paris\nthe film was awful\n")
    return root


def heads(files) -> list[str]:
    return [
        "--task",
        f"s:cls:{files / 'cls.csv'}:eval_data={files / 'cls.csv'}",
        "--task",
        f"p:pair:{files / 'pair.tsv'}:eval_data={files / 'pair.tsv'}",
        "--task",
        f"r:regression:{files / 'reg.csv'}:eval_data={files / 'reg.csv'}:weight=0.5",
        "--task",
        f"n:ner:{files / 'ner.txt'}:eval_data={files / 'ner.txt'}",
    ]


def train_args(files, tiny_bert, output, *extra) -> list:
    common = ["--model", tiny_bert, "--batch-size", 4, "--max-length", 32, "--lr", "1e-3", "--precision", "no"]
    return ["finetune", "multi", *heads(files), *common, "--output", output, *extra]


@pytest.fixture(scope="module")
def trained(files, tiny_bert, tmp_path_factory):
    import sys

    from bertkit import cli

    out = tmp_path_factory.mktemp("multi") / "model"
    argv, sys.argv = sys.argv, ["bertkit", *map(str, train_args(files, tiny_bert, out, "--epochs", 2))]
    try:
        cli.main()
    except SystemExit as exc:
        assert not exc.code
    finally:
        sys.argv = argv
    return out


def test_one_directory_lists_every_head(trained):
    meta = json.loads((trained / "bertkit.json").read_text())
    assert meta["kind"] == "multi-head" and [h["name"] for h in meta["heads"]] == ["s", "p", "r", "n"]
    assert [h["task"]["task"] for h in meta["heads"]] == ["cls", "pair", "cls", "ner"]
    assert meta["heads"][2]["task"]["options"]["problem_type"] == "regression" and meta["heads"][2]["weight"] == 0.5
    assert set(meta["heads"][3]["task"]["labels"]) >= {"B-PER", "B-LOC"}
    mains = [h["metrics"][h["main_metric"]] for h in meta["heads"]]
    assert meta["metrics"]["mean"] == pytest.approx(sum(mains) / 4, abs=1e-6)
    assert "heads" in (trained / "config.yaml").read_text()
    from bertkit.model_dir.ownership import card_state

    card = (trained / "README.md").read_text()
    assert card_state(trained / "README.md") == "ours" and all(
        f"| {h['name']} | {h['kind']} |" in card for h in meta["heads"]
    )
    assert "bertkit predict model --input rows.jsonl --head n" in card
    html = (trained / "report.html").read_text()
    assert "multi (4 heads: s cls, p pair, r regression, n ner)" in html and "n/f1" in html
    if importlib.util.find_spec("matplotlib"):  # the report extra: the figures, in the card and the report
        assert (trained / "figures" / "heads.png").is_file() and "![heads](figures/heads.png)" in card


def test_report_redraws_a_multi_head_directory(trained, run_cli, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    (copy / "report.html").unlink()
    code, stdout, stderr = run_cli("report", copy)
    if not importlib.util.find_spec("matplotlib"):  # bertkit report needs the report extra
        assert code == 2 and "matplotlib" in stderr
        return
    assert code == 0, stderr
    assert f"figure: {copy / 'figures' / 'heads.png'}" in stdout and (copy / "report.html").is_file()


def test_eval_scores_each_head_as_training_did_and_their_mean(trained, run_cli):
    code, stdout, stderr = run_cli("eval", trained, "--precision", "no")
    assert code == 0, stderr
    meta = json.loads((trained / "bertkit.json").read_text())
    report = json.loads((trained / "eval-heads.json").read_text())
    for head in meta["heads"]:  # the same data as training's last evaluation: the same numbers
        numbers = {k: v for k, v in head["metrics"].items() if isinstance(v, float)}
        assert {k: report["heads"][head["name"]]["metrics"][k] for k in numbers} == pytest.approx(numbers, abs=1e-5)
        assert f"head {head['name']} (" in stdout
    assert report["mean"] == pytest.approx(meta["metrics"]["mean"], abs=1e-5)
    assert "mean of the heads' main metrics" in stdout


def test_predict_answers_every_head_that_reads_the_rows_and_one_head_alone(trained, files, run_cli, tmp_path):
    code, _, stderr = run_cli("predict", trained, "--input", files / "in.txt", "--output", tmp_path / "all.jsonl")
    assert code == 0, stderr
    rows = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(set(row) == {"s", "r", "n"} for row in rows)  # no pair on single texts: said
    assert "head p left out" in stderr
    assert rows[0]["s"]["label"] in ("pos", "neg") and isinstance(rows[0]["r"]["score"], float)
    code, stdout, stderr = run_cli("predict", trained, "--input", files / "in.txt", "--output", "-", "--head", "n")
    assert code == 0, stderr
    assert [json.loads(line) for line in stdout.splitlines()] == [{"n": row["n"]} for row in rows]


@pytest.mark.parametrize("name", ["s", "r", "n"])
def test_an_exported_head_predicts_what_the_head_predicts(trained, files, run_cli, tmp_path, name):
    single = tmp_path / f"single-{name}"
    code, _, stderr = run_cli("export", "head", trained, name, "--output", single)
    assert code == 0, stderr
    code, stdout, stderr = run_cli("predict", trained, "--input", files / "in.txt", "--head", name, "--precision", "no")
    assert code == 0, stderr
    multi = [json.loads(line)[name] for line in stdout.splitlines()]
    code, stdout, stderr = run_cli("predict", single, "--input", files / "in.txt", "--precision", "no")
    assert code == 0, stderr
    alone = [json.loads(line) for line in stdout.splitlines()]
    assert [{k: v for k, v in row.items() if k != "text"} for row in alone] == [
        {k: v for k, v in row.items() if k != "text"} for row in multi
    ]


def test_an_interrupted_run_resumes_to_the_uninterrupted_bytes(files, tiny_bert, run_cli, monkeypatch, tmp_path):
    from safetensors.torch import load_file

    def command(name, *extra):
        return train_args(files, tiny_bert, tmp_path / name, "--epochs", 2, "--save-every", 3, *extra)

    monkeypatch.setenv("BERTKIT_TEST_SIGNAL", "INT@step-5")
    code, _, stderr = run_cli(*command("resumed"))
    assert code == 130 and "interrupted" in stderr, stderr
    monkeypatch.delenv("BERTKIT_TEST_SIGNAL")
    code, stdout, stderr = run_cli(*command("resumed"), "--resume")
    assert code == 0 and stdout.startswith("resumed from"), stderr
    code, _, stderr = run_cli(*command("uninterrupted"))
    assert code == 0, stderr
    reference, resumed = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("uninterrupted", "resumed"))
    assert reference.keys() == resumed.keys() and all(torch_equal(reference[k], resumed[k]) for k in reference)
    history = [json.loads((tmp_path / d / "bertkit.json").read_text())["history"] for d in ("uninterrupted", "resumed")]
    assert history[0] == history[1]


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def test_freeze_embeddings_reaches_the_shared_encoder(files, tiny_bert, run_cli, tmp_path):
    from safetensors.torch import load_file

    code, _, stderr = run_cli(*train_args(files, tiny_bert, tmp_path / "frozen", "--epochs", 1, "--freeze-embeddings"))
    assert code == 0, stderr
    trained = load_file(str(tmp_path / "frozen" / "model.safetensors"))
    start = load_file(str(tiny_bert / "model.safetensors"))
    key = "embeddings.word_embeddings.weight"
    assert torch_equal(trained[f"encoder.{key}"], start[key])
    assert not torch_equal(
        trained["encoder.encoder.layer.0.attention.self.query.weight"],
        start["encoder.layer.0.attention.self.query.weight"],
    )


def test_the_server_answers_every_head_and_one_head_as_predict_does(trained, files, run_cli):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from bertkit.api.multihead_serving import MultiHeadServing
    from bertkit.options import InferenceOptions
    from bertkit.serving.app import create_app

    code, stdout, stderr = run_cli("predict", trained, "--input", files / "in.txt", "--precision", "no")
    assert code == 0, stderr
    expected = [json.loads(line) for line in stdout.splitlines()]
    texts = (files / "in.txt").read_text().splitlines()
    served = MultiHeadServing(str(trained), InferenceOptions(precision="no")).load()
    with TestClient(create_app(served)) as client:
        answer = client.post("/predict", json={"inputs": texts})
        assert answer.status_code == 200, answer.text
        assert answer.json()["predictions"] == expected
        answer = client.post("/predict/n", json={"inputs": texts})
        assert answer.json()["predictions"] == [{"n": row["n"]} for row in expected]
        pair = client.post("/predict", json={"inputs": [{"text": "the film was good", "text_pair": "it was bad"}]})
        heads = set(pair.json()["predictions"][0])
        assert (
            pair.status_code == 200 and "p" in heads and not heads & {"s", "r"}
        )  # single-text classifiers refuse pairs
        missing = client.post("/predict/zz", json={"inputs": texts})
        assert missing.status_code == 422 and "no head 'zz'" in missing.json()["error"]
        wrong = client.post("/predict/p", json={"inputs": texts})
        assert wrong.status_code == 422 and wrong.json()["error"].startswith("head p: ")
        assert set(client.get("/info").json()["heads"]) == {"s", "p", "r", "n"}


def test_the_served_heads_pack_mostly_padded_batches_and_answer_as_predict(trained, files, run_cli, monkeypatch):
    """serve packs a mostly padded batch through the shared encoder (engine/packed_inference.py),
    for the heads that share one pass and for a tagger alone; fp32 answers equal predict's."""
    from bertkit.api.serving import served_predictor
    from bertkit.engine import packed_inference
    from bertkit.options import CoverageOptions, InferenceOptions

    texts = ["good", "the film was good and the plot was fine and the acting was great", "bad", "ok"]
    (files / "mixed.txt").write_text("\n".join(texts) + "\n")
    code, stdout, stderr = run_cli("predict", trained, "--input", files / "mixed.txt", "--precision", "no")
    assert code == 0, stderr
    expected = [json.loads(line) for line in stdout.splitlines()]
    packed = []
    real = packed_inference.pack_this_encoder
    monkeypatch.setattr(packed_inference, "pack_this_encoder", lambda encoder: packed.append(1) or real(encoder))
    served = served_predictor(str(trained), InferenceOptions(precision="no"), "torch", CoverageOptions())
    answers = served.predict(served.examples(texts))
    assert len(packed) >= 2  # the classifiers' shared pass and the tagger's own
    assert len(answers) == len(expected)
    for got, want in zip(answers, expected):
        assert got["n"]["tags"] == want["n"]["tags"] and got["s"]["label"] == want["s"]["label"]
        for k, v in want["s"]["probabilities"].items():
            assert abs(got["s"]["probabilities"][k] - v) <= 2e-6
        assert abs(got["r"]["score"] - want["r"]["score"]) <= 1e-5


def test_config_yaml_replays_the_heads(trained, tmp_path, run_cli):
    out = tmp_path / "again"
    replay = ["finetune", "multi", "--config", trained / "config.yaml", "--output", out, "--epochs", 1]
    code, stdout, stderr = run_cli(*replay, "--sampling", "temperature", "--temperature", 3)
    assert code == 0, stderr
    meta = json.loads((out / "bertkit.json").read_text())
    assert [(h["name"], h["kind"], h["weight"]) for h in meta["heads"]] == [
        ("s", "cls", 1.0),
        ("p", "pair", 1.0),
        ("r", "regression", 0.5),
        ("n", "ner", 1.0),
    ]
    assert "sampling: temperature" in (out / "config.yaml").read_text()


def test_one_head_trains_exactly_as_its_task_alone_and_stores_its_threshold(files, tiny_bert, run_cli, tmp_path):
    """The multi-head path with one (multi-label) head: the single-task run, weight for weight."""
    from safetensors.torch import load_file

    ml = files / "ml.jsonl"
    out, alone = tmp_path / "ml", tmp_path / "alone"
    common = ["--model", tiny_bert, "--batch-size", 4, "--max-length", 32, "--lr", "1e-3", "--precision", "no"]
    code, _, stderr = run_cli(
        "finetune", "multi", "--task", f"m:multi-label:{ml}:eval_data={ml}", *common, "--epochs", 2, "--output", out
    )
    assert code == 0, stderr
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        ml,
        "--eval-data",
        ml,
        "--problem-type",
        "multi-label",
        *common,
        "--epochs",
        2,
        "--output",
        alone,
    )
    assert code == 0, stderr
    head = json.loads((out / "bertkit.json").read_text())["heads"][0]
    single = json.loads((alone / "bertkit.json").read_text())
    assert head["task"]["options"]["threshold"] == single["task"]["options"]["threshold"]
    numbers = {k: v for k, v in single["metrics"].items() if isinstance(v, float)}
    assert {k: head["metrics"][k] for k in numbers} == numbers
    multi, single_weights = load_file(str(out / "model.safetensors")), load_file(str(alone / "model.safetensors"))
    renamed = {
        k.replace("encoder.", "bert.", 1) if k.startswith("encoder.") else k.replace("heads.m.", ""): v
        for k, v in multi.items()
    }
    assert renamed.keys() == single_weights.keys()
    assert all(torch_equal(renamed[k], single_weights[k]) for k in renamed)


def test_heads_reading_the_same_ids_share_one_pass_with_the_same_answers(trained, files, run_cli):
    from bertkit.api.multihead_inference import MultiHeadPredictor, shared_passes
    from bertkit.data.registry import Source
    from bertkit.options import InferenceOptions

    predictor = MultiHeadPredictor(str(trained), InferenceOptions(precision="no")).load()
    rows = [{"text": line} for line in (files / "in.txt").read_text().splitlines()]
    examples = {n: predictor.adapters[n].from_records(rows, Source("t"), "predict") for n in ("s", "r", "n")}
    features = {n: predictor.adapters[n].preprocess(found, predictor.tokenizer, False) for n, found in examples.items()}
    assert shared_passes(features, predictor.adapters) == [["s", "r"], ["n"]]  # the tagger reads words: its own pass
    together = predictor.predict_many(examples)
    assert together == {n: predictor.predict(n, found) for n, found in examples.items()}


def test_lazy_embeddings_and_save_memory_train_the_shared_encoder(files, tiny_bert, run_cli, tmp_path):
    out = tmp_path / "lazy"
    args = train_args(files, tiny_bert, out, "--epochs", 1, "--save-memory", "--lazy-embeddings")
    code, stdout, stderr = run_cli(*[a if a != "no" else "bf16" for a in args])  # --precision bf16
    assert code == 0, stderr
    assert json.loads((out / "bertkit.json").read_text())["runtime"]["precision"] == "bf16"


def _close(a, b, tolerance=1e-4) -> bool:
    """Two predict rows alike: the same labels, tags and texts, numbers within ``tolerance``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= tolerance
    return a == b


def test_one_exported_graph_answers_every_head_as_torch_does(trained, files, run_cli, tmp_path):
    pytest.importorskip("onnxruntime")
    import shutil

    from bertkit.api.multihead_serving import MultiHeadServing
    from bertkit.options import InferenceOptions

    model = tmp_path / "model"
    shutil.copytree(trained, model)
    code, _, err = run_cli("export", "onnx", model)
    assert code == 0, err
    report = json.loads((model / "onnx" / "export.json").read_text())
    assert report["heads"] == ["s", "p", "r", "n"] and report["fp32"]["max_abs_diff"] < 1e-4
    assert set(report["fp32"]["heads"]) == {"s", "p", "r", "n"}
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"text": "the film was good", "text_pair": "it was bad"}) + "\n")
    for rows in (files / "in.txt", pairs):  # single texts (s, r, n) and pairs (p)
        code, torch_out, err = run_cli("predict", model, "--input", rows, "--precision", "no")
        assert code == 0, err
        code, onnx_out, err = run_cli("predict", model, "--input", rows, "--backend", "onnx")
        assert code == 0, err
        expected = [json.loads(line) for line in torch_out.splitlines()]
        assert _close([json.loads(line) for line in onnx_out.splitlines()], expected)
    served = MultiHeadServing(str(model), InferenceOptions(), backend="onnx").load()
    assert served.heads.model is None  # the graph alone: no torch weights held
    texts = (files / "in.txt").read_text().splitlines()
    code, torch_out, _ = run_cli("predict", model, "--input", files / "in.txt", "--precision", "no")
    assert _close(served.predict(served.examples(texts)), [json.loads(line) for line in torch_out.splitlines()])
    assert served.info()["backend"] == "onnx"
    # new weights: the export is stale, and said so before any work
    from safetensors.torch import load_file, save_file

    weights = load_file(model / "model.safetensors")
    first = next(iter(weights))
    weights[first] = weights[first] + 0.01
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
    assert_user_error(run_cli("predict", model, "--input", files / "in.txt", "--backend", "onnx"), "cannot be used")
    assert_user_error(run_cli("export", "onnx", model, "--data", files / "cls.csv"), "each head's parity")


def _rows(stdout: str) -> list:
    return [json.loads(line) for line in stdout.splitlines()]


def test_from_adds_a_head_and_keeps_the_others(trained, files, tiny_bert, run_cli, tmp_path):
    common = ["--batch-size", 4, "--max-length", 32, "--lr", "1e-3", "--precision", "no", "--epochs", 2]
    new = ["--task", f"m:multi-label:{files / 'ml.jsonl'}:eval_data={files / 'ml.jsonl'}"]
    frozen, moved = tmp_path / "frozen", tmp_path / "moved"
    args = ("finetune", "multi", "--from", trained, *new, *common)
    code, _, err = run_cli(*args, "--freeze-encoder", "--output", frozen)
    assert code == 0, err
    meta = json.loads((frozen / "bertkit.json").read_text())
    assert [h["name"] for h in meta["heads"]] == ["s", "p", "r", "n", "m"]
    assert meta["from"]["freeze_encoder"] and set(meta["from"]["forgetting"]) == {"s", "p", "r", "n"}
    assert all(entry["change"] == 0 for entry in meta["from"]["forgetting"].values())
    # frozen: every old head answers exactly as before, and the new one answers too
    code, before, _ = run_cli("predict", trained, "--input", files / "in.txt", "--precision", "no")
    code, after, err = run_cli("predict", frozen, "--input", files / "in.txt", "--precision", "no")
    assert code == 0, err
    assert [{k: v for k, v in row.items() if k != "m"} for row in _rows(after)] == _rows(before)
    assert all("m" in row for row in _rows(after))
    # not frozen: the encoder trains on; each old head is scored before and after, on its own data
    code, _, err = run_cli(*args, "--output", moved)
    assert code == 0, err
    moved_meta = json.loads((moved / "bertkit.json").read_text())
    forgetting = moved_meta["from"]["forgetting"]
    trained_meta = json.loads((trained / "bertkit.json").read_text())
    for head in trained_meta["heads"]:
        entry = forgetting[head["name"]]
        assert entry["before"] == pytest.approx(head["metrics"][entry["metric"]], abs=1e-6)  # as DIR scored it
        after_metrics = next(h["metrics"] for h in moved_meta["heads"] if h["name"] == head["name"])
        assert entry["after"] == after_metrics[entry["metric"]]
        assert entry["change"] == pytest.approx(entry["after"] - entry["before"], abs=1e-6)
    encoder = {k for k in _weights(moved) if k.startswith("encoder.")}
    assert any(not torch_equal(_weights(moved)[k], _weights(trained)[k]) for k in encoder)
    # the directory is whole: eval scores all five heads, config.yaml replays the addition
    code, out, err = run_cli("eval", moved, "--precision", "no")
    assert code == 0, err
    assert json.loads((moved / "eval-heads.json").read_text())["heads"].keys() == {"s", "p", "r", "n", "m"}
    code, _, err = run_cli("finetune", "multi", "--config", moved / "config.yaml", "--output", tmp_path / "again")
    assert code == 0, err
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (moved / "model.safetensors").read_bytes()


def _assert_the_same_weights(multi, alone, head: str) -> None:
    """A one-head directory's weights are the single-task model's, tensor for tensor (BERT's names)."""
    weights, single = _weights(multi), _weights(alone)
    renamed = {
        k.replace("encoder.", "bert.", 1) if k.startswith("encoder.") else k.replace(f"heads.{head}.", ""): v
        for k, v in weights.items()
    }
    assert renamed.keys() == single.keys() and all(torch_equal(renamed[k], single[k]) for k in renamed)


def _weights(directory):
    from safetensors.torch import load_file

    return load_file(directory / "model.safetensors")


@pytest.mark.parametrize(
    "extra, said",
    [
        (("--from", "TRAINED", "--task", "s:cls:CLS"), "already has a head 's'"),
        (("--from", "ONE", "--task", "x:cls:CLS"), "is a one-task model; --from adds heads to a multi-head directory"),
        (("--task", "x:cls:CLS", "--freeze-encoder"), "--freeze-encoder applies with --from"),
        (("--from", "TRAINED", "--task", "x:cls:CLS", "--model", "TINY"), "--from takes the encoder"),
        (("--from", "TRAINED", "--task", "x:cls:CLS", "--save-every", 2), "does not compose with --save-every"),
    ],
)
def test_from_refuses_in_one_line(trained, files, tiny_bert, run_cli, tmp_path, extra, said):
    one = tmp_path / "one"
    if "ONE" in extra:
        code, _, err = run_cli("finetune", "cls", "--data", files / "cls.csv", "--model", tiny_bert, "--output", one)
        assert code == 0, err
    shown = {"TRAINED": trained, "ONE": one, "CLS": files / "cls.csv", "TINY": tiny_bert}
    args = [str(a).replace("CLS", str(files / "cls.csv")) if "CLS" in str(a) else shown.get(a, a) for a in extra]
    assert_user_error(run_cli("finetune", "multi", *args, "--output", tmp_path / "out"), said)
    assert not (tmp_path / "out").exists()


def test_predict_streams_every_head_and_a_killed_run_resumes_to_the_same_bytes(trained, tmp_path, run_cli):
    import subprocess

    from test_streaming import _kill_after_parts, bertkit_cmd, env, read_jsonl, write_rows

    from bertkit import api
    from bertkit.options import InferenceOptions, PredictOptions

    source = write_rows(tmp_path / "in.jsonl", 900)
    whole, resumed = tmp_path / "whole.jsonl", tmp_path / "resumed.jsonl"
    base = ["predict", trained, "--input", source, "--chunk-rows", 60, "--batch-size", 16, "--precision", "no"]
    code, _, err = run_cli(*base, "--output", whole)
    assert code == 0, err
    assert "head p left out" in err and "900 predictions (s, r, n) written" in err  # single texts: no pair head
    rows = read_jsonl(whole)
    assert [row["s"]["id"] for row in rows] == [f"r{i}" for i in range(900)] and {"s", "r", "n"} == set(rows[0])
    in_memory = api.predict_multi(str(trained), PredictOptions(input=str(source)), InferenceOptions(precision="no"))
    assert _close(in_memory["rows"], rows, 1e-5)  # the API collects what the stream writes
    code, out, err = run_cli(*base)  # to standard output, chunk by chunk
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == rows
    _kill_after_parts(bertkit_cmd(*base, "--output", resumed), resumed, 4)
    assert not resumed.exists()
    again = bertkit_cmd(*base, "--output", resumed, "--resume")
    done = subprocess.run(again, env=env(), capture_output=True, text=True)
    assert done.returncode == 0 and "resumed after" in done.stderr, done.stderr
    assert resumed.read_bytes() == whole.read_bytes()


def test_a_qa_head_trains_as_qa_alone_and_answers_beside_a_classifier(files, tiny_bert, run_cli, tmp_path):
    """A QA head (spans from start and end logits over windows): one head alone is `finetune qa`,
    weight for weight; beside a classifier it answers predict and its exported graph as torch does,
    and the heads' mean reads its F1 (a percentage) on the 0-1 scale."""
    qa, common = files / "qa.jsonl", ["--model", tiny_bert, "--batch-size", 4, "--lr", "1e-3", "--precision", "no"]
    out, alone, mixed = tmp_path / "q", tmp_path / "alone", tmp_path / "mixed"
    code, _, err = run_cli(
        "finetune", "multi", "--task", f"q:qa:{qa}:eval_data={qa}", *common, "--epochs", 2, "--output", out
    )
    assert code == 0, err
    code, _, err = run_cli("finetune", "qa", "--data", qa, "--eval-data", qa, *common, "--epochs", 2, "--output", alone)
    assert code == 0, err
    head = json.loads((out / "bertkit.json").read_text())["heads"][0]
    single = json.loads((alone / "bertkit.json").read_text())
    numbers = {k: v for k, v in single["metrics"].items() if isinstance(v, float)}
    assert {k: head["metrics"][k] for k in numbers} == numbers
    _assert_the_same_weights(out, alone, "q")
    heads = [
        "--task",
        f"s:cls:{files / 'cls.csv'}:eval_data={files / 'cls.csv'}",
        "--task",
        f"q:qa:{qa}:eval_data={qa}",
    ]
    code, _, err = run_cli("finetune", "multi", *heads, *common, "--epochs", 1, "--output", mixed)
    assert code == 0, err
    meta = json.loads((mixed / "bertkit.json").read_text())
    assert meta["metrics"]["mean"] == pytest.approx((meta["metrics"]["s/accuracy"] + meta["metrics"]["q/f1"] / 100) / 2)
    code, torch_out, err = run_cli("predict", mixed, "--input", qa, "--precision", "no")
    assert code == 0 and "head s left out" in err, err
    rows = _rows(torch_out)
    assert [row["q"]["id"] for row in rows] == [f"q{i}" for i in range(8)] and all("answer" in row["q"] for row in rows)
    if importlib.util.find_spec("onnxruntime") is not None:
        code, _, err = run_cli("export", "onnx", mixed)
        assert code == 0, err
        code, onnx_out, err = run_cli("predict", mixed, "--input", qa, "--backend", "onnx")
        assert code == 0 and _close(_rows(onnx_out), rows), err


def test_a_pointwise_rerank_head_trains_as_rerank_alone_and_a_listwise_one_is_refused(
    files, tiny_bert, run_cli, tmp_path
):
    rr, common = files / "rr.jsonl", ["--model", tiny_bert, "--batch-size", 4, "--lr", "1e-3", "--precision", "no"]
    out, alone = tmp_path / "r", tmp_path / "alone"
    head = f"r:rerank:{rr}:eval_data={rr}"
    code, _, err = run_cli("finetune", "multi", "--task", head, *common, "--epochs", 2, "--output", out)
    assert code == 0, err
    code, _, err = run_cli(
        "finetune", "rerank", "--data", rr, "--eval-data", rr, *common, "--epochs", 2, "--output", alone
    )
    assert code == 0, err
    recorded = json.loads((out / "bertkit.json").read_text())["heads"][0]
    single = json.loads((alone / "bertkit.json").read_text())
    assert recorded["main_metric"] == single["task"].get("main_metric", "ndcg@10") or "ndcg@10" in recorded["metrics"]
    numbers = {k: v for k, v in single["metrics"].items() if isinstance(v, float)}
    assert {k: recorded["metrics"][k] for k in numbers} == numbers
    _assert_the_same_weights(out, alone, "r")
    listwise = ["--task", f"{head}:rerank_loss=listwise", *common, "--output", tmp_path / "lw"]
    assert_user_error(run_cli("finetune", "multi", *listwise), "head r: its task trains with listwise")


def test_seeds_train_one_run_per_seed_and_keep_the_best_mean(files, tiny_bert, run_cli, tmp_path):
    two = heads(files)[:2] + heads(files)[6:]  # s (cls) and n (ner)
    common = ["--model", tiny_bert, "--batch-size", 4, "--max-length", 32, "--lr", "1e-3", "--precision", "no"]
    code, stdout, stderr = run_cli(
        "finetune", "multi", *two, *common, "--epochs", 1, "--output", tmp_path / "set", "--seeds", "42,43"
    )
    assert code == 0, stderr
    assert "seed 42: mean of the heads' main metrics" in stderr and "seed 43: " in stderr
    meta = json.loads((tmp_path / "set" / "bertkit.json").read_text())
    section = meta["seeds"]
    assert section["seeds"] == [42, 43] and section["main_metric"] == "mean"
    means = {run["seed"]: run["metrics"]["mean"] for run in section["runs"]}
    assert section["chosen_seed"] == max(means, key=means.get) and meta["metrics"]["mean"] == max(means.values())
    found = [run["metrics"]["s/accuracy"] for run in section["runs"]]
    assert section["summary"]["s/accuracy"]["mean"] == pytest.approx(sum(found) / 2, abs=1e-6)
    assert f"s/accuracy over 2 seeds: {section['summary']['s/accuracy']['mean']:.4f}" in stdout
    assert not (tmp_path / "set.seeds").exists()  # only the best is kept
    assert "seeds: 42,43" in (tmp_path / "set" / "config.yaml").read_text()  # replays the whole set
    assert "Trained 2 times (seeds 42, 43)" in (tmp_path / "set" / "README.md").read_text()
    # each seed's run is the ordinary run with that seed
    code, _, stderr = run_cli("finetune", "multi", *two, *common, "--epochs", 1, "--output", tmp_path / "one")
    assert code == 0, stderr
    alone = json.loads((tmp_path / "one" / "bertkit.json").read_text())["metrics"]
    assert alone == section["runs"][0]["metrics"]
