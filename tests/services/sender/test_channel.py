"""The webhook reply channel's reading of an answer, against a real HTTP endpoint: the status and
the Retry-After go by `shared.answers`, the rule every outbound client shares."""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import AsyncIterator

import pytest

from services.sender.channel import WebhookChannel
from services.sender.store import OutboxRow
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.ratelimit import TokenBucket
from standins.channel import FakeChannel

ROW = OutboxRow(
    key="T1020/r1/send_reply",
    item_id="item-1",
    thread="T1020",
    version=1,
    ticket_id="T1020",
    action="send_reply",
    final_text="Hello",
    decision_type="accept",
    reviewer="reviewer",
    channel="webhook",
    created_at=dt.datetime(2026, 11, 28, tzinfo=dt.UTC),
)


@pytest.fixture
async def channel(fake_channel: FakeChannel) -> AsyncIterator[WebhookChannel]:
    made = WebhookChannel(
        fake_channel.url,
        None,
        connect_timeout=1.0,
        read_timeout=1.0,
        breaker=CircuitBreaker(BreakerSettings(window=50, min_samples=50)),
        bucket=TokenBucket(100, 100),
    )
    try:
        yield made
    finally:
        await made.close()


def http_date(seconds_from_now: float) -> str:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds_from_now)
    return email.utils.format_datetime(later, usegmt=True)


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500, 503])
async def test_a_transient_answer_is_retried_with_its_retry_after(
    fake_channel: FakeChannel, channel: WebhookChannel, status: int
) -> None:
    fake_channel.fail_next(status)
    fake_channel.retry_after = "4"
    attempt = await channel.deliver(ROW)
    assert (attempt.outcome, attempt.status_code, attempt.retry_after) == ("retry", status, 4.0)
    assert attempt.error == f"answered {status}"


@pytest.mark.parametrize("status", [400, 403, 404, 410, 422])
async def test_another_4xx_fails_for_good(
    fake_channel: FakeChannel, channel: WebhookChannel, status: int
) -> None:
    fake_channel.fail_next(status)
    fake_channel.retry_after = "4"
    attempt = await channel.deliver(ROW)
    assert (attempt.outcome, attempt.status_code, attempt.retry_after) == ("failed", status, None)


async def test_a_retry_after_http_date_is_honoured(
    fake_channel: FakeChannel, channel: WebhookChannel
) -> None:
    """Before the shared rule the channel read delta-seconds only and dropped a date."""
    fake_channel.fail_next(503)
    fake_channel.retry_after = http_date(30)
    attempt = await channel.deliver(ROW)
    assert attempt.outcome == "retry"
    assert attempt.retry_after is not None and 28 <= attempt.retry_after <= 30


@pytest.mark.parametrize("value", ["-5", "inf", "soon"])
async def test_a_retry_after_that_is_no_delay_is_ignored(
    fake_channel: FakeChannel, channel: WebhookChannel, value: str
) -> None:
    fake_channel.fail_next(503)
    fake_channel.retry_after = value
    attempt = await channel.deliver(ROW)
    assert (attempt.outcome, attempt.retry_after) == ("retry", None)
