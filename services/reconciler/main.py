"""The reconciler service: backfills lost events, reminds about stale tickets, reports daily."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging

from shared.errors import PermanentError, TransientError
from shared.ledger import Ledger
from shared.service import Service
from shared.settings import ConfigError, ReconcilerSettings
from shared.source.configured import open_configured

from . import schedule
from .jobs import Jobs
from .state import State

log = logging.getLogger(__name__)


async def run(settings: ReconcilerSettings) -> None:
    for cron in (settings.stale_cron, settings.report_cron):
        try:
            schedule.valid(cron, settings.timezone)
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"schedule {cron!r} in {settings.timezone}: {exc}") from None
    source = open_configured(settings)
    try:
        async with Service(settings) as svc:
            if svc.bus is None:
                return
            jobs = Jobs(
                settings,
                source,
                svc.bus,
                await Ledger.open(svc.bus.js, svc.name),
                await Ledger.reader(svc.bus.js, svc.name, "router"),
                await State.open(svc.bus.js),
                dt.datetime.now(dt.UTC),
            )
            stop = asyncio.Event()
            loop = asyncio.create_task(_loop(jobs, settings.reconcile_interval, stop))
            await svc.until_stopped()
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
    finally:
        await source.close()


async def _loop(jobs: Jobs, interval: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await jobs.backfill()
            await jobs.due_crons(dt.datetime.now(dt.UTC))
        except (TransientError, PermanentError) as exc:
            log.warning("reconcile pass failed, next one in %.0fs: %s", interval, exc)
        except Exception:
            log.exception("reconcile pass failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
