"""A run described in a file: `bertkit finetune --config FILE` (flags override it) and the
resolved config.yaml every run writes, which replays the run."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import assert_user_error
from test_cli_classification import write_sentiment_split


@pytest.fixture
def data(tmp_path):
    return write_sentiment_split(tmp_path, 48, 20)


def test_config_yaml_round_trips_and_replays_the_run(tmp_path, tiny_bert, run_cli, data):
    train, dev = data
    first = tmp_path / "first"
    code, _, err = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        first,
        "--epochs",
        1,
        "--lr",
        "1e-3",
        "--batch-size",
        8,
        "--seed",
        7,
        "--max-length",
        32,
        "--text-column",
        "text",
    )
    assert code == 0, err
    written = yaml.safe_load((first / "config.yaml").read_text())
    assert written["task"] == "cls" and written["lr"] == 1e-3 and written["seed"] == 7 and written["batch_size"] == 8
    assert written["data"] == str(train.resolve()) and written["model"] == str(tiny_bert.resolve())
    assert written["text_column"] == "text" and written["label_column"] is None  # task options, defaults too
    assert not {"resume", "resume_from", "overwrite", "config"} & set(written)  # actions are not settings

    # the task comes from the file; --output on the command line overrides the file's
    second = tmp_path / "second"
    code, _, err = run_cli("finetune", "--config", first / "config.yaml", "--output", second)
    assert code == 0, err
    replayed = yaml.safe_load((second / "config.yaml").read_text())
    assert replayed == {**written, "output": str(second.resolve())}
    assert (
        json.loads((second / "bertkit.json").read_text())["metrics"]
        == json.loads((first / "bertkit.json").read_text())["metrics"]
    )  # the same run: the same numbers


def test_flags_override_the_file_and_json_is_read_too(tmp_path, tiny_bert, run_cli, data):
    train, dev = data
    config = tmp_path / "run.json"
    config.write_text(
        json.dumps(
            {
                "task": "cls",
                "data": str(train),
                "--eval-data": str(dev),
                "model": str(tiny_bert),
                "epochs": 1,
                "lr": 1e-3,
                "batch-size": 8,
                "max_length": 32,
                "seed": 3,
            }
        )
    )
    out = tmp_path / "model"
    code, _, err = run_cli("finetune", "cls", "--config", config, "--output", out, "--seed", 5)
    assert code == 0, err
    written = yaml.safe_load((out / "config.yaml").read_text())
    assert written["seed"] == 5 and written["batch_size"] == 8 and written["eval_data"] == str(dev.resolve())
    assert json.loads((out / "bertkit.json").read_text())["config"]["seed"] == 5


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("task: cls\nlr: [1, 2]\n", "options take one value"),
        ("task: cls\nlearning_rate: 1e-3\n", "learning_rate is not an option of cls"),
        ("task: ner\nlr: 1e-3\n", "is for task 'ner', not 'cls'"),
        ("- lr\n- 3\n", "holds a list, not a mapping"),
        ("task: cls\nlr: [unclosed\n", "is not valid YAML"),
        ("task: cls\nmax-length: 32\nmax_length: 64\n", "sets 'max_length' twice"),
        ("task: cls\nepochs: many\n", "epochs"),
    ],
)
def test_a_bad_config_file_is_one_line(tmp_path, run_cli, text, fragment):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    result = run_cli("finetune", "cls", "--config", config, "--data", tmp_path / "x.csv", "--output", tmp_path / "o")
    code, _, err = result
    assert code == 2 and "Traceback" not in err and fragment in err, err
    assert not (tmp_path / "o").exists()


def test_config_without_a_task_or_file(tmp_path, run_cli):
    config = tmp_path / "run.yaml"
    config.write_text("lr: 1e-3\n")
    assert_user_error(run_cli("finetune", "--config", config), "names no task")
    assert_user_error(run_cli("finetune", "--config", tmp_path / "missing.yaml"), "does not exist")
    assert_user_error(run_cli("finetune", "cls", "--config", tmp_path, "--data", "x"), "is a directory")
