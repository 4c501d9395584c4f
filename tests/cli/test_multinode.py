"""Several machines: Accelerate's multi-node launch, with two "machines" on localhost (CPU, gloo).

Each machine runs its own launcher::

    ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_machines 2 --num_processes 2 \\
        --machine_rank 0|1 --main_process_ip 127.0.0.1 --main_process_port P -m bertkit finetune ...

``--num_processes`` counts the processes of all machines: Accelerate starts
``num_processes // num_machines`` (here 1) on each, and machine 1's process is global rank 1.
(``--cpu`` instead of ``--multi_gpu`` is a trap here too: each machine then trains alone.)
The two machines must train exactly what one machine with 2 processes trains: the same record
(metrics, every step's loss, learning rate and gradient norm, the evaluations), the same console
lines and bit-identical weights. That each run had 2 processes shows in the optimizer steps (3 a
epoch, where one process takes 5) and in machine 1's process keeping silent: a process left alone
would print and write as a rank 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_multiprocess import Launched, _free_port, _gloo_available, launch, needs_gloo, write_sentiment

# 37 rows at batch 8: 5 batches a epoch, 3 per rank with 2 processes; 4 epochs, no accumulation
STEPS_TWO_PROCESSES, STEPS_ONE_PROCESS = 4 * 3, 4 * 5
TIMINGS = ("_seconds", "_per_s")  # the only fields two runs of the same training may differ in


def launch_machines(workdir: Path, *args, timeout: int = 300) -> list[Launched]:
    """``bertkit ARGS`` on 2 "machines" of 1 CPU process each: two ``accelerate launch`` processes
    started together, machine ranks 0 and 1, meeting at 127.0.0.1 on a free port."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    env.pop("BERTKIT_DEBUG", None)
    machines = []
    for rank in (0, 1):
        command = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_machines",
            "2",
            "--num_processes",
            "2",
            "--machine_rank",
            str(rank),
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            str(port),
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--tee",
            "3",
            "--log_dir",
            str(workdir / f"logs-machine{rank}"),
            "-m",
            "bertkit",
            *map(str, args),
        ]
        # files, not pipes: a launcher blocked on a full pipe would stall the other
        with open(workdir / f"machine{rank}.out", "w") as out, open(workdir / f"machine{rank}.err", "w") as err:
            machines.append(
                subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True)
            )
    deadline = time.monotonic() + timeout
    try:
        codes = [machine.wait(timeout=max(deadline - time.monotonic(), 1)) for machine in machines]
    except subprocess.TimeoutExpired:
        codes = None
    finally:
        for machine in machines:  # each launcher leads its own session: end it with its workers
            if machine.poll() is None:
                os.killpg(machine.pid, signal.SIGKILL)
                machine.wait()

    def logs(rank: int) -> str:
        return "\n".join(
            f"--- machine {rank} launcher {kind} (last 4000 characters) ---\n"
            + (workdir / f"machine{rank}.{kind}").read_text()[-4000:]
            for kind in ("out", "err")
        )

    report = "\n".join(logs(rank) for rank in (0, 1))
    assert codes is not None, f"the two machines did not finish within {timeout} s\n{report}"
    assert codes == [0, 0], f"exit codes {codes}\n{report}"
    launched = []
    for rank in (0, 1):
        rank_dirs = {int(d.name): d for d in (workdir / f"logs-machine{rank}").glob("*/attempt_0/*")}
        assert sorted(rank_dirs) == [0], f"machine {rank}: expected one local process, found {sorted(rank_dirs)}"
        launched.append(
            Launched(
                (workdir / f"machine{rank}.out").read_text(),
                {0: (rank_dirs[0] / "stdout.log").read_text()},
                {0: (rank_dirs[0] / "stderr.log").read_text()},
            )
        )
    return launched


def without_timings(value):
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if not k.endswith(TIMINGS)}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(model_dir / "model.safetensors")


@pytest.fixture(scope="module")
def two_runs(tiny_bert, tmp_path_factory):
    """The same training on 2 machines of 1 process and on 1 machine of 2 processes."""
    if not _gloo_available():
        pytest.skip("torch.distributed with the gloo backend is unavailable")
    root = tmp_path_factory.mktemp("multinode")
    write_sentiment(root / "train.csv", 37, seed=1)
    write_sentiment(root / "dev.csv", 29, seed=2)
    args = [
        "finetune",
        "cls",
        "--data",
        root / "train.csv",
        "--eval-data",
        root / "dev.csv",
        "--model",
        tiny_bert,
        "--epochs",
        4,
        "--batch-size",
        8,
        "--eval-batch-size",
        8,
        "--lr",
        "3e-2",
        "--log-every",
        1,
        "--precision",
        "no",
    ]  # the "it learned" bound was set in fp32; bf16 CPUs would train in bf16
    machines = launch_machines(root, *args, "--output", root / "two-machines")
    one_machine = launch(root, *args, "--output", root / "one-machine")
    return root, machines, one_machine


@needs_gloo
def test_two_machines_train_exactly_what_one_machine_with_two_processes_trains(two_runs):
    root, (machine0, machine1), one_machine = two_runs
    # machine 1's process was global rank 1: it neither printed nor wrote
    assert machine1.out[0] == machine1.err[0] == "" and machine1.console == "", (machine1.out, machine1.err)
    assert "[default1]" not in machine0.console  # and machine 0 ran one process: rank 0

    two, one = (json.loads((root / name / "bertkit.json").read_text()) for name in ("two-machines", "one-machine"))
    for meta in (two, one):  # 2 processes each: one process alone would take 5 steps a epoch
        assert meta["throughput"]["optimizer_steps"] == STEPS_TWO_PROCESSES != STEPS_ONE_PROCESS
        assert meta["throughput"]["examples"] == 4 * 37
    assert 0.6 < two["metrics"]["accuracy"] <= 1  # it learned something (a constant answer scores about half)
    assert two["metrics"] == one["metrics"] and two["best_step"] == one["best_step"]
    assert without_timings(two) == without_timings(one)

    history = [(root / name / "history.jsonl").read_text() for name in ("two-machines", "one-machine")]
    steps = [json.loads(line) for line in history[0].splitlines()]
    assert [s["step"] for s in steps if s["type"] == "train"] == list(range(1, STEPS_TWO_PROCESSES + 1))
    assert history[0] == history[1]  # every step's loss, lr and gradient norm, to the last bit

    ours, theirs = weights(root / "two-machines"), weights(root / "one-machine")
    assert ours.keys() == theirs.keys() and all(ours[k].equal(theirs[k]) for k in ours)

    # the console: the same lines but for the speeds and the output directory
    lines = [run.out[0].splitlines() for run in (machine0, one_machine)]
    # (the precision line is on stderr, said when chosen)
    assert len(lines[0]) == 7 and lines[0][-1] == f"saved to {root / 'two-machines'}"
    same = [i for i, line in enumerate(lines[0]) if not line.startswith(("train: ", "saved to "))]
    assert [lines[0][i] for i in same] == [lines[1][i] for i in same] and len(same) == 5
