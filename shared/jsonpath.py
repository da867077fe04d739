"""Dotted paths into parsed JSON (`data.ticket.id`, `items.0.sku`, optional leading `$.`)."""

from __future__ import annotations

import functools
from typing import Any, Final


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def parts(path: str) -> list[str]:
    return list(_parts(path))


@functools.lru_cache(maxsize=256)  # the same few configured paths, read for every event
def _parts(path: str) -> tuple[str, ...]:
    path = path.strip()
    if path.startswith("$"):
        path = path[1:].lstrip(".")
    split = path.split(".") if path else []
    if any(p == "" for p in split):
        raise ValueError(f"bad JSON path {path!r}")
    return tuple(split)


def lookup(document: Any, path: str) -> Any:
    """The value at `path`, or `MISSING`."""
    current = document
    for part in _parts(path):
        if isinstance(current, dict):
            if part not in current:
                return MISSING
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return MISSING
    return current
