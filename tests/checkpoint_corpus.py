"""The checkpointed run that resume tests damage: one short run (16 rows, batch 4, 2 epochs = 8
steps, a checkpoint every 2 steps) trained once per test module in a shared folder (``SHARED``,
set up by the ``shared_root`` fixture, which a module imports to use it); a case copies the
checkpoints next to its own --output and damages its copy. Its --data stays the shared file: a
run's identity holds the data's path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hostile import CLS_CSV, Context

from bertkit.options import RunOptions

TEXTS = "the film was good\nthe plot was bad\n"
STEPS = (2, 4, 6, 8)
SHARED: dict = {}  # the module's checkpointed run: {"root": Path}


@pytest.fixture(scope="module", autouse=True)
def shared_root(tmp_path_factory):
    SHARED["root"] = tmp_path_factory.mktemp("resume-base")
    yield
    SHARED.clear()


def train_command(c: Context, data: Path | None = None, *extra) -> list:
    return [
        "finetune",
        "cls",
        "--data",
        data or base_data(c),
        "--model",
        c.tiny,
        "--output",
        c.tmp / "out",
        "--epochs",
        2,
        "--batch-size",
        4,
        "--save-every",
        2,
        *extra,
    ]


def base_data(c: Context) -> Path:
    path = SHARED["root"] / "train.csv"
    if not path.exists():
        path.write_text(CLS_CSV)
    return path


def base_checkpoints(c: Context) -> Path:
    """The shared run's checkpoints (trained on first use, in this process)."""
    checkpoints = SHARED["root"] / "run.checkpoints"
    if not checkpoints.exists():
        from bertkit import api
        from bertkit.config import TrainConfig

        config = TrainConfig(epochs=2, batch_size=4, save_every=2)
        api.finetune(
            "cls",
            RunOptions(data=str(base_data(c)), model=str(c.tiny), output=str(SHARED["root"] / "run")),
            config=config,
        )
        assert sorted(p.name for p in checkpoints.glob("step-*")) == [f"step-{s}" for s in STEPS]
    return checkpoints


def checkpoints(c: Context) -> Path:
    """A private copy of the shared checkpoints, where this case's --output keeps them."""
    target = c.tmp / "out.checkpoints"
    shutil.copytree(base_checkpoints(c), target)
    return target


def damage(path: Path, how: str = "truncate") -> None:
    """Cut in half, replace by garbage or nothing; "json:TEXT" writes TEXT, "json-edit:a.b=1" sets a key."""
    if how.startswith("json:"):
        path.write_text(how[5:])
        return
    if how.startswith("json-edit:"):
        state, (keys, value) = json.loads(path.read_text()), how[10:].split("=")
        *parents, last = keys.split(".")
        target = state
        for key in parents:
            target = target[key]
        target[last] = json.loads(value)
        path.write_text(json.dumps(state))
        return
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x00not this file\x00" * 8, "empty": b""}[how])


def damaged(c: Context, name: str, how: str = "truncate", steps=STEPS) -> Path:
    root = checkpoints(c)
    for step in steps:
        damage(root / f"step-{step}" / name, how)
    return root


def resume(c: Context, name: str, how: str = "truncate", steps=STEPS, *extra) -> list:
    damaged(c, name, how, steps)
    return train_command(c, None, "--resume", *extra)


def resume_from(c: Context, step: int, name: str | None = None, how: str = "truncate") -> list:
    root = checkpoints(c)
    if name:
        damage(root / f"step-{step}" / name, how)
    return train_command(c, None, "--resume-from", root / f"step-{step}")
