"""From a work item to the thread it belongs to (pure; no I/O).

Different events about the same ticket meet in one thread (the ticket id); a stale reminder
has its own thread per day (`<ticket>:<date>`); a mail is its own "ticket" (`mail-<hash>`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from shared.envelope import Envelope
from shared.errors import PermanentError
from shared.source.events import parse_version, ticket_ref

STALE = "ticket.stale"
MAIL = "email.received"


@dataclass(frozen=True)
class Work:
    thread: str
    ticket_id: str
    inline_ticket: dict[str, Any] | None
    trigger: dict[str, str]
    version: dt.datetime | None

    def start(self) -> dict[str, Any]:
        """The input that starts a new round on this thread."""
        return {
            "thread": self.thread,
            "ticket_id": self.ticket_id,
            "inline_ticket": self.inline_ticket,
            "trigger": self.trigger,
            "event_version": self.version.isoformat() if self.version else None,
            "feedback": [],
            "warnings": [],
            "decision": {},
            "outcome": "",
        }


def work_for(envelope: Envelope) -> Work:
    trigger = {"source": envelope.source, "type": envelope.type, "event_id": envelope.id}
    body = envelope.data
    if envelope.type == MAIL:
        return _mail(envelope, body, trigger)
    ref = ticket_ref(body)
    if ref is None or not ref.ticket_id:
        raise PermanentError(f"{envelope.type} event names no ticket")
    thread = ref.ticket_id
    if envelope.type == STALE:
        day = _day(body) or envelope.time.date()
        thread = f"{ref.ticket_id}:{day.isoformat()}"
    return Work(thread, ref.ticket_id, None, trigger, ref.version)


def newer(event: dt.datetime | None, handled: str | None) -> bool:
    """Whether an event should start a new round on a thread that already finished one."""
    handled_at = parse_version(handled)
    if event is None or handled_at is None:
        return False
    return event > handled_at


def _day(body: Any) -> dt.date | None:
    data = body.get("data") if isinstance(body, dict) else None
    value = data.get("date") if isinstance(data, dict) else None
    try:
        return dt.date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _mail(envelope: Envelope, body: Any, trigger: dict[str, str]) -> Work:
    if not isinstance(body, dict) or not body.get("MessageID"):
        raise PermanentError("email.received event without a MessageID")
    digest = hashlib.sha256(str(body["MessageID"]).encode()).hexdigest()[:16]
    sender = str(body.get("From", ""))
    name = sender.split("<")[0].strip().strip('"') or sender
    address = sender.split("<")[-1].rstrip(">").strip()
    received = envelope.time.isoformat()
    thread = f"mail-{digest}"
    ticket: dict[str, Any] = {
        "id": thread,
        "customer": {"id": address, "name": name, "email": address},
        "subject": str(body.get("Subject", "")),
        "body": str(body.get("TextBody", "")),
        "status": "open",
        "priority": "normal",
        "created_at": received,
        "updated_at": received,
    }
    return Work(thread, thread, ticket, trigger, envelope.time)
