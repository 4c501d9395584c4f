"""How long ``--resume`` takes to reach its first new training step, against a fresh start.

A real run is killed (SIGKILL from outside) right after its checkpoint at step ``--kill-at``;
then the same command plus ``--resume`` is started, and the time from launch to the first new
step's line in the live ``history.jsonl`` is compared with a fresh start's time to its step 1:

    python benchmarks/resume_overhead.py --rows 50000 --kill-at 1400 --max-length 64

Both timings include reading and tokenising the data, loading the model and one training step;
the difference is what resuming costs (reading the checkpoint, rebuilding the epoch's batch plan
and jumping to the saved batch, fingerprinting the data).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def launch(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("BERTKIT_TEST_SIGNAL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "bertkit", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def last_step(history: Path) -> int:
    try:
        with open(history, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - 4096))
            tail = handle.read().decode(errors="replace").strip().splitlines()
        return json.loads(tail[-1])["step"] if tail else 0
    except (OSError, ValueError, KeyError, IndexError):
        return 0  # not there yet, or a line being written


def wait_for(process: subprocess.Popen, ready, what: str, poll: float = 0.02) -> float:
    started = time.perf_counter()
    while not ready():
        if process.poll() is not None:
            raise SystemExit(f"the run ended (code {process.returncode}) before {what}")
        time.sleep(poll)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50000)
    parser.add_argument("--kill-at", type=int, default=1400)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workdir", default="/tmp/bertkit-resume-overhead")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    def command(output: str) -> list[str]:
        return [
            "finetune",
            "cls",
            "--data",
            "sst2",
            "--model",
            "minilm",
            "--max-train-samples",
            str(args.rows),
            "--batch-size",
            str(args.batch_size),
            "--max-length",
            str(args.max_length),
            "--epochs",
            "1",
            "--save-every",
            str(args.kill_at),
            "--log-every",
            "1",
            "--output",
            str(work / output),
        ]

    run, history = command("run"), work / "run.checkpoints" / "history.jsonl"
    checkpoint = work / "run.checkpoints" / f"step-{args.kill_at}"
    process = launch(run)
    fresh = [wait_for(process, lambda: last_step(history) >= 1, "step 1")]
    print(
        f"fresh start: first step logged {fresh[0]:.2f}s after launch; training to step {args.kill_at} ...", flush=True
    )
    trained = wait_for(process, checkpoint.is_dir, f"the step-{args.kill_at} checkpoint", poll=0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    print(f"killed after the step-{args.kill_at} checkpoint ({trained:.0f}s of training)", flush=True)
    saved = {p.name: p.stat().st_size for p in checkpoint.iterdir()}

    resumed = []
    for repeat in range(args.repeats):
        # the killed run's own lines after the checkpoint are still in the file until --resume
        # rewrites it (a new file): only a line in the new file counts
        before = history.stat().st_ino
        process = launch(run + ["--resume"])
        resumed.append(
            wait_for(
                process,
                lambda: history.stat().st_ino != before and last_step(history) > args.kill_at,
                "the first resumed step",
            )
        )
        process.send_signal(signal.SIGKILL)
        process.wait()
        shutil.rmtree(work / "run.checkpoints" / f".step-{args.kill_at * 2}.tmp", ignore_errors=True)
        # a fresh start under the same conditions, for comparison
        other, other_history = command(f"fresh-{repeat}"), work / f"fresh-{repeat}.checkpoints" / "history.jsonl"
        process = launch(other)
        fresh.append(wait_for(process, lambda: last_step(other_history) >= 1, "step 1"))
        process.send_signal(signal.SIGKILL)
        process.wait()
    print(
        json.dumps(
            {
                "rows": args.rows,
                "kill_at": args.kill_at,
                "checkpoint_bytes": saved,
                "fresh_first_step_s": [round(t, 2) for t in fresh],
                "resume_first_step_s": [round(t, 2) for t in resumed],
                "overhead_s": round(min(resumed) - min(fresh), 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
