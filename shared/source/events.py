"""The body of a ticket event, as the demo helpdesk's webhooks (and the reconciler) send it.

    {"id": "evt_…", "type": "ticket.created", "created_at": "…",
     "data": {"ticket_id": "T1012", "updated_at": "…", "priority": "normal"}}

`updated_at` is the ticket's version: an event older than what a thread already handled is
skipped. Other helpdesks' shapes are read through the same paths where they match.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .. import jsonpath

TICKET_ID_PATHS = ("data.ticket_id", "data.ticket.id", "ticket_id", "ticket.id")
VERSION_PATHS = ("data.updated_at", "data.ticket.updated_at", "updated_at")


def ticket_event(
    event_type: str,
    ticket_id: str,
    *,
    event_id: str,
    updated_at: dt.datetime | str | None = None,
    priority: str | None = None,
    **data: Any,
) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    version = updated_at.isoformat() if isinstance(updated_at, dt.datetime) else updated_at
    body: dict[str, Any] = {"ticket_id": ticket_id, "updated_at": version or now, **data}
    if priority:
        body["priority"] = priority
    return {"id": event_id, "type": event_type, "created_at": now, "data": body}


@dataclass(frozen=True)
class TicketRef:
    ticket_id: str
    version: dt.datetime | None


def _first(document: Any, paths: tuple[str, ...]) -> Any:
    for path in paths:
        value = jsonpath.lookup(document, path)
        if value is not jsonpath.MISSING and value not in (None, ""):
            return value
    return None


def parse_version(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def ticket_ref(body: Any) -> TicketRef | None:
    """The ticket an event is about, and its version; None if the event names no ticket."""
    ticket_id = _first(body, TICKET_ID_PATHS)
    if not isinstance(ticket_id, str | int) or isinstance(ticket_id, bool):
        return None
    return TicketRef(str(ticket_id).strip(), parse_version(_first(body, VERSION_PATHS)))
