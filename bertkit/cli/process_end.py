"""How a command's process ends once its work is done and its output written.

A process that was one rank of several on CPUs (gloo) sometimes aborts in the C++ teardown that
follows Python's own (SIGABRT, "terminate called without an active exception": gloo's worker
threads outlive the interpreter, pytorch#190489; upstream's own atexit fix, pytorch#179291, was
abandoned as more complicated than it looked). The launcher then reports the whole run as failed
though every rank had finished. The engine's atexit handler that ends the process group made it
rarer, not impossible: CI saw it once more, on ``predict`` under torchrun (stop 61).

So a rank leaves the way multiprocessing's children do: Python's threads are joined and its atexit
handlers run (the process group ends, log files flush), the standard streams are flushed, then
``os._exit`` with the command's exit code skips the teardown that aborts. Any other process exits
as usual. Torch is looked at only if the command imported it: ``bertkit --help`` stays light.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def in_process_group() -> bool:
    """Whether this process is (still) a rank of a torch.distributed process group."""
    distributed = sys.modules.get("torch.distributed")
    return distributed is not None and distributed.is_available() and distributed.is_initialized()


def leave(code: object) -> NoReturn:
    """Exit with ``code`` as ``sys.exit`` reads it (None is 0, a number itself, anything else is
    printed to stderr and exits 1), after the cleanup Python would do but before its teardown."""
    status = _exit_status(code)
    threading._shutdown()  # as the interpreter and multiprocessing's children do first: executors end, threads join
    atexit._run_exitfuncs()  # the process group's end (engine), logging's final flush, temporary folders
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone or a stream closed: nothing more to give it
            pass
    os._exit(status)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
