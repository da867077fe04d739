"""Real sender processes on a real nats-server, with SQLite or PostgreSQL, and a real channel."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy.engine import Engine

from desk.helpdesk import ensure_demo
from desk.natsserver import NatsServer
from services.sender import store
from shared import subjects
from shared.bus import Bus
from shared.db import database_url, make_engine
from shared.envelope import Envelope
from tests.helpers import messages
from tests.services_running import ServiceProcess

T = TypeVar("T")

SECRET = "whsec_c2VuZGVyLWNoYW5uZWwtc2VjcmV0LTMyYnl0ZXM="


class Senders:
    def __init__(self, nats: NatsServer, root: Path) -> None:
        self.root = root
        self.helpdesk_url = f"sqlite:///{root / 'helpdesk.sqlite'}"
        ensure_demo(self.helpdesk_url)  # the sender re-reads each ticket before a reply leaves
        self.env = {
            "DESK_NATS_URL": nats.url,
            "DESK_HELPDESK_URL": self.helpdesk_url,
            "DESK_VAR_DIR": str(root / "var"),
            "DESK_RETRY_INITIAL": "0.3",
            "DESK_ACK_WAIT": "3",
            "DESK_RELAY_INTERVAL": "0.2",
        }
        self.processes: list[ServiceProcess] = []

    def webhook(self, url: str, **extra: str) -> None:
        self.env.update(
            {
                "DESK_CHANNEL": "webhook",
                "DESK_CHANNEL_URL": url,
                "DESK_CHANNEL_SECRET": SECRET,
                "DESK_CHANNEL_READ_TIMEOUT": "1",
                **extra,
            }
        )

    def start(self, **env: str) -> ServiceProcess:
        log = self.root / f"sender-{len(self.processes)}.log"
        process = ServiceProcess(["sender"], {**self.env, **env}, log).start()
        self.processes.append(process)
        return process

    def outbox(self) -> list[store.OutboxRow]:
        return self._read(store.outbox_rows)

    def unpublished(self) -> list[store.ResultRow]:
        """Result events the relay has not marked published."""
        return self._read(store.pending_results)

    def audit(self) -> list[store.AuditRow]:
        return self._read(store.audit_rows)

    def _read(self, query: Callable[[Engine], T]) -> T:
        engine = make_engine(
            database_url(self.env.get("DESK_DATABASE_URL"), self.root / "var", "sender")
        )
        try:
            return query(engine)
        finally:
            engine.dispose()

    def stop_all(self) -> None:
        for process in self.processes:
            process.kill()


async def results(bus: Bus, kind: str | None = None) -> list[Envelope]:
    found = [Envelope.model_validate_json(m.data) for m in await messages(bus.js, subjects.RESULTS)]
    return [e for e in found if kind is None or e.type == kind]


@pytest.fixture
def senders(nats_server: NatsServer, tmp_path: Path) -> Iterator[Senders]:
    s = Senders(nats_server, tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


def data(envelope: Envelope) -> dict[str, Any]:
    assert isinstance(envelope.data, dict)
    return envelope.data
