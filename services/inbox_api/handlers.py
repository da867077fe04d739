"""The projections into SQL (of `inbox.item` and its notices, and of the sender's results), and
the relay for decisions not yet published."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.engine import Engine

from shared import screening, subjects, trace
from shared.bus import Bus
from shared.consumer import Delivery, Handler
from shared.envelope import Envelope
from shared.errors import PermanentError, TransientError
from shared.inbox import AUTO_SEND, InboxItem, Overdue, Withdrawal
from shared.logging import redact
from shared.results import (
    ITEM_IGNORED,
    ITEM_WITHDRAWN,
    NOTIFY_FAILED,
    NOTIFY_SENT,
    REPLY_FAILED,
    REPLY_SENT,
    REPLY_WITHDRAWN,
    SOURCE_SENDER,
)

from . import provenance, store
from .outboxes import publish_decision

log = logging.getLogger(__name__)


class ItemProjection:
    """Items, and the drafter's notices about them (withdrawn, overdue), into the inbox."""

    def __init__(
        self,
        engine: Engine,
        bus: Bus | None = None,
        policy: store.autosend.Policy | None = None,
        targets: store.targets.Targets | None = None,
    ) -> None:
        self.engine = engine
        self.bus = bus
        self.policy = policy or store.autosend.Policy()
        self.targets = targets or store.targets.Targets()

    def handlers(self) -> dict[str, Handler]:
        """One handler per subject of the inbox's consumer."""
        return {
            subjects.INBOX_ITEM: self.on_item,
            subjects.INBOX_WITHDRAWN: self.on_withdrawn,
            subjects.INBOX_OVERDUE: self.on_overdue,
        }

    async def on_item(self, delivery: Delivery[Envelope, InboxItem]) -> None:
        item = delivery.payload  # checked by the runtime (Consumer.payload)
        traceparent = trace.current_header()  # this projection's span: the decision continues it
        if await asyncio.to_thread(store.project, self.engine, item, traceparent, self.targets):
            log.info("item %s is in the inbox", item.id)
        await self._auto_send(item)

    async def _auto_send(self, item: InboxItem) -> None:
        """An item of a category with auto-send on is decided by the policy (idempotent: a
        redelivered item finds itself decided already). What the item says is the word of
        whoever published it: the policy believes the work message WORK holds for it and the
        checks run again here on its text (`doubts`); a reason not to send waits for a person
        and is shown to the reviewer."""
        on = store.autosend.on_for_known(self.engine)  # no thread hop while it is fresh
        if on is None:
            on = await asyncio.to_thread(store.autosend.on_for, self.engine)
        if item.category not in on:
            return  # the usual case: no transaction, no policy check
        doubts = await self._doubts(item)
        try:
            decision = await asyncio.to_thread(
                store.decide,
                self.engine,
                item.id,
                "accept",
                None,
                item.version,
                store.Reviewer(AUTO_SEND, "reviewer"),
                auto=store.autosend.applies(self.policy, doubts),
            )
        except store.autosend.Held as held:
            await asyncio.to_thread(
                store.autosend.hold, self.engine, item.id, doubts or [str(held)]
            )
            log.info("item %s held for a person: %s", item.id, redact(str(held)))
            return
        except (store.Conflict, store.NotFound, store.Invalid):
            return  # not waiting, not for auto-send, or decided already
        log.info("item %s sent by auto-send (%s)", item.id, item.category)
        await publish_decision(self.bus, self.engine, decision)  # else the relay publishes it

    async def _doubts(self, item: InboxItem) -> list[str]:
        """Why auto-send must not send `item`: where it comes from (the work message it names),
        and what the checks find in its text against its conversation and cited knowledge."""
        found = provenance.doubts(
            item, await provenance.work_message(self.bus, item.trigger.work_seq)
        )
        args = item.action_request.args
        said = (
            str(args.get("subject") or ""),
            item.customer.model_dump() if item.customer else None,
            [m.model_dump() for m in item.conversation],
        )
        knowledge = [t for c in item.citations for t in (c.title, c.passage, c.url or "") if t]
        found += screening.screen(
            str(args.get("reply") or ""),
            conversation=screening.conversation_texts(*said),
            knowledge=[*knowledge, *item.feedback],
            customer=screening.customer_texts(*said),
        )
        return found

    async def on_withdrawn(self, delivery: Delivery[Envelope, Withdrawal]) -> None:
        notice = delivery.payload  # checked by the runtime (Consumer.payload)
        if not await asyncio.to_thread(store.withdraw, self.engine, notice):
            raise TransientError(f"item {notice.item_id} not projected yet")
        log.info("item %s withdrawn: %s", notice.item_id, notice.reason)

    async def on_overdue(self, delivery: Delivery[Envelope, Overdue]) -> None:
        notice = delivery.payload  # checked by the runtime (Consumer.payload)
        if not await asyncio.to_thread(store.mark_overdue, self.engine, notice):
            raise TransientError(f"item {notice.item_id} not projected yet")


RESULT_STATUS = {
    REPLY_SENT: "sent",
    REPLY_FAILED: "failed",
    REPLY_WITHDRAWN: "withdrawn",
    ITEM_IGNORED: "ignored",
    ITEM_WITHDRAWN: "withdrawn",
}
NOTIFICATIONS = (NOTIFY_SENT, NOTIFY_FAILED)


class ResultProjection:
    """What the sender did with a decided item: its final status in the inbox.

    The subject says what a result is (only the sender may publish these subjects): a body that
    claims another kind, or a source other than the sender, is dead-lettered, never believed."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def on_result(self, delivery: Delivery[Envelope]) -> None:
        kind = subjects.result_kind(delivery.subject)
        if delivery.body.type != kind:
            raise PermanentError(
                f"a result on {delivery.subject} says it is {delivery.body.type!r}"
            )
        if delivery.body.source != SOURCE_SENDER:
            raise PermanentError(f"a {kind} result from {delivery.body.source!r}, not the sender")
        data = delivery.body.data
        if kind in NOTIFICATIONS and isinstance(data, dict):
            await asyncio.to_thread(
                store.record_notification, self.engine, delivery.body.id, kind, data
            )
            return
        status = RESULT_STATUS.get(kind)
        if status is None or not isinstance(data, dict) or not data.get("item_id"):
            return  # nothing about one item
        result = {"type": kind, "id": delivery.body.id, **data}
        if not await asyncio.to_thread(
            store.set_result, self.engine, data["item_id"], status, result
        ):
            raise TransientError(f"item {data['item_id']} not projected yet")
