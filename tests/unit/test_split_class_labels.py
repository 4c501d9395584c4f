"""Hostile review, round four, finding 1: a dataset whose splits number their ClassLabel names apart
(another order, a class missing from one split) is read with each split's own names, for a
save_to_disk directory and a Hub-layout directory, cls and ner. Before, every split was read with
the first split's names: 0 of the validation split's gold labels right, and nothing said. Each
check is against the split's own ClassLabel (``features[column].int2str``). Nothing is downloaded."""

from __future__ import annotations

import pytest

from bertkit import hub
from bertkit.data.hub_datasets import DatasetChoice
from bertkit.data.registry import resolve
from bertkit.errors import BertkitError
from bertkit.tasks.base import EVAL, TRAIN
from bertkit.tasks.classification import SingleSentenceTask
from bertkit.tasks.tagging import TaggingTask


@pytest.fixture(autouse=True)
def _no_hub(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", datasets.config.HF_HUB_OFFLINE)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", huggingface_hub.constants.HF_HUB_OFFLINE)
    for name in hub.OFFLINE_VARIABLES:
        monkeypatch.setenv(name, "1")
    hub.hub_reachable.cache_clear()
    yield
    hub.hub_reachable.cache_clear()


def sentences(names: list, ids: list):
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"text": Value("string"), "label": ClassLabel(names=names)})
    return Dataset.from_dict({"text": [f"film number {i}" for i in range(len(ids))], "label": ids}, features)


def tagged(names: list, rows: list):
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    features = Features({"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=names))})
    return Dataset.from_dict({"tokens": [t for t, _ in rows], "ner_tags": [g for _, g in rows]}, features)


# train: neg 0, neu 1, pos 2; validation (no neu): pos 0, neg 1. Read with train's names, validation's
# [0, 1] * 50 would be neg, neu: 0 of 100 right.
TRAIN_SPLIT = ("neg", "neu", "pos"), [0, 1, 2] * 4
VALIDATION_SPLIT = ("pos", "neg"), [0, 1] * 50
TRAIN_TAGS = ("O", "B-PER", "B-LOC")
VALIDATION_TAGS = ("B-LOC", "O", "B-PER")  # another order
TAGGED = [(["john", "lives", "in", "paris"], [1, 0, 0, 2])] * 4
TAGGED_VALIDATION = [(["mary", "saw", "berlin"], [2, 1, 0])] * 3


def write(layout: str, root, splits: dict):
    from datasets import DatasetDict

    if layout == "disk":
        DatasetDict(splits).save_to_disk(str(root))
        return root
    lines = ["---", "configs:", "- config_name: main", "  data_files:"]
    for split, dataset in splits.items():
        (root / "data").mkdir(parents=True, exist_ok=True)
        dataset.to_parquet(str(root / "data" / f"{split}.parquet"))
        lines += [f"  - split: {split}", f"    path: data/{split}.parquet"]
    (root / "README.md").write_text("\n".join([*lines, "  default: true", "---", ""]))
    return root


def own_names(dataset, column: str) -> list:
    """The gold as the split's own ClassLabel names it (ids of a sequence: one list per row)."""
    feature = dataset.features[column]
    if hasattr(feature, "int2str"):
        return [feature.int2str(i) for i in dataset[column]]
    return [[feature.feature.int2str(i) for i in row] for row in dataset[column]]


@pytest.mark.parametrize("layout", ["disk", "repo"])
def test_each_split_of_a_cls_dataset_is_read_with_its_own_class_names(layout, tmp_path):
    train, validation = sentences(*map(list, TRAIN_SPLIT)), sentences(*map(list, VALIDATION_SPLIT))
    data = str(write(layout, tmp_path / layout, {"train": train, "validation": validation}))
    task = SingleSentenceTask()
    fitted = task.read(resolve(data, "train", choice=DatasetChoice()), TRAIN)
    task.fit_labels(fitted)
    assert task.labels == ["neg", "neu", "pos"]  # the training split's ClassLabel, in its id order
    assert [ex["label"] for ex in fitted] == own_names(train, "label")
    gold = [ex["label"] for ex in task.read(resolve(data, "dev", choice=DatasetChoice()), EVAL)]
    assert gold == own_names(validation, "label") == ["pos", "neg"] * 50
    wrong = [TRAIN_SPLIT[0][i] for i in validation["label"]]  # the old reading
    assert sum(g == w for g, w in zip(gold, wrong)) == 0


@pytest.mark.parametrize("layout", ["disk", "repo"])
def test_each_split_of_a_tagged_dataset_is_read_with_its_own_tag_names(layout, tmp_path):
    train, validation = tagged(list(TRAIN_TAGS), TAGGED), tagged(list(VALIDATION_TAGS), TAGGED_VALIDATION)
    data = str(write(layout, tmp_path / layout, {"train": train, "validation": validation}))
    task = TaggingTask()
    assert [ex["tags"] for ex in task.read(resolve(data, "train", choice=DatasetChoice()), TRAIN)] == own_names(
        train, "ner_tags"
    )
    gold = [ex["tags"] for ex in task.read(resolve(data, "dev", choice=DatasetChoice()), EVAL)]
    assert gold == own_names(validation, "ner_tags") == [["B-PER", "O", "B-LOC"]] * 3


def test_a_split_whose_ids_pass_the_first_splits_class_count_is_read(tmp_path):
    """A Hub-layout validation split with more classes than train: datasets' cast to train's
    ClassLabel would fail on id 3; read with its own, it holds a class training never saw."""
    train = sentences(["a", "b", "c"], [0, 1, 2] * 3)
    validation = sentences(["d", "c", "b", "a"], [3, 2, 1, 0])
    data = str(write("repo", tmp_path / "repo", {"train": train, "validation": validation}))
    gold = [ex["label"] for ex in SingleSentenceTask().read(resolve(data, "dev", choice=DatasetChoice()), EVAL)]
    assert gold == own_names(validation, "label") == ["a", "b", "c", "d"]


def test_a_splits_files_that_name_the_classes_apart_are_refused(tmp_path):
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    sentences(["neg", "pos"], [0, 1]).to_parquet(str(root / "data" / "train-0.parquet"))
    sentences(["pos", "neg"], [0, 1]).to_parquet(str(root / "data" / "train-1.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: data/train-*\n---\n"
    )
    with pytest.raises(BertkitError) as raised:
        resolve(str(root), "train", choice=DatasetChoice())
    assert "the train split's files name the 'label' classes differently" in raised.value.message
    assert "train-0.parquet: neg, pos; train-1.parquet: pos, neg" in raised.value.message
