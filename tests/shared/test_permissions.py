"""Per-service NATS users on a real nats-server: each service works, and stays in its lane."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats.errors as nats_errors
import pytest

from desk.credentials import nats_passwords
from desk.natsserver import NatsServer
from shared import catalog, outage, subjects
from shared.bus import Bus, NatsAuth
from shared.consumer import declared_consumers
from shared.errors import TransientError
from shared.permissions import ADMIN, SERVICES, authorization_block
from shared.settings import DeskSettings
from shared.streams import Topology, provision
from tests.helpers import eventually, messages
from tests.services.inbox_api.conftest import write_credentials
from tests.services_running import ServiceProcess

PASSWORDS = nats_passwords()


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(
        tmp_path / "nats", sync_always=False, authorization=authorization_block(PASSWORDS)
    )
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def connect(server: NatsServer, user: str) -> Bus:
    return await Bus.connect(
        server.url,
        service=user,
        publish_timeout=1.0,
        auth=NatsAuth(user=user, password=PASSWORDS[user]),
    )


@pytest.fixture
async def admin(secured: NatsServer) -> AsyncIterator[Bus]:
    bus = await connect(secured, ADMIN)
    consumers = declared_consumers(DeskSettings().consumer_options())  # as `desk provision`
    await provision(bus.js, Topology(), consumers=consumers)
    try:
        yield bus
    finally:
        await bus.close()


async def test_every_service_starts_ready_with_its_own_user(
    admin: Bus, secured: NatsServer, tmp_path: Path
) -> None:
    write_credentials(tmp_path / "var")
    processes = []
    try:
        for service in SERVICES:
            env = {
                "DESK_NATS_URL": secured.url,
                "DESK_NATS_USER": service,
                "DESK_NATS_PASSWORD": PASSWORDS[service],
                "DESK_PROVISION": "false",
                "DESK_VAR_DIR": str(tmp_path / "var"),
                "DESK_HELPDESK_URL": f"sqlite:///{tmp_path / 'helpdesk.sqlite'}",
            }
            processes.append(ServiceProcess([service], env, tmp_path / f"{service}.log"))
        await asyncio.gather(*(asyncio.to_thread(p.start) for p in processes))  # /readyz 200

        async def consuming() -> bool:  # every service created and bound its durables itself
            for stream, durable in catalog.DURABLES:
                try:
                    await admin.js.consumer_info(stream, durable)
                except nats_errors.Error:
                    return False
            return True

        await eventually(consuming, timeout=15, message="every durable consumer in place")
        for process in processes:
            assert process.proc is not None and process.proc.poll() is None, process.tail()
            assert "permissions violation" not in process.tail(), process.args
    finally:
        for process in processes:
            process.kill()


async def test_the_drafter_cannot_publish_results(admin: Bus, secured: NatsServer) -> None:
    drafter = await connect(secured, "drafter")
    try:
        await drafter.publish(subjects.INBOX_ITEM, b"{}", msg_id="ok-1")  # its own subject
        with pytest.raises(TransientError):
            await drafter.publish(subjects.result("reply.sent"), b"{}", msg_id="forged-1")
    finally:
        await drafter.close()
    assert await messages(admin.js, subjects.RESULTS) == []


async def test_ingress_cannot_read_the_inbox(admin: Bus, secured: NatsServer) -> None:
    await admin.publish(subjects.INBOX_ITEM, b"{}", msg_id="item-1")
    ingress = await connect(secured, "ingress")
    try:
        await ingress.publish(subjects.event("helpdesk", "ticket.created"), b"{}", msg_id="e-1")
        with pytest.raises((TimeoutError, nats_errors.TimeoutError, nats_errors.Error)):
            sub = await ingress.js.pull_subscribe(
                subjects.INBOX_ITEM, durable="snoop", stream=subjects.INBOX
            )
            await sub.fetch(1, timeout=1)
        snoop = await ingress.nc.subscribe(subjects.INBOX_ITEM)
        fence = await ingress.nc.subscribe("_INBOX_ingress.fence")  # ingress's own to read
        await ingress.nc.flush()
        await admin.publish(subjects.INBOX_ITEM, b"{}", msg_id="item-2")
        await admin.nc.publish("_INBOX_ingress.fence", b"")
        # the server sends one connection its messages in order: once the fence is here, a
        # permitted subscriber would have had the item before it
        await fence.next_msg(timeout=10)
        assert snoop.pending_msgs == 0
    finally:
        await ingress.close()


async def test_the_drafter_reports_the_model_down_and_the_inbox_reads_it_as_themselves(
    admin: Bus, secured: NatsServer
) -> None:
    """The inbox's banner: the drafter writes its view of the model in `desk_model`, the inbox
    reads every replica's with its own read-only grants (no consumer), and may not write."""
    drafter, inbox = await connect(secured, "drafter"), await connect(secured, "inbox_api")
    try:
        reader = outage.Reader(inbox.js)
        assert await reader.down() is None  # nothing reported yet
        now = dt.datetime.now(dt.UTC)
        down = outage.ModelState(up=False, since=now, reason="model endpoint answered 500", at=now)
        await outage.Writer(drafter.js, "drafter-a").write(down)
        await outage.Writer(drafter.js, "drafter-b").write(down.model_copy(update={"up": True}))
        found = await reader.down()
        assert found is not None and found.reason == "model endpoint answered 500"
        kv = await inbox.js.key_value(outage.BUCKET)
        with pytest.raises(Exception):  # noqa: B017 - the broker refuses it, however it says so
            await kv.put("drafter-a", b'{"up": true}')
        assert await reader.down() is not None
    finally:
        await drafter.close()
        await inbox.close()
