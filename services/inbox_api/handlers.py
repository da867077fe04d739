"""The projection of `inbox.item` into SQL, and the relay for decisions not yet published."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine

from shared import subjects
from shared.bus import Bus
from shared.consumer import Delivery
from shared.db import report_failed_pass
from shared.envelope import Envelope
from shared.errors import PermanentError, TransientError
from shared.inbox import InboxItem, Overdue, Withdrawal
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

from . import store
from .api import publish_decision

log = logging.getLogger(__name__)


class Projection:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def on_message(self, delivery: Delivery[Envelope]) -> None:
        """What the drafter publishes to the inbox, told apart by the subject it arrived on."""
        if delivery.subject == subjects.INBOX_WITHDRAWN:
            await self.on_withdrawn(delivery)
        elif delivery.subject == subjects.INBOX_OVERDUE:
            await self.on_overdue(delivery)
        else:
            await self.on_item(delivery)

    async def on_item(self, delivery: Delivery[Envelope]) -> None:
        try:
            item = InboxItem.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not an inbox item: {exc.errors()[0]['msg']}") from None
        if await asyncio.to_thread(store.project, self.engine, item):
            log.info("item %s is in the inbox", item.id)

    async def on_withdrawn(self, delivery: Delivery[Envelope]) -> None:
        try:
            notice = Withdrawal.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not a withdrawal: {exc.errors()[0]['msg']}") from None
        if not await asyncio.to_thread(store.withdraw, self.engine, notice):
            raise TransientError(f"item {notice.item_id} not projected yet")
        log.info("item %s withdrawn: %s", notice.item_id, notice.reason)

    async def on_overdue(self, delivery: Delivery[Envelope]) -> None:
        try:
            notice = Overdue.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not an overdue notice: {exc.errors()[0]['msg']}") from None
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


class Results:
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


async def relay(bus: Bus, engine: Engine, interval: float, stop: Any) -> None:
    """Publish decisions recorded while the broker was away (or before a crash)."""
    while not stop.is_set():
        try:
            for decision in await asyncio.to_thread(store.unpublished, engine, 0):
                await publish_decision(bus, engine, decision)
        except Exception as exc:  # keep relaying; the next pass retries
            report_failed_pass(log, "decision relay pass", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
