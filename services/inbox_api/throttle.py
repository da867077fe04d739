"""Failed credential attempts per client address, as token buckets.

Each address may fail `burst` times in a row and earns one more attempt every `1 / rate`
seconds. Only failures spend (a reviewer using the API all day is never throttled); once the
bucket is empty every attempt from that address, right or wrong, gets 429 until it refills, so
guessing cannot go on at more than `rate` tries a second. In memory, per process: a restart
forgets, and each replica counts its own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class Throttle:
    def __init__(
        self,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        clients: int = 10_000,
    ) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock
        self.clients = clients  # addresses remembered at most (the oldest are forgotten)
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, at)

    def _tokens(self, client: str, now: float) -> float:
        tokens, at = self._buckets.get(client, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def retry_after(self, client: str) -> int:
        """Whole seconds until `client` may try again; 0: it may try now."""
        missing = 1.0 - self._tokens(client, self.clock())
        return 0 if missing <= 0 else max(1, math.ceil(missing / self.rate))

    def failed(self, client: str) -> bool:
        """Spend one attempt; True when that was the last one the address had."""
        now = self.clock()
        tokens = max(0.0, self._tokens(client, now) - 1.0)
        self._buckets.pop(client, None)  # re-inserted last: the dict stays oldest-first
        self._buckets[client] = (tokens, now)
        if len(self._buckets) > self.clients:
            self._forget(now)
        return tokens < 1.0

    def _forget(self, now: float) -> None:
        """Drop the buckets that have refilled (as good as new), then the oldest."""
        for client in [c for c in self._buckets if self._tokens(c, now) >= self.burst]:
            del self._buckets[client]
        while len(self._buckets) > self.clients:
            del self._buckets[next(iter(self._buckets))]
