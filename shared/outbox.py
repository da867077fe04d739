"""The transactional outbox: a message is recorded in the service's own database in the same
transaction as the change it tells of, and published afterwards.

    decisions = Outbox("decision", pending=read_unpublished, mark=mark_published)
    relay = Relay(svc.bus, decisions, audits)
    relay.start(svc, interval)          # now (what a crash left), when woken, every interval
    ...
    await outbox.send(bus, decisions, message)  # one just recorded, at once; False: the relay will

Each message is published under its envelope's id (the broker's duplicate window and every
consumer's ledger make a second publish a no-op), continuing the trace recorded with its row
(never the publisher's own: a relay pass belongs to no request) and carrying the correlation id
of the event it descends from. A pass publishes each outbox's messages oldest first and stops
that outbox at the first the broker does not take (the next pass tries again); what was
published is marked even if the pass is interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import trace
from .bus import Bus
from .envelope import Envelope
from .errors import PermanentError, TransientError
from .periodic import Periodic

if TYPE_CHECKING:
    from .service import Service

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    """One recorded message: where it goes, what it is, and what marks it published."""

    key: Any  # handed to the outbox's `mark` once the broker has the message
    subject: str
    envelope: Envelope  # its `correlationid`: the event it descends from
    traceparent: str | None = None  # the trace it continues, as recorded with its row


@dataclass(frozen=True)
class Outbox:
    """One kind of recorded message: how to read those waiting (oldest first) and how to mark
    some published. Both are blocking database calls (run in a thread)."""

    name: str
    pending: Callable[[], Sequence[Message]]
    mark: Callable[[Sequence[Any]], None]


async def publish(bus: Bus | None, message: Message) -> bool:
    """Publish one message; False when the broker did not take it (logged)."""
    if bus is None or not bus.connected:
        return False
    try:
        with trace.continued(trace.Trace.parse(message.traceparent)):
            await bus.publish_envelope(message.subject, message.envelope)
    except (TransientError, PermanentError) as exc:
        log.warning("%s %s recorded, publish deferred: %s", message.subject, message.key, exc)
        return False
    return True


async def send(bus: Bus | None, outbox: Outbox, message: Message) -> bool:
    """Publish a message just recorded, at once, and mark it; False: left for the relay."""
    if not await publish(bus, message):
        return False
    await asyncio.to_thread(outbox.mark, [message.key])
    return True


async def drain(bus: Bus | None, outbox: Outbox) -> int:
    """Publish what waits in `outbox`, oldest first, up to the first the broker does not take;
    how many went (marked even if the pass is interrupted)."""
    published: list[Any] = []
    try:
        for message in await asyncio.to_thread(outbox.pending):
            if not await publish(bus, message):
                break
            published.append(message.key)
    finally:
        if published:
            await asyncio.to_thread(outbox.mark, published)
    return len(published)


class Relay:
    def __init__(self, bus: Bus, *outboxes: Outbox, name: str = "outbox relay") -> None:
        self.bus = bus
        self.outboxes = outboxes
        self.name = name
        self._periodic: Periodic | None = None

    def start(self, svc: Service, interval: float) -> None:
        """Relay now (what a crash left), whenever woken, every `interval`, and once more after
        the last handler on stop."""
        self._periodic = svc.every(interval, self.publish_pending, name=self.name, final=True)

    def wake(self) -> None:
        """A row was committed: relay it now rather than at the next interval."""
        if self._periodic is not None:
            self._periodic.wake()

    async def publish_pending(self) -> int:
        """Publish what waits in every outbox; how many went."""
        count = 0
        for outbox in self.outboxes:
            count += await drain(self.bus, outbox)
        return count
