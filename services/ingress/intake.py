"""From a verified request to a stored event: the pure parts of intake (no I/O).

Reads the event id and type, builds the NATS headers (original request headers, auth and
broker-reserved headers dropped, our own `Desk-*` headers added) and the dedup id.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared import headers as h
from shared import ids, jsonpath, subjects
from shared.envelope import decode_json
from shared.errors import PermanentError
from shared.signatures import (
    basic_verify,
    github_verify,
    standard_verify,
    stripe_verify,
)

from .sources import Source

# Never copied into the stored event: credentials, and headers the broker would act on.
DROPPED = {"authorization", "proxy-authorization", "cookie", "set-cookie", "content-length"}
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # control characters a header value may not carry
_CONTROL_ID = re.compile(r"[\x00-\x1f]")  # control characters an event id may not carry
_RESERVED = (h.BROKER_PREFIX.lower(), h.OWN_PREFIX.lower())
MAX_ID_LENGTH = 256


class RequestError(Exception):
    """A request we refuse, with its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Event:
    source: str
    id: str
    type: str
    subject: str
    msg_id: str
    headers: dict[str, str]


def verify(source: Source, lower_headers: Mapping[str, str], body: bytes, now: float) -> None:
    """Raise SignatureError (401) or TimestampError (400)."""
    secrets = source.secret_values()
    given = lower_headers.get(source.signature_header.lower())
    if source.scheme == "standard":
        standard_verify(secrets, lower_headers, body, tolerance=source.tolerance, now=now)
    elif source.scheme == "stripe":
        stripe_verify(secrets, given, body, tolerance=source.tolerance, now=now)
    elif source.scheme == "github":
        github_verify(secrets, given, body)
    else:
        basic_verify(secrets, given)


def parse_json(body: bytes) -> Any:
    """The body as JSON, if the system can carry it (the router decodes it the same way)."""
    try:
        return decode_json(body)
    except PermanentError as exc:
        raise RequestError(400, f"body is not usable JSON ({exc})") from None


def _field(
    document: Any, path: str | None, header: str | None, lower_headers: Mapping[str, str]
) -> str | None:
    if path:
        value = jsonpath.lookup(document, path)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    if header:
        value = lower_headers.get(header.lower(), "").strip()
        if value:
            return value
    return None


def event_for(
    source: Source,
    document: Any,
    lower_headers: Mapping[str, str],
    raw_headers: list[tuple[str, str]],
    received: dt.datetime,
) -> Event:
    event_id = _field(document, source.id_path, source.id_header, lower_headers)
    if not event_id:
        raise RequestError(400, "event id missing")
    if len(event_id) > MAX_ID_LENGTH or _CONTROL_ID.search(event_id):
        raise RequestError(400, "event id is not usable (too long or control characters)")
    event_type = source.type_value or _field(
        document, source.type_path, source.type_header, lower_headers
    )
    if not event_type:
        raise RequestError(400, "event type missing")
    try:
        subject = subjects.event(source.name, event_type)
    except subjects.SubjectError:
        raise RequestError(
            400, "event type must be letters, digits, '-', '_' and single dots"
        ) from None
    msg_id = ids.ingress(source.name, event_id)
    return Event(
        source=source.name,
        id=event_id,
        type=event_type,
        subject=subject,
        msg_id=msg_id,
        headers=nats_headers(raw_headers, source.name, event_id, event_type, msg_id, received),
    )


@functools.lru_cache(maxsize=512)  # the same few names come with every request
def _kept_name(name: str) -> bool:
    lower = name.lower()
    return not (lower in DROPPED or lower.startswith(_RESERVED) or not _HEADER_NAME.match(name))


def nats_headers(
    raw_headers: list[tuple[str, str]],
    source: str,
    event_id: str,
    event_type: str,
    msg_id: str,
    received: dt.datetime,
) -> dict[str, str]:
    kept: dict[str, str] = {}
    for name, value in raw_headers:
        if not _kept_name(name):
            continue
        clean = " ".join(value.split())
        if _CONTROL.search(clean):
            continue
        kept[name] = f"{kept[name]}, {clean}" if name in kept else clean
    kept.update(
        {
            h.SOURCE: source,
            h.EVENT_ID: event_id,
            h.EVENT_TYPE: event_type,
            h.RECEIVED_AT: received.isoformat(timespec="milliseconds"),
            h.CORRELATION_ID: msg_id,
        }
    )
    return kept
