"""Notices for the notifier: service-level escalations and queue digests, recorded before they
are published. (The words: a notice is what the inbox raises; the sender's notifier posts it, or
a routed `notify` event, to the supervisors' webhook as a notification, whose result the inbox
records as a `NotificationRow` to show on the ticket's items.)

Each notice is a row whose primary key is its idempotency key, so however often the scan runs,
on however many replicas, an escalation exists once per threshold per round of a conversation
(`sla.near:<thread>:<round>`, `sla.past:<thread>:<round>`) and a digest once per queue per slot
(`digest:<queue>:<slot start>`). The relay publishes the rows the broker has not acknowledged,
with that key as the message id; the notifier posts each key once (its own UNIQUE row).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, case, func, literal, not_, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from shared.db import insert_once
from shared.inbox import Notice, QueueSummary

from . import targets
from .tables import ItemRow, NoticeRow, as_utc

NO_QUEUE = "-"  # a digest key's queue part for work no rule put in a queue


def escalate(
    engine: Engine, at: dt.datetime, mentions: Mapping[str, Sequence[str]] | None = None
) -> list[Notice]:
    """Record an escalation for every threshold a waiting item has reached and not yet been
    escalated for; the new ones. `mentions`: per queue, the Slack member ids a `sla.past`
    notice mentions."""
    mentions = mentions or {}
    made: list[Notice] = []
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(ItemRow)
            .where(ItemRow.status == "waiting", col(ItemRow.near_at).is_not(None))
            .where(col(ItemRow.near_at) <= at)
            .where(not_(_escalated(at)))
            .order_by(col(ItemRow.near_at))
            .limit(500)
        ).all()
    for row in rows:
        standing = targets.standing(row.status, as_utc(row.near_at), as_utc(row.due_at), at)
        reached = ["sla.near"] + (["sla.past"] if standing == "past" else [])
        for kind in reached:
            notice = Notice(
                id=f"{kind}:{row.thread}:{row.round or 'r1'}",
                kind=kind,  # type: ignore[arg-type]
                at=at,
                queue=row.queue,
                item_id=row.id,
                ticket_id=row.ticket_id,
                priority=row.priority,
                category=row.category,
                customer=_name(row.customer),
                summary=row.summary,
                due_at=as_utc(row.due_at),
                mention=list(mentions.get(row.queue or "", ())) if kind == "sla.past" else [],
            )
            if _record(engine, notice, row.id):
                made.append(notice)
    return made


def _key(kind: str) -> Any:
    """The notice key of an item row's round, in SQL (`||` on both databases)."""
    return (
        literal(kind + ":")
        + col(ItemRow.thread)
        + literal(":")
        + func.coalesce(col(ItemRow.round), literal("r1"))
    )


def _escalated(at: dt.datetime) -> Any:
    """The round has every escalation it can have reached by `at` already."""
    past = select(NoticeRow.id).where(NoticeRow.id == _key("sla.past")).exists()
    near = select(NoticeRow.id).where(NoticeRow.id == _key("sla.near")).exists()
    return or_(past, and_(col(ItemRow.due_at) > at, near))


def digest(engine: Engine, at: dt.datetime, slot: dt.datetime) -> list[Notice]:
    """Record this slot's digest for each queue where something waits; the new ones."""
    made = []
    for summary in summaries(engine, at):
        if summary.waiting == 0:
            continue
        notice = Notice(
            id=f"digest:{summary.queue or NO_QUEUE}:{slot.isoformat()}",
            kind="digest",
            at=at,
            queue=summary.queue,
            digest=summary,
        )
        if _record(engine, notice, None):
            made.append(notice)
    return made


def summaries(engine: Engine, at: dt.datetime) -> list[QueueSummary]:
    """What waits in each queue: how many, how many near or past their target, the oldest."""
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(  # type: ignore[call-overload]
                col(ItemRow.queue),
                func.count(),
                func.min(ItemRow.created_at),
                func.sum(_when(col(ItemRow.due_at) <= at)),
                func.sum(_when((col(ItemRow.near_at) <= at) & (col(ItemRow.due_at) > at))),
            )
            .where(ItemRow.status == "waiting")
            .group_by(col(ItemRow.queue))
        ).all()
    found = []
    for queue, count, oldest, past, near in rows:
        first = as_utc(oldest)
        age = max(0.0, (at - first).total_seconds()) if first else 0.0
        found.append(
            QueueSummary(
                queue=queue,
                waiting=int(count),
                near=int(near or 0),
                past=int(past or 0),
                oldest_seconds=age,
            )
        )
    return sorted(found, key=lambda s: (s.queue is None, s.queue or ""))


def _when(condition: Any) -> Any:
    return case((condition, 1), else_=0)


def _record(engine: Engine, notice: Notice, item_id: str | None) -> bool:
    """Store a notice once; False if its key exists already (another scan or replica)."""
    with Session(engine) as session:
        if session.get(NoticeRow, notice.id) is not None:
            return False
    row = NoticeRow(
        id=notice.id,
        kind=notice.kind,
        queue=notice.queue,
        item_id=item_id,
        body=notice.model_dump(mode="json"),
        created_at=notice.at,
    )
    return insert_once(engine, row)


def unpublished(engine: Engine, limit: int = 200) -> list[Notice]:
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(NoticeRow)
            .where(col(NoticeRow.published).is_(False))
            .order_by(col(NoticeRow.created_at), col(NoticeRow.id))
            .limit(limit)
        ).all()
    return [Notice.model_validate(r.body) for r in rows]


def mark_published(engine: Engine, notice_id: str) -> None:
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(NoticeRow, notice_id)
        if row is not None and not row.published:
            row.published = True
            session.add(row)
            session.commit()


def _name(customer: dict[str, Any] | None) -> str | None:
    name = (customer or {}).get("name")
    return str(name) if name else None
