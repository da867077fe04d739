"""Reading what a stream holds without a consumer, on a real nats-server."""

from __future__ import annotations

import asyncio
import datetime as dt

from shared import subjects
from shared.bus import Bus
from shared.history import stored, stored_since


async def test_an_empty_stream_holds_nothing(bus: Bus) -> None:
    assert await stored(bus, subjects.RESULTS) == []
    assert await stored_since(bus, subjects.RESULTS, dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) == []


async def test_stored_since_starts_at_the_first_message_at_or_after_the_time(bus: Bus) -> None:
    for n in range(3):
        await bus.publish(subjects.result("reply.sent"), b"{}", msg_id=f"early-{n}")
    await asyncio.sleep(0.05)
    between = dt.datetime.now(dt.UTC)
    await asyncio.sleep(0.05)
    for n in range(2):
        await bus.publish(subjects.result("reply.failed"), b"{}", msg_id=f"late-{n}")

    everything = await stored(bus, subjects.RESULTS)
    assert [m.subject for m in everything] == [subjects.result("reply.sent")] * 3 + [
        subjects.result("reply.failed")
    ] * 2
    assert [m.seq for m in everything] == sorted(m.seq or 0 for m in everything)
    later = await stored_since(bus, subjects.RESULTS, between)
    assert [m.subject for m in later] == [subjects.result("reply.failed")] * 2
    assert await stored_since(bus, subjects.RESULTS, dt.datetime.now(dt.UTC)) == []
