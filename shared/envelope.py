"""The event envelope: CloudEvents 1.0 attributes in structured JSON mode, one decode path.

Every message the system produces (work items, inbox items, decisions, results) is an
`Envelope`; only the raw webhook bodies on EVENTS are stored as they arrived.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import clock
from .errors import PermanentError, first_error

CONTENT_TYPE = "application/cloudevents+json"
# Deeper JSON is refused where it enters: no webhook needs it, and every envelope that carries
# it must serialize it again (pydantic stops at 255 levels, Python's json near 1,000).
MAX_DEPTH = 64


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Envelope(BaseModel):
    """A CloudEvents 1.0 event. `correlationid` is our extension attribute (lowercase, per spec)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    specversion: str = "1.0"
    id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1)
    source: str = Field(min_length=1)
    type: str = Field(min_length=1)
    subject: str | None = None
    time: dt.datetime = Field(default_factory=_now)
    datacontenttype: str = "application/json"
    correlationid: str | None = None
    data: Any = None

    @field_validator("specversion")
    @classmethod
    def _v1(cls, value: str) -> str:
        if value != "1.0":
            raise ValueError(f"unsupported CloudEvents specversion {value!r}")
        return value

    @field_validator("time")
    @classmethod
    def _aware(cls, value: dt.datetime) -> dt.datetime:
        return clock.aware(value)

    def to_bytes(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()


def encode(envelope: Envelope) -> bytes:
    return envelope.to_bytes()


def decode(data: bytes, headers: Mapping[str, str] | None = None) -> Envelope:
    """Bytes to an `Envelope`; anything else is a `PermanentError` (dead-lettered, not retried)."""
    try:
        return Envelope.model_validate_json(data)
    except ValidationError as exc:
        raise PermanentError(f"not a CloudEvents envelope: {first_error(exc, 'body')}") from None


def decode_json(data: bytes, headers: Mapping[str, str] | None = None) -> Any:
    """Bytes to a JSON value an envelope can carry (raw webhook bodies); anything else is a
    `PermanentError`: not JSON, numbers too long for Python, nesting deeper than `MAX_DEPTH`,
    or a string with an unpaired surrogate (which has no UTF-8 encoding)."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:  # ValueError: also bad UTF-8, too many digits
        raise PermanentError(f"not JSON: {exc.__class__.__name__} at byte {_pos(exc)}") from None
    # fewer brackets than MAX_DEPTH cannot nest deeper (in any encoding json.loads reads)
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and _too_deep(value):
        raise PermanentError(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        pydantic_core.to_json(value)  # what every envelope carrying it will do
    except pydantic_core.PydanticSerializationError:
        raise PermanentError(
            "JSON that cannot be written again as UTF-8 (e.g. an unpaired surrogate)"
        ) from None
    return value


def _too_deep(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)] if isinstance(value, dict | list) else []
    while stack:  # containers only
        item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def _pos(exc: Exception) -> int:
    return int(getattr(exc, "pos", getattr(exc, "start", 0)) or 0)
