"""The sender's archive policy: what is finished is kept `DESK_ARCHIVE_DAYS`, then deleted.

An outbox row is what stops a second send of its round (its UNIQUE key), so it stays until no
stream can deliver its decision again: the archive period is longer than any stream keeps a
message (`shared.settings.ARCHIVE_MIN_DAYS`). A row still pending, or whose delivery is unknown
(a person must look), stays however old; so does a result event the relay has not published.
An item seen stays while an accept could still come for it (the newest of its conversation
with nothing sent for it); delivery attempts and notifications leave by their own time.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from shared.db import delete_before, log_deleted

from .notifications import FINAL, NotificationRow
from .store import AuditRow, ItemRow, OutboxRow, ResultRow

log = logging.getLogger(__name__)

ARCHIVE_SECONDS = 3600.0  # an archive pass an hour (and one at start-up)
DONE = ("delivered", "failed", "withdrawn")  # deliveries nothing more happens to


def archive(engine: Engine, before: dt.datetime) -> dict[str, int]:
    """Delete what finished before `before`; how many rows of each kind."""
    outbox: Any = OutboxRow.__table__  # type: ignore[attr-defined]
    results: Any = ResultRow.__table__  # type: ignore[attr-defined]
    audit: Any = AuditRow.__table__  # type: ignore[attr-defined]
    items: Any = ItemRow.__table__  # type: ignore[attr-defined]
    told: Any = NotificationRow.__table__  # type: ignore[attr-defined]
    # an item stays while an accept could still come for it: the newest of its conversation,
    # with nothing sent for it (a draft waiting for longer than the archive period)
    later = items.alias("later")
    newer = select(1).where(later.c.thread == items.c.thread, later.c.version > items.c.version)
    sent = select(1).where(outbox.c.item_id == items.c.item_id)
    done = or_(newer.exists(), sent.exists())
    counts = {
        "items": delete_before(engine, items, items.c.seen_at, before, done),
        "outbox rows": delete_before(
            engine, outbox, outbox.c.created_at, before, outbox.c.delivery.in_(DONE)
        ),
        "result events": delete_before(
            engine, results, results.c.created_at, before, results.c.published.is_(True)
        ),
        "delivery attempts": delete_before(engine, audit, audit.c.at, before),
        "notifications": delete_before(
            engine, told, told.c.created_at, before, told.c.status.in_(sorted(FINAL))
        ),
    }
    log_deleted(log, before, counts)
    return counts
