"""The transactional-outbox relay: result rows → `results.<type>` (CloudEvents), then marked.

Runs at start-up and whenever woken (or every interval), so a crash between the commit and the
publish republishes; the msg id (= the event id) makes that a no-op for subscribers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.engine import Engine

from shared import headers as h
from shared import subjects
from shared.bus import Bus
from shared.db import report_failed_pass
from shared.envelope import Envelope
from shared.errors import PermanentError, TransientError
from shared.results import SOURCE_SENDER

from . import store

log = logging.getLogger(__name__)


class Relay:
    def __init__(self, bus: Bus, engine: Engine, interval: float) -> None:
        self.bus = bus
        self.engine = engine
        self.interval = interval
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    async def run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                await self.publish_pending()
            except Exception as exc:  # keep relaying; the next pass retries
                report_failed_pass(log, "result relay pass", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
        try:
            await self.publish_pending()  # what the last handlers wrote before the stop
        except Exception as exc:  # left for the next start, which relays first
            report_failed_pass(log, "last result relay pass", exc)

    async def publish_pending(self) -> int:
        published = 0
        for row in await asyncio.to_thread(store.pending_results, self.engine):
            envelope = Envelope(
                id=row.id,
                source=SOURCE_SENDER,
                type=row.type,
                subject=row.subject,
                time=row.created_at,
                data=row.data,
            )
            try:
                await self.bus.publish(
                    subjects.result(row.type),
                    envelope.to_bytes(),
                    msg_id=row.id,
                    headers={h.CORRELATION_ID: row.id, h.CONTENT_TYPE: h.CLOUDEVENTS_JSON},
                )
            except (TransientError, PermanentError) as exc:
                log.warning("result %s not published yet: %s", row.id, exc)
                return published
            await asyncio.to_thread(store.mark_published, self.engine, row.id)
            published += 1
        return published
