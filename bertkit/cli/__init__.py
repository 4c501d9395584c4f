"""The `bertkit` command line: parse, call bertkit.api, print. One module per command group;
heavy imports (torch, transformers, task modules) stay inside commands, so `--help` is instant."""

import bertkit.cli.audit  # noqa: F401  (registers `bertkit audit`)
import bertkit.cli.calibrate  # noqa: F401  (registers `bertkit calibrate`)
import bertkit.cli.distill  # noqa: F401  (registers `distill`)
import bertkit.cli.mine  # noqa: F401  (registers `bertkit mine`)
from bertkit.cli import datasets, embed, evaluate, export, features, finetune, predict, publish, select, serve, tune  # noqa: F401  (registers)
from bertkit.cli.app import app, main

__all__ = ["app", "main"]
