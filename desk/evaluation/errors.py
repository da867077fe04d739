"""The one error `desk eval` reports."""

from __future__ import annotations


class EvalError(Exception):
    """An expected failure: printed as one line, no traceback."""
