"""What the store refuses, each mapped to one HTTP status by the API and the web page."""

from __future__ import annotations


class NotFound(LookupError):
    pass


class Conflict(Exception):
    """409: the item is not waiting, or the version the reviewer saw is no longer current."""


class Invalid(ValueError):
    """422: a decision the item does not allow, or one that is incomplete."""
