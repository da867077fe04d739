"""The transactional-outbox relay: result rows → `results.<type>` (CloudEvents), then marked.

Runs at start-up and whenever woken (or every interval), as the service's periodic work, so a
crash between the commit and the publish republishes; the msg id (= the event id) makes that a
no-op for subscribers.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.engine import Engine

from shared import subjects, trace
from shared.bus import Bus
from shared.envelope import Envelope
from shared.errors import PermanentError, TransientError
from shared.periodic import Periodic
from shared.results import SOURCE_SENDER
from shared.service import Service

from . import store

log = logging.getLogger(__name__)


class Relay:
    def __init__(self, bus: Bus, engine: Engine) -> None:
        self.bus = bus
        self.engine = engine
        self._periodic: Periodic | None = None

    def start(self, svc: Service, interval: float) -> None:
        """Relay now (what a crash left), whenever woken, every `interval`, and once more after
        the last handler on stop."""
        self._periodic = svc.every(interval, self.publish_pending, name="result relay", final=True)

    def wake(self) -> None:
        """A result row was committed: relay it now rather than at the next interval."""
        if self._periodic is not None:
            self._periodic.wake()

    async def publish_pending(self) -> int:
        """Publish what waits, oldest first, then mark it published in one transaction (a crash
        in between publishes it again under the same id: the broker's duplicate window and
        every subscriber's ledger make that a no-op)."""
        published: list[str] = []
        try:
            await self._publish(published)
        finally:
            await asyncio.to_thread(store.mark_published, self.engine, published)
        return len(published)

    async def _publish(self, published: list[str]) -> None:
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
                with trace.continued(trace.Trace.parse(row.traceparent)):
                    await self.bus.publish_envelope(subjects.result(row.type), envelope)
            except (TransientError, PermanentError) as exc:
                log.warning("result %s not published yet: %s", row.id, exc)
                return
            published.append(row.id)
