"""Bounded exponential backoff with jitter, as a pure value tested without a broker."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before delivery `attempt + 1`, after delivery `attempt` failed transiently.

    The delay is `initial * multiplier**(attempt-1)`, plus up to `jitter` of itself at random,
    never more than `maximum`. Jitter only lengthens a delay, so the un-jittered value is a
    lower bound a caller may rely on (until `maximum` caps it).
    """

    initial: float = 1.0
    multiplier: float = 2.0
    maximum: float = 60.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.multiplier < 1 or self.maximum < self.initial:
            raise ValueError("need initial > 0, multiplier >= 1 and maximum >= initial")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter is a fraction between 0 and 1")

    def base(self, attempt: int) -> float:
        """The un-jittered delay after delivery `attempt` (1-based)."""
        exponent = max(attempt, 1) - 1
        # Cap the exponent so huge attempt numbers cannot overflow a float.
        return min(self.maximum, self.initial * self.multiplier ** min(exponent, 64))

    def delay(
        self,
        attempt: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """The delay to use; a downstream's Retry-After wins when it is longer (still bounded)."""
        base = self.base(attempt)
        spread = (rng or random).uniform(0, base * self.jitter)
        chosen = min(self.maximum, base + spread)
        if retry_after is not None and retry_after > chosen:
            chosen = min(self.maximum, retry_after)
        return chosen
