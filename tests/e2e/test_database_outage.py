"""A PostgreSQL outage (what a restart or a failover does: every connection terminated, new
ones refused for a while) under the three services that keep their state in it. Each reports
not ready while the database is away, holds the work it cannot do, and does it once the
database is back: nothing is dead-lettered, however long the outage (here with only two
deliveries allowed per message)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chaos import postgres
from desk.helpdesk import ensure_demo
from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from standins.llm import FakeLLM
from tests.helpers import eventually, messages, settled
from tests.inbox_items import draft_item, publish_decision, publish_item
from tests.services.drafter.conftest import send_event
from tests.services_running import ServiceProcess

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

TOKEN = "reviewer-token-for-tests"


@pytest.fixture
def database() -> Iterator[str]:
    why = postgres.answers()
    if why is not None:
        pytest.skip(f"no PostgreSQL at {postgres.SERVER_URL}: {why}")
    with postgres.fresh_database(prefix="desk_outage") as url:
        yield url


def _ready(process: ServiceProcess) -> dict[str, bool]:
    try:
        return dict(httpx.get(f"{process.ops_url}/readyz", timeout=5).json()["checks"])
    except (httpx.HTTPError, ValueError, KeyError):
        return {}


def _waiting(process: ServiceProcess) -> float:
    text = httpx.get(f"{process.ops_url}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("desk_waiting{")
    )


async def _results(bus: Bus, kind: str) -> list[Envelope]:
    found = [Envelope.model_validate_json(m.data) for m in await messages(bus.js, subjects.RESULTS)]
    return [e for e in found if e.type == kind]


async def _listed(inbox: ServiceProcess, thread: str) -> bool:
    async with httpx.AsyncClient(
        base_url=inbox.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
    ) as client:
        answer = await client.get("/api/items", params={"limit": "200"})
    return answer.status_code == 200 and any(i["thread"] == thread for i in answer.json()["items"])


async def test_drafter_inbox_and_sender_wait_out_a_database_outage_and_lose_nothing(
    bus: Bus,
    nats_server: NatsServer,
    tmp_path: Path,
    fake_llm: FakeLLM,
    database: str,
) -> None:
    helpdesk = f"sqlite:///{tmp_path / 'helpdesk.sqlite'}"
    ensure_demo(helpdesk)
    var = tmp_path / "var"
    var.mkdir()
    credentials = {"webhook_secrets": {}, "reviewer_token": TOKEN, "viewer_token": "v"}
    (var / "dev-credentials.json").write_text(json.dumps(credentials))
    env = {
        "DESK_NATS_URL": nats_server.url,
        "DESK_HELPDESK_URL": helpdesk,
        "DESK_VAR_DIR": str(var),
        "DESK_DATABASE_URL": database,
        "DESK_LLM_BASE_URL": fake_llm.url,
        "DESK_LLM_API_KEY": "test-key",
        "DESK_MAX_DELIVER": "2",
        "DESK_RETRY_INITIAL": "0.1",
        "DESK_RETRY_MAX": "1",
        "DESK_ACK_WAIT": "3",
        "DESK_RELAY_INTERVAL": "0.2",
    }
    names = ("drafter", "inbox_api", "sender")
    procs = {n: ServiceProcess([n], env, tmp_path / f"{n}.log").start() for n in names}
    try:
        first = draft_item("T1020")
        await publish_item(bus, first)  # seen by the inbox and the sender before the outage
        await eventually(lambda: _listed(procs["inbox_api"], "T1020"), timeout=20)
        await eventually(lambda: settled(bus.js, subjects.INBOX, "sender-items", delivered=True))

        with postgres.outage(database) as swept:
            second = draft_item("T1009")
            await send_event(bus, "T1002", "evt_during_outage")  # the drafter's checkpoints
            await publish_item(bus, second)  # the inbox's projection, the sender's items
            await publish_decision(bus, first, "accept")  # the sender's outbox
            for name, process in procs.items():
                await eventually(
                    lambda p=process: _ready(p).get("database") is False,
                    timeout=20,
                    message=f"{name} saying the database is unreachable",
                )
                await eventually(
                    lambda p=process: _waiting(p) >= 1,
                    timeout=60,
                    message=f"{name} holding work until the database is back",
                )
            assert any(swept), "the outage terminated the services' connections"
            assert await messages(bus.js, subjects.DLQ) == []

        postgres.wait_for_connections(database)
        await eventually(lambda: _results(bus, "reply.sent"), timeout=60, message="reply.sent")
        await eventually(lambda: _listed(procs["inbox_api"], "T1009"), timeout=60)
        await eventually(lambda: _listed(procs["inbox_api"], "T1002"), timeout=60)
        for name, process in procs.items():
            await eventually(
                lambda p=process: _ready(p).get("database") is True,
                timeout=20,
                message=f"{name} ready again",
            )
            assert _waiting(process) == 0, name
        assert await messages(bus.js, subjects.DLQ) == []
        [sent] = await _results(bus, "reply.sent")
        assert sent.data["ticket_id"] == "T1020"  # type: ignore[index]
    finally:
        for process in procs.values():
            process.kill()
