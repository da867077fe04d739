"""Conversations and rounds (pure; no I/O).

A ticket's messages come from the helpdesk, newest last. A **round** is what the customer wrote
since the last agent message (and since the last round this system already closed): it gets at
most one reply. Its id is deterministic, the id of the newest customer message it answers, so a
duplicate, a redelivery or a backfill of the same round is the same round, and a customer
message that arrives later makes a new one. A follow-up on a ticket waiting on the customer is
a round of its own, one per day (`followup-<date>`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .helpdesk.base import Message, Ticket

RoundKind = Literal["answer", "followup"]

_SAFE = re.compile(r"[A-Za-z0-9_\-]{1,64}")
_HASHED = re.compile(r"h[0-9a-f]{20}")


def round_id(message_id: str) -> str:
    """The round answering the customer message `message_id`: the id itself where it is a
    plain token (it appears in dedup ids and outbox keys), else a stable hash of it. An id that
    looks like a hash is hashed too, so a hash never equals another message's id."""
    if _SAFE.fullmatch(message_id) and not _HASHED.fullmatch(message_id):
        return message_id
    return "h" + hashlib.sha256(message_id.encode()).hexdigest()[:20]


def followup_round(day: dt.date) -> str:
    return f"followup-{day.isoformat()}"


@dataclass(frozen=True)
class Round:
    id: str
    kind: RoundKind
    messages: tuple[Message, ...]  # the customer messages this round answers (empty: follow-up)

    @property
    def message_ids(self) -> list[str]:
        return [m.id for m in self.messages]

    @property
    def newest(self) -> Message | None:
        return self.messages[-1] if self.messages else None


def _index(messages: Sequence[Message], message_id: str | None) -> int:
    if message_id is None:
        return -1
    for i, m in enumerate(messages):
        if m.id == message_id:
            return i
    return -1


def open_round(ticket: Ticket, *, covered: str | None = None) -> Round | None:
    """The round waiting for a reply: the customer messages after the last agent message and
    after `covered` (the newest message a round this system closed already answered).

    None when nothing waits: the last word is an agent's, or every customer message is covered.
    """
    messages = ticket.messages
    start = max(_index(messages, covered) + 1, 0)
    for i, m in enumerate(messages):
        if m.author == "agent":
            start = max(start, i + 1)
    waiting = tuple(m for m in messages[start:] if m.author == "customer")
    if not waiting:
        return None
    return Round(id=round_id(waiting[-1].id), kind="answer", messages=waiting)


def waiting_on_customer(ticket: Ticket) -> bool:
    """The last word (notes aside) is an agent's: the ticket waits on the customer."""
    spoken = [m for m in ticket.messages if m.author != "note"]
    return bool(spoken) and spoken[-1].author == "agent"


Change = Literal["none", "closed", "answered", "customer_wrote"]

REASONS: dict[Change, str] = {
    "none": "",
    "closed": "the ticket was closed",
    "answered": "a person answered in the helpdesk",
    "customer_wrote": "the customer wrote again",
}


def change_since(ticket: Ticket, seen_through: str | None) -> Change:
    """What happened on the ticket after the draft was made: it was closed, a person answered
    (an agent message after `seen_through`, the newest message the draft saw), or the customer
    wrote again (a customer message after it). A message the helpdesk no longer lists, or none
    named, leaves only the ticket's status to judge by."""
    if ticket.status == "closed":
        return "closed"
    position = _index(ticket.messages, seen_through)
    after = ticket.messages[position + 1 :] if position >= 0 else []
    if any(m.author == "agent" for m in after):
        return "answered"
    if any(m.author == "customer" for m in after):
        return "customer_wrote"
    return "none"


def newest_message(ticket: Ticket) -> str | None:
    return ticket.messages[-1].id if ticket.messages else None
