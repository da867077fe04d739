"""A token bucket for one delivery channel: `burst` calls at once, then `rate` per second.

The bucket starts full and refills lazily from the clock it is given. `take()` reserves its
token before sleeping, so waiters are served in arrival order and a waiter never oversleeps
its `max_wait`; a cancelled waiter hands its token back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    def __init__(
        self,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("need rate > 0 (tokens per second) and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)  # below zero: tokens already promised to waiters
        self._updated = clock()

    def try_take(self) -> bool:
        """Take a token if one is free now."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def wait_time(self) -> float:
        """Seconds until a token is free (0 if one is free now), counting tokens promised."""
        self._refill()
        return max(0.0, (1 - self._tokens) / self.rate)

    async def take(self, max_wait: float) -> bool:
        """Take a token, sleeping for it up to `max_wait` seconds; False at once if longer."""
        wait = self.wait_time()
        if wait > max(max_wait, 0.0):
            return False
        self._tokens -= 1
        if wait > 0:
            try:
                await self._sleep(wait)
            except asyncio.CancelledError:
                self._refill()
                self._tokens = min(float(self.burst), self._tokens + 1)
                raise
        return True

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
