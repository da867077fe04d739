"""The sender's handlers: remember items; turn accept/edit decisions into one outbox row each.

Every decision handler opens with its guard: the outbox key's UNIQUE constraint. A second
decision, a redelivery or a replay for the same key writes nothing and reports already_sent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import Counter
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from shared import ids
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError, TransientError
from shared.inbox import ActionRequest, Decision, InboxItem
from shared.ledger import Ledger
from shared.logging import redact
from shared.results import ITEM_IGNORED, REPLY_FAILED, REPLY_SENT, event_id

from . import store
from .channel import WebhookChannel
from .relay import Relay

log = logging.getLogger(__name__)

OUTCOMES = Counter(
    "desk_sender_outcomes_total",
    "Decisions handled by the sender, by outcome.",
    ["outcome"],
)
DELIVERIES = Counter(
    "desk_sender_deliveries_total",
    "Channel delivery attempts, by channel and outcome.",
    ["channel", "outcome"],
)


def _result(kind: str, key: str, subject: str | None, data: dict[str, Any]) -> store.ResultRow:
    return store.ResultRow(
        id=event_id(kind, key), type=kind, subject=subject, data=data, created_at=store.now()
    )


def _reply_data(row: store.OutboxRow) -> dict[str, Any]:
    return {
        "outbox_key": row.key,
        "item_id": row.item_id,
        "thread": row.thread,
        "version": row.version,
        "ticket_id": row.ticket_id,
        "action": row.action,
        "text": row.final_text,
        "model_draft": row.model_draft,
        "decision": row.decision_type,
        "reviewer": row.reviewer,
        "channel": row.channel,
        "delivery": row.delivery,
    }


class Sender:
    def __init__(
        self,
        engine: Engine,
        relay: Relay,
        channel: WebhookChannel | None,
        ledger: Ledger,
        *,
        max_deliver: int,
        lease_ttl: float,
        lease_wait: float,
    ) -> None:
        self.engine = engine
        self.relay = relay
        self.channel = channel
        self.ledger = ledger
        self.max_deliver = max_deliver
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait

    @property
    def channel_name(self) -> str:
        return self.channel.name if self.channel else "outbox"

    async def on_item(self, delivery: Delivery[Envelope]) -> None:
        try:
            item = InboxItem.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not an inbox item: {exc.errors()[0]['msg']}") from None
        row = store.ItemRow(
            item_id=item.id,
            thread=item.thread,
            version=item.version,
            ticket_id=item.ticket_id,
            action=item.action_request.action,
            args=item.action_request.args,
        )
        await asyncio.to_thread(store.see_item, self.engine, row)

    async def on_decision(self, delivery: Delivery[Envelope]) -> None:
        try:
            decision = Decision.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not a decision: {exc.errors()[0]['msg']}") from None
        if decision.type == "response":
            return  # feedback goes back to the drafter; nothing leaves the building
        current = await asyncio.to_thread(store.current_version, self.engine, decision.thread)
        if current is not None and decision.version < current:
            OUTCOMES.labels("superseded").inc()
            raise BusinessReject(
                f"decision on v{decision.version}; the thread is at v{current}",
                outcome="superseded",
            )
        if decision.type == "ignore":
            result = _result(
                ITEM_IGNORED,
                decision.item_id,
                decision.thread,
                {
                    "item_id": decision.item_id,
                    "thread": decision.thread,
                    "version": decision.version,
                    "reviewer": decision.reviewer,
                },
            )
            await asyncio.to_thread(store.record, self.engine, None, result)
            OUTCOMES.labels("ignored").inc()
            self.relay.wake()
            return
        await self._send(decision, delivery.attempt)

    async def _send(self, decision: Decision, attempt: int) -> None:
        item = await asyncio.to_thread(store.get_item, self.engine, decision.item_id)
        if item is None:
            raise TransientError(f"item {decision.item_id} not seen yet")
        request = ActionRequest(action=item.action, args=item.args)
        if decision.type == "edit":
            request = ActionRequest.model_validate(decision.args)
        text = str(request.args.get("reply") or "").strip()
        if not text:
            raise PermanentError("the decision leaves nothing to send")
        key = ids.outbox(decision.thread, request.action)
        outbox_only = self.channel is None
        row = store.OutboxRow(
            key=key,
            item_id=decision.item_id,
            thread=decision.thread,
            version=decision.version,
            ticket_id=item.ticket_id,
            action=request.action,
            final_text=text,
            model_draft=str(item.args.get("reply") or "") or None,
            decision_type=decision.type,
            reviewer=decision.reviewer,
            channel=self.channel_name,
            delivery="delivered" if outbox_only else "pending",
            created_at=store.now(),
            delivered_at=store.now() if outbox_only else None,
        )
        result = _result(REPLY_SENT, key, item.ticket_id, _reply_data(row)) if outbox_only else None
        # One worker per key at a time (across replicas): a redelivery waits for a delivery in
        # flight instead of starting a second one; the UNIQUE key stops a second row.
        async with self.ledger.lease(f"outbox:{key}", ttl=self.lease_ttl, wait=self.lease_wait):
            await self._write_and_deliver(row, result, attempt)
        self.relay.wake()

    async def _write_and_deliver(
        self, row: store.OutboxRow, result: store.ResultRow | None, attempt: int
    ) -> None:
        key = row.key
        created = await asyncio.to_thread(store.record, self.engine, row, result)
        if not created:
            existing = await asyncio.to_thread(store.get_outbox, self.engine, key)
            if existing is None or existing.delivery in ("delivered", "failed"):
                OUTCOMES.labels("already_sent").inc()
                raise BusinessReject(f"{key} was already sent", outcome="already_sent")
            row = existing  # pending or unknown: carry on delivering it
        else:
            OUTCOMES.labels("written").inc()
        if self.channel is not None:
            await self._deliver(row, attempt)

    async def _deliver(self, row: store.OutboxRow, attempt: int) -> None:
        assert self.channel is not None
        outcome = await self.channel.deliver(row)
        DELIVERIES.labels(self.channel.name, outcome.outcome).inc()
        await asyncio.to_thread(
            store.audit,
            self.engine,
            row.key,
            self.channel.name,
            status_code=outcome.status_code,
            duration_ms=outcome.duration_ms,
            outcome=outcome.outcome,
            error=outcome.error,
        )
        if outcome.outcome == "delivered":
            row.delivery = "delivered"
            await asyncio.to_thread(
                store.settle,
                self.engine,
                row.key,
                delivery="delivered",
                error=None,
                result=_result(REPLY_SENT, row.key, row.ticket_id, _reply_data(row)),
            )
            return
        final = outcome.outcome == "failed" or attempt >= self.max_deliver
        if final:
            row.delivery = "failed"
            await asyncio.to_thread(
                store.settle,
                self.engine,
                row.key,
                delivery="failed",
                error=outcome.error,
                result=_result(
                    REPLY_FAILED,
                    row.key,
                    row.ticket_id,
                    {**_reply_data(row), "error": redact(outcome.error or "")},
                ),
            )
            log.warning("reply %s failed: %s", row.key, outcome.error)
            return
        status: store.DeliveryStatus = "unknown" if outcome.outcome == "unknown" else "pending"
        await asyncio.to_thread(
            store.settle, self.engine, row.key, delivery=status, error=outcome.error, result=None
        )
        raise TransientError(outcome.error or "delivery failed", retry_after=outcome.retry_after)
