"""The consumer runtime against a real nats-server: every outcome maps to the right ack."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import BaseModel

from shared import subjects
from shared.bus import Bus
from shared.consumer import Consumer, ConsumerRuntime, Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError, TransientError, Unavailable
from shared.retry import RetryPolicy
from tests.helpers import eventually, messages

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

SUBJECT = subjects.work("test", "ticket.created")


def consumer(handler: Callable[[Delivery[Any]], Awaitable[None]], **overrides: Any) -> Consumer:
    options: dict[str, Any] = {
        "name": "test",
        "stream": subjects.WORK,
        "subjects": (subjects.work_for("test"),),
        "handler": handler,
        "retry": RetryPolicy(initial=0.2, multiplier=2, maximum=5, jitter=0.1),
        "ack_wait": 2.0,
        "max_deliver": 5,
    }
    options.update(overrides)
    return Consumer(**options)


@asynccontextmanager
async def running(bus: Bus, spec: Consumer) -> AsyncIterator[ConsumerRuntime]:
    runtime = ConsumerRuntime(bus, "svc", spec, fetch_timeout=0.5)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop(timeout=5)


async def publish(bus: Bus, body: dict[str, Any] | bytes, msg_id: str = "m1") -> None:
    data = (
        body if isinstance(body, bytes) else Envelope(source="test", type="t", data=body).to_bytes()
    )
    await bus.publish(SUBJECT, data, msg_id=msg_id, headers={"X-Original": "yes"})


async def settled(bus: Bus, name: str = "test") -> bool:
    info = await bus.js.consumer_info(subjects.WORK, name)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def nothing_outstanding(bus: Bus, name: str = "test") -> None:
    """The broker's word that nothing can come back: every message of the stream is past the
    consumer's ack floor (acked or terminated), none waits for an ack, none was redelivered."""
    info = await bus.js.consumer_info(subjects.WORK, name)
    last = (await bus.js.stream_info(subjects.WORK)).state.last_seq
    assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (last, 0, 0)
    assert info.num_redelivered == 0


async def test_transient_errors_are_retried_with_growing_backoff(bus: Bus) -> None:
    calls: list[float] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise TransientError("helpdesk answered 503")

    async with running(bus, consumer(handler)):
        await publish(bus, {"ticket": "T1"})
        await eventually(lambda: len(calls) >= 3, message="the third attempt")
        await eventually(lambda: settled(bus), message="the ack")

    assert len(calls) == 3
    first_gap, second_gap = calls[1] - calls[0], calls[2] - calls[1]
    assert first_gap >= 0.2
    assert second_gap >= 0.4
    assert (await bus.js.stream_info(subjects.DLQ)).state.messages == 0


async def test_a_permanent_error_dead_letters_once_with_payload_and_error(bus: Bus) -> None:
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        raise PermanentError("ticket T9999 does not exist")

    async with running(bus, consumer(handler)):
        await publish(bus, {"ticket": "T9999"}, msg_id="helpdesk:e9")
        await eventually(lambda: settled(bus), message="the term")
        await nothing_outstanding(bus)

    assert calls == [1]
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.subject == subjects.dlq("svc")
    assert Envelope.model_validate_json(dead.data).data == {"ticket": "T9999"}
    assert dead.headers["Desk-Dlq-Error"] == "ticket T9999 does not exist"
    assert dead.headers["Desk-Dlq-Reason"] == "permanent"
    assert dead.headers["Desk-Dlq-Attempts"] == "1"
    assert dead.headers["Desk-Dlq-Subject"] == SUBJECT
    assert dead.headers["Desk-Original-Msg-Id"] == "helpdesk:e9"
    assert dead.headers["X-Original"] == "yes"
    info = await bus.js.consumer_info(subjects.WORK, "test")
    assert info.num_redelivered == 0


async def test_a_business_reject_is_acked_and_never_retried(bus: Bus) -> None:
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        raise BusinessReject("ticket is closed", outcome="closed")

    async with running(bus, consumer(handler)):
        await publish(bus, {"ticket": "T1040"})
        await eventually(lambda: settled(bus), message="the ack")
        await nothing_outstanding(bus)

    assert calls == [1]
    info = await bus.js.consumer_info(subjects.WORK, "test")
    assert info.ack_floor.stream_seq == 1
    assert info.num_redelivered == 0
    assert (await bus.js.stream_info(subjects.DLQ)).state.messages == 0


async def test_retries_exhausted_at_max_deliveries_dead_letters_exactly_once(bus: Bus) -> None:
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        raise TransientError("still down")

    spec = consumer(handler, max_deliver=3, retry=RetryPolicy(initial=0.1, jitter=0))
    async with running(bus, spec):
        await publish(bus, {"ticket": "T1"})
        await eventually(lambda: settled(bus), message="the dead letter")
        info = await bus.js.consumer_info(subjects.WORK, "test")  # the third delivery terminated
        assert (info.ack_floor.stream_seq, info.num_ack_pending) == (1, 0)

    assert calls == [1, 2, 3]
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.headers["Desk-Dlq-Reason"] == "retries_exhausted"
    assert dead.headers["Desk-Dlq-Attempts"] == "3"
    assert dead.headers["Desk-Dlq-Error"] == "still down"


async def test_unexpected_exceptions_are_retried_like_transient_ones(bus: Bus) -> None:
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        if d.attempt == 1:
            raise KeyError("bug")

    async with running(bus, consumer(handler)):
        await publish(bus, {"ticket": "T1"})
        await eventually(lambda: settled(bus) if len(calls) == 2 else False, message="the retry")
    assert calls == [1, 2]


async def test_garbage_bytes_are_dead_lettered_and_the_runtime_keeps_going(bus: Bus) -> None:
    handled: list[Any] = []

    async def handler(d: Delivery[Envelope]) -> None:
        handled.append(d.body.data)

    async with running(bus, consumer(handler)):
        await publish(bus, b"\xff\xfe\x00 not an event", msg_id="junk")
        await eventually(lambda: bus.js.stream_info(subjects.DLQ), message="the DLQ stream")
        await publish(bus, {"ticket": "T2"}, msg_id="good")
        await eventually(lambda: handled == [{"ticket": "T2"}], message="the next message")
        await eventually(lambda: settled(bus), message="both settled")

    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.data == b"\xff\xfe\x00 not an event"
    assert dead.headers["Desk-Dlq-Reason"] == "undecodable"


async def test_long_handlers_send_heartbeats_and_are_not_redelivered(bus: Bus) -> None:
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        await asyncio.sleep(3.5)  # well past ack_wait (1 s)

    async with running(bus, consumer(handler, ack_wait=1.0)):
        await publish(bus, {"ticket": "T3"})
        await eventually(lambda: settled(bus), timeout=15, message="the ack")
    assert calls == [1]


async def test_concurrency_is_bounded(bus: Bus) -> None:
    active = 0
    peak = 0
    done = 0

    async def handler(d: Delivery[Envelope]) -> None:
        nonlocal active, peak, done
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.05)
        active -= 1
        done += 1

    async with running(bus, consumer(handler, concurrency=3, batch=10)):
        for i in range(30):
            await publish(bus, {"n": i}, msg_id=f"m{i}")
        await eventually(lambda: done == 30, message="all 30 handled")
    assert peak == 3


async def test_every_outcome_series_exists_at_zero_before_the_first_message(bus: Bus) -> None:
    """A counter that appears only at its first event makes `increase()` miss that event (the
    dashboard's "Dead letters (24h)" read 0 while two existed)."""

    async def never(delivery: Delivery[Any]) -> None:
        raise AssertionError("no message is sent")

    async with running(bus, consumer(never, name="zeroes")):
        for reason in ("undecodable", "permanent", "retries_exhausted"):
            labels = {"service": "svc", "consumer": "zeroes", "reason": reason}
            assert REGISTRY.get_sample_value("desk_dead_letters_total", labels) == 0.0, reason
        for outcome in ("acked", "rejected", "retried", "handed_back", "dead_lettered"):
            labels = {"service": "svc", "consumer": "zeroes", "outcome": outcome}
            assert REGISTRY.get_sample_value("desk_messages_total", labels) == 0.0, outcome


def waiting(name: str = "test") -> float | None:
    return REGISTRY.get_sample_value("desk_waiting", {"service": "svc", "consumer": name})


async def test_a_dependency_down_longer_than_every_retry_is_waited_for_not_dead_lettered(
    bus: Bus,
) -> None:
    """More failures than max_deliver allows, all `Unavailable`: no delivery is spent (the
    broker counts naks), the work is done when the dependency is back, nothing dead-letters."""
    calls: list[int] = []
    back = asyncio.Event()

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        if not back.is_set():
            raise Unavailable("channel circuit open", retry_after=0.1)

    spec = consumer(handler, max_deliver=2, retry=RetryPolicy(initial=0.05, maximum=0.2))
    async with running(bus, spec):
        await publish(bus, {"ticket": "T1"})
        await eventually(lambda: len(calls) >= 8, message="eight tries while down")
        assert waiting() == 1.0
        back.set()
        await eventually(lambda: settled(bus), message="the ack once it is back")

    assert set(calls) == {1}, "every try was the first delivery"
    assert waiting() == 0.0
    info = await bus.js.consumer_info(subjects.WORK, "test")
    assert info.num_redelivered == 0
    assert (await bus.js.stream_info(subjects.DLQ)).state.messages == 0


async def test_an_unreachable_database_is_waited_for_like_any_dependency(bus: Bus) -> None:
    """What a PostgreSQL restart looks like from a handler: the driver's OperationalError."""
    import psycopg
    import sqlalchemy.exc

    failures = [
        sqlalchemy.exc.OperationalError("SELECT 1", {}, psycopg.OperationalError("closed")),
        psycopg.OperationalError("the connection is closed"),
    ] * 3
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        if failures:
            raise failures.pop(0)

    spec = consumer(handler, max_deliver=2, retry=RetryPolicy(initial=0.05, maximum=0.2))
    async with running(bus, spec):
        await publish(bus, {"ticket": "T1"})
        await eventually(lambda: settled(bus), message="the ack")
    assert calls == [1] * 7
    assert (await bus.js.stream_info(subjects.DLQ)).state.messages == 0


async def test_a_bug_in_sql_is_not_mistaken_for_an_outage(bus: Bus) -> None:
    import sqlite3

    import sqlalchemy.exc

    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        raise sqlalchemy.exc.OperationalError(
            "SELECT", {}, sqlite3.OperationalError("no such table: nowhere")
        )

    async with running(bus, consumer(handler, max_deliver=2)):
        await publish(bus, {"ticket": "T1"})
        await eventually(lambda: settled(bus), message="the dead letter")
    assert calls == [1, 2]
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.headers["Desk-Dlq-Reason"] == "retries_exhausted"


async def test_stopping_hands_a_waiting_delivery_back_at_once(bus: Bus) -> None:
    calls: list[int] = []

    async def handler(d: Delivery[Envelope]) -> None:
        calls.append(d.attempt)
        raise Unavailable("database unreachable", retry_after=60)

    runtime = ConsumerRuntime(bus, "svc", consumer(handler), fetch_timeout=0.5)
    await runtime.start()
    await publish(bus, {"ticket": "T1"})
    await eventually(lambda: calls == [1] and waiting() == 1.0, message="waiting")
    began = time.monotonic()
    await runtime.stop(timeout=30)
    assert time.monotonic() - began < 5, "a wait of 60s did not hold up the drain"
    assert waiting() == 0.0
    done: list[int] = []

    async def next_replica(d: Delivery[Envelope]) -> None:
        done.append(d.attempt)

    async with running(bus, consumer(next_replica)):  # handed back: the next one takes it
        await eventually(lambda: settled(bus), timeout=5, message="taken by the next replica")
    assert len(done) == 1 and done[0] > 1


class Ticket(BaseModel):
    ticket: str


async def test_the_declared_payload_reaches_the_handler_typed_and_anything_else_dead_letters(
    bus: Bus,
) -> None:
    """The data is checked once, in the runtime: a handler never sees what is not its model."""
    seen: list[Any] = []

    async def handler(d: Delivery[Envelope]) -> None:
        seen.append(d.payload)

    async with running(bus, consumer(handler, payload=Ticket)):
        await publish(bus, {"ticket": "T1"}, msg_id="good")
        await publish(bus, {"order": 7}, msg_id="bad")
        await eventually(lambda: settled(bus), message="both settled")
    assert seen == [Ticket(ticket="T1")]
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.headers["Desk-Dlq-Reason"] == "permanent"
    assert dead.headers["Desk-Dlq-Error"] == "not a Ticket: ticket: Field required"
    assert dead.headers["Desk-Dlq-Attempts"] == "1"


async def test_a_payload_per_subject_and_a_subject_with_none_declared(bus: Bus) -> None:
    seen: list[Any] = []

    async def handler(d: Delivery[Envelope]) -> None:
        seen.append(d.payload)

    other = subjects.work("test", "other.kind")
    async with running(bus, consumer(handler, payload={SUBJECT: Ticket})):
        await publish(bus, {"ticket": "T2"})
        data = Envelope(source="test", type="t", data={"ticket": "T3"}).to_bytes()
        await bus.publish(other, data, msg_id="other")
        await eventually(lambda: settled(bus), message="both settled")
    assert seen == [Ticket(ticket="T2")]
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.headers["Desk-Dlq-Error"] == f"nothing is expected on {other}"
