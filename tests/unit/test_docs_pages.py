"""The generated pages are current and the architecture page names every module.

docs/reference/cli.md is written by docs/gen_cli_reference.py from the Typer app (the options are
declared once, in bertkit/options); docs/architecture.md is written by hand and must name every
product module, by its path (bertkit/engine/core.py) or by its name inside the package's entry of the
page's tree (core.py)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

from conftest import REPO

DOCS = REPO / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", DOCS / "gen_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_current():
    # in a fresh interpreter: the Typer app is built once per process, and a test in this worker may
    # have registered something for a moment (tests/cli/test_throwaway_label_kind.py adds a label kind)
    done = subprocess.run(
        [sys.executable, str(DOCS / "gen_cli_reference.py"), "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, (
        "docs/reference/cli.md is stale: run `python docs/gen_cli_reference.py` and commit the page\n" + done.stderr
    )


def test_the_cli_reference_lists_every_command_and_option():
    page = (DOCS / "reference" / "cli.md").read_text()
    for path, command in _generator().commands():
        assert f"## `{' '.join(path)}`" in page
        for param in command.params:
            for name in getattr(param, "opts", []):
                assert name.startswith("--") is False or f"`{name}`" in page, (path, name)


def _named(page: str, module: str) -> bool:
    """The module's path, or its file name within its package's part of the page (the package
    named on the line, or on one of the lines above it with the same indentation block)."""
    if module in page:
        return True
    parts = module.split("/")
    name, packages = parts[-1], parts[1:-1]
    if not packages:  # bertkit/errors.py: named as errors.py
        return re.search(rf"(?<![\w/.]){re.escape(name)}\b", page) is not None
    package = packages[-1]
    stem = name[: -len(".py")]
    tree = page.split("\n")
    for i, line in enumerate(tree):
        if re.match(rf"^\s+{re.escape(package)}/", line):
            block = [line]
            for following in tree[i + 1 :]:
                if re.match(r"^\s{2}\S", following) or not following.strip():
                    break
                block.append(following)
            text = "\n".join(block)
            if re.search(rf"(?<![\w/]){re.escape(name)}\b|(?<![\w/.]){re.escape(stem)}\b", text):
                return True
    return f"{package}/{name}" in page


def test_the_architecture_page_names_every_module():
    page = (DOCS / "architecture.md").read_text()
    modules = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "bertkit").rglob("*.py"))
    missing = [m for m in modules if not m.endswith("__init__.py") and not _named(page, m)]
    assert not missing, f"docs/architecture.md does not name {len(missing)} module(s): {', '.join(missing)}"
