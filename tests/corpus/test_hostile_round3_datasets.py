"""#32 part A, any `datasets` source for --data: a dataset id that is neither on the Hub (offline:
not in the datasets cache) nor a local directory, a config or split that does not exist (the error
lists the ones that do), a feature type bertkit cannot use, the dataset flags given where they
cannot apply: each ends in ONE line (tests/hostile.py's contract: exit 2, nothing written).
Every dataset is built here, in the case's folder; nothing is downloaded."""

from __future__ import annotations

import pytest
from hostile import CLS_CSV, Case, Context, run_case

MISSING_FILES_CARD = "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: data/gone-*\n---\n"


def sentences(rows: int = 8):
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"sentence": Value("string"), "label": ClassLabel(names=["neg", "pos"])})
    return Dataset.from_dict(
        {"sentence": [f"film {i}" for i in range(rows)], "label": [i % 2 for i in range(rows)]}, features
    )


def repo(c: Context, configs: dict, default: bool = True, name: str = "repo"):
    """A Hub-layout directory: data/<config>/<split>.parquet and a README naming the configs."""
    root = c.tmp / name
    lines = ["---", "configs:"]
    for number, (config, splits) in enumerate(configs.items()):
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, dataset in splits.items():
            (root / "data" / config).mkdir(parents=True, exist_ok=True)
            dataset.to_parquet(str(root / "data" / config / f"{split}.parquet"))
            lines += [f"  - split: {split}", f"    path: data/{config}/{split}.parquet"]
        if number == 0 and default:
            lines.append("  default: true")
    (root / "README.md").write_text("\n".join([*lines, "---", ""]))
    return root


def unlabelled():
    """GLUE's test splits: every ClassLabel is -1."""
    from datasets import Dataset

    data = sentences(4)
    return Dataset.from_dict({"sentence": data["sentence"], "label": [-1] * 4}, data.features)


def two_configs(c: Context, default: bool = True):
    both = {"train": sentences(), "validation": sentences(4)}
    return repo(c, {"main": both, "other": both}, default)


def saved(c: Context, dataset=None):
    from datasets import DatasetDict

    root = c.tmp / "saved"
    DatasetDict({"train": dataset or sentences(), "validation": sentences(4)}).save_to_disk(str(root))
    return root


def unreadable(c: Context):
    """The text is an array (an image's pixels, say): no column bertkit can read as text."""
    from datasets import Array2D, ClassLabel, Dataset, Features

    features = Features({"pixels": Array2D(shape=(2, 2), dtype="int32"), "label": ClassLabel(names=["cat", "dog"])})
    data = Dataset.from_dict(
        {"pixels": [[[i, 0], [0, i]] for i in range(6)], "label": [i % 2 for i in range(6)]}, features
    )
    return repo(c, {"main": {"train": data}})


def tagged(c: Context):
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    features = Features({"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=["O", "B-PER"]))})
    data = Dataset.from_dict({"tokens": [["john", "runs"]] * 6, "ner_tags": [[1, 0]] * 6}, features)
    return repo(c, {"main": {"train": data}})


def train(c: Context, data, *extra, task: str = "cls") -> list:
    return c.finetune(task, data, *extra)


def offline(c: Context, name: str) -> list:
    c.offline()
    return train(c, name)


CASES = [
    Case(
        "hub-id-offline-not-cached",
        lambda c: offline(c, "someone/no-such-dataset"),
        ("not a Hugging Face dataset", "unreachable", "not in the datasets cache"),
    ),
    Case("hub-name-offline-not-cached", lambda c: offline(c, "imdb"), ("--data imdb", "not a known dataset", "sst2")),
    Case(
        "config-missing",
        lambda c: train(c, two_configs(c), "--data-config", "nope"),
        ("no config 'nope'", "configs: main, other", "--data-config"),
    ),
    Case(
        "configs-without-a-default",
        lambda c: train(c, two_configs(c, default=False)),
        ("2 configs and none is its default", "main, other", "--data-config"),
    ),
    Case(
        "train-split-missing",
        lambda c: train(c, two_configs(c), "--train-split", "fit"),
        ("no split 'fit'", "--train-split", "train, validation"),
    ),
    Case(
        "eval-split-missing",
        lambda c: train(c, two_configs(c), "--eval-split", "held"),
        ("no split 'held'", "--eval-split", "train, validation"),
    ),
    Case(
        "no-train-split",
        lambda c: train(c, repo(c, {"main": {"fit": sentences()}})),
        ("has no train split (splits: fit)", "--train-split"),
    ),
    Case(
        "saved-split-missing",
        lambda c: train(c, saved(c), "--eval-split", "test"),
        ("no split 'test'", "train, validation"),
    ),
    Case(
        "test-split-missing",  # eval --split test reads the split --test-split names
        lambda c: ["eval", c.trained("cls"), "--data", two_configs(c), "--split", "test", "--test-split", "exam"],
        ("no split 'exam'", "--test-split"),
    ),
    Case(
        "test-split-with-a-file",  # a file has no splits to name: the flag would be ignored
        lambda c: ["eval", c.trained("cls"), "--data", c.file("e.csv", CLS_CSV), "--test-split", "test"],
        ("--test-split",),
    ),
    Case(
        "saved-with-a-config",
        lambda c: train(c, saved(c), "--data-config", "main"),
        ("save_to_disk, which keeps no configs", "drop --data-config"),
    ),
    Case(
        "saved-damaged",
        lambda c: train(c, saved(c).joinpath("dataset_dict.json").write_text("{not json") and c.tmp / "saved"),
        ("cannot read the saved dataset",),
    ),
    Case(
        "feature-type-unreadable",
        lambda c: train(c, unreadable(c)),
        ("missing text column", "pixels: Array2D (bertkit cannot read this type)", "ClassLabel(cat, dog)"),
    ),
    Case(
        "tagging-data-for-cls",
        lambda c: train(c, tagged(c)),
        ("missing text column", "tokens: list of string", "ner_tags: list of ClassLabel(O, B-PER)"),
    ),
    Case(
        "cls-data-for-ner",
        lambda c: train(c, two_configs(c), task="ner"),
        ("no 'tokens' field", "sentence: string"),
    ),
    Case(
        "named-column-missing",
        lambda c: train(c, two_configs(c), "--text-column", "review"),
        ("no column 'review' for --text-column", "sentence: string, label: ClassLabel(neg, pos)"),
    ),
    Case(
        "card-naming-missing-files",
        lambda c: train(c, c.file("card/README.md", MISSING_FILES_CARD).parent),
        ("--data", "card", "not a dataset datasets can load", "README"),
    ),
    Case(
        "damaged-parquet-in-data",
        lambda c: train(c, c.file("bad/data/train.parquet", b"not parquet" * 50).parent.parent),
        ("could not read dataset directory", "split train", "ArrowInvalid"),
    ),
    Case(
        "csv-in-data-without-a-text-column",
        lambda c: train(c, c.file("plain/data/train.csv", "a,b\n1,2\n3,4\n").parent.parent),
        ("split train: missing text column", "found columns: a, b", "--text-column"),
    ),
    Case(
        "model-directory-as-data",
        lambda c: train(c, c.trained("cls")),
        ("is a directory", "save_to_disk"),
    ),
    Case(
        "eval-split-without-labels",
        lambda c: train(c, repo(c, {"main": {"train": sentences(), "test": unlabelled()}}), "--eval-split", "test"),
        ("every row's 'label' is -1", "--eval-split"),
    ),
    Case(
        "data-config-on-a-file",
        lambda c: train(c, ("t.csv", CLS_CSV), "--data-config", "main"),
        ("--data-config applies only to a Hub dataset or a dataset directory",),
    ),
    Case(
        "split-flags-on-a-known-name",
        lambda c: train(c, "sst2", "--train-split", "train", "--eval-split", "dev"),
        ("--train-split, --eval-split applies only", "(a known dataset)"),
    ),
    Case(
        "eval-split-missing-on-eval",
        lambda c: ["eval", c.trained("cls"), "--data", two_configs(c), "--split", "held", "--output", c.tmp / "m.json"],
        ("no split 'held'", "--split", "train, validation"),
        ("--train-split", "--eval-split"),
    ),
    Case(
        "eval-data-config-on-a-file",
        lambda c: [
            "eval",
            c.trained("cls"),
            "--data",
            c.file("e.csv", CLS_CSV),
            "--data-config",
            "x",
            "--output",
            c.tmp / "m.json",
        ],
        ("--data-config applies only",),
    ),
    Case(
        "export-config-missing",
        lambda c: ["export", "onnx", c.trained("cls"), "--data", two_configs(c), "--data-config", "nope"],
        ("no config 'nope'", "main, other", "--data-config"),
    ),
    Case(
        "export-no-config-choice-without-default",
        lambda c: ["export", "onnx", c.trained("cls"), "--data", two_configs(c, default=False)],
        ("none is its default", "--data-config"),
    ),
    Case(
        "probe-config-missing",
        lambda c: [
            "probe",
            "cls",
            "--data",
            two_configs(c),
            "--data-config",
            "nope",
            "--model",
            c.tiny,
            "--output",
            c.tmp / "p",
        ],
        ("no config 'nope'", "main, other"),
    ),
]


@pytest.fixture(autouse=True)
def _no_hub(tmp_path, monkeypatch):
    """No Hub, a datasets cache outside the case's folder, and the offline switches bertkit throws
    (bertkit/hub.py) put back afterwards."""
    import datasets
    import huggingface_hub.constants

    from bertkit import hub

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", datasets.config.HF_HUB_OFFLINE)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", huggingface_hub.constants.HF_HUB_OFFLINE)
    for name in hub.OFFLINE_VARIABLES:
        monkeypatch.setenv(name, "1")
    hub.hub_reachable.cache_clear()
    yield
    hub.hub_reachable.cache_clear()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_dataset_is_refused_in_one_line(case, tmp_path, tiny_bert, trained, run_cli, monkeypatch, capsys):
    work = tmp_path / "case"
    work.mkdir()
    run_case(case, Context(work, tiny_bert, trained, monkeypatch), run_cli, capsys)


def test_split_flags_reach_a_dataset_named_by_eval_data(tmp_path, tiny_bert, run_cli, monkeypatch):
    """--eval-data may be the dataset (the training rows a file): the split flags apply to it."""
    context = Context(tmp_path, tiny_bert, None, monkeypatch)
    data = two_configs(context)
    code, out, err = run_cli(
        *train(context, ("t.csv", CLS_CSV), "--eval-data", data, "--data-config", "other", "--eval-split", "train")
    )
    assert code == 0, err
    import json

    meta = json.loads((tmp_path / "out" / "bertkit.json").read_text())
    assert "(other) split train" in meta["data"]["eval"] and meta["data"]["eval_examples"] == 8
