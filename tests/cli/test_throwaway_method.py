"""A new training method is its own module plus one line in the methods registry, and nothing else.

``FrozenBottom`` is defined only here (this module is its module) and registered with one line
(``METHODS["frozen-bottom"]``, done with monkeypatch): it freezes the encoder's first layer before
training, records which layer in its own bertkit.json section and says so in the model card. It
composes with plain fine-tuning by its own declaration. finetune trains with it through the API (a
command adds it, as `bertkit distill` adds distillation), and `eval` and `predict` on the command
line read the directory it made: no file of bertkit knows its name.
"""

from __future__ import annotations

import json

import pytest
from hostile import CLS_CSV
from safetensors.torch import load_file

from bertkit.methods import METHODS, Method
from bertkit.options import RunOptions
from bertkit.training.plan import Driver

SECTION = "frozen_bottom"


class FrozenBottom(Method):
    name = "frozen-bottom"
    flag = "frozen-bottom"
    tasks = ("cls", "pair")
    composes_with = ("finetune", "lora")
    section = SECTION

    def adapt_network(self, network, run):
        layer = network.base_model.encoder.layer[0]
        for parameter in layer.parameters():
            parameter.requires_grad_(False)
        self.frozen = sum(p.numel() for p in layer.parameters())
        return network

    def sections(self, finished, run) -> dict:
        return {SECTION: {"layers": [0], "parameters": self.frozen}}

    @classmethod
    def card_lines(cls, meta: dict) -> list[str]:
        return [f"The encoder's first layer ({meta[SECTION]['parameters']:,} parameters) was frozen."]


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(METHODS, "frozen-bottom", f"{__name__}:FrozenBottom")  # the one registry line


def layer_weights(directory, layer: int) -> dict:
    weights = load_file(str(directory / "model.safetensors"))
    marker = f"encoder.layer.{layer}."
    return {k[k.index(marker) :]: v for k, v in weights.items() if marker in k}  # with or without "bert."


def test_a_method_defined_outside_bertkit_trains_saves_evaluates_and_predicts(registered, run_cli, tiny_bert, tmp_path):
    from bertkit import api
    from bertkit.options import TrainConfig

    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    model = tmp_path / "model"
    config = TrainConfig(epochs=2, batch_size=8, lr=1e-3, precision="no")
    api.finetune(
        "cls",
        RunOptions(data=str(data), model=str(tiny_bert), output=str(model)),
        config=config,
        driver=Driver(methods=(FrozenBottom(),)),
    )

    meta = json.loads((model / "bertkit.json").read_text())
    assert meta["methods"] == ["finetune", "frozen-bottom"]
    assert meta[SECTION]["layers"] == [0] and meta[SECTION]["parameters"] > 0
    base, trained = layer_weights(tiny_bert, 0), layer_weights(model, 0)
    assert base and all((base[k] == trained[k]).all() for k in base)  # what it recorded is what it did
    moved = layer_weights(model, 1)
    assert any(not (moved[k] == layer_weights(tiny_bert, 1)[k]).all() for k in moved)  # the rest trained
    assert "first layer" in (model / "README.md").read_text()

    code, out, err = run_cli("eval", model, "--data", data, "--output", tmp_path / "eval.json")
    assert code == 0, err
    assert 0.0 <= json.loads((tmp_path / "eval.json").read_text())["metrics"]["accuracy"] <= 1.0
    (tmp_path / "in.txt").write_text("the film was good\nthe film was awful\n")
    code, out, err = run_cli("predict", model, "--input", tmp_path / "in.txt")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert code == 0 and len(rows) == 2 and all(row["label"] in ("neg", "pos") for row in rows), err


def test_the_new_method_is_refused_where_it_does_not_compose(registered, tiny_bert, tmp_path):
    from bertkit import api
    from bertkit.errors import BertkitError
    from bertkit.options import TrainConfig

    data = tmp_path / "train.csv"
    data.write_text(CLS_CSV)
    config = TrainConfig(epochs=1, task_options={"recipe": "setfit"})
    with pytest.raises(BertkitError, match="frozen-bottom does not compose with --recipe setfit"):
        api.finetune(
            "cls",
            RunOptions(data=str(data), model=str(tiny_bert), output=str(tmp_path / "m")),
            config=config,
            driver=Driver(methods=(FrozenBottom(),)),
        )
    assert not (tmp_path / "m").exists()
