"""What the inbox's pages say about the system around it: whether the model answers (the banner
"drafts are delayed") and how many dead letters wait (an admin's navigation).

Read from the broker every `SECONDS` by a periodic job, never per request: a page or an API
answer shows the last reading. Without a broker both read as unknown (no banner, no count).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import nats.js.errors as js_errors

from shared import deadletters
from shared.bus import Bus
from shared.ledger import FAILURES
from shared.outage import ModelState, Reader

log = logging.getLogger(__name__)

SECONDS = 5.0


class Watch:
    def __init__(self) -> None:
        self.bus: Bus | None = None
        self.reader: Reader | None = None
        self.model_down: ModelState | None = None  # the earliest fresh report of an outage
        self.dead_letters: int | None = None  # None: not known (no broker, or not read yet)

    def attach(self, bus: Bus) -> None:
        """Read through `bus` from now on (the service's, once it is connected)."""
        self.bus, self.reader = bus, Reader(bus.js)

    async def refresh(self) -> None:
        if self.bus is None or self.reader is None or not self.bus.connected:
            self.dead_letters = None
            return
        self.model_down = await self.reader.down()
        try:
            self.dead_letters = await deadletters.count(self.bus.js)
        except (*FAILURES, js_errors.APIError) as exc:
            log.debug("the dead letters were not counted (%s)", exc.__class__.__name__)
            self.dead_letters = None

    def model(self) -> dict[str, Any]:
        """The model's state as the API lists it (`model` beside the items)."""
        down = self.model_down
        if down is None:
            return {"up": True}
        return {"up": False, "since": down.since.isoformat(), "reason": down.reason}

    def banner(self) -> str | None:
        """The pages' banner while the model is down; None while it answers."""
        down = self.model_down
        if down is None:
            return None
        since = down.since.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        why = f" ({down.reason})" if down.reason else ""
        return (
            f"Drafts are delayed: the model has not answered since {since}{why}. "
            "Tickets wait and are drafted when it answers."
        )
