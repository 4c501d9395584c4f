"""The batch order: ner trains on random batches by default (more accurate on the whole CoNLL-2003
set on every seed; packed under --packing auto on a CPU), other tasks on length-grouped ones; the
flags override it, a resumed run keeps its checkpoint's, a run whose random batches cannot pack says
so, a multi-head run refuses --random-batches, and the padding share counts what the encoder ran."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import assert_user_error  # noqa: E402
from extras_models import write_conll  # noqa: E402
from test_cli_classification import write_sentiment_csv  # noqa: E402
from tiny_models import build_family  # noqa: E402

SLOW_LINE = "random batches padded train at about half the speed of --grouped ones"


@pytest.fixture
def groupings(monkeypatch) -> list:
    """Whether each training run's batch plan was length-grouped, in run order."""
    import bertkit.engine.training as training

    found, real_init = [], training.StepPlan.__init__

    def recorded(self, lengths, config, processes, index, grouped, *rest):
        found.append(grouped)
        real_init(self, lengths, config, processes, index, grouped, *rest)

    monkeypatch.setattr(training.StepPlan, "__init__", recorded)
    return found


RANDOM_LINE = "random batches: ner's more accurate order"


@pytest.mark.parametrize(
    "task,flags,random",
    [
        ("ner", (), True),
        ("ner", ("--grouped",), False),
        ("cls", (), False),
        ("cls", ("--random-batches",), True),
    ],
)
def test_the_batch_order_is_the_tasks_unless_a_flag_says(
    task, flags, random, tmp_path, tiny_bert, run_cli, monkeypatch, groupings
):
    """NER trains on random batches by default (more accurate on whole CoNLL-2003, every seed), packed
    under --packing auto on a CPU and said once; the others length-grouped, padded, silently; the
    flags override, and the run's config.yaml records the order it used (a replay keeps it)."""
    import yaml

    import bertkit.networks.packed_heads as packed_heads

    packed, real_pack = [], packed_heads.pack_encoder
    monkeypatch.setattr(packed_heads, "pack_encoder", lambda network: packed.append(1) or real_pack(network))
    data = tmp_path / ("train.txt" if task == "ner" else "train.csv")
    write_conll(data, 24, seed=1) if task == "ner" else write_sentiment_csv(data, 24, seed=1)
    output = tmp_path / "o"
    code, stdout, stderr = run_cli("finetune", task, "--data", data, "--model", tiny_bert, *flags, "--output", output)
    assert code == 0, stderr
    assert (stdout + stderr).count(RANDOM_LINE) == (1 if task == "ner" and not flags else 0)
    assert groupings == [not random] and len(packed) == int(random)  # auto packs random batches only
    assert yaml.safe_load((output / "config.yaml").read_text())["random_batches"] is random


@pytest.mark.parametrize(
    "record",
    [{"random_batches": False}, {"group_by_length": True}, {}],
    ids=["random_batches", "group_by_length (before b5b3424)", "neither (before 31fd17c)"],
)
def test_a_resumed_run_keeps_its_checkpoints_batch_order_unless_a_flag_says(
    record, tmp_path, tiny_bert, run_cli, groupings
):
    """A checkpoint of length-grouped ner batches (--grouped, or older bertkits that recorded the order
    as group_by_length or, earlier, not at all: always grouped) resumes grouped when the flag is left
    out: the resumed batch plan is the checkpoint's, unsaid; an explicit --random-batches against it is
    refused in one line."""
    import yaml

    data, output = tmp_path / "train.txt", tmp_path / "o"
    write_conll(data, 24, seed=1)
    base = ("finetune", "ner", "--data", data, "--model", tiny_bert, "--output", output, "--save-every", 2)
    base += ("--max-steps", 2)
    code, _, stderr = run_cli(*base, "--grouped")
    assert code == 0 and groupings == [True], stderr
    state = tmp_path / "o.checkpoints" / "step-2" / "state.json"
    saved = json.loads(state.read_text())
    identity = {k: v for k, v in saved["identity"].items() if k != "random_batches"}
    state.write_text(json.dumps({**saved, "identity": {**identity, **record}}))
    code, stdout, stderr = run_cli(*base, "--resume", "--overwrite")
    assert code == 0, stderr
    assert groupings == [True, True] and RANDOM_LINE not in stdout + stderr
    assert yaml.safe_load((output / "config.yaml").read_text())["random_batches"] is False
    result = run_cli(*base, "--resume", "--overwrite", "--random-batches")
    if "random_batches" in record:
        assert_user_error(result, "cannot resume from", "--random-batches True (checkpoint: False)")


def test_a_resumed_run_of_random_batches_continues_them_without_the_defaults_line(
    tmp_path, tiny_bert, run_cli, groupings
):
    """cls resumed from a --random-batches checkpoint without the flag: random, and not called cls's
    better order."""
    data = tmp_path / "train.csv"
    write_sentiment_csv(data, 24, seed=1)
    base = ("finetune", "cls", "--data", data, "--model", tiny_bert, "--output", tmp_path / "o", "--save-every", 2)
    base += ("--max-steps", 2)
    assert run_cli(*base, "--random-batches")[0] == 0
    code, stdout, stderr = run_cli(*base, "--resume", "--overwrite")
    assert code == 0 and groupings == [False, False], stderr
    assert "random batches:" not in stdout + stderr


def test_random_batches_that_cannot_pack_say_what_they_cost(tmp_path, run_cli, groupings):
    """A DeBERTa ner run keeps the random default but says, once, that it runs padded at about half
    the length-grouped speed; --grouped says nothing."""
    model = build_family("deberta-v2", tmp_path / "deberta-v2")
    data = tmp_path / "train.txt"
    write_conll(data, 24, seed=1)
    base = ("finetune", "ner", "--data", data, "--model", model, "--epochs", 1)
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "random")
    said = [line for line in (stdout + stderr).splitlines() if SLOW_LINE in line]
    assert code == 0 and len(said) == 1 and "deberta-v2 models run padded" in said[0], stdout + stderr
    code, stdout, stderr = run_cli(*base, "--grouped", "--output", tmp_path / "grouped")
    assert code == 0 and SLOW_LINE not in stdout + stderr and groupings == [False, True], stderr


def test_a_hidden_state_loss_runs_padded_and_says_why(tiny_bert):
    """distill --hidden-loss asks the student for every layer's hidden states, which a packed call
    does not return: the rows run padded, said under --packing on and, for random batches, auto."""
    from transformers import AutoModelForTokenClassification

    from bertkit.networks.distillation import DistillationLoss
    from bertkit.networks.packed_heads import packs
    from bertkit.networks.recipes import pack_rows, unpack_rows
    from bertkit.tasks.training_spec import TrainingSpec

    def loaded():
        return AutoModelForTokenClassification.from_pretrained(tiny_bert, num_labels=3, attn_implementation="sdpa")

    hidden = DistillationLoss(loaded(), 2.0, 0.5, teacher=loaded(), hidden="mse")
    said = pack_rows(TrainingSpec(), hidden, "cpu", "on")
    assert (
        said == "training batches run padded: --hidden-loss compares every layer's hidden states, which packed "
        "calls do not return"
    )
    assert SLOW_LINE in pack_rows(TrainingSpec(), hidden, "cpu", "auto", True) and not packs(hidden)
    masked_lm = TrainingSpec(recipe="masked-lm")  # full blocks of --max-length tokens: nothing to pack, nothing said
    assert pack_rows(masked_lm, hidden, "cpu", "auto", True) is None
    logits_only = DistillationLoss(loaded(), 2.0, 0.5)
    assert pack_rows(TrainingSpec(), logits_only, "cpu", "auto", True) is None and packs(logits_only)
    unpack_rows(logits_only)


def test_a_multi_head_run_batches_each_heads_rows_length_grouped_and_refuses_random_ones(tmp_path, tiny_bert, run_cli):
    import yaml

    write_sentiment_csv(tmp_path / "cls.csv", 16, seed=1)
    write_conll(tmp_path / "ner.txt", 16, seed=1)
    tasks = ("--task", f"a:cls:{tmp_path / 'cls.csv'}", "--task", f"b:ner:{tmp_path / 'ner.txt'}")
    base = ("finetune", "multi", *tasks, "--model", tiny_bert, "--epochs", 1)
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "o")
    assert code == 0 and "random batches" not in stdout + stderr, stderr  # no ner default said, none taken
    assert yaml.safe_load((tmp_path / "o" / "config.yaml").read_text())["random_batches"] is False
    result = run_cli(*base, "--random-batches", "--output", tmp_path / "random")
    assert_user_error(result, "does not compose with --random-batches", "drop --random-batches")
    assert not (tmp_path / "random").exists()


def test_the_padding_share_of_a_packed_run_counts_what_the_encoder_ran(tmp_path, tiny_bert, run_cli):
    """Packed, the encoder runs the real tokens and the packed row's spare ones (up to a multiple of
    32), not each batch's rows x longest: the share the run reports is that."""
    from bertkit.networks.packed import SHAPE_BUCKET

    data = tmp_path / "train.txt"
    write_conll(data, 40, seed=1)
    shares = {}
    for packing in ("auto", "off"):
        output = tmp_path / packing
        base = ("finetune", "ner", "--data", data, "--model", tiny_bert, "--epochs", 1, "--batch-size", 40)
        code, _, stderr = run_cli(*base, "--packing", packing, "--output", output)
        assert code == 0, stderr
        shares[packing] = json.loads((output / "bertkit.json").read_text())["throughput"]
    real = shares["off"]["tokens"]
    assert shares["auto"]["tokens"] == real
    ran = -(-real // SHAPE_BUCKET) * SHAPE_BUCKET  # one batch of all 40 rows: one packed row
    assert shares["auto"]["padding_share"] == round(1 - real / ran, 4) != shares["off"]["padding_share"]


def test_a_shared_encoder_that_runs_packed_counts_as_packed(tiny_bert):
    """A multi-head model's shared encoder packs under --packing on (pack_this_encoder): the run's
    padding share must count what it ran too, so ``packs`` finds it anywhere inside the network."""
    from transformers import AutoModel

    from bertkit.networks.packed_heads import pack_this_encoder, packs, unpack_this_encoder

    encoder = AutoModel.from_pretrained(tiny_bert, attn_implementation="sdpa")
    heads = torch.nn.ModuleDict({"encoder": encoder, "head": torch.nn.Linear(4, 2)})
    assert not packs(heads)
    pack_this_encoder(encoder)
    assert packs(heads)
    unpack_this_encoder(encoder)
    assert not packs(heads)
