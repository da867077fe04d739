"""A page cursor: where the last page ended (a time and an id), opaque to the client.

`encode` gives a URL-safe string; `decode` reads one back, or raises `ValueError` for a string
that is not one (each caller says so in its own words: a 422, a `PermanentError`)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json

from . import clock


def encode(at: dt.datetime, key: str) -> str:
    raw = json.dumps([clock.utc(at).isoformat(), key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> tuple[dt.datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, key = json.loads(raw)
        return clock.utc(dt.datetime.fromisoformat(stamp)), str(key)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError("not a cursor") from exc
