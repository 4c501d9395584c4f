"""CPU training kernels (bertkit.engine.cpu_kernels): the faster paths must keep the model's numbers and
training semantics. The fp32 masters, their gradients and the clip: test_master_weights.py."""

from __future__ import annotations

import math

import pytest
import torch
from test_master_weights import without_dropout
from tiny_models import FAMILIES, build_family
from transformers import AutoModelForSequenceClassification

from bertkit.engine.cpu_kernels import (
    ATTENTION,
    CpuTrainingKernels,
    FastDropout,
    dropout_multiplier,
    keep_threshold,
    masked_softmax,
    random_words,
    vector_elements,
)


def test_keep_threshold_by_hand():
    # p = 0.1: round(0.1 x 65536) = 6554 of the 65536 int16 values are dropped: those below -32768 + 6554
    threshold, scale = keep_threshold(0.1)
    assert threshold == -26214 and scale == pytest.approx(65536 / 58982)
    assert keep_threshold(0.5) == (0, 2.0)


def keep_mask(shape, p=0.1):
    return dropout_multiplier(torch.Size(shape), p, torch.float32) != 0


def test_fast_dropout_rate_scale_gradient_and_seed():
    torch.manual_seed(3)
    keep = keep_mask([2000, 2000])
    dropped = 1 - keep.float().mean().item()
    expected = 6554 / 65536
    assert abs(dropped - expected) < 5 * math.sqrt(expected * (1 - expected) / keep.numel())
    # kept values scaled by 1 / keep probability; the gradient is the same mask and scale
    _, scale = keep_threshold(0.1)
    x = torch.full((300, 300), 2.0, requires_grad=True)
    torch.manual_seed(5)
    y = FastDropout(0.1)(x)
    values = torch.unique(y).tolist()
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(2.0 * scale)
    y.sum().backward()
    assert torch.equal(x.grad, y.detach() / 2.0)
    torch.manual_seed(5)
    assert torch.equal(FastDropout(0.1)(x), y)  # the default generator: set_seed repeats it
    assert torch.equal(FastDropout(0.1).eval()(x), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_multiplier_is_the_scale_in_the_dtype_or_zero_on_the_same_mask(dtype, p):
    """The multiplier holds 0.0 or the scale rounded to the input's dtype, as torch's own dropout
    rounds it (bf16 1/0.9 -> 1.109375), on the elements the int16 numbers keep, whatever the dtype."""
    threshold, scale = keep_threshold(p)
    torch.manual_seed(11)
    multiplier = dropout_multiplier(torch.Size([64, 33]), p, dtype)
    torch.manual_seed(11)  # the same draw, read as the int16 numbers the mask is cut from
    bits = random_words((64 * 33 + 3) // 4).view(torch.int16)[: 64 * 33].view(64, 33)
    assert multiplier.dtype == dtype
    assert torch.equal(multiplier != 0, bits >= threshold)
    assert set(multiplier.unique().tolist()) == {0.0, torch.tensor(scale, dtype=dtype).item()}
    if dtype is torch.bfloat16 and p == 0.1:
        assert multiplier.max().item() == 1.109375 == torch.nn.functional.dropout(torch.ones(9, dtype=dtype), 0.1).max()


def test_a_rate_too_small_to_drop_keeps_everything_and_one_near_one_keeps_a_sliver():
    assert torch.equal(dropout_multiplier(torch.Size([5]), 1e-6, torch.bfloat16), torch.ones(5, dtype=torch.bfloat16))
    threshold, scale = keep_threshold(1 - 1e-7)
    assert threshold == 32767 and scale == 65536.0


def test_masks_follow_torchs_default_generator_and_its_saved_state():
    """Each mask's numpy generator is seeded from torch's default one: set_seed and a restored RNG state
    (checkpoints, a recomputed forward) repeat it; the next draw is a new mask."""
    torch.manual_seed(7)
    keep = keep_mask([512, 512])
    state = torch.get_rng_state()
    following = keep_mask([512, 512])
    torch.manual_seed(7)
    again = keep_mask([512, 512])
    torch.set_rng_state(state)
    replayed = keep_mask([512, 512])
    torch.manual_seed(8)
    other_seed = keep_mask([512, 512])
    assert torch.equal(keep, again) and torch.equal(following, replayed)
    assert not torch.equal(keep, following) and not torch.equal(keep, other_seed)
    assert not torch.equal(keep[:256], keep[256:])
    # every 16-bit quarter of a word is uniform: each column of 4 (one quarter) drops at the rate
    expected = 6554 / 65536
    for quarter in range(4):
        part = keep.reshape(-1, 4)[:, quarter]
        dropped = 1 - part.float().mean().item()
        assert abs(dropped - expected) < 5 * math.sqrt(expected * (1 - expected) / part.numel())


def _reference_softmax(scores, mask):
    wide = scores.double() if mask is None else scores.double() + mask.double()
    return torch.softmax(wide, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("keys", [3, 5, 13, 21, 40])
@pytest.mark.parametrize("mask_kind", ["none", "keys", "broadcast"])
def test_masked_softmax_is_the_softmax_below_and_above_one_vector(dtype, keys, mask_kind):
    """Rows shorter than one vector are padded with keys nobody sees: the probabilities and their
    gradients are the plain softmax's (3 and 5 keys are under one vector on AVX2 too, 13 and 21 on
    AVX-512; 40 is never padded). A padding key that got a probability (padded with 0, not the lowest
    value) would take mass from the real ones and fail this."""
    torch.manual_seed(keys)
    scores = (torch.randn(4, 2, 6, keys) * 3).to(dtype).requires_grad_()
    lowest = torch.finfo(dtype).min
    hidden = torch.zeros(4, 1, 1, keys, dtype=dtype)
    hidden[1, ..., keys // 2 :] = lowest  # a row with padding
    mask = {"none": None, "keys": hidden, "broadcast": hidden[..., :1].expand(4, 1, 6, 1)}[mask_kind]
    probabilities = masked_softmax(scores, mask)
    expected = _reference_softmax(scores, mask)
    tolerance = 1e-6 if dtype == torch.float32 else 8e-3
    assert probabilities.shape == scores.shape
    assert torch.allclose(probabilities.double(), expected, atol=tolerance)
    weights = torch.randn(scores.shape, dtype=torch.float64)
    (probabilities.double() * weights).sum().backward()
    ours = scores.grad.clone()
    scores.grad = None
    (_reference_softmax(scores, mask) * weights).sum().backward()
    assert torch.allclose(ours.double(), scores.grad.double(), atol=10 * tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_short_rows_reach_the_softmax_padded_to_one_vector_and_long_rows_as_they_are(dtype, monkeypatch):
    """The equality above holds with or without padding; this checks the padding happens: a row under
    one vector (64 bytes on AVX-512, 32 on AVX2) reaches torch.softmax one vector wide, a longer one
    unchanged, and a CPU whose vectors were not measured gets no padding."""
    register = {"AVX512": 64, "AVX2": 32}.get(torch.backends.cpu.get_cpu_capability(), 0)
    vector = register // dtype.itemsize
    widths, softmax = [], torch.softmax
    monkeypatch.setattr(torch, "softmax", lambda x, dim: widths.append(x.shape[-1]) or softmax(x, dim))
    for keys in (3, 40):
        masked_softmax(torch.randn(2, 1, 4, keys).to(dtype), None)
    assert vector_elements(dtype) == vector
    assert widths == [vector if 3 < vector else 3, 40]


def test_kernels_keep_eval_outputs_and_undo_everything(tiny_bert):
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2).eval()
    ids = torch.randint(5, 30, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask).logits
        kernels = CpuTrainingKernels(model)
        kernels.apply()
        assert model.config._attn_implementation == ATTENTION
        assert sum(type(m) is FastDropout for m in model.modules()) == 2 * 3 + 2  # 3 per layer, embeddings, head
        during = model(input_ids=ids, attention_mask=mask).logits
        kernels.undo()
    assert torch.allclose(before, during, atol=1e-6)
    assert model.config._attn_implementation == "sdpa"
    assert not any(type(m) is FastDropout for m in model.modules())


def test_kernels_train_a_step_like_the_stock_model(tiny_bert):
    """Without dropout the fast attention's gradients are the stock model's."""
    grads = []
    for fast in (False, True):
        torch.manual_seed(0)
        model = without_dropout(tiny_bert)
        if fast:
            CpuTrainingKernels(model).apply()
        ids = torch.randint(5, 30, (4, 7))
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([0, 1, 1, 0])).loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for stock, fast in zip(*grads):
        assert torch.allclose(stock, fast, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_kernels_on_every_family_keep_outputs_and_undo(family, tmp_path):
    """BERT, RoBERTa, ELECTRA, ALBERT and DistilBERT get the fast attention; every family gets FastDropout; evaluation
    outputs are unchanged and undo() gives the model back as it was."""
    model = AutoModelForSequenceClassification.from_pretrained(
        str(build_family(family, tmp_path / family)), num_labels=2
    ).eval()
    before_attention = model.config._attn_implementation
    ids = torch.randint(5, 20, (2, 7))
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        kernels = CpuTrainingKernels(model)
        kernels.apply()
        assert (model.config._attn_implementation == ATTENTION) == (
            model.config.model_type in ("bert", "roberta", "electra", "albert", "distilbert")
        )
        assert any(type(m) is FastDropout for m in model.modules())
        during = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        kernels.undo()
    assert torch.allclose(before, during, atol=1e-5)
    assert model.config._attn_implementation == before_attention
    assert not any(type(m) is FastDropout for m in model.modules())


def test_kernels_do_nothing_off_the_cpu(tiny_bert):
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2)
    kernels = CpuTrainingKernels(model, enabled=False)
    kernels.apply()
    assert model.config._attn_implementation == "sdpa" and not any(type(m) is FastDropout for m in model.modules())


@pytest.mark.parametrize("wrapper", ["loss", "distillation", "listwise", "bi-encoder", "setfit"])
def test_every_training_wrapper_passes_the_cpu_attention_to_its_model(wrapper, tiny_bert):
    """A task that wraps its model (class weights or focal loss, distillation, a listwise reranker,
    a bi-encoder, SetFit's body) trains with the same CPU attention as a bare model, and gets SDPA
    back for evaluation."""
    from transformers import AutoModel

    from bertkit.networks.bi_encoder import BiEncoderTrainer
    from bertkit.networks.contrastive import CosineSimilarityTrainer
    from bertkit.networks.distillation import DistillationLoss
    from bertkit.networks.listwise import ListwiseTrainer
    from bertkit.networks.losses import TrainingLoss
    from bertkit.tasks.training_spec import EmbeddingLoss

    if wrapper in ("loss", "distillation", "listwise"):
        inner = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2)
        wrappers = {
            "loss": lambda: TrainingLoss(inner, "class", [1.0, 2.0]),
            "listwise": lambda: ListwiseTrainer(inner),
        }
        model = wrappers.get(wrapper, lambda: DistillationLoss(inner, 2.0, 0.5))()
    else:
        inner = AutoModel.from_pretrained(str(tiny_bert))
        model = BiEncoderTrainer(inner, EmbeddingLoss()) if wrapper == "bi-encoder" else CosineSimilarityTrainer(inner)
    assert model.config is inner.config and model.get_input_embeddings() is inner.get_input_embeddings()
    kernels = CpuTrainingKernels(model)
    kernels.apply()
    assert inner.config._attn_implementation == ATTENTION
    kernels.undo()
    assert inner.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_a_no_grad_pass_in_training_drops_what_its_replay_with_gradients_drops(packed, tiny_bert):
    """GradCache embeds under no_grad in training mode, then replays each chunk with gradients from the
    same random state (networks/bi_encoder.py): both passes must drop the same attention probabilities
    (SDPA, which drops nothing without gradients here, is for prediction only)."""
    from transformers import AutoModel

    from bertkit.networks.bi_encoder import rng_state, set_rng_state
    from bertkit.networks.packed import packed_mean

    model = AutoModel.from_pretrained(tiny_bert, attn_implementation="sdpa", attention_probs_dropout_prob=0.5)
    CpuTrainingKernels(model.train()).apply()
    torch.manual_seed(0)
    mask = (torch.arange(9)[None, :] < torch.tensor([9, 4, 7, 2])[:, None]).long()
    inputs = {"input_ids": torch.randint(5, 30, (4, 9)) * mask, "attention_mask": mask}

    def embed():
        return packed_mean(model, inputs) if packed else model(**inputs).last_hidden_state[mask.bool()]

    state = rng_state()
    with torch.no_grad():
        first = embed()
    set_rng_state(state)
    replayed = embed()
    assert replayed.requires_grad
    assert torch.allclose(first, replayed.detach(), atol=1e-6)
    with torch.no_grad():
        model.eval()
        undropped = embed()
    assert not torch.allclose(first, undropped, atol=1e-3)  # the attention dropout did drop
