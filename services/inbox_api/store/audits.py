"""The audits of auto-sent replies the drafter is still to be told of (`inbox.audited`): a
reply a person found fine becomes an example for later drafts.

An audit is recorded with its item (`autosend.audit`, `audit_published` False) and told once
its reply is sent: a reply still being sent waits, one withdrawn or failed never went out and
is never told (it is no example of anything sent).
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from shared.inbox import Audited

from .tables import ItemRow, as_utc, now


def unpublished(engine: Engine, limit: int = 500) -> list[Audited]:
    """Audits of sent replies not yet on the bus, oldest first."""
    with Session(engine) as session:
        rows = session.exec(
            select(ItemRow)
            .where(col(ItemRow.audit_published).is_(False), ItemRow.status == "sent")
            .order_by(col(ItemRow.audited_at))
            .limit(limit)
        ).all()
        return [
            Audited(
                item_id=row.id,
                thread=row.thread,
                round=row.round or "r1",
                version=row.version,
                verdict=row.audit,  # type: ignore[arg-type]
                at=as_utc(row.audited_at) or now(),
            )
            for row in rows
            if row.audit in ("fine", "edited")
        ]


def mark_published(engine: Engine, item_id: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            update(ItemRow)
            .where(col(ItemRow.id) == item_id, col(ItemRow.audit_published).is_(False))
            .values(audit_published=True)
        )
