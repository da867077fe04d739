"""How many model calls one drafter keeps in flight: at most `DESK_LLM_CONCURRENCY`, adapted to
what the endpoint can take (additive increase, multiplicative decrease, as TCP does).

A real model answers in seconds, so a drafter's throughput is the calls it keeps in flight over
their latency. Each answered call raises the limit by 1/limit (one more slot per round of calls
answered), up to the ceiling; a 429 halves it (at most once per `cooldown`: the calls in flight
when the endpoint filled up all come back 429 together, and that is one signal, not twenty) and
holds every new call until the endpoint's Retry-After has passed. A call waiting for a slot
keeps its delivery in progress (the consumer runtime's heartbeats), so a long queue of them is
not redelivered.

A slot is one request at the endpoint (`Call`: taken when the request is built, given back when
the answer's headers are in). Of the deliveries the drafter holds (twice the ceiling + the bus's
concurrency), at most `ceiling` at once prepare their calls or wait with them ready (`ahead`):
at a burst the first C get their calls out before the next ones' work is done in between them
on the one event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

from . import metrics


class Limiter:
    def __init__(
        self,
        ceiling: int,
        *,
        cooldown: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ceiling < 1:
            raise ValueError("a limiter needs a ceiling of at least 1")
        self.ceiling = ceiling
        self.limit = float(ceiling)  # a fresh endpoint is trusted with all of it
        self.in_flight = 0
        self.cooldown = cooldown
        self._clock = clock
        self._paused_until = 0.0
        self._decreased_at = -float("inf")
        self._changed = asyncio.Condition()
        self._ahead = asyncio.Semaphore(ceiling)
        metrics.LLM_LIMIT.set(self.limit)

    @property
    def slots(self) -> int:
        return max(1, int(self.limit))

    @asynccontextmanager
    async def ahead(self) -> AsyncIterator[None]:
        """A delivery on its way to a call: at most `ceiling` of them at once prepare theirs
        or wait with it ready, and a place goes to the next delivery once a call has its slot
        (or ends without one)."""
        place = _Place(self._ahead)
        await self._ahead.acquire()
        token = _AHEAD.set(place)
        try:
            yield
        finally:
            _AHEAD.reset(token)
            place.leave()

    async def acquire(self) -> None:
        """Take a slot: wait for one, and out any pause."""
        async with self._changed:
            while True:
                pause = self._paused_until - self._clock()
                if pause > 0:
                    try:  # woken early only to look again
                        await asyncio.wait_for(self._changed.wait(), timeout=pause)
                    except TimeoutError:
                        pass
                elif self.in_flight < self.slots:
                    break
                else:
                    await self._changed.wait()
            self.in_flight += 1
            metrics.LLM_IN_FLIGHT.set(self.in_flight)

    async def release(self) -> None:
        async with self._changed:
            self.in_flight -= 1
            metrics.LLM_IN_FLIGHT.set(self.in_flight)
            self._changed.notify_all()

    def answered(self) -> None:
        """A call came back (an answer, or an error that is not about load): one more slot per
        round of answered calls, up to the ceiling."""
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            metrics.LLM_LIMIT.set(self.limit)

    def overloaded(self, retry_after: float | None) -> None:
        """The endpoint said 429: half the slots (once per cooldown), and no new call before
        its Retry-After has passed."""
        now = self._clock()
        if now - self._decreased_at >= self.cooldown:
            self.limit = max(1.0, self.limit / 2)
            self._decreased_at = now
            metrics.LLM_LIMIT.set(self.limit)
            metrics.LLM_OVERLOADED.inc()
        if retry_after:
            self._paused_until = max(self._paused_until, now + retry_after)


class Call:
    """One model call's claim on a slot: taken when its request is ready to go out, given back
    as soon as the answer's headers are in (`model`'s HTTP hooks), so that a slot spans the
    exchange with the endpoint only, not the turns of a busy event loop it takes to build the
    request and to read the answer; given back at the latest when the call ends."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self.holding = False

    async def take(self) -> None:
        if not self.holding:
            await self.limiter.acquire()
            self.holding = True
            place = _AHEAD.get()
            if place is not None:
                place.leave()

    async def give_back(self) -> None:
        if self.holding:
            self.holding = False
            await self.limiter.release()


class _Place:
    def __init__(self, ahead: asyncio.Semaphore) -> None:
        self._ahead = ahead
        self._held = True

    def leave(self) -> None:
        if self._held:
            self._held = False
            self._ahead.release()


_AHEAD: ContextVar[_Place | None] = ContextVar("desk_ahead", default=None)
