"""The body of a ticket event, as the demo helpdesk's webhooks (and the reconciler) send it.

    {"id": "evt_…", "type": "ticket.created", "created_at": "…",
     "data": {"ticket_id": "T1012", "updated_at": "…", "priority": "normal"}}

A new message in the conversation (`ticket.message.created`) also carries the ticket's status
and the message without its body (the drafter re-reads the ticket):

     "data": {"ticket_id": "T1012", "updated_at": "…", "priority": "high", "status": "open",
              "message": {"id": "T1012-m2", "author": "customer", "author_name": "…",
                          "created_at": "…"}}

and a closed ticket (`ticket.closed`) its status. `updated_at` is the ticket's version: an
event older than what a thread already handled is skipped. Other helpdesks' shapes are read
through the same paths where they match.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .. import clock, jsonpath
from .base import Message, Ticket

TICKET_CREATED = "ticket.created"
TICKET_MESSAGE_CREATED = "ticket.message.created"
TICKET_CLOSED = "ticket.closed"
TICKET_STALE = "ticket.stale"

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
    body: dict[str, Any] = {"ticket_id": ticket_id, "updated_at": version or now}
    if priority:
        body["priority"] = priority
    body.update(data)
    return {"id": event_id, "type": event_type, "created_at": now, "data": body}


def message_event(ticket: Ticket, message: Message, *, event_id: str) -> dict[str, Any]:
    """`ticket.message.created` for `message` on `ticket` (the ticket as it is after it)."""
    return ticket_event(
        TICKET_MESSAGE_CREATED,
        ticket.id,
        event_id=event_id,
        updated_at=ticket.updated_at,
        priority=ticket.priority,
        status=ticket.status,
        message={
            "id": message.id,
            "author": message.author,
            "author_name": message.author_name,
            "created_at": message.created_at.isoformat(),
        },
    )


def closed_event(ticket: Ticket, *, event_id: str) -> dict[str, Any]:
    """`ticket.closed` for `ticket` (as it is once closed)."""
    return ticket_event(
        TICKET_CLOSED, ticket.id, event_id=event_id, updated_at=ticket.updated_at, status="closed"
    )


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
        return clock.parse(value)
    except ValueError:
        return None


def ticket_ref(body: Any) -> TicketRef | None:
    """The ticket an event is about, and its version; None if the event names no ticket."""
    ticket_id = _first(body, TICKET_ID_PATHS)
    if not isinstance(ticket_id, str | int) or isinstance(ticket_id, bool):
        return None
    return TicketRef(str(ticket_id).strip(), parse_version(_first(body, VERSION_PATHS)))
