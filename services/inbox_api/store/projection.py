"""The projection: what the bus says about items, stored.

Idempotent: an item already stored, or an older version arriving after a newer one, changes
nothing that matters (the older one is kept as history, superseded). A final status stays final.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import String, and_, bindparam, func, or_, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from shared.db import insert_row
from shared.inbox import InboxItem, Overdue, Withdrawal

from . import search
from .tables import ItemRow, NotificationRow, as_utc, now
from .targets import Targets

FINAL = ("sent", "failed")  # what became of an item that nothing after may change
_ITEMS = ItemRow.__table__.c  # type: ignore[attr-defined]


def project(
    engine: Engine,
    item: InboxItem,
    traceparent: str | None = None,
    targets: Targets | None = None,
) -> bool:
    """Store one item version; True if it was new. Order-independent: versions of one thread
    may arrive in any order, and concurrently, and end in the same rows.

    Core statements in one transaction (the row, its text for search, and on SQLite the
    versions it supersedes): an item seen already fails its INSERT on the primary key and
    changes nothing. (The ORM's read-first and unit of work cost twice the CPU.)"""
    stored_at = now()
    one_writer = engine.dialect.name == "sqlite"
    try:
        with engine.begin() as connection:
            since = _round_started(connection, item)
            near_at, due_at = (targets or Targets()).times(since, item.priority, item.category)
            stored = ItemRow(
                id=item.id,
                thread=item.thread,
                version=item.version,
                status="waiting",
                category=item.category,
                ticket_id=item.ticket_id,
                summary=item.summary,
                description=item.description,
                action=item.action_request.action,
                action_request=item.action_request.model_dump(mode="json"),
                config=item.config.model_dump(mode="json"),
                trigger_source=item.trigger.source,
                trigger_type=item.trigger.type,
                trigger_event_id=item.trigger.event_id,
                cost=item.cost.model_dump(mode="json"),
                warnings=list(item.warnings),
                feedback=list(item.feedback),
                created_at=item.created_at,
                updated_at=stored_at,
                round=item.round,
                round_kind=item.round_kind,
                cause=item.cause,
                priority=item.priority,
                ticket_status=item.ticket_status,
                customer=item.customer.model_dump(mode="json") if item.customer else None,
                conversation=[m.model_dump(mode="json") for m in item.conversation],
                round_messages=list(item.round_messages),
                traceparent=traceparent,
                citations=[c.model_dump(mode="json") for c in item.citations],
                instructions=list(item.instructions),
                examples=list(item.examples),
                queue=item.trigger.queue,
                waiting_since=since,
                near_at=near_at,
                due_at=due_at,
                no_draft=item.no_draft,
            )
            insert_row(connection, stored)
            search.add(connection, stored)  # its text, for the list's search
            if one_writer:  # the insert holds the write lock: every committed version is seen
                connection.execute(_STALE, {"of_thread": item.thread, "at": stored_at})
    except IntegrityError:  # stored already (a redelivery, or another replica a moment ago)
        return False
    if not one_writer:
        supersede_older(engine, item.thread)
    return True


_FIRST_OF_ROUND = (
    select(ItemRow.waiting_since, ItemRow.created_at)
    .where(
        col(ItemRow.thread) == bindparam("of_thread"),
        col(ItemRow.round) == bindparam("of_round"),
        col(ItemRow.version) < bindparam("before"),
    )
    .order_by(col(ItemRow.version))
    .limit(1)
)


def _round_started(connection: Connection, item: InboxItem) -> dt.datetime:
    """When the item's round began to wait: its first stored version's time, or this one's."""
    if item.version <= 1:
        return item.created_at  # no version of the thread comes before the first
    first = connection.execute(
        _FIRST_OF_ROUND,
        {"of_thread": item.thread, "of_round": item.round, "before": item.version},
    ).first()
    if first is None:
        return item.created_at
    waiting_since, created_at = first
    return as_utc(waiting_since) or as_utc(created_at) or item.created_at


def _stale() -> Any:
    """Every version but the newest that still waits (or waits for its redraft) is superseded,
    and so is one of the newest's round that was accepted too late: the drafter and the sender
    refuse a decision on an older version of a round, so no result would ever end it (if the
    sender did act on it first, its result replaces this status). One statement, compiled once:
    the newest version and its round are read by it, not loaded first."""
    newest = (
        select(ItemRow.version, ItemRow.round)
        .where(col(ItemRow.thread) == bindparam("of_thread"))
        .order_by(col(ItemRow.version).desc())
        .limit(1)
        .subquery()
    )
    return (
        update(ItemRow)
        .where(
            col(ItemRow.thread) == bindparam("of_thread"),
            col(ItemRow.version) < select(newest.c.version).scalar_subquery(),
            or_(
                col(ItemRow.status).in_(("waiting", "redrafting")),
                and_(
                    col(ItemRow.status) == "sending",
                    col(ItemRow.round) == select(newest.c.round).scalar_subquery(),
                ),
            ),
        )
        .values(status="superseded", updated_at=bindparam("at", type_=_ITEMS.updated_at.type))
    )


_STALE = _stale()


def supersede_older(engine: Engine, thread: str) -> None:
    """Supersede what a newer version of `thread` replaced (`_STALE`), in a transaction of its
    own: run after each insert has committed, so whichever of two concurrent inserts commits
    last sees both rows (on PostgreSQL a transaction does not see another's uncommitted row;
    on SQLite `project` runs it inside the insert's transaction instead, which holds the one
    write lock and so sees every committed version)."""
    with engine.begin() as connection:
        connection.execute(_STALE, {"of_thread": thread, "at": now()})


_STATUS_AND_RESULT = select(ItemRow.status, ItemRow.result).where(
    ItemRow.id == bindparam("item_id")
)
_SET_RESULT = (
    update(ItemRow)
    .where(
        col(ItemRow.id) == bindparam("item_id"),
        # never from a final status to another
        or_(col(ItemRow.status).not_in(FINAL), col(ItemRow.status) == bindparam("new_status")),
    )
    .values(
        status=bindparam("new_status"),
        result=bindparam("new_result", type_=_ITEMS.result.type),
        withdrawn_reason=func.coalesce(bindparam("reason", type_=String), _ITEMS.withdrawn_reason),
        updated_at=bindparam("at", type_=_ITEMS.updated_at.type),
    )
)


def set_result(engine: Engine, item_id: str, status: str, result: dict[str, Any]) -> bool:
    """Record what became of an item (sent, failed, ignored, withdrawn); False if unknown.

    A final status stays final: a late `item.withdrawn` never turns a sent reply back. (Two
    columns read and one conditional UPDATE, each compiled once.)"""
    with engine.begin() as connection:
        found = connection.execute(_STATUS_AND_RESULT, {"item_id": item_id}).first()
        if found is None:
            return False
        if tuple(found) == (status, result):
            return True
        reason = str(result.get("reason") or "") if status == "withdrawn" else ""
        connection.execute(
            _SET_RESULT,
            {
                "item_id": item_id,
                "new_status": status,
                "new_result": result,
                "reason": reason or None,
                "at": now(),
            },
        )
        return True


def withdraw(engine: Engine, notice: Withdrawal) -> bool:
    """The drafter took a waiting draft back: nobody may decide it; False if not projected."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, notice.item_id)
        if row is None:
            return False
        if row.status in ("waiting", "redrafting"):
            row.status = "withdrawn"
            row.withdrawn_reason = notice.reason
        elif row.status != "withdrawn":
            return True  # decided or replaced first: the notice changes nothing
        # The sender's item.withdrawn result may have come first (both follow this notice):
        # the ticket's status now is only in the notice.
        row.withdrawn_reason = row.withdrawn_reason or notice.reason
        row.ticket_status = notice.ticket_status or row.ticket_status
        row.updated_at = now()
        session.add(row)
        session.commit()
        return True


def mark_overdue(engine: Engine, notice: Overdue) -> bool:
    """The stale scan found this draft still waiting; False if not projected yet."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, notice.item_id)
        if row is None:
            return False
        if row.overdue_since is None:
            row.overdue_since = notice.day
            row.updated_at = now()
            session.add(row)
            session.commit()
        return True


def record_notification(engine: Engine, result_id: str, kind: str, data: dict[str, Any]) -> None:
    ticket = str(data.get("ticket_id") or "")
    if not ticket:
        return
    with Session(engine, expire_on_commit=False) as session:
        if session.get(NotificationRow, result_id) is not None:
            return
        session.add(
            NotificationRow(
                id=result_id,
                ticket_id=ticket,
                type=kind,
                channel=data.get("channel"),
                at=now(),
                about=str(data.get("event_type") or "") or None,
            )
        )
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
