"""Test helpers: waiting on a condition with a deadline, and reading what a stream holds."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg


async def eventually(
    check: Callable[[], Awaitable[object]] | Callable[[], object],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> None:
    """Wait until `check()` is truthy (a coroutine's result: awaited), failing with `message`
    after `timeout` seconds.

    Between two checks it waits `interval`, or as long as the check itself took if that is
    longer: a check that runs a CLI command (most of a second of CPU) is not repeated back to
    back, which on a machine running the suite in parallel starves the servers under test."""
    deadline = time.monotonic() + timeout
    while True:
        started = time.monotonic()
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(max(interval, time.monotonic() - started))


@dataclass(frozen=True)
class Stored:
    """A message a stream holds, as a test reads it (nats-py's `RawStreamMsg`, none of it
    optional)."""

    subject: str
    seq: int
    data: bytes
    headers: dict[str, str]
    time: dt.datetime | None = None


async def messages(js: JetStreamContext, stream: str) -> list[Stored]:
    """Every message `stream` holds now, oldest first."""
    info = await js.stream_info(stream)
    if info.state.messages == 0:
        return []
    found: list[RawStreamMsg] = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            found.append(await js.get_msg(stream, seq))
        except js_errors.NotFoundError:
            continue
    return [
        Stored(m.subject or "", m.seq or 0, m.data or b"", dict(m.headers or {}), m.time)
        for m in found
        if m.data is not None or m.headers
    ]


async def settled(
    js: JetStreamContext, stream: str, durable: str, *, delivered: bool = False
) -> bool:
    """The durable consumer has nothing pending or unacknowledged (and, with `delivered`, has
    delivered something); False while the service has not created it yet."""
    try:
        info = await js.consumer_info(stream, durable)
    except js_errors.NotFoundError:
        return False
    done = info.num_pending == 0 and info.num_ack_pending == 0
    return done and (not delivered or info.delivered.stream_seq > 0)
