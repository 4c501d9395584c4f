"""Long runs: step-based control, checkpoints, and exact resume after a real kill.

A run killed with SIGKILL (the process sends it to itself at a chosen point, through the test-only
``BERTKIT_TEST_SIGNAL``) and resumed with ``--resume`` must end with the very bytes of an
uninterrupted run: final weights, the weights of the last checkpoint, metrics and history.jsonl.
Every run uses one torch thread; in one process, a subprocess is killed while an uninterrupted run
goes on in the test process, and the resumed run continues in the test process (a run continued
in another process must end with the same bytes too). With two processes all three runs are launched.

The data: 160 rows of 5 known words at batch 8 = 20 batches an epoch, 3 epochs = 60 steps; at
lr 5e-3 the tiny BERT goes from chance to 100 % dev accuracy within those steps, so the best
evaluation is neither the first nor the last.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_user_error
from safetensors.numpy import load_file
from test_multiprocess import needs_gloo, write_sentiment

LR, STEPS, WARMUP = 5e-3, 60, 6  # warmup: int(0.1 x 60)


def command(root: Path, output: str, *extra, precision: str = "bf16") -> list[str]:
    """bf16 (bf16 weights, fp32 master weights in the optimizer) unless asked: the more state to restore."""
    return [
        "finetune",
        "cls",
        "--data",
        str(root / "train.csv"),
        "--eval-data",
        str(root / "dev.csv"),
        "--model",
        str(root / "tiny"),
        "--output",
        str(root / output),
        "--epochs",
        "3",
        "--batch-size",
        "8",
        "--lr",
        str(LR),
        "--eval-every",
        "5",
        "--save-every",
        "10",
        "--log-every",
        "1",
        "--precision",
        precision,
        *map(str, extra),
    ]


def start(args: list[str], processes: int = 1, kill_at: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for name in ("BERTKIT_DEBUG", "BERTKIT_TEST_SIGNAL", "ACCELERATE_USE_CPU"):
        env.pop(name, None)
    if kill_at:
        env["BERTKIT_TEST_SIGNAL"] = kill_at
    launcher = [sys.executable]
    if processes > 1:  # CPU ranks (gloo), GPUs hidden: two ranks on one GPU is not what this checks
        env["ACCELERATE_USE_CPU"], env["CUDA_VISIBLE_DEVICES"] = "true", ""
        launcher += [
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(_free_port()),
        ]
    return subprocess.Popen(
        [*launcher, "-m", "bertkit", *args],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(process: subprocess.Popen, expect_ok: bool = True) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=240)
    if expect_ok:
        assert process.returncode == 0, out[-2000:] + err[-3000:]
    return process.returncode, out, err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tensors(path: Path) -> dict:
    return load_file(str(path))


def assert_same_tensors(a: Path, b: Path) -> None:
    left, right = tensors(a), tensors(b)
    assert sorted(left) == sorted(right)
    differing = [k for k in left if left[k].tobytes() != right[k].tobytes()]
    assert not differing, f"{len(differing)} tensors differ, e.g. {differing[:3]}"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def root(tiny_bert, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("long")
    write_sentiment(root / "train.csv", 160, seed=1)
    write_sentiment(root / "dev.csv", 40, seed=2)
    (root / "tiny").symlink_to(tiny_bert)
    return root


def run_here(args: list[str]) -> tuple[int, str, str]:
    """The CLI in this process with one torch thread, as the subprocesses have: the same numbers."""
    import contextlib
    import io

    import torch

    from bertkit import cli

    threads, argv, out, err = torch.get_num_threads(), sys.argv, io.StringIO(), io.StringIO()
    torch.set_num_threads(1)
    sys.argv, code = ["bertkit", *args], 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        torch.set_num_threads(threads)
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def single(root) -> tuple[Path, str]:
    """An uninterrupted run here, and a subprocess killed while writing step 40's checkpoint, then
    resumed here: a run continued in another process ends with the same bytes."""
    killed = start(command(root, "killed"), kill_at="KILL@save-40")
    code, _, err = run_here(command(root, "full"))
    assert code == 0, err
    code, _, _ = finish(killed, expect_ok=False)
    assert code == -signal.SIGKILL
    checkpoints = root / "killed.checkpoints"
    assert not (root / "killed").exists()  # no model directory: the run never finished
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        ".bertkit-owned.json",  # what bertkit made there (model_dir.ownership)
        ".step-40.tmp",
        "history.jsonl",
        "step-10",
        "step-20",
        "step-30",
    ]
    assert (checkpoints / ".step-40.tmp" / "model.safetensors").is_file()  # half-written at the kill
    code, stdout, err = run_here(command(root, "killed", "--resume"))
    assert code == 0, err
    return root, stdout


def test_killed_run_resumes_to_the_same_bytes(single):
    root, stdout = single
    full, resumed = root / "full", root / "killed"
    assert stdout.startswith(f"resumed from {root / 'killed.checkpoints' / 'step-30'}\n")  # not the half-written 40
    assert_same_tensors(full / "model.safetensors", resumed / "model.safetensors")
    # the best weights are restored at the end: the step-60 checkpoints hold the last weights
    assert_same_tensors(
        root / "full.checkpoints/step-60/model.safetensors", root / "killed.checkpoints/step-60/model.safetensors"
    )
    last, best = tensors(root / "full.checkpoints/step-60/model.safetensors"), tensors(full / "model.safetensors")
    shared = [k for k in best if k in last]
    assert len(shared) > 10 and any(last[k].tobytes() != best[k].tobytes() for k in shared)  # two different checks
    assert (full / "history.jsonl").read_text() == (resumed / "history.jsonl").read_text()
    a, b = (json.loads((d / "bertkit.json").read_text()) for d in (full, resumed))
    assert a["metrics"] == b["metrics"] and a["history"] == b["history"] and a["best_step"] == b["best_step"]
    assert a["throughput"]["examples"] == b["throughput"]["examples"] == 3 * 160
    accuracies = [h["metrics"]["accuracy"] for h in a["history"]]
    assert min(accuracies) == 0.5 and max(accuracies) == 1.0  # it learned during the run: a real comparison
    assert 5 < a["best_step"] < STEPS and a["metrics"]["accuracy"] == 1.0
    assert b["resumed_from"].endswith("step-30") and a["resumed_from"] is None
    assert sorted(p.name for p in (root / "killed.checkpoints").iterdir()) == [
        ".bertkit-owned.json",
        "history.jsonl",
        "step-10",
        "step-20",
        "step-30",
        "step-40",
        "step-50",
        "step-60",
    ]  # the leftover is gone


def test_history_schema_and_numbers(single):
    single = single[0]
    history = lines(single / "full" / "history.jsonl")
    train = [h for h in history if h["type"] == "train"]
    evals = [h for h in history if h["type"] == "eval"]
    assert len(history) == len(train) + len(evals)
    assert [h["step"] for h in train] == list(range(1, STEPS + 1))  # --log-every 1
    assert [h["step"] for h in evals] == list(range(5, STEPS + 1, 5))  # --eval-every 5
    assert all(set(h) == {"type", "step", "epoch", "loss", "lr", "grad_norm"} for h in train)
    assert all(set(h) == {"type", "step", "epoch", "metrics"} for h in evals)
    assert set(evals[0]["metrics"]) >= {"accuracy", "f1"}
    # 20 steps an epoch; the rate a step uses: linear warmup over 6 steps from 0, then linear decay to 0
    assert [h["epoch"] for h in train[:2]] == [0.05, 0.1] and train[19]["epoch"] == 1 and train[-1]["epoch"] == 3
    assert train[0]["lr"] == 0.0 and train[3]["lr"] == pytest.approx(LR * 3 / WARMUP)
    assert train[32]["lr"] == pytest.approx(LR * (STEPS - 32) / (STEPS - WARMUP))
    assert all(h["loss"] > 0 and h["grad_norm"] > 0 for h in train)
    # an eval line precedes the next train line, in step order
    assert [h["step"] for h in history] == sorted(h["step"] for h in history)
    assert history.index(evals[0]) == 5
    # the live copy next to the checkpoints is the same file
    live = single / "full.checkpoints" / "history.jsonl"
    assert live.read_text() == (single / "full" / "history.jsonl").read_text()
    meta = json.loads((single / "full" / "bertkit.json").read_text())
    assert [h["step"] for h in meta["history"]] == list(range(5, STEPS + 1, 5))


def test_resume_refuses_other_settings_and_writes_nothing(single, run_cli):
    root = single[0]
    before = sorted(p.name for p in (root / "killed.checkpoints").iterdir())
    args = command(root, "again", "--resume-from", root / "killed.checkpoints" / "step-30")
    args[args.index("--batch-size") + 1] = "16"
    assert_user_error(run_cli(*args), "cannot resume from", "step-30", "--batch-size 16 (checkpoint: 8)")
    args = command(root, "again", "--resume-from", root / "killed.checkpoints" / "step-30", "--seed", 7)
    assert_user_error(run_cli(*args), "--seed 7 (checkpoint: 42)")
    assert_user_error(run_cli(*command(root, "again", "--resume-from", root / "dev.csv")), "not a complete checkpoint")
    assert not (root / "again").exists() and not (root / "again.checkpoints").exists()
    assert sorted(p.name for p in (root / "killed.checkpoints").iterdir()) == before
    # a fresh run would mix its checkpoints with an earlier run's: refused, unless asked
    (root / "stale.checkpoints" / "step-10").mkdir(parents=True)
    (root / "stale.checkpoints" / "step-10" / "state.json").write_text("{}")
    assert_user_error(run_cli(*command(root, "stale")), "holds checkpoints of an earlier run", "--resume")


def test_ctrl_c_saves_at_the_step_and_resumes_exactly(root, run_cli, monkeypatch):
    """In one process: SIGINT at step 13 saves step-13 and exits 130; --resume ends where an
    uninterrupted run ends. Also --keep-checkpoints 1: the newest plus the best survive."""
    extra = ("--epochs", 1, "--save-every", 5, "--keep-checkpoints", 1)
    args = command(root, "inproc", *extra, precision="no")  # fp32 here, bf16 in the other runs
    code, _, stderr = run_cli(*command(root, "inproc-ref", *extra, precision="no"))
    assert code == 0, stderr
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs as a background job
    monkeypatch.setenv("BERTKIT_TEST_SIGNAL", "INT@step-13")
    code, stdout, stderr = run_cli(*args)
    assert code == 130 and stdout == "" and not (root / "inproc").exists()
    assert (
        f"interrupted: stopped after step 13; checkpoint saved to {root / 'inproc.checkpoints' / 'step-13'}; "
        f"to continue, run the same command with --resume"
    ) in stderr
    assert signal.getsignal(signal.SIGINT) is before  # bertkit's handler is gone again
    monkeypatch.delenv("BERTKIT_TEST_SIGNAL")
    code, stdout, stderr = run_cli(*args, "--resume")
    assert code == 0, stderr
    assert stdout.startswith(f"resumed from {root / 'inproc.checkpoints' / 'step-13'}\n")
    assert_same_tensors(root / "inproc-ref" / "model.safetensors", root / "inproc" / "model.safetensors")
    assert (root / "inproc-ref" / "history.jsonl").read_text() == (root / "inproc" / "history.jsonl").read_text()
    # saves at 5, 10, 15, 20, each after an evaluation; kept: the newest, and the best evaluation's
    best = json.loads((root / "inproc-ref" / "bertkit.json").read_text())["best_step"]
    assert best in (5, 10, 15, 20)
    assert {p.name for p in (root / "inproc-ref.checkpoints").glob("step-*")} == {"step-20", f"step-{best}"}
    state = json.loads((root / "inproc-ref.checkpoints" / "step-20" / "state.json").read_text())
    assert (state["progress"]["step"], state["progress"]["epoch"], state["progress"]["next_batch"]) == (20, 0, 20)
    assert state["progress"]["best_step"] == best and state["identity"]["batch_size"] == 8


@needs_gloo
def test_two_processes_killed_and_resumed_match(root):
    # 20 batches an epoch -> 10 per process -> 5 steps with --grad-accum 2; 3 epochs = 15 steps
    extra = ("--grad-accum", 2, "--eval-every", 4, "--save-every", 3)
    reference = start(command(root, "mp-full", *extra), processes=2)
    killed = start(command(root, "mp-killed", *extra), processes=2, kill_at="KILL@step-8")
    finish(reference)
    code, out, err = finish(killed, expect_ok=False)
    assert code != 0 and not (root / "mp-killed").exists()
    checkpoints = root / "mp-killed.checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-3", "step-6"]
    assert sorted(p.name for p in (checkpoints / "step-6").glob("rank-*.pt")) == ["rank-0.pt", "rank-1.pt"]
    _, stdout, _ = finish(start(command(root, "mp-killed", *extra, "--resume"), processes=2))
    assert stdout.startswith(f"resumed from {checkpoints / 'step-6'}\n")
    assert_same_tensors(root / "mp-full" / "model.safetensors", root / "mp-killed" / "model.safetensors")
    assert (root / "mp-full" / "history.jsonl").read_text() == (root / "mp-killed" / "history.jsonl").read_text()
    a, b = (json.loads((root / d / "bertkit.json").read_text()) for d in ("mp-full", "mp-killed"))
    assert a["metrics"] == b["metrics"] and a["history"] == b["history"]
    assert a["throughput"]["optimizer_steps"] == 15
    assert a["throughput"]["examples"] == b["throughput"]["examples"] == 480


def test_max_steps_overrides_epochs(root, run_cli):
    """--max-steps 7 on 20 batches an epoch: 7 steps (56 examples), the schedule spans 7 steps
    (int(0.1 x 7) = 0 warmup steps), one evaluation at the end, train lines every 3 steps."""
    args = command(root, "seven", "--max-steps", 7, "--log-every", 3, precision="no")
    args.remove("--save-every"), args.remove("10"), args.remove("--eval-every"), args.remove("5")
    code, stdout, stderr = run_cli(*args)
    assert code == 0, stderr
    history = lines(root / "seven" / "history.jsonl")
    assert [(h["type"], h["step"], h["epoch"]) for h in history] == [
        ("train", 3, 0.15),
        ("train", 6, 0.3),
        ("eval", 7, 0.35),
    ]
    assert history[0]["lr"] == pytest.approx(LR * (7 - 2) / 7) and history[1]["lr"] == pytest.approx(LR * 2 / 7)
    meta = json.loads((root / "seven" / "bertkit.json").read_text())
    assert meta["throughput"]["optimizer_steps"] == 7 and meta["throughput"]["examples"] == 56
    assert [(h["step"], h["epoch"]) for h in meta["history"]] == [(7, 0.35)]
    assert not (root / "seven.checkpoints").exists()  # nothing saved without --save-every


# --- checkpoints that cannot be read back ---------------------------------------------------------
def _copy_checkpoints(root: Path, name: str) -> Path:
    import shutil

    target = root / f"{name}.checkpoints"
    shutil.copytree(root / "killed.checkpoints", target)
    return target


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_unreadable_newest_checkpoint_is_passed_over_and_the_run_still_ends_exact(single):
    root, _ = single
    checkpoints = _copy_checkpoints(root, "cut")
    newest = max((p for p in checkpoints.iterdir() if p.name.startswith("step-")), key=lambda p: int(p.name[5:]))
    before = int(newest.name[5:]) - 10
    _truncate(newest / "model.safetensors")
    code, stdout, err = run_here(command(root, "cut", "--resume"))
    assert code == 0, err
    assert f"resumed from {checkpoints / f'step-{before}'}" in stdout
    assert (  # said on stderr when the checkpoint was chosen, before the work: not again at the end
        f"checkpoint {newest.name} is unreadable (model.safetensors: truncated" in err
        and f"resumed from step-{before} instead" in err
    )
    assert_same_tensors(root / "full" / "model.safetensors", root / "cut" / "model.safetensors")


@pytest.mark.parametrize("damage", ["optimizer.pt", "scheduler.pt", "rank-0.pt", "state.json", "best.safetensors"])
def test_explicit_unreadable_checkpoint_fails_naming_the_previous_one(single, run_cli, damage):
    root, _ = single
    checkpoints = _copy_checkpoints(root, f"bad-{damage.replace('.', '-')}")
    target = checkpoints / "step-30"
    if not (target / damage).exists():
        pytest.skip(f"step-30 has no {damage}")
    if damage == "state.json":
        (target / damage).write_text("{not json")
    else:
        _truncate(target / damage)
    before = {p: p.stat().st_mtime_ns for p in checkpoints.rglob("*")}
    args = command(root, f"bad-{damage.replace('.', '-')}", "--resume-from", target)
    assert_user_error(
        run_cli(*args), f"checkpoint {target} cannot be read ({damage}", f"--resume-from {checkpoints / 'step-20'}"
    )
    assert {p: p.stat().st_mtime_ns for p in checkpoints.rglob("*")} == before
    assert not (root / f"bad-{damage.replace('.', '-')}").exists()


def test_no_readable_checkpoint_is_one_line(single, run_cli):
    root, _ = single
    checkpoints = _copy_checkpoints(root, "allbad")
    for step in checkpoints.glob("step-*"):
        _truncate(step / "optimizer.pt")
    assert_user_error(
        run_cli(*command(root, "allbad", "--resume")),
        "no checkpoint under",
        "can be read",
        "optimizer.pt: truncated",
        "--overwrite",
    )
    assert not (root / "allbad").exists()
