"""bf16 training's fp32 masters (bertkit.engine.master_weights.MasterWeights) and the step around them
(engine/optimisation.py): sparse word-embedding gradients, gradients taken as the backward pass makes
them, the flat norm and the clip folded into AdamW must give the numbers of the plain way."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

from bertkit.engine import parameter_groups
from bertkit.engine.master_weights import MasterWeights


def without_dropout(tiny_bert):
    """The tiny classifier in training mode with no dropout: its steps are deterministic."""
    return AutoModelForSequenceClassification.from_pretrained(
        str(tiny_bert), num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    ).train()


EMBEDDING = "bert.embeddings.word_embeddings.weight"


def _train(tiny_bert, sparse: bool, batches: list) -> tuple[list, list, MasterWeights]:
    torch.manual_seed(0)
    model = without_dropout(tiny_bert)
    master = MasterWeights(model, parameter_groups(model, 0.01), sparse_embeddings=sparse)
    optimizer = torch.optim.AdamW(master.groups, lr=1e-2)
    embedding_grads, norms = [], []
    for step in batches:
        for ids in step:  # several micro-batches: accumulated in fp32
            model(
                input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.zeros(len(ids), dtype=torch.long)
            ).loss.backward()
            master.accumulate()
        embedding_grads.append(master.gradient(EMBEDDING).clone())
        norms.append(float(master.clip_(0.5)))  # clipped: the rows scaled must be the dense path's
        optimizer.step()
        master.publish()
    return embedding_grads, norms, master


def test_sparse_embedding_gradients_equal_the_dense_ones(tiny_bert):
    # step 2 uses other tokens than step 1: the rows step 1 wrote must be zero again
    batches = [
        [torch.tensor([[2, 5, 6, 5, 3]]), torch.tensor([[2, 7, 5, 3, 0]])],
        [torch.tensor([[2, 9, 10, 3, 0]])],
        [torch.tensor([[2, 5, 11, 3, 0]])],
    ]
    dense_grads, dense_norms, dense = _train(tiny_bert, False, batches)
    sparse_grads, sparse_norms, sparse = _train(tiny_bert, True, batches)
    assert sparse_norms == pytest.approx(dense_norms, rel=1e-2) and max(dense_norms) > 0.5
    assert sparse.sparse_module is not None and dense.sparse_module is None
    # the dense path sums repeated rows in bf16, the sparse one in fp32: equal to bf16 precision
    for d, s in zip(dense_grads, sparse_grads):
        assert torch.equal(d != 0, s != 0)
        assert torch.allclose(d, s, rtol=2e-2, atol=1e-3 * d.abs().max().item())
    assert sparse_grads[1][5].abs().sum() == 0 and sparse_grads[1][9].abs().sum() > 0
    for name in dense.names:
        # AdamW saw the same dense gradient, zeros included
        assert torch.allclose(dense.master(name), sparse.master(name), atol=1e-3), name


def test_tied_embeddings_stay_dense(tiny_bert):
    model = AutoModelForMaskedLM.from_pretrained(str(tiny_bert))
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        pytest.skip("this config does not tie the LM head to the embeddings")
    master = MasterWeights(model, parameter_groups(model, 0.01), sparse_embeddings=True)
    assert master.sparse_module is None and not model.get_input_embeddings().sparse


@pytest.mark.parametrize("on_device", [False, True])
def test_flat_clip_equals_torch_clip_grad_norm(tiny_bert, on_device):
    """Clipping one flat buffer per group (and the embedding's written rows) = clip_grad_norm_;
    ``on_device``: the GPU's path (no value read back: the norm a tensor, the scale unconditional),
    run here on the CPU."""
    for sparse in (False, True):
        torch.manual_seed(1)
        model = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2).train()
        reference = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2).train()
        reference.load_state_dict(model.state_dict())
        master = MasterWeights(model, parameter_groups(model, 0.01), sparse_embeddings=sparse)
        assert not master.on_device
        master.on_device = on_device
        reference.to(torch.bfloat16)  # the same bf16 forward as the model's
        ids = torch.randint(5, 30, (4, 6))
        labels = torch.tensor([0, 1, 1, 0])
        torch.manual_seed(2)
        model(input_ids=ids, labels=labels).loss.backward()
        torch.manual_seed(2)
        reference(input_ids=ids, labels=labels).loss.backward()
        master.accumulate()
        grads = {n: p.grad.float() for n, p in reference.named_parameters() if p.grad is not None}
        expected_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads.values()]))
        coef = min(1.0, 0.01 / (float(expected_norm) + 1e-6))  # clip_grad_norm_'s rule
        grads = {n: g * coef for n, g in grads.items()}
        assert coef < 1
        assert float(master.clip_(0.01)) == pytest.approx(float(expected_norm), rel=1e-2)
        for name in master.names + ([EMBEDDING] if sparse else []):
            assert torch.allclose(master.gradient(name), grads[name], rtol=2e-2, atol=1e-5), name


def _micro_batches(master: MasterWeights, model, steps: list) -> list[dict]:
    """Each step's fp32 gradients (micro-batches accumulated), through the masters."""
    seen = []
    for step in steps:
        for ids, labels in step:
            model(input_ids=ids, labels=labels).loss.backward()
            master.accumulate()
        seen.append({name: master.gradient(name).clone() for name in master.names})
        master.publish()
    return seen


def test_early_gradients_equal_the_ones_copied_after_the_backward_pass(tiny_bert):
    """Copied into the fp32 views as the backward pass makes them (hooks) or after it: the same
    gradients, over accumulated micro-batches and across steps; an unused weight's are zeros, not
    last step's; the model given back keeps its own gradients."""
    grads = {}
    for early in (False, True):
        torch.manual_seed(0)
        model = without_dropout(tiny_bert)
        master = MasterWeights(model, parameter_groups(model, 0.01), sparse_embeddings=True, early_gradients=early)
        ids = torch.randint(5, 30, (4, 6))
        step = [(ids, torch.tensor([0, 1, 1, 0])), (ids.flip(0), torch.tensor([1, 1, 0, 0]))]
        grads[early] = _micro_batches(master, model, [step, step[:1]])
        # no loss through the pooler at the third step: its gradient must be zeros
        model.bert(input_ids=ids).last_hidden_state.float().pow(2).mean().backward()
        if early:
            assert all(p.grad is None for p in master.params)  # taken as they came
        master.accumulate()
        grads[early].append({name: master.gradient(name).clone() for name in master.names})
        master.publish()
        assert float(grads[early][2]["bert.pooler.dense.weight"].abs().sum()) == 0.0
        returned = master.to_fp32(model)
        returned(input_ids=ids, labels=torch.tensor([0, 1, 1, 0])).loss.backward()
        assert returned.classifier.weight.grad is not None  # no hook left behind
    for before, after in zip(grads[False], grads[True]):
        for name in before:
            assert torch.equal(before[name], after[name]), name
    assert grads[True][0]["classifier.weight"].abs().sum() > 0


def test_a_weight_reached_twice_in_one_backward_gets_both_gradients(tiny_bert):
    """A weight whose gradient arrives twice before accumulate() (ALBERT's shared layer in checkpointed
    segments): the fp32 sum of both bf16 gradients (where ``.grad`` would have summed them in bf16)."""
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2).eval()
    model.to(torch.bfloat16)  # as MasterWeights leaves it
    ids = torch.randint(5, 30, (2, 5))
    pieces = []
    for factor in (1, 3):  # each gradient alone, in bf16, as the backward pass makes it
        (model(input_ids=ids, labels=torch.tensor([0, 1])).loss * factor).backward()
        pieces.append(model.classifier.weight.grad.clone())
        model.zero_grad(set_to_none=True)
    master = MasterWeights(model, parameter_groups(model, 0.01), early_gradients=True)
    loss = model(input_ids=ids, labels=torch.tensor([0, 1])).loss
    loss.backward(retain_graph=True)
    (loss * 3).backward()
    master.accumulate()
    assert pieces[0].dtype == torch.bfloat16
    assert torch.equal(master.gradient("classifier.weight"), pieces[0].float() + pieces[1].float())


@pytest.mark.parametrize("lazy", [False, True])
def test_the_step_clips_inside_adamw_as_clipping_first_would(tiny_bert, lazy):
    """Optimisation on a CPU folds the clip into the fused AdamW step (``grad_scale``): the same
    masters, step after step, as scaling the gradients before it; the norm before clipping returned;
    nothing left on the optimizer for the next step."""
    from types import SimpleNamespace

    from bertkit.engine.optimisation import Optimisation

    config = SimpleNamespace(
        weight_decay=0.01, lr=1e-3, layer_decay=None, lazy_embeddings=lazy, max_grad_norm=0.05, warmup_ratio=0.0
    )

    class Wrapped:  # as Accelerate's optimizer wrapper: the torch optimizer inside
        def __init__(self, optimizer):
            self.optimizer, self.step_was_skipped = optimizer, False

        def step(self):
            self.optimizer.step()

        def zero_grad(self, set_to_none=True):
            self.optimizer.zero_grad(set_to_none=set_to_none)

    acc = SimpleNamespace(
        device=torch.device("cpu"), num_processes=1, prepare=lambda m, o: (m, Wrapped(o)), unwrap_model=lambda m: m
    )
    runs = []
    for folded in (True, False):
        torch.manual_seed(0)
        model = without_dropout(tiny_bert)
        optimisation = Optimisation(model, config, total_steps=10, acc=acc, bf16=True)
        model = optimisation.prepare(model)
        if not folded:  # the reference: the gradients scaled in a pass of their own, then the step
            optimisation._clip = lambda o=optimisation: o.master.clip_(o.max_grad_norm)
        norms = []
        for step in range(3):
            generator = torch.Generator().manual_seed(step)
            ids = torch.randint(5, 30, (4, 6), generator=generator)
            model(input_ids=ids, labels=torch.randint(0, 2, (4,), generator=generator)).loss.backward()
            optimisation.accumulate(sync=True)
            norms.append(float(optimisation.step(want_norm=True)[0]))
            assert getattr(optimisation.optimizer.optimizer, "grad_scale", None) is None
        runs.append((optimisation.weights(), norms))
    (folded, folded_norms), (reference, reference_norms) = runs
    assert min(reference_norms) > config.max_grad_norm  # every step clipped
    assert folded_norms == pytest.approx(reference_norms, rel=1e-4)
    for name in reference:
        torch.testing.assert_close(folded[name], reference[name], rtol=1e-5, atol=1e-6)


def test_the_gradient_norm_is_the_float64_norm_of_every_gradient(tiny_bert):
    """The CPU norm (dot products over the flat fp32 buffers and the embedding's written rows) equals
    the float64 norm of all the gradients to float32 precision, on values spread over six decades."""
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert), num_labels=2).train()
    master = MasterWeights(model, parameter_groups(model, 0.01), sparse_embeddings=True)
    model(input_ids=torch.randint(5, 30, (4, 6)), labels=torch.tensor([0, 1, 1, 0])).loss.backward()
    master.accumulate()
    generator = torch.Generator().manual_seed(3)
    for _, grad in master.flats:
        grad.copy_(
            torch.randn(grad.shape, generator=generator) * 10 ** torch.randint(-3, 3, grad.shape, generator=generator)
        )
    rows = master._sparse_rows()
    every = [grad for _, grad in master.flats] + [master.sparse[2].index_select(0, rows)]
    expected = torch.cat([g.reshape(-1).double() for g in every]).norm()
    assert float(master.grad_norm()) == pytest.approx(float(expected), rel=2e-6)
    assert len(rows) < master.sparse[2].shape[0]  # the unwritten rows are not read (they are zeros anyway)
