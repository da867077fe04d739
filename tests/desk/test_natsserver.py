"""The embedded broker as a three-node cluster: R3 streams keep every acknowledged message when
the node leading them dies, and the node catches up when it comes back."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from desk.natsserver import NatsCluster, NatsServer
from shared import subjects
from shared.bus import Bus
from shared.errors import TransientError
from shared.streams import Topology, provision
from tests.helpers import eventually

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    nodes = NatsCluster(tmp_path / "nats", nodes=3, sync_always=False, log_dir=tmp_path)
    nodes.start()
    try:
        yield nodes
    finally:
        for node in nodes.nodes:
            node.kill()


async def publish_all(bus: Bus, ids: range) -> None:
    """Publish each id, retrying while the cluster elects a new leader (bounded)."""
    for i in ids:
        for _ in range(6):
            try:
                await bus.publish(
                    subjects.event("helpdesk", "ticket.created"), b"{}", msg_id=f"e{i}", timeout=5
                )
                break
            except TransientError:
                continue
        else:
            raise AssertionError(f"e{i} was not acknowledged in 30s")


async def test_r3_streams_lose_nothing_when_the_leading_node_dies_and_returns(
    cluster: NatsCluster,
) -> None:
    bus = await Bus.connect(cluster.url, service="test")
    try:
        await provision(bus.js, Topology(replicas=3))
        await publish_all(bus, range(50))

        info = await bus.js.stream_info(subjects.EVENTS)
        assert info.config.num_replicas == 3
        assert info.cluster is not None
        leader = next(n for n in cluster.nodes if n.name == info.cluster.leader)
        leader.kill()
        await publish_all(bus, range(50, 100))
        await publish_all(bus, range(0, 10))  # re-sent after the failover: still duplicates

        leader.start()

        async def all_current() -> bool:
            now = await bus.js.stream_info(subjects.EVENTS)
            peers = now.cluster.replicas if now.cluster else None
            return bool(peers) and all(p.current for p in peers or [])

        await eventually(all_current, timeout=30, message="the restarted node to catch up")
        now = await bus.js.stream_info(subjects.EVENTS)
        assert now.state.messages == 100
        assert now.cluster is not None and now.cluster.leader != leader.name
    finally:
        await bus.close()


def test_desk_up_refuses_more_replicas_than_broker_nodes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "desk", "up"],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "DESK_VAR_DIR": str(tmp_path / "var"),
            "DESK_STREAM_REPLICAS": "3",
            "DESK_INGRESS_PORT": "0",
            "DESK_INBOX_API_PORT": "0",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "DESK_STREAM_REPLICAS=3 needs at least that many broker nodes" in done.stderr
    assert "DESK_NATS_NODES=3" in done.stderr


def test_a_monitor_port_another_nats_server_took_is_chosen_again(tmp_path: Path) -> None:
    """The monitor port, chosen free, taken meanwhile by another program speaking its own
    protocol (another nats-server's client port answers `INFO {...}` to anything): the
    readiness probe reads that as not ready, and the start picks other ports, as for any
    taken port; no error escapes it and no node is left running."""
    server = NatsServer(tmp_path / "one", sync_always=False)
    taken = server.monitor_port
    with answering_like_nats(taken):
        server.start()
        try:
            assert server.monitor_port != taken and server.running
        finally:
            server.kill()


def test_a_port_taken_between_choosing_and_binding_is_chosen_again(tmp_path: Path) -> None:
    """Another process (a parallel test, another stack) may bind a port chosen free before
    nats-server does: the first start picks others, for one server and for a cluster alike."""
    import socket

    def occupy(port: int) -> socket.socket:
        taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        return taken

    server = NatsServer(tmp_path / "one", sync_always=False)
    chosen = server.port
    with occupy(chosen):
        server.start()
        try:
            assert server.port != chosen and server.running
        finally:
            server.kill()

    cluster = NatsCluster(tmp_path / "three", nodes=3, sync_always=False)
    route = cluster.route_ports[1]
    with occupy(route):
        cluster.start()
        try:
            assert route not in cluster.route_ports
            assert all(node.running for node in cluster.nodes)
        finally:
            cluster.stop()


def test_started_means_the_client_port_answers_as_this_server(tmp_path: Path) -> None:
    """nats-server answers its health probe before it listens for clients (monitoring and
    JetStream start first): a test connecting at once after `start()` was refused now and then
    under load. Started now means the client port answers, as this server: not a program that
    took the port first (which leaves this server to exit a moment later)."""
    server = NatsServer(tmp_path / "one", sync_always=False)
    taken = server.port
    with answering_like_nats(taken):
        server.start()
        try:
            assert server.port != taken and server.running
            with urllib.request.urlopen(f"{server.monitor_url}/varz", timeout=5) as answer:
                own = json.load(answer)["server_id"]
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
                greeting = conn.recv(4096).split(b"\r\n", 1)[0]
            assert json.loads(greeting.removeprefix(b"INFO "))["server_id"] == own
        finally:
            server.kill()


@contextlib.contextmanager
def answering_like_nats(port: int) -> Iterator[None]:
    """Another program on `port` speaking NATS's protocol: it greets every connection with
    `INFO {...}`, as another nats-server's client port does, under a server id of its own."""
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    stop = threading.Event()

    def answer_like_nats() -> None:
        squatter.settimeout(0.1)
        while not stop.is_set():
            try:
                client, _ = squatter.accept()
            except TimeoutError:
                continue
            with client:
                client.sendall(b'INFO {"server_id":"other","version":"2.9.0"}\r\n')

    talker = threading.Thread(target=answer_like_nats, daemon=True)
    talker.start()
    try:
        yield
    finally:
        stop.set()
        talker.join(5)
        squatter.close()
