"""The embedded cluster's routes are authenticated: a nats-server that reaches a route port with
no credentials, or with wrong ones, is refused, so its clients (which need no password on their
own server) can neither publish into the real cluster nor read from it.

Order: (1) a message crosses between two real nodes (the detector works); (2) two rogues, one
without credentials and one with a wrong password, are seen refused by every node (their own
log says so: a positive event, not a timeout), and nothing they publish arrives, nothing the
cluster publishes reaches them, and /routez lists only the legitimate peers; (3) a rogue WITH
the stack's route credentials does join and its message does arrive, so (2) could have seen one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from desk import credentials
from desk.natsserver import NatsCluster, NatsServerError, binary
from desk.process import die_with_parent, free_port
from desk.stack import Stack
from shared.permissions import ADMIN
from shared.settings import StackSettings

HOST = "127.0.0.1"
DEADLINE = 10.0  # for each positive condition; met in well under a second when all is well


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return json.load(answer)


def peers(monitor_url: str) -> set[str]:
    """Names of the servers this node has a route with (route pooling: several per peer)."""
    return {r.get("remote_name", "?") for r in get_json(f"{monitor_url}/routez")["routes"]}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    """The embedded broker exactly as `desk up` starts it with DESK_NATS_NODES=3."""
    settings = StackSettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path / "var",
        nats_url=None,
        nats_nodes=3,
        nats_sync="relaxed",
        stream_replicas=1,
    )
    made = Stack(settings)
    # what Stack.run does before it starts the broker
    made.var_dir.mkdir(parents=True)
    (made.var_dir / "log").mkdir()
    creds = json.loads(credentials.load_or_create(made.var_dir).read_text())
    made.broker.passwords = dict(creds["nats_passwords"])
    made.broker.start()
    try:
        yield made
    finally:
        if made.broker.nats is not None:
            for node in made.broker.nodes():
                node.kill()


@dataclass
class Rogue:
    """A nats-server from the same wheel, soliciting routes to the cluster's route ports."""

    name: str
    route_urls: list[str]
    log: Path
    port: int = field(default_factory=free_port)
    monitor_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{HOST}:{self.monitor_port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                str(binary()),
                *("-a", HOST, "-p", str(self.port), "-m", str(self.monitor_port)),
                *("-n", self.name, "-l", str(self.log)),
                *("--cluster", f"nats://{HOST}:{free_port()}", "--cluster_name", "desk"),
                *("--routes", ",".join(self.route_urls)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + DEADLINE
        while True:
            assert self.proc.poll() is None, f"{self.name} exited; see {self.log}"
            with contextlib.suppress(urllib.error.URLError, OSError):
                with urllib.request.urlopen(f"{self.monitor_url}/healthz", timeout=1) as ok:
                    if ok.status == 200:
                        return
            assert time.monotonic() < deadline, f"{self.name} not ready; see {self.log}"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def refused_by_all(self, ports: list[int]) -> bool:
        """Its log shows each node answering its route CONNECT with an authorization error."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        refused = [line for line in lines if "Authorization Violation" in line]
        return all(any(f"{HOST}:{p} - rid:" in line for line in refused) for p in ports)


class Inbox:
    """The messages one subscription got."""

    def __init__(self) -> None:
        self.got: list[Msg] = []

    async def add(self, msg: Msg) -> None:
        self.got.append(msg)

    def on(self, subject: str) -> list[Msg]:
        return [m for m in self.got if m.subject == subject]


@contextlib.asynccontextmanager
async def client(
    url: str, user: str | None = None, password: str | None = None
) -> AsyncIterator[Client]:
    async def quiet(_exc: Exception) -> None:
        pass

    nc = await nats.connect(
        url, user=user, password=password, allow_reconnect=False, connect_timeout=2, error_cb=quiet
    )
    try:
        yield nc
    finally:
        await nc.close()


async def until(check: Any, what: str) -> float:
    """Seconds until `check()` is true; fails after DEADLINE."""
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < DEADLINE, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def test_a_rogue_server_without_the_route_password_cannot_join(
    stack: Stack, tmp_path: Path
) -> None:
    cluster = stack.broker.nats
    assert isinstance(cluster, NatsCluster)
    n1, n2, n3 = cluster.nodes
    legit = {n.name for n in cluster.nodes}
    route_ports = [
        int(get_json(f"{n.monitor_url}/varz")["cluster"]["cluster_port"]) for n in (n1, n2, n3)
    ]
    password = stack.broker.passwords[ADMIN]

    async with (
        client(n1.url, ADMIN, password) as on_n1,
        client(n2.url, ADMIN, password) as on_n2,
    ):
        results = Inbox()
        await on_n1.subscribe("results.>", cb=results.add)
        await on_n1.flush()

        # (1) the detector: a message published on n2 reaches the subscriber on n1
        async def crossed() -> bool:
            await on_n2.publish("results.control", b"real")
            await on_n2.flush()
            await asyncio.sleep(0.01)
            return bool(results.got)

        crossing = await until(crossed, "a message to cross from n2 to n1")

        # (2) rogues without the route password, each soliciting a route to every node
        rogues = [
            Rogue("rogue-none", [f"nats://{HOST}:{p}" for p in route_ports], tmp_path / "none.log"),
            Rogue(
                "rogue-wrong",
                [f"nats://route:not-the-password-at-all@{HOST}:{p}" for p in route_ports],
                tmp_path / "wrong.log",
            ),
        ]
        try:
            for rogue in rogues:
                rogue.start()
            async with contextlib.AsyncExitStack() as rogue_clients:
                attackers = [
                    await rogue_clients.enter_async_context(client(r.url)) for r in rogues
                ]  # no credentials: the rogue's own server asks for none
                leaked = Inbox()
                for attacker in attackers:
                    await attacker.subscribe("secret.>", cb=leaked.add)
                    await attacker.flush()

                async def probe() -> None:
                    for attacker in attackers:
                        await attacker.publish("results.x", b"forged")
                        await attacker.flush()
                    await on_n2.publish("secret.x", b"customer data")
                    await on_n2.flush()

                def assert_sealed() -> None:
                    assert not results.on("results.x"), (
                        "a rogue's client published into the cluster"
                    )
                    assert not leaked.got, "the cluster's messages reached a rogue server"
                    for node in (n1, n2, n3):
                        assert peers(node.monitor_url) <= legit, f"{node.name} routes to a rogue"

                async def refused() -> bool:
                    await probe()
                    assert_sealed()
                    return all(r.refused_by_all(route_ports) for r in rogues)

                await until(refused, "every node to refuse both rogue routes")
                # Refused for good; one last probe, waited for far longer than a message takes
                # to cross between real nodes (measured above), then nothing may have come.
                await probe()
                await asyncio.sleep(max(0.5, 20 * crossing))
                assert_sealed()
                for rogue in rogues:
                    assert get_json(f"{rogue.monitor_url}/routez")["num_routes"] == 0
                for node in (n1, n2, n3):
                    assert peers(node.monitor_url) == legit - {node.name}
        finally:
            for rogue in rogues:
                rogue.stop()

        # (3) the same rogue set-up with the stack's route credentials does join: so the
        # checks in (2) would have seen a rogue that got in (as one did before routes had auth)
        route = credentials.route_auth(stack.var_dir)
        insider = Rogue(
            "rogue-with-password",
            [f"nats://{route.user}:{route.password}@{HOST}:{p}" for p in route_ports],
            tmp_path / "insider.log",
        )
        try:
            insider.start()
            async with client(insider.url) as attacker:

                async def joined() -> bool:
                    await attacker.publish("results.x", b"forged")
                    await attacker.flush()
                    await asyncio.sleep(0.01)
                    return bool(results.on("results.x"))

                await until(joined, "the control rogue's message to arrive")
                assert "rogue-with-password" in peers(n1.monitor_url)
        finally:
            insider.stop()


def test_the_route_password_is_kept_private_and_never_shown(stack: Stack) -> None:
    cluster = stack.broker.nats
    assert isinstance(cluster, NatsCluster)
    path = stack.var_dir / credentials.FILENAME
    assert path.stat().st_mode & 0o777 == 0o600
    route = credentials.route_auth(stack.var_dir)
    assert route == cluster.route_auth, "desk up uses the route credentials kept in var/"
    assert route.password not in repr(route)
    for node in cluster.nodes:
        for page in ("varz", "routez"):  # the monitoring port answers anyone on the machine
            with urllib.request.urlopen(f"{node.monitor_url}/{page}", timeout=2) as answer:
                assert route.password not in answer.read().decode()
        assert route.password not in node.log_file.read_text()
        conf = node.store_dir.parent / f"nats-server-{node.port}.conf"
        assert conf.stat().st_mode & 0o777 == 0o600


def test_an_older_credentials_file_gains_route_credentials(tmp_path: Path) -> None:
    path = tmp_path / credentials.FILENAME
    older = credentials.generate()
    del older["nats_route"]
    path.write_text(json.dumps(older))
    path.chmod(0o644)

    route = credentials.route_auth(tmp_path)

    now = json.loads(path.read_text())
    assert now["nats_route"] == {"user": route.user, "password": route.password}
    assert {k: v for k, v in now.items() if k != "nats_route"} == older, "the rest is kept"
    assert path.stat().st_mode & 0o777 == 0o600
    assert credentials.route_auth(tmp_path) == route, "made once, then reused"


def test_a_bad_route_password_is_an_error_that_does_not_show_it(tmp_path: Path) -> None:
    path = credentials.load_or_create(tmp_path)
    creds = json.loads(path.read_text())
    creds["nats_route"]["password"] = 'short"pw'
    path.write_text(json.dumps(creds))
    with pytest.raises(NatsServerError, match="nats_route: route password must be") as caught:
        credentials.route_auth(tmp_path)
    assert 'short"pw' not in str(caught.value)
