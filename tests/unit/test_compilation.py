"""--compile (bertkit/engine/compilation.py): when auto compiles, what on refuses, and that a
compiled layer stack trains as eager does without compiling again at every new length."""

from __future__ import annotations

import pytest

from bertkit.engine import compilation
from bertkit.engine.compilation import MEASURED_STEPS, START_STEP, CompiledLayers, worth_compiling
from bertkit.errors import BertkitError


def test_auto_compiles_a_run_long_enough_to_pay_back_the_compile_time():
    cuda = compilation.PAYBACK["cuda"]
    pays = cuda.cold_seconds / (0.3 * cuda.saving)  # steps of 0.3 s that save exactly the compile time
    assert worth_compiling("cuda", int(pays * 1.2), 0.3, warm=False)[0]
    short, line = worth_compiling("cuda", int(pays * 0.8), 0.3, warm=False)
    assert not short and line.startswith("--compile auto: not compiling") and "not cached" in line
    # a cached model costs less to compile: the same short run compiles
    assert worth_compiling("cuda", int(pays * 0.8), 0.3, warm=True)[0]
    assert not worth_compiling("mps", 10**6, 1.0, warm=True)[0]  # no payback known: eager


def test_auto_never_compiles_on_the_cpu_where_compiled_steps_were_measured_slower():
    assert compilation.PAYBACK["cpu"].saving < 0
    on, line = worth_compiling("cpu", 10**7, 1.0, warm=True)
    assert not on and "measured slower on the cpu" in line and "compile_run.md" in line


def test_the_cache_is_the_users_variable_or_under_their_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(compilation, "_GIVEN_CACHE", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compilation.cache_directory() == tmp_path / "bertkit" / "torch-compile"
    monkeypatch.setattr(compilation, "_GIVEN_CACHE", "/somewhere")
    assert str(compilation.cache_directory()) == "/somewhere"


class _Stack:
    _call_impl = None


def _layers(mode, why_not=None, said=None, tmp_path=None):
    layers = CompiledLayers(_Stack(), mode, "cuda", "key", why_not, (said if said is not None else []).append)
    if tmp_path is not None:
        layers.marker = tmp_path / "marker"
    return layers


@pytest.mark.parametrize("seconds,total,compiles", [(0.3, 20_000, True), (0.3, 200, False)])
def test_auto_times_its_steps_then_decides_once(seconds, total, compiles, monkeypatch, tmp_path):
    """On a device whose compiled steps pay (CUDA's payback)."""
    clock = [0.0]
    monkeypatch.setattr(compilation.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(CompiledLayers, "_turn_on", lambda self, line: setattr(self, "compiled", "graph"))
    said = []
    layers = _layers("auto", said=said, tmp_path=tmp_path)
    for step in range(1, START_STEP + MEASURED_STEPS + 5):
        clock[0] += 5.0 if step < START_STEP else seconds  # slow first steps are not timed
        layers.after_step(step, total)
    assert layers.facts["decided_at"] == START_STEP + MEASURED_STEPS
    assert layers.facts["eager_step_seconds"] == pytest.approx(seconds)
    assert (layers.compiled == "graph") == compiles
    assert layers.active == compiles  # compiled from the next step on
    assert not said  # compiling is said by _turn_on (patched here); not compiling is only recorded
    assert ("why_not" in layers.facts) != compiles
    if compiles:
        assert layers.facts["first_step_seconds"] == pytest.approx(seconds)  # timed from apply()
        assert layers.marker.exists()  # the next run counts as cached


def test_on_where_untested_is_refused_in_one_line_and_auto_stays_off():
    with pytest.raises(BertkitError) as refused:
        _layers("on", why_not="not with --lora (untested compiled)")
    (line,) = str(refused.value).splitlines()
    assert line.startswith("--compile on: not with --lora (untested compiled)") and "--compile auto or off" in line
    layers = _layers("auto", why_not="not with --lora (untested compiled)")
    assert layers.mode == "off" and layers.facts["why_not"].startswith("not with --lora")
    for step in range(40):
        layers.after_step(step, 10**6)
    assert layers.compiled is None


def test_off_never_compiles():
    layers = _layers("off")
    for step in range(40):
        layers.after_step(step, 10**9)
    layers.apply()
    assert layers.compiled is None and not layers.active and layers.facts == {"mode": "off", "compiled": False}


def _tiny_classifier(tiny_bert):
    pytest.importorskip("torch")
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(tiny_bert), num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    return model.train()


@pytest.mark.parametrize(
    "config,world,why",
    [
        ({"save_memory": True}, 1, "--save-memory"),
        ({"lora": 8}, 1, "--lora"),
        ({}, 2, "several processes"),
    ],
)
def test_what_compile_on_refuses(config, world, why, tiny_bert):
    from types import SimpleNamespace

    model = _tiny_classifier(tiny_bert)
    with pytest.raises(BertkitError, match=why):
        compilation.compiled_layers(model, SimpleNamespace(compile="on", **config), world, "cpu", "no", print)
    auto = compilation.compiled_layers(model, SimpleNamespace(compile="auto", **config), world, "cpu", "no", print)
    assert auto.mode == "off" and why in auto.facts["why_not"]


def test_a_bare_encoder_and_a_packed_one_are_not_compiled(tiny_bert):
    from types import SimpleNamespace

    from transformers import AutoModel

    from bertkit.engine.cpu_kernels import CpuTrainingKernels
    from bertkit.networks.packed_heads import pack_encoder, unpack_encoder

    bare = AutoModel.from_pretrained(str(tiny_bert))
    with pytest.raises(BertkitError, match="one task head's encoder layers only"):
        compilation.compiled_layers(bare, SimpleNamespace(compile="on"), 1, "cpu", "no", print)
    model = _tiny_classifier(tiny_bert)
    CpuTrainingKernels(model).apply()
    assert pack_encoder(model)
    with pytest.raises(BertkitError, match="packed batches"):
        compilation.compiled_layers(model, SimpleNamespace(compile="on"), 1, "cpu", "no", print)
    unpack_encoder(model)


def test_compiled_layers_train_as_eager_and_compile_once_for_every_length(tiny_bert, monkeypatch, tmp_path):
    """aot_eager: dynamo's graphs and AOT autograd without building C++ (inductor is measured in
    benchmarks/compile_run.py). Lengths 6..21 in turn: one graph with a symbolic length, not one each."""
    from types import SimpleNamespace

    pytest.importorskip("torch")
    import torch
    import torch._dynamo

    monkeypatch.setattr(compilation, "BACKEND", "aot_eager")
    monkeypatch.setattr(compilation, "_GIVEN_CACHE", str(tmp_path))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    eager, compiled = _tiny_classifier(tiny_bert), _tiny_classifier(tiny_bert)
    layers = compilation.compiled_layers(compiled, SimpleNamespace(compile="on"), 1, "cpu", "no", print)
    layers.apply()
    generator = torch.Generator().manual_seed(1)
    for length in range(6, 22):
        ids = torch.randint(5, 60, (4, length), generator=generator)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1, 1, 0])}
        losses = []
        for model in (eager, compiled):
            model.zero_grad()
            loss = model(**batch).loss
            loss.backward()
            losses.append(loss.detach())
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad
        assert torch.allclose(losses[0], losses[1], atol=1e-5), length
    layers.undo()
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters()):
        assert torch.allclose(a, b, atol=1e-5), name
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 3  # 16 lengths; static shapes: 16
    assert compiled.bert.encoder._compiled_call_impl is None  # undo: the stack's own call again
    torch._dynamo.reset()
