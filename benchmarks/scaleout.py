"""Scale-out: the drafter and the sender with 1, 2 and 4 replicas on the same workload.

Each replica count gets a fresh stack (`desk up`, same settings as the pipeline benchmark) plus
extra `desk drafter` / `desk sender` processes sharing the durable consumers; N events go in
as fast as ingress takes them, then N accepts. The drafter's rate is read from the broker's
timestamps of `inbox.item`, the sender's from `reply.sent`.

    python -m benchmarks.scaleout [--events N] [--replicas 1,2,4] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from shared import subjects
from shared.bus import Bus

from .pipeline import (
    FIRST_TICKET,
    Rig,
    add_tickets,
    decide_all,
    log,
    replica,
    run_with_stack,
    send_all,
    signed_requests,
    stage_rate,
    stamps,
    waiting_items,
)
from .processes import ROOT

DEFAULT_JSON = ROOT / "var" / "bench" / "scaleout.json"
SCALED = ("drafter", "sender")


async def measure(rig: Rig, events: int, replicas: int) -> dict[str, Any]:
    extra = [replica(rig, name, i) for name in SCALED for i in range(2, replicas + 1)]
    try:
        tickets = add_tickets(rig.helpdesk_url, FIRST_TICKET, events)
        requests = signed_requests(rig.creds["webhook_secrets"]["helpdesk"], tickets, "scale")
        wanted = {t.id for t in tickets}
        headers = {"Authorization": f"Bearer {rig.creds['reviewer_token']}"}
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with (
            httpx.AsyncClient(base_url=rig.ingress, limits=limits, timeout=30) as ingress,
            httpx.AsyncClient(
                base_url=rig.inbox, headers=headers, limits=limits, timeout=30
            ) as inbox,
        ):
            bus = await Bus.connect(rig.admin_url, service="bench", reconnect=False)
            try:
                since = dt.datetime.now(dt.UTC)
                await send_all(ingress, requests, rate=None)
                items = await _until_waiting(inbox, wanted, time.monotonic() + 60 + events)
                drafter = stage_rate(await stamps(bus, subjects.INBOX, subjects.INBOX_ITEM, since))
                since = dt.datetime.now(dt.UTC)
                await decide_all(inbox, items)
                deadline = time.monotonic() + 60 + events / 2
                while True:
                    sent = await stamps(bus, subjects.RESULTS, subjects.result("reply.sent"), since)
                    if len(sent) >= len(items):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{len(items) - len(sent)} replies never sent")
                    await asyncio.sleep(1.0)
                sender = stage_rate(sent)
            finally:
                await bus.close()
    finally:
        for child in extra:
            child.stop()
    return {
        "replicas": replicas,
        "events": events,
        "drafter_per_s": drafter["per_s"],
        "sender_per_s": sender["per_s"],
    }


async def _until_waiting(
    inbox: httpx.AsyncClient, wanted: set[str], deadline: float
) -> list[dict[str, Any]]:
    while True:
        items = await waiting_items(inbox, wanted)
        if len(items) >= len(wanted):
            return items
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(wanted) - len(items)} items never became visible")
        await asyncio.sleep(0.5)


def run(
    events: int = 300,
    counts: tuple[int, ...] = (1, 2, 4),
    json_path: Path | None = DEFAULT_JSON,
) -> dict[str, Any]:
    started = time.monotonic()
    rows = []
    for count in counts:
        log(f"scale-out: {count} drafter and sender replica(s), {events} events")
        rows.append(run_with_stack(functools.partial(measure, events=events, replicas=count)))
        log(f"scale-out: {rows[-1]}")
    report = {
        "cores": os.cpu_count(),
        "rows": rows,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
    return report


def table(report: dict[str, Any]) -> str:
    lines = [
        f"scale-out on {report['cores']} cores ({report['rows'][0]['events']} events each)",
        f"  {'replicas':>8} {'drafter/s':>10} {'sender/s':>10}",
    ]
    for row in report["rows"]:
        lines.append(
            f"  {row['replicas']:>8} {row['drafter_per_s']!s:>10} {row['sender_per_s']!s:>10}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaleout", description=__doc__)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--replicas", default="1,2,4", help="comma-separated replica counts")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    counts = tuple(int(c) for c in args.replicas.split(","))
    print(table(run(args.events, counts, args.json)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
