"""The layout's rules, checked on the code itself: torch-free tasks/data/decoding/metrics, no module
importing another's private names, no import circle, small modules, a short top level."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "bertkit"
TORCH_FREE = ("tasks", "data", "decoding", "metrics")
MAX_LINES = 300
MAX_FLAT_MODULES = 8


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import, lazy ones inside functions too."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names], node.lineno))
    return found


def test_tasks_data_decoding_metrics_import_no_torch():
    names = [n for n in modules() if n.split(".")[1:2] and n.split(".")[1] in TORCH_FREE]
    assert len(names) > 15
    code = ("import sys\n" + "".join(f"import {n}\n" for n in names) +
            "heavy = sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules)\n"
            "print(','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported by {', '.join(TORCH_FREE)}: {done.stdout.strip()}"


def test_no_module_imports_another_modules_private_names():
    found = modules()
    offences = []
    for name, path in found.items():
        for module, taken, line in imports(name, path):
            if not module.startswith("bertkit") or module == name:
                continue
            for private in (t for t in taken if t.startswith("_") and not t.startswith("__")):
                offences.append(f"{path.relative_to(PACKAGE.parent)}:{line} takes {private} from {module}")
    assert not offences, "\n".join(offences)


def test_no_import_circle():
    found = modules()
    graph = {name: set() for name in found}
    for name, path in found.items():
        for module, taken, _ in imports(name, path):
            if not module.startswith("bertkit"):
                continue
            targets = [f"{module}.{t}" for t in taken if f"{module}.{t}" in found] or [module]
            graph[name] |= {t for t in targets if t in found and t != name}
    cycles = strongly_connected(graph)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(sorted(c)) for c in cycles)


def strongly_connected(graph: dict[str, set]) -> list[set]:
    """Tarjan's algorithm: the components with more than one module."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return result


def test_modules_are_small():
    too_long = {str(p.relative_to(PACKAGE.parent)): n for p in modules().values()
                if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"


def test_the_top_level_is_short():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT_MODULES, flat
