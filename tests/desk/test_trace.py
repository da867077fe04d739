"""`desk trace` shows each hop's attempts as the broker recorded them: a delivery whose ack wait
ran out (its process died), a nak (a retry), the ack; and without those records (a broker
provisioned before them, or restarted since) it still prints the path, without attempts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nats.errors as nats_errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from shared.consumer import declared_consumers
from shared.envelope import Envelope
from shared.settings import DeskSettings
from shared.streams import Topology, provision
from tests import forkserver
from tests.helpers import eventually

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def desk_trace(nats: NatsServer, wanted: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env["DESK_NATS_URL"] = nats.url
    return forkserver.run(["trace", wanted], env=env, cwd=ROOT)


async def next_delivery(sub: JetStreamContext.PullSubscription, timeout: float = 5.0) -> Msg:
    while True:
        try:
            [msg] = await sub.fetch(1, timeout=timeout)
            return msg
        except nats_errors.TimeoutError:
            continue


async def test_each_attempt_is_shown_as_it_ended(bus: Bus, nats_server: NatsServer) -> None:
    options = DeskSettings(ack_wait=1.0).consumer_options()
    await provision(bus.js, Topology(), consumers=declared_consumers(options))
    envelope = Envelope(id="helpdesk:evt_9", source="helpdesk", type="ticket.created", data={})
    await bus.publish(
        subjects.work("drafter", "ticket.created"),
        envelope.to_bytes(),
        msg_id="helpdesk:evt_9>drafter",
        headers={"traceparent": TRACEPARENT},
    )
    sub = await bus.js.pull_subscribe_bind("drafter", subjects.WORK)
    await next_delivery(sub)  # no answer: the ack wait runs out, as when the process dies
    await (await next_delivery(sub)).nak()
    await (await next_delivery(sub)).ack_sync()

    def traced() -> str:
        out = desk_trace(nats_server, TRACE_ID).stdout
        return out if "ack)" in out else ""

    await eventually(traced, timeout=20, message="the ack's record")
    out = traced()
    assert f"trace {TRACE_ID}: 1 messages, correlation id " in out, out
    assert "drafter: done (attempt 1 no answer, attempt 2 nak, attempt 3 ack)" in out, out

    await bus.js.delete_stream(subjects.DELIVERIES)  # as on a broker without the records
    shown = desk_trace(nats_server, TRACE_ID)
    assert shown.returncode == 0, shown.stderr
    assert "      drafter: done\n" in shown.stdout + "\n", shown.stdout
