"""What the side-by-side scripts against sentence-transformers (retrieval.py, stsb_cosent.py) share:
the record's command, machine and wall time, written as <name>.json and <name>.md."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def write_results(record: dict, name: str, markdown, started: float, results: Path = RESULTS) -> str:
    """Complete ``record`` (command, machine, wall seconds since ``started``), write it and its table
    (``markdown(record)``) to ``results``; returns the table."""
    record["command"] = " ".join(sys.argv)
    record["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    record["wall_s"] = round(time.perf_counter() - started, 1)
    results.mkdir(exist_ok=True)
    table = markdown(record)
    (results / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    (results / f"{name}.md").write_text(table)
    return table
