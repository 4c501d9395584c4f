"""A run described in a file: ``bertkit finetune --config run.yaml`` reads one (command-line flags
override it), and every fine-tuning run writes its fully resolved options next to the model as
``config.yaml``, so ``bertkit finetune --config DIR/config.yaml`` runs it again.

The file is a flat mapping of option names (``lr`` or ``--lr`` spelled ``lr``, ``max-length`` or
``max_length``) to values, plus ``task``; YAML or JSON (JSON is read as YAML)."""

from __future__ import annotations

from pathlib import Path

from bertkit.errors import BertkitError

RUN_CONFIG_FILE = "config.yaml"
# actions of one invocation, not settings of the run: never written, so a replay does not resume or replace
ONE_SHOT = ("resume", "resume_from", "overwrite", "config", "keep_all")
HINT = (
    "a YAML/JSON mapping of option names to values, e.g. `task: cls`, `lr: 3e-5` (see `bertkit finetune TASK --help`)"
)


def read_run_config(path: str) -> dict:
    """The file's options with names as the CLI's parameters (``max-length`` -> ``max_length``)."""
    import yaml

    source = Path(path).expanduser()
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BertkitError(f"--config {path} does not exist", "check the path") from None
    except IsADirectoryError:
        raise BertkitError(
            f"--config {path} is a directory", f"give the file, e.g. {Path(path) / RUN_CONFIG_FILE}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BertkitError(
            f"--config {path} cannot be read ({getattr(exc, 'strerror', None) or exc})",
            "check the file's permissions and encoding (UTF-8)",
        ) from None
    try:
        values = yaml.load(text, Loader=_unique_keys_loader())
    except _KeyTwice as twice:
        raise BertkitError(
            f"--config {path} sets {twice.key!r} twice (again at line {twice.line})", "keep one of them"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise BertkitError(
            f"--config {path} is not valid YAML{where} ({getattr(exc, 'problem', None) or exc})", HINT
        ) from None
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise BertkitError(f"--config {path} holds a {type(values).__name__}, not a mapping of options", HINT)
    options = {}
    for key, value in values.items():
        name = str(key).strip().lstrip("-").replace("-", "_")
        if name in options:
            raise BertkitError(f"--config {path} sets {name!r} twice", "keep one of them")
        if name == "heads" and isinstance(value, list):  # finetune multi's heads: NAME:KIND:DATA or mappings
            from bertkit.tasks.multihead import head_text

            options[name] = [head_text(item, f"--config {path}") for item in value]
            continue
        if isinstance(value, (dict, list)):
            raise BertkitError(
                f"--config {path}: {key} is a {type(value).__name__}; options take one value",
                "write it as the command line would, e.g. `seeds: 42,43,44`",
            )
        options[name] = value
    return options


class _KeyTwice(Exception):
    def __init__(self, key, line: int):
        super().__init__(key, line)
        self.key, self.line = key, line


def _unique_keys_loader():
    """yaml.SafeLoader refusing a key given twice in one mapping: PyYAML keeps the last silently,
    so `lr: 1e-5` then `lr: 5e-5` would run the second with no word about the first."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise _KeyTwice(key, key_node.start_mark.line + 1)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeys


def write_run_config(directory: Path, values: dict) -> Path:
    """``values`` (one-shot actions left out) as ``directory/config.yaml``."""
    import yaml

    from bertkit.model_dir.files import write_text

    kept = {k: v for k, v in values.items() if k not in ONE_SHOT}
    header = (
        "# The resolved options of this run: `bertkit finetune --config THIS_FILE --output NEW_DIR` runs it\n"
        "# again (flags on the command line override these values).\n"
    )
    target = directory / RUN_CONFIG_FILE
    write_text(target, header + yaml.safe_dump(kept, sort_keys=False, allow_unicode=True))
    return target


def retarget_run_config(directory: Path, output: Path, **changes) -> None:
    """A run moved to ``output`` (the best of several: seeds, folds, tune trials): its config.yaml,
    if it has one, replays into ``output`` (plus ``changes``), not into the folder it ran in."""
    config_file = directory / RUN_CONFIG_FILE
    if config_file.is_file():
        write_run_config(directory, {**read_run_config(str(config_file)), "output": str(output), **changes})
