"""One bertkit run at a time writes an output: a second run aimed at the same ``--output`` while the
first is still at work is refused before it does any, in one line naming the first run's process.

Without it both runs pass the checks made before the work (the output did not exist yet), both
train, and the one that finishes last replaces the other's model though neither was given
--overwrite (with --save-every their checkpoints would mix in OUT.checkpoints/ too).

A command that writes outputs runs as ``@writes_outputs``; inside it, ``check_output_dir`` takes
the output's lock before it looks at what is there (so do predict's and embed's streamed files and
``--ray``'s local directories), and the lock is held until the command
returns or fails. The lock is a symbolic link ``.OUT.bertkit-lock`` beside the output whose target
is the writer's process id: made with its content in one atomic call (also on NFS), and with no
data block, so a full disk still takes it (a plain file's id would need one). A lock whose process
is gone (a kill -9) is stale and taken over; the process that holds it may check the output again
(a wrapping command, or a notebook rerunning a cell). Only the main process of a launch takes it
(``RANK`` 0 or unset): the other processes of an ``accelerate launch`` write nothing. ``bertkit
tune`` takes none: several processes may run one study into one output by design (its own lock
guards the study). Processes on other machines sharing the directory are not told apart from
dead ones, and a file system without symbolic links gets no lock.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from pathlib import Path

from bertkit.errors import BertkitError
from bertkit.model_dir.removal import remove_made_empty, remove_temporary

LOCK_SUFFIX = ".bertkit-lock"  # a temporary name (model_dir/ownership.TEMPORARY): bertkit's, removable
_HELD: contextvars.ContextVar[contextlib.ExitStack | None] = contextvars.ContextVar("bertkit_writer", default=None)


def writes_outputs(command):
    """The outputs ``command`` locks (``check_output_dir`` does, and ``lock_for_writing`` where an output
    is no model directory) stay locked until it ends."""

    @functools.wraps(command)
    def locked(*args, **kwargs):
        with contextlib.ExitStack() as held:
            token = _HELD.set(held)
            try:
                return command(*args, **kwargs)
            finally:
                _HELD.reset(token)

    return locked


def lock_for_writing(output: Path) -> None:
    """Take ``output``'s lock until the running ``@writes_outputs`` command ends (outside one: none)."""
    held = _HELD.get()
    if held is None or not _main_process():
        return
    lock = lock_file(output)
    missing = [folder for folder in (lock.parent, *lock.parent.parents) if not folder.exists()]  # deepest first
    lock.parent.mkdir(parents=True, exist_ok=True)
    held.callback(remove_made_empty, missing)  # a run that fails before its save leaves no empty folders
    if _take(lock, output):
        held.callback(remove_temporary, lock)


def lock_file(output: Path) -> Path:
    return output.parent / f".{output.name}{LOCK_SUFFIX}"


def _main_process() -> bool:
    return os.environ.get("RANK", "0") in ("", "0")


def _take(lock: Path, output: Path) -> bool:
    """Make ``lock`` for this process; False when this process holds it already (whoever took it
    first removes it), or where the file system has no symbolic links (no lock then)."""
    for _ in range(3):  # a stale lock is removed and the make tried again; another run may win that race
        try:  # a symlink is made with its content in one call, and with no data block (a full disk takes it)
            os.symlink(str(os.getpid()), lock)
        except FileExistsError:
            holder = _holder(lock)
            if holder == os.getpid():
                return False
            if holder is not None:
                raise BertkitError(
                    f"--output {output} is being written by another bertkit run (process {holder})",
                    f"wait for it to end or choose another --output; if no such run is alive, delete {lock}",
                ) from None
            remove_temporary(lock)  # stale: its process is gone
            continue
        except OSError:
            return False
        return True
    raise BertkitError(f"--output {output}: other bertkit runs keep taking its lock ({lock})", "try again")


def _holder(lock: Path) -> int | None:
    """The live process holding ``lock``, or None when it is stale."""
    try:
        text = os.readlink(lock)
    except OSError:  # gone since, or not a lock bertkit made
        return None
    return int(text) if text.isdigit() and process_alive(int(text)) else None


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a live process of another user
    except OverflowError:
        return False  # not a process id
    return True
