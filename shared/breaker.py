"""A circuit breaker for one dependency (a delivery channel, the model): a pure state machine,
the clock passed in.

Closed, it lets every call through and remembers the last `window` outcomes; once at least
`min_samples` of them are in and the share of failures reaches `failure_rate`, it opens. Open,
it refuses calls for `open_seconds`, then turns half-open on the next look. Half-open, it lets
up to `half_open_probes` calls through at once: a probe success closes it with an empty window,
a probe failure opens it for another `open_seconds`.

The breaker does no I/O and is not thread-safe; one event loop owns it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class BreakerSettings:
    window: int = 20
    min_samples: int = 5
    failure_rate: float = 0.5
    open_seconds: float = 30.0
    half_open_probes: int = 1

    def __post_init__(self) -> None:
        if self.window < 1 or not 1 <= self.min_samples <= self.window:
            raise ValueError("need window >= 1 and 1 <= min_samples <= window")
        if not 0 < self.failure_rate <= 1:
            raise ValueError("failure_rate is a fraction in (0, 1]")
        if self.open_seconds <= 0 or self.half_open_probes < 1:
            raise ValueError("need open_seconds > 0 and half_open_probes >= 1")


class CircuitBreaker:
    """Ask `allow()` before a call and `record(success)` after it.

    `allow()` reserves a probe slot when half-open, so every allowed call must be recorded, or
    released with `release()` if it was never made (recording a made-up success would close
    the breaker untested). A reservation that is neither (the caller was cancelled) lapses
    after `open_seconds`, so a lost probe cannot wedge the breaker half-open for ever.

    Outcomes recorded while open are ignored: they belong to calls let through before it
    opened. Half-open, an outcome counts as the probe's only while a probe is in flight.

    `on_change(old, new)` is called after each transition, once the new state is in place.
    The open → half_open transition happens lazily, when `state`, `allow()`, `record()` or
    `retry_after()` next looks at the clock.
    """

    def __init__(
        self,
        settings: BreakerSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[str, str], None] | None = None,
    ) -> None:
        self.settings = settings or BreakerSettings()
        self.on_change = on_change
        self._clock = clock
        self._state: BreakerState = "closed"
        self._outcomes: deque[bool] = deque(maxlen=self.settings.window)
        self._opened_at = 0.0
        self._probes: list[float] = []  # when each in-flight probe was let through

    @property
    def state(self) -> BreakerState:
        if self._state == "open" and self._clock() - self._opened_at >= self.settings.open_seconds:
            self._probes.clear()
            self._transition("half_open")
        return self._state

    def allow(self) -> bool:
        """Whether a call may go ahead now; half-open, a True reserves a probe slot."""
        state = self.state
        if state != "half_open":
            return state == "closed"
        now = self._clock()
        self._probes = [t for t in self._probes if now - t < self.settings.open_seconds]
        if len(self._probes) >= self.settings.half_open_probes:
            return False
        self._probes.append(now)
        return True

    def record(self, success: bool) -> None:
        """The outcome of a call that `allow()` let through."""
        state = self.state
        if state == "closed":
            self._outcomes.append(success)
            if self._tripped():
                self._open()
        elif state == "half_open" and self._probes:
            if success:
                self._close()
            else:
                self._open()

    def release(self) -> None:
        """Give back what `allow()` reserved for a call that was never made; no outcome counts."""
        if self.state == "half_open" and self._probes:
            self._probes.pop()

    def retry_after(self) -> float:
        """Seconds until the breaker turns half-open; 0 unless it is open."""
        if self.state != "open":
            return 0.0
        return max(0.0, self._opened_at + self.settings.open_seconds - self._clock())

    def _tripped(self) -> bool:
        total = len(self._outcomes)
        failures = self._outcomes.count(False)
        return total >= self.settings.min_samples and failures / total >= self.settings.failure_rate

    def _open(self) -> None:
        self._opened_at = self._clock()
        self._probes.clear()
        self._transition("open")

    def _close(self) -> None:
        self._outcomes.clear()
        self._probes.clear()
        self._transition("closed")

    def _transition(self, new: BreakerState) -> None:
        old, self._state = self._state, new
        if old != new and self.on_change is not None:
            self.on_change(old, new)
