"""The variable-length attention a packed encoder uses on CUDA (engine/varlen_attention.py), run here
on the CPU through SDPA's math kernel on jagged rows. Equality with the padded batch for every head
and family is in test_packed_heads.py; here: what the attention itself does and when it is chosen."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from bertkit.engine.cpu_kernels import CpuTrainingKernels  # noqa: E402
from bertkit.engine.varlen_attention import training_kernels, varlen_attention  # noqa: E402
from bertkit.networks.packed import PACKING, VARLEN_ATTENTION, Packing  # noqa: E402

HEADS, DIM = 2, 8


def _packed_qkv(lengths: list[int], seed: int = 0):
    """A right-padded batch's mask and packed q/k/v of shape (1, heads, total, d), as a layer gives them."""
    torch.manual_seed(seed)
    longest = max(lengths)
    mask = torch.tensor([[1] * n + [0] * (longest - n) for n in lengths])
    packing = Packing.of(mask)
    qkv = [torch.randn(1, HEADS, packing.total, DIM) for _ in range(3)]
    return packing, qkv


def _row_by_row(packing: Packing, query, key, value):
    """Each row's tokens alone through plain SDPA: (T, heads, d)."""
    lengths, start, out = packing.keep.sum(1).tolist(), 0, []
    for n in lengths:
        q, k, v = (x[:, :, start : start + n] for x in (query, key, value))
        out.append(torch.nn.functional.scaled_dot_product_attention(q, k, v)[0].transpose(0, 1))
        start += n
    return torch.cat(out)


def test_each_row_attends_to_its_own_tokens_and_the_spare_tokens_stay_zero():
    packing, qkv = _packed_qkv([5, 1, 9, 3])
    module = SimpleNamespace(training=False)
    output, weights = varlen_attention(module, *qkv, None, **{PACKING: packing})
    real = len(packing.index)
    assert output.shape == (1, packing.total, HEADS, DIM) and weights is None
    assert packing.total > real  # the bucket's spare tokens are there to check
    assert torch.allclose(output[0, :real], _row_by_row(packing, *qkv), atol=1e-6)
    assert output[0, real:].abs().max() == 0


def test_attention_dropout_applies_while_training_only():
    packing, qkv = _packed_qkv([7, 4, 6])
    plain = varlen_attention(SimpleNamespace(training=True), *qkv, None, dropout=0.0, **{PACKING: packing})[0]
    evaluating = varlen_attention(SimpleNamespace(training=False), *qkv, None, dropout=0.5, **{PACKING: packing})[0]
    assert torch.equal(evaluating, plain)
    torch.manual_seed(1)
    dropped = varlen_attention(SimpleNamespace(training=True), *qkv, None, dropout=0.5, **{PACKING: packing})[0]
    assert not torch.allclose(dropped, plain, atol=1e-3)
    with torch.no_grad():  # a no-grad pass (an evaluation inside training) drops nothing
        quiet = varlen_attention(SimpleNamespace(training=True), *qkv, None, dropout=0.5, **{PACKING: packing})[0]
    assert torch.allclose(quiet, plain)


def test_a_call_without_a_packing_is_transformers_sdpa():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    torch.manual_seed(0)
    query, key, value = (torch.randn(3, HEADS, 6, DIM) for _ in range(3))
    mask = torch.zeros(3, 1, 1, 6).masked_fill_(torch.tensor([False] * 4 + [True] * 2), torch.finfo(torch.float32).min)
    module = SimpleNamespace(training=False, is_causal=False)
    ours = varlen_attention(module, query, key, value, mask)[0]
    theirs = sdpa_attention_forward(module, query, key, value, mask)[0]
    assert torch.equal(ours, theirs)


def test_the_row_offsets_are_worked_out_once_a_batch():
    packing, qkv = _packed_qkv([3, 5])
    module = SimpleNamespace(training=False)
    varlen_attention(module, *qkv, None, **{PACKING: packing})
    offsets, longest = packing.plans["varlen"]
    assert offsets.tolist() == [0, 3, 8] and longest == 5
    varlen_attention(module, *qkv, None, **{PACKING: packing})  # the next layer: the same offsets, not new ones
    assert packing.plans["varlen"][0] is offsets


def test_the_training_loop_picks_the_cpu_kernels_on_a_cpu_and_varlen_on_cuda_under_packing_on(tiny_bert):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2, attn_implementation="sdpa")
    assert isinstance(training_kernels(model, "cpu", "on"), CpuTrainingKernels)
    chosen = {
        (device, packing): training_kernels(model, device, packing).enabled
        for device in ("cuda", "mps")
        for packing in ("auto", "on", "off")
    }
    assert chosen == {(d, p): d == "cuda" and p == "on" for d in ("cuda", "mps") for p in ("auto", "on", "off")}
    kernels = training_kernels(model, "cuda", "on")
    kernels.apply()
    assert model.config._attn_implementation == VARLEN_ATTENTION
    kernels.undo()
    assert model.config._attn_implementation == "sdpa"
    nothing = training_kernels(model, "cuda", "auto")
    nothing.apply()
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("kernel", ["flash", "efficient"])
def test_the_cuda_kernels_get_the_packed_rows_as_their_schemas_ask(kernel, monkeypatch):
    """No GPU here: torch's two variable-length kernels are replaced by stand-ins that check what they
    are given against their schemas (aten::_flash_attention_forward, aten::_efficient_attention_forward)
    and answer with each row attended alone; the kernels themselves run in benchmarks/varlen_check.py."""
    from bertkit.engine import varlen_attention as varlen

    packing, qkv = _packed_qkv([5, 1, 9, 3])
    real = len(packing.index)
    query, key, value = (x[0].transpose(0, 1)[:real].requires_grad_() for x in qkv)
    offsets, longest = varlen.row_offsets(packing)
    given = {}

    def rows_alone(q, k, v):
        return _row_by_row(packing, *(x.transpose(0, 1)[None] for x in (q, k, v)))

    def flash(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, is_causal, debug, *, scale=None):
        given.update(shape=q.shape, cu=(cu_q, cu_k), max=(max_q, max_k), dropout=dropout_p, causal=is_causal)
        given.update(scale=scale)
        return rows_alone(q, k, v), None, None, None, None

    def efficient(q, k, v, bias, cu_q, cu_k, max_q, max_k, dropout_p, mask_type, logsumexp, *, scale=None):
        given.update(shape=q.shape, cu=(cu_q, cu_k), max=(max_q, max_k), dropout=dropout_p, causal=mask_type)
        given.update(scale=scale, bias=bias, logsumexp=logsumexp)
        return rows_alone(q[0], k[0], v[0])[None], None, None, None, max_q, max_k

    monkeypatch.setattr(torch.ops.aten, "_flash_attention_forward", flash, raising=False)
    monkeypatch.setattr(torch.ops.aten, "_efficient_attention_forward", efficient, raising=False)
    monkeypatch.setattr(varlen, "_flash_fits", lambda q: kernel == "flash")
    before = dict(varlen.kernel_calls)
    output = varlen._cuda_kernel(query, key, value, offsets, longest, 0.25, 0.1)
    assert varlen.kernel_calls.get(kernel, 0) == before.get(kernel, 0) + 1
    assert output.shape == (real, HEADS, DIM)
    assert torch.allclose(output, _row_by_row(packing, *qkv), atol=1e-6)
    assert given["shape"] == ((real, HEADS, DIM) if kernel == "flash" else (1, real, HEADS, DIM))
    assert all(cu.dtype == torch.int32 and cu.tolist() == [0, 5, 6, 15, 18] for cu in given["cu"])
    assert given["max"] == (9, 9) and given["dropout"] == 0.1 and given["scale"] == 0.25
    assert given["causal"] in (False, 0)  # bidirectional: False for flash, mask type 0 for efficient
    if kernel == "efficient":
        assert given["bias"] is None and given["logsumexp"] is True  # the backward needs the logsumexp


def test_flash_is_chosen_only_where_it_has_kernels(monkeypatch):
    from bertkit.engine import varlen_attention as varlen

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    fits = {
        (dtype, head): varlen._flash_fits(torch.zeros(4, 2, head, dtype=dtype))
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for head in (32, 36, 64, 512)
    }
    assert {key for key, fit in fits.items() if fit} == {
        (dtype, head) for dtype in (torch.float16, torch.bfloat16) for head in (32, 64)
    }
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))  # Turing: no flash
    assert not varlen._flash_fits(torch.zeros(4, 2, 32, dtype=torch.bfloat16))
