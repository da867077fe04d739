"""From a work item to the thread it belongs to (pure; no I/O).

Every event about a ticket meets in one thread, the ticket id: a new message, a close, a stale
reminder and a redelivery all land where the conversation is. A mail is a conversation of its
own (`mail-<hash>` of its sender's address and its Message-ID: a sender picks its Message-ID,
so two senders never share a conversation by choosing the same one); a reply mail (In-Reply-To
/ References) joins the conversation of the mail it answers only if its sender takes part in
that conversation, which the handler looks up in the ledger (`joined`). Header values reach
the conversation through `shared.mail`: one line, one sender.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from shared import mail
from shared.envelope import Envelope
from shared.errors import PermanentError
from shared.helpdesk.events import ticket_ref
from shared.inbox import QUEUE_PATTERN

STALE = "ticket.stale"
MAIL = "email.received"
CLOSED = "ticket.closed"

Kind = Literal["ticket", "stale", "mail"]


@dataclass(frozen=True)
class Work:
    thread: str
    ticket_id: str
    inline_ticket: dict[str, Any] | None
    trigger: dict[str, Any]
    version: dt.datetime | None
    kind: Kind = "ticket"
    day: dt.date | None = None  # a stale reminder's day
    mail_id: str | None = None  # a mail's own Message-ID
    mail_parents: tuple[str, ...] = field(default=())  # the Message-IDs it answers, nearest first
    mail_from: str | None = None  # a mail's sender, normalised (shared.mail.normal_address)
    notes: tuple[str, ...] = field(default=())  # what the reviewer must know about the event

    def start(self, plan: dict[str, Any] | None = None) -> dict[str, Any]:
        """The input that starts a new round on this thread."""
        return {
            "thread": self.thread,
            "ticket_id": self.ticket_id,
            "inline_ticket": self.inline_ticket,
            "trigger": self.trigger,
            "event_version": self.version.isoformat() if self.version else None,
            "plan": plan or {"kind": "answer"},
            "feedback": [],
            "notes": list(self.notes),
            "warnings": [],
            "decision": {},
            "outcome": "",
            "cause": None,
            "withdrawn": "",
        }

    def in_thread(self, thread: str) -> Work:
        """The same mail, joined to an earlier mail's conversation."""
        assert self.inline_ticket is not None
        ticket = {**self.inline_ticket, "id": thread}
        return dataclasses.replace(self, thread=thread, ticket_id=thread, inline_ticket=ticket)

    def noting(self, note: str) -> Work:
        return dataclasses.replace(self, notes=(*self.notes, note))


def claimed_note(thread: str) -> str:
    """What the reviewer sees on a mail that names a conversation its sender is not part of."""
    return (
        f"claims to reply to conversation {thread}, which its sender does not take part in: "
        "kept apart as a conversation of its own"
    )


def work_for(envelope: Envelope, work_seq: int | None = None) -> Work:
    """The work an envelope on WORK asks for; `work_seq`, the stream sequence it is stored at,
    goes into the trigger so that auto-send can read the router's message itself."""
    trigger: dict[str, Any] = {
        "source": envelope.source,
        "type": envelope.type,
        "event_id": envelope.id,
    }
    if work_seq is not None:
        trigger["work_seq"] = work_seq
    queue = (envelope.model_extra or {}).get("queue")  # the router's extension attribute
    if queue is not None:
        if not isinstance(queue, str) or not re.fullmatch(QUEUE_PATTERN, queue):
            raise PermanentError("the work item's queue is not a queue name")
        trigger["queue"] = queue
    body = envelope.data
    if envelope.type == MAIL:
        return _mail(envelope, body, trigger)
    ref = ticket_ref(body)
    if ref is None or not ref.ticket_id:
        raise PermanentError(f"{envelope.type} event names no ticket")
    if envelope.type == STALE:
        day = _day(body) or envelope.time.date()
        return Work(ref.ticket_id, ref.ticket_id, None, trigger, ref.version, "stale", day)
    return Work(ref.ticket_id, ref.ticket_id, None, trigger, ref.version)


def _day(body: Any) -> dt.date | None:
    data = body.get("data") if isinstance(body, dict) else None
    value = data.get("date") if isinstance(data, dict) else None
    try:
        return dt.date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


_ANGLE_ID = re.compile(r"<([^<>\s]+)>")


def message_ids(value: Any) -> list[str]:
    """Message-IDs in a header value (`<a@x> <b@y>`, or one bare id), in order."""
    if not isinstance(value, str) or not value.strip():
        return []
    found = _ANGLE_ID.findall(value)
    return found or [value.strip().strip("<>").strip()]


def _header(body: dict[str, Any], name: str) -> Any:
    """A mail header from the event: a top-level field (`InReplyTo`), or Postmark's `Headers`
    list of `{Name, Value}`."""
    compact = name.replace("-", "")
    if body.get(compact):
        return body[compact]
    for entry in body.get("Headers") or []:
        if isinstance(entry, dict) and str(entry.get("Name", "")).lower() == name.lower():
            return entry.get("Value")
    return None


def mail_thread(message_id: str, sender: str) -> str:
    """A new mail conversation's id: its first mail's sender (normalised) and Message-ID."""
    named = f"{mail.normal_address(sender)}\n{message_id}"
    return "mail-" + hashlib.sha256(named.encode()).hexdigest()[:16]


def _mail(envelope: Envelope, body: Any, trigger: dict[str, Any]) -> Work:
    if not isinstance(body, dict) or not body.get("MessageID"):
        raise PermanentError("email.received event without a MessageID")
    own = mail.single_line(body["MessageID"]).strip("<>").strip()
    parents = [*message_ids(_header(body, "In-Reply-To"))]
    parents += reversed(message_ids(_header(body, "References")))
    parents = [p for p in dict.fromkeys(parents) if p and p != own]
    try:  # one line, one address: nothing else reaches a reply's recipient or subject
        sender = mail.sender(body.get("From"))
    except mail.HeaderError as exc:
        raise PermanentError(f"{exc}: no reply could say whom it answers") from None
    name, address = sender.name or sender.address, sender.address
    received = envelope.time.isoformat()
    thread = mail_thread(own, address)
    ticket: dict[str, Any] = {
        "id": thread,
        "customer": {"id": sender.normal, "name": name, "email": address},
        "subject": mail.decoded(body.get("Subject", "")),
        "body": str(body.get("TextBody", "")),
        "status": "open",
        "priority": "normal",
        "created_at": received,
        "updated_at": received,
        "messages": [
            {
                "id": "m" + hashlib.sha256(own.encode()).hexdigest()[:16],
                "author": "customer",
                "author_name": name,
                "author_email": address,
                "body": str(body.get("TextBody", "")),
                "created_at": received,
            }
        ],
    }
    return Work(
        thread,
        thread,
        ticket,
        trigger,
        envelope.time,
        "mail",
        None,
        own,
        tuple(parents),
        mail_from=sender.normal,
        notes=_stand_in(body),
    )


def _stand_in(body: dict[str, Any]) -> tuple[str, ...]:
    """What the reviewer must know of a mail intake stored without its body (too large, or
    unreadable: services/ingress/imap.py)."""
    quarantined = body.get("Quarantined")
    if not isinstance(quarantined, dict):
        return ()
    reason = mail.single_line(quarantined.get("reason"), 40) or "unreadable"
    size = quarantined.get("size")
    bytes_ = f", {size} bytes" if isinstance(size, int) else ""
    return (f"the mail's body was not stored ({reason}{bytes_}): read it in the mailbox",)
