"""``--lazy-embeddings`` (engine/lazy_embeddings.py): AdamW's update for the rows a step used,
nothing for the others, against torch's AdamW and a row-by-row reference written out here."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import assert_user_error
from test_cli_classification import write_sentiment_csv

from bertkit.engine.lazy_embeddings import LazyAdamW

BETAS, EPS, LR, DECAY = (0.9, 0.999), 1e-8, 0.01, 0.1


def _pair(rows_per_step):
    torch.manual_seed(0)
    start, dense = torch.randn(6, 3), torch.randn(4)
    lazy_table, lazy_dense = start.clone().requires_grad_(), dense.clone().requires_grad_()
    current = {}
    optimizer = LazyAdamW(
        [{"params": [lazy_table, lazy_dense], "weight_decay": DECAY}],
        lazy_table,
        lambda: current["rows"],
        lr=LR,
        betas=BETAS,
        eps=EPS,
    )
    grads = []
    for step, rows in enumerate(rows_per_step):
        grad = torch.zeros(6, 3)
        picked = torch.arange(6) if rows is None else torch.tensor(rows, dtype=torch.long)
        grad[picked] = torch.randn(len(picked), 3)
        grads.append((grad, torch.randn(4)))
        current["rows"] = None if rows is None else picked
        lazy_table.grad, lazy_dense.grad = grads[-1][0].clone(), grads[-1][1].clone()
        optimizer.step()
    return start, dense, grads, lazy_table.detach(), lazy_dense.detach(), optimizer


def test_rows_used_at_every_step_get_adamws_update():
    start, dense, grads, table, other, _ = _pair([None, None, None])
    reference = [start.clone().requires_grad_(), dense.clone().requires_grad_()]
    adamw = torch.optim.AdamW(
        [{"params": reference, "weight_decay": DECAY}], lr=LR, betas=BETAS, eps=EPS, foreach=False
    )
    for grad, grad_dense in grads:
        reference[0].grad, reference[1].grad = grad, grad_dense
        adamw.step()
    torch.testing.assert_close(table, reference[0].detach(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(other, reference[1].detach(), rtol=0, atol=0)  # the rest: AdamW itself


def test_other_rows_keep_weight_and_moments_and_used_rows_follow_the_global_step():
    steps = [[0, 2], [2], [0, 5]]
    start, _, grads, table, _, optimizer = _pair(steps)
    beta1, beta2 = BETAS
    for row in range(6):
        weight, m, v = start[row].clone(), torch.zeros(3), torch.zeros(3)
        for step, (rows, (grad, _)) in enumerate(zip(steps, grads), start=1):
            if row not in rows:
                continue  # an unused row: no decay, no moment update, no move
            weight *= 1 - LR * DECAY
            m = beta1 * m + (1 - beta1) * grad[row]
            v = beta2 * v + (1 - beta2) * grad[row] ** 2
            weight -= LR / (1 - beta1**step) * m / ((v / (1 - beta2**step)).sqrt() + EPS)
        torch.testing.assert_close(table[row], weight, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(optimizer.state[optimizer.lazy]["exp_avg"][row], m, rtol=1e-6, atol=1e-8)
    assert torch.equal(table[[1, 3, 4]], start[[1, 3, 4]])  # never used: untouched
    assert float(optimizer.state[optimizer.lazy]["step"]) == 3


def test_a_clip_folded_into_the_step_equals_clipping_the_gradients_first():
    """``grad_scale`` (engine/optimisation.clip_in_adamw): the fused kernel divides the dense gradients by
    it and LazyAdamW its rows; the same weights and moments as multiplying the gradients first."""
    torch.manual_seed(0)
    start, dense = torch.randn(6, 3), torch.randn(4)
    sides = []
    for _ in range(2):
        table, other = start.clone().requires_grad_(), dense.clone().requires_grad_()
        current = {}
        optimizer = LazyAdamW(
            [{"params": [table, other], "weight_decay": DECAY}], table, lambda: current["rows"], lr=LR, fused=True
        )
        sides.append((table, other, optimizer, current))
    for rows, coefficient in (([0, 2], 0.3), ([2, 5], 0.05), ([1], 0.7)):
        grad, grad_dense = torch.zeros(6, 3), torch.randn(4)
        grad[rows] = torch.randn(len(rows), 3)
        for folded, (table, other, optimizer, current) in enumerate(sides):
            current["rows"] = torch.tensor(rows)
            if folded:
                table.grad, other.grad = grad.clone(), grad_dense.clone()
                optimizer.grad_scale = torch.tensor(1 / coefficient)
            else:
                table.grad, other.grad = grad * coefficient, grad_dense * coefficient
            optimizer.step()
            optimizer.grad_scale = None
    (table, other, optimizer, _), (table_f, other_f, optimizer_f, _) = sides
    torch.testing.assert_close(table_f, table, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(other_f, other, rtol=1e-6, atol=1e-7)
    for key in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(optimizer_f.state[table_f][key], optimizer.state[table][key], rtol=1e-5, atol=1e-9)
    assert not torch.equal(table, start)


def test_finetune_with_lazy_embeddings_trains_and_leaves_unused_rows(tmp_path, tiny_bert, run_cli):
    from safetensors.torch import load_file

    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 48, seed=1)
    base = (
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        train,
        "--model",
        tiny_bert,
        "--epochs",
        2,
        "--batch-size",
        16,
        "--lr",
        "1e-3",
        "--precision",
        "bf16",
    )
    said = "lazy embeddings: AdamW steps only the embedding rows a batch uses (--no-lazy: all rows)"
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "lazy", "--lazy-embeddings")
    assert code == 0 and said in stdout + stderr, stderr
    assert json.loads((tmp_path / "lazy" / "bertkit.json").read_text())["config"]["lazy_embeddings"] is True
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "dense", "--no-lazy")
    assert code == 0 and "lazy embeddings" not in stdout + stderr, stderr
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "unset")
    assert code == 0 and said in stdout + stderr, stderr
    start = load_file(str(tiny_bert / "model.safetensors"))
    key = next(k for k in start if k.endswith("word_embeddings.weight"))
    lazy, dense, unset = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("lazy", "dense", "unset"))
    # unset: on where it applies (bf16 on a CPU, one process): the lazy run's weights, and said so
    assert all(torch.equal(lazy[k], unset[k]) for k in lazy)
    records = {d: json.loads((tmp_path / d / "bertkit.json").read_text()) for d in ("lazy", "dense", "unset")}
    assert [records[d]["throughput"]["lazy_embeddings"] for d in ("lazy", "dense", "unset")] == [True, False, True]
    assert records["unset"]["config"]["lazy_embeddings"] is None  # a replay decides again, as precision auto does
    lazy_key = next(k for k in lazy if k.endswith("word_embeddings.weight"))
    unchanged = lambda weights: (weights[lazy_key] == start[key]).all(dim=1)  # noqa: E731
    # the sentiment files use a few of the vocabulary's words: lazily, the others stay; AdamW moves every
    # row but the padding row (all zeros, no gradient: decay and moments leave it at zero)
    moved = start[key].abs().sum(dim=1) > 0
    assert 0 < int(unchanged(lazy)[moved].sum()) < int(moved.sum()) and int(unchanged(dense)[moved].sum()) == 0
    assert not torch.equal(lazy[lazy_key], start[key])


def test_fp32_on_a_cpu_trains_lazily_on_weights_that_are_the_masters(tmp_path, tiny_bert, run_cli):
    """fp32 on a CPU: lazy by default (said), the weights themselves are the flat masters; the saved model
    is whole (each tensor its own storage) and loads in transformers; --no-lazy is the dense AdamW."""
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 48, seed=1)
    base = ("finetune", "cls", "--data", train, "--eval-data", train, "--model", tiny_bert, "--epochs", 2)
    base += ("--batch-size", 16, "--lr", "1e-3", "--precision", "no")
    said = "lazy embeddings: AdamW steps only the embedding rows a batch uses (--no-lazy: all rows)"
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "lazy")
    assert code == 0 and said in stdout + stderr, stderr
    code, stdout, stderr = run_cli(*base, "--output", tmp_path / "dense", "--no-lazy")
    assert code == 0 and "lazy embeddings" not in stdout + stderr, stderr
    start = load_file(str(tiny_bert / "model.safetensors"))
    key = next(k for k in start if k.endswith("word_embeddings.weight"))
    lazy, dense = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("lazy", "dense"))
    lazy_key = next(k for k in lazy if k.endswith("word_embeddings.weight"))
    moved = start[key].abs().sum(dim=1) > 0
    unchanged = lambda weights: (weights[lazy_key] == start[key]).all(dim=1)  # noqa: E731
    assert 0 < int(unchanged(lazy)[moved].sum()) < int(moved.sum()) and int(unchanged(dense)[moved].sum()) == 0
    # rows every step used and the dense layers train alike; both learned (not the start weights)
    query = lambda weights: next(v for k, v in weights.items() if k.endswith("0.attention.self.query.weight"))  # noqa: E731
    assert not torch.equal(query(lazy), query(start))
    records = {d: json.loads((tmp_path / d / "bertkit.json").read_text()) for d in ("lazy", "dense")}
    assert [records[d]["throughput"]["lazy_embeddings"] for d in ("lazy", "dense")] == [True, False]
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "lazy"))
    storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    assert len(storages) == len(list(model.parameters()))  # loaded whole, nothing shared
    assert torch.equal(model.get_input_embeddings().weight.detach(), lazy[lazy_key])


def test_lazy_embeddings_without_an_embedding_table_of_their_own_is_one_line(tmp_path, tiny_bert, run_cli):
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 16, seed=1)
    result = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        train,
        "--model",
        tiny_bert,
        "--output",
        tmp_path / "out",
        "--epochs",
        1,
        "--precision",
        "no",
        "--freeze-embeddings",
        "--lazy-embeddings",
    )
    assert_user_error(result, "--lazy-embeddings updates the rows of word embeddings of their own", "drop")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("precision", ["bf16", "no"])
def test_interrupted_lazy_run_resumes_to_the_same_weights(tmp_path, tiny_bert, run_cli, monkeypatch, precision):
    """The lazy rows' moments and step count live in the optimizer's state: a checkpoint keeps them (fp32:
    the weights that are their own masters too)."""
    from safetensors.torch import load_file

    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 48, seed=1)

    def command(name):
        return (
            "finetune",
            "cls",
            "--data",
            train,
            "--eval-data",
            train,
            "--model",
            tiny_bert,
            "--epochs",
            2,
            "--batch-size",
            8,
            "--lr",
            "1e-3",
            "--precision",
            precision,
            "--lazy-embeddings",
            "--save-every",
            4,
            "--output",
            tmp_path / name,
        )

    code, _, stderr = run_cli(*command("reference"))
    assert code == 0, stderr
    monkeypatch.setenv("BERTKIT_TEST_SIGNAL", "INT@step-6")
    code, _, stderr = run_cli(*command("resumed"))
    assert code == 130 and "interrupted: stopped after step 6" in stderr
    monkeypatch.delenv("BERTKIT_TEST_SIGNAL")
    code, stdout, stderr = run_cli(*command("resumed"), "--resume")
    assert code == 0 and stdout.startswith("resumed from"), stderr
    reference, resumed = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("reference", "resumed"))
    assert reference.keys() == resumed.keys() and all(torch.equal(reference[k], resumed[k]) for k in reference)


def test_unset_lazy_embeddings_stay_off_where_they_do_not_apply(tmp_path, tiny_bert, run_cli):
    """Frozen embeddings, LoRA (bf16 and fp32): the dense AdamW, without a word (only a given flag is
    refused)."""
    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 16, seed=1)
    base = ("finetune", "cls", "--data", train, "--eval-data", train, "--model", tiny_bert, "--epochs", 1)
    for name, extra in {
        "frozen": ("--precision", "bf16", "--freeze-embeddings"),
        "frozen fp32": ("--precision", "no", "--freeze-embeddings"),
        "lora fp32": ("--precision", "no", "--lora", 4),
        "lora": ("--precision", "bf16", "--lora", 4),
    }.items():
        code, stdout, stderr = run_cli(*base, *extra, "--output", tmp_path / name)
        assert code == 0 and "lazy embeddings" not in stdout + stderr, (name, stderr)
        record = json.loads((tmp_path / name / "bertkit.json").read_text())
        assert record["throughput"]["lazy_embeddings"] is False, name
