"""The reconciler service: backfills lost events, reminds about stale tickets, reports daily."""

from __future__ import annotations

import datetime as dt
import logging

from shared.service import Service
from shared.settings import ConfigError, ReconcilerSettings
from shared.source.configured import open_configured

from . import schedule
from .jobs import Jobs

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
            jobs = await Jobs.open(settings, source, svc.bus, dt.datetime.now(dt.UTC))
            svc.every(settings.reconcile_interval, jobs.run_due, name="reconcile pass")
            await svc.until_stopped()
    finally:
        await source.close()
