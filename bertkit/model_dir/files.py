"""Where a run writes: the output checks made before any expensive work, all-or-nothing
directories and files, and the names of a model directory's siblings."""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import tempfile
from contextlib import contextmanager
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir.ownership import META_FILE, check_replaceable, is_model_file, refuse_strangers
from bertkit.model_dir.removal import remove_temporary
from bertkit.model_dir.writer_lock import lock_for_writing, process_alive

PROBE_HEAD_FILE = "probe_head.safetensors"  # a probe's linear head, next to its frozen encoder
TMP_SUFFIX = ".tmp"  # atomic_file's temporary sibling: .<name>.<pid>-<random>.tmp


def checkpoint_root(output: Path) -> Path:
    return output.parent / f"{output.name}.checkpoints"


def logging_dir(output: Path) -> Path:
    return output.parent / f"{output.name}.logs"


def seeds_root(output: Path) -> Path:
    return output.parent / f"{output.name}.seeds"  # finetune --seeds: one model directory per seed


def run_names(name: str) -> tuple[str, ...]:
    """What a run writing the model directory ``name`` makes beside it, besides temporary names."""
    return name, f"{name}.checkpoints", f"{name}.logs/"  # NAME/: all in it is bertkit's (the trackers write it)


def staging_prefix(output: Path) -> str:
    return f".{output.name}.partial-"  # + <pid>-<random>: the pid tells a live writer from a killed one


def trash_dir(output: Path) -> Path:
    return output.parent / f".{output.name}.old"


def check_output_dir(output: Path, overwrite: bool) -> None:
    """Fail before any work if ``output`` cannot be written or would clobber the user's files.

    Missing parent directories are fine (they are created when the model is saved); the nearest
    existing one must be a writable directory. ``--overwrite`` replaces only an empty directory or
    one that bertkit wrote and the user added nothing to (model_dir.ownership), never user files.
    """
    output = output.expanduser().resolve()
    check_name_fits(output, len(staging_prefix(output)) - len(output.name) + 20, "--output")  # + "<pid>-<random>"
    if output == Path(output.anchor) or Path.cwd().resolve().is_relative_to(output):
        raise BertkitError(
            f"--output {output} is the current directory or one of its parents",
            "name a new directory, e.g. runs/my-model",
        )
    if output.exists() and not output.is_dir():
        raise BertkitError(f"--output {output} is a file", "choose a directory path")
    if is_mount_point(output):  # a volume or mount: the finished model cannot be renamed into its place
        raise BertkitError(
            f"--output {output} is a mount point, which a model directory cannot replace",
            f"choose a directory inside it, e.g. {output / 'model'}",
        )
    existing = _nearest_existing(output.parent)
    if not existing.is_dir():
        raise BertkitError(f"the parent of --output {output} is under a file ({existing})", "choose a directory path")
    probe_writable(existing, f"--output {output}")
    lock_for_writing(output)  # in a command that writes outputs: before what is there is looked at
    clean_stale(output)
    if output.is_dir() and any(output.iterdir()):
        if not overwrite:
            raise BertkitError(
                f"--output {output} exists and is not empty", "choose a new directory or pass --overwrite"
            )
        check_replaceable(output)


def check_output_file(path: str | Path, flag: str = "--output") -> Path:
    """Fail before any work if a result file cannot be written at ``path``; returns it resolved."""
    target = Path(path).expanduser().resolve()
    check_name_fits(target, len(".." + TMP_SUFFIX) + 20, flag)  # atomic_file's ".<name>.<pid>-<random>.tmp"
    if target.is_dir():
        raise BertkitError(f"{flag} {path} is a directory", "give a file name, e.g. results.json")
    if not target.parent.exists():
        existing = _nearest_existing(target.parent)
        if not existing.is_dir():
            raise BertkitError(f"{flag} {path} is under a file ({existing})", "choose a path in a directory")
        raise BertkitError(f"the directory of {flag} {path} does not exist", f"mkdir -p {target.parent}")
    if not target.parent.is_dir():
        raise BertkitError(f"{flag} {path} is under a file ({target.parent})", "choose a path in a directory")
    probe_writable(target.parent, f"{flag} {path}")
    if target.exists() and not os.access(target, os.W_OK):
        raise BertkitError(f"{flag} {path} is not writable", "choose another file or fix its permissions")
    if is_model_file(target):
        raise BertkitError(
            f"{flag} {path} is a file of the model in {target.parent}, which writing would damage",
            "write the results elsewhere, or under another name",
        )
    return target


def check_sibling_dir(path: Path, what: str) -> None:
    """A sibling directory a run creates next to its output (OUT.checkpoints, OUT.logs) must not
    be a file: found before the work, not at the first save."""
    if os.path.lexists(path) and not path.is_dir():
        raise BertkitError(f"{path} is a file, where {what} go", "move or rename it, or choose another --output")


def check_inputs_kept(output: Path, *inputs, flag: str = "--output") -> None:
    """What a command writes at ``output`` (a file, or a directory that --overwrite replaces) must
    not take an input with it: refuse an output that is an input (a data file, a model directory)
    or a directory holding one. ``inputs``: paths, or data sources with a ``.path`` (None for Hub
    data and stdin); names that are not on disk (Hub models and datasets) cannot be destroyed."""
    output = Path(output).expanduser().resolve()
    for item in inputs:
        path = getattr(item, "path", item)
        if path is None or str(path) == "-" or not Path(path).expanduser().exists():
            continue
        path = Path(path).expanduser().resolve()
        if path == output:
            kind = "model directory" if path.is_dir() else "file"
            raise BertkitError(
                f"{flag} {output} is the input {kind} {path}, which writing it would destroy", f"choose another {flag}"
            )
        if path.is_relative_to(output):
            raise BertkitError(
                f"the input {path} is inside {flag} {output}, which this command would replace",
                f"choose an {flag} directory outside the input's directory",
            )


def is_mount_point(path: Path) -> bool:
    """os.path.ismount misses a bind mount from the same file system (same device), such as a
    container's volume; the kernel's mount table names them all (Linux)."""
    if os.path.ismount(path):
        return True
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as table:
            points = {
                re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])  # \040: space
                for line in table
                if line.count(" ") > 4
            }
    except OSError:
        return False
    return str(path) in points


def check_name_fits(target: Path, extra: int, flag: str) -> None:
    """Every name on the way to ``target`` fits the file system, ``target``'s own with ``extra``
    characters more (the hidden sibling written first), so ENAMETOOLONG cannot come after the work."""
    existing = _nearest_existing(target.parent)
    try:
        limit = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    names = [*target.relative_to(existing).parts[:-1], target.name]
    lengths = [len(name.encode()) for name in names[:-1]] + [len(target.name.encode()) + extra]
    if max(lengths) > limit:
        longest = max(names, key=len)
        raise BertkitError(
            f"{flag} {str(target)[:60]}...: the name {longest[:20]}... is too long for the file system "
            f"({len(longest.encode())} bytes; names may have {limit} here, {limit - extra} for this "
            "output's own)",
            "choose a shorter name",
        )


def _nearest_existing(path: Path) -> Path:
    while not os.path.exists(path) and path != path.parent:  # os.path: False for a name too long, no OSError
        path = path.parent
    return path


def probe_writable(directory: Path, what: str) -> None:
    # os.access is wrong for root, read-only mounts and some network file systems: really try.
    try:
        remove_temporary(Path(tempfile.mkdtemp(prefix=".bertkit-probe-", dir=directory)))
    except OSError as exc:
        raise BertkitError(
            f"{what}: cannot write in {directory} ({exc.strerror or type(exc).__name__})", "choose a writable location"
        ) from exc


def clean_stale(output: Path, marker: str = META_FILE) -> None:
    """Remove what an interrupted save left next to ``output`` (a kill cannot run cleanup code):
    a staging sibling whose process is gone is stale. ``.NAME.old`` is the previous model, moved
    aside during a replace: garbage once the new one is in place, and put back if the kill came
    between the two renames (the interrupted run never succeeded, so the old model stands);
    ``marker`` is the file a complete one holds (an export's: export.json).
    """
    parent = output.parent
    if not parent.is_dir():
        return
    prefix = staging_prefix(output)
    for sibling in parent.iterdir():
        if sibling.name.startswith(prefix) and sibling.is_dir() and not _owner_alive(sibling.name[len(prefix) :]):
            remove_temporary(sibling)
    trash = trash_dir(output)
    try:
        if trash.is_dir() and not output.exists() and (trash / marker).is_file():
            trash.rename(output)
        elif trash.is_dir():
            remove_temporary(trash)
    except OSError:
        pass  # another process of the same launch got there first


def _owner_alive(suffix: str) -> bool:
    pid = suffix.split("-", 1)[0]
    if not pid.isdigit():
        return False  # not ours, or from a version without the pid: nobody can be writing it
    return process_alive(int(pid))


@contextmanager
def staged_output(output: Path):
    """Yield a hidden sibling directory to write into; it replaces ``output`` only on success,
    so an error or Ctrl-C never leaves a half-written model behind."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{staging_prefix(output)}{os.getpid()}-", dir=output.parent))
    try:
        yield staging
    except BaseException as exc:
        full = disk_full_error(exc, output.parent, output)
        remove_temporary(staging)
        if full is not None:
            raise full from exc
        raise
    try:
        follow_umask(staging)
        replace_dir(output, staging)
    except BaseException:
        remove_temporary(staging)  # the old output, if any, stands (put back by replace_dir)
        raise


def replace_dir(output: Path, staging: Path) -> None:
    """Rename ``staging`` to ``output``; an old ``output`` is moved aside first and removed after,
    or put back when the second rename fails. The old one is checked again here, not only before
    the work: a file the user put in it since is refused, named, and kept."""
    if not output.exists():
        staging.rename(output)
        return
    refuse_strangers(output, "replacing it with the new one")
    trash = trash_dir(output)
    remove_temporary(trash)
    output.rename(trash)
    try:
        staging.rename(output)
    except BaseException:
        trash.rename(output)
        raise
    remove_temporary(trash)


def disk_full_error(exc: BaseException, directory: Path, target: Path) -> OSError | None:
    """An ENOSPC OSError for ``target`` when ``exc`` is a write that failed because the disk is
    full, else None. Writers outside Python report it in their own types (safetensors' Rust
    writer: SafetensorError "os error 28"; torch.save's zip writer: RuntimeError "unexpected
    pos"; numpy: an OSError without errno), so the file system is asked: less than 1 MiB left there means full."""
    if not isinstance(exc, Exception) or (isinstance(exc, OSError) and exc.errno not in (None, errno.ENOSPC)):
        return None
    try:
        stats = os.statvfs(directory)
    except OSError:
        return None
    if (
        "os error 28" in str(exc)
        or getattr(exc, "errno", None) == errno.ENOSPC
        or stats.f_bavail * stats.f_frsize < (1 << 20)
    ):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    return None


def follow_umask(directory: Path) -> None:
    """mkdtemp makes the staging directory 0700 and some writers make files 0600 whatever the
    umask; a model directory is for loading by others too (another user, a container), so give
    it the modes a plain mkdir and open would have given."""
    os.umask(umask := os.umask(0))  # read it (the only way is to set it) and put it back
    for path in [directory, *directory.rglob("*")]:
        if not path.is_symlink():
            path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


@contextmanager
def atomic_file(path: Path, mode: str = "w"):
    """Yield a handle on a hidden temporary sibling of ``path`` that replaces ``path`` only once
    written and synced, so readers (and a crash) see the old file or the new one, never half."""
    path = Path(path)
    # unique per writer: two processes saving the same file must not write into one temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")
    try:
        with open(tmp, mode.replace("w", "x"), **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        full = disk_full_error(exc, path.parent, path)
        remove_temporary(tmp)
        if full is not None:
            raise full from exc
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_file(path) as handle:
        handle.write(text)


def write_json(path: Path, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
