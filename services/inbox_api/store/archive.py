"""The inbox's archive policy: what is finished is kept `DESK_ARCHIVE_DAYS`, then deleted.

An item leaves once it is final (sent, failed, withdrawn, ignored, superseded) and untouched for
the archive period, with what hangs on it: its decision, its text-search row, its notices. The
trails that are not an item's (claims, supervisor notifications, published escalations and
digests) leave by their own time. What waits, is being redrafted or is being sent stays however
old. The period is longer than any stream keeps a message (`shared.settings.ARCHIVE_MIN_DAYS`),
so no `inbox.item` the broker could still deliver finds its row gone and comes back as new.
Deleted in batches, each its own short transaction, so the API is never held up for long.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from shared.db import delete_before, log_deleted

from . import search
from .tables import (
    OPEN_STATUSES,
    ClaimEventRow,
    DecisionRow,
    ItemRow,
    NoticeRow,
    NotificationRow,
)

log = logging.getLogger(__name__)

BATCH = 500
ARCHIVE_SECONDS = 3600.0  # an archive pass an hour (and one at start-up)


def archive(engine: Engine, before: dt.datetime, *, batch: int = BATCH) -> dict[str, int]:
    """Delete what finished before `before`; how many rows of each kind."""
    counts = {"items": 0, "decisions": 0, "claim events": 0, "notifications": 0, "notices": 0}
    items: Any = ItemRow.__table__  # type: ignore[attr-defined]
    decisions: Any = DecisionRow.__table__  # type: ignore[attr-defined]
    notices: Any = NoticeRow.__table__  # type: ignore[attr-defined]
    unpublished = select(1).where(
        decisions.c.item_id == items.c.id, decisions.c.published.is_(False)
    )
    while True:
        with Session(engine) as session:
            ids = list(
                session.scalars(
                    select(items.c.id)
                    .where(
                        items.c.status.not_in(OPEN_STATUSES),
                        items.c.updated_at < before,
                        ~unpublished.exists(),  # its decision is not yet on the bus: kept
                    )
                    .limit(batch)
                )
            )
            if not ids:
                break
            for table, column, name in (
                (decisions, decisions.c.item_id, "decisions"),
                (notices, notices.c.item_id, "notices"),
            ):
                gone: Any = session.execute(delete(table).where(column.in_(ids)))
                counts[name] += gone.rowcount
            search.remove(session, ids)
            gone = session.execute(delete(items).where(items.c.id.in_(ids)))
            counts["items"] += gone.rowcount
            session.commit()
    claims: Any = ClaimEventRow.__table__  # type: ignore[attr-defined]
    told: Any = NotificationRow.__table__  # type: ignore[attr-defined]
    counts["claim events"] += delete_before(engine, claims, claims.c.at, before)
    counts["notifications"] += delete_before(engine, told, told.c.at, before)
    counts["notices"] += delete_before(
        engine, notices, notices.c.created_at, before, notices.c.published.is_(True)
    )
    log_deleted(log, before, counts)
    return counts
