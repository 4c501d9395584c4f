"""BERT's pre-training (`bertkit pretrain bert`): the sentence pairs (50/50, a random B never from
A's own document, so never A's own next sentence; actual next ones continue A), the masking is
pretrain mlm's rule, the loss is BertForPreTraining's, the model types without an NSP head are
refused, and end to end on a tiny BERT: the saved directory loads in BertForPreTraining, its NSP
head gives the logged accuracy, and `finetune` reads the pooler NSP trained."""

from __future__ import annotations

import json
import random

import pytest
import torch
from test_cli_classification import write_sentiment_csv
from test_mlm import write_corpus

from bertkit.data.sentence_pairs import RANDOM_NEXT, build_pairs, truncate_pair


def numbered_documents(count: int, seed: int) -> list:
    """Documents of sentences whose tokens say where they come from: sentence s of document d is
    [d * 1000 + s * 10, ...] (2 to 9 tokens), so every pair can be traced back to its sentences."""
    rng = random.Random(seed)
    return [
        [[d * 1000 + s * 10 + t for t in range(rng.randint(2, 9))] for s in range(rng.randint(1, 12))]
        for d in range(count)
    ]


def positions(document: list, tokens: list) -> list:
    """Where each token stands in its document's text (its sentences one after another)."""
    where = {token: i for i, token in enumerate(t for sentence in document for t in sentence)}
    return [where[token] for token in tokens]


def contiguous(places: list) -> bool:
    return places == list(range(places[0], places[0] + len(places)))


def test_pairs_are_half_random_and_a_random_b_never_comes_from_a_s_document():
    documents = numbered_documents(800, seed=1)
    pairs = build_pairs(documents, budget=30, seed=7)
    assert len(pairs) > 1500
    random_share = sum(p.label == RANDOM_NEXT for p in pairs) / len(pairs)
    assert random_share == pytest.approx(0.5, abs=0.035)  # lone last sentences are paid back: still 50/50
    for pair in pairs:
        assert pair.a and pair.b and len(pair.a) + len(pair.b) <= 30
        assert {t // 1000 for t in pair.a} == {pair.document} and {t // 1000 for t in pair.b} == {pair.b_document}
        a, b = positions(documents[pair.document], pair.a), positions(documents[pair.b_document], pair.b)
        assert contiguous(a) and contiguous(b)  # each segment is running text of one document
        if pair.label == RANDOM_NEXT:
            assert pair.b_document != pair.document  # never A's own document, so never A's own next sentence
        else:
            assert pair.b_document == pair.document and b[0] == a[-1] + 1  # B is the text right after A
    assert {p.document for p in pairs} == set(range(len(documents)))  # every document is read as A


def test_pairs_are_deterministic_per_seed():
    documents = numbered_documents(40, seed=2)
    assert build_pairs(documents, 30, seed=3) == build_pairs(documents, 30, seed=3)
    assert build_pairs(documents, 30, seed=3) != build_pairs(documents, 30, seed=4)


def test_a_long_pair_is_cut_from_the_longer_segment_keeping_the_junction():
    assert truncate_pair(list(range(20)), list(range(100, 104)), 10) == (
        list(range(14, 20)),
        list(range(100, 104)),
        True,
    )
    assert truncate_pair(list(range(3)), list(range(100, 120)), 10) == (list(range(3)), list(range(100, 107)), True)
    assert truncate_pair(list(range(9)), list(range(100, 109)), 10) == (list(range(4, 9)), list(range(100, 105)), True)
    assert truncate_pair([1, 2], [3], 10) == ([1, 2], [3], False)


def test_one_document_cannot_make_random_pairs():
    with pytest.raises(ValueError, match="two documents"):
        build_pairs([[[1, 2], [3, 4]], [], [[]]], 10, seed=0)


def test_features_are_cls_a_sep_b_sep_with_segment_ids(tiny_bert):
    from transformers import AutoTokenizer

    from bertkit.tasks.bert_pretraining import BertPretrainingTask
    from bertkit.tasks.mlm import split_documents

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    documents = split_documents("john met mary .\nthe movie was good .\n\nthe plot was bad .\nit was awful .\n")
    features = BertPretrainingTask(16).preprocess(documents, tokenizer, train=False)
    assert features.stats["pairs"] == len(features) >= 2
    for feature in features:
        pieces = tokenizer.convert_ids_to_tokens(feature["input_ids"])
        first_sep = pieces.index("[SEP]")
        assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]" and pieces.count("[SEP]") == 2 and len(pieces) <= 16
        assert feature["token_type_ids"] == [0] * (first_sep + 1) + [1] * (len(pieces) - first_sep - 1)
        assert feature["next_sentence_label"] in (0, 1)


def test_masking_is_pretrain_mlm_s_rule_and_the_label_rides_along(tiny_bert):
    from transformers import AutoTokenizer

    from bertkit.networks import recipes
    from bertkit.tasks.training_spec import MASKED_LM, NEXT_SENTENCE, MaskRule, TrainingSpec

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    ids = tokenizer(["the movie was very good", "john met mary in paris"], ["it was bad", "the plot"])
    features = [
        {"input_ids": i, "token_type_ids": t, "next_sentence_label": label}
        for i, t, label in zip(ids["input_ids"], ids["token_type_ids"], (0, 1))
    ]
    rule = MaskRule(rate=0.4)
    ours = recipes.training_collator(TrainingSpec(NEXT_SENTENCE, mask_rule=rule), tokenizer, seed=5)
    mlm = recipes.training_collator(TrainingSpec(MASKED_LM, mask_rule=rule), tokenizer, seed=5)
    for _ in range(3):  # batch after batch, the same generator and the same masks
        batch, reference = ours(features), mlm(features)
        assert torch.equal(batch["input_ids"], reference["input_ids"]) and torch.equal(
            batch["labels"], reference["labels"]
        )
        assert batch["next_sentence_label"].tolist() == [0, 1]
        assert torch.equal(batch["token_type_ids"], reference["token_type_ids"])


def test_loss_equals_bert_for_pretraining_s_own(tiny_bert):
    from transformers import AutoTokenizer, BertForPreTraining

    from bertkit.networks.masking import MaskingCollator, VocabTables
    from bertkit.networks.next_sentence import PreTrainingTrainer
    from bertkit.tasks.training_spec import MaskRule

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    torch.manual_seed(0)
    model = BertForPreTraining.from_pretrained(tiny_bert).eval()  # heads fresh and random: a real loss
    ids = tokenizer(["the movie was very good and the plot was great", "john met mary"], ["bad acting", "in paris"])
    features = [
        {"input_ids": i, "token_type_ids": t, "next_sentence_label": label}
        for i, t, label in zip(ids["input_ids"], ids["token_type_ids"], (1, 0))
    ]
    tables = VocabTables.from_tokenizer(tokenizer)
    batch = MaskingCollator(tokenizer.pad_token_id, MaskRule(rate=0.3), tables, 0, {"next_sentence_label": "class"})(
        features
    )
    with torch.no_grad():
        ours = PreTrainingTrainer(model)(**batch).loss
        reference = model(**batch).loss  # transformers: MLM cross-entropy + NSP cross-entropy
    assert ours.item() == pytest.approx(reference.item(), rel=1e-5)


@pytest.mark.parametrize(
    "name,refused",
    [
        ("bert", False),
        ("roberta", True),
        ("distilbert", True),
        ("modernbert", True),
        ("albert", True),
        ("electra", True),
    ],
)
def test_only_model_types_with_an_nsp_head(name, refused, tmp_path):
    from tiny_models import build_family
    from transformers import AutoConfig

    from bertkit.errors import BertkitError
    from bertkit.networks.next_sentence import check_next_sentence_model

    config = AutoConfig.from_pretrained(build_family(name, tmp_path / name))
    if refused:
        with pytest.raises(BertkitError, match="no next-sentence-prediction head"):
            check_next_sentence_model(config, name)
    else:
        assert check_next_sentence_model(config, name) == "BertForPreTraining"


def test_pretrain_bert_then_finetune_from_the_output(tmp_path, tiny_bert, run_cli):
    from transformers import AutoTokenizer, BertForPreTraining, BertForSequenceClassification, BertModel

    from bertkit.networks.collate import Collator
    from bertkit.networks.masking import IGNORE, VocabTables, mask_by_content
    from bertkit.tasks import task_from_state
    from bertkit.tasks.mlm import split_documents

    write_corpus(tmp_path / "corpus.txt", 40, seed=1)
    write_corpus(tmp_path / "held.txt", 10, seed=2)
    out = tmp_path / "bert"
    args = ["--model", tiny_bert, "--output", out, "--epochs", 3, "--max-length", 24, "--batch-size", 8]
    code, stdout, stderr = run_cli(
        "pretrain", "bert", "--data", tmp_path / "corpus.txt", "--eval-data", tmp_path / "held.txt", *args,
        "--lr", "5e-3", "--precision", "no", "--seed", 3,
    )  # fmt: skip
    assert code == 0, stderr
    assert "train: 40 documents" in stdout and "eval: 10 documents" in stdout and "sentence pairs" in stdout
    assert "no masked-LM and NSP heads: they start random" in stderr  # a bare BertModel: said before training
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["task"]["task"] == "bert" and meta["task"]["options"]["pair_seed"] == 3
    assert meta["pretraining"]["pooler"] == "trained by next-sentence prediction"
    for metrics in [meta["before"]] + [h["metrics"] for h in meta["history"]]:
        assert metrics["loss"] == pytest.approx(metrics["mlm_loss"] + metrics["nsp_loss"], abs=1e-5)
        assert (
            metrics["pairs"] == meta["before"]["pairs"] and metrics["masked_tokens"] == meta["before"]["masked_tokens"]
        )
    assert meta["metrics"]["mlm_loss"] < meta["before"]["mlm_loss"] - 0.5

    # The directory is a plain BertForPreTraining (nothing missing) whose NSP head gives the logged
    # accuracy on the held-out pairs, rebuilt by the task and masked by the shared held-out rule.
    model, info = BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    tokenizer = AutoTokenizer.from_pretrained(out)
    task = task_from_state(meta["task"])
    features = task.preprocess(split_documents((tmp_path / "held.txt").read_text()), tokenizer, train=False)
    batch = Collator(tokenizer.pad_token_id)(list(features))
    masked, labels = mask_by_content(
        batch["input_ids"], batch["attention_mask"], task.rule, VocabTables.from_tokenizer(tokenizer)
    )
    with torch.no_grad():
        outputs = model.eval()(
            input_ids=masked, attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
        )
    nsp_labels = torch.tensor([f["next_sentence_label"] for f in features])
    accuracy = (outputs.seq_relationship_logits.argmax(-1) == nsp_labels).float().mean().item()
    assert accuracy == pytest.approx(meta["metrics"]["nsp_accuracy"], abs=1e-6)
    assert int((labels != IGNORE).sum()) == meta["metrics"]["masked_tokens"]

    # `bertkit eval` scores other text the same way; predict has nothing to predict.
    code, stdout, stderr = run_cli("eval", out, "--data", tmp_path / "held.txt", "--precision", "no")
    assert code == 0, stderr
    assert f"nsp_accuracy {meta['metrics']['nsp_accuracy']:.4f}" in stdout
    code, _, stderr = run_cli("predict", out, "--input", tmp_path / "held.txt")
    assert code == 2 and "does not apply to a BERT pre-training checkpoint" in stderr

    # The pooler NSP trained is what a classifier fine-tuned from the output starts from.
    pooler = BertForSequenceClassification.from_pretrained(out).bert.pooler.dense.weight
    assert torch.equal(pooler, model.bert.pooler.dense.weight)
    assert not torch.equal(pooler, BertModel.from_pretrained(tiny_bert).pooler.dense.weight)
    write_sentiment_csv(tmp_path / "train.csv", 48, seed=1)
    write_sentiment_csv(tmp_path / "dev.csv", 16, seed=2)
    code, _, stderr = run_cli(
        "finetune", "cls", "--data", tmp_path / "train.csv", "--eval-data", tmp_path / "dev.csv",
        "--model", out, "--output", tmp_path / "cls", "--epochs", 1,
    )  # fmt: skip
    assert code == 0, stderr
    assert (tmp_path / "cls" / "bertkit.json").is_file()


def test_pretrain_bert_offers_pretrain_mlm_s_options():
    from test_pretrain_options import option_names

    assert option_names("pretrain", "bert") == option_names("pretrain", "mlm")  # --mask-rate ... shared


def test_a_killed_pretrain_bert_run_resumes_to_the_same_bytes(tiny_bert, tmp_path):
    """The masking generator and the pairs (drawn with --seed) come back: a run killed after a
    checkpoint and resumed ends with the very bytes of an uninterrupted one (fp32)."""
    import signal

    from test_long_runs import assert_same_tensors, finish, run_here, start

    write_corpus(tmp_path / "corpus.txt", 32, seed=1)

    def command(output: str, *extra) -> list:
        return [
            "pretrain", "bert", "--data", str(tmp_path / "corpus.txt"), "--model", str(tiny_bert),
            "--output", str(tmp_path / output), "--max-steps", "8", "--max-length", "24", "--batch-size", "8",
            "--lr", "5e-3", "--eval-every", "4", "--save-every", "2", "--eval-share", "0.25", "--precision", "no",
            "--seed", "11", *extra,
        ]  # fmt: skip

    killed = start(command("killed"), kill_at="KILL@save-6")
    code, _, err = run_here(command("full"))
    assert code == 0, err
    code, _, _ = finish(killed, expect_ok=False)
    assert code == -signal.SIGKILL and not (tmp_path / "killed").exists()
    code, _, err = run_here(command("killed", "--resume"))
    assert code == 0, err
    assert_same_tensors(tmp_path / "full" / "model.safetensors", tmp_path / "killed" / "model.safetensors")
    a, b = (json.loads((tmp_path / d / "bertkit.json").read_text()) for d in ("full", "killed"))
    assert b["resumed_from"].endswith("step-4") and a["history"] == b["history"] and a["metrics"] == b["metrics"]
