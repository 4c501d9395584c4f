"""The option families' validators, called directly (no CLI, no model), and the rule that each
shared option is declared once in the source (bertkit/options: one field helper per option)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bertkit.errors import BertkitError
from bertkit.options import (
    EmbeddingOptions,
    EvalOptions,
    ExportOptions,
    InferenceOptions,
    InspectOptions,
    ProbeOptions,
    ServeOptions,
    StreamOptions,
    TrainConfig,
    check_batch_size,
    check_max_length,
    check_precision,
    default_output,
)

PACKAGE = Path(__file__).resolve().parents[2] / "bertkit"
FLAGS = ("max_length", "precision", "threads", "batch_size", "eval_batch_size", "top_k", "n_best")


def fails(call, *fragments):
    with pytest.raises(BertkitError) as caught:
        call()
    message = str(caught.value)
    assert all(fragment in message for fragment in fragments), message
    assert "\n" not in message and "hint:" in message  # one line, with a hint
    return message


@pytest.mark.parametrize("value", [0, -3])
def test_batch_size_at_least_one(value):
    fails(
        lambda: check_batch_size(value, "bertkit eval"),
        "--batch-size must be >= 1",
        f"got {value}",
        "bertkit eval --help",
    )
    fails(lambda: check_batch_size(value, "bertkit finetune", "--eval-batch-size"), "--eval-batch-size")
    check_batch_size(1, "bertkit eval")


@pytest.mark.parametrize("value", [7, 8193, 0])
def test_max_length_in_range(value):
    fails(lambda: check_max_length(value, "bertkit embed"), "--max-length must be between 8 and 8192")


def test_max_length_bounds_and_none_pass():
    for value in (None, 8, 512, 8192):
        check_max_length(value, "bertkit probe")


def test_precision_is_a_known_one():
    fails(lambda: check_precision("fp8"), "--precision", "fp8", "auto")
    for value in ("auto", "no", "fp16", "bf16"):
        check_precision(value)


@pytest.mark.parametrize(
    "family, field, value, flag",
    [
        (InferenceOptions, "batch_size", 0, "--batch-size"),
        (InferenceOptions, "precision", "fp8", "--precision"),
        (InferenceOptions, "threads", 0, "--threads"),
        (EmbeddingOptions, "max_length", 4, "--max-length"),
        (EmbeddingOptions, "batch_size", -1, "--batch-size"),
        (ProbeOptions, "max_length", 9000, "--max-length"),
        (ProbeOptions, "batch_size", 0, "--batch-size"),
        (ServeOptions, "batch_size", 0, "--batch-size"),
        (ServeOptions, "max_inputs", 0, "--max-inputs"),
        (ServeOptions, "max_request_bytes", 0, "--max-request-bytes"),
        (ServeOptions, "max_wait_ms", float("nan"), "--max-wait-ms"),
        (ServeOptions, "max_wait_ms", 10_001, "--max-wait-ms"),
        (ExportOptions, "samples", 0, "--samples"),
        (EvalOptions, "max_eval_samples", 0, "--max-eval-samples"),
        (StreamOptions, "chunk_rows", 0, "--chunk-rows"),
        (StreamOptions, "actors", 0, "--actors"),
        (InspectOptions, "max_length", 0, "--max-length"),
        (TrainConfig, "batch_size", 0, "--batch-size"),
        (TrainConfig, "eval_batch_size", 0, "--eval-batch-size"),
        (TrainConfig, "max_length", 4, "--max-length"),
        (TrainConfig, "precision", "fp8", "--precision"),
    ],
)
def test_each_family_refuses_a_bad_value_naming_its_flag(family, field, value, flag):
    required = {"input": "in.txt", "output": "out.npy", "text": "good"}
    names = {f for f in family.__dataclass_fields__}
    good = family(**{k: v for k, v in required.items() if k in names})
    good.validate("bertkit test")  # the defaults pass
    bad = family(**{**{k: v for k, v in required.items() if k in names}, field: value})
    fails(lambda: bad.validate("bertkit test"), flag)


def test_actors_not_given_is_none_and_counts_as_the_default():
    stream = StreamOptions()
    assert stream.actors is None and stream.actor_count == 2
    assert StreamOptions(actors=2).actor_count == 2


def test_the_default_output_is_named_in_one_place():
    assert default_output("data/train.csv", "cls-") == str(Path("runs") / "cls-train")
    assert default_output("sst2", "probe-pair-") == str(Path("runs") / "probe-pair-sst2")


def sources() -> dict[Path, str]:
    return {path: path.read_text() for path in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("name", FLAGS)
def test_each_shared_option_is_declared_once(name):
    """A declaration is a dataclass field written with ``option(`` or a ``TaskOption("name"``, or a
    hand-written ``typer.Option`` for it; fields built by the one helper per option
    (``batch_size_option("inference")``) are not declarations: the helper's table row is."""
    field = re.compile(rf"^\s*{name}\s*:[^=]*=\s*option\(", re.MULTILINE)
    task_option = re.compile(rf"TaskOption\(\s*\"{name}\"")
    by_hand = re.compile(rf"\b{name}\b[^\n]*typer\.Option\(|typer\.Option\([^)]*--{name.replace('_', '-')}\b")
    helper = re.compile(rf"^def {name}_option\(", re.MULTILINE)
    found = []
    for path, text in sources().items():
        for pattern in (field, task_option, by_hand, helper):
            found += [f"{path.relative_to(PACKAGE.parent)}: {m.group(0).strip()}" for m in pattern.finditer(text)]
    assert len(found) == 1, found


def test_no_hand_written_flags_for_the_shared_options_in_the_cli():
    for path in (PACKAGE / "cli").glob("*.py"):
        text = path.read_text()
        for name in FLAGS:
            assert not re.search(rf"{name}\s*:[^\n]*typer\.Option", text), (path, name)
            assert f'"--{name.replace("_", "-")}"' not in text, (path, name)


def test_each_rule_is_written_once_in_the_options():
    text = "\n".join(path.read_text() for path in (PACKAGE / "options").glob("*.py"))
    assert text.count("must be >= {minimum}") == 1  # every count's lower bound, batch sizes included
    assert text.count("must be between {MIN_LENGTH} and {MAX_LENGTH}") == 1
    assert text.count("unknown --precision") == 1
    assert len(re.findall(r"\b64\b", text)) == 1  # the inference batch size


def test_registered_tasks_declare_each_command_flag_once():
    """Two tasks that take the same eval/predict/probe flag share one declaration (same help)."""
    from bertkit.tasks import TASKS, get_task_class

    for command in ("eval", "predict", "probe"):
        seen = {}
        for name in list(TASKS):
            for declared in get_task_class(name).options_for(command):
                assert seen.setdefault(declared.name, declared) == declared, (command, declared.name)


def test_actors_given_without_ray_is_refused_whatever_its_value():
    """--actors 2 (the default's value) is as much a given flag as --actors 3."""
    from bertkit.cli.on_ray import check_ray_flags

    check_ray_flags(StreamOptions())
    for actors in (2, 3):
        fails(lambda actors=actors: check_ray_flags(StreamOptions(actors=actors)), "--actors needs --ray")
    check_ray_flags(StreamOptions(ray=True, actors=2))
