"""Queues and service levels on real processes: an inbox_api (SQLite and PostgreSQL) whose
reviewers belong to queues, filtered by queue and "mine" through the API and the CLI; and,
with a sender on the same nats-server and a real local HTTP server as the Slack-compatible
webhook, an escalation posted exactly once per threshold per round, across scans, a redraft
and a restart of the inbox."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from desk.helpdesk import ensure_demo
from desk.natsserver import NatsServer
from shared.bus import Bus
from shared.streams import Topology, provision
from standins.channel import FakeChannel
from tests.helpers import eventually
from tests.inbox_items import draft_item, publish_item
from tests.services_running import ServiceProcess

from .conftest import Api, own_nats, running_api

ANA, BEN = "ana-queues-token", "ben-queues-token"


def reviewers() -> str:
    """Ana works billing (and wants to hear when its items pass their target); Ben, general."""
    return json.dumps(
        [
            {
                "name": "ana",
                "role": "reviewer",
                "token_sha256": hashlib.sha256(ANA.encode()).hexdigest(),
                "queues": ["billing"],
                "notify": "U0ANA",
            },
            {
                "name": "ben",
                "role": "reviewer",
                "token_sha256": hashlib.sha256(BEN.encode()).hexdigest(),
                "queues": ["general"],
            },
        ]
    )


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def queued_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Api, NatsServer]]:
    root = tmp_path_factory.mktemp(f"queues-{request.param}")
    with (
        own_nats(root) as nats,
        running_api(request.param, nats, root, DESK_REVIEWERS=reviewers()) as api,
    ):
        yield api, nats


async def listed(api: Api, token: str, **params: str) -> list[str]:
    async with api.client(token) as client:
        answer = await client.get("/api/items", params={"status": "waiting", **params})
    assert answer.status_code == 200, answer.text
    return [i["id"] for i in answer.json()["items"]]


async def test_the_list_filters_by_queue_and_by_mine(queued_api: tuple[Api, NatsServer]) -> None:
    api, nats = queued_api
    bus = await Bus.connect(nats.url, service="test")
    await provision(bus.js, Topology())
    run = uuid.uuid4().hex[:6]
    billing = draft_item(f"B{run}", queue="billing")
    general = draft_item(f"G{run}", queue="general")
    loose = draft_item(f"N{run}")  # no rule put it in a queue
    try:
        for item in (billing, general, loose):
            await publish_item(bus, item)

        async def all_there() -> bool:
            return {billing.id, general.id, loose.id} <= set(await listed(api, ANA))

        await eventually(all_there, timeout=15, message="the three items projected")
        async with api.client(ANA) as client:
            shown = (await client.get(f"/api/items/{billing.id}")).json()
        assert shown["queue"] == "billing"

        mine = set(await listed(api, ANA, mine="true"))
        assert billing.id in mine and not {general.id, loose.id} & mine
        assert set(await listed(api, ANA, queue="general")) >= {general.id}
        assert billing.id not in await listed(api, ANA, queue="general")

        # Ben claims the loose item: it is his too, until he lets it go
        assert general.id in await listed(api, BEN, mine="true")
        assert loose.id not in await listed(api, BEN, mine="true")
        async with api.client(BEN) as ben:
            assert (await ben.post(f"/api/items/{loose.id}/claim", json={})).status_code == 200
            assert loose.id in await listed(api, BEN, mine="true")
            assert (await ben.delete(f"/api/items/{loose.id}/claim")).status_code == 200
        assert loose.id not in await listed(api, BEN, mine="true")

        async with api.client(ANA) as client:
            bad = await client.get("/api/items", params={"queue": "Billing Team"})
            assert bad.status_code == 422 and "queue" in bad.json()["error"]
            bad = await client.get("/api/items", params={"mine": "perhaps"})
            assert bad.status_code == 422 and "mine" in bad.json()["error"]

        # the CLI says the same
        env = {**os.environ, "DESK_INBOX_URL": api.url, "DESK_TOKEN": ANA}
        cli = [sys.executable, "-m", "desk", "inbox", "list"]
        mine_out = await asyncio.to_thread(
            subprocess.run, [*cli, "--mine"], env=env, capture_output=True, text=True, timeout=60
        )
        assert mine_out.returncode == 0, mine_out.stderr
        assert "QUEUE" in mine_out.stdout and billing.id in mine_out.stdout
        assert general.id not in mine_out.stdout and loose.id not in mine_out.stdout
        queue_out = await asyncio.to_thread(
            subprocess.run,
            [*cli, "--queue", "general"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert queue_out.returncode == 0, queue_out.stderr
        assert general.id in queue_out.stdout and billing.id not in queue_out.stdout
        shown_out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "desk", "inbox", "show", billing.id],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown_out.returncode == 0, shown_out.stderr
        assert "queue" in shown_out.stdout and "billing" in shown_out.stdout
        assert "target" in shown_out.stdout and "due " in shown_out.stdout
    finally:
        await bus.close()


# -- service levels: escalations through the notifier -------------------------------------------

TARGET_MINUTES = 0.05  # 3 s for a normal item: near after 2.25 s, past after 3 s


class Team:
    """An inbox_api and a sender on one nats-server, the sender posting to `channel`."""

    def __init__(self, root: Path, nats: NatsServer, channel: FakeChannel) -> None:
        self.root = root
        helpdesk = f"sqlite:///{root / 'helpdesk.sqlite'}"
        ensure_demo(helpdesk)
        self.inbox_env = {
            "DESK_REVIEWERS": reviewers(),
            "DESK_SLA_TARGETS": json.dumps({"normal": TARGET_MINUTES}),
            "DESK_SLA_SCAN_SECONDS": "0.3",
        }
        self.sender = ServiceProcess(
            ["sender"],
            {
                "DESK_NATS_URL": nats.url,
                "DESK_VAR_DIR": str(root / "sender-var"),
                "DESK_HELPDESK_URL": helpdesk,
                "DESK_NOTIFY_WEBHOOK_URL": channel.url,
                "DESK_RETRY_INITIAL": "0.2",
            },
            root / "sender.log",
        )


def posts(channel: FakeChannel) -> list[str]:
    return [json.loads(r["body"])["text"] for r in channel.requests]


def about(channel: FakeChannel, ticket: str) -> list[str]:
    return [t for t in posts(channel) if f"Ticket {ticket} " in t]


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_an_item_is_escalated_once_as_it_nears_and_once_as_it_passes_its_target(
    database: str, tmp_path: Path, fake_channel: FakeChannel
) -> None:
    with own_nats(tmp_path) as nats:
        team = Team(tmp_path, nats, fake_channel)
        team.sender.start()
        bus = await Bus.connect(nats.url, service="test")
        await provision(bus.js, Topology())
        try:
            with running_api(database, nats, tmp_path / "inbox", **team.inbox_env) as api:
                late = draft_item("T1012", queue="billing")
                await publish_item(bus, late)

                async def both_posted() -> bool:
                    return len(about(fake_channel, "T1012")) >= 2

                await eventually(both_posted, timeout=30, message="near and past posted")
                near, past = about(fake_channel, "T1012")
                assert near.startswith("Ticket T1012 (billing queue) from Jane Doe nears its")
                assert "Refund: help with T1012" in near and "<@" not in near
                # past: Ana's queue, and she asked to hear of it
                assert past.startswith("<@U0ANA> Ticket T1012 (billing queue) from Jane Doe is")
                assert "past its target (due " in past
                assert "jane.doe@example.com" not in " ".join(posts(fake_channel))

                async def told() -> bool:  # the sender's results, back on the item
                    async with api.client(ANA) as client:
                        found = (await client.get(f"/api/items/{late.id}")).json()
                    return {n["about"] for n in found["notifications"]} == {"sla.near", "sla.past"}

                await eventually(told, timeout=15, message="the escalations shown on the item")
                async with api.client(ANA) as client:
                    shown = (await client.get(f"/api/items/{late.id}")).json()
                    assert shown["service_level"]["standing"] == "past"
                    first = (await client.get("/api/items", params={"status": "waiting"})).json()
                assert first["items"][0]["id"] == late.id  # past its target: listed first

                # a redraft of the same round keeps the round's clock and its escalations
                await publish_item(bus, draft_item("T1012", 2, queue="billing"))

                async def redrafted() -> bool:
                    async with api.client(ANA) as client:
                        answer = await client.get("/api/items/T1012~v2")
                    return answer.status_code == 200

                await eventually(redrafted, timeout=15, message="v2 projected")
                async with api.client(ANA) as client:
                    v2 = (await client.get("/api/items/T1012~v2")).json()
                assert v2["service_level"]["standing"] == "past"
                assert (
                    v2["service_level"]["waiting_since"] == shown["service_level"]["waiting_since"]
                )
                api.process.kill()  # the scans start over in a new process, on the same database
                await asyncio.to_thread(api.process.start)
                # another item's escalations mark that scans ran many times since
                await publish_item(bus, draft_item("T1008", queue="general"))

                async def other_posted() -> bool:
                    return len(about(fake_channel, "T1008")) >= 2

                await eventually(other_posted, timeout=30, message="the second item escalated")
                assert len(about(fake_channel, "T1012")) == 2, posts(fake_channel)
                # Ben's queue: he did not ask to be mentioned
                assert all("<@" not in t for t in about(fake_channel, "T1008"))
                async with api.client(BEN) as client:
                    trail = (await client.get("/api/items/T1012~v2")).json()
                assert len(posts(fake_channel)) == 4
                assert trail["status"] == "waiting"
        finally:
            await bus.close()
            team.sender.kill()


def test_a_notice_is_masked_and_cannot_forge_markup() -> None:
    from services.sender.notifier import notice_message
    from shared.inbox import Notice, QueueSummary

    at = dt.datetime(2026, 12, 2, 14, 0, tzinfo=dt.UTC)
    escalation = Notice(
        id="sla.past:T1:r1",
        kind="sla.past",
        at=at,
        queue="billing",
        ticket_id="T1",
        priority="urgent",
        customer="Eve <!channel>",
        summary="Call me on +1 415 555 0100 or eve@example.com",
        due_at=at,
        mention=["U0ANA", "<!everyone>"],
    )
    text = notice_message(escalation)
    assert text.startswith("<@U0ANA> Ticket T1 (urgent, billing queue) from Eve &lt;!channel&gt;")
    assert "<!everyone>" not in text and "eve@example.com" not in text and "555 0100" not in text
    assert "(due 14:00 UTC)" in text
    digest = Notice(
        id="digest:billing:2026-12-02T14:00:00+00:00",
        kind="digest",
        at=at,
        queue="billing",
        digest=QueueSummary(queue="billing", waiting=4, near=2, past=1, oldest_seconds=11_400),
    )
    assert notice_message(digest) == (
        "Billing queue: 4 waiting (1 past target, 2 nearing it); the oldest has waited 3 h 10 min."
    )


def test_targets_take_the_smaller_of_priority_and_category() -> None:
    from services.inbox_api.store.targets import Targets, standing

    targets = Targets({"urgent": 60, "normal": 1440, "billing": 240}, near=0.5)
    start = dt.datetime(2026, 12, 2, 8, 0, tzinfo=dt.UTC)
    assert targets.times(start, "normal", "billing") == (
        start + dt.timedelta(hours=2),
        start + dt.timedelta(hours=4),
    )
    assert targets.seconds_for("urgent", "billing") == 3600
    assert targets.seconds_for(None, "refund") == 1440 * 60  # no priority: a normal one
    assert targets.seconds_for("low", "refund") is None
    near, due = targets.times(start, "urgent", None)
    assert standing("waiting", near, due, start) == "ok"
    assert standing("waiting", near, due, start + dt.timedelta(minutes=31)) == "near"
    assert standing("waiting", near, due, start + dt.timedelta(minutes=60)) == "past"
    assert standing("sent", near, due, start + dt.timedelta(hours=3)) is None


def test_a_bad_target_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.settings import InboxApiSettings

    monkeypatch.setenv("DESK_SLA_TARGETS", json.dumps({"platinum": 30}))
    with pytest.raises(ValueError, match="'platinum' is no priority or category"):
        InboxApiSettings()
    monkeypatch.setenv("DESK_SLA_TARGETS", json.dumps({"urgent": 0}))
    with pytest.raises(ValueError, match="positive number of minutes"):
        InboxApiSettings()


def test_a_digest_is_recorded_once_per_queue_per_slot(tmp_path: Path) -> None:
    from services.inbox_api import store
    from services.inbox_api.notices import slot_start
    from shared.db import database_url, make_engine

    engine = make_engine(database_url(None, tmp_path, "inbox"))
    try:
        store.create_tables(engine)
        now = dt.datetime.now(dt.UTC)
        targets = store.targets.Targets({"normal": 60})
        for thread, queue, age in (("D1", "billing", 90), ("D2", "billing", 50), ("D3", None, 5)):
            created = now - dt.timedelta(minutes=age)
            store.project(
                engine, draft_item(thread, queue=queue, created_at=created), None, targets
            )
        slot = slot_start(now, 3600)
        made = store.notices.digest(engine, now, slot)
        assert [(n.queue, n.digest) for n in made] == [
            ("billing", made[0].digest),
            (None, made[1].digest),
        ]
        billing = made[0].digest
        assert billing is not None
        assert (billing.waiting, billing.past, billing.near) == (2, 1, 1)
        assert 90 * 60 - 5 < billing.oldest_seconds < 90 * 60 + 60
        # the same slot again (another pass, another replica): nothing new
        assert store.notices.digest(engine, now + dt.timedelta(seconds=30), slot) == []
        later = slot + dt.timedelta(hours=1)
        assert len(store.notices.digest(engine, later, later)) == 2
        assert len(store.notices.unpublished(engine)) == 4
    finally:
        engine.dispose()
