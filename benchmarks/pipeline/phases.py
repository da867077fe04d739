"""The measured phases on a running stack: latency at a steady rate, throughput as fast as
ingress takes events, and decisions through to `reply.sent`."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from shared import subjects
from shared.bus import Bus
from shared.helpdesk.tables import TicketRow

from .figures import cpu_per, figures, stage_rate, stamps
from .stack import Rig, log
from .tickets import signed_requests
from .traffic import decide_all, send_all, waiting_items
from .watch import LATENCY_POLL, THROUGHPUT_POLL, Watch


@dataclass
class Phases:
    """What the phases share: HTTP clients for ingress and the inbox API, the admin bus."""

    rig: Rig
    ingress: httpx.AsyncClient
    inbox: httpx.AsyncClient
    bus: Bus
    watch: Watch

    @property
    def secret(self) -> str:
        return str(self.rig.creds["webhook_secrets"]["helpdesk"])


@contextlib.asynccontextmanager
async def session(rig: Rig) -> AsyncIterator[Phases]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    headers = {"Authorization": f"Bearer {rig.creds['reviewer_token']}"}
    async with (
        httpx.AsyncClient(base_url=rig.ingress, limits=limits, timeout=30) as ingress,
        httpx.AsyncClient(base_url=rig.inbox, headers=headers, limits=limits, timeout=30) as inbox,
    ):
        bus = await Bus.connect(rig.admin_url, service="bench", reconnect=False)
        try:
            yield Phases(rig, ingress, inbox, bus, Watch(inbox))
        finally:
            await bus.close()


async def latency_phase(s: Phases, tickets: list[TicketRow], rate: float) -> dict[str, Any]:
    """Events offered at a steady `rate`; each timed from its 202 to its item visible."""
    requests = signed_requests(s.secret, tickets, "lat")
    log(f"latency: {len(tickets)} events at {rate:.0f}/s")
    wanted = {t.id for t in tickets}
    watcher = asyncio.create_task(
        s.watch.until(wanted, time.perf_counter() + 120 + len(tickets), LATENCY_POLL)
    )
    accepted = await send_all(s.ingress, requests, rate=rate)
    await watcher
    lat = [s.watch.seen[t] - accepted[t] for t in wanted]
    report = {"events": len(tickets), "offered_per_s": rate, **figures(lat)}
    log(f"latency: p99 {report['p99_ms']} ms")
    return report


async def throughput_phase(s: Phases, tickets: list[TicketRow]) -> dict[str, Any]:
    """Every event as fast as ingress takes it; events/s from the first 202 to the last item
    visible, and per-stage rates from the broker's timestamps."""
    requests = signed_requests(s.secret, tickets, "thr")
    since = dt.datetime.now(dt.UTC)
    log(f"throughput: {len(tickets)} events as fast as ingress takes them")
    wanted = {t.id for t in tickets}
    watcher = asyncio.create_task(
        s.watch.until(wanted, time.perf_counter() + 60 + len(tickets), THROUGHPUT_POLL)
    )
    cpu_before = s.rig.cpu()
    accepted = await send_all(s.ingress, requests, rate=None)
    await watcher
    cpu = cpu_per(cpu_before, s.rig.cpu(), len(tickets))
    first = min(accepted.values())
    last = max(s.watch.seen[t] for t in wanted)
    lat = [s.watch.seen[t] - accepted[t] for t in wanted]
    report: dict[str, Any] = {
        "events": len(tickets),
        "seconds": round(last - first, 2),
        "events_per_s": round(len(tickets) / (last - first), 1),
        "intake_seconds": round(max(accepted.values()) - first, 2),
        **figures(lat),
        "cpu_ms_per_event": cpu,
    }
    log(f"throughput: {report['events_per_s']} events/s")
    bus = s.bus
    report["stages"] = {
        "ingress": stage_rate(await stamps(bus, subjects.EVENTS, subjects.events_of(), since)),
        "router": stage_rate(await stamps(bus, subjects.WORK, subjects.work_for("drafter"), since)),
        "drafter": stage_rate(await stamps(bus, subjects.INBOX, subjects.INBOX_ITEM, since)),
        "inbox projection": stage_rate(sorted(s.watch.seen[t] for t in wanted)),
    }
    return report


async def decisions_phase(s: Phases, tickets: set[str]) -> dict[str, Any]:
    """An accept for each of these tickets' items; decisions/s and latency to `reply.sent`."""
    items = await waiting_items(s.inbox, tickets)
    since = dt.datetime.now(dt.UTC)
    log(f"decisions: {len(items)} accepts")
    sent_at: dict[str, float] = {}

    async def on_sent(msg: Any) -> None:
        with contextlib.suppress(ValueError, KeyError):
            sent_at.setdefault(json.loads(msg.data)["subject"], time.perf_counter())

    sub = await s.bus.nc.subscribe(subjects.result("reply.sent"), cb=on_sent)
    try:
        cpu_before = s.rig.cpu()
        decided = await decide_all(s.inbox, items)
        deadline = time.perf_counter() + 60 + len(items) / 5
        while not decided.keys() <= sent_at.keys():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{len(decided.keys() - sent_at.keys())} replies never sent")
            await asyncio.sleep(0.05)
        cpu = cpu_per(cpu_before, s.rig.cpu(), len(items))
    finally:
        await sub.unsubscribe()
    first = min(decided.values())
    last = max(sent_at[t] for t in decided)
    lat = [sent_at[t] - decided[t] for t in decided]
    report: dict[str, Any] = {
        "decisions": len(items),
        "seconds": round(last - first, 2),
        "decisions_per_s": round(len(items) / (last - first), 1),
        **figures(lat),
        "cpu_ms_per_decision": cpu,
    }
    log(f"decisions: {report['decisions_per_s']} decisions/s")
    report["stages"] = {
        "inbox api decisions": stage_rate(
            await stamps(s.bus, subjects.INBOX, subjects.INBOX_DECISION, since)
        ),
        "sender": stage_rate(
            await stamps(s.bus, subjects.RESULTS, subjects.result("reply.sent"), since)
        ),
    }
    return report
