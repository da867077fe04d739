from __future__ import annotations

from pathlib import Path

import pytest

from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from shared.errors import TransientError
from shared.streams import Topology, provision
from tests.helpers import messages


async def test_same_msg_id_twice_stores_one_message_and_reports_the_duplicate(bus: Bus) -> None:
    subject = subjects.event("helpdesk", "ticket.created")
    first = await bus.publish(subject, b'{"id": "e1"}', msg_id="helpdesk:e1")
    second = await bus.publish(subject, b'{"id": "e1"}', msg_id="helpdesk:e1")

    assert first.duplicate is False
    assert second.duplicate is True
    assert second.seq == first.seq
    stored = await messages(bus.js, subjects.EVENTS)
    assert [m.data for m in stored] == [b'{"id": "e1"}']
    assert stored[0].headers["Nats-Msg-Id"] == "helpdesk:e1"


async def test_publish_keeps_the_callers_headers_and_does_not_change_them(bus: Bus) -> None:
    headers = {"Webhook-Id": "e2"}
    await bus.publish(subjects.event("helpdesk", "x"), b"{}", msg_id="helpdesk:e2", headers=headers)
    assert headers == {"Webhook-Id": "e2"}
    [stored] = await messages(bus.js, subjects.EVENTS)
    assert stored.headers["Webhook-Id"] == "e2"


async def test_provisioning_twice_changes_nothing(nats_server: NatsServer) -> None:
    connection = await Bus.connect(nats_server.url, service="test")
    try:
        first = await provision(connection.js, Topology())
        assert set(first.values()) == {"created"}
        await connection.publish(subjects.work("drafter", "ticket.created"), b"{}", msg_id="w1")
        before = {n: await connection.js.stream_info(n) for n in subjects.STREAM_SUBJECTS}

        second = await provision(connection.js, Topology())

        assert set(second.values()) == {"unchanged"}
        for name, info in before.items():
            after = await connection.js.stream_info(name)
            assert after.config == info.config
            assert after.created == info.created
            assert after.state.messages == info.state.messages
    finally:
        await connection.close()


async def test_provisioning_a_changed_setting_updates_the_stream_in_place(
    nats_server: NatsServer,
) -> None:
    connection = await Bus.connect(nats_server.url, service="test")
    try:
        await provision(connection.js, Topology(duplicate_window=600))
        await connection.publish(subjects.result("reply.sent"), b"{}", msg_id="r1")
        changes = await provision(connection.js, Topology(duplicate_window=300))
        assert changes[subjects.RESULTS] == "updated"
        info = await connection.js.stream_info(subjects.RESULTS)
        assert info.config.duplicate_window == 300
        assert info.state.messages == 1
    finally:
        await connection.close()


async def test_publish_without_a_stream_is_a_transient_error_after_the_deadline(bus: Bus) -> None:
    with pytest.raises(TransientError):
        await bus.publish("nowhere.at.all", b"{}", msg_id="n1", timeout=0.5)


async def test_connecting_to_nothing_is_a_transient_error() -> None:
    from desk.process import free_port

    with pytest.raises(TransientError):
        await Bus.connect(f"nats://127.0.0.1:{free_port()}", service="test", reconnect=False)


async def test_an_envelope_is_published_once_under_its_own_id_with_what_it_belongs_to(
    bus: Bus,
) -> None:
    from shared import headers as h
    from shared.envelope import Envelope

    envelope = Envelope(
        id="inbox.item:T1:r1:v1", source="/desk/drafter", type="inbox.item", correlationid="e7"
    )
    first = await bus.publish_envelope(subjects.INBOX_ITEM, envelope)
    again = await bus.publish_envelope(subjects.INBOX_ITEM, envelope)
    assert not first.duplicate and again.duplicate
    [stored] = await messages(bus.js, subjects.INBOX)
    assert Envelope.model_validate_json(stored.data) == envelope
    assert stored.headers[h.MSG_ID] == "inbox.item:T1:r1:v1"
    assert stored.headers[h.CORRELATION_ID] == "e7"
    assert stored.headers[h.CONTENT_TYPE] == h.CLOUDEVENTS_JSON


async def test_a_broker_refusing_the_login_again_and_again_leaks_no_connection(
    tmp_path: Path,
) -> None:
    """A service retries its connect for as long as the broker refuses it (a rotated password
    not yet rolled out): each refused attempt must give its socket back."""
    import os

    from shared import permissions
    from shared.bus import NatsAuth

    users = {u: "pw-" + u for u in (permissions.ADMIN, *permissions.SERVICES)}
    server = NatsServer(
        tmp_path / "nats", sync_always=False, authorization=permissions.authorization_block(users)
    )
    server.start()

    def open_sockets() -> int:
        found = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                found += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
            except FileNotFoundError:  # the listing's own descriptor, closed by now
                pass
        return found

    wrong = NatsAuth(user="router", password="not-the-password")
    try:
        before = open_sockets()
        for _ in range(5):
            with pytest.raises(TransientError):
                await Bus.connect(server.url, service="router", auth=wrong, reconnect=False)
        assert open_sockets() == before
    finally:
        server.kill()
