"""finetune without --lr/--warmup-ratio/--weight-decay/--layer-decay trains with the model family's
published recipe (bertkit/tasks/family_recipes.py), says it once and records the numbers it used."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from test_cli_classification import write_sentiment_csv  # noqa: E402
from tiny_models import build_family  # noqa: E402

RECIPE_FIELDS = ("lr", "warmup_ratio", "weight_decay", "layer_decay")


def _run(run_cli, tmp_path, family, *extra):
    model = build_family(family, tmp_path / family)
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 24, seed=1)
    output = tmp_path / f"out-{family}"
    code, stdout, stderr = run_cli("finetune", "cls", "--data", train, "--model", model, "--output", output, *extra)
    return code, stdout + stderr, output


def _recorded(output):
    config = json.loads((output / "bertkit.json").read_text())["config"]
    return tuple(config[name] for name in RECIPE_FIELDS)


@pytest.mark.parametrize(
    "family,recipe,named",
    [("electra", (1e-4, 0.1, 0.01, 0.8), "ELECTRA's"), ("roberta", (1e-5, 0.06, 0.1, 1.0), "RoBERTa's")],
)
def test_a_family_trains_with_its_recipe_says_it_once_and_records_it(family, recipe, named, tmp_path, run_cli):
    code, said, output = _run(run_cli, tmp_path, family)
    assert code == 0, said
    lines = [line for line in said.splitlines() if "the flags override" in line]
    assert len(lines) == 1 and named in lines[0], said
    assert _recorded(output) == recipe
    import yaml

    replay = yaml.safe_load((output / "config.yaml").read_text())  # a replay trains with the same numbers
    assert tuple(replay[name] for name in RECIPE_FIELDS) == recipe


def test_a_given_flag_wins_over_the_family(tmp_path, run_cli):
    code, said, output = _run(run_cli, tmp_path, "electra", "--lr", "3e-5", "--layer-decay", "1")
    assert code == 0, said
    assert _recorded(output) == (3e-5, 0.1, 0.01, 1.0)
    (line,) = [line for line in said.splitlines() if "the flags override" in line]
    assert line.startswith("warmup-ratio 0.1, weight-decay 0.01: ELECTRA's")


def test_layer_decay_on_albert_is_refused_in_one_line_before_anything_is_written(tmp_path, run_cli):
    code, said, output = _run(run_cli, tmp_path, "albert", "--layer-decay", "0.8")
    assert code != 0
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no numbered layers" in errors[0], said
    assert not output.exists()
