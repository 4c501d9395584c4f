"""What a command decides while it works, said when it is decided.

The API prints nothing: it returns data. But a user must see the facts they could act on (the
precision and threads chosen, a busy machine, the class weights, a resume point, truncated texts)
before the long work begins, not when the command returns. So the layers below the CLI call
``notice(...)`` at the moment a fact is decided; whoever listens (the CLI, a notebook, a test)
receives it at once. With no listener, nothing happens: a result's ``notices`` list still carries
the same text for programmatic callers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Event:
    """``kind``: what it is about (``runtime``, ``machine``, ``weights``, ``resume``, ``data``,
    ``progress``, ``warning``...); ``text``: the one line a person reads; ``data``: the values."""

    kind: str
    text: str
    data: dict = field(default_factory=dict)


Listener = Callable[[Event], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def notice(kind: str, text: str, **data) -> Event:
    """Tell every listener, now; returns the event (callers may also keep ``text`` in a result)."""
    event = Event(kind, text, data)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(event)
    return event


@contextmanager
def listening(listener: Listener):
    """Receive every event ``notice`` sends while the block runs (listeners nest)."""
    with _lock:
        _listeners.append(listener)
    try:
        yield listener
    finally:
        with _lock:
            _listeners.remove(listener)
