"""Times as the services keep them: aware. A naive time (SQLite gives stored times back
naive, some helpdesks and HTTP-dates write none) is taken to be UTC."""

from __future__ import annotations

import datetime as dt


def aware(value: dt.datetime) -> dt.datetime:
    """`value` with a zone: its own, or UTC where it has none."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def utc(value: dt.datetime) -> dt.datetime:
    """`value` in UTC (a naive one taken to be UTC already)."""
    return aware(value).astimezone(dt.UTC)


def parse(text: str) -> dt.datetime:
    """An ISO 8601 time ("Z" included) as an aware datetime; ValueError if it is none."""
    return aware(dt.datetime.fromisoformat(text))
