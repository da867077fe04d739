"""The rest of what the inbox reads: one item in full (its versions, decisions and
notifications), the counts, the waiting gauge's figures, and the review log."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import case, func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from . import claims
from .documents import decision_json, detail_json
from .tables import STATUSES, DecisionRow, ItemRow, NotificationRow, as_utc, now


def get_item(engine: Engine, item_id: str) -> dict[str, Any] | None:
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, item_id)
        if row is None:
            return None
        versions = session.exec(
            select(ItemRow).where(ItemRow.thread == row.thread).order_by(col(ItemRow.version))
        ).all()
        decisions = session.exec(
            select(DecisionRow)
            .where(DecisionRow.thread == row.thread)
            .order_by(col(DecisionRow.id))
        ).all()
        notified = (
            session.exec(
                select(NotificationRow)
                .where(NotificationRow.ticket_id == row.ticket_id)
                .order_by(col(NotificationRow.at))
            ).all()
            if row.ticket_id
            else []
        )
        detail = detail_json(row)
        detail["versions"] = [
            {
                "id": v.id,
                "version": v.version,
                "status": v.status,
                "round": v.round,
                "cause": v.cause,
                "reply": v.action_request.get("args", {}).get("reply"),
                "feedback": v.feedback,
                "created_at": as_utc(v.created_at).isoformat(),  # type: ignore[union-attr]
            }
            for v in versions
        ]
        detail["decisions"] = [decision_json(d) for d in decisions]
        held = claims.holder(session, row.thread, now())
        detail["claim"] = claims.claim_json(held) if held is not None else None
        detail["claims"] = claims.trail(session, row.thread)
        detail["notifications"] = [
            {
                "type": n.type,
                "about": n.about,
                "channel": n.channel,
                "at": as_utc(n.at).isoformat(),  # type: ignore[union-attr]
            }
            for n in notified
        ]
        return detail


def stats(engine: Engine) -> dict[str, Any]:
    with Session(engine, expire_on_commit=False) as session:
        by_status = dict(
            session.exec(select(ItemRow.status, func.count()).group_by(ItemRow.status)).all()
        )
        by_category = {
            category or "none": count
            for category, count in session.exec(
                select(ItemRow.category, func.count()).group_by(ItemRow.category)
            ).all()
        }
        oldest = session.exec(
            select(ItemRow)
            .where(ItemRow.status == "waiting")
            .order_by(col(ItemRow.created_at), col(ItemRow.id))
            .limit(1)
        ).first()
        mix: dict[str, dict[str, int]] = {}
        for category, kind, count in session.exec(
            select(DecisionRow.category, DecisionRow.type, func.count()).group_by(
                DecisionRow.category, DecisionRow.type
            )
        ).all():
            mix.setdefault(category or "none", {})[kind] = count
    oldest_json = None
    if oldest is not None:
        created = as_utc(oldest.created_at)
        assert created is not None
        oldest_json = {
            "id": oldest.id,
            "created_at": created.isoformat(),
            "age_seconds": int((now() - created).total_seconds()),
        }
    return {
        "by_status": {s: int(by_status.get(s, 0)) for s in STATUSES},
        "by_category": {k: int(v) for k, v in by_category.items()},
        "oldest_waiting": oldest_json,
        "decision_mix": mix,
    }


def drafts_since(engine: Engine, days: int) -> dict[str, Any]:
    """How many drafts (item versions) were made in the last `days` x 24 h, and what the model
    charged for them: the daily report's figures, without reading any item."""
    since = now() - dt.timedelta(days=days)
    with Session(engine, expire_on_commit=False) as session:
        costs = session.exec(select(ItemRow.cost).where(col(ItemRow.created_at) >= since)).all()
    usd = sum(float(c.get("usd") or 0) for c in costs if isinstance(c, dict))
    return {"days": days, "count": len(costs), "cost_usd": round(usd, 6)}


@dataclass(frozen=True)
class Waiting:
    """What waits for a reviewer: how many, the oldest, and per (queue, priority) the oldest;
    per queue, how many are past their target. A queue of None: work no rule put in a queue."""

    count: int = 0
    oldest: dt.datetime | None = None
    lanes: dict[tuple[str | None, str | None], dt.datetime] = field(default_factory=dict)
    past: dict[str | None, int] = field(default_factory=dict)


def waiting(engine: Engine) -> Waiting:
    at = now()
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(  # type: ignore[call-overload]
                col(ItemRow.queue),
                col(ItemRow.priority),
                func.count(),
                func.min(ItemRow.created_at),
                func.sum(case((col(ItemRow.due_at) <= at, 1), else_=0)),
            )
            .where(ItemRow.status == "waiting")
            .group_by(col(ItemRow.queue), col(ItemRow.priority))
        ).all()
    lanes: dict[tuple[str | None, str | None], dt.datetime] = {}
    past: dict[str | None, int] = {}
    for queue, priority, _count, oldest, late in rows:
        lanes[(queue, priority)] = as_utc(oldest)  # type: ignore[assignment]
        past[queue] = past.get(queue, 0) + int(late or 0)
    count = sum(int(r[2]) for r in rows)
    return Waiting(count, min(lanes.values(), default=None), lanes, past)


def review_log(engine: Engine) -> list[dict[str, Any]]:
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(select(DecisionRow).order_by(col(DecisionRow.id))).all()
        return [decision_json(r) for r in rows]
