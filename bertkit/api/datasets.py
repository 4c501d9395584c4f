"""`bertkit datasets`: the known dataset names, their task and where they load from."""

from __future__ import annotations

from bertkit.data import registry


def list_datasets(data_dir: str | None = None) -> list[dict]:
    return registry.describe_all(data_dir)
