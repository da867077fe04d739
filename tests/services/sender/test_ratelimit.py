"""The channel token bucket: burst, refill and waiting, mostly on a fake clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from shared.ratelimit import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeSleep:
    """Stands in for asyncio.sleep: notes each delay and moves the clock on by it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(seconds)


def test_a_full_bucket_gives_its_burst_then_refills_at_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=2, burst=3, clock=clock)
    assert [bucket.try_take() for _ in range(4)] == [True, True, True, False]
    assert bucket.wait_time() == pytest.approx(0.5)
    clock.advance(0.25)
    assert not bucket.try_take()
    assert bucket.wait_time() == pytest.approx(0.25)
    clock.advance(0.25)
    assert bucket.try_take()
    assert not bucket.try_take()


def test_refill_is_capped_at_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=100, burst=2, clock=clock)
    assert bucket.try_take()
    clock.advance(3600)
    assert bucket.wait_time() == 0
    assert [bucket.try_take() for _ in range(3)] == [True, True, False]


async def test_take_returns_at_once_when_a_token_is_free() -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    bucket = TokenBucket(rate=1, burst=1, clock=clock, sleep=sleep)
    assert await bucket.take(max_wait=0)
    assert sleep.slept == []


async def test_take_sleeps_until_the_next_token() -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    bucket = TokenBucket(rate=10, burst=1, clock=clock, sleep=sleep)
    assert bucket.try_take()
    assert await bucket.take(max_wait=1)
    assert sleep.slept == [pytest.approx(0.1)]
    assert not bucket.try_take()


async def test_take_refuses_without_sleeping_or_spending_when_the_wait_is_too_long() -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    bucket = TokenBucket(rate=1, burst=1, clock=clock, sleep=sleep)
    assert bucket.try_take()
    assert not await bucket.take(max_wait=0.5)
    assert sleep.slept == []
    assert bucket.wait_time() == pytest.approx(1)


async def test_waiters_reserve_tokens_in_arrival_order() -> None:
    clock = FakeClock()
    slept: list[float] = []
    release = asyncio.Event()

    async def held_sleep(seconds: float) -> None:
        slept.append(seconds)
        await release.wait()

    bucket = TokenBucket(rate=10, burst=1, clock=clock, sleep=held_sleep)
    assert bucket.try_take()
    first = asyncio.create_task(bucket.take(max_wait=1))
    second = asyncio.create_task(bucket.take(max_wait=1))
    await asyncio.sleep(0)
    assert slept == [pytest.approx(0.1), pytest.approx(0.2)]
    assert bucket.wait_time() == pytest.approx(0.3)  # a newcomer queues behind both
    assert not await bucket.take(max_wait=0.25)
    assert not bucket.try_take()
    release.set()
    assert await first and await second


async def test_a_cancelled_waiter_hands_its_token_back() -> None:
    clock = FakeClock()
    never = asyncio.Event()

    async def stuck_sleep(seconds: float) -> None:
        await never.wait()

    bucket = TokenBucket(rate=10, burst=1, clock=clock, sleep=stuck_sleep)
    assert bucket.try_take()
    waiter = asyncio.create_task(bucket.take(max_wait=1))
    await asyncio.sleep(0)
    assert bucket.wait_time() == pytest.approx(0.2)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert bucket.wait_time() == pytest.approx(0.1)


async def test_take_really_waits_with_asyncio_sleep() -> None:
    bucket = TokenBucket(rate=50, burst=1)
    assert await bucket.take(max_wait=0)
    started = time.monotonic()
    assert await bucket.take(max_wait=1)
    assert time.monotonic() - started >= 0.015
    slow = TokenBucket(rate=1, burst=1)  # the next token is a second away, however busy we are
    assert await slow.take(max_wait=0)
    assert not await slow.take(max_wait=0.001)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_nonsense_buckets_are_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)
