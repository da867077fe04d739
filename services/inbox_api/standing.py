"""Publishing the standing instructions to the drafter (`shared.standing`).

The inbox's table is the record; the key-value entry is its copy for the drafter, rewritten
whole whenever it differs: right after a change, and on every run of the inbox's periodic
relay, so a change made while the broker was away reaches the drafter once it is back.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.engine import Engine

from shared import standing
from shared.bus import Bus
from shared.errors import TransientError

from . import store

log = logging.getLogger(__name__)


async def publish_standing(bus: Bus | None, engine: Engine) -> bool:
    """Make the drafter's copy match the table; False when the broker is away (retried)."""
    if bus is None or not bus.connected:
        return False
    wanted = await asyncio.to_thread(store.standing_instructions, engine)
    try:
        if await standing.read(bus.js) != wanted:
            await standing.write(bus.js, wanted)
            log.info("standing instructions published: %d active", len(wanted.instructions))
    except TransientError as exc:
        log.warning("standing instructions not published yet: %s", exc)
        return False
    return True
