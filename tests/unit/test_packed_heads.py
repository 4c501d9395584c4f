"""Packed cross-encoder training (bertkit/networks/packed_heads.py): the encoder runs the real tokens
of a batch's rows as one sequence, the head reads the padded grid. Logits, loss and gradients must
be the padded batch's (fp32, 1e-5) for every head and packable family, single texts and pairs, under
both attentions that read a packing: the CPU training attention and the variable-length one CUDA
uses (engine/varlen_attention.py; here on the CPU, each row alone through SDPA, the kernels' stand-in)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tiny_models import build_family  # noqa: E402

from bertkit.engine.cpu_kernels import CpuTrainingKernels  # noqa: E402
from bertkit.engine.varlen_attention import VarlenAttention  # noqa: E402
from bertkit.networks.losses import TrainingLoss  # noqa: E402
from bertkit.networks.packed import PACKED_TYPES  # noqa: E402
from bertkit.networks.packed_heads import pack_encoder, packs, unpack_encoder  # noqa: E402

ATTENTIONS = {"cpu": CpuTrainingKernels, "varlen": VarlenAttention}
TEXTS = ["a", "the film was good and the plot was fine", "ok", "john lives in paris with mary", "it was bad", "no"]
# head -> (transformers class, config overrides, labels builder)
HEADS = {
    "cls": (
        "AutoModelForSequenceClassification",
        {"num_labels": 3},
        lambda rows, mask: torch.tensor([0, 2, 1, 1, 0, 2]),
    ),
    "regression": (
        "AutoModelForSequenceClassification",
        {"num_labels": 1, "problem_type": "regression"},
        lambda rows, mask: torch.linspace(-1, 1, rows),
    ),
    "multi-label": (
        "AutoModelForSequenceClassification",
        {"num_labels": 4, "problem_type": "multi_label_classification"},
        lambda rows, mask: (torch.arange(rows * 4).view(rows, 4) % 3 == 0).float(),
    ),
    "rerank": (  # pointwise: one logit on a (query, passage) pair, BCE against the label (TrainingLoss below)
        "AutoModelForSequenceClassification",
        {"num_labels": 1},
        lambda rows, mask: (torch.arange(rows) % 2).float()[:, None],
    ),
    "ner": (
        "AutoModelForTokenClassification",
        {"num_labels": 5},
        lambda rows, mask: (torch.arange(mask.numel()).view(mask.shape) % 5).masked_fill(mask == 0, -100),
    ),
}


def _model_and_batch(family: str, head: str, tmp_path, pairs: bool = False):
    import transformers

    directory = build_family(family, tmp_path / family)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    class_name, overrides, labels = HEADS[head]
    torch.manual_seed(0)
    model = getattr(transformers, class_name).from_pretrained(directory, attn_implementation="sdpa", **overrides)
    for module in model.modules():  # no dropout, whatever the family calls its rates (DistilBERT, ALBERT's head)
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    texts = (TEXTS, TEXTS[::-1]) if pairs else (TEXTS,)
    batch = dict(tokenizer(*texts, padding=True, return_tensors="pt"))
    batch["labels"] = labels(len(TEXTS), batch["attention_mask"])
    return model, batch


def _run(network, batch, real):
    """Loss, the logits at real positions, every gradient."""
    network.zero_grad(set_to_none=True)
    out = network(**batch)
    out.loss.backward()
    logits = out.logits[real] if out.logits.dim() == 3 else out.logits
    grads = {n: p.grad.clone() for n, p in network.named_parameters() if p.grad is not None}
    return out.loss.detach(), logits.detach(), grads


def _padded_and_packed(network, batch, attention: str = "cpu"):
    real = batch["attention_mask"].bool()
    network.train()  # dropout 0: one network either way; train() as the loop runs it
    padded = _run(network, batch, real)
    kernels = ATTENTIONS[attention](network)
    kernels.apply()
    assert pack_encoder(network) and packs(network)
    packed = _run(network, batch, real)
    unpack_encoder(network)
    kernels.undo()
    return padded, packed


def _assert_equal(padded, packed):
    (loss, logits, grads), (packed_loss, packed_logits, packed_grads) = padded, packed
    assert torch.allclose(packed_logits, logits, atol=1e-5), (packed_logits - logits).abs().max()
    assert torch.allclose(packed_loss, loss, atol=1e-5)
    assert grads.keys() == packed_grads.keys() and grads
    for name in grads:
        assert torch.allclose(packed_grads[name], grads[name], atol=1e-5, rtol=1e-4), name


@pytest.mark.parametrize("family", PACKED_TYPES)
@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("pairs", [False, True], ids=["single", "pairs"])
@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_a_packed_head_gives_the_padded_batchs_logits_loss_and_gradients(family, head, pairs, attention, tmp_path):
    model, batch = _model_and_batch(family, head, tmp_path, pairs)
    lengths = batch["attention_mask"].sum(1)
    assert lengths.min() < lengths.max()  # padding to take out
    if pairs and "token_type_ids" in batch and family != "roberta":
        assert batch["token_type_ids"].max() == 1  # segment ids travel with their tokens
    _assert_equal(*_padded_and_packed(model, batch, attention))


@pytest.fixture(params=[1, 2], ids=["a row a grid row", "two rows a grid row"])
def length_groups(monkeypatch, request):
    return _in_length_groups(monkeypatch, request.param)


def _on_the_whole_grid(monkeypatch) -> None:
    """Every packed batch's attention on its whole padded grid, one row a grid row (the layout of rows of
    one length; the tests' batches mix lengths, so by default their short rows share grid rows)."""
    from bertkit.networks import attention_groups

    monkeypatch.setattr(attention_groups, "layout", lambda lengths, *a: [[[row] for row in range(len(lengths))]])


def _in_length_groups(monkeypatch, per_bin: int) -> list[int]:
    """Every packed batch's attention in two groups of rows (networks/attention_groups.py): every
    other row, from the last, each group with rows of several lengths (so padding of its own) and
    out of row order; with two rows a grid row, neighbours in that order share one (a bin: its
    block-diagonal mask keeps them apart). Returns the group counts the batches had."""
    from bertkit.networks import attention_groups

    counts, row_groups = [], attention_groups._row_groups

    def alternate(lengths, heads, itemsize):
        rows = list(range(len(lengths)))
        return [[group[i : i + per_bin] for i in range(0, len(group), per_bin)] for group in (rows[::-2], rows[-2::-2])]

    def counted(*args):
        groups = row_groups(*args)
        counts.append(len(groups or [None]))
        assert per_bin == 1 or all(g.segments is not None for g in groups)
        return groups

    monkeypatch.setattr(attention_groups, "layout", alternate)
    monkeypatch.setattr(attention_groups, "_row_groups", counted)
    return counts


@pytest.mark.parametrize("family", PACKED_TYPES)
@pytest.mark.parametrize("head", sorted(HEADS))
def test_a_packed_head_in_length_groups_gives_the_padded_batchs_logits_loss_and_gradients(
    family, head, tmp_path, length_groups
):
    model, batch = _model_and_batch(family, head, tmp_path, pairs=True)
    _assert_equal(*_padded_and_packed(model, batch))
    assert length_groups and set(length_groups) == {2}


@pytest.mark.parametrize("family", PACKED_TYPES)
@pytest.mark.parametrize("pairs", [False, True], ids=["single", "pairs"])
@pytest.mark.parametrize(
    "attention,per_bin",
    [("cpu", None), ("cpu", 0), ("cpu", 1), ("cpu", 2), ("varlen", None)],
    ids=["layout", "whole grid", "length groups", "length groups in bins", "varlen"],
)
def test_a_packed_qa_head_gives_the_padded_batchs_logits_span_loss_and_gradients(
    family, pairs, attention, per_bin, tmp_path, monkeypatch
):
    """QA reads every position; its span loss leaves padding out of the softmax (networks/losses.py),
    so the zeros packing leaves on padding change nothing."""
    import transformers

    groups = (
        _in_length_groups(monkeypatch, per_bin)
        if per_bin
        else _on_the_whole_grid(monkeypatch)
        if per_bin == 0
        else None
    )

    from bertkit.networks.losses import SpanLoss

    directory = build_family(family, tmp_path / family)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    torch.manual_seed(0)
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(directory, attn_implementation="sdpa")
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    batch = dict(tokenizer(*((TEXTS, TEXTS[::-1]) if pairs else (TEXTS,)), padding=True, return_tensors="pt"))
    lengths = batch["attention_mask"].sum(1)
    batch["start_positions"] = (lengths - 1) // 2  # inside each row: never on its padding
    batch["end_positions"] = lengths - 1
    network, real = SpanLoss(model).train(), batch["attention_mask"].bool()

    def run():
        network.zero_grad(set_to_none=True)
        out = network(**batch)
        out.loss.backward()
        logits = torch.stack([out.start_logits[real], out.end_logits[real]])
        return out.loss.detach(), logits.detach(), {n: p.grad.clone() for n, p in network.named_parameters()}

    padded = run()
    kernels = ATTENTIONS[attention](network)
    kernels.apply()
    assert pack_encoder(network) and packs(network)
    packed = run()
    unpack_encoder(network)
    kernels.undo()
    _assert_equal(padded, packed)
    assert groups is None or set(groups) == {2}


@pytest.mark.parametrize(
    "target,head", [("class", "cls"), ("multi_hot", "multi-label"), ("class", "ner"), ("multi_hot", "rerank")]
)
def test_the_loss_wrappers_pack_the_model_inside(target, head, tmp_path):
    """Class weights and the focal loss (TrainingLoss) read the same logits; rerank pointwise trains
    so (tasks/rerank.py: the multi-hot target on one logit)."""
    model, batch = _model_and_batch("bert", head, tmp_path, pairs=True)
    labels = batch["labels"]
    weights = [1.0, 2.0, 0.5, 1.5, 1.0][: model.config.num_labels]
    network = TrainingLoss(model, target, weights, gamma=2.0 if target == "class" else 0.0)
    _assert_equal(*_padded_and_packed(network, {**batch, "labels": labels}))


@pytest.mark.parametrize(
    "attention,per_bin",
    [("cpu", None), ("cpu", 0), ("cpu", 1), ("cpu", 2), ("varlen", None)],
    ids=["layout", "whole grid", "length groups", "length groups in bins", "varlen"],
)
def test_a_packed_row_never_sees_another_row(attention, per_bin, tmp_path, monkeypatch):
    if per_bin:
        _in_length_groups(monkeypatch, per_bin)
    elif per_bin == 0:
        _on_the_whole_grid(monkeypatch)
    model, batch = _model_and_batch("bert", "ner", tmp_path)
    model.train()
    ATTENTIONS[attention](model).apply()
    pack_encoder(model)
    before = model(**batch).logits.detach()
    changed = {k: v.clone() for k, v in batch.items()}
    # row 3's words reordered (in bins, row 3 shares its grid row with row 5)
    changed["input_ids"][3, 1:5] = changed["input_ids"][3, 1:5].flip(0)
    after = model(**changed).logits.detach()
    real = batch["attention_mask"].bool()
    assert not torch.allclose(after[3][real[3]], before[3][real[3]], atol=1e-4)
    for row in (0, 1, 2, 4, 5):
        assert torch.allclose(after[row][real[row]], before[row][real[row]], atol=1e-6), row


def test_the_encoder_packs_only_under_the_training_attention(tmp_path, monkeypatch):
    """SDPA (evaluation, prediction, CUDA) runs the plain padded forward, and unpack restores it."""
    model, batch = _model_and_batch("bert", "cls", tmp_path)
    import bertkit.networks.packed_heads as packed_heads

    calls = []
    real_of = packed_heads.Packing.of
    monkeypatch.setattr(packed_heads.Packing, "of", staticmethod(lambda mask: calls.append(1) or real_of(mask)))
    pack_encoder(model)
    model.eval()
    model(**batch)
    assert calls == []  # SDPA: padded
    kernels = CpuTrainingKernels(model)
    kernels.apply()
    model(**batch)
    assert calls == [1]
    kernels.undo()
    unpack_encoder(model)
    assert not packs(model) and "forward" not in vars(model.bert)


@pytest.mark.parametrize("per_bin", [None, 2], ids=["layout", "two rows a grid row"])
def test_packed_attention_drops_its_probabilities_on_the_grid_it_attends_on(per_bin, tmp_path, monkeypatch):
    """Attention dropout reaches the packed attention: each grid it attends on draws its own mask (a
    bin's rows share one), and a run with dropout differs from one without, repeatably per seed."""
    from bertkit.engine import cpu_kernels

    if per_bin:
        _in_length_groups(monkeypatch, per_bin)
    model, batch = _model_and_batch("bert", "ner", tmp_path)
    ATTENTIONS["cpu"](model).apply()
    assert pack_encoder(model)
    shapes, drop = [], cpu_kernels.fast_dropout
    monkeypatch.setattr(cpu_kernels, "fast_dropout", lambda x, p: shapes.append((tuple(x.shape), p)) or drop(x, p))

    def logits(p: float, seed: int = 0) -> torch.Tensor:
        for layer in model.bert.encoder.layer:
            layer.attention.self.dropout.p = p  # the hidden dropouts stay 0 (_model_and_batch)
        torch.manual_seed(seed)
        return model.train()(**batch).logits.detach()

    undropped = logits(0.0)
    assert not shapes  # nothing drawn without dropout
    dropped = logits(0.5)
    layers = model.config.num_hidden_layers
    assert {p for _, p in shapes} == {0.5} and len(shapes) == layers * (2 if per_bin else 1)
    rows = batch["input_ids"].shape[0]
    assert all(shape[0] < rows for shape, _ in shapes)  # bins: fewer grid rows than the batch's rows
    assert (dropped - undropped).abs().max() > 1e-4 and torch.equal(dropped, logits(0.5))


@pytest.mark.parametrize("pairs", [False, True], ids=["single", "pairs"])
@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_the_first_token_last_layer_packs_each_rows_cls(pairs, attention, tmp_path):
    """A sequence classifier trains with its last layer computing [CLS] alone (first_token_head.py);
    packed, each row's [CLS] attends to its own row."""
    from bertkit.networks.first_token_head import first_token_only_last_layer

    model, batch = _model_and_batch("bert", "cls", tmp_path, pairs)
    assert first_token_only_last_layer(model)
    _assert_equal(*_padded_and_packed(model, batch, attention))


@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_attention_recomputed_in_backward_packs_too(attention, tmp_path):
    """--save-memory (engine/attention_recompute.py) passes the packing through its checkpoint."""
    from bertkit.engine.attention_recompute import checkpoint_attention

    model, batch = _model_and_batch("bert", "ner", tmp_path, pairs=True)
    assert checkpoint_attention(model)
    _assert_equal(*_padded_and_packed(model, batch, attention))


@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_listwise_reranking_packs_each_querys_passages(attention, tmp_path):
    from bertkit.networks.listwise import ListwiseTrainer

    model, batch = _model_and_batch("bert", "rerank", tmp_path, pairs=True)
    batch.pop("labels")
    batch.update(group=torch.tensor([0, 0, 0, 1, 1, 1]), relevance=torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0, 0.0]))
    network = ListwiseTrainer(model)

    def run():
        network.zero_grad(set_to_none=True)
        loss = network(**batch).loss
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in network.named_parameters() if p.grad is not None}

    network.train()
    loss, grads = run()
    kernels = ATTENTIONS[attention](network)
    kernels.apply()
    assert pack_encoder(network)
    packed_loss, packed_grads = run()
    assert torch.allclose(packed_loss, loss, atol=1e-5)
    for name in grads:
        assert torch.allclose(packed_grads[name], grads[name], atol=1e-5, rtol=1e-4), name


@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_lora_adapters_train_packed_too(attention, tmp_path):
    """--lora injects adapters into the model's linear layers, which act on each token alone."""
    pytest.importorskip("peft")
    from bertkit.networks.lora import LoraSettings, add_adapters

    model, batch = _model_and_batch("bert", "cls", tmp_path, pairs=True)
    add_adapters(model, LoraSettings(rank=4, alpha=8.0, dropout=0.0, targets=None), "tiny")
    padded, packed = _padded_and_packed(model, batch, attention)
    assert any(".lora_" in name for name in padded[2])  # the adapters' gradients are compared too
    _assert_equal(padded, packed)


def test_the_packed_row_is_a_multiple_of_the_shape_bucket_and_spare_tokens_change_nothing(tmp_path):
    """Spare tokens make the packed length repeat from batch to batch (oneDNN's kernels are per shape);
    no row attends to them, and the equality tests above run with them."""
    from bertkit.networks.packed import SHAPE_BUCKET, Packing, packed_inputs

    model, batch = _model_and_batch("bert", "cls", tmp_path)
    packing = Packing.of(batch["attention_mask"])
    real = int(batch["attention_mask"].sum())
    assert packing.total % SHAPE_BUCKET == 0 and real < packing.total < real + SHAPE_BUCKET
    inputs = packed_inputs(model.config, packing, batch["input_ids"])
    assert inputs["input_ids"].shape == inputs["position_ids"].shape == (1, packing.total)
    assert (inputs["input_ids"][0, real:] == model.config.pad_token_id).all()
