"""The connection to NATS JetStream: connect with callbacks, and publish with a dedup id.

Every publish carries `Nats-Msg-Id`; the result says whether the broker saw a duplicate.
A publish that cannot be acknowledged in time raises `TransientError` (the caller retries with
the same id, or answers 503); one the broker refuses for good raises `PermanentError`.

With TLS asked for (a CA or a client certificate, or a `tls://` URL) a server that does not
offer TLS is refused before anything is sent to it: nats-py would otherwise send CONNECT, the
password in it, in plaintext to whoever answers on the port (see `TlsOnlyClient`).

`publish_envelope` publishes a CloudEvent under its own id. The bus is the one place that knows
nats-py's internals (its major version is pinned): `pipeline.py` is ingress's pipelined publish
path; `tests/test_layout.py` keeps them here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from urllib.parse import urlsplit

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from .. import headers as h
from .. import metrics, telemetry, trace
from ..envelope import Envelope
from ..errors import PermanentError, TransientError

log = logging.getLogger(__name__)


# Server error codes worth retrying with the same msg id.
class BrokerCode(IntEnum):
    """The JetStream API error codes the code branches on, by nats-server's names for them."""

    CONSUMER_NOT_FOUND = 10014  # JSConsumerNotFoundErr
    NO_MESSAGE_FOUND = 10037  # JSNoMessageFoundErr: an empty stream, a deleted or future seq
    SEQUENCE_NOT_FOUND = 10043  # JSSequenceNotFoundErrF: delete of a sequence already gone
    STREAM_NAME_IN_USE = 10058  # JSStreamNameExistErr: the name, with another configuration
    STREAM_NOT_FOUND = 10059  # JSStreamNotFoundErr
    STORE_FAILED = 10077  # JSStreamStoreFailedF: a limit refused it (maximum messages/bytes)
    DUPLICATE_IN_PROCESS = 10158  # JSStreamDuplicateMessageConflict: that id has no quorum yet


_RETRYABLE_API_CODES = {BrokerCode.DUPLICATE_IN_PROCESS}


@dataclass(frozen=True)
class NatsAuth:
    """How a service proves who it is to NATS (any one of these), and optional TLS."""

    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: Path | None = None  # a .creds file (JWT + nkey seed)
    nkey_seed: Path | None = None  # a file holding an nkey seed
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def tls(self) -> bool:
        """TLS is asked for: a server without it is refused (`TlsOnlyClient`)."""
        return bool(self.tls_ca or self.tls_cert)

    def options(self, service: str) -> dict[str, object]:
        options: dict[str, object] = {}
        if self.user:
            options["user"] = self.user
            options["password"] = self.password or ""
            # A per-service reply prefix, so permissions can confine each user to its own.
            options["inbox_prefix"] = inbox_prefix(service)
        if self.token:
            options["token"] = self.token
        if self.creds:
            options["user_credentials"] = str(self.creds)
        if self.nkey_seed:
            options["nkeys_seed"] = str(self.nkey_seed)
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.tls_ca) if self.tls_ca else None)
            if self.tls_cert:
                context.load_cert_chain(
                    str(self.tls_cert), str(self.tls_key) if self.tls_key else None
                )
            options["tls"] = context
        return options


def inbox_prefix(service: str) -> str:
    return f"_INBOX_{service}"


class PlaintextServerError(nats_errors.Error):
    """The server did not offer TLS, though the client asked for it; nothing was sent to it."""


class TlsOnlyClient(Client):
    """A nats-py client that never sends CONNECT (credentials included) outside TLS.

    nats-py starts TLS only when the server's INFO says `tls_required`, whatever the URL's
    scheme and whether or not a TLS context is given: a plaintext server, or a man in the middle
    who leaves `tls_required` out, receives CONNECT with the password in the clear. This client
    checks, just before CONNECT (after the INFO and any TLS handshake), that the connection is
    encrypted, and otherwise refuses it, on the first connect and on every reconnect alike.
    """

    refused: str | None = None  # why the last server was refused (no credentials in it)

    def _connect_command(self) -> bytes:
        if not _encrypted(self._transport):
            server = self._current_server
            where = _address(server.uri.hostname, server.uri.port) if server else "the server"
            self.refused = (
                f"{where} does not offer TLS, which this client requires (DESK_NATS_TLS_CA, "
                "DESK_NATS_TLS_CERT or a tls:// URL); nothing was sent to it"
            )
            if self._transport:
                self._transport.close()  # hang up on it (the reconnect loop would not)
            raise PlaintextServerError(self.refused)
        return super()._connect_command()


def _encrypted(transport: object) -> bool:
    """Whether nats-py's TCP transport runs over TLS (anything else counts as not)."""
    writer = getattr(transport, "_io_writer", None)
    get_extra_info = getattr(writer, "get_extra_info", None)
    return get_extra_info is not None and get_extra_info("ssl_object") is not None


def without_credentials(url: str) -> str:
    """`url` (servers separated by commas) without the user and password any of them carries:
    what an error message may show."""
    shown = []
    for server in url.split(","):
        scheme, sep, rest = server.strip().rpartition("://")
        shown.append(scheme + sep + rest.rpartition("@")[2])
    return ",".join(shown)


def _address(host: str | None, port: int | None) -> str:
    """host:port of a server, never the user and password a URL may carry."""
    return f"{host or '?'}:{port or 4222}"


@dataclass(frozen=True)
class Published:
    stream: str
    seq: int
    duplicate: bool


class Bus:
    """One NATS connection and its JetStream context, owned by one service process."""

    def __init__(self, nc: Client, service: str, publish_timeout: float = 5.0) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=publish_timeout)
        self.service = service
        self.publish_timeout = publish_timeout
        self.closing = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        service: str,
        auth: NatsAuth | None = None,
        connect_timeout: float = 2.0,
        publish_timeout: float = 5.0,
        reconnect: bool = True,
    ) -> Bus:
        """Connect once; raise `TransientError` if the broker does not answer."""
        gauge = metrics.NATS_CONNECTED.labels(service)
        for result in metrics.PUBLISH_RESULTS:  # every series exists at 0 (see shared.metrics)
            metrics.PUBLISHES.labels(service, result)

        async def on_error(exc: Exception) -> None:
            # Permission violations only ever show up here (the request itself times out).
            log.warning("nats: %s", exc)

        async def on_disconnected() -> None:
            gauge.set(0)
            if not (holder and holder[0].closing):
                log.warning("nats: disconnected")

        async def on_reconnected() -> None:
            gauge.set(1)
            log.info("nats: reconnected")

        async def on_closed() -> None:
            gauge.set(0)

        holder: list[Bus] = []  # the callbacks need the Bus that does not exist yet
        auth = auth or NatsAuth()
        options: dict[str, object] = auth.options(service)
        servers = [s.strip() for s in url.split(",") if s.strip()]
        tls_only = auth.tls or any(urlsplit(s).scheme == "tls" for s in servers)
        nc = TlsOnlyClient() if tls_only else Client()
        try:
            await nc.connect(
                servers=servers,
                name=f"desk-{service}",
                # seconds: nats-py annotates them as int and takes floats
                connect_timeout=connect_timeout,  # type: ignore[arg-type]
                allow_reconnect=reconnect,
                # nats-py applies this to the first connect too, where -1 would retry forever:
                # fail fast now, then reconnect forever once connected (below).
                max_reconnect_attempts=1,
                reconnect_time_wait=0.5,  # type: ignore[arg-type]
                error_cb=on_error,
                disconnected_cb=on_disconnected,
                reconnected_cb=on_reconnected,
                closed_cb=on_closed,
                **options,  # type: ignore[arg-type]
            )
        except (OSError, TimeoutError, nats_errors.Error) as exc:
            refused = nc.refused if isinstance(nc, TlsOnlyClient) else None
            # nats-py leaves a refused attempt's socket open: a service retrying for as long
            # as the broker refuses it would run out of file descriptors
            # (bounded: after a refused TLS handshake, nats-py's close never returns from
            # waiting for the socket it has just closed)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 0.5)
            raise TransientError(
                f"cannot connect to NATS: {refused or exc.__class__.__name__}"
            ) from exc
        if reconnect:
            nc.options["max_reconnect_attempts"] = -1
        gauge.set(1)
        bus = cls(nc, service, publish_timeout)
        holder.append(bus)
        return bus

    @property
    def connected(self) -> bool:
        return self.nc.is_connected

    async def publish_envelope(
        self,
        subject: str,
        envelope: Envelope,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Published:
        """Publish a CloudEvent: its id is the dedup id, and the headers say what it is and
        what it belongs to (its correlation id, else its own id), plus `headers`."""
        return await self.publish(
            subject,
            envelope.to_bytes(),
            msg_id=envelope.id,
            headers={
                h.CONTENT_TYPE: h.CLOUDEVENTS_JSON,
                h.CORRELATION_ID: envelope.correlationid or envelope.id,
                **(headers or {}),
            },
            timeout=timeout,
        )

    async def publish(
        self,
        subject: str,
        data: bytes,
        *,
        msg_id: str,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Published:
        """Publish and wait for the PubAck, retrying with the same id until `timeout` passes.
        The current trace (`shared.trace`) goes with it, as the span of this publish, unless
        `headers` name one (an event ingress stored, a dead letter keeping its original's)."""
        if not msg_id:
            raise ValueError("every publish needs a dedup id")
        parent = None if trace.of(headers) else trace.current.get()
        if parent is None:
            return await self._publish(subject, data, msg_id, headers, timeout)
        with telemetry.span(
            f"publish {subject}",
            "producer",
            parent=parent,
            attributes={
                "messaging.system": "nats",
                "messaging.operation.type": "send",
                "messaging.destination.name": subject,
                "messaging.message.id": msg_id,
                "desk.service": self.service,
            },
        ) as sending:
            headers = {**(headers or {}), trace.HEADER: sending.trace.header}
            published = await self._publish(subject, data, msg_id, headers, timeout)
            sending.attributes.update(
                {"desk.stream_seq": published.seq, "desk.duplicate": published.duplicate}
            )
            return published

    async def _publish(
        self,
        subject: str,
        data: bytes,
        msg_id: str,
        headers: Mapping[str, str] | None,
        timeout: float | None,
    ) -> Published:
        deadline = time.monotonic() + (timeout or self.publish_timeout)
        counter = metrics.PUBLISHES
        delay = 0.05
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                counter.labels(self.service, "failed").inc()
                raise TransientError(f"publish to {subject} not acknowledged in time")
            # A new dict every time: nats-py writes into the headers it is given.
            hdrs = {k: v for k, v in (headers or {}).items() if k != h.MSG_ID}
            hdrs[h.MSG_ID] = msg_id
            try:
                ack = await self.js.publish(subject, data, headers=hdrs, timeout=remaining)
            except (
                TimeoutError,
                nats_errors.TimeoutError,
                js_errors.NoStreamResponseError,
                nats_errors.OutboundBufferLimitError,
            ):
                pass  # not acknowledged (yet): try again with the same id
            except js_errors.ServiceUnavailableError as exc:
                if exc.err_code == BrokerCode.STORE_FAILED:  # limits: a retry won't fix it soon
                    counter.labels(self.service, "failed").inc()
                    raise TransientError(f"stream full: {exc.description}") from exc
            except nats_errors.ConnectionClosedError as exc:
                counter.labels(self.service, "failed").inc()
                raise TransientError("NATS connection closed") from exc
            except js_errors.APIError as exc:
                if exc.err_code not in _RETRYABLE_API_CODES:
                    counter.labels(self.service, "failed").inc()
                    raise PermanentError(
                        f"publish to {subject} refused: {exc.err_code} {exc.description}"
                    ) from exc
            else:
                duplicate = bool(ack.duplicate)
                counter.labels(self.service, "duplicate" if duplicate else "stored").inc()
                return Published(stream=ack.stream, seq=ack.seq, duplicate=duplicate)
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)

    async def close(self, *, drain: bool = True) -> None:
        """Drain subscriptions and flush pending publishes, then close. `drain=False` flushes
        what was published (acks included) and closes at once, whatever the subscriptions
        still hold: for a command stopped by Ctrl-C, where a pull subscription's drain waits
        for messages nothing will fetch any more (nats-py: up to `drain_timeout`)."""
        if self.nc.is_closed:
            return
        self.closing = True
        if not drain:
            with contextlib.suppress(TimeoutError, nats_errors.Error, OSError):
                await self.nc.flush(timeout=2)
            await self.nc.close()
            return
        try:
            await self.nc.drain()
        except (TimeoutError, nats_errors.Error, OSError) as exc:
            log.warning("nats: drain failed (%s); closing", exc.__class__.__name__)
            await self.nc.close()
