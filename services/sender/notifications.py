"""Supervisor notifications: one row per routed event, and its result event in the same commit.

The UNIQUE key `notify:<event msg id>` is what stops a second notification: a redelivery, a
duplicate of the event beyond the broker's window, or a second replica all meet the same row,
and once it is `sent` or `failed` nothing is posted again. The final state and its
`notify.sent` / `notify.failed` result event are written in one transaction; the sender's relay
publishes the result.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from sqlalchemy import Column, DateTime
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, col, select

from shared.logging import redact

from .store import ResultRow, now

NotifyStatus = Literal["pending", "sent", "failed"]
FINAL: frozenset[str] = frozenset({"sent", "failed"})


class NotificationRow(SQLModel, table=True):
    __tablename__ = "sender_notifications"

    key: str = Field(primary_key=True)  # notify:<event msg id>: the idempotency key
    ticket_id: str | None = Field(default=None, index=True)
    event_id: str
    event_type: str
    channel: str  # slack | log
    status: str = Field(default="pending", index=True)
    attempts: int = 0
    status_code: int | None = None
    last_error: str | None = None
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    sent_at: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


def create_tables(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine, tables=[NotificationRow.__table__])  # type: ignore[attr-defined]


def begin(engine: Engine, row: NotificationRow) -> NotificationRow:
    """The notification for `row.key`: `row`, newly stored, or the one stored before."""
    with Session(engine, expire_on_commit=False) as session:
        session.add(row)
        try:
            session.commit()
            return row
        except IntegrityError:  # seen before (or another replica stored it a moment ago)
            session.rollback()
        existing = session.get(NotificationRow, row.key)
        if existing is None:  # cannot happen with a primary key; be explicit rather than wrong
            raise RuntimeError(f"notification {row.key} neither stored nor found")
        return existing


def update(
    engine: Engine,
    key: str,
    *,
    status: NotifyStatus,
    channel: str,
    status_code: int | None,
    error: str | None,
    attempted: bool,
    result: ResultRow | None,
) -> None:
    """Store one outcome and, for a final one, its result event, in one transaction."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(NotificationRow, key)
        if row is None:
            return
        row.status = status
        row.channel = channel
        row.status_code = status_code
        row.last_error = redact(error)[:500] if error else None
        if attempted:
            row.attempts += 1
        if status == "sent":
            row.sent_at = now()
        session.add(row)
        if result is not None and session.get(ResultRow, result.id) is None:
            session.add(result)
        session.commit()


def get(engine: Engine, key: str) -> NotificationRow | None:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(NotificationRow, key)


def rows(engine: Engine) -> list[NotificationRow]:
    with Session(engine, expire_on_commit=False) as session:
        query = select(NotificationRow).order_by(col(NotificationRow.created_at))
        return list(session.exec(query).all())
