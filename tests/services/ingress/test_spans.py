"""Spans exported to a collector carry no mail Message-ID: a mail posted to the real ingress
and routed by the real router (a real nats-server, a real OTLP/HTTP receiver) leaves spans whose
ids are marked by a hash, never the Message-ID a sender chose or an address in it."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import httpx

from desk.natsserver import NatsServer
from shared import telemetry
from standins.collector import Collector
from tests.helpers import eventually
from tests.services_running import ServiceProcess

from .conftest import BASIC, ingress_env


async def test_exported_spans_carry_no_message_id(module_nats: NatsServer, tmp_path: Path) -> None:
    local = f"{uuid.uuid4().hex}.jane.doe"
    message_id = f"<{local}@mail.customer.example>"
    with Collector() as collector:
        env = {
            **ingress_env(module_nats.url),
            "DESK_OTLP_ENDPOINT": collector.url,
            "OTEL_BSP_SCHEDULE_DELAY": "200",  # the SDK's batch interval, ms
        }
        ingress = ServiceProcess(["ingress"], env, tmp_path / "ingress.log").start()
        router = ServiceProcess(["router"], env, tmp_path / "router.log").start()
        try:
            mail = {
                "MessageID": message_id,
                "From": "Jane Doe <jane.doe@customer.example>",
                "Subject": "Charged twice",
                "TextBody": "Please refund one of them.",
            }
            auth = "Basic " + base64.b64encode(BASIC.encode()).decode()
            answer = httpx.post(
                f"{ingress.url}/webhooks/email",
                content=json.dumps(mail),
                headers={"Authorization": auth, "Content-Type": "application/json"},
            )
            assert answer.status_code == 202, answer.text

            def routed() -> bool:
                return any(s.name.startswith("publish work.") for s in collector.spans())

            await eventually(routed, timeout=30, message="the mail's spans, routed")
        finally:
            router.stop()
            ingress.stop()

    spans = collector.spans()
    kinds = {s.kind for s in spans}
    assert {"SERVER", "CONSUMER", "PRODUCER"} <= kinds, kinds
    for span in spans:
        shown = json.dumps([span.name, span.attributes, span.error])
        assert local not in shown and "customer.example" not in shown, shown
        assert "@" not in shown, shown
    mark = telemetry.scrub(message_id)
    # the broker may hold other tests' events, which the router also handles: this mail's hops
    ids = [str(s.attributes.get("messaging.message.id", "")) for s in spans]
    ours = [i for i in ids if mark in i]  # the same mail, the same mark, in every hop:
    assert len(ours) >= 3, ids  # ingress's publish, the router's delivery and its publish
