"""The error `desk up` stops with, raised by every part of the stack it starts."""

from __future__ import annotations


class StackError(RuntimeError):
    """The stack cannot start as configured (`desk up` says why and exits 1)."""
