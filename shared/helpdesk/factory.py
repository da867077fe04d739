"""Open the configured source system: `sql` (a helpdesk database) or `http` (a JSON REST API)."""

from __future__ import annotations

from typing import Any, Literal

from .base import SourceSystem
from .http import HttpSource
from .sql import SqlSource

SourceKind = Literal["sql", "http"]


def open_source(kind: SourceKind, url: str, **http_options: Any) -> SourceSystem:
    """A source for `url`: a SQLAlchemy URL for `sql`, the API's base URL for `http`.

    `http_options` are `HttpSource`'s keyword arguments (paths, auth, timeouts, JSON keys); the
    `sql` source ignores them, so callers may pass one set of settings for either kind.
    """
    if kind == "sql":
        return SqlSource(url)
    if kind == "http":
        return HttpSource(url, **http_options)
    raise ValueError(f"unknown source kind {kind!r}: expected 'sql' or 'http'")
