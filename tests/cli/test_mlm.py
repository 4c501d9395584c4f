"""Masked-LM pre-training: the 15 % / 80-10-10 rule measured on a fixed seed, whole-word masking,
packing, the masked-positions-only loss, and `bertkit pretrain mlm` end to end on a tiny BERT."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from conftest import assert_user_error
from test_cli_classification import write_sentiment_csv

from bertkit.networks.masking import IGNORE, MaskingCollator, MaskRule, VocabTables, mask_tokens

VOCAB, SPECIAL, MASK_ID, CLS, SEP, PAD = 30000, 5, 4, 2, 3, 0
CONTINUATION_FROM = 20000  # in the synthetic vocabulary, ids >= 20000 are '##' pieces


def synthetic_tables() -> VocabTables:
    special = torch.zeros(VOCAB, dtype=torch.bool)
    special[:SPECIAL] = True
    continuation = torch.arange(VOCAB) >= CONTINUATION_FROM
    return VocabTables(special, continuation, torch.arange(SPECIAL, VOCAB), MASK_ID)


def synthetic_batch(rows=400, longest=128, seed=0):
    """[CLS] text [SEP] then padding, rows of random length; ids are drawn above the special ids."""
    rng = np.random.default_rng(seed)
    ids = np.full((rows, longest), PAD)
    mask = np.zeros((rows, longest), dtype=np.int64)
    for row in range(rows):
        length = int(rng.integers(16, longest + 1))
        ids[row, :length] = rng.integers(SPECIAL, VOCAB, size=length)
        ids[row, 0], ids[row, length - 1] = CLS, SEP
        mask[row, :length] = 1
    return torch.tensor(ids), torch.tensor(mask)


def test_masking_rule_on_a_fixed_seed():
    ids, attention = synthetic_batch()
    masked, labels = mask_tokens(ids, attention, MaskRule(), synthetic_tables(), torch.Generator().manual_seed(0))
    chosen = labels != IGNORE
    maskable = attention.bool() & (ids >= SPECIAL)
    assert not (chosen & ~maskable).any()  # [CLS], [SEP] and padding are never chosen
    assert torch.equal(masked[~chosen], ids[~chosen]) and torch.equal(labels[chosen], ids[chosen])
    share = chosen.sum().item() / maskable.sum().item()
    assert share == pytest.approx(0.15, abs=0.006)  # ~26k maskable tokens: one standard error is 0.002
    to_mask = (masked == MASK_ID) & chosen
    to_random = (masked != MASK_ID) & (masked != ids) & chosen
    unchanged = (masked == ids) & chosen
    n = chosen.sum().item()
    assert to_mask.sum().item() / n == pytest.approx(0.8, abs=0.02)
    assert to_random.sum().item() / n == pytest.approx(0.1, abs=0.015)
    assert unchanged.sum().item() / n == pytest.approx(0.1, abs=0.015)
    assert (masked[to_random] >= SPECIAL).all()  # random replacements are never special tokens


def test_rates_are_configurable():
    ids, attention = synthetic_batch(rows=200)
    rule = MaskRule(rate=0.4, mask_share=0.5, random_share=0.0)
    masked, labels = mask_tokens(ids, attention, rule, synthetic_tables(), torch.Generator().manual_seed(1))
    chosen = labels != IGNORE
    assert chosen.sum().item() / (attention.bool() & (ids >= SPECIAL)).sum().item() == pytest.approx(0.4, abs=0.01)
    assert ((masked == MASK_ID) & chosen).sum().item() / chosen.sum().item() == pytest.approx(0.5, abs=0.02)
    assert ((masked != MASK_ID) & (masked != ids)).sum().item() == 0  # no random replacements at share 0


def test_whole_word_masking_chooses_words_as_a_whole():
    ids, attention = synthetic_batch(rows=300, seed=2)
    # Make about half the text tokens '##' pieces, so most words have several pieces.
    rng = np.random.default_rng(3)
    pieces = torch.tensor(rng.integers(CONTINUATION_FROM, VOCAB, size=ids.shape))
    flip = torch.tensor(rng.random(ids.shape) < 0.5) & (ids >= SPECIAL)
    ids = torch.where(flip, pieces, ids)
    rule = MaskRule(whole_word=True)
    _, labels = mask_tokens(ids, attention, rule, synthetic_tables(), torch.Generator().manual_seed(0))
    chosen = (labels != IGNORE).numpy()
    words, chosen_words = 0, 0
    for row, length in enumerate(attention.sum(1).tolist()):
        start = 1
        for position in range(2, length):  # position 1 always starts a word: it follows [CLS]
            if ids[row, position] < CONTINUATION_FROM or ids[row, position] < SPECIAL or position == length - 1:
                word = chosen[row, start:position]
                assert word.all() or not word.any(), (row, start, position)
                words += 1
                chosen_words += bool(word.all())
                start = position
    assert chosen_words / words == pytest.approx(0.15, abs=0.01)


def test_a_block_may_start_in_the_middle_of_a_word():
    ids = torch.tensor([[CLS, 25000, 25001, 100, 25002, SEP]])  # ##x ##y a ##b
    tables, rule = synthetic_tables(), MaskRule(rate=0.5, whole_word=True)
    for seed in range(20):
        _, labels = mask_tokens(ids, torch.ones_like(ids), rule, tables, torch.Generator().manual_seed(seed))
        chosen = (labels != IGNORE)[0].tolist()
        assert chosen[1] == chosen[2] and chosen[3] == chosen[4] and not chosen[0] and not chosen[5]


def test_collator_masks_differently_every_batch_and_reproduces():
    features = [{"input_ids": [CLS] + list(range(100, 160)) + [SEP], "token_type_ids": [0] * 62}] * 8
    first, second = (MaskingCollator(PAD, MaskRule(), synthetic_tables(), seed=7) for _ in range(2))
    batches_a = [first(features)["labels"] for _ in range(3)]
    batches_b = [second(features)["labels"] for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(batches_a, batches_b))  # same seed, same masks
    assert not torch.equal(batches_a[0], batches_a[1])  # the next batch (or epoch) differs
    assert not torch.equal(batches_a[0][0], batches_a[0][1])  # and so do identical rows in one batch


def test_tables_from_a_wordpiece_tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    tables = VocabTables.from_tokenizer(tokenizer, whole_word=True)
    assert torch.nonzero(tables.special).flatten().tolist() == [0, 1, 2, 3, 4]  # PAD UNK CLS SEP MASK
    assert tokenizer.convert_ids_to_tokens(torch.nonzero(tables.continuation).flatten().tolist()) == [
        "##s",
        "##ing",
        "##ed",
    ]
    assert tables.mask_id == tokenizer.mask_token_id and tables.random_ids.min().item() == 5


def test_packing_follows_lines_and_never_crosses_documents(tiny_bert):
    from transformers import AutoTokenizer

    from bertkit.tasks.mlm import MaskedLMTask, split_documents

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    documents = split_documents("the movie was good\n  the plot was bad  \n\n\n\njohn met mary\n")
    assert documents == [{"lines": ["the movie was good", "the plot was bad"]}, {"lines": ["john met mary"]}]
    blocks = MaskedLMTask(8).preprocess(documents, tokenizer, train=True)  # 6 text tokens per block
    pieces = [tokenizer.convert_ids_to_tokens(b["input_ids"]) for b in blocks]
    assert pieces == [
        ["[CLS]", "the", "movie", "was", "good", "the", "plot", "[SEP]"],
        ["[CLS]", "was", "bad", "[SEP]"],
        ["[CLS]", "john", "met", "mary", "[SEP]"],
    ]
    assert [b["example_index"] for b in blocks] == [0, 0, 1]
    assert all(b["token_type_ids"] == [0] * len(b["input_ids"]) for b in blocks)


def test_hold_out_whole_documents():
    from bertkit.errors import BertkitError
    from bertkit.tasks.mlm import hold_out_documents

    documents = [{"lines": [str(i)]} for i in range(20)]
    train, held = hold_out_documents(documents, 0.1, seed=3, where="corpus.txt")
    assert len(held) == 2 and len(train) == 18 and not {d["lines"][0] for d in held} & {d["lines"][0] for d in train}
    assert hold_out_documents(documents, 0.1, seed=3, where="c")[1] == held  # seeded
    assert len(hold_out_documents(documents[:2], 0.9, seed=0, where="c")[0]) == 1  # never all of them
    with pytest.raises(BertkitError, match="one document"):
        hold_out_documents(documents[:1], 0.1, seed=0, where="corpus.txt")


def test_masked_positions_only_loss_equals_the_full_model_loss(tiny_bert):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from bertkit.networks.masking import MaskedLMScorer, MaskedLMTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModelForMaskedLM.from_pretrained(tiny_bert).eval()
    tables = VocabTables.from_tokenizer(tokenizer)
    texts = ["the movie was very good and the plot was great", "john met mary in paris", "bad acting"]
    features = [{"input_ids": ids} for ids in tokenizer(texts)["input_ids"]]
    batch = MaskingCollator(tokenizer.pad_token_id, MaskRule(rate=0.3), tables, seed=0)(features)
    with torch.no_grad():
        ours = MaskedLMTrainer(model)(**batch).loss
        reference = model(**batch).loss  # transformers: logits at every position, ignore_index -100
    assert ours.item() == pytest.approx(reference.item(), rel=1e-5)

    # Held-out scoring masks each row by its own ids: the same numbers alone or in any batch.
    scorer = MaskedLMScorer(model, MaskRule(rate=0.3), tables)
    padded = MaskingCollator(tokenizer.pad_token_id, MaskRule(), tables, seed=0).pad(features)
    with torch.no_grad():
        together = scorer(padded["input_ids"], padded["attention_mask"])["mlm_stats"]
        alone = [
            scorer(torch.tensor([f["input_ids"]]), torch.ones(1, len(f["input_ids"]), dtype=torch.long))["mlm_stats"][0]
            for f in features
        ]
    assert torch.allclose(together, torch.stack(alone), atol=1e-5)
    assert together[:2, 1].min() >= 1 and (together[:, 2] <= together[:, 1]).all()
    assert together[2].tolist() == [0.0, 0.0, 0.0]  # "bad acting": two tokens, neither chosen on this seed


def write_corpus(path, documents: int, seed: int) -> None:
    rng = random.Random(seed)
    words = "the movie film plot story acting was very good great bad awful john mary paris london".split()
    text = "\n\n".join(
        "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 12))) for _ in range(rng.randint(2, 5)))
        for _ in range(documents)
    )
    path.write_text(text + "\n")


def test_pretrain_then_finetune_from_the_output(tmp_path, tiny_bert, run_cli):
    from transformers import AutoModelForMaskedLM, BertModel

    write_corpus(tmp_path / "corpus.txt", 32, seed=1)
    out = tmp_path / "mlm"
    code, stdout, stderr = run_cli(
        "pretrain",
        "mlm",
        "--data",
        tmp_path / "corpus.txt",
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        6,
        "--max-length",
        16,
        "--batch-size",
        8,
        "--lr",
        "5e-3",
        "--eval-share",
        "0.25",
        "--whole-word-masking",
    )
    assert code == 0, stderr
    assert "train: 24 documents" in stdout and "eval: 8 documents" in stdout and "before: held-out loss" in stdout
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["task"] == "mlm" and meta["task"]["options"]["whole_word_masking"] is True
    assert [h["epoch"] for h in meta["history"]] == [1, 2, 3, 4, 5, 6]
    for metrics in [meta["before"]] + [h["metrics"] for h in meta["history"]]:
        assert metrics["perplexity"] == pytest.approx(np.exp(metrics["loss"]), rel=1e-4)
        assert metrics["masked_tokens"] == meta["before"]["masked_tokens"]  # the same held-out masks every time
    # Uniformly random words from 16: the best possible loss is ln 16 = 2.77, a fresh head starts near
    # ln(94 words) = 4.5; a few epochs must cover most of that gap.
    assert meta["before"]["loss"] > 4.0 and meta["metrics"]["loss"] < meta["before"]["loss"] - 1.0
    assert "not used" in meta["pretraining"]["next_sentence_prediction"]

    # A masked-LM checkpoint that carries the base model's pooler, for classifiers fine-tuned from it.
    AutoModelForMaskedLM.from_pretrained(out)
    pooler, base = BertModel.from_pretrained(out).pooler, BertModel.from_pretrained(tiny_bert).pooler
    assert torch.equal(pooler.dense.weight, base.dense.weight)

    write_sentiment_csv(tmp_path / "train.csv", 48, seed=1)
    write_sentiment_csv(tmp_path / "dev.csv", 16, seed=2)
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        tmp_path / "train.csv",
        "--eval-data",
        tmp_path / "dev.csv",
        "--model",
        out,
        "--output",
        tmp_path / "cls",
        "--epochs",
        1,
    )
    assert code == 0, stderr

    # eval scores held-out text; predict has nothing to predict.
    write_corpus(tmp_path / "held.txt", 3, seed=9)
    code, stdout, stderr = run_cli("eval", out, "--data", tmp_path / "held.txt")
    assert code == 0, stderr
    assert "perplexity" in stdout
    assert_user_error(run_cli("predict", out, "--input", tmp_path / "held.txt"), "does not apply to a masked-LM")
    # serve refuses it at start-up, not with a 422 to every request
    assert_user_error(run_cli("serve", out, "--port", 8799), "does not apply to a masked-LM")


def test_pretrain_user_errors_write_nothing(tmp_path, tiny_bert, run_cli):
    (tmp_path / "one.txt").write_text("the movie was good\nthe plot was bad\n")
    base = ["pretrain", "mlm", "--model", tiny_bert, "--output", tmp_path / "out"]
    assert_user_error(run_cli(*base, "--data", tmp_path / "one.txt"), "one document", "--eval-data")
    assert_user_error(
        run_cli(*base, "--data", tmp_path / "one.txt", "--eval-share", "0", "--mask-rate", "1.5"), "--mask-rate 1.5"
    )
    assert_user_error(
        run_cli(*base, "--data", tmp_path / "one.txt", "--eval-share", "0", "--mask-token-share", "0.95"),
        "add up to at most 1",
    )
    (tmp_path / "empty.jsonl").write_text('{"text": ""}\n')
    assert_user_error(run_cli(*base, "--data", tmp_path / "empty.jsonl", "--eval-share", "0"), "empty")
    assert_user_error(run_cli(*base, "--data", "sst2", "--eval-share", "0"), "for the 'cls' task")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl", "one.txt"]
