"""The one error `desk inbox` reports: a line for stderr and the exit status."""

from __future__ import annotations


class InboxError(Exception):
    """A one-line message for stderr; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
