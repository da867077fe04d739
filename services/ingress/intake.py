"""From a verified request to a stored event: the pure parts of intake (no I/O).

Reads the event id and type, builds the NATS headers (the source's allowlist of request
headers, never a credential or a broker-reserved header, and our own `Desk-*` headers) and the
dedup id. An id only an unsigned header carries is not believed: the event is named by a hash
of its signed body instead, so a replay under a fresh delivery id is still the same event.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared import headers as h
from shared import ids, jsonpath, subjects, trace
from shared.envelope import decode_json
from shared.errors import PermanentError
from shared.signatures import (
    basic_verify,
    body_digest,
    github_verify,
    standard_verify,
    stripe_verify,
)

from .sources import DEFAULT_STORED_HEADERS, Source, credential_header

# Never copied into the stored event, whatever a source's allowlist says: credentials, and
# headers the broker would act on.
DROPPED = {"authorization", "proxy-authorization", "cookie", "set-cookie", "content-length"}
DEFAULT_ALLOWED = frozenset(DEFAULT_STORED_HEADERS)
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
    digest: str  # of the body: what a scheme without a timestamp dedups replays by


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
) -> tuple[str | None, str | None]:
    """The value, and the header it came from (None: from the body)."""
    if path:
        value = jsonpath.lookup(document, path)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip(), None
    if header:
        value = lower_headers.get(header.lower(), "").strip()
        if value:
            return value, header
    return None, None


def event_for(
    source: Source,
    document: Any,
    body: bytes,
    lower_headers: Mapping[str, str],
    raw_headers: list[tuple[str, str]],
    received: dt.datetime,
) -> Event:
    digest = body_digest(body)
    event_id, id_header = _field(document, source.id_path, source.id_header, lower_headers)
    if not event_id:
        raise RequestError(400, "event id missing")
    if id_header is not None and not source.signs_header(id_header):
        # Anyone replaying a captured request can write any delivery id: name it by what the
        # signature covers. (The delivery header itself is still stored, for tracing.)
        event_id = digest
    elif source.id_with_digest:
        event_id = f"{event_id}#{digest}"
    if len(event_id) > MAX_ID_LENGTH or _CONTROL_ID.search(event_id):
        raise RequestError(400, "event id is not usable (too long or control characters)")
    event_type = (
        source.type_value
        or _field(document, source.type_path, source.type_header, lower_headers)[0]
    )
    if not event_type:
        raise RequestError(400, "event type missing")
    try:
        subject = subjects.event(source.name, event_type)
    except subjects.SubjectError:
        raise RequestError(
            400, "event type must be letters, digits, '-', '_' and single dots"
        ) from None
    if source.event_types is not None and event_type not in source.event_types:
        raise RequestError(400, "event type not accepted for this source (see its event_types)")
    msg_id = ids.ingress(source.name, event_id)
    headers = nats_headers(
        raw_headers,
        source.name,
        event_id,
        event_type,
        msg_id,
        received,
        allowed=source.kept_headers(),
    )
    return Event(
        source=source.name,
        id=event_id,
        type=event_type,
        subject=subject,
        msg_id=msg_id,
        headers=headers,
        digest=digest,
    )


@functools.lru_cache(maxsize=512)  # the same few names come with every request
def _storable(name: str) -> str | None:
    """The lower-case name of a header that may be stored at all; None if it never may."""
    lower = name.lower()
    if lower in DROPPED or lower.startswith(_RESERVED) or not _HEADER_NAME.match(name):
        return None
    return None if credential_header(lower) else lower


def nats_headers(
    raw_headers: list[tuple[str, str]],
    source: str,
    event_id: str,
    event_type: str,
    msg_id: str,
    received: dt.datetime,
    *,
    allowed: frozenset[str] = DEFAULT_ALLOWED,
) -> dict[str, str]:
    """The stored event's headers: those request headers `allowed` names (lower-case), never a
    credential, then ours, the trace the event starts (or continues: a valid `traceparent` from
    the request) among them."""
    kept: dict[str, str] = {}
    caller: trace.Trace | None = None  # a webhook sender's own trace is continued
    for name, value in raw_headers:
        lower = _storable(name)
        if lower == trace.HEADER and caller is None:
            caller = trace.Trace.parse(value)
        if lower is None or lower not in allowed:
            continue
        clean = " ".join(value.split())
        if _CONTROL.search(clean):
            continue
        kept[name] = f"{kept[name]}, {clean}" if name in kept else clean
    kept[trace.HEADER] = (caller.child() if caller else trace.Trace.new()).header
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
