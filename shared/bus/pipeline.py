"""Publishes many messages at once, each waiting for its own PubAck: ingress's publish path
(every webhook recorded on EVENTS).

`Bus.publish` (nats-py's `js.publish`) opens a request per call: a new reply inbox, a timer,
a task switch through the request machinery, a dataclass per PubAck, and it encodes the
headers again character by character. That cost about as much CPU per event as the HTTP
server spends on a whole request. The pipeline keeps one reply
subscription for all publishes, one future per publish keyed by a counter, and reads the PubAck
itself. Every publish still carries its `Nats-Msg-Id` and still waits for its own PubAck: only
the bookkeeping is shared.

Two more things are cut from the client's path, both measured under `benchmarks.ingress`:

- A PubAck is read where the client's parser hands over the message, not through the
  subscription's queue and task: the client otherwise builds a `Msg`, queues it, and wakes the
  subscription's task, which wakes the request: two turns of an event loop that is busy with
  HTTP requests, each delaying every answer.
- Publishes go to the socket as soon as a few are waiting (`WRITE_THROUGH`), not only when
  the client's flusher next runs: that runs after every request made ready in the same turn of
  the loop, so the broker got publishes in bursts and sat idle between them (with
  `sync_interval: always` it fsyncs each in turn, so its idle time is lost throughput).

Anything but a clean PubAck in time (no stream listening yet, an error from the server, a
publish refused by the client while disconnected, no answer within half the publish timeout)
goes to `Bus.publish`, which publishes again with the same id until the publish timeout and
maps the error (`TransientError`: answer 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable, Mapping

import nats.errors as nats_errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import Header
from nats.protocol.command import hpub_cmd

from .. import headers as h
from .. import metrics
from ..errors import TransientError
from . import Bus, Published

_NO_RESPONDERS = "503"  # the status the server sends when nothing listens on the subject
# How long a publish sent again waits for its first attempt's overdue PubAck, when the broker
# calls the second a duplicate (only then: see `_own_duplicate`).
LATE_ACK_WAIT = 1.0
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_HEADER_NAME = re.compile(_TOKEN)  # nats-py's own check
# Header lines that need nothing done: a valid name, a value without CR/LF or outer spaces.
_CLEAN_BLOCK = re.compile(rf"(?:{_TOKEN}: (?:[^\s](?:[^\r\n]*[^\s])?)?\r\n)*")
# The client internals the raw path uses (nats-py 2.x); without them, the public path.
_RAW = all(hasattr(Client, a) for a in ("_send_command", "_flush_pending", "_process_msg"))
WRITE_THROUGH = 16  # publishes waiting in the client's buffer that go out at once


class Pipeline:
    """The publish path of ingress; lives around the `Service` so it outlasts its drain.

    async with Pipeline(timeout, "ingress") as pipeline, Service(...) as svc:
        await pipeline.attach(svc.bus)
    """

    def __init__(self, timeout: float, service: str = "ingress") -> None:
        self.timeout = timeout
        self.bus: Bus | None = None
        self._prefix = ""
        self._cut = 0
        self._next = 0
        # token → (future, deadline); in publish order, so also in deadline order. The future's
        # result is the PubAck, or None for any other answer.
        self._waiting: dict[str, tuple[asyncio.Future[Published | None], float]] = {}
        # token → the PubAck that comes after its deadline, while that publish is sent again
        # by `Bus.publish`: see `_own_duplicate`
        self._late: dict[str, asyncio.Future[Published | None]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._sub: Subscription | None = None
        self._stored = metrics.PUBLISHES.labels(service, "stored")
        self._duplicate = metrics.PUBLISHES.labels(service, "duplicate")
        self._failed = metrics.PUBLISHES.labels(service, "failed")

    async def __aenter__(self) -> Pipeline:
        self._sweeper = asyncio.create_task(self._sweep(), name="pipeline-deadlines")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    async def attach(self, bus: Bus) -> None:
        """Start publishing through `bus`: one reply subscription for every PubAck."""
        assert self._sweeper is not None, "use the pipeline as a context manager"
        # Under the connection's own inbox prefix, so per-service permissions still apply.
        self._prefix = bus.nc.new_inbox() + "."
        self._cut = len(self._prefix)
        self._sub = await bus.nc.subscribe(self._prefix + "*", cb=self._on_reply)
        if _RAW:
            _read_directly(bus.nc, self._sub, self._read)
        self.bus = bus

    @property
    def attached(self) -> bool:
        return self.bus is not None

    async def _on_reply(self, msg: Msg) -> None:
        """A reply through the subscription: one with headers (no responders, an error)."""
        self._answer(msg.subject[self._cut :], _pub_ack(msg))

    def _read(self, subject: bytes, data: bytes) -> None:
        """A reply without headers, as the client's parser reads it: a PubAck, or an error."""
        self._answer(subject[self._cut :].decode(), _pub_ack_json(data))

    def _answer(self, token: str, ack: Published | None) -> None:
        waiting = self._waiting.pop(token, None)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(ack)
        elif token in self._late and not self._late[token].done():
            self._late[token].set_result(ack)

    async def _sweep(self) -> None:
        """One timer for every publish: fail those whose PubAck is overdue."""
        loop = asyncio.get_running_loop()
        tick = min(0.1, self.timeout / 10)
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            while self._waiting:
                token, (future, deadline) = next(iter(self._waiting.items()))
                if deadline > now:
                    break
                del self._waiting[token]
                if not future.done():
                    future.set_exception(TimeoutError())

    async def record(
        self, subject: str, data: bytes, *, msg_id: str, headers: Mapping[str, str]
    ) -> Published:
        """Publish once with `msg_id` and return its PubAck (or fall back to `Bus.publish`)."""
        assert self.bus is not None, "attach a bus first"
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._next += 1
        token = str(self._next)
        future: asyncio.Future[Published | None] = loop.create_future()
        # Half the time for this attempt: a PubAck lost with a dying connection leaves
        # `Bus.publish` the other half to publish again (same id) once it is back.
        self._waiting[token] = (future, started + self.timeout / 2)
        try:
            await self._send(subject, self._prefix + token, data, msg_id, headers)
            ack = await future
        except (TimeoutError, nats_errors.Error):  # overdue; or closed, draining, buffer full
            self._waiting.pop(token, None)
            late = self._late[token] = loop.create_future()
            try:
                again = await self._fallback(subject, data, msg_id, headers, started)
                if not again.duplicate:
                    return again
                # The first copy may have been this one's own, stored but slow to be answered:
                # its PubAck, sent by the server before this one, is then on its way.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(late), LATE_ACK_WAIT)
                return _own_duplicate(again, late.result() if late.done() else None)
            finally:
                self._late.pop(token, None)
        if ack is None:
            return await self._fallback(subject, data, msg_id, headers, started)
        (self._duplicate if ack.duplicate else self._stored).inc()
        return ack

    async def _send(
        self, subject: str, reply: str, data: bytes, msg_id: str, headers: Mapping[str, str]
    ) -> None:
        assert self.bus is not None
        nc = self.bus.nc
        if not _RAW or not nc.is_connected or nc.is_draining_pubs or len(data) > nc.max_payload:
            # the client's own path: buffering while reconnecting, and its errors
            await nc.publish(subject, data, reply=reply, headers={**headers, h.MSG_ID: msg_id})
            return
        # What `nc.publish` does, with the header block encoded in one go (nats-py runs a
        # dict-table `str.translate` over every header value: most of its cost per publish).
        await nc._send_command(hpub_cmd(subject, reply, header_block(headers, msg_id), data))
        nc.stats["out_msgs"] += 1
        nc.stats["out_bytes"] += len(data)
        if len(nc._pending) >= WRITE_THROUGH and nc._transport is not None:
            # Out now; the flusher still drains the socket's buffer (the client's back-pressure).
            nc._transport.writelines(nc._pending)
            nc._pending = []
            nc._pending_data_size = 0
        if nc._flush_queue is not None and nc._flush_queue.empty():
            await nc._flush_pending()

    async def _fallback(
        self,
        subject: str,
        data: bytes,
        msg_id: str,
        headers: Mapping[str, str],
        started: float,
    ) -> Published:
        assert self.bus is not None
        remaining = self.timeout - (asyncio.get_running_loop().time() - started)
        if remaining <= 0:
            self._failed.inc()
            raise TransientError(f"publish to {subject} not acknowledged in time")
        return await self.bus.publish(
            subject, data, msg_id=msg_id, headers=headers, timeout=remaining
        )


def header_block(headers: Mapping[str, str], msg_id: str) -> bytes:
    """`NATS/1.0` headers as nats-py writes them (values stripped, CR/LF made spaces)."""
    lines = [f"{k}: {v}\r\n" for k, v in headers.items() if k != h.MSG_ID]
    lines.append(f"{h.MSG_ID}: {msg_id}\r\n")  # the dedup id is the one passed in
    block = "".join(lines)
    # One check for all; line by line only if needed. The pattern alone is not enough: a value
    # holding "\r\n" reads as lines of its own, a name holding ": " as a name and a value. So
    # each line must hold one of each (a value with ": " in it takes the line-by-line path).
    if not (
        _CLEAN_BLOCK.fullmatch(block)
        and block.count("\r\n") == len(lines)
        and block.count(": ") == len(lines)
    ):
        lines = [_header_line(k, v) for k, v in headers.items() if k != h.MSG_ID]
        lines.append(_header_line(h.MSG_ID, msg_id))
        block = "".join(lines)
    return f"NATS/1.0\r\n{block}\r\n".encode()


def _header_line(name: str, value: str) -> str:
    name = name.strip()
    if not name:
        return ""  # nats-py skips empty names
    if not _HEADER_NAME.fullmatch(name):
        raise nats_errors.BadHeaderError(name)
    value = value.strip()
    if "\r" in value or "\n" in value:
        value = value.replace("\r", " ").replace("\n", " ")
    return f"{name}: {value}\r\n"


def _own_duplicate(again: Published, late: Published | None) -> Published:
    """The answer to a publish sent again after its first PubAck was overdue. The broker calls
    it a duplicate when the first copy was stored, which may have been this request's own
    (slow, not lost): then that first PubAck comes too (the server answers one connection's
    publishes in order), as stored, at the same sequence, and the event is new to the caller."""
    if again.duplicate and late is not None and not late.duplicate and late.seq == again.seq:
        return Published(stream=again.stream, seq=again.seq, duplicate=False)
    return again


def _read_directly(nc: Client, sub: Subscription, read: Callable[[bytes, bytes], None]) -> None:
    """Hand `read` the replies without headers that come to `sub`, as the client's parser reads
    them (the client's own message handling for everything else, `sub`'s replies with headers
    among them: those go through its queue to its callback)."""
    sid = sub._id
    process_msg = nc._process_msg
    stats = nc.stats

    async def _process_msg(
        msg_sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes
    ) -> None:
        if msg_sid != sid or headers:
            await process_msg(msg_sid, subject, reply, data, headers)
            return
        stats["in_msgs"] += 1
        stats["in_bytes"] += len(data)
        read(subject, data)

    nc._process_msg = _process_msg  # type: ignore[method-assign,assignment]


def _pub_ack(reply: Msg) -> Published | None:
    """The PubAck in a reply, or None for anything else (no responders, an API error)."""
    if reply.headers and reply.headers.get(Header.STATUS) == _NO_RESPONDERS:
        return None
    return _pub_ack_json(reply.data)


def _pub_ack_json(data: bytes) -> Published | None:
    """The PubAck in a reply's body, or None for anything else. Never raises: it runs inside
    the client's read loop, where an exception would drop the connection."""
    try:
        answer = json.loads(data)
        if not isinstance(answer, dict) or "error" in answer:
            return None
        return Published(
            stream=str(answer["stream"]),
            seq=int(answer["seq"]),
            duplicate=bool(answer.get("duplicate")),
        )
    except (ValueError, KeyError, TypeError):
        return None
