"""The one error type for user mistakes.

Anything the user can fix (a bad path, an unknown dataset, a missing column) is raised as
``BertkitError``; the CLI prints it as a single line with a hint and exits non-zero. Bugs are
left as ordinary exceptions so they keep their traceback.
"""

from __future__ import annotations


class BertkitError(Exception):
    """A problem with the user's input, printed as ``error: <message> (hint: <hint>)``."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message

    def __reduce__(self):  # whole across processes (a --seeds run in a child process), hint included
        return type(self), (self.message, self.hint)
