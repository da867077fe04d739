"""The reconciler service: backfills lost events, reminds about stale tickets, reports daily."""

from __future__ import annotations

import datetime as dt

from shared.helpdesk.configured import open_configured
from shared.service import Service
from shared.settings import ReconcilerSettings

from . import schedule
from .jobs import Jobs


async def run(settings: ReconcilerSettings) -> None:
    schedule.check(settings)  # a schedule that cannot run stops the start, naming it
    svc = Service(settings)
    source = open_configured(settings)
    svc.on_close(source.close)
    async with svc:
        now = dt.datetime.now(dt.UTC)
        jobs = await Jobs.open(settings, source, svc.bus, now, ledger=svc.ledger)
        svc.every(settings.reconcile_interval, jobs.run_due, name="reconcile pass")
        await svc.until_stopped()
