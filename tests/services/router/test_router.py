"""The router process against a real nats-server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nats.js.errors as js_errors

from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.streams import Topology, provision
from tests.helpers import eventually, messages
from tests.services_running import ROOT, ServiceProcess

RULES = """
[[rules]]
name = "to a and b"
types = ["ticket.*"]
targets = ["a", "b"]
"""


def router(nats: NatsServer, tmp_path: Path, **env: str) -> ServiceProcess:
    rules = tmp_path / "rules.toml"
    if not rules.exists():
        rules.write_text(RULES)
    return ServiceProcess(
        ["router"],
        {"DESK_NATS_URL": nats.url, "DESK_RULES_FILE": str(rules), **env},
        tmp_path / "router.log",
    )


async def publish_event(bus: Bus, event_id: str, body: bytes | None = None) -> None:
    data = body if body is not None else json.dumps({"id": event_id, "data": {}}).encode()
    await bus.publish(
        subjects.event("helpdesk", "ticket.created"), data, msg_id=f"helpdesk:{event_id}"
    )


async def on(bus: Bus, subject: str) -> list[Envelope]:
    return [
        Envelope.model_validate_json(m.data)
        for m in await messages(bus.js, subjects.WORK)
        if m.subject == subject
    ]


async def test_fan_out_survives_a_router_killed_between_the_two_publishes(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    bus = await Bus.connect(nats_server.url, service="test")
    try:
        await provision(bus.js, Topology())
        # WORK accepts only target a for now, so the publish to b cannot be acknowledged:
        # the router is held between its two publishes.
        info = await bus.js.stream_info(subjects.WORK)
        info.config.subjects = ["work.a.>"]
        await bus.js.update_stream(info.config)

        # the killed router's delivery comes back after ack_wait: keep it short
        first = router(nats_server, tmp_path, DESK_PROVISION="false", DESK_ACK_WAIT="3").start()
        await publish_event(bus, "evt_1")
        await eventually(lambda: on(bus, "work.a.ticket.created"), message="the first publish")
        first.kill()

        info.config.subjects = ["work.>"]
        await bus.js.update_stream(info.config)
        second = router(nats_server, tmp_path, DESK_PROVISION="false", DESK_ACK_WAIT="3").start()

        async def settled() -> bool:
            c = await bus.js.consumer_info(subjects.EVENTS, "router")
            return c.num_pending == 0 and c.num_ack_pending == 0

        await eventually(lambda: on(bus, "work.b.ticket.created"), timeout=45, message="b")
        await eventually(settled, timeout=20, message="the event acked")
        second.stop()

        [to_a] = await on(bus, "work.a.ticket.created")
        [to_b] = await on(bus, "work.b.ticket.created")
        assert to_a.data == to_b.data == {"id": "evt_1", "data": {}}
        assert to_a.id == "helpdesk:evt_1" and to_a.type == "ticket.created"
        work = await messages(bus.js, subjects.WORK)
        assert sorted(m.headers["Nats-Msg-Id"] for m in work) == [
            "helpdesk:evt_1>a",
            "helpdesk:evt_1>b",
        ]
    finally:
        await bus.close()


async def test_unmatched_events_are_acked_and_counted_and_garbage_is_dead_lettered(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    service = router(nats_server, tmp_path).start()
    bus = await Bus.connect(nats_server.url, service="test")
    try:
        await bus.publish(subjects.event("helpdesk", "invoice.paid"), b"{}", msg_id="helpdesk:i1")
        await publish_event(bus, "junk", body=b"\x00not json")
        await publish_event(bus, "evt_2")

        async def settled() -> bool:
            try:
                c = await bus.js.consumer_info(subjects.EVENTS, "router")
            except js_errors.NotFoundError:
                return False  # the router has not created its consumer yet
            return c.num_pending == 0 and c.num_ack_pending == 0

        await eventually(settled, message="all three settled")
        [dead] = await messages(bus.js, subjects.DLQ)
        assert dead.headers["Desk-Dlq-Reason"] == "undecodable"
        assert dead.headers["Desk-Original-Msg-Id"] == "helpdesk:junk"
        routed = [m.subject for m in await messages(bus.js, subjects.WORK)]
        assert routed == ["work.a.ticket.created", "work.b.ticket.created"]
        import httpx

        metrics = httpx.get(f"{service.ops_url}/metrics").text
        assert 'desk_router_unrouted_total{type="invoice.paid"} 1.0' in metrics
    finally:
        await bus.close()
        service.stop()


def test_a_rules_file_with_an_error_refuses_to_start_naming_the_rule(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rules]]\nname = "fine"\ntypes = ["*"]\ntargets = ["a"]\n\n'
        '[[rules]]\nname = "broken"\ntypes = ["*"]\ntargets = []\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "desk", "router"],
        cwd=ROOT,
        env={
            "DESK_RULES_FILE": str(rules),
            "DESK_NATS_URL": "nats://127.0.0.1:1",  # never reached: it stops before connecting
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "rule 2 ('broken'): targets" in done.stderr
    assert "Traceback" not in done.stderr


async def test_the_work_item_carries_the_queue_and_category_of_the_first_rule_naming_them(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    (tmp_path / "rules.toml").write_text(
        RULES
        + """
[[rules]]
name = "urgent ones wait in the urgent queue"
types = ["ticket.*"]
when = [{ path = "data.priority", equals = "urgent" }]
targets = ["a"]
queue = "urgent"
category = "bug"

[[rules]]
name = "the rest in general"
types = ["ticket.*"]
targets = ["a"]
queue = "general"
"""
    )
    bus = await Bus.connect(nats_server.url, service="test")
    try:
        await provision(bus.js, Topology())
        process = router(nats_server, tmp_path).start()
        urgent = {"id": "evt_u", "data": {"priority": "urgent"}}
        await publish_event(bus, "evt_u", json.dumps(urgent).encode())
        await publish_event(bus, "evt_n")

        async def both() -> bool:
            return len(await on(bus, "work.b.ticket.created")) == 2

        await eventually(both, timeout=20, message="both routed")
        process.stop()
        queues = {
            e.id: (e.model_extra or {}).get("queue") for e in await on(bus, "work.a.ticket.created")
        }
        assert queues == {"helpdesk:evt_u": "urgent", "helpdesk:evt_n": "general"}
        # every target's copy of one event says the same
        assert {
            e.id: (e.model_extra or {}).get("queue") for e in await on(bus, "work.b.ticket.created")
        } == queues
        categories = {
            e.id: (e.model_extra or {}).get("category")
            for e in await on(bus, "work.a.ticket.created")
        }
        assert categories == {"helpdesk:evt_u": "bug", "helpdesk:evt_n": None}
    finally:
        await bus.close()
