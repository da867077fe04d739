"""Watching the system from outside: the inbox API's items and decisions, the broker's
consumers, streams, dead letters and result events, and when it all became quiescent."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import Counter
from typing import Any

import httpx

from shared import catalog, subjects
from shared.bus import Bus
from shared.deadletters import DeadLetter, list_dead_letters
from shared.history import stored

from .. import conversations
from ..facts import OPEN, Run, log

SETTLE_SECONDS = 6.0  # quiescent = nothing changed for this long
MISSING_GRACE = 30.0  # ...or this long, if some ticket never got an item


def all_items(run: Run) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    with httpx.Client(
        base_url=run.inbox, headers={"Authorization": f"Bearer {run.token}"}, timeout=10
    ) as client:
        while True:
            params = {"limit": "200"}
            if cursor:
                params["cursor"] = cursor
            answer = client.get("/api/items", params=params)
            answer.raise_for_status()
            page = answer.json()
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return items


async def consumers(admin_url: str) -> dict[str, Any]:
    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        found = {}
        for stream, durable in catalog.DURABLES:
            info = await bus.js.consumer_info(stream, durable)
            found[f"{stream}/{durable}"] = info
        return found
    finally:
        await bus.close()


async def redeliveries(admin_url: str) -> dict[str, int]:
    """Per consumer: deliveries (consumer sequence) minus the messages its filter matched.

    Every stream has limits retention and every durable exists before the first message, so
    after quiescence the difference is exactly how many deliveries were redeliveries.
    """
    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        found = {}
        for stream, durable in catalog.DURABLES:
            info = await bus.js.consumer_info(stream, durable)
            filters = list(info.config.filter_subjects or []) or [info.config.filter_subject or ">"]
            matched = 0
            for subject in filters:
                sinfo = await bus.js.stream_info(stream, subjects_filter=subject)
                matched += sum((sinfo.state.subjects or {}).values())
            found[f"{stream}/{durable}"] = info.delivered.consumer_seq - matched
        return found
    finally:
        await bus.close()


async def replication(admin_url: str) -> dict[str, str]:
    """Per stream: its replica count and which peers are behind (empty when all are current)."""
    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        found = {}
        for info in await bus.js.streams_info():
            peers = (info.cluster.replicas or []) if info.cluster else []
            behind = [p.name for p in peers if not p.current]
            found[info.config.name or "?"] = f"R{info.config.num_replicas}" + (
                f" behind:{behind}" if behind else ""
            )
        return found
    finally:
        await bus.close()


async def dead_letters(admin_url: str) -> list[DeadLetter]:
    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        letters: list[DeadLetter] = []
        after = None
        while True:
            page = await list_dead_letters(bus.js, limit=100, after=after)
            letters += page
            if len(page) < 100:
                return letters
            after = page[-1].id
    finally:
        await bus.close()


async def results(admin_url: str) -> list[Any]:
    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        return await stored(bus, subjects.RESULTS)
    finally:
        await bus.close()


def snapshot(run: Run, admin_url: str) -> tuple[bool, Any, bool]:
    """(quiescent now, a fingerprint of the state, every valid ticket has an item)."""
    items = all_items(run)
    statuses = Counter(i["status"] for i in items)
    infos = asyncio.run(consumers(admin_url))
    drained = all(
        (c.num_pending or 0) == 0 and (c.num_ack_pending or 0) == 0 for c in infos.values()
    )
    busy = sum(statuses.get(status, 0) for status in OPEN)
    with run.lock:
        valid = set(run.valid_tickets)
    seen = {i["ticket_id"] for i in items}
    fingerprint = (
        tuple(sorted(statuses.items())),
        tuple(sorted((k, c.delivered.stream_seq) for k, c in infos.items())),
    )
    return drained and busy == 0, fingerprint, valid <= seen


def decision_times(run: Run) -> dict[str, dt.datetime]:
    """Item id → when it was decided, for the tickets a step closed or answered."""
    found: dict[str, dt.datetime] = {}
    tickets = {t.ticket for t in run.tasks if t.kind in conversations.ENDED}
    with httpx.Client(
        base_url=run.inbox, headers={"Authorization": f"Bearer {run.token}"}, timeout=10
    ) as client:
        for ticket in sorted(tickets):
            answer = client.get(f"/api/items/{ticket}~v1")
            if answer.status_code != 200:
                continue
            for d in answer.json().get("decisions", []):
                found[d["item_id"]] = dt.datetime.fromisoformat(d["decided_at"])
    return found


async def stream_leader(admin_url: str, stream: str) -> str | None:
    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        info = await bus.js.stream_info(stream)
        return info.cluster.leader if info.cluster else None
    finally:
        await bus.close()


def wait_quiescent(run: Run, admin_url: str, started: float) -> bool:
    last: Any = None
    since = time.monotonic()
    while time.monotonic() - started < run.deadline:
        time.sleep(1.0)
        if not all(
            e.is_set()
            for e in (
                run.sending_done,
                run.faults_done,
                run.conversations_done,
                run.scans_done,
            )
        ):
            try:  # a cheap look at redeliveries in flight
                infos = asyncio.run(consumers(admin_url))
                now = sum(c.num_redelivered or 0 for c in infos.values())
                run.peak_redelivered = max(run.peak_redelivered, now)
            except Exception:
                pass
            continue
        try:
            quiet, fingerprint, complete = snapshot(run, admin_url)
        except Exception as exc:  # the inbox API or NATS restarting: not quiet
            log(f"snapshot failed: {exc.__class__.__name__}: {exc}")
            last = None
            continue
        if fingerprint != last or not quiet:
            last, since = fingerprint, time.monotonic()
            continue
        stable = time.monotonic() - since
        if stable >= SETTLE_SECONDS and (complete or stable >= MISSING_GRACE):
            log(f"quiescent after {time.monotonic() - started:.0f}s")
            return True
    waiting = [
        name
        for name, done in (
            ("the workload", run.sending_done),
            ("the faults", run.faults_done),
            ("the conversation steps", run.conversations_done),
            ("the stale scans", run.scans_done),
        )
        if not done.is_set()
    ]
    log(
        "deadline passed before the system was quiescent"
        + (f"; still running: {', '.join(waiting)}" if waiting else "")
    )
    return False
