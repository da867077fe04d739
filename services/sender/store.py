"""The outbox: one row per action that leaves the building, and the result events to relay.

The UNIQUE outbox key `<ticket>/<round>/<action>` is what stops a second send: a redelivered
decision, a replay, or a second sender replica all hit the constraint, never a read-then-write
check.
The outbox row and its result event are written in one transaction (the transactional outbox);
a relay publishes the result events and marks them published.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import JSON, Column, DateTime, update
from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel, col, func, select

from shared import clock, trace
from shared import logging as desk_logging
from shared.db import (
    add_missing_columns,
    add_missing_indexes,
    database_url,
    insert_once,
    make_engine,
)
from shared.logging import redact

DeliveryStatus = Literal["pending", "delivered", "failed", "unknown", "withdrawn"]


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class OutboxRow(SQLModel, table=True):
    __tablename__ = "sender_outbox"

    key: str = Field(primary_key=True)  # <ticket>/<round>/<action>: the idempotency key
    item_id: str
    thread: str = Field(index=True)
    version: int
    ticket_id: str | None = None
    action: str
    final_text: str
    model_draft: str | None = None
    decision_type: str
    reviewer: str
    channel: str
    delivery: str = Field(default="pending", index=True)
    attempts: int = 0
    last_error: str | None = None
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    delivered_at: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    round: str | None = None
    subject: str | None = None
    recipient: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    in_reply_to: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    auto: bool | None = None  # approved by the category's auto-send policy, not by a person
    seen_through: str | None = None  # the newest message the sent draft saw (what it answers)


class ResultRow(SQLModel, table=True):
    """A result event waiting for (or done with) the relay."""

    __tablename__ = "sender_results"

    id: str = Field(primary_key=True)
    type: str
    subject: str | None = None
    data: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    published: bool = Field(default=False, index=True)
    # the trace of the work that produced it (shared.trace): the event continues it
    traceparent: str | None = Field(default_factory=trace.current_header)
    # the event it descends from (the decision's, the webhook's): the work being handled
    correlation_id: str | None = Field(default_factory=desk_logging.correlation_id_var.get)


class AuditRow(SQLModel, table=True):
    """Every delivery attempt, append-only."""

    __tablename__ = "sender_audit"

    id: int | None = Field(default=None, primary_key=True)
    outbox_key: str = Field(index=True)
    channel: str
    attempt: int
    status_code: int | None = None
    duration_ms: int
    outcome: str
    error: str | None = None
    at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))


class ItemRow(SQLModel, table=True):
    """The items the sender has seen: what an accept sends, and which version is current."""

    __tablename__ = "sender_items"

    item_id: str = Field(primary_key=True)
    thread: str = Field(index=True)
    version: int
    ticket_id: str | None = None
    action: str
    args: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    round: str | None = Field(default=None, index=True)
    seen_through: str | None = None  # the newest message the draft saw
    in_helpdesk: bool | None = None  # False: a mail conversation, no ticket to re-read
    recipient: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    in_reply_to: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # the address of the newest message of the round it answers, where the conversation knows
    # it (a mail conversation): the only address its reply may go to
    round_author: str | None = None
    # the texts of the knowledge the draft cites: what an auto-sent reply's links may come from
    knowledge: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # when it was first seen (for the archive; None: seen before the archive existed)
    seen_at: dt.datetime | None = Field(
        default_factory=lambda: now(),
        sa_column=Column(DateTime(timezone=True), nullable=True, index=True),
    )


TABLES = [OutboxRow, ResultRow, AuditRow, ItemRow]


def create_tables(engine: Engine) -> None:
    tables = [t.__table__ for t in TABLES]  # type: ignore[attr-defined]
    SQLModel.metadata.create_all(engine, tables=tables)
    add_missing_columns(engine, tables)
    add_missing_indexes(engine, tables)


def see_item(engine: Engine, item: ItemRow) -> None:
    """Remember an item; one seen before (a redelivery, or another replica a moment ago) is
    left as it was stored."""
    insert_once(engine, item)


def get_item(engine: Engine, item_id: str) -> ItemRow | None:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(ItemRow, item_id)


def current_version(engine: Engine, thread: str, round_id: str | None = None) -> int | None:
    """The newest version the sender has seen of a thread (of one of its rounds, if named)."""
    query = select(func.max(ItemRow.version)).where(ItemRow.thread == thread)
    if round_id is not None:
        query = query.where(ItemRow.round == round_id)
    with Session(engine, expire_on_commit=False) as session:
        return session.exec(query).one()


def record(engine: Engine, outbox: OutboxRow | None, result: ResultRow | None) -> bool:
    """Insert the outbox row and/or its result event in one transaction; False if it existed."""
    return insert_once(engine, outbox, result)


def get_outbox(engine: Engine, key: str) -> OutboxRow | None:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(OutboxRow, key)


def settle(
    engine: Engine,
    key: str,
    *,
    delivery: DeliveryStatus,
    error: str | None,
    result: ResultRow | None,
) -> None:
    """Store a delivery outcome and (for a final one) its result event, in one transaction."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(OutboxRow, key)
        if row is None:
            return
        row.delivery = delivery
        row.last_error = redact(error)[:500] if error else None
        if delivery == "delivered":
            row.delivered_at = now()
        session.add(row)
        if result is not None and session.get(ResultRow, result.id) is None:
            session.add(result)
        session.commit()


def audit(
    engine: Engine,
    key: str,
    channel: str,
    *,
    status_code: int | None,
    duration_ms: int,
    outcome: str,
    error: str | None,
) -> int:
    """Append one attempt; returns the attempt number."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(OutboxRow, key)
        attempt = (row.attempts if row else 0) + 1
        if row is not None:
            row.attempts = attempt
            session.add(row)
        session.add(
            AuditRow(
                outbox_key=key,
                channel=channel,
                attempt=attempt,
                status_code=status_code,
                duration_ms=duration_ms,
                outcome=outcome,
                error=redact(error)[:500] if error else None,  # e-mails and phones masked
                at=now(),
            )
        )
        session.commit()
        return attempt


def pending_results(engine: Engine, limit: int = 100) -> list[ResultRow]:
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(ResultRow)
            .where(col(ResultRow.published).is_(False))
            .order_by(col(ResultRow.created_at))
            .limit(limit)
        ).all()
        for r in rows:
            r.created_at = clock.aware(r.created_at)
        return list(rows)


def mark_published(engine: Engine, result_ids: Sequence[str]) -> None:
    """The relay's pass published these: one UPDATE for all of them."""
    if not result_ids:
        return
    with engine.begin() as connection:
        connection.execute(
            update(ResultRow).where(col(ResultRow.id).in_(result_ids)).values(published=True)
        )


def outbox_rows(engine: Engine) -> list[OutboxRow]:
    with Session(engine, expire_on_commit=False) as session:
        return list(session.exec(select(OutboxRow).order_by(col(OutboxRow.created_at))).all())


def read_outbox(configured: str | None, var_dir: Path) -> list[OutboxRow]:
    """Every outbox row, oldest first, from the database the sender keeps them in: `configured`
    (DESK_DATABASE_URL) when set, else the sender's SQLite file under `var_dir`."""
    engine = make_engine(database_url(configured, var_dir, "sender"))
    try:
        return outbox_rows(engine)
    finally:
        engine.dispose()


def audit_rows(engine: Engine) -> list[AuditRow]:
    with Session(engine, expire_on_commit=False) as session:
        return list(session.exec(select(AuditRow).order_by(col(AuditRow.id))).all())
