"""The stale-ticket scan: open tickets untouched for `stale_days` get a `ticket.stale` event, at
most once per ticket per day however often the scan runs.

The drafter decides what a reminder means for the conversation: a draft still waiting is
marked overdue (no second item); a ticket waiting on the customer gets one follow-up draft a
day; an unanswered round gets its draft."""

from __future__ import annotations

import datetime as dt
import logging

from shared import ids
from shared.bus import Bus
from shared.errors import PermanentError, TransientError
from shared.helpdesk import SourceSystem
from shared.ledger import Ledger

from .backfill import publish_ticket_event

log = logging.getLogger(__name__)

STALE = "ticket.stale"
DAY = 24 * 3600.0  # a day's reminder key outlives its day, then the broker forgets it


async def stale_scan(
    source: SourceSystem,
    bus: Bus,
    ledger: Ledger,
    *,
    today: dt.date,
    stale_days: int,
    now: dt.datetime,
    page_size: int = 200,
) -> list[str]:
    """Publish reminders for today; returns the tickets reminded by this run."""
    cutoff = now - dt.timedelta(days=stale_days)
    reminded: list[str] = []
    page_cursor: str | None = None
    while True:
        page = await source.list_tickets(cursor=page_cursor, limit=page_size)
        for ticket in page.tickets:
            if ticket.status == "closed" or ticket.updated_at > cutoff:
                continue
            key = ids.stale(ticket.id, today)
            if not await ledger.claim(key, ttl=2 * DAY):  # reminded today (this or another replica)
                continue
            try:
                await publish_ticket_event(bus, ticket, STALE, key, date=today.isoformat())
            except (TransientError, PermanentError):
                await ledger.release(key)  # let the next run try again
                raise
            reminded.append(ticket.id)
        if not page.next_cursor:
            break
        page_cursor = page.next_cursor
    if reminded:
        log.info("stale scan %s: reminded %d tickets", today.isoformat(), len(reminded))
    return reminded
