"""One durability mode of the broker: a fresh nats-server with the bare and publishing
endpoints and ingress on it, and one round of a measure against them."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from nats.js import JetStreamContext

from desk.natsserver import NatsServer
from desk.process import free_port

from ..loadgen import LoadGenerator
from ..processes import Child, cpu_seconds
from .broker import publish_all
from .tally import Tally
from .workload import SOURCE, Message, new_secret

MODES = ("relaxed", "always")


class Mode:
    """A nats-server in one durability mode, with bare, ingress and a broker client on it."""

    def __init__(self, mode: str, connections: int, in_flight: int, work: Path) -> None:
        self.mode = mode
        self.connections = connections
        self.in_flight = in_flight
        self.work = work
        self.secret = new_secret()
        self.server = NatsServer(
            work / "nats", sync_always=mode == "always", log_file=work / "nats.log"
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        self.env["PYTHONUNBUFFERED"] = "1"  # as `desk up` runs its services
        self.bare_port, self.bare_ops_port = free_port(), free_port()
        self.publish_port, self.publish_ops_port = free_port(), free_port()
        self.ingress_port, self.ingress_ops_port = free_port(), free_port()
        self.bare = Child(
            [
                "benchmarks.bare",
                "--port",
                str(self.bare_port),
                "--ops-port",
                str(self.bare_ops_port),
            ],
            self.env,
            work / "bare.log",
        )
        self.publish = Child(
            [
                "benchmarks.bare",
                "--port",
                str(self.publish_port),
                "--ops-port",
                str(self.publish_ops_port),
                "--nats-url",
                self.server.url,
            ],
            self.env,
            work / "publish.log",
        )
        self.ingress = Child(["desk", "ingress"], self._ingress_env(), work / "ingress.log")

    def _ingress_env(self) -> dict[str, str]:
        return {
            **self.env,
            "DESK_NATS_URL": self.server.url,
            "DESK_HTTP_HOST": "127.0.0.1",
            "DESK_HTTP_PORT": str(self.ingress_port),
            "DESK_OPS_PORT": str(self.ingress_ops_port),
            "DESK_VAR_DIR": str(self.work),
            "DESK_PROVISION": "true",
            # An hour of tolerance: the requests are signed before a run that may take minutes.
            "DESK_SOURCES": json.dumps(
                {SOURCE: {"scheme": "standard", "secrets": [self.secret], "tolerance": 3600}}
            ),
        }

    def start(self) -> None:
        self.server.start()
        self.bare.start(f"http://127.0.0.1:{self.bare_ops_port}/healthz")
        self.publish.start(f"http://127.0.0.1:{self.publish_ops_port}/healthz")
        self.ingress.start(f"http://127.0.0.1:{self.ingress_ops_port}/readyz")

    def stop(self) -> None:
        self.ingress.stop()
        self.publish.stop()
        self.bare.stop()
        self.server.stop()

    def http_child(self, name: str) -> tuple[Child, int]:
        return {
            "bare": (self.bare, self.bare_port),
            "publish": (self.publish, self.publish_port),
            "ingress": (self.ingress, self.ingress_port),
        }[name]

    @property
    def nats_pid(self) -> int:
        assert self.server.proc is not None
        return self.server.proc.pid

    async def http_round(
        self, gen: LoadGenerator, tally: Tally, child: Child, port: int, lo: int, hi: int
    ) -> None:
        before = cpu_seconds(child.pid), cpu_seconds(self.nats_pid)
        result = await asyncio.to_thread(
            gen.run, port, "main", lo, hi, connections=self.connections
        )
        tally.server_cpu += cpu_seconds(child.pid) - before[0]
        tally.nats_cpu += cpu_seconds(self.nats_pid) - before[1]
        tally.results.append(result)

    async def broker_round(self, js: JetStreamContext, tally: Tally, batch: list[Message]) -> None:
        nats_before, cpu_before = cpu_seconds(self.nats_pid), time.process_time()
        started = time.perf_counter()
        await publish_all(js, batch)
        elapsed = time.perf_counter() - started
        tally.elapsed += elapsed
        tally.rounds_rps.append(len(batch) / elapsed)
        tally.client_cpu += time.process_time() - cpu_before
        tally.nats_cpu += cpu_seconds(self.nats_pid) - nats_before
        tally.published += len(batch)
