"""Deterministic dedup ids (`Nats-Msg-Id` values and idempotency keys), one builder per producer.

The same business fact always yields the same id, so a retry, a replica or a backfill of
something that already arrived is dropped by the broker or refused by a unique key.
"""

from __future__ import annotations

import datetime as dt
import hashlib


def ingress(source: str, event_id: str) -> str:
    return f"{source}:{event_id}"


def router(event_msg_id: str, target: str) -> str:
    return f"{event_msg_id}>{target}"


def inbox_item(thread: str, round_id: str, version: int) -> str:
    return f"inbox.item:{thread}:{round_id}:v{version}"


def decision(thread: str, round_id: str, version: int) -> str:
    return f"decision:{thread}:{round_id}:v{version}"


def outbox(ticket: str, round_id: str, action: str) -> str:
    """One reply per round: a second approval in the same round hits this UNIQUE key; the
    next round of the conversation has a key of its own."""
    return f"{ticket}/{round_id}/{action}"


def withdrawn(thread: str, round_id: str, version: int) -> str:
    """A waiting draft taken back (the ticket closed, a person answered in the helpdesk)."""
    return f"withdrawn:{thread}:{round_id}:v{version}"


def audited(thread: str, round_id: str, version: int) -> str:
    """A person's audit of an auto-sent reply, told to the drafter: once per item version."""
    return f"audited:{thread}:{round_id}:v{version}"


def overdue(thread: str, version: int, day: dt.date) -> str:
    """A waiting draft marked overdue by the stale scan: once a day."""
    return f"overdue:{thread}:v{version}:{day.isoformat()}"


def notify(event_msg_id: str) -> str:
    """One supervisor notification per routed event."""
    return f"notify:{event_msg_id}"


def mail(message_id: str) -> str:
    """Processed-ledger key: the conversation a mail (by its Message-ID) belongs to."""
    return "mail:" + hashlib.sha256(message_id.strip().encode()).hexdigest()[:32]


def mail_participant(thread: str, address: str) -> str:
    """Drafter ledger key: that address (normalised) takes part in that mail conversation."""
    return f"mail-party:{thread}:" + hashlib.sha256(address.encode()).hexdigest()[:32]


def reconciler(event_type: str, ticket: str) -> str:
    return f"reconciler:{event_type}:{ticket}"


def reminded(thread: str, day: dt.date) -> str:
    """Drafter ledger key: a stale reminder of that day marked the thread's draft overdue."""
    return f"reminded:{thread}:{day.isoformat()}"


def sent(thread: str, round_id: str) -> str:
    """Drafter ledger key: the reply to that round of the thread went out (`reply.sent`)."""
    return f"sent:{thread}:{round_id}"


def unsent(thread: str, round_id: str) -> str:
    """Drafter ledger key: the approved reply to that round did not go out (`reply.withdrawn`),
    and the drafter has done what that asks (drafted the round again, or nothing)."""
    return f"unsent:{thread}:{round_id}"


def stale(ticket: str, day: dt.date) -> str:
    return f"cron:stale:{ticket}:{day.isoformat()}"


def replay(dead_letter_id: int) -> str:
    """Replaying one dead letter twice stores one message."""
    return f"replay:{dead_letter_id}"


def seen(event_type: str, ticket: str) -> str:
    """Processed-ledger key: an event of this type about this ticket has been handled."""
    return f"seen:{event_type}:{ticket}"


def dead_letter(stream: str, stream_seq: int) -> str:
    """One dead letter per stored message, however often the runtime retries writing it."""
    return f"dlq:{stream}:{stream_seq}"
