"""A person's audit of an auto-sent reply, told to the drafter on `inbox.audited`: a reply found
fine becomes an example for later drafts, one found edited does not.

The audit is recorded first (its item's row, `store.audits`), then published with an id of its
own (`ids.audited`) so a second publish is a duplicate; what the broker did not take (it was
away, the process stopped) the relay publishes on its next pass. Only sent replies are told.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.engine import Engine

from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.errors import PermanentError, TransientError

from . import store

log = logging.getLogger(__name__)

SOURCE = "/desk/inbox_api"


async def publish_audits(bus: Bus | None, engine: Engine) -> None:
    """Every recorded audit of a sent reply the broker has not acknowledged, published."""
    if bus is None or not bus.connected:
        return
    for audit in await asyncio.to_thread(store.audits.unpublished, engine):
        envelope = Envelope(
            id=ids.audited(audit.thread, audit.round, audit.version),
            source=SOURCE,
            type=subjects.INBOX_AUDITED,
            subject=audit.thread,
            time=audit.at,
            data=audit.model_dump(mode="json"),
        )
        try:
            await bus.publish_envelope(subjects.INBOX_AUDITED, envelope)
        except (TransientError, PermanentError) as exc:
            log.warning("audit of %s recorded, publish deferred: %s", audit.item_id, exc)
            return
        await asyncio.to_thread(store.audits.mark_published, engine, audit.item_id)
