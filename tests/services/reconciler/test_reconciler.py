"""The reconciler against a real nats-server and a real source (SQL, and HTTP with paging)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from desk.natsserver import NatsServer
from services.reconciler.schedule import due
from services.reconciler.stale import stale_scan
from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.helpdesk.events import ticket_event
from shared.helpdesk.sql import SqlSource
from shared.http import HttpServer
from shared.inbox import InboxItem
from shared.ledger import Ledger
from tests import forkserver
from tests.forkserver import Forked
from tests.helpdesk_server import TOKEN, helpdesk_app
from tests.helpers import eventually, messages
from tests.services_running import ROOT, ServiceProcess

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


class Helpdesk:
    """Ten new tickets in a helpdesk the test owns, reachable as `sql` or as `http`."""

    def __init__(self, root: Path, kind: str) -> None:
        self.url = f"sqlite:///{root / 'helpdesk.sqlite'}"
        self.source = SqlSource(self.url)
        self.source.create_tables()
        self.tickets = [
            self.source.create_ticket(f"customer{n}@example.com", f"Question {n}", "Please help.")
            for n in range(10)
        ]
        self.kind = kind
        self.server: HttpServer | None = None

    async def env(self) -> dict[str, str]:
        if self.kind == "sql":
            return {"DESK_HELPDESK_KIND": "sql", "DESK_HELPDESK_URL": self.url}
        self.server = HttpServer(helpdesk_app(self.source, asyncio.Event()), "127.0.0.1", 0)
        await self.server.start()
        return {
            "DESK_HELPDESK_KIND": "http",
            "DESK_HELPDESK_URL": self.server.url,
            "DESK_HELPDESK_AUTH_VALUE": TOKEN,
        }


@pytest.fixture(params=["sql", "http"])
async def pipeline(
    request: pytest.FixtureRequest, nats_server: NatsServer, tmp_path: Path
) -> AsyncIterator[tuple[Helpdesk, dict[str, str]]]:
    helpdesk = Helpdesk(tmp_path, request.param)
    env = {
        "DESK_NATS_URL": nats_server.url,
        "DESK_VAR_DIR": str(tmp_path / "var"),
        "DESK_RECONCILE_PAGE_SIZE": "4",
        "DESK_RECONCILE_SINCE": "2026-01-01T00:00:00+00:00",
        "DESK_RECONCILE_GRACE": "0",  # the tickets are brand new: judge them at once
        **await helpdesk.env(),
    }
    router = ServiceProcess(["router"], env, tmp_path / "router.log").start()
    drafter = ServiceProcess(["drafter"], env, tmp_path / "drafter.log").start()
    try:
        yield helpdesk, env
    finally:
        router.kill()
        drafter.kill()
        if helpdesk.server is not None:
            await helpdesk.server.stop()
        helpdesk.source.engine.dispose()


def reconcile(env: dict[str, str], *args: str) -> Forked | subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    return forkserver.spawn(
        ["reconcile", *args],
        env={**clean, **env},
        cwd=ROOT,
        stdout=forkserver.PIPE,
        stderr=forkserver.PIPE,
        text=True,
    )


async def finish(process: Forked | subprocess.Popen[str]) -> tuple[str, str]:
    """Wait in a thread: the HTTP helpdesk answers from this test's event loop meanwhile."""
    return await asyncio.to_thread(process.communicate, timeout=60)


async def webhook(bus: Bus, ticket_id: str) -> None:
    """What ingress stores for a helpdesk ticket.created webhook."""
    body = ticket_event("ticket.created", ticket_id, event_id=f"evt_{ticket_id}")
    await bus.publish(
        subjects.event("helpdesk", "ticket.created"),
        json.dumps(body).encode(),
        msg_id=ids.ingress("helpdesk", f"evt_{ticket_id}"),
    )


async def item_counts(bus: Bus) -> Counter[str]:
    items = [
        InboxItem.model_validate(Envelope.model_validate_json(m.data).data)
        for m in await messages(bus.js, subjects.INBOX)
        if m.subject == subjects.INBOX_ITEM
    ]
    return Counter(i.thread for i in items)


async def backfilled(bus: Bus) -> list[str]:
    return [
        m.headers["Nats-Msg-Id"]
        for m in await messages(bus.js, subjects.EVENTS)
        if m.subject.startswith("events.reconciler.")
    ]


async def test_lost_webhooks_are_backfilled_once_and_drafted_once(
    bus: Bus, pipeline: tuple[Helpdesk, dict[str, str]]
) -> None:
    helpdesk, env = pipeline
    delivered = helpdesk.tickets[:7]
    for ticket in delivered:
        await webhook(bus, ticket.id)
    await eventually(lambda: _threads(bus, 7), timeout=30, message="seven drafts")

    # two reconcilers at once
    runs = [reconcile(env), reconcile(env)]
    outputs = [await finish(run) for run in runs]
    assert all(run.returncode == 0 for run in runs), outputs
    await eventually(lambda: _threads(bus, 10), timeout=30, message="ten drafts")

    assert sorted(await backfilled(bus)) == sorted(
        ids.reconciler("ticket.created", t.id) for t in helpdesk.tickets[7:]
    )
    counts = await item_counts(bus)
    assert set(counts) == {t.id for t in helpdesk.tickets} and set(counts.values()) == {1}

    again = reconcile(env)  # nothing new: the cursor and the ledger agree
    out, _ = await finish(again)
    assert "0 backfilled" in out
    assert len(await backfilled(bus)) == 3


async def test_a_ticket_whose_webhook_is_late_is_not_counted_lost_within_the_grace(
    bus: Bus, pipeline: tuple[Helpdesk, dict[str, str]]
) -> None:
    """A webhook a few seconds late is not a lost one: counting it would fire the "webhooks are
    being lost" alert at any real ticket rate."""
    helpdesk, env = pipeline
    patient = {**env, "DESK_RECONCILE_GRACE": "120"}
    out, err = await finish(reconcile(patient))
    assert "0 without an event, 10 too recent to judge, 0 backfilled" in out, (out, err)
    assert await backfilled(bus) == []
    for ticket in helpdesk.tickets[:7]:  # the webhooks arrive, late
        await webhook(bus, ticket.id)
    await eventually(lambda: _threads(bus, 7), timeout=30, message="seven drafts")
    out, err = await finish(reconcile(env))  # past the grace: only the three really lost
    assert "3 without an event, 0 too recent to judge, 3 backfilled" in out, (out, err)


async def test_a_reconciler_killed_mid_page_resumes_without_duplicates(
    bus: Bus, pipeline: tuple[Helpdesk, dict[str, str]]
) -> None:
    helpdesk, env = pipeline
    for ticket in helpdesk.tickets[:7]:
        await webhook(bus, ticket.id)
    await eventually(lambda: _threads(bus, 7), timeout=30, message="seven drafts")

    info = await bus.js.stream_info(subjects.EVENTS)
    info.config.subjects = ["events.helpdesk.>"]  # backfills cannot be stored: held mid-page
    await bus.js.update_stream(info.config)
    attempts = await bus.nc.subscribe("events.reconciler.>")  # a try to store a backfill
    await bus.nc.flush()
    stuck = reconcile({**env, "DESK_PUBLISH_TIMEOUT": "30"})
    await attempts.next_msg(timeout=30)  # mid-page: a backfill it is trying to store
    await attempts.unsubscribe()
    assert stuck.poll() is None
    stuck.kill()
    await finish(stuck)
    info.config.subjects = ["events.>"]
    await bus.js.update_stream(info.config)

    finished = reconcile(env)
    _, err = await finish(finished)
    assert finished.returncode == 0, err
    await eventually(lambda: _threads(bus, 10), timeout=30, message="ten drafts")
    assert len(await backfilled(bus)) == 3
    assert set((await item_counts(bus)).values()) == {1}


async def _threads(bus: Bus, n: int) -> bool:
    return len(await item_counts(bus)) >= n


async def test_the_stale_scan_reminds_once_a_day(bus: Bus, tmp_path: Path) -> None:
    source = SqlSource(f"sqlite:///{tmp_path / 'helpdesk.sqlite'}")
    source.create_tables()
    source.seed_demo()
    ledger = await Ledger.open(bus.js, "reconciler")
    now = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
    try:
        first = await stale_scan(source, bus, ledger, today=now.date(), stale_days=20, now=now)
        second = await stale_scan(source, bus, ledger, today=now.date(), stale_days=20, now=now)
        tomorrow = now + dt.timedelta(days=1)
        next_day = await stale_scan(
            source, bus, ledger, today=tomorrow.date(), stale_days=20, now=tomorrow
        )
    finally:
        await source.close()
    assert first and second == []
    assert "T1040" not in first  # closed
    assert "T1002" in first  # answered and waiting on the customer: a follow-up is the drafter's
    assert set(first) <= set(next_day)  # reminded again (and a day more makes more stale)
    stored = [m.headers["Nats-Msg-Id"] for m in await messages(bus.js, subjects.EVENTS)]
    assert sorted(stored) == sorted(
        [ids.stale(t, now.date()) for t in first]
        + [ids.stale(t, tomorrow.date()) for t in next_day]
    )
    one: Any = json.loads((await messages(bus.js, subjects.EVENTS))[0].data)
    assert one["type"] == "ticket.stale" and one["data"]["date"] == "2026-11-29"


def test_a_missed_cron_slot_runs_once_the_same_day_and_not_the_next() -> None:
    at = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
    assert due("0 9 * * *", "UTC", None, at.replace(hour=8)) is None
    assert due("0 9 * * *", "UTC", None, at) == at
    assert due("0 9 * * *", "UTC", None, at.replace(hour=15)) == at  # down at 09:00, back at 15
    assert due("0 9 * * *", "UTC", at, at.replace(hour=15)) is None  # ran already
    assert due("0 9 * * *", "UTC", at - dt.timedelta(days=1), at.replace(hour=16)) == at
    slot = due("0 9 * * *", "Asia/Shanghai", None, dt.datetime(2026, 11, 29, 2, tzinfo=dt.UTC))
    assert slot is not None and slot.hour == 9 and slot.utcoffset() == dt.timedelta(hours=8)
