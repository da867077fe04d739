"""Periodic work inside a service: a relay pass, a backfill, a mailbox poll, a metrics refresh.

Started by `Service.every(interval, work, name=...)` and drained with the consumers on SIGTERM:
a pass under way finishes (up to the drain timeout), no new one starts, and a `final` pass runs
once the consumers have stopped (a relay publishing what the last handlers wrote).

A pass that fails is logged and the next one retries: one line for an expected condition (a
`TransientError`/`PermanentError`, or the database away: a traceback every few seconds of an
outage says nothing more), the traceback for anything else. `wake()` starts the next pass now.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from . import db
from .errors import PermanentError, TransientError

log = logging.getLogger(__name__)

Work = Callable[[], Awaitable[Any]]


class Periodic:
    def __init__(self, name: str, interval: float, work: Work, *, final: bool = False) -> None:
        if interval <= 0:
            raise ValueError("a periodic interval must be positive")
        self.name = name
        self.interval = interval
        self.work = work
        self.final = final
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Periodic:
        self._task = asyncio.create_task(self._run(), name=f"every:{self.name}")
        return self

    def wake(self) -> None:
        """Run the next pass now (after the one under way, if any)."""
        self._wake.set()

    async def once(self) -> bool:
        """One pass; False if it failed (and was logged)."""
        try:
            await self.work()
        except asyncio.CancelledError:
            raise
        except (TransientError, PermanentError) as exc:
            log.warning("%s failed, next one in %.0fs: %s", self.name, self.interval, exc)
        except Exception as exc:
            if db.is_outage(exc):
                log.warning("%s waits for the database: %s", self.name, exc.__class__.__name__)
            else:
                log.error("%s failed; the next pass retries", self.name, exc_info=exc)
        else:
            return True
        return False

    async def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            await self.once()
            if self._stop.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()  # out of the wait at once

    async def stop(self, timeout: float) -> None:
        """No new pass; the one under way gets up to `timeout` seconds, then is cancelled."""
        self.request_stop()
        if self._task is None:
            return
        done, _ = await asyncio.wait({self._task}, timeout=timeout)
        if not done:
            log.warning("drain: %s cut short after %.0fs", self.name, timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def finish(self, timeout: float) -> None:
        """The final pass, if this work has one (after the consumers stopped)."""
        if not self.final:
            return
        try:
            await asyncio.wait_for(self.once(), timeout)
        except TimeoutError:
            log.warning("drain: the last %s did not finish in %.0fs", self.name, timeout)
