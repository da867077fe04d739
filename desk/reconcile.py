"""`desk reconcile` (a backfill pass now, optionally the stale scan) and `desk report`."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from services.reconciler import Jobs
from shared.bus import Bus, without_credentials
from shared.errors import PermanentError, TransientError
from shared.helpdesk.configured import open_configured
from shared.settings import ReconcilerSettings

from .statefile import STATE_FILE


def add_arguments(subparsers: Any) -> None:
    reconcile = subparsers.add_parser("reconcile", help="backfill events the system never got")
    reconcile.add_argument("--stale", action="store_true", help="also run the stale-ticket scan")
    subparsers.add_parser("report", help="print and publish the daily report now")


def _with_stack(settings: ReconcilerSettings) -> ReconcilerSettings:
    """Fill the broker and inbox from the running stack where the environment does not."""
    try:
        state = json.loads((settings.var_dir / STATE_FILE).read_text())
        creds = json.loads(Path(state["credentials"]).read_text())
    except (OSError, ValueError, KeyError):
        return settings
    update: dict[str, Any] = {}
    if "nats_url" not in settings.model_fields_set:
        update["nats_url"] = state.get("nats_admin_url") or state["nats_url"]
    if not settings.inbox_url:
        update["inbox_url"] = state["services"]["inbox_api"]["url"]
    if not settings.report_token and creds.get("report_token"):
        update["report_token"] = SecretStr(creds["report_token"])
    return settings.model_copy(update=update)


async def _run(command: str, stale: bool, settings: ReconcilerSettings) -> int:
    try:
        bus = await Bus.connect(
            settings.nats_url,
            service="reconciler-cli",
            auth=settings.nats_auth(),
            reconnect=False,
        )
    except TransientError as exc:
        print(f"desk {command}: {exc} ({without_credentials(settings.nats_url)})", file=sys.stderr)
        return 1
    source = open_configured(settings)
    now = dt.datetime.now(dt.UTC)
    try:
        jobs = await Jobs.open(settings, source, bus, now)
        if command == "report":
            print(await jobs.report(now))
            return 0
        counts = await jobs.backfill()
        print(
            f"scanned {counts.scanned} tickets, {counts.gaps} without an event, "
            f"{counts.deferred} too recent to judge, "
            f"{counts.backfilled} backfilled"
        )
        if stale:
            reminded = await jobs.stale(now)
            print(
                f"stale scan: {len(reminded)} reminded"
                + (f" ({', '.join(reminded)})" if reminded else "")
            )
        return 0
    except (TransientError, PermanentError) as exc:
        print(f"desk {command}: {exc}", file=sys.stderr)
        return 1
    finally:
        await source.close()
        await bus.close()


def main(args: argparse.Namespace) -> int:
    plain = ReconcilerSettings()
    settings = _with_stack(plain)
    if "nats_url" not in plain.model_fields_set and settings.nats_url == plain.nats_url:
        # never a broker the operator did not name
        print(
            f"desk {args.command}: no running stack found in {plain.var_dir} "
            "(start `desk up`), or set DESK_NATS_URL",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_run(args.command, getattr(args, "stale", False), settings))
