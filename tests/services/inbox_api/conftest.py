"""A real inbox_api process on a real nats-server, with SQLite or (when it answers) PostgreSQL."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus
from shared.streams import Topology, provision
from tests.postgres import fresh_schema, url_in
from tests.services_running import ServiceProcess

REVIEWER = "reviewer-token-for-tests"
VIEWER = "viewer-token-for-tests"
REPORTER = "report-token-for-tests"  # the daily report's: counts only
AUDIT_KEY = "audit-key-for-tests-0123456789"  # DESK_AUDIT_KEY: required with DESK_REVIEWERS


class Api:
    def __init__(self, url: str, process: ServiceProcess) -> None:
        self.url = url
        self.process = process

    def client(self, token: str | None = REVIEWER) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)


def write_credentials(var_dir: Path) -> None:
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / "dev-credentials.json").write_text(
        json.dumps(
            {
                "webhook_secrets": {},
                "reviewer_token": REVIEWER,
                "viewer_token": VIEWER,
                "report_token": REPORTER,
            }
        )
    )


@contextlib.contextmanager
def own_nats(root: Path) -> Iterator[NatsServer]:
    """A nats-server of its own under `root`, for as long as the block runs."""
    server = NatsServer(root / "store", sync_always=False, log_file=root / "nats.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def inbox_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with own_nats(tmp_path_factory.mktemp("nats")) as server:
        yield server


@contextlib.contextmanager
def running_api(database: str, nats: NatsServer, root: Path, **extra: str) -> Iterator[Api]:
    """An inbox_api process on `database` (sqlite, or a fresh PostgreSQL schema)."""
    write_credentials(root / "var")
    env = {
        "DESK_NATS_URL": nats.url,
        "DESK_VAR_DIR": str(root / "var"),
        "DESK_RETRY_INITIAL": "0.2",
        "DESK_AUDIT_KEY": AUDIT_KEY,
        **extra,
    }
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        if schema:
            env["DESK_DATABASE_URL"] = url_in(schema)
        process = ServiceProcess(["inbox_api"], env, root / "inbox_api.log").start()
        try:
            yield Api(process.url, process)
        finally:
            process.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def api(
    request: pytest.FixtureRequest, inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    with running_api(
        request.param, inbox_nats, tmp_path_factory.mktemp(f"inbox-{request.param}")
    ) as running:
        yield running


@pytest.fixture
async def nats_bus(inbox_nats: NatsServer) -> AsyncIterator[Bus]:
    bus = await Bus.connect(inbox_nats.url, service="test")
    await provision(bus.js, Topology())
    try:
        yield bus
    finally:
        await bus.close()
