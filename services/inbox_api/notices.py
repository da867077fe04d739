"""The inbox's notices to the team, through the notifier: an escalation when a waiting item nears
and when it passes its service-level target, and a digest of what waits in each queue.

Each pass records what is due (once per threshold per round, once per queue per slot: the store's
keys), then publishes every recorded notice the broker has not acknowledged, with its key as the
message id, so a crash between the two only delays a notice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
from collections.abc import Mapping, Sequence

from sqlalchemy.engine import Engine

from shared.bus import Bus

from . import store
from .outboxes import publish_notices

log = logging.getLogger(__name__)


def slot_start(at: dt.datetime, seconds: float) -> dt.datetime:
    """The start of the digest slot `at` falls in (slots are aligned to the epoch)."""
    return dt.datetime.fromtimestamp(math.floor(at.timestamp() / seconds) * seconds, dt.UTC)


class Notices:
    def __init__(
        self,
        engine: Engine,
        bus: Bus,
        mentions: Mapping[str, Sequence[str]],
        *,
        scan_seconds: float,
        digest_seconds: float = 0.0,
    ) -> None:
        self.engine = engine
        self.bus = bus
        self.mentions = mentions
        self.scan_seconds = scan_seconds
        self.digest_seconds = digest_seconds

    async def scan(self) -> None:
        """One pass: what is due now, recorded; then everything recorded, published."""
        at = store.tables.now()
        escalated = await asyncio.to_thread(store.notices.escalate, self.engine, at, self.mentions)
        for notice in escalated:
            log.info("item %s: %s", notice.item_id, notice.kind)
        if self.digest_seconds:
            slot = slot_start(at, self.digest_seconds)
            # a digest belongs to its slot's start: one that would come late is left out
            if (at - slot).total_seconds() <= max(2 * self.scan_seconds, 60.0):
                await asyncio.to_thread(store.notices.digest, self.engine, at, slot)
        await self.publish()

    async def publish(self) -> None:
        await publish_notices(self.bus, self.engine)  # what the broker misses, the next pass
