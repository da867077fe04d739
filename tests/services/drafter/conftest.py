"""A real drafter process against a real nats-server, a seeded SQLite helpdesk and FakeLLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desk.helpdesk import ensure_demo
from desk.natsserver import NatsServer
from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.helpdesk.events import ticket_event
from shared.inbox import InboxItem
from standins.llm import FakeLLM
from tests.helpers import messages
from tests.inbox_items import publish_decision
from tests.services_running import ServiceProcess


class Harness:
    def __init__(self, nats: NatsServer, root: Path, llm: FakeLLM | None) -> None:
        self.root = root
        self.helpdesk_url = f"sqlite:///{root / 'helpdesk.sqlite'}"
        ensure_demo(self.helpdesk_url)
        self.env = {
            "DESK_NATS_URL": nats.url,
            "DESK_HELPDESK_URL": self.helpdesk_url,
            "DESK_VAR_DIR": str(root / "var"),
            "DESK_RETRY_INITIAL": "0.2",
            "DESK_ACK_WAIT": "3",
            "DESK_LLM_TIMEOUT": "5",
            "DESK_LLM_PRICE_INPUT": "0.15",
            "DESK_LLM_PRICE_OUTPUT": "0.60",
        }
        if llm is not None:
            self.env.update({"DESK_LLM_BASE_URL": llm.url, "DESK_LLM_API_KEY": "test-key"})
        self.processes: list[ServiceProcess] = []

    def start(self, **env: str) -> ServiceProcess:
        log = self.root / f"drafter-{len(self.processes)}.log"
        process = ServiceProcess(["drafter"], {**self.env, **env}, log).start()
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.processes:
            process.kill()


async def send_event(
    bus: Bus,
    ticket: str,
    event_id: str,
    *,
    event_type: str = "ticket.created",
    updated_at: str | None = None,
    router_msg_id: str | None = None,
) -> None:
    """What the router publishes for a helpdesk ticket event."""
    event_msg_id = ids.ingress("helpdesk", event_id)
    body = ticket_event(event_type, ticket, event_id=event_id, updated_at=updated_at)
    envelope = Envelope(id=event_msg_id, source="helpdesk", type=event_type, data=body)
    await bus.publish(
        subjects.work("drafter", event_type),
        envelope.to_bytes(),
        msg_id=router_msg_id or ids.router(event_msg_id, "drafter"),
    )


async def decide(bus: Bus, item: InboxItem, kind: str, args: Any = None) -> None:
    """What inbox_api publishes for a reviewer's decision."""
    await publish_decision(bus, item, kind, args)


async def items(bus: Bus) -> list[InboxItem]:
    return [
        InboxItem.model_validate(Envelope.model_validate_json(m.data).data)
        for m in await messages(bus.js, subjects.INBOX)
        if m.subject == subjects.INBOX_ITEM
    ]


async def settled(bus: Bus, stream: str = subjects.WORK, consumer: str = "drafter") -> bool:
    try:
        info = await bus.js.consumer_info(stream, consumer)
    except Exception:
        return False
    return info.num_pending == 0 and info.num_ack_pending == 0


@pytest.fixture
def harness(nats_server: NatsServer, tmp_path: Path, fake_llm: FakeLLM) -> Iterator[Harness]:
    h = Harness(nats_server, tmp_path, fake_llm)
    try:
        yield h
    finally:
        h.stop_all()
