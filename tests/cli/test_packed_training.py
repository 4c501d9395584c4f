"""Packed training end to end (--packing, off by default: networks/packed_heads.py): a run trains the
same weights as the padded run; a model or task that cannot pack runs padded and says so once;
--random-batches gives random batches (the batch order per task: test_batch_order.py)."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")

from extras_models import write_conll  # noqa: E402
from test_cli_classification import write_sentiment_csv  # noqa: E402
from tiny_models import build_family  # noqa: E402

PADDED_LINE = "training batches run padded"


@pytest.fixture
def packed_batches(monkeypatch) -> list:
    """The shape of every batch the encoder runs packed from here on (a run that stayed padded adds none)."""
    from bertkit.networks import packed_heads

    shapes, packing_of = [], packed_heads.Packing.of

    class CountedPacking(packed_heads.Packing):
        @classmethod
        def of(cls, attention_mask):
            shapes.append(attention_mask.shape)
            return packing_of(attention_mask)

    monkeypatch.setattr(packed_heads, "Packing", CountedPacking)
    return shapes


def _without_dropout(model_dir, target):
    """A copy of ``model_dir`` without dropout: packed and padded batches then draw nothing at random."""
    shutil.copytree(model_dir, target)
    config = json.loads((target / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    config.update(dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0)  # DistilBERT's names
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize("task", ["cls", "ner", "qa"])
def test_packed_and_padded_runs_train_the_same_weights(task, tmp_path, tiny_bert, run_cli):
    from safetensors.torch import load_file
    from test_qa_task import make_squad, write_json

    model = _without_dropout(tiny_bert, tmp_path / "model")
    train = tmp_path / {"cls": "train.csv", "ner": "train.txt", "qa": "train.json"}[task]
    if task == "qa":  # windows of different lengths: padding the span loss leaves out
        write_json(train, make_squad(12, seed=1))
    else:
        write_sentiment_csv(train, 40, seed=1) if task == "cls" else write_conll(train, 40, seed=1)
    base = ("finetune", task, "--data", train, "--eval-data", train, "--model", model, "--epochs", 2)
    # one thread: with two, a matmul's sums split differently for packed and padded shapes, and Adam
    # scales a near-zero gradient's rounding (a LayerNorm bias of QA's, 5e-5 apart) to whole steps
    base += ("--batch-size", 8, "--lr", "1e-3", "--precision", "no", "--threads", 1)
    outputs = {}
    for packing in ("on", "off"):
        outputs[packing] = tmp_path / packing
        code, stdout, stderr = run_cli(*base, "--packing", packing, "--output", outputs[packing])
        assert code == 0, stderr
        assert PADDED_LINE not in stdout + stderr
    packed, padded = (load_file(str(outputs[p] / "model.safetensors")) for p in ("on", "off"))
    start = load_file(str(tiny_bert / "model.safetensors"))
    moved = [k for k in padded if k.startswith("bert.") and not torch.equal(padded[k], start[k[len("bert.") :]])]
    assert moved  # training changed the encoder: equal weights are not two untouched copies
    for name in padded:  # QA's output bias: no gradient but rounding, which Adam scales up (multi-head test below)
        atol = 1e-3 * 10 if name.endswith("qa_outputs.bias") else 1e-5
        assert torch.allclose(packed[name], padded[name], atol=atol), name
    configs = [json.loads((outputs[p] / "bertkit.json").read_text())["config"] for p in ("on", "off")]
    assert [c["packing"] for c in configs] == ["on", "off"]


@pytest.mark.parametrize("family", ["albert", "distilbert"])
def test_albert_and_distilbert_train_packed_to_the_padded_weights(family, tmp_path, run_cli, packed_batches):
    """Positions from 0 like BERT; DistilBERT has no segment ids, ALBERT's pooler is a bare linear layer."""
    from safetensors.torch import load_file

    start_dir = build_family(family, tmp_path / "start")
    model = _without_dropout(start_dir, tmp_path / "model")
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 40, seed=1)
    base = ("finetune", "cls", "--data", train, "--model", model, "--epochs", 2, "--batch-size", 8, "--lr", "1e-3")
    outputs = {packing: tmp_path / packing for packing in ("on", "off")}
    for packing, output in outputs.items():
        before = len(packed_batches)
        code, stdout, stderr = run_cli(*base, "--precision", "no", "--packing", packing, "--output", output)
        assert code == 0, stderr
        assert PADDED_LINE not in stdout + stderr
        assert (len(packed_batches) > before) == (packing == "on")  # 5 batches x 2 epochs packed, or none
    packed, padded = (load_file(str(outputs[p] / "model.safetensors")) for p in ("on", "off"))
    start = load_file(str(start_dir / "model.safetensors"))
    prefix = f"{family}."
    moved = [k for k in padded if k.startswith(prefix) and not torch.equal(padded[k], start[k[len(prefix) :]])]
    assert moved
    for name in padded:
        assert torch.allclose(packed[name], padded[name], atol=1e-5), name


def test_a_family_that_cannot_pack_says_so_once_and_trains_padded(tmp_path, run_cli):
    model = build_family("deberta-v2", tmp_path / "deberta-v2")
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 24, seed=1)
    code, stdout, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--model",
        model,
        "--epochs",
        1,
        "--packing",
        "on",
        "--output",
        tmp_path / "out",
    )
    assert code == 0, stderr
    said = [line for line in (stdout + stderr).splitlines() if PADDED_LINE in line]
    assert len(said) == 1 and "deberta-v2 models run padded" in said[0], said


def test_a_device_without_a_packing_attention_runs_padded_and_says_why_and_qa_trains_with_the_span_loss(tmp_path):
    from bertkit.networks.recipes import pack_rows
    from bertkit.tasks import get_task_class
    from bertkit.tasks.base import SPAN
    from bertkit.tasks.training_spec import TrainingSpec

    qa_spec = get_task_class("qa")().training_spec()
    assert qa_spec.loss.target == SPAN  # padding left out of its softmax: it packs (tests/unit/test_packed_heads.py)
    said = pack_rows(TrainingSpec(), torch.nn.Linear(1, 1), "mps", "on")
    assert said == "training batches run padded: packing runs on the CPU and on CUDA only, not mps"
    assert pack_rows(qa_spec, torch.nn.Linear(1, 1), "cpu", "auto") is None  # auto: grouped heads padded, nothing said


def test_random_batches_mix_lengths_and_grouped_ones_do_not():
    from types import SimpleNamespace

    from bertkit.engine.training import StepPlan

    lengths = [5 + (i * 37) % 60 for i in range(640)]
    spread = {}
    for grouped in (True, False):
        config = SimpleNamespace(
            grad_accum=1, epochs=1, max_steps=None, batch_size=32, seed=0, random_batches=not grouped
        )
        accelerator = SimpleNamespace(num_processes=1, process_index=0)
        plan = StepPlan.of([{"input_ids": [0] * n} for n in lengths], config, accelerator, collate=None)
        batches = plan.shard(0)[0]
        spread[grouped] = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread[True] < 5 < 40 < spread[False]


def test_heads_run_padded_by_default_and_say_nothing(tmp_path, tiny_bert, run_cli):
    """Measured slower on length-grouped batches (benchmarks/results/packing_steps.md): auto leaves the
    heads padded."""
    from bertkit.options import TrainConfig

    assert TrainConfig().packing == "auto" and TrainConfig().random_batches is None  # the task's order
    model = build_family("deberta-v2", tmp_path / "deberta-v2")
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 24, seed=1)
    code, stdout, stderr = run_cli("finetune", "cls", "--data", train, "--model", model, "--output", tmp_path / "o")
    assert code == 0, stderr
    assert PADDED_LINE not in stdout + stderr


@pytest.mark.parametrize("packing,packs", [("auto", True), ("on", True), ("off", False)])
def test_the_embedding_towers_pack_unless_packing_is_off(packing, packs, tiny_bert):
    from transformers import AutoModel

    from bertkit.engine.cpu_kernels import CpuTrainingKernels
    from bertkit.networks.bi_encoder import BiEncoderTrainer
    from bertkit.networks.packed import can_pack
    from bertkit.networks.recipes import pack_rows, unpack_rows
    from bertkit.tasks.training_spec import BI_ENCODER, EmbeddingLoss, TrainingSpec

    encoder = AutoModel.from_pretrained(tiny_bert, attn_implementation="sdpa")
    network = BiEncoderTrainer(encoder, EmbeddingLoss(objective="mnrl"))
    CpuTrainingKernels(network).apply()
    assert pack_rows(TrainingSpec(BI_ENCODER), network, "cpu", packing) is None
    assert (pack_rows(TrainingSpec(BI_ENCODER), network, "cuda", packing) is None) is (packing != "on")
    assert can_pack(encoder) is packs
    unpack_rows(network)
    assert can_pack(encoder)


def test_towers_that_cannot_pack_say_why_under_on(tiny_bert):
    """A device without a packing attention, or towers loaded with an attention packing cannot swap:
    under --packing on, one line; under auto, padded without a word."""
    from transformers import AutoModel

    from bertkit.networks.bi_encoder import BiEncoderTrainer
    from bertkit.networks.recipes import pack_rows, unpack_rows
    from bertkit.tasks.training_spec import BI_ENCODER, EmbeddingLoss, TrainingSpec

    spec = TrainingSpec(BI_ENCODER)
    network = BiEncoderTrainer(AutoModel.from_pretrained(tiny_bert, attn_implementation="sdpa"), EmbeddingLoss("mnrl"))
    assert (
        pack_rows(spec, network, "mps", "on")
        == "training batches run padded: packing runs on the CPU and on CUDA only, not mps"
    )
    assert pack_rows(spec, network, "mps", "auto") is None
    flex = AutoModel.from_pretrained(tiny_bert, attn_implementation="flex_attention")
    network = BiEncoderTrainer(flex, EmbeddingLoss("mnrl"))
    said = pack_rows(spec, network, "cpu", "on")
    assert said.startswith(
        "training batches run padded: a model loaded with attn_implementation='flex_attention' runs padded"
    )
    assert pack_rows(spec, network, "cpu", "auto") is None
    unpack_rows(network)


def test_an_unknown_packing_is_one_line(tmp_path, run_cli):
    from conftest import assert_user_error

    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 8, seed=1)
    result = run_cli("finetune", "cls", "--data", train, "--packing", "sideways", "--output", tmp_path / "o")
    assert_user_error(result, "unknown --packing 'sideways'", "use one of auto, on, off")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "packing,random_batches,packed",
    [("auto", True, True), ("auto", False, False), ("on", False, True), ("off", True, False)],
)
def test_auto_packs_a_task_head_when_its_batches_are_random(packing, random_batches, packed, tiny_bert):
    """Random batches are two-thirds padding, where packing was measured 1.6-1.7x the padded step;
    length-grouped ones carry 5 %, where it was not (docs/scale.md)."""
    from transformers import AutoModelForSequenceClassification

    from bertkit.networks.packed_heads import PACKED_ON_CUDA, packs
    from bertkit.networks.recipes import pack_rows, unpack_rows
    from bertkit.tasks.training_spec import TrainingSpec

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2, attn_implementation="sdpa")
    assert pack_rows(TrainingSpec(), model, "cpu", packing, random_batches) is None
    assert packs(model) is packed
    unpack_rows(model)
    assert not packs(model)
    # CUDA: auto stays padded without a word (unmeasured there), on packs (engine/varlen_attention.py)
    assert pack_rows(TrainingSpec(), model, "cuda", "auto", True) is None and not packs(model)
    said = pack_rows(TrainingSpec(), model, "cuda", "on")  # packed, and said once: unmeasured on a GPU
    assert said == PACKED_ON_CUDA and packs(model)
    unpack_rows(model)


def test_random_batches_train_packed_by_default_to_the_padded_weights(tmp_path, tiny_bert, run_cli, monkeypatch):
    from safetensors.torch import load_file

    import bertkit.networks.packed_heads as packed_heads

    packed = []
    real = packed_heads.pack_encoder
    monkeypatch.setattr(packed_heads, "pack_encoder", lambda network: packed.append(1) or real(network))
    model = _without_dropout(tiny_bert, tmp_path / "model")
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 40, seed=1)
    base = ("finetune", "cls", "--data", train, "--model", model, "--epochs", 2, "--random-batches")
    base += ("--batch-size", 8, "--lr", "1e-3", "--precision", "no")
    for packing in ("auto", "off"):
        code, stdout, stderr = run_cli(*base, "--packing", packing, "--output", tmp_path / packing)
        assert code == 0 and PADDED_LINE not in stdout + stderr, stderr
        assert len(packed) == (1 if packing == "auto" else 0)  # auto packed the random batches, off did not
        packed.clear()
    auto, off = (load_file(str(tmp_path / p / "model.safetensors")) for p in ("auto", "off"))
    assert all(torch.allclose(auto[name], off[name], atol=1e-5) for name in off)


def test_a_multi_head_run_packs_its_shared_encoder_to_the_padded_weights(tmp_path, tiny_bert, run_cli, packed_batches):
    """--packing on: every head (here cls, ner and qa) reads the grid the shared encoder's packed run fills."""
    from safetensors.torch import load_file
    from test_qa_task import make_squad, write_json

    model = _without_dropout(tiny_bert, tmp_path / "model")
    write_sentiment_csv(tmp_path / "cls.csv", 24, seed=1)
    write_conll(tmp_path / "ner.txt", 24, seed=1)
    write_json(tmp_path / "qa.json", make_squad(8, seed=1))
    tasks = [f"a:cls:{tmp_path / 'cls.csv'}", f"b:ner:{tmp_path / 'ner.txt'}", f"c:qa:{tmp_path / 'qa.json'}"]
    base = ("finetune", "multi", *(arg for task in tasks for arg in ("--task", task)), "--model", model)
    base += ("--epochs", 2, "--batch-size", 8, "--lr", "1e-3", "--precision", "no")
    outputs = {packing: tmp_path / packing for packing in ("on", "off")}
    for packing, output in outputs.items():
        before = len(packed_batches)
        code, stdout, stderr = run_cli(*base, "--packing", packing, "--output", output)
        assert code == 0, stderr
        assert PADDED_LINE not in stdout + stderr
        assert (len(packed_batches) > before) == (packing == "on")
    packed, padded = (load_file(str(outputs[p] / "model.safetensors")) for p in ("on", "off"))
    assert packed.keys() == padded.keys() and padded
    for name in padded:
        # QA's output bias is added to every position of each softmax, which a shift leaves unchanged:
        # its gradient is 0 up to rounding, which Adam scales to whole steps (lr 1e-3 x 18)
        atol = 1e-3 * 18 if name.endswith("qa_outputs.bias") else 1e-5
        assert torch.allclose(packed[name], padded[name], atol=atol), name


def test_a_run_through_the_variable_length_attention_trains_to_the_padded_weights(
    tmp_path, tiny_bert, run_cli, monkeypatch
):
    """The whole loop as it runs on CUDA under --packing on (engine/varlen_attention.py; here on the CPU,
    the training kernels swapped for it): packed batches through the jagged SDPA, evaluation padded,
    the weights the padded run's."""
    from safetensors.torch import load_file

    import bertkit.engine.core as core
    import bertkit.engine.varlen_attention as varlen
    from bertkit.networks.packed import PACKING

    calls = []
    real = varlen.varlen_attention
    monkeypatch.setattr(varlen, "varlen_attention", lambda *a, **k: calls.append(PACKING in k) or real(*a, **k))
    chosen = lambda model, device, packing: varlen.VarlenAttention(model, enabled=packing == "on")  # noqa: E731 (CUDA's rule)
    monkeypatch.setattr(core, "training_kernels", chosen)
    model = _without_dropout(tiny_bert, tmp_path / "model")
    write_sentiment_csv(tmp_path / "train.csv", 40, seed=1)
    base = ("finetune", "cls", "--data", tmp_path / "train.csv", "--model", model, "--epochs", 2)
    base += ("--batch-size", 8, "--lr", "1e-3", "--precision", "no")
    try:
        for packing in ("on", "off"):
            code, stdout, stderr = run_cli(*base, "--packing", packing, "--output", tmp_path / packing)
            assert code == 0 and PADDED_LINE not in stdout + stderr, stderr
    finally:
        monkeypatch.undo()
        varlen.register_attention()  # the registry holds the function itself: the real one again
    assert calls and all(calls)  # only packed calls came here: evaluation ran SDPA on its padded batches
    on, off = (load_file(str(tmp_path / p / "model.safetensors")) for p in ("on", "off"))
    assert all(torch.allclose(on[name], off[name], atol=1e-5) for name in off)


@pytest.mark.parametrize("device,said", [("cpu", None), ("cuda", "packed"), ("mps", "padded")])
def test_a_multi_head_encoder_under_packing_on_says_what_it_does_on_each_device(device, said, tiny_bert, monkeypatch):
    """CPU: packs silently (measured); CUDA: packs and says its speed is unmeasured; elsewhere: padded, said."""
    from types import SimpleNamespace

    from transformers import AutoModel

    import bertkit.api.multihead as multihead
    from bertkit.networks.packed_heads import PACKED_ON_CUDA

    lines = []
    monkeypatch.setattr(multihead, "notice", lambda kind, line, **_: lines.append(line))
    encoder = AutoModel.from_pretrained(tiny_bert, attn_implementation="sdpa")
    engine = SimpleNamespace(accelerator=SimpleNamespace(device=torch.device(device)))
    with multihead._packed_encoder(encoder, SimpleNamespace(packing="on"), engine):
        assert ("forward" in vars(encoder)) is (said != "padded")  # the packed forward in place
    assert "forward" not in vars(encoder)  # its own forward again
    expected = {None: [], "packed": [PACKED_ON_CUDA], "padded": ["training batches run padded: packing runs on"]}
    assert len(lines) == len(expected[said])
    assert all(line.startswith(start) for line, start in zip(lines, expected[said]))
