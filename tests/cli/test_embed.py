"""`bertkit embed` on tiny random BERTs: every pooling mode against a by-hand forward pass, input
order, output formats, windows for long inputs, per-word vectors, and the error paths."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, build_tiny_bert

from bertkit.options import EmbeddingOptions

TEXTS = [
    "the movie was very good",
    "bad",
    "john visited paris and london with mary , and the film was great",
    "it was fine",
    "who met obama in berlin ?",
    "a great great story",
    "awful",
]


@pytest.fixture(scope="module")
def tiny_bert4(tmp_path_factory):
    """The conftest tiny BERT with 4 layers, so last4 modes have four hidden states to use."""
    import torch
    from transformers import BertConfig, BertModel

    directory = build_tiny_bert(tmp_path_factory.mktemp("tiny-bert4"))
    config = BertConfig.from_pretrained(directory)
    config.num_hidden_layers = 4
    torch.manual_seed(1)
    BertModel(config).save_pretrained(directory)
    return directory


def hidden_states(model_dir, text, pair=None):
    """The model's hidden states for one text alone (no padding): a list of (tokens, dim) arrays."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    with torch.no_grad():
        outputs = model(**tokenizer(text, pair, return_tensors="pt"), output_hidden_states=True)
    return [h[0].numpy() for h in outputs.hidden_states]


BY_HAND = {
    "cls": lambda hs: hs[-1][0],
    "mean": lambda hs: hs[-1].mean(0),
    "max": lambda hs: hs[-1].max(0),
    "last4-concat": lambda hs: np.concatenate(hs[-4:], axis=-1).mean(0),
    "last4-sum": lambda hs: np.sum(hs[-4:], axis=0).mean(0),
    "layer:0": lambda hs: hs[0].mean(0),
    "layer:2": lambda hs: hs[2].mean(0),
}


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("mode", list(BY_HAND))
def test_every_pooling_mode_matches_a_forward_pass_by_hand(mode, tiny_bert4, tmp_path):
    from bertkit.api.embedding import embed

    texts = TEXTS[:3]  # three lengths in one batch: padding must not leak into any mode
    result = embed(
        str(tiny_bert4),
        EmbeddingOptions(pooling=mode, precision="no", input=str(write_lines(tmp_path / "in.txt", texts))),
    )  # fp32: compared with a by-hand forward
    expected = np.stack([BY_HAND[mode](hidden_states(tiny_bert4, text)) for text in texts])
    assert result.vectors.shape == expected.shape
    np.testing.assert_allclose(result.vectors, expected, atol=2e-5)


def test_rows_keep_input_order_in_every_format(tiny_bert, tmp_path, run_cli):
    records = [{"id": f"r{i}", "text": text} for i, text in enumerate(TEXTS)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    for suffix in ("npy", "npz", "jsonl"):
        code, _, stderr = run_cli(
            "embed",
            tiny_bert,
            "--input",
            source,
            "--output",
            tmp_path / f"out.{suffix}",
            "--batch-size",
            3,
            "--precision",
            "no",
        )  # fp32: compared by hand below
        assert code == 0, stderr
        assert f"embedded {len(TEXTS)} rows: dim 32, pooling mean" in stderr
    vectors = np.load(tmp_path / "out.npy")
    archive = np.load(tmp_path / "out.npz")
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert vectors.shape == (7, 32) and vectors.dtype == np.float32
    assert archive["ids"].tolist() == [r["id"] for r in records] == [row["id"] for row in rows]
    np.testing.assert_array_equal(archive["vectors"], vectors)
    np.testing.assert_allclose(np.array([row["vector"] for row in rows]), vectors, rtol=1e-6, atol=1e-7)
    # Length-sorted batches of 3, put back in input order: row i is text i's own vector.
    expected = np.stack([hidden_states(tiny_bert, text)[-1].mean(0) for text in TEXTS])
    np.testing.assert_allclose(vectors, expected, atol=2e-5)


def test_stdin_to_stdout_normalized_and_pairs(tiny_bert, tmp_path, run_cli, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("the movie\tbad plot\nit was fine\tgood\n"))
    code, stdout, stderr = run_cli(
        "embed", tiny_bert, "--input", "-", "--output", "-", "--normalize", "--pooling", "cls", "--precision", "no"
    )
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [row["id"] for row in rows] == ["0", "1"]
    assert all(abs(np.linalg.norm(row["vector"]) - 1) < 1e-5 for row in rows)
    expected = hidden_states(tiny_bert, "the movie", "bad plot")[-1][0]  # a TAB makes a pair: segment ids 0/1
    np.testing.assert_allclose(rows[0]["vector"], expected / np.linalg.norm(expected), atol=1e-5)


def test_long_inputs_are_windowed_combined_and_said_so(tiny_bert, tmp_path, run_cli):
    from transformers import AutoTokenizer

    long_text = " ".join(["the movie was very good and the plot was great"] * 3)  # 30 word pieces
    source = write_lines(tmp_path / "in.txt", ["bad", long_text])
    code, _, stderr = run_cli(
        "embed",
        tiny_bert,
        "--input",
        source,
        "--output",
        tmp_path / "out.npy",
        "--max-length",
        12,
        "--stride",
        4,
        "--precision",
        "no",
    )  # fp32: compared by hand
    assert code == 0, stderr
    assert "1 row(s) longer than --max-length 12 were split into overlapping windows (4 tokens of overlap" in stderr
    # By hand: windows of 10 word pieces, 4 shared; each window's mean, weighted by window length.
    ids = AutoTokenizer.from_pretrained(tiny_bert)(long_text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 30
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    means, lengths = [], []
    for start in (0, 6, 12, 18, 24):
        window = tokenizer.decode(ids[start : start + 10])
        states = hidden_states(tiny_bert, window)[-1]
        assert len(states) == len(ids[start : start + 10]) + 2
        means.append(states.mean(0))
        lengths.append(len(states))
    expected = np.average(np.stack(means), axis=0, weights=lengths)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy")[1], expected, atol=2e-5)


def test_per_word_vectors_at_the_first_sub_word(tiny_bert, tmp_path, run_cli):
    from transformers import AutoTokenizer

    records = [{"tokens": ["john", "visited", "movies"]}, {"tokens": ["the", "acting", "was", "good"]}]
    source = tmp_path / "words.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, stderr = run_cli(
        "embed", tiny_bert, "--input", source, "--output", tmp_path / "w.npz", "--per-word", "--precision", "no"
    )  # fp32: compared with a forward pass by hand
    assert code == 0, stderr
    assert "embedded 2 rows, 7 words: dim 32, pooling layer:-1" in stderr
    archive = np.load(tmp_path / "w.npz")
    assert archive["row_starts"].tolist() == [0, 3, 7]
    assert archive["words"].tolist() == ["john", "visited", "movies", "the", "acting", "was", "good"]
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    encoded = tokenizer(records[0]["tokens"], is_split_into_words=True)
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"]) == [
        "[CLS]",
        "john",
        "visited",
        "movie",
        "##s",
        "[SEP]",
    ]
    first = [1, 2, 3]  # "movies" is read at "movie", not "##s"
    states = hidden_states(tiny_bert, " ".join(records[0]["tokens"]))[-1]
    np.testing.assert_allclose(archive["vectors"][:3], states[first], atol=2e-5)

    # Raw text is split into words as for NER; a long sentence is windowed over words.
    long_sentence = " ".join(["john met mary in paris"] * 6)
    write_lines(tmp_path / "raw.txt", ["the film was great", long_sentence])
    code, _, stderr = run_cli(
        "embed",
        tiny_bert,
        "--input",
        tmp_path / "raw.txt",
        "--output",
        tmp_path / "w.jsonl",
        "--per-word",
        "--max-length",
        16,
        "--pooling",
        "layer:1",
    )
    assert code == 0, stderr
    assert "1 sentence(s) longer than --max-length 16" in stderr
    rows = [json.loads(line) for line in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert [len(row["vectors"]) for row in rows] == [4, 30] and rows[0]["words"] == ["the", "film", "was", "great"]


def test_a_fine_tuned_directory_embeds_with_its_encoder(tiny_bert, tmp_path):
    from transformers import AutoTokenizer, BertForSequenceClassification

    from bertkit.api.embedding import embed

    classifier_dir = tmp_path / "classifier"
    BertForSequenceClassification.from_pretrained(tiny_bert, num_labels=2).save_pretrained(classifier_dir)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(classifier_dir)
    source = write_lines(tmp_path / "in.txt", TEXTS[:4])
    np.testing.assert_allclose(
        embed(str(classifier_dir), EmbeddingOptions(input=str(source))).vectors,
        embed(str(tiny_bert), EmbeddingOptions(input=str(source))).vectors,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--per-word"], ["do not fit one .npy array", "FILE.npz"]),
        (["--pooling", "avg"], ["unknown --pooling 'avg'"]),
        (["--pooling", "layer:5"], ["layers 0..2"]),
        (["--pooling", "last4-sum"], ["needs hidden states of 4 layers"]),
        (["--per-word", "--pooling", "cls", "--output", "{tmp}/x.npz"], ["makes one vector per row"]),
        (["--output", "{tmp}/x.csv"], ["unknown format .csv"]),
        (["--stride", "20", "--max-length", "16"], ["--stride 20"]),
        (["--output", "{tmp}/missing/x.npy"], ["does not exist"]),
    ],
)
def test_user_errors_write_nothing(args, fragments, tiny_bert, tmp_path, run_cli):
    source = write_lines(tmp_path / "in.txt", TEXTS[:2])
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    output = [] if "--output" in args else ["--output", tmp_path / "x.npy"]
    assert_user_error(run_cli("embed", tiny_bert, "--input", source, *output, *args), *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_bad_rows_fail_before_the_model_loads(tiny_bert, tmp_path, run_cli):
    (tmp_path / "in.csv").write_text("review_id,body\n1,good\n")
    assert_user_error(
        run_cli("embed", tiny_bert, "--input", tmp_path / "in.csv", "--output", tmp_path / "x.npy"),
        "missing text column",
        "--text-column",
    )
    write_lines(tmp_path / "blank.txt", ["good", " ", "bad"])
    assert_user_error(
        run_cli("embed", tiny_bert, "--input", tmp_path / "blank.txt", "--output", tmp_path / "x.npy"),
        "1 row(s) with empty text (rows 2)",
    )
    write_lines(tmp_path / "good.txt", ["good", "bad"])
    assert_user_error(
        run_cli("embed", "/no/such/model", "--input", tmp_path / "good.txt", "--output", tmp_path / "x.npy"),
        "no such directory",
    )
    assert not (tmp_path / "x.npy").exists()
