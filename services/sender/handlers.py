"""The sender's handlers: remember items; turn accept/edit decisions into one outbox row each.

Every decision handler opens with its guard: the outbox key's UNIQUE constraint, one key per
round of a conversation (`<ticket>/<round>/<action>`). A second decision, a redelivery or a
replay for the same round writes nothing and reports already_sent; the next round has its own.

Right before a reply leaves (each attempt whose request has not gone out yet), the ticket is
read again: closed, answered by a person in the helpdesk, or written to again by the customer
since the draft was made → nothing is sent, and `reply.withdrawn` says why. Every approved
round ends in exactly one of `reply.sent`, `reply.withdrawn`, `reply.failed`.

Its collaborators: the items it remembers (`items`), the decision → an outbox row (`reply`),
who a reply may go to (`recipient`), the ticket read again (`fresh_state`), one delivery
attempt (`courier`) and how each round ends (`results`).
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.engine import Engine

from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError
from shared.helpdesk import SourceSystem
from shared.helpdesk.base import ReplyRecorder
from shared.inbox import Decision, InboxItem, Withdrawal
from shared.ledger import Ledger
from shared.outbox import Relay
from shared.settings import SenderSettings

from . import recipient, reply, store
from .channel import WebhookChannel
from .courier import Courier
from .fresh_state import FreshState
from .items import Items
from .metrics import DELIVERIES, DELIVERY_OUTCOMES, OUTCOMES
from .results import Results, reply_sent

log = logging.getLogger(__name__)


class Sender:
    def __init__(
        self,
        engine: Engine,
        relay: Relay,
        channel: WebhookChannel | None,
        ledger: Ledger,
        source: SourceSystem | None,
        *,
        delivery_deadline: float = 4 * 3600,
        lease_ttl: float,
        lease_wait: float,
        record_replies: bool = True,
    ) -> None:
        self.engine = engine
        self.relay = relay
        self.channel = channel
        self.ledger = ledger
        self.items = Items(engine)
        self.results = Results(engine, relay)
        self.fresh_state = FreshState(source)
        self.courier = (
            Courier(
                engine, channel, self.fresh_state, self.results, delivery_deadline=delivery_deadline
            )
            if channel is not None
            else None
        )
        # the outbox is the send and the helpdesk is ours (the demo): the reply joins the ticket
        self.recorder = (
            source
            if record_replies and channel is None and isinstance(source, ReplyRecorder)
            else None
        )
        for outcome in DELIVERY_OUTCOMES:
            DELIVERIES.labels(self.channel_name, outcome)
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait

    @classmethod
    def configured(
        cls,
        settings: SenderSettings,
        engine: Engine,
        relay: Relay,
        channel: WebhookChannel | None,
        ledger: Ledger,
        source: SourceSystem,
    ) -> Sender:
        """As the settings say; `source` is read again right before each reply leaves."""
        log.info("delivering through %s", channel.url if channel else "the outbox only")
        return cls(
            engine,
            relay,
            channel,
            ledger,
            source,
            record_replies=settings.record_replies,
            delivery_deadline=settings.delivery_deadline,
            lease_ttl=max(5.0, settings.ack_wait),
            lease_wait=settings.channel_connect_timeout + settings.channel_read_timeout + 15,
        )

    @property
    def channel_name(self) -> str:
        return self.channel.name if self.channel else "outbox"

    async def on_item(self, delivery: Delivery[Envelope, InboxItem]) -> None:
        item = delivery.payload  # checked by the runtime (Consumer.payload)
        await self.items.remember(item)

    async def on_withdrawn(self, delivery: Delivery[Envelope, Withdrawal]) -> None:
        """The drafter took a waiting draft back: publish `item.withdrawn`, once."""
        notice = delivery.payload  # checked by the runtime (Consumer.payload)
        await self.results.item_withdrawn(notice)

    async def on_decision(self, delivery: Delivery[Envelope, Decision]) -> None:
        decision = delivery.payload  # checked by the runtime (Consumer.payload)
        if decision.type == "response":
            return  # feedback goes back to the drafter; nothing leaves the building
        await self.items.check_current(decision)  # a redraft replaces it: superseded
        if decision.type == "ignore":
            await self.results.ignored(decision)
            return
        item = await self.items.get(decision.item_id)
        outbox_only = self.channel is None
        row = reply.outbox_row(decision, item, channel=self.channel_name, outbox_only=outbox_only)
        # One worker per key at a time (across replicas): a redelivery waits for a delivery in
        # flight instead of starting a second one; the UNIQUE key stops a second row.
        async with self.ledger.lease(f"outbox:{row.key}", ttl=self.lease_ttl, wait=self.lease_wait):
            existing = await asyncio.to_thread(store.get_outbox, self.engine, row.key)
            if existing is None:  # nothing written for the round yet: may this decision take it?
                refused = await self._refusal(decision, item, row.final_text)
                if refused is not None:
                    await self.results.refused(row, refused)
                    self.relay.wake()
                    return
            result = None
            if outbox_only:  # the commit is the delivery: check the ticket right before it
                reason = None if existing else await self.fresh_state.moved_on(item)
                if reason is not None:
                    await self.results.withdrawn(row, reason, new=True)
                    self.relay.wake()
                    return
                result = reply_sent(row)
            await self._write_and_deliver(row, result, item)
        self.relay.wake()

    async def _refusal(self, decision: Decision, item: store.ItemRow, text: str) -> str | None:
        """Why this decision must not take its round (None: it may): an auto-sent one whose
        round the helpdesk does not confirm, or a reply to someone not the round's author."""
        if decision.auto:  # no person approved it: check its round
            refused = await self.fresh_state.not_for_auto(item, text)
            if refused is not None:
                return refused
        return recipient.not_to_the_author(item)

    async def _write_and_deliver(
        self,
        row: store.OutboxRow,
        result: store.ResultRow | None,
        item: store.ItemRow,
    ) -> None:
        key = row.key
        created = await asyncio.to_thread(store.record, self.engine, row, result)
        if created and row.delivery == "delivered":
            await self._record_reply(row, item)
        if not created:
            existing = await asyncio.to_thread(store.get_outbox, self.engine, key)
            if existing is not None and existing.delivery == "delivered":
                await self._record_reply(existing, item)  # a crash may have come between
            if existing is None or existing.delivery in ("delivered", "failed", "withdrawn"):
                if existing is not None and existing.item_id != row.item_id:
                    await self.results.settled_by_another(row, existing)
                OUTCOMES.labels("already_sent").inc()
                raise BusinessReject(f"{key} was already sent", outcome="already_sent")
            row = existing  # pending or unknown: carry on delivering it
        else:
            OUTCOMES.labels("written").inc()
        if self.courier is not None:
            await self.courier.deliver(row, item)

    async def _record_reply(self, row: store.OutboxRow, item: store.ItemRow) -> None:
        """The sent reply in the ticket's conversation (idempotent: one message per key); a mail
        conversation is no helpdesk ticket (the drafter keeps its conversation)."""
        if self.recorder is None or not row.ticket_id or item.in_helpdesk is False:
            return
        message_id = f"{row.ticket_id}-desk-{row.round or 'r1'}"
        try:
            await self.recorder.record_reply(
                row.ticket_id, message_id, row.final_text, "The Support Team"
            )
        except PermanentError:
            log.warning("reply %s sent; its ticket is gone from the helpdesk", row.key)
