"""One delivery attempt at the channel, and what its outcome means for the outbox row."""

from __future__ import annotations

import asyncio

from sqlalchemy.engine import Engine

from shared import clock
from shared.errors import Unavailable
from shared.outbound import Attempt

from . import store
from .channel import WebhookChannel
from .fresh_state import FreshState
from .metrics import DELIVERIES
from .results import Results


class Courier:
    def __init__(
        self,
        engine: Engine,
        channel: WebhookChannel,
        fresh_state: FreshState,
        results: Results,
        *,
        delivery_deadline: float,
    ) -> None:
        self.engine = engine
        self.channel = channel
        self.fresh_state = fresh_state
        self.results = results
        self.delivery_deadline = delivery_deadline  # seconds from approval to reply.failed

    async def deliver(self, row: store.OutboxRow, item: store.ItemRow) -> None:
        """One attempt at the channel. Delivered or refused (4xx) settles the round; anything
        else (an open breaker, the rate limit, 429/5xx, no connection) waits in place
        (`Unavailable`: no delivery attempt of the decision is spent) until the channel takes
        it or `delivery_deadline` has passed since the approval: then `reply.failed` says why.
        A reply whose request went out unanswered stays `unknown`, re-sent with the same
        Idempotency-Key until the channel answers; it is never reported as failed."""
        if row.delivery == "pending":  # nothing went out yet: is the reply still right?
            reason = await self.fresh_state.moved_on(item)
            if reason is not None:
                await self.results.withdrawn(row, reason, new=False)
                return
        try:
            outcome = await self.channel.deliver(row)
        except Unavailable as exc:  # the breaker or the rate limit: no request was made
            outcome = Attempt.waited(exc)
        said = "delivered" if outcome.outcome == "ok" else outcome.outcome
        DELIVERIES.labels(self.channel.name, said).inc()
        if outcome.outcome != "wait":
            await asyncio.to_thread(
                store.audit,
                self.engine,
                row.key,
                self.channel.name,
                status_code=outcome.status_code,
                duration_ms=outcome.duration_ms,
                outcome=said,
                error=outcome.error,
            )
        if outcome.outcome == "ok":
            await self.results.delivered(row)
            return
        # once a request may have reached the channel, the reply's fate is unknown until the
        # channel answers a re-send with the same key
        maybe_sent = row.delivery == "unknown" or outcome.outcome == "unknown"
        if outcome.outcome == "failed":
            await self.results.failed(row, outcome.error or "refused")
            return
        if not maybe_sent and self._overdue(row):
            last = outcome.error or "no answer"
            if outcome.outcome == "wait" and row.last_error:  # what the channel itself said
                last = f"{last}, after: {row.last_error}"
            await self.results.failed(
                row,
                f"not delivered within DESK_DELIVERY_DEADLINE ({_duration(self.delivery_deadline)})"
                f"; last: {last}",
            )
            return
        status: store.DeliveryStatus = "unknown" if maybe_sent else "pending"
        if outcome.outcome != "wait" or row.delivery != status:  # a wait changes nothing
            await asyncio.to_thread(
                store.settle,
                self.engine,
                row.key,
                delivery=status,
                error=outcome.error,
                result=None,
            )
            row.delivery = status
        raise Unavailable(outcome.error or "delivery failed", retry_after=outcome.retry_after)

    def _overdue(self, row: store.OutboxRow) -> bool:
        approved = row.created_at
        approved = clock.aware(approved)  # SQLite keeps no zone: it was written in UTC
        return (store.now() - approved).total_seconds() > self.delivery_deadline


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}min"
    return f"{seconds:g}s"
