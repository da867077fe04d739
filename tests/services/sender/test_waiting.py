"""A channel that is down or flaky is waited for, never a reason to fail or dead-letter an
approved reply; only `DESK_DELIVERY_DEADLINE` ends one as `reply.failed`, and a reply that may
have gone out (`unknown`) is never reported as failed."""

from __future__ import annotations

import time

from shared import subjects
from shared.bus import Bus
from standins.channel import FakeChannel
from tests.helpers import eventually, messages
from tests.inbox_items import draft_item, publish_decision, publish_item

from .conftest import Senders, data, results

FAST = {"DESK_RETRY_INITIAL": "0.1", "DESK_RETRY_MAX": "0.5"}


async def _sent(bus: Bus, n: int) -> bool:
    return len(await results(bus, "reply.sent")) == n


async def test_a_flaky_channel_opens_the_breaker_and_every_reply_still_goes_out(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    """Every key's first request fails: the breaker opens, and decisions wait for it to close
    however many times that takes (here more than the two deliveries the consumer allows)."""
    fake_channel.fail_first_per_key = True
    senders.webhook(
        fake_channel.url,
        DESK_BREAKER_MIN_SAMPLES="2",
        DESK_BREAKER_WINDOW="4",
        DESK_BREAKER_OPEN_SECONDS="1",
        DESK_MAX_DELIVER="2",
        **FAST,
    )
    process = senders.start()
    tickets = ("T1002", "T1005", "T1007", "T1009", "T1020", "T1021")
    for ticket in tickets:
        item = draft_item(ticket)
        await publish_item(bus, item)
        await publish_decision(bus, item, "accept")
    await eventually(lambda: _sent(bus, len(tickets)), timeout=40, message="every reply sent")
    assert "closed → open" in process.log.read_text()  # the whole log: tail() is its end
    assert await messages(bus.js, subjects.DLQ) == []
    assert await results(bus, "reply.failed") == []
    assert sorted(set(fake_channel.keys())) == sorted(f"{t}/r1/send_reply" for t in tickets)
    assert {row.delivery for row in senders.outbox()} == {"delivered"}


async def test_a_reply_not_delivered_within_the_deadline_ends_reply_failed_with_the_reason(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    fake_channel.down = True
    senders.webhook(fake_channel.url, DESK_DELIVERY_DEADLINE="2", DESK_MAX_DELIVER="50", **FAST)
    senders.start()
    item = draft_item("T1020")
    await publish_item(bus, item)
    approved = time.monotonic()
    await publish_decision(bus, item, "accept")
    await eventually(lambda: results(bus, "reply.failed"), timeout=20, message="reply.failed")
    assert time.monotonic() - approved >= 2
    [failed] = await results(bus, "reply.failed")
    error = data(failed)["error"]
    assert "DESK_DELIVERY_DEADLINE (2s)" in error and "503" in error, error
    assert len(fake_channel.requests) >= 2  # it kept trying until the deadline
    [row] = senders.outbox()
    assert row.delivery == "failed"
    assert await messages(bus.js, subjects.DLQ) == []
    assert await results(bus, "reply.sent") == []


async def test_a_reply_that_may_have_gone_out_is_rechecked_past_the_deadline_never_failed(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    """No answer to the first request (did it arrive?), then 503s to the re-checks, all past
    the deadline: the reply stays `unknown` and is re-sent with the same key until the channel
    answers; reporting it failed could make a person send it a second time."""
    fake_channel.hang_next(2.0)  # longer than the 1 s read timeout
    fake_channel.fail_next(503, times=3)
    senders.webhook(fake_channel.url, DESK_DELIVERY_DEADLINE="1", DESK_MAX_DELIVER="2", **FAST)
    senders.start()
    item = draft_item("T1022")
    await publish_item(bus, item)
    await publish_decision(bus, item, "accept")
    await eventually(lambda: _sent(bus, 1), timeout=30, message="delivered on a re-check")
    assert fake_channel.keys() == ["T1022/r1/send_reply"] * 5
    assert [a.outcome for a in senders.audit()] == [
        "unknown",
        "retry",
        "retry",
        "retry",
        "delivered",
    ]
    assert await results(bus, "reply.failed") == []
    assert await messages(bus.js, subjects.DLQ) == []
