"""The route TLS of deploy/nats/values.yaml on real nats-servers, as the chart renders it:
`config.cluster.tls` mounts the Secret (tls.crt, tls.key, ca.crt) at its `dir` and writes
cert_file and key_file; its `merge` adds the CA. Two servers with the desk CA's certificate form
a cluster over the route URLs of the values; a third with the route password but a certificate
another CA signed is refused (the servers' logs say so: a positive event, not a timeout).

There is no helm here: the test maps the chart's mount directory onto a directory holding the
same three files, made by openssl, for 127.0.0.1 and `localhost`, which stands in for
nats-<i>.nats-headless.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from desk.natsserver import NatsServer
from desk.process import free_port
from tests.pki import Pki, make_pki

VALUES = Path(__file__).resolve().parents[2] / "deploy" / "nats" / "values.yaml"
ROUTE_PASSWORD = "r0123456789abcdef0123456789abcdef"
DEADLINE = 15.0


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return json.load(answer)


def wait_for(check: Any, message: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {message}")


def peers(server: NatsServer) -> set[str]:
    return {r.get("remote_name", "?") for r in get_json(f"{server.monitor_url}/routez")["routes"]}


def cluster_block(values: dict[str, Any], pki: Pki, port: int, route_ports: list[int]) -> str:
    """The `cluster { }` the chart writes from `values`, with `pki`'s directory as the mount."""
    cluster = values["config"]["cluster"]
    tls = cluster["tls"]
    mounted = tls.get("dir", "/etc/nats-certs/cluster")
    directory = pki.ca.parent

    def local(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(mounted + "/"):
            return str(directory / value.removeprefix(mounted + "/"))
        return value

    lines = [
        f'  cert_file: "{directory / tls.get("cert", "tls.crt")}"',
        f'  key_file: "{directory / tls.get("key", "tls.key")}"',
        *(f"  {key}: {json.dumps(local(value))}" for key, value in tls["merge"].items()),
    ]
    env = values["container"]["env"]
    routes = []
    for i, route_port in enumerate(route_ports):
        url = env[f"NATS_ROUTE_URL_{i}"].replace("$(NATS_ROUTE_PASSWORD)", ROUTE_PASSWORD)
        routes.append(url.replace(f"nats-{i}.nats-headless:6222", f"localhost:{route_port}"))
    auth = cluster["merge"]["authorization"]
    return (
        "cluster {\n"
        '  name: "nats"\n'
        f'  listen: "127.0.0.1:{port}"\n'
        f'  authorization {{ user: "{auth["user"]}", password: "{ROUTE_PASSWORD}" }}\n'
        f"  routes: {json.dumps(routes)}\n"
        "  tls {\n" + "\n".join(f"  {line}" for line in lines) + "\n  }\n"
        "}\n"
    )


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[NatsServer]]:
    values = yaml.safe_load(VALUES.read_text())
    desk = make_pki(tmp_path / "desk-ca")
    intruder = make_pki(tmp_path / "other-ca")
    route_ports = [free_port() for _ in range(3)]
    nodes = [
        NatsServer(
            tmp_path / f"n{i}",
            sync_always=False,
            log_file=tmp_path / f"n{i}.log",
            name=f"nats-{i}",
            cluster=cluster_block(values, pki, route_ports[i], route_ports),
        )
        for i, pki in enumerate([desk, desk, intruder])
    ]
    try:
        for node in nodes:
            node.launch()
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def test_routes_use_tls_and_admit_only_peers_the_desk_ca_signed(
    servers: list[NatsServer],
) -> None:
    first, second, intruder = servers
    wait_for(lambda: peers(first) == {"nats-1"} and peers(second) == {"nats-0"}, "the routes")
    # The intruder knows the route password: only its certificate gives it away (so the
    # routes do speak TLS, and check the peer's certificate in both directions).
    wait_for(
        lambda: (
            "TLS route handshake error" in first.log_file.read_text()
            and "TLS route handshake error" in second.log_file.read_text()
        ),
        "the servers refusing the intruder's certificate",
    )
    assert peers(first) == {"nats-1"} and peers(second) == {"nats-0"}
    assert peers(intruder) == set()
