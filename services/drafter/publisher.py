"""What the drafter tells the inbox: the item a thread waits on, and the notices about it (the
draft withdrawn, the draft overdue), each under its idempotent id (`shared.ids`), so that one
published again (a redelivery, a run cut off before its publish) is a duplicate."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import InboxItem, Overdue, Withdrawal

from . import metrics

log = logging.getLogger(__name__)

SOURCE = "/desk/drafter"


class Publisher:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def emit(self, item: InboxItem) -> None:
        msg_id = ids.inbox_item(item.thread, item.round, item.version)
        envelope = Envelope(
            id=msg_id,
            source=SOURCE,
            type=subjects.INBOX_ITEM,
            subject=item.thread,
            time=item.created_at,  # the same bytes however often the item is re-emitted
            correlationid=item.trigger.event_id,
            data=item.model_dump(mode="json"),
        )
        published = await self.bus.publish_envelope(subjects.INBOX_ITEM, envelope)
        if published.duplicate:
            return
        kind = (
            "notify"
            if item.category == "escalation"
            else ("redraft" if item.version > 1 else "draft")
        )
        metrics.DRAFTS.labels(item.category or "other", kind).inc()
        metrics.TOKENS.labels("input").inc(item.cost.input_tokens)
        metrics.TOKENS.labels("output").inc(item.cost.output_tokens)
        metrics.COST.inc(item.cost.usd)
        log.info("inbox item %s published", msg_id, extra={"category": item.category})

    async def withdraw(self, item: InboxItem, reason: str, ticket_status: str | None) -> None:
        withdrawal = Withdrawal(
            item_id=item.id,
            thread=item.thread,
            round=item.round,
            version=item.version,
            ticket_id=item.ticket_id,
            reason=reason,
            at=dt.datetime.now(dt.UTC),
            ticket_status=ticket_status,
        )
        msg_id = ids.withdrawn(item.thread, item.round, item.version)
        await self._notice(
            subjects.INBOX_WITHDRAWN, msg_id, item, withdrawal.model_dump(mode="json")
        )
        log.info("draft %s withdrawn: %s", item.id, reason)

    async def overdue(self, item: InboxItem, day: dt.date) -> None:
        overdue = Overdue(
            item_id=item.id,
            thread=item.thread,
            version=item.version,
            ticket_id=item.ticket_id,
            day=day,
            at=dt.datetime.now(dt.UTC),
        )
        msg_id = ids.overdue(item.thread, item.version, day)
        await self._notice(subjects.INBOX_OVERDUE, msg_id, item, overdue.model_dump(mode="json"))

    async def _notice(self, subject: str, msg_id: str, item: InboxItem, data: Any) -> None:
        envelope = Envelope(
            id=msg_id,
            source=SOURCE,
            type=subject,
            subject=item.thread,
            correlationid=item.trigger.event_id,
            data=data,
        )
        await self.bus.publish_envelope(subject, envelope)
