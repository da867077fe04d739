"""What a stream holds, read message by message: no consumer is created, so a user whose grants
allow only single-message reads (the reconciler's, `shared.catalog`) can read it too.

    await stored_since(bus, subjects.EVENTS, start)   # every event stored since `start`
    await stored(bus, subjects.RESULTS)                # every result event the stream holds
"""

from __future__ import annotations

import datetime as dt

import nats.js.errors as js_errors
from nats.js.api import RawStreamMsg

from .bus import Bus


async def stored_since(bus: Bus, stream: str, start: dt.datetime) -> list[RawStreamMsg]:
    """Every message stored in `stream` since `start`, oldest first.

    The first message at or after `start` is found by bisecting the stream's sequences."""
    info = await bus.js.stream_info(stream)
    first, last = info.state.first_seq, info.state.last_seq
    if not info.state.messages:
        return []
    start = start.astimezone(dt.UTC)
    lo, hi = first, last + 1  # the answer is in [lo, hi]; hi means "none"
    while lo < hi:
        mid = (lo + hi) // 2
        msg = await _next_msg(bus, stream, mid)
        if msg is None or msg.seq is None:
            hi = mid
        elif msg.time is not None and msg.time >= start:
            hi = mid
        else:
            lo = msg.seq + 1
    return await _from(bus, stream, lo, last)


async def stored(bus: Bus, stream: str) -> list[RawStreamMsg]:
    """Every message `stream` holds, oldest first."""
    info = await bus.js.stream_info(stream)
    if not info.state.messages:
        return []
    return await _from(bus, stream, info.state.first_seq, info.state.last_seq)


async def _from(bus: Bus, stream: str, seq: int, last: int) -> list[RawStreamMsg]:
    found: list[RawStreamMsg] = []
    while seq <= last:
        msg = await _next_msg(bus, stream, seq)
        if msg is None or msg.seq is None:
            break
        found.append(msg)
        seq = msg.seq + 1
    return found


async def _next_msg(bus: Bus, stream: str, seq: int) -> RawStreamMsg | None:
    """The first message stored at or after `seq`."""
    try:
        return await bus.js.get_msg(stream, seq=seq, subject=">", next=True)
    except js_errors.NotFoundError:
        return None
