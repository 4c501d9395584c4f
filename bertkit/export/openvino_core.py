"""One OpenVINO Core for the whole process, and a guard around OpenVINO work bertkit does not own.

OpenVINO's CPU plugin (2026.4, Linux) gives the thread that creates it a signal stack of its own
(AMX state needs a larger one) and, when that plugin is freed, puts back the stack it found and
unmaps its own. Two Cores freed out of order therefore leave the thread on an unmapped stack, and
the next signal it receives (Ctrl-C, SIGTERM, a test's self-interrupt) kills the process with
SIGSEGV. A Core that lives until exit never puts anything back; NNCF creates Cores of its own, so
their work runs inside ``signal_stack_kept``, which frees them and reinstates the stack from before.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
from contextlib import contextmanager


@functools.cache
def openvino_core():
    import openvino

    return openvino.Core()


class _SignalStack(ctypes.Structure):  # stack_t of <signal.h>
    _fields_ = [("sp", ctypes.c_void_p), ("flags", ctypes.c_int), ("size", ctypes.c_size_t)]


def current_signal_stack() -> _SignalStack | None:
    if not sys.platform.startswith("linux"):
        return None
    stack = _SignalStack()
    return stack if ctypes.CDLL(None).sigaltstack(None, ctypes.byref(stack)) == 0 else None


@contextmanager
def signal_stack_kept():
    openvino_core()  # its stack, installed first, stays valid for good
    before = current_signal_stack()
    try:
        yield
    finally:
        gc.collect()  # NNCF's engines and their Cores: freed here, not at some later signal
        now = current_signal_stack()
        if before is not None and now is not None and (now.sp, now.size) != (before.sp, before.size):
            ctypes.CDLL(None).sigaltstack(ctypes.byref(before), None)
