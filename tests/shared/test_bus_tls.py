"""TLS to NATS without a silent downgrade: with a CA set (DESK_NATS_TLS_CA) or a tls:// URL, a
service talks to a server only over TLS, and a server that offers none (a man in the middle on
the broker's port, or a broker left without TLS) never receives the service's password.

nats-py alone would send it: it starts TLS only when the server's greeting says
`tls_required`, whatever the URL's scheme and whether a TLS context is given.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus, NatsAuth, without_credentials
from shared.errors import TransientError
from tests.helpers import eventually
from tests.pki import Pki, make_pki, tls_block

USER = "router"
PASSWORD = "router-password-0123456789abcdef"
AUTHORIZATION = f'authorization {{ users = [ {{ user: "{USER}", password: "{PASSWORD}" }} ] }}\n'


class PlaintextListener:
    """What a man in the middle runs on the broker's port: a NATS server's greeting without TLS,
    recording every byte a client sends after it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connections = 0
        self.received = bytearray()
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        info = {
            "server_id": "NMITM",
            "server_name": "nats",
            "version": "2.15.1",
            "proto": 1,
            "headers": True,
            "auth_required": True,
            "max_payload": 1048576,
            "client_id": self.connections,
        }
        writer.write(f"INFO {json.dumps(info)}\r\n".encode())
        await writer.drain()
        while data := await reader.read(4096):
            self.received += data

    def close(self) -> None:
        for writer in self._writers:
            writer.close()


@asynccontextmanager
async def plaintext_listener(port: int = 0) -> AsyncIterator[PlaintextListener]:
    listener = PlaintextListener(port)
    server = await asyncio.start_server(listener.serve, "127.0.0.1", port)
    listener.port = server.sockets[0].getsockname()[1]
    try:
        yield listener
    finally:
        server.close()
        listener.close()
        await server.wait_closed()


def assert_no_credentials_sent(listener: PlaintextListener) -> None:
    assert listener.connections >= 1, "the client did try this server"
    assert b"CONNECT" not in listener.received, bytes(listener.received)
    assert PASSWORD.encode() not in listener.received


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def tls_server(tmp_path: Path, pki: Pki) -> Iterator[NatsServer]:
    """A nats-server that speaks TLS only (the prod broker), with a certificate from `pki`."""
    server = NatsServer(
        tmp_path / "nats",
        sync_always=False,
        log_file=tmp_path / "nats.log",
        authorization=tls_block(pki) + AUTHORIZATION,
    )
    server.start()
    try:
        yield server
    finally:
        server.kill()


def with_ca(pki: Pki) -> NatsAuth:
    return NatsAuth(user=USER, password=PASSWORD, tls_ca=pki.ca)


def client_connections(server: NatsServer, state: str = "open") -> list[dict[str, object]]:
    url = f"{server.monitor_url}/connz?auth=true&state={state}"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return list(json.load(answer).get("connections") or [])


@pytest.mark.parametrize("reconnect", [False, True], ids=["cli", "service"])
async def test_a_server_without_tls_never_gets_the_password_when_a_ca_is_set(
    pki: Pki, reconnect: bool
) -> None:
    async with plaintext_listener() as mitm:
        with pytest.raises(TransientError) as refused:
            await Bus.connect(mitm.url, service=USER, auth=with_ca(pki), reconnect=reconnect)
    message = str(refused.value)
    assert f"127.0.0.1:{mitm.port} does not offer TLS" in message
    assert "nothing was sent" in message
    assert PASSWORD not in message
    assert_no_credentials_sent(mitm)


async def test_a_tls_url_asks_for_tls_too_and_its_password_is_not_shown() -> None:
    async with plaintext_listener() as mitm:
        url = f"tls://{USER}:{PASSWORD}@127.0.0.1:{mitm.port}"
        with pytest.raises(TransientError) as refused:
            await Bus.connect(url, service=USER, reconnect=False)
    assert "does not offer TLS" in str(refused.value)
    assert PASSWORD not in str(refused.value)
    assert_no_credentials_sent(mitm)


async def test_a_real_nats_server_without_tls_is_refused_before_the_login(
    tmp_path: Path, pki: Pki
) -> None:
    server = NatsServer(
        tmp_path / "nats", sync_always=False, log_file=tmp_path / "nats.log",
        authorization=AUTHORIZATION,
    )  # fmt: skip
    server.start()
    try:
        # the start's own probe of the client port (it read the greeting and left): one
        # connection, which the server lists as closed a moment later
        await eventually(
            lambda: client_connections(server, "closed"), message="the start's probe, closed"
        )
        probes = {c["cid"] for c in client_connections(server, "closed")}

        def ours() -> list[dict[str, object]]:
            return [c for c in client_connections(server, "closed") if c["cid"] not in probes]

        with pytest.raises(TransientError, match="does not offer TLS"):
            await Bus.connect(server.url, service=USER, auth=with_ca(pki), reconnect=False)
        await eventually(ours, message="the server saw the connection")
        (closed,) = ours()
        assert not closed.get("authorized_user"), closed
        assert closed["in_bytes"] == 0, "the client sent it nothing at all"
    finally:
        server.kill()


async def test_with_the_ca_a_service_publishes_over_tls(tls_server: NatsServer, pki: Pki) -> None:
    bus = await Bus.connect(tls_server.url, service=USER, auth=with_ca(pki), reconnect=False)
    try:
        await bus.js.add_stream(name="TLSCHECK", subjects=["tlscheck.>"])
        published = await bus.publish("tlscheck.a", b"over tls", msg_id="tls-1")
        assert (published.stream, published.seq) == ("TLSCHECK", 1)
        (connection,) = client_connections(tls_server)
        assert connection["authorized_user"] == USER
        assert str(connection["tls_version"]).startswith("1."), connection
    finally:
        await bus.close()


async def test_a_server_whose_certificate_another_ca_signed_is_refused(
    tls_server: NatsServer, tmp_path: Path
) -> None:
    elsewhere = make_pki(tmp_path / "other-ca")  # a man in the middle with a certificate of his own
    with pytest.raises(TransientError, match="SSLCertVerificationError"):
        await Bus.connect(tls_server.url, service=USER, auth=with_ca(elsewhere), reconnect=False)
    await eventually(lambda: not client_connections(tls_server), message="the server hung up")
    assert not [c for c in client_connections(tls_server, "closed") if c.get("authorized_user")]


async def test_a_man_in_the_middle_after_a_disconnect_gets_no_password_and_the_broker_is_back(
    tls_server: NatsServer, pki: Pki
) -> None:
    bus = await Bus.connect(tls_server.url, service=USER, auth=with_ca(pki))
    try:
        await bus.js.add_stream(name="TLSCHECK", subjects=["tlscheck.>"])
        await bus.publish("tlscheck.a", b"before", msg_id="tls-1")
        tls_server.kill()
        async with plaintext_listener(tls_server.port) as mitm:
            # the service keeps trying to reconnect, to the impostor now on the broker's port
            await eventually(lambda: mitm.connections >= 2, message="two reconnect attempts")
            assert not bus.connected
        assert_no_credentials_sent(mitm)
        tls_server.start()  # the real broker again, same port and store
        await eventually(lambda: bus.connected, message="the service reconnected over TLS")
        published = await bus.publish("tlscheck.a", b"after", msg_id="tls-2", timeout=10)
        assert published.seq == 2
    finally:
        await bus.close()


def test_error_messages_show_servers_without_their_credentials() -> None:
    assert without_credentials("nats://admin:s3cr/et@127.0.0.1:4222") == "nats://127.0.0.1:4222"
    assert (
        without_credentials("tls://a:b@n1:4222,tls://c:d@n2:4222") == "tls://n1:4222,tls://n2:4222"
    )
    assert without_credentials("tls://nats:4222") == "tls://nats:4222"
    assert without_credentials("user:pw@host:4222") == "host:4222"
