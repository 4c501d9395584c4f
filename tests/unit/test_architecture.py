"""The layout's rules, checked on the code itself: torch-free tasks/data/decoding/metrics, no module
importing another's private names, no import circle between modules or between packages, layers
that only point down, small modules and functions, a short top level. Imports inside functions
count as much as those at the top of a module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "bertkit"
TORCH_FREE = ("tasks", "data", "decoding", "metrics")
# Lines as `ruff format` writes them (one argument a line where a call does not fit the width): the
# formatter made the package 12% taller; 400 formatted lines hold about what 300 hand-packed ones did.
MAX_LINES = 400
MAX_FLAT_MODULES = 8
MAX_FUNCTION_LINES = 60
LONG_REASON = "# long:"
# bertkit's packages from the top floor to the bottom one. A package imports only from its own floor
# or from floors below; a flat module (bertkit/inference.py) counts as a package of its own, and
# "bertkit" is the root __init__ (the version). A new package must be placed here.
LAYERS = (
    ("cli", "__main__"),  # the Typer commands
    ("ray",),  # the commands on a Ray cluster
    ("api", "serving"),  # the Python API; the HTTP server
    ("training",),  # around the finetune spine: the run's plan, its result, repeated runs, the search space
    ("reporting", "export"),  # reports and model cards; ONNX/OpenVINO export
    ("inference",),  # a saved directory loaded and scored (eval, predict, the evaluations while training)
    ("methods",),  # training methods: fine-tuning, LoRA, distillation, SetFit (hooks the finetune spine calls)
    ("probing",),  # the linear probe: command, classifier, head network, card text
    ("options", "config"),  # every command's options (they check threads with the engine's rule)
    ("engine",),  # the training and inference loops (Accelerate); it gets the options' values
    ("model_dir",),  # the model directory: bertkit.json, its files, what bertkit may replace
    ("networks",),  # torch modules around an encoder; they build what a task's TrainingSpec says
    ("models",),  # --model: resolve, load config, tokenizer and weights
    ("tasks",),  # task adapters, torch-free: they say what they train with (tasks/training_spec.py)
    ("data", "decoding", "metrics"),  # readers, decoders, scores: torch-free
    ("hub", "errors", "events", "bertkit"),
)


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
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parents + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names], node.lineno))
    return found


def test_tasks_data_decoding_metrics_import_no_torch():
    names = [n for n in modules() if n.split(".")[1:2] and n.split(".")[1] in TORCH_FREE]
    assert len(names) > 15
    code = (
        "import sys\n"
        + "".join(f"import {n}\n" for n in names)
        + "heavy = sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules)\n"
        "print(','.join(heavy))"
    )
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


def module_graph() -> dict[str, set]:
    """bertkit's modules -> the bertkit modules each imports (``from bertkit.x import y``: the module
    ``bertkit.x.y`` when there is one, else ``bertkit.x``)."""
    found = modules()
    graph = {name: set() for name in found}
    for name, path in found.items():
        for module, taken, _ in imports(name, path):
            if not module.startswith("bertkit"):
                continue
            targets = [f"{module}.{t}" for t in taken if f"{module}.{t}" in found] or [module]
            graph[name] |= {t for t in targets if t in found and t != name}
    return graph


def package_of(module: str) -> str:
    """``bertkit.engine.core`` -> ``engine``; a flat module is its own package; the root is ``bertkit``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph() -> dict[str, set]:
    graph = {}
    for name, targets in module_graph().items():
        graph.setdefault(package_of(name), set()).update(package_of(t) for t in targets)
    for package, targets in graph.items():
        targets.discard(package)
    return graph


def test_no_import_circle():
    cycles = strongly_connected(module_graph())
    assert not cycles, "import circles: " + "; ".join(" -> ".join(sorted(c)) for c in cycles)


def test_no_two_packages_import_each_other():
    cycles = strongly_connected(package_graph())
    assert not cycles, "packages in an import circle: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def test_imports_only_point_down_the_layers():
    floor = {package: level for level, packages in enumerate(LAYERS) for package in packages}
    graph = module_graph()
    unplaced = sorted({package_of(name) for name in graph} - set(floor))
    assert not unplaced, f"packages missing from LAYERS: {unplaced}"
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if floor[package_of(name)] > floor[package_of(target)]
    )
    assert not upward, "imports from a lower layer up to a higher one:\n" + "\n".join(upward)


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
    too_long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in modules().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"


def test_the_top_level_is_short():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT_MODULES, flat


def test_tasks_declare_what_they_train_with_and_networks_build_it():
    """Tasks sit below networks: a task says what it trains with as a frozen value (a TrainingSpec,
    tasks/training_spec.py) and networks/recipes.py builds the torch modules from it. Every recipe a
    spec can name has its builder there, and no task module holds anything bound at import time."""
    import dataclasses

    from bertkit.networks import recipes
    from bertkit.tasks import training_spec
    from bertkit.tasks.classification import SingleSentenceTask
    from bertkit.tasks.mlm import MaskedLMTask
    from bertkit.tasks.tagging import TaggingTask

    named = {value for key, value in vars(training_spec).items() if key.isupper() and isinstance(value, str)}
    assert named == set(recipes.RECIPES)
    specs = [
        SingleSentenceTask().training_spec(),
        TaggingTask(options={"loss": "focal"}).training_spec(),
        MaskedLMTask().training_spec(),
    ]
    assert all(dataclasses.is_dataclass(spec) and spec.__dataclass_params__.frozen for spec in specs)
    assert [spec.recipe for spec in specs] == [training_spec.FINE_TUNE] * 2 + [training_spec.MASKED_LM]
    assert specs[0].loss is None and specs[1].loss.focal_gamma == 2.0 and specs[2].mask_rule.rate == 0.15
    assert not any(
        callable(value) and type(value).__module__ == training_spec.__name__
        for value in vars(training_spec).values()
        if not isinstance(value, type)
    )


def long_functions() -> dict[str, int]:
    """``path:function`` -> lines, for every function whose code runs over MAX_FUNCTION_LINES (from its
    first statement after the docstring to its last line, nested functions included: a signature written
    one parameter a line and the docstring are not what makes a function hard to read) without a
    ``# long:`` comment line in it."""
    found = {}
    for path in modules().values():
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            first = node.body[1] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body[0]
            length = node.end_lineno - first.lineno + 1
            body = lines[node.lineno - 1 : node.end_lineno]
            if length > MAX_FUNCTION_LINES and not any(line.strip().startswith(LONG_REASON) for line in body):
                found[f"{path.relative_to(PACKAGE.parent)}:{node.name}"] = length
    return found


def test_long_functions_say_why():
    """A function over MAX_FUNCTION_LINES lines is either cut into named steps or says why it is one
    piece: a comment line in it that starts with ``# long:`` and gives the reason, e.g.
    ``# long: one table of the command's flags, read top to bottom``."""
    offenders = long_functions()
    assert not offenders, f"over {MAX_FUNCTION_LINES} lines without a '{LONG_REASON}' comment: {offenders}"
