"""Round 4's flags where they meet: `bertkit tune` with the options the merged branches added
(--lora, --long-text, --recipe, --context), refused before the study or its folder exists (tune
used to create OUT.tune/study.db first), and the new flags' bad values and combinations that no
other corpus covers. Same contract as the other hostile corpora (tests/hostile.py's run_case): ONE
line `error: ... (hint: ...)`, exit 2, no traceback, nothing written or removed."""

from __future__ import annotations

import pytest
from hostile import CLS_CSV, NER_CONLL, PAIR_TSV, Case, Context, run_case

DOCUMENTS = "".join(f"the film was good .\nthe plot was bad .\nit was a great {w} .\n\n" for w in "abcdef")

pytest.importorskip("optuna")


def tune(c: Context, task: str, data: tuple, *extra) -> list:
    """A one-trial tune command line writing to <tmp>/out (and <tmp>/out.tune)."""
    path = c.file(*data)
    return [
        "tune",
        task,
        "--data",
        path,
        "--eval-data",
        path,
        "--model",
        c.tiny,
        "--output",
        c.tmp / "out",
        "--epochs",
        1,
        "--trials",
        1,
        *extra,
    ]


def tune_cls(c: Context, *extra) -> list:
    return tune(c, "cls", ("t.csv", CLS_CSV), *extra)


def distill(c: Context, *extra) -> list:
    """A distill command line from the shared tiny cls model, writing to <tmp>/out."""
    return ["distill", c.trained("cls"), "--data", c.file("t.csv", CLS_CSV), "--output", c.tmp / "out", *extra]


def pretrain_bert(c: Context, *extra) -> list:
    return [
        "pretrain",
        "bert",
        "--data",
        c.file("d.txt", DOCUMENTS),
        "--model",
        c.tiny,
        "--output",
        c.tmp / "out",
        *extra,
    ]


def select(c: Context, *extra) -> list:
    pool = c.file("pool.txt", "the film was good\nthe plot was bad\n")
    return ["select", c.trained("cls"), "--input", pool, "--n", 1, "--output", c.tmp / "out", *extra]


CASES = [
    # --- tune: the hyperparameters (TrainConfig.validate), before OUT.tune/study.db -------------------
    Case("tune-lr-negative", lambda c: tune_cls(c, "--lr", -1), ("--lr must be > 0", "bertkit tune cls --help")),
    Case("tune-epochs-zero", lambda c: tune_cls(c, "--epochs", 0), ("--epochs must be > 0",)),
    Case("tune-warmup-one", lambda c: tune_cls(c, "--warmup-ratio", 1), ("--warmup-ratio must be in [0, 1)",)),
    Case("tune-threads-too-many", lambda c: tune_cls(c, "--threads", 9999), ("--threads must be between 1",)),
    Case("tune-report-to-unknown", lambda c: tune_cls(c, "--report-to", "nowhere"), ("nowhere",)),
    # --- tune --lora ---------------------------------------------------------------------------------
    Case("tune-lora-zero", lambda c: tune_cls(c, "--lora", 0), ("--lora is the adapters' rank", "got 0")),
    Case(
        "tune-lora-dropout-one",
        lambda c: tune_cls(c, "--lora", 4, "--lora-dropout", 1),
        ("--lora-dropout must be in [0, 1)",),
    ),
    Case(
        "tune-save-adapter-without-lora",
        lambda c: tune_cls(c, "--save-adapter"),
        ("--save-adapter applies only with --lora", "add --lora R"),
    ),
    # --- tune --long-text (cls, pair) -----------------------------------------------------------------
    Case(
        "tune-long-text-bogus",
        lambda c: tune_cls(c, "--long-text", "bogus"),
        ("unknown --long-text 'bogus'", "truncate, head-tail, windows"),
    ),
    Case(
        "tune-stride-without-windows",
        lambda c: tune_cls(c, "--stride", 16),
        ("--stride applies to --long-text windows only", "add --long-text windows"),
    ),
    Case(
        "tune-stride-not-below-window",
        lambda c: tune_cls(c, "--long-text", "windows", "--stride", 64, "--max-length", 64),
        ("--stride 64 must be at least 0 and below --max-length 64",),
    ),
    Case(
        "tune-window-pooling-bogus",
        lambda c: tune_cls(c, "--long-text", "windows", "--window-pooling", "median"),
        ("unknown --window-pooling 'median'", "mean"),
    ),
    Case(
        "tune-head-tokens-with-windows",
        lambda c: tune_cls(c, "--long-text", "windows", "--head-tokens", 8),
        ("--head-tokens applies to --long-text head-tail only",),
    ),
    Case(
        "tune-pair-long-text-bogus",
        lambda c: tune(c, "pair", ("p.tsv", PAIR_TSV), "--long-text", "sliding"),
        ("unknown --long-text 'sliding'",),
    ),
    # --- tune --recipe (setfit is searched like finetune: only bad values are refused) -------------------
    Case("tune-recipe-bogus", lambda c: tune_cls(c, "--recipe", "fewshot"), ("unknown --recipe 'fewshot'",)),
    Case(
        "tune-pairs-without-setfit",
        lambda c: tune_cls(c, "--pairs-per-example", 4),
        ("--pairs-per-example applies only with --recipe setfit",),
    ),
    Case(
        "tune-setfit-pairs-zero",
        lambda c: tune_cls(c, "--recipe", "setfit", "--pairs-per-example", 0),
        ("--pairs-per-example must be at least 1",),
    ),
    # --- tune: the loss options that --problem-type rules out -----------------------------------------
    Case(
        "tune-focal-on-regression",
        lambda c: tune_cls(c, "--problem-type", "regression", "--loss", "focal"),
        ("--loss focal apply to classes", "regression"),
    ),
    Case("tune-loss-bogus", lambda c: tune_cls(c, "--loss", "hinge"), ("unknown --loss 'hinge'",)),
    # --- tune ner --context (document context) --------------------------------------------------------
    Case(
        "tune-ner-context-bogus",
        lambda c: tune(c, "ner", ("t.txt", NER_CONLL), "--context", "paragraph"),
        ("unknown --context 'paragraph'",),
    ),
    Case(
        "tune-ner-context-tokens-fill-the-window",
        lambda c: tune(c, "ner", ("t.txt", NER_CONLL), "--context", "document", "--context-tokens", 200),
        ("--context-tokens 200 leaves no room for the sentence",),
    ),
    # --- tune: data its first trial refuses leaves no study behind ------------------------------------
    Case(
        "tune-data-missing-label-column",
        lambda c: tune(c, "cls", ("t.csv", "text,lab\nthe film was good,pos\nthe film was bad,neg\n")),
        ("missing label column", "--label-column"),
    ),
    Case(
        "tune-ner-data-not-conll",
        lambda c: tune(c, "ner", ("t.txt", "john B-PER extra\nlives\n\n")),
        ("t.txt:2: 1 columns, but the first data line has 3",),
    ),
    # --- distill: the training flags it shares with finetune, refused naming distill's own --help -------
    *(
        Case(
            f"distill-{flag[2:]}-{value}",
            lambda c, a=(flag, value): distill(c, *a),
            (fragment, "bertkit distill --help"),
        )
        for flag, value, fragment in (
            ("--eval-batch-size", 0, "--eval-batch-size must be >= 1"),
            ("--weight-decay", -1, "--weight-decay must be >= 0"),
            ("--max-grad-norm", -1, "--max-grad-norm must be >= 0"),
            ("--log-every", 0, "--log-every must be >= 1"),
            ("--max-train-samples", 0, "--max-train-samples must be >= 1"),
        )
    ),
    Case(
        "distill-save-memory-fp16-on-cpu",
        lambda c: distill(c, "--save-memory", "--precision", "fp16"),
        ("--precision fp16 needs a GPU",),
    ),
    Case(
        "distill-lazy-embeddings-frozen",
        lambda c: distill(c, "--freeze-embeddings", "--lazy-embeddings"),
        ("--lazy-embeddings updates",),
    ),
    # --- pretrain bert: the 80/10/10 shares, and the training flags ------------------------------------
    Case(
        "pretrain-bert-mask-share-above-one",
        lambda c: pretrain_bert(c, "--mask-token-share", 1.5),
        ("--mask-token-share and --random-token-share must be >= 0 and add up to at most 1",),
    ),
    Case(
        "pretrain-bert-random-share-negative",
        lambda c: pretrain_bert(c, "--random-token-share", -0.1),
        ("--random-token-share must be >= 0",),
    ),
    Case(
        "pretrain-bert-shares-add-above-one",
        lambda c: pretrain_bert(c, "--mask-token-share", 0.9, "--random-token-share", 0.2),
        ("add up to at most 1", "0.8 and 0.1"),
    ),
    *(
        Case(
            f"pretrain-bert-{flag[2:]}-{value}",
            lambda c, a=(flag, value): pretrain_bert(c, *a),
            (fragment, "bertkit pretrain bert --help"),
        )
        for flag, value, fragment in (
            ("--eval-batch-size", 0, "--eval-batch-size must be >= 1"),
            ("--weight-decay", -1, "--weight-decay must be >= 0"),
            ("--max-grad-norm", -1, "--max-grad-norm must be >= 0"),
            ("--log-every", 0, "--log-every must be >= 1"),
            ("--max-train-samples", 0, "--max-train-samples must be >= 1"),
        )
    ),
    Case(
        "pretrain-bert-lazy-embeddings-frozen",
        lambda c: pretrain_bert(c, "--freeze-embeddings", "--lazy-embeddings", "--save-memory"),
        ("--lazy-embeddings updates",),
    ),
    # --- select --chunk-rows ----------------------------------------------------------------------------
    Case("select-chunk-rows-zero", lambda c: select(c, "--chunk-rows", 0), ("--chunk-rows must be >= 1",)),
]


def test_the_corpus_covers_every_flag():
    assert len({case.id for case in CASES}) == len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_round4_input_fails_in_one_line_and_changes_nothing(
    case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys
):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)
    assert not (work / "out.tune").exists() and not (work / "out").exists()
