"""The reconciler's jobs, wired to its dependencies; used by the service loop and by the CLI."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from shared.bus import Bus
from shared.helpdesk import SourceSystem
from shared.ledger import Ledger
from shared.settings import ReconcilerSettings

from . import report, schedule
from .backfill import BackfillCounts, backfill
from .bookmarks import LAST_REPORT, LAST_STALE, Bookmarks
from .stale import stale_scan

log = logging.getLogger(__name__)


@dataclass
class Jobs:
    settings: ReconcilerSettings
    source: SourceSystem
    bus: Bus
    ledger: Ledger  # its own: which stale reminders went out
    seen: Ledger  # the router's, read only: which tickets' events were routed
    bookmarks: Bookmarks
    started_at: dt.datetime

    @classmethod
    async def open(
        cls,
        settings: ReconcilerSettings,
        source: SourceSystem,
        bus: Bus,
        started_at: dt.datetime,
        *,
        name: str = "reconciler",
        ledger: Ledger | None = None,
    ) -> Jobs:
        """The jobs on `bus`, with the reconciler's own ledger (`name`'s, opened here unless
        given), the router's ledger read only, and the reconciler's cursors and last-run
        times."""
        return cls(
            settings,
            source,
            bus,
            ledger or await Ledger.open(bus.js, name, keep=settings.archive_seconds),
            await Ledger.reader(bus.js, name, "router"),
            await Bookmarks.open(bus.js),
            started_at,
        )

    async def backfill(self) -> BackfillCounts:
        s = self.settings
        return await backfill(
            self.source,
            self.bus,
            self.seen,
            self.bookmarks,
            lookback=s.reconcile_lookback,
            page_size=s.reconcile_page_size,
            grace=s.reconcile_grace,
            first_since=s.reconcile_since
            or self.started_at - dt.timedelta(seconds=s.reconcile_lookback),
        )

    async def stale(self, now: dt.datetime) -> list[str]:
        today = now.astimezone(ZoneInfo(self.settings.timezone)).date()
        reminded = await stale_scan(
            self.source,
            self.bus,
            self.ledger,
            today=today,
            stale_days=self.settings.stale_days,
            now=now,
        )
        await self.bookmarks.set_time(LAST_STALE, now)
        return reminded

    async def report(self, now: dt.datetime) -> str:
        s = self.settings
        token = s.report_token.get_secret_value() if s.report_token else None
        built = await report.build(self.bus, now=now, inbox_url=s.inbox_url, token=token)
        text = report.render(built)
        await report.publish(self.bus, built, now)
        if s.slack_webhook_url:
            await report.post_to_slack(s.slack_webhook_url.get_secret_value(), text, s.chat_format)
        await self.bookmarks.set_time(LAST_REPORT, now)
        return text

    async def run_due(self) -> None:
        """One pass of the service's periodic work: the backfill, then the scheduled jobs."""
        await self.backfill()
        await self.due_crons(dt.datetime.now(dt.UTC))

    async def due_crons(self, now: dt.datetime) -> None:
        """Run the stale scan and the report if their slot today has not run yet.

        A slot missed while the process was down runs when it comes back the same day. The very
        first start only records itself: a new installation does not count earlier slots of
        that day as missed."""
        s = self.settings
        for key in (LAST_STALE, LAST_REPORT):
            if await self.bookmarks.get_time(key) is None:
                await self.bookmarks.set_time(key, now)
        if schedule.due(s.stale_cron, s.timezone, await self.bookmarks.get_time(LAST_STALE), now):
            await self.stale(now)
        if schedule.due(s.report_cron, s.timezone, await self.bookmarks.get_time(LAST_REPORT), now):
            log.info("%s", await self.report(now))
