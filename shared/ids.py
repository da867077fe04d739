"""Deterministic dedup ids (`Nats-Msg-Id` values and idempotency keys), one builder per producer.

The same business fact always yields the same id, so a retry, a replica or a backfill of
something that already arrived is dropped by the broker or refused by a unique key.
"""

from __future__ import annotations

import datetime as dt


def ingress(source: str, event_id: str) -> str:
    return f"{source}:{event_id}"


def router(event_msg_id: str, target: str) -> str:
    return f"{event_msg_id}>{target}"


def inbox_item(thread: str, version: int) -> str:
    return f"inbox.item:{thread}:v{version}"


def decision(thread: str, version: int) -> str:
    return f"decision:{thread}:v{version}"


def outbox(thread: str, action: str) -> str:
    return f"{thread}/{action}"


def reconciler(event_type: str, ticket: str) -> str:
    return f"reconciler:{event_type}:{ticket}"


def stale(ticket: str, day: dt.date) -> str:
    return f"cron:stale:{ticket}:{day.isoformat()}"


def replay(dead_letter_id: int) -> str:
    """Replaying one dead letter twice stores one message."""
    return f"replay:{dead_letter_id}"


def seen(event_type: str, ticket: str) -> str:
    """Processed-ledger key: an event of this type about this ticket has been handled."""
    return f"seen:{event_type}:{ticket}"


def replied(ticket: str) -> str:
    """Processed-ledger key: a reply to this ticket has been sent."""
    return f"replied:{ticket}"


def dead_letter(stream: str, stream_seq: int) -> str:
    """One dead letter per stored message, however often the runtime retries writing it."""
    return f"dlq:{stream}:{stream_seq}"
