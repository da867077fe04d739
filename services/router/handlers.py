"""Route one stored event to every target its rules name: `work.<target>.<type>`.

The event is acked only after every target publish is acknowledged (all-or-nothing from the
caller's view); a redelivery republishes with the same ids `<event msg id>><target>`, so each
target sees each event once.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import Counter

from shared import headers as h
from shared import ids, subjects
from shared.bus import Bus
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import PermanentError
from shared.helpdesk.events import ticket_ref
from shared.ledger import Ledger

from .rules import Rules

log = logging.getLogger(__name__)

ROUTED = Counter("desk_router_routed_total", "Work items published, by target.", ["target"])
UNROUTED = Counter(
    "desk_router_unrouted_total", "Events no rule matched (acked, not dropped silently).", ["type"]
)


class Router:
    def __init__(self, bus: Bus, rules: Rules, ledger: Ledger) -> None:
        self.bus = bus
        self.rules = rules
        self.ledger = ledger
        self._unrouted_seen: set[str] = set()
        for rule in rules.rules:  # every target's series exists at 0 (see shared.metrics)
            for target in rule.targets:
                ROUTED.labels(target)

    async def handle(self, delivery: Delivery[Any]) -> None:
        try:
            source, event_type = subjects.parse_event(delivery.subject)
        except subjects.SubjectError as exc:
            raise PermanentError(str(exc)) from None
        for header, told in ((h.SOURCE, source), (h.EVENT_TYPE, event_type)):
            claimed = delivery.headers.get(header)
            if claimed is not None and claimed != told:  # the subject, not a header, says
                raise PermanentError(f"{header} {claimed!r} disagrees with {delivery.subject}")
        targets = self.rules.targets(source, event_type, delivery.body)
        queue = self.rules.queue(source, event_type, delivery.body) if targets else None
        category = self.rules.category(source, event_type, delivery.body) if targets else None
        await self._route(delivery, source, event_type, targets, queue, category)
        ref = ticket_ref(delivery.body)
        if ref is not None:  # the processed-ledger the reconciler compares the helpdesk with
            await self.ledger.claim(ids.seen(event_type, ref.ticket_id))

    async def _route(
        self,
        delivery: Delivery[Any],
        source: str,
        event_type: str,
        targets: list[str],
        queue: str | None,
        category: str | None = None,
    ) -> None:
        if not targets:
            UNROUTED.labels(event_type).inc()
            if event_type not in self._unrouted_seen:
                self._unrouted_seen.add(event_type)
                log.info("no rule routes %s events; they are acked and counted", event_type)
            return

        event_msg_id = delivery.msg_id or f"{subjects.EVENTS}:{delivery.stream_seq}"
        item = Envelope(
            id=event_msg_id,
            source=source,
            type=event_type,
            time=delivery.stored_at,  # deterministic: a redelivery builds the same bytes
            correlationid=event_msg_id,
            data=delivery.body,
            **({"queue": queue} if queue else {}),  # an extension attribute: the review queue
            **({"category": category} if category else {}),  # and the rules' category
        ).to_bytes()
        headers = {
            h.CORRELATION_ID: event_msg_id,
            h.SOURCE: source,
            h.EVENT_TYPE: event_type,
            h.EVENT_ID: delivery.headers.get(h.EVENT_ID, event_msg_id),
        }
        for target in targets:
            await self.bus.publish(
                subjects.work(target, event_type),
                item,
                msg_id=ids.router(event_msg_id, target),
                headers=headers,
            )
            ROUTED.labels(target).inc()
