"""The model endpoint as a dependency: a breaker in front of it, and what it says about itself.

No connection, a timeout, a 5xx, a 429 or refused credentials are an outage of the endpoint, not
a fault of the ticket whose call met it. Each is one failure of the breaker
(`shared.breaker`); after `DESK_LLM_DOWN_AFTER` in a row the model counts as down:

- every call is held before it is made (`Unavailable`: the consumer runtime keeps the delivery
  in progress and runs it again, spending no attempt), so an outage of any length ends with
  the tickets drafted, never dead-lettered;
- every `DESK_LLM_PROBE_INTERVAL` one call goes out as a probe; when it answers, the model is
  up again and the waiting deliveries follow within seconds, oldest first as they were taken;
- `desk_model_up` is 0, `/readyz` and `desk status` say `model: down since …`, and the inbox
  shows a banner (`shared.outage`).

A call that fails while the breaker stays closed (the endpoint answers others) is held and tried
again too; the same ticket failing `DESK_LLM_TICKET_FAILURES` times so is the ticket's own
problem: `ModelFailed`, which the graph turns into an inbox item without a draft. So is a
refusal of the ticket's content (400, 413, 422), at once.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from shared import outage
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.errors import DeskError, PermanentError, TransientError, Unavailable
from shared.logging import redact

from . import metrics

log = logging.getLogger(__name__)

# a held delivery whose probe is out looks again this soon (the probe answers or times out)
PROBE_OUT_WAIT = 2.0
TRACKED_TICKETS = 10_000  # tickets whose failures are counted at once (the oldest forgotten)
# auto output mode (`model.py`) asks the stronger modes again after this long
RETRY_MODES_AFTER = 600.0


class EndpointFailure(TransientError):
    """A model call met an outage of the endpoint. `kind`: unreachable, timeout, server,
    overloaded (429) or refused (credentials, a wrong path, a mode it cannot do)."""

    def __init__(self, message: str, *, kind: str, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.kind = kind


class ModelFailed(PermanentError):
    """The model cannot draft this ticket: a person writes the reply (an item without a draft)."""


_TICKET: ContextVar[str | None] = ContextVar("desk_model_ticket", default=None)


class Health:
    """One drafter's view of its model endpoint; one event loop owns it."""

    def __init__(
        self,
        *,
        down_after: int = 3,
        probe_interval: float = 15.0,
        ticket_failures: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.breaker = CircuitBreaker(
            BreakerSettings(
                window=down_after,
                min_samples=down_after,
                failure_rate=1.0,  # `down_after` failures in a row, no success between
                open_seconds=probe_interval,
            ),
            clock=clock,
            on_change=self._changed,
        )
        self.ticket_failures = ticket_failures
        self._clock = clock
        self.up = True
        self.since = dt.datetime.now(dt.UTC)
        self.reason = ""
        self.recoveries = 0  # times the model came back: auto mode asks the stronger modes again
        self._failures: OrderedDict[str, int] = OrderedDict()
        self._changes = 0  # state changes, so a report is written once per change
        self._reported: tuple[int, float] | None = None  # (changes, when) of the last report
        metrics.MODEL_UP.set(1)

    # ---- around a call --------------------------------------------------------------------

    @contextmanager
    def ticket(self, thread: str) -> Iterator[None]:
        """Calls made inside are for `thread`'s ticket (its failures are counted for it)."""
        token = _TICKET.set(thread)
        try:
            yield
        finally:
            _TICKET.reset(token)

    def admit(self) -> None:
        """Before a call: go ahead, or wait (`Unavailable`) while the model is down."""
        if self.breaker.allow():
            return
        retry_after = self.breaker.retry_after() or PROBE_OUT_WAIT
        raise Unavailable(self.describe(), retry_after=retry_after)

    def release(self) -> None:
        """A call `admit` let through was not made after all (cancelled, or failed here)."""
        self.breaker.release()

    def answered(self) -> None:
        """The endpoint answered (a draft or not: it is up)."""
        self.breaker.record(True)
        thread = _TICKET.get()
        if thread is not None:
            self._failures.pop(thread, None)

    def failed(self, failure: EndpointFailure) -> DeskError:
        """The endpoint failed a call: what to raise for it."""
        metrics.MODEL_FAILURES.labels(failure.kind).inc()
        self.reason = redact(" ".join(str(failure).split()))[:300]
        self.breaker.record(False)
        if self.breaker.state != "closed":
            return Unavailable(self.describe(), retry_after=self.breaker.retry_after() or None)
        thread = _TICKET.get()
        if thread is not None:
            count = self._failures.pop(thread, 0) + 1
            if count >= self.ticket_failures:
                return ModelFailed(
                    f"the model failed {count} times on this ticket while it answered others "
                    f"(last: {self.reason})"
                )
            self._failures[thread] = count
            while len(self._failures) > TRACKED_TICKETS:
                self._failures.popitem(last=False)
        return Unavailable(f"{self.reason}; trying again", retry_after=failure.retry_after)

    # ---- what it says ---------------------------------------------------------------------

    def describe(self) -> str:
        """`model: down since 14:02:11 UTC (…)` as one line, for logs, /readyz and errors."""
        if self.up:
            return "up"
        since = self.since.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"down since {since} ({self.reason or 'no answer'})"

    def degraded(self) -> dict[str, str]:
        """What `/readyz` adds while the model is down (the drafter stays ready: it takes work,
        which waits)."""
        return {} if self.up else {"model": self.describe()}

    def state(self) -> outage.ModelState:
        now = dt.datetime.now(dt.UTC)
        return outage.ModelState(up=self.up, since=self.since, reason=self.reason, at=now)

    async def report(self, writer: outage.Writer) -> None:
        """Write the state for the inbox when it changed, and every `outage.REFRESH` seconds
        while the model is down (a report not rewritten goes stale: a drafter that is gone)."""
        now = self._clock()
        last = self._reported
        if last is not None and last[0] == self._changes:
            if self.up or now - last[1] < outage.REFRESH:
                return
        await writer.write(self.state())
        self._reported = (self._changes, now)

    def _changed(self, old: str, new: str) -> None:
        if new == "open" and self.up:
            self.up = False
            self.since = dt.datetime.now(dt.UTC)
            self._changes += 1
            metrics.MODEL_UP.set(0)
            log.warning(
                "the model endpoint is down (%s): tickets wait for it; one call probes it every "
                "%.0fs",
                self.reason,
                self.breaker.settings.open_seconds,
            )
        elif new == "closed" and not self.up:
            down_for = (dt.datetime.now(dt.UTC) - self.since).total_seconds()
            self.up = True
            self.since = dt.datetime.now(dt.UTC)
            self.recoveries += 1
            self._changes += 1
            metrics.MODEL_UP.set(1)
            log.warning("the model endpoint answers again after %.0fs down", down_for)
