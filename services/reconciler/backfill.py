"""Backfill: tickets the source has that no event ever announced get one, with a deterministic id.

Pages through tickets changed since the stored cursor minus a look-back margin, compares each
with the processed-ledger, publishes the missing ones, and advances the cursor only after the
page's publishes are acknowledged. A ticket changed within the last `grace` seconds is not
judged yet (its webhook may be on its way: counting it would report a loss that is only a
delay), and the cursor stays before it so that a later run looks again. A crash mid-page
repeats that page, harmlessly, since the msg id `reconciler:ticket.created:<id>` makes a repeat
(or a second replica) a duplicate.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from shared import headers as h
from shared import ids, subjects, telemetry
from shared.bus import Bus
from shared.helpdesk import SourceSystem, Ticket
from shared.helpdesk.events import ticket_event
from shared.ledger import Ledger

from .bookmarks import CURSOR, Bookmarks

log = logging.getLogger(__name__)

SOURCE = "reconciler"
CREATED = "ticket.created"

SCANNED = Counter("desk_reconciler_tickets_scanned_total", "Tickets compared with the ledger.")
GAPS = Counter("desk_reconciler_gaps_total", "Tickets no event had announced.", ["type"])
GAPS.labels(CREATED)  # exists at 0 from the start, so increase() sees the first gap
BACKFILLED = Counter("desk_reconciler_backfilled_total", "Events published by the backfill.")
RUN_SECONDS = Histogram("desk_reconciler_run_seconds", "Duration of a backfill run.")
LAST_SUCCESS = Gauge(
    "desk_reconciler_last_success_timestamp_seconds", "When a backfill run last completed."
)


@dataclass
class BackfillCounts:
    """What one backfill pass found and did."""

    scanned: int = 0
    deferred: int = 0  # changed within the grace period, not yet announced: looked at again
    gaps: int = 0
    backfilled: int = 0


def event_headers(ticket_id: str, event_type: str, msg_id: str) -> dict[str, str]:
    """What ingress stores with an event, for one the reconciler found (the publish adds the
    trace that starts here)."""
    return {
        h.SOURCE: SOURCE,
        h.EVENT_ID: msg_id,
        h.EVENT_TYPE: event_type,
        h.RECEIVED_AT: dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        h.CORRELATION_ID: msg_id,
    }


async def publish_ticket_event(
    bus: Bus, ticket: Ticket, event_type: str, msg_id: str, **data: str
) -> bool:
    """Publish the event a webhook would have carried; True if it was new to the broker."""
    body = ticket_event(
        event_type,
        ticket.id,
        event_id=msg_id,
        updated_at=ticket.updated_at,
        priority=ticket.priority,
        **data,
    )
    # a trace starts here, as a webhook's starts at ingress
    with telemetry.span(
        f"reconcile {event_type}",
        "internal",
        parent=None,
        attributes={"desk.source": SOURCE, "desk.event_type": event_type, "desk.ticket": ticket.id},
    ):
        published = await bus.publish(
            subjects.event(SOURCE, event_type),
            json.dumps(body).encode(),
            msg_id=msg_id,
            headers=event_headers(ticket.id, event_type, msg_id),
        )
    return not published.duplicate


async def backfill(
    source: SourceSystem,
    bus: Bus,
    ledger: Ledger,
    bookmarks: Bookmarks,
    *,
    lookback: float,
    page_size: int,
    first_since: dt.datetime,
    grace: float = 0.0,
) -> BackfillCounts:
    started = time.monotonic()
    counts = BackfillCounts()
    horizon = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=grace)
    cursor = await bookmarks.get_time(CURSOR)
    since = (cursor - dt.timedelta(seconds=lookback)) if cursor else first_since
    page_cursor: str | None = None
    while True:
        page = await source.list_tickets(updated_since=since, cursor=page_cursor, limit=page_size)
        for ticket in page.tickets:
            counts.scanned += 1
            SCANNED.inc()
            if await ledger.seen(ids.seen(CREATED, ticket.id)):
                continue
            if ticket.updated_at > horizon:
                counts.deferred += 1  # too recent to call lost
                continue
            counts.gaps += 1
            GAPS.labels(CREATED).inc()
            if await publish_ticket_event(bus, ticket, CREATED, ids.reconciler(CREATED, ticket.id)):
                counts.backfilled += 1
                BACKFILLED.inc()
        if page.tickets:  # every publish of the page is acknowledged: advance
            newest = min(max(t.updated_at for t in page.tickets), horizon)
            if cursor is None or newest > cursor:
                cursor = newest
                await bookmarks.set_time(CURSOR, newest)
        if not page.next_cursor:
            break
        page_cursor = page.next_cursor
    RUN_SECONDS.observe(time.monotonic() - started)
    LAST_SUCCESS.set_to_current_time()
    if counts.gaps:
        log.info(
            "backfill: %d scanned, %d gaps, %d published",
            counts.scanned,
            counts.gaps,
            counts.backfilled,
        )
    return counts
