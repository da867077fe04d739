"""The projection of `inbox.item` into SQL, and the relay for decisions not yet published."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine

from shared.bus import Bus
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import PermanentError
from shared.inbox import InboxItem

from . import store
from .api import publish_decision

log = logging.getLogger(__name__)


class Projection:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def on_item(self, delivery: Delivery[Envelope]) -> None:
        try:
            item = InboxItem.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not an inbox item: {exc.errors()[0]['msg']}") from None
        if await asyncio.to_thread(store.project, self.engine, item):
            log.info("item %s is in the inbox", item.id)


async def relay(bus: Bus, engine: Engine, interval: float, stop: Any) -> None:
    """Publish decisions recorded while the broker was away (or before a crash)."""
    while not stop.is_set():
        try:
            for decision in await asyncio.to_thread(store.unpublished, engine, 0):
                await publish_decision(bus, engine, decision)
        except Exception:  # keep relaying; the next pass retries
            log.exception("decision relay pass failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
