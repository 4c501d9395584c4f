"""`bertkit inspect`: word pieces with ids/segments/positions, raw attention weights, heatmap files."""

from __future__ import annotations

import json
import struct
import sys

import numpy as np
import pytest
from conftest import SPECIALS, TINY_WORDS, assert_user_error

from bertkit.options import RunOptions

VOCAB = SPECIALS + list(dict.fromkeys(TINY_WORDS)) + ["##s", "##ing", "##ed"]


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_tokens_table_and_json(tiny_bert, run_cli):
    code, stdout, stderr = run_cli(
        "inspect", "tokens", tiny_bert, "--text", "John visited movies", "--text-pair", "the acting", "--json"
    )
    assert code == 0, stderr
    rows = json.loads(stdout)["tokens"]
    pieces = ["[CLS]", "john", "visited", "movie", "##s", "[SEP]", "the", "acting", "[SEP]"]
    assert [r["token"] for r in rows] == pieces
    assert [r["id"] for r in rows] == [VOCAB.index(p) for p in pieces] == [2, 49, 63, 20, 91, 3, 5, 24, 3]
    assert [r["segment"] for r in rows] == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert [r["position"] for r in rows] == list(range(9))
    assert [r["word"] for r in rows] == [None, 0, 1, 2, 2, None, 0, 1, None]
    assert [(r["start"], r["end"]) for r in rows[1:5]] == [(0, 4), (5, 12), (13, 18), (18, 19)]  # "movie" + "s"

    code, stdout, _ = run_cli("inspect", "tokens", tiny_bert, "--text", "John visited movies")
    assert code == 0
    assert stdout.splitlines()[4].split() == ["3", "movie", "20", "0", "2", "13-18"]


def test_attention_json_is_the_models_own_weights(tiny_bert, tmp_path, run_cli):
    import torch
    from transformers import AutoModel, AutoTokenizer

    text = "the movie was good"
    code, stdout, stderr = run_cli(
        "inspect", "attention", tiny_bert, "--text", text, "--layer", "-1", "--head", "1", "--json"
    )
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["layer"] == 2 and result["heads"] == [1] and len(result["tokens"]) == 6
    weights = np.array(result["weights"])
    assert weights.shape == (1, 6, 6)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # every query's weights sum to 1

    model = AutoModel.from_pretrained(tiny_bert, attn_implementation="eager").eval()
    with torch.no_grad():
        reference = (
            model(**AutoTokenizer.from_pretrained(tiny_bert)(text, return_tensors="pt"), output_attentions=True)
            .attentions[1][0, 1]
            .numpy()
        )
    np.testing.assert_allclose(weights[0], reference, atol=2e-6)

    code, _, stderr = run_cli(
        "inspect",
        "attention",
        tiny_bert,
        "--text",
        text,
        "--layer",
        "1",
        "--all-heads",
        "--json",
        "--output",
        tmp_path / "w.json",
    )
    assert code == 0, stderr
    assert np.array(json.loads((tmp_path / "w.json").read_text())["weights"]).shape == (2, 6, 6)


def test_heatmap_files_have_the_expected_pixel_size(tiny_bert, tmp_path, run_cli):
    pytest.importorskip("matplotlib")
    # 9 tokens: a 4-inch (400 px at 100 dpi) square; 16 tokens: 1.5 + 0.25 * 16 = 5.5 inches.
    code, _, stderr = run_cli(
        "inspect",
        "attention",
        tiny_bert,
        "--text",
        "John visited movies",
        "--text-pair",
        "the acting",
        "--output",
        tmp_path / "one.png",
    )
    assert code == 0, stderr
    assert "layer 2, head 0, 9 tokens: 400x400 px" in stderr
    assert png_size(tmp_path / "one.png") == (400, 400)
    long_text = "john met mary in paris and they visited the city of london with obama"  # 14 words
    code, _, stderr = run_cli("inspect", "attention", tiny_bert, "--text", long_text, "--output", tmp_path / "long.png")
    assert code == 0, stderr
    assert png_size(tmp_path / "long.png") == (550, 550)
    # Every head of a layer: a grid of 4-inch cells, here 1 row x 2 columns (the tiny model has 2 heads).
    code, _, stderr = run_cli(
        "inspect",
        "attention",
        tiny_bert,
        "--text",
        "the movie",
        "--all-heads",
        "--output",
        tmp_path / "grid.png",
        "--dpi",
        "50",
    )
    assert code == 0, stderr
    assert png_size(tmp_path / "grid.png") == (400, 200)


def test_missing_matplotlib_is_one_line_and_loads_nothing(tiny_bert, tmp_path, run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    assert_user_error(
        run_cli("inspect", "attention", tiny_bert, "--text", "the movie", "--output", tmp_path / "a.png"),
        "heatmaps need matplotlib",
        "bertkit[plots]",
    )
    code, stdout, _ = run_cli("inspect", "attention", tiny_bert, "--text", "the movie", "--json")
    assert code == 0 and json.loads(stdout)["heads"] == [0]  # the raw weights need no matplotlib
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--layer", "0"], "attention layers are 1..2"),
        (["--layer", "3"], "attention layers are 1..2"),
        (["--head", "2"], "heads 0..1"),
        (["--output", "{tmp}/a.jpg"], "a figure needs one of .png"),
        (["--output", "{tmp}/no/a.png"], "does not exist"),
        (["--text", " "], "must not be empty"),
    ],
)
def test_attention_user_errors(args, fragment, tiny_bert, tmp_path, run_cli):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    base = ["--text", "the movie"] if "--text" not in args else []
    output = [] if "--output" in args else ["--output", tmp_path / "a.png"]
    assert_user_error(run_cli("inspect", "attention", tiny_bert, *base, *output, *args), fragment)
    assert list(tmp_path.iterdir()) == []


def test_truncation_is_said(tiny_bert, run_cli):
    code, stdout, stderr = run_cli(
        "inspect", "tokens", tiny_bert, "--text", "the movie was very good", "--max-length", "5", "--json"
    )
    assert code == 0
    assert len(json.loads(stdout)["tokens"]) == 5 and "truncated to --max-length 5" in stderr


@pytest.mark.parametrize("how", ["truncate", "head-tail", "windows"])
def test_a_long_text_model_says_what_the_cut_hides(how, tiny_bert, tmp_path, run_cli):
    """inspect shows the plain cut; a head-tail or windows model says, in the same one line, that it
    reads otherwise, and a windows model's first window is exactly that cut at its --max-length."""
    from transformers import AutoTokenizer

    from bertkit import api
    from bertkit.config import TrainConfig
    from bertkit.tasks.long_text import encode_rows

    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "the movie was good,pos\nthe movie was bad,neg\n" * 4)
    config = TrainConfig(epochs=1, batch_size=8, max_length=12, task_options={"long_text": how})
    api.finetune("cls", RunOptions(data=str(data), model=str(tiny_bert), output=str(tmp_path / how)), config=config)
    text = " ".join(["the movie was very good and the acting was bad"] * 3)  # 30 word pieces

    code, stdout, stderr = run_cli("inspect", "tokens", tmp_path / how, "--text", text, "--max-length", 12, "--json")
    assert code == 0, stderr
    lines = [line for line in stderr.splitlines() if "truncated" in line]
    assert len(lines) == 1 and lines[0].startswith("the input was truncated to --max-length 12 tokens")
    assert ("--long-text" in lines[0]) == (how != "truncate")
    if how == "windows":
        assert "this is its first window" in lines[0]
        tokenizer = AutoTokenizer.from_pretrained(tmp_path / how)
        first = encode_rows(tokenizer, [text], None, 12, {"long_text": "windows"}).features[0]["input_ids"]
        assert [row["id"] for row in json.loads(stdout)["tokens"]] == first
        _, _, stderr = run_cli("inspect", "tokens", tmp_path / how, "--text", text, "--max-length", 10)
        assert "give --max-length 12 to see its first" in stderr
    if how == "head-tail":
        assert "its start (a quarter of the room) and its end in one 12-token window" in lines[0]
