"""--precision auto (native bf16 detection, mocked hardware), bf16 weights with fp32 master weights,
--threads; end to end through the CLI on the tiny random BERT."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import assert_user_error
from test_cli_classification import write_sentiment_csv

from bertkit.engine import precision, threads
from bertkit.engine.master_weights import MasterWeights

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 avx512_vnni
bogomips\t: 4900.00

processor\t: 1
flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 avx512_vnni
"""


@pytest.fixture(autouse=True)
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_isa_cap(monkeypatch):
    """These tests give the CPU's flags themselves: a oneDNN cap in the caller's environment (as when
    the suite runs with ONEDNN_MAX_CPU_ISA=AVX2 to try an AVX2-only CPU's paths) would overrule them;
    test_auto_follows_a_onednn_isa_cap sets its own."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)


def test_cpu_flags_read_from_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    assert "avx512_bf16" in precision.cpu_flags(path) and "fpu" in precision.cpu_flags(path)
    path.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")  # ARM spells the line "Features"
    assert precision.cpu_flags(path) == {"fp", "asimd", "bf16"}
    assert precision.cpu_flags(tmp_path / "missing") == set()


@pytest.mark.parametrize(
    "flags, expected",
    [
        ({"avx512f", "avx512_bf16"}, "bf16"),
        ({"amx_bf16", "amx_tile"}, "bf16"),
        ({"avx512f", "avx2"}, "no"),  # AVX-512 without the bf16 extension: emulated, slower than fp32
        (set(), "no"),
    ],
)
def test_auto_on_cpu_follows_the_flags(flags, expected):
    chosen, reason = precision.resolve("auto", "cpu", flags)
    assert chosen == expected and reason.startswith("auto: ")
    if expected == "bf16":
        assert next(iter(flags & set(precision.BF16_CPU_FLAGS))) in reason


def test_auto_on_gpu_and_tpu(monkeypatch):
    asked = []

    def supported(including_emulation=True):
        asked.append(including_emulation)
        return gpu_has_bf16

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    gpu_has_bf16 = True
    assert precision.resolve("auto", "cuda")[0] == "bf16"
    gpu_has_bf16 = False  # e.g. a V100 or T4: bf16 only emulated
    assert precision.resolve("auto", "cuda")[0] == "no"
    assert asked == [False, False]  # emulation does not count as native
    assert precision.resolve("auto", "xla")[0] == "bf16"
    assert precision.resolve("auto", "mps")[0] == "no"


def test_explicit_precision_is_kept():
    assert precision.resolve("bf16", "cpu", set()) == ("bf16", "asked for")
    assert precision.resolve("no", "cpu", {"avx512_bf16"}) == ("no", "asked for")


def test_engine_resolves_auto_from_the_device(monkeypatch):
    from bertkit.engine import Engine

    if torch.cuda.is_available():  # the GPU decides there, whatever the CPU has
        engine = Engine("auto")
        assert engine.precision == ("bf16" if torch.cuda.is_bf16_supported() else "no")
        assert "GPU" in engine.precision_reason
        return
    monkeypatch.setattr(precision, "cpu_flags", lambda *a: {"avx512_bf16"})
    engine = Engine("auto")
    assert engine.precision == "bf16" and engine.accelerator.mixed_precision == "no"  # bf16 weights, no autocast
    monkeypatch.setattr(precision, "cpu_flags", lambda *a: {"avx2"})
    engine = Engine("auto")
    assert engine.precision == "no" and "neither" in engine.precision_reason


@pytest.mark.parametrize(
    "cap, native", [("AVX2", False), ("avx512_core", False), ("AVX512_CORE_BF16", True), ("AVX10_1_512_AMX", True)]
)
def test_auto_follows_a_onednn_isa_cap(monkeypatch, cap, native):
    """ONEDNN_MAX_CPU_ISA below bf16 instructions: oneDNN emulates bf16 (hundreds of times slower), so
    auto runs fp32 and says why; a cap that keeps them changes nothing."""
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    chosen, reason = precision.resolve("auto", "cpu", {"avx2", "avx512_bf16", "amx_bf16"})
    assert chosen == ("bf16" if native else "no")
    assert ("ONEDNN_MAX_CPU_ISA" in reason) != native
    assert precision.resolve("bf16", "cpu", {"avx2"}) == ("bf16", "asked for")  # asked for: never overridden


def test_master_weights_keep_updates_that_bf16_would_lose():
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    master = MasterWeights(model, [{"params": list(model.parameters())}])
    assert model.weight.dtype == torch.bfloat16 and master.master("weight").dtype == torch.float32
    optimizer = torch.optim.SGD(master.groups, lr=1e-4)
    x = torch.ones(1, 1, dtype=torch.bfloat16)
    for _ in range(100):
        model(x).sum().backward()  # d/dw (w * 1) = 1: each step moves w by -1e-4
        master.accumulate()
        assert model.weight.grad is None and master.gradient("weight").dtype == torch.float32
        optimizer.step()
        master.publish()
    # 1.0 - 100 x 1e-4 = 0.99 (up to fp32 rounding of 100 steps); a bf16 weight could not move at all (its
    # spacing at 1.0 is 2^-7 = 0.0078 > 1e-4); the published bf16 weight is 0.99 rounded: 253 x 2^-8 = 0.98828125.
    assert master.master("weight").item() == pytest.approx(0.99, abs=1e-5)
    assert model.weight.item() == 0.98828125
    assert master.state_dict(model)["weight"].item() == pytest.approx(0.99, abs=1e-5)
    master.to_fp32(model)
    assert model.weight.dtype == torch.float32 and model.weight.item() == pytest.approx(0.99, abs=1e-5)


def test_master_weights_accumulate_micro_batches_in_fp32():
    model = torch.nn.Linear(2, 1)
    master = MasterWeights(model, [{"params": list(model.parameters())}])
    for value in (1.0, 3.0):  # two micro-batches: the weight gradient is the input, the bias gradient 1
        model(torch.full((1, 2), value, dtype=torch.bfloat16)).sum().backward()
        master.accumulate()
    weight_grad, bias_grad = master.gradient("weight"), master.gradient("bias")
    assert weight_grad.tolist() == [[4.0, 4.0]] and bias_grad.tolist() == [2.0]


def test_threads_flag_env_and_busy_notice(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.configure(1, load=0.0, cores=2) == {"threads": 1, "source": "--threads"}
    assert torch.get_num_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.configure(None, load=0.0, cores=2)["source"] == "OMP_NUM_THREADS"
    monkeypatch.delenv("OMP_NUM_THREADS")
    torch.set_num_threads(2)
    # 2 threads while the others' load is 1.4 on 2 cores: 0.6 cores free -> suggest 1 thread
    busy = threads.configure(None, load=1.4, cores=2)
    assert busy["threads"] == 2 and "--threads 1" in busy["notice"]
    assert "notice" not in threads.configure(None, load=0.2, cores=2)  # quiet machine: no advice
    most = 4 * threads.usable_cores()
    for wrong in (0, -1, most + 1, 99999):  # 99999: OpenBLAS aborted the process at that many
        with pytest.raises(Exception, match=f"--threads must be between 1 and {most}"):
            threads.check(wrong, "predict")
    threads.check(most, "predict")
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    with pytest.raises(Exception, match="OMP_NUM_THREADS"):
        threads.check(None, "predict")


def test_cli_auto_precision_printed_and_recorded(tmp_path, tiny_bert, run_cli, monkeypatch):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    write_sentiment_csv(train, 48, seed=1)
    write_sentiment_csv(dev, 16, seed=2)
    monkeypatch.setattr(precision, "cpu_flags", lambda *a: {"avx512f", "avx512_bf16"})
    out = tmp_path / "model"
    code, stdout, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--eval-data",
        dev,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--batch-size",
        16,
        "--threads",
        1,
    )
    assert code == 0, stderr
    reason = "GPU has native bf16" if torch.cuda.is_available() else "CPU has avx512_bf16"  # the GPU decides there
    assert f"precision: bf16 (auto: {reason}), 1 thread" in stderr  # said when chosen, before the work
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["config"]["precision"] == "auto"
    assert meta["runtime"]["precision"] == "bf16" and meta["runtime"]["threads"] == 1
    # the saved weights are the fp32 masters, not their bf16 rounding
    from safetensors.torch import load_file

    weights = load_file(str(out / "model.safetensors"))
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.float32}

    monkeypatch.setattr(precision, "cpu_flags", lambda *a: {"avx2"})
    code, stdout, stderr = run_cli("eval", out)
    assert code == 0, stderr
    if torch.cuda.is_available():  # the GPU decides there, whatever the CPU has
        assert "precision: bf16 (auto: GPU has native bf16)" in stderr
    else:
        assert "precision: fp32 (auto: CPU has neither avx512_bf16 nor amx_bf16" in stderr
    code, stdout, stderr = run_cli("predict", out, "--input", dev, "--precision", "bf16")
    assert code == 0, stderr
    assert "precision: bf16 (asked for)" in stderr and len(stdout.splitlines()) == 16
    assert_user_error(run_cli("predict", out, "--input", dev, "--threads", 0), "--threads must be between 1 and")
    assert_user_error(
        run_cli("embed", out, "--input", dev, "--output", tmp_path / "v.npy", "--threads", -1),
        "--threads must be between 1 and",
    )


def test_freeze_embeddings_keeps_the_word_embeddings(tmp_path, tiny_bert, run_cli):
    from safetensors.torch import load_file

    train = tmp_path / "train.csv"
    write_sentiment_csv(train, 32, seed=1)
    out = tmp_path / "frozen"
    code, _, stderr = run_cli(
        "finetune",
        "cls",
        "--data",
        train,
        "--model",
        tiny_bert,
        "--output",
        out,
        "--epochs",
        1,
        "--batch-size",
        16,
        "--lr",
        "1e-2",
        "--freeze-embeddings",
        "--save-memory",
        "--threads",
        1,
    )
    assert code == 0, stderr
    base, tuned = load_file(str(tiny_bert / "model.safetensors")), load_file(str(out / "model.safetensors"))
    name = "embeddings.word_embeddings.weight"
    assert torch.equal(tuned[f"bert.{name}"], base[name])  # frozen: bit for bit the pretrained matrix
    # at lr 1e-2 everything trained moved, e.g. the position embeddings
    assert not torch.equal(
        tuned["bert.embeddings.position_embeddings.weight"], base["embeddings.position_embeddings.weight"]
    )
    meta = json.loads((out / "bertkit.json").read_text())
    assert meta["config"]["freeze_embeddings"] is True and meta["config"]["save_memory"] is True
