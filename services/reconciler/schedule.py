"""When a cron job is due (pure; no I/O). A run missed while the process was down still happens,
once, if the process comes back the same day."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from croniter import croniter

from shared.settings import ConfigError, ReconcilerSettings


def latest(cron: str, tz: str, now: dt.datetime) -> dt.datetime:
    """The most recent scheduled time at or before `now`, in the schedule's time zone."""
    local = now.astimezone(ZoneInfo(tz))
    probe = local + dt.timedelta(seconds=1)  # get_prev is strict: let `now` itself count
    previous: dt.datetime = croniter(cron, probe).get_prev(dt.datetime)
    return previous


def due(cron: str, tz: str, last_run: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
    """The scheduled time to run for now, or None: it already ran, or the slot was another day."""
    slot = latest(cron, tz, now)
    if slot.date() != now.astimezone(ZoneInfo(tz)).date():
        return None
    if last_run is not None and last_run >= slot:
        return None
    return slot


def valid(cron: str, tz: str) -> None:
    """Raise ValueError for a bad expression or time zone (checked at start-up)."""
    if not croniter.is_valid(cron):
        raise ValueError(f"not a cron expression: {cron!r}")
    ZoneInfo(tz)


def check(settings: ReconcilerSettings) -> None:
    """The stale-ticket and report schedules can run: `ConfigError` naming the one that
    cannot."""
    for cron in (settings.stale_cron, settings.report_cron):
        try:
            valid(cron, settings.timezone)
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"schedule {cron!r} in {settings.timezone}: {exc}") from None
