"""Any `datasets` dataset as --data: a local directory in the Hub's repository layout (parquet files
and a README whose YAML names two configs, loaded through the same datasets.load_dataset call as a
Hub id) and a save_to_disk directory, for cls, pair, ner and qa; trained, evaluated and predicted
through the CLI, with the label names taken from the ClassLabel features. Nothing is downloaded."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import assert_user_error

# label ids in an order alphabetical sorting would not keep: the features' order must survive
SENTIMENT = ["positive", "negative"]
PAIRS = ["different", "same"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
WORDS = [("good", 0), ("great", 0), ("bad", 1), ("awful", 1)]


needs_optuna = pytest.mark.skipif(
    importlib.util.find_spec("optuna") is None, reason="Optuna is not installed (pip install 'bertkit[tune]')"
)


@pytest.fixture(autouse=True)
def _own_datasets_cache(tmp_path, monkeypatch):
    """The datasets cache in the test's folder, and no Hub: what a test builds stays there, and the
    offline switches bertkit throws (bertkit/hub.py) are put back afterwards."""
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


def cls_dataset(rows: int = 16):
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"sentence": Value("string"), "label": ClassLabel(names=SENTIMENT)})
    cycle = [WORDS[i % len(WORDS)] for i in range(rows)]
    return Dataset.from_dict(
        {"sentence": [f"the film was {w}" for w, _ in cycle], "label": [label for _, label in cycle]}, features
    )


def pair_dataset():
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"premise": Value("string"), "hypothesis": Value("string"), "label": ClassLabel(names=PAIRS)})
    rows = [("the film was good", "it was good", 1), ("the film was bad", "it was great", 0)] * 6
    return Dataset.from_dict(
        {"premise": [a for a, _, _ in rows], "hypothesis": [b for _, b, _ in rows], "label": [c for *_, c in rows]},
        features,
    )


def ner_dataset():
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    features = Features({"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=TAGS))})
    rows = [(["john", "lives", "in", "paris"], [1, 0, 0, 3]), (["mary", "visited", "berlin"], [1, 0, 3])] * 5
    return Dataset.from_dict({"tokens": [t for t, _ in rows], "ner_tags": [g for _, g in rows]}, features)


def qa_dataset():
    from datasets import Dataset, Features, Sequence, Value

    features = Features(
        {
            "id": Value("string"),
            "question": Value("string"),
            "context": Value("string"),
            "answers": Sequence({"text": Value("string"), "answer_start": Value("int32")}),
        }
    )
    rows = [("who lives in paris ?", "john lives in paris .", "john", 0)] * 4 + [
        ("where does mary live ?", "mary lives in berlin .", "berlin", 14)
    ] * 4
    return Dataset.from_dict(
        {
            "id": [f"q{i}" for i in range(len(rows))],
            "question": [q for q, *_ in rows],
            "context": [c for _, c, *_ in rows],
            "answers": [{"text": [a], "answer_start": [s]} for *_, a, s in rows],
        },
        features,
    )


BUILDERS = {"cls": cls_dataset, "pair": pair_dataset, "ner": ner_dataset, "qa": qa_dataset}


def hub_layout(root: Path, configs: dict) -> Path:
    """A Hub dataset repository: data/<config>/<split>-00000-of-00001.parquet and a README whose
    YAML names each config's files (the first config is the default)."""
    lines = ["---", "configs:"]
    for number, (name, splits) in enumerate(configs.items()):
        lines += [f"- config_name: {name}", "  data_files:"]
        for split, dataset in splits.items():
            (root / "data" / name).mkdir(parents=True, exist_ok=True)
            dataset.to_parquet(str(root / "data" / name / f"{split}-00000-of-00001.parquet"))
            lines += [f"  - split: {split}", f"    path: data/{name}/{split}-*"]
        if number == 0:
            lines.append("  default: true")
    (root / "README.md").write_text("\n".join([*lines, "---", "# a test dataset", ""]))
    return root


def saved(root: Path, splits: dict) -> Path:
    from datasets import DatasetDict

    DatasetDict(splits).save_to_disk(str(root))
    return root


def layouts(task: str, tmp_path: Path) -> dict:
    """The task's data as a Hub-layout directory (config "main", plus a second config "other") and
    as a save_to_disk directory, each with train and validation splits."""
    data = BUILDERS[task]()
    splits = {"train": data, "validation": data}
    return {
        "repo": hub_layout(tmp_path / f"{task}-repo", {"main": splits, "other": {"train": data.select(range(4))}}),
        "disk": saved(tmp_path / f"{task}-disk", splits),
    }


def finetune(run_cli, task, data, output, tiny_bert, *extra):
    return run_cli(
        "finetune",
        task,
        "--data",
        data,
        "--model",
        tiny_bert,
        "--output",
        output,
        "--epochs",
        "1",
        "--batch-size",
        "4",
        *extra,
    )


def predict_input(task: str, tmp_path: Path) -> Path:
    """What predict reads: the task's rows without their answers (a JSONL file)."""
    rows = BUILDERS[task]().to_list()[:3]
    drop = {"cls": ("label",), "pair": ("label",), "ner": ("ner_tags",), "qa": ("answers",)}[task]
    path = tmp_path / f"{task}-input.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in row.items() if k not in drop}) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("task", ["cls", "pair", "ner", "qa"])
@pytest.mark.parametrize("layout", ["repo", "disk"])
def test_train_evaluate_predict_from_a_dataset(task, layout, tmp_path, run_cli, tiny_bert):
    data = layouts(task, tmp_path)[layout]
    output = tmp_path / "model"
    code, out, err = finetune(run_cli, task, data, output, tiny_bert)
    assert code == 0, err
    meta = json.loads((output / "bertkit.json").read_text())
    assert "split train" in meta["data"]["train"] and "split validation" in meta["data"]["eval"]
    assert meta["data"]["train_examples"] == len(BUILDERS[task]())
    config = json.loads((output / "config.json").read_text())
    if task in ("cls", "pair"):  # the ClassLabel's names, in its id order
        expected = SENTIMENT if task == "cls" else PAIRS
        assert [config["id2label"][str(i)] for i in range(len(expected))] == expected
    if task == "ner":
        assert set(config["id2label"].values()) >= {"B-PER", "B-LOC", "O"}
        assert all(not label.isdigit() for label in config["id2label"].values())
    card = (output / "README.md").read_text()
    assert data.name in card and str(tmp_path) not in card  # the dataset by name, not where it lies here

    code, out, err = run_cli("eval", output, "--data", data, "--output", tmp_path / "m.json")
    assert code == 0, err
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["examples"] == len(BUILDERS[task]()) and "split validation" in report["data"]

    code, out, err = run_cli("predict", output, "--input", predict_input(task, tmp_path))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(rows) == 3
    if task in ("cls", "pair"):
        assert {row["label"] for row in rows} <= set(SENTIMENT if task == "cls" else PAIRS)
    if task == "ner":
        assert all(set(row["tags"]) <= set(config["id2label"].values()) for row in rows)


def test_a_second_config_and_named_splits(tmp_path, run_cli, tiny_bert):
    from datasets import ClassLabel, Dataset, Features, Value

    three = Features({"text": Value("string"), "topic": ClassLabel(names=["sport", "art", "food"])})
    topics = Dataset.from_dict(
        {"text": ["a match", "a painting", "a soup"] * 4, "topic": [0, 1, 2] * 4},
        three,
    )
    repo = hub_layout(
        tmp_path / "repo",
        {"main": {"train": cls_dataset()}, "topics": {"fit": topics, "held": topics.select(range(6))}},
    )
    output = tmp_path / "model"
    code, out, err = finetune(
        run_cli,
        "cls",
        repo,
        output,
        tiny_bert,
        "--data-config",
        "topics",
        "--train-split",
        "fit",
        "--eval-split",
        "held",
        "--label-column",
        "topic",
    )
    assert code == 0, err
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "sport", "1": "art", "2": "food"}
    meta = json.loads((output / "bertkit.json").read_text())
    assert "(topics) split held" in meta["data"]["eval"] and meta["data"]["eval_examples"] == 6

    # eval --split names a role (the config's own split names come with the flags) or a split itself
    code, out, err = run_cli(
        "eval", output, "--data", repo, "--data-config", "topics", "--split", "fit", "--output", tmp_path / "m.json"
    )
    assert code == 0, err
    assert json.loads((tmp_path / "m.json").read_text())["examples"] == 12

    # without --data: what training evaluated on, its config and evaluation split included
    code, out, err = run_cli("eval", output, "--output", tmp_path / "again.json")
    assert code == 0, err
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["examples"] == 6 and "(topics) split held" in again["data"]

    # export's parity check reads the same: the recorded dataset, config and evaluation split
    code, out, err = run_cli("export", "onnx", output, "--samples", "4")
    assert code == 0, err
    parity = json.loads((output / "onnx" / "export.json").read_text())
    assert "(topics) split held" in parity["parity_data"] and parity["parity_examples"] == 4


def test_a_missing_config_is_listed(tmp_path, run_cli, tiny_bert, capsys):
    repo = layouts("cls", tmp_path)["repo"]
    capsys.readouterr()  # building it showed progress: not the command's output
    result = finetune(run_cli, "cls", repo, tmp_path / "model", tiny_bert, "--data-config", "nope")
    assert_user_error(result, "no config 'nope'", "main, other", "--data-config")
    assert not (tmp_path / "model").exists()


def test_max_train_samples_does_not_read_the_whole_split(tmp_path, run_cli, tiny_bert, capsys):
    """A second train shard whose data pages are damaged (its footer, which says how many rows it
    has, is intact): reading the whole split fails on it; the first rows (--max-train-samples) are
    read from the first shard alone."""
    repo = hub_layout(tmp_path / "repo", {"main": {"train": cls_dataset(), "validation": cls_dataset(8)}})
    damaged = repo / "data" / "main" / "train-00001-of-00002.parquet"
    cls_dataset(200).to_parquet(str(damaged))
    data = bytearray(damaged.read_bytes())
    data[8:200] = b"\xab" * 192  # past the magic bytes, in the first column's pages
    damaged.write_bytes(bytes(data))
    capsys.readouterr()
    result = finetune(run_cli, "cls", repo, tmp_path / "whole", tiny_bert)
    assert_user_error(result, "could not read", "split train")
    assert not (tmp_path / "whole").exists()
    code, out, err = finetune(run_cli, "cls", repo, tmp_path / "first", tiny_bert, "--max-train-samples", "8")
    assert code == 0, err
    assert json.loads((tmp_path / "first" / "bertkit.json").read_text())["data"]["train_examples"] == 8


def test_probe_reads_a_saved_dataset(tmp_path, run_cli, tiny_bert):
    data = layouts("cls", tmp_path)["disk"]
    code, out, err = run_cli(
        "probe",
        "cls",
        "--data",
        data,
        "--model",
        tiny_bert,
        "--output",
        tmp_path / "probe",
        "--max-train-samples",
        "12",
    )
    assert code == 0, err
    assert json.loads((tmp_path / "probe" / "bertkit.json").read_text())["task"]["labels"] == SENTIMENT


def test_datasets_says_any_hub_id_works(run_cli):
    code, out, err = run_cli("datasets")
    assert code == 0, err
    assert "sst2" in out and "--data owner/name" in out and "--data-config" in out


def test_no_validation_split_evaluates_on_test_and_says_so(tmp_path, run_cli, tiny_bert):
    """imdb's layout (train, test, no validation): the test split is the evaluation data, and a
    notice says so as it is decided, naming the flag that picks another."""
    from bertkit import events

    repo = hub_layout(tmp_path / "repo", {"plain_text": {"train": cls_dataset(), "test": cls_dataset(8)}})
    heard = []
    with events.listening(heard.append):
        code, out, err = finetune(run_cli, "cls", repo, tmp_path / "model", tiny_bert)
    assert code == 0, err
    assert json.loads((tmp_path / "model" / "bertkit.json").read_text())["data"]["eval_examples"] == 8
    said = [event.text for event in heard if event.kind == "data"]
    assert any("no validation split" in text and "'test'" in text and "--eval-split" in text for text in said)


def test_pretrain_reads_the_text_of_a_dataset(tmp_path, run_cli, tiny_bert):
    from datasets import Dataset

    texts = Dataset.from_dict({"text": [f"the film number {i} was good and long" for i in range(24)]})
    repo = hub_layout(tmp_path / "repo", {"main": {"train": texts, "validation": texts.select(range(6))}})
    code, out, err = run_cli(
        "pretrain", "mlm", "--data", repo, "--model", tiny_bert, "--output", tmp_path / "mlm", "--epochs", "1"
    )
    assert code == 0, err
    meta = json.loads((tmp_path / "mlm" / "bertkit.json").read_text())
    assert "split train" in meta["data"]["train"] and "split validation" in meta["data"]["eval"]


@needs_optuna
def test_tune_and_seeds_take_a_dataset_config(tmp_path, run_cli, tiny_bert):
    """tune and --seeds need evaluation data: the chosen config's validation split is it, and the
    dataset flags reach every run (and config.yaml, which replays them)."""
    import yaml

    repo = layouts("cls", tmp_path)["repo"]
    code, out, err = run_cli(
        "tune", "cls", "--data", repo, "--data-config", "main", "--model", tiny_bert,
        "--output", tmp_path / "tuned", "--trials", "1", "--epochs", "1",
    )  # fmt: skip
    assert code == 0, err
    replay = yaml.safe_load((tmp_path / "tuned" / "config.yaml").read_text())
    assert replay["data_config"] == "main" and replay["data"] == str(repo.resolve())
    code, out, err = finetune(
        run_cli, "cls", repo, tmp_path / "seeds", tiny_bert, "--data-config", "main", "--seeds", "2"
    )
    assert code == 0, err
    assert json.loads((tmp_path / "seeds" / "bertkit.json").read_text())["data"]["eval_examples"] == 16


def test_a_hub_id_offline_loads_from_the_datasets_cache(tmp_path, run_cli, tiny_bert):
    """The Hub's own path (bertkit/hub.py finds it unreachable): someone/films as a download leaves it
    in the datasets cache (<cache>/someone___films/<config>/0.0.0/<hash>/films-<split>.arrow and
    dataset_info.json, made here from a local repository) trains, with its features' label names."""
    import datasets

    repo = hub_layout(tmp_path / "films", {"main": {"train": cls_dataset(), "validation": cls_dataset(8)}})
    datasets.load_dataset(str(repo), "main")  # prepared into the test's cache, as a Hub download would be
    cache = Path(datasets.config.HF_DATASETS_CACHE)
    (cache / "films").rename(cache / "someone___films")
    code, out, err = finetune(run_cli, "cls", "someone/films", tmp_path / "model", tiny_bert, "--data-config", "main")
    assert code == 0, err
    meta = json.loads((tmp_path / "model" / "bertkit.json").read_text())
    assert meta["data"]["train"] == "Hub someone/films (main) split train" and meta["data"]["eval_examples"] == 8
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert [config["id2label"][str(i)] for i in range(2)] == SENTIMENT
    card = (tmp_path / "model" / "README.md").read_text()  # the Hub dataset named in the card's metadata
    assert "datasets:\n- someone/films" in card and "config: main\n      split: validation" in card
    code, out, err = finetune(run_cli, "cls", "someone/films", tmp_path / "part", tiny_bert, "--max-train-samples", "4")
    assert code == 0, err  # its only cached config needs no --data-config; a slice of the cached table
    assert json.loads((tmp_path / "part" / "bertkit.json").read_text())["data"]["train_examples"] == 4
    result = finetune(run_cli, "cls", "someone/films", tmp_path / "nope", tiny_bert, "--data-config", "other")
    assert_user_error(result, "no config 'other' in the datasets cache", "['main']")


def test_label_sets_from_a_sequence_of_class_labels(tmp_path, run_cli, tiny_bert):
    """go_emotions' shape: ``labels`` is a Sequence(ClassLabel): multi-label, with its names."""
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    names = ["joy", "anger", "fear"]
    features = Features({"text": Value("string"), "labels": Sequence(ClassLabel(names=names))})
    sets = [[0], [1, 2], [2], [0, 1]] * 4
    data = Dataset.from_dict({"text": [f"a film {i}" for i in range(len(sets))], "labels": sets}, features)
    saved_dir = saved(tmp_path / "emotions", {"train": data, "validation": data})
    code, out, err = finetune(run_cli, "cls", saved_dir, tmp_path / "model", tiny_bert)
    assert code == 0, err
    meta = json.loads((tmp_path / "model" / "bertkit.json").read_text())
    assert meta["task"]["options"]["problem_type"] == "multi-label" and meta["task"]["labels"] == names


def test_rows_without_a_label_are_left_out_and_said(tmp_path, run_cli, tiny_bert):
    """SNLI's shape: a ClassLabel of -1 marks a pair without a gold label; those rows are left out."""
    from datasets import ClassLabel, Dataset, Features, Value

    names = ["entailment", "neutral", "contradiction"]
    features = Features({"premise": Value("string"), "hypothesis": Value("string"), "label": ClassLabel(names=names)})
    labels = [0, 1, 2, -1] * 4
    data = Dataset.from_dict(
        {
            "premise": [f"a man {i}" for i in range(16)],
            "hypothesis": [f"a person {i}" for i in range(16)],
            "label": labels,
        },
        features,
    )
    repo = hub_layout(tmp_path / "snli", {"plain_text": {"train": data, "validation": data}})
    code, out, err = finetune(run_cli, "pair", repo, tmp_path / "model", tiny_bert)
    assert code == 0, err
    meta = json.loads((tmp_path / "model" / "bertkit.json").read_text())
    assert meta["data"]["train_examples"] == 12 and meta["data"]["eval_examples"] == 12
    assert meta["task"]["labels"] == names
    assert "4 row(s) without a label (label -1) left out" in out + err
