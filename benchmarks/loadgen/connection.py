"""Driving the requests in this process: asyncio protocols on keep-alive connections (no
stream or coroutine per request), closed-loop or open-loop at a given rate."""

from __future__ import annotations

import asyncio
import functools
import time
from array import array
from collections import Counter, deque

from .result import LoadResult
from .wire import content_length


class _Run:
    """What the connections share: the requests, the next one to send, the outcomes."""

    def __init__(self, requests: list[bytes], keep_bodies: bool, open_loop: bool) -> None:
        self.requests = requests
        self.next = 0
        self.latency = array("d", bytes(8 * len(requests)))
        self.status = array("H", bytes(2 * len(requests)))
        self.bodies: list[bytes] | None = [b""] * len(requests) if keep_bodies else None
        self.open_loop = open_loop
        # open loop: connections waiting for a request, longest idle first (so each is used
        # often enough that the server's keep-alive timeout never closes it)
        self.idle: deque[_Connection] = deque()
        self.in_flight = 0
        self.waiter: asyncio.Future[None] | None = None  # woken when a connection is idle

    def take(self) -> int:
        index = self.next
        if index >= len(self.requests):
            return -1
        self.next = index + 1
        return index

    def answered(self, conn: _Connection) -> None:
        self.in_flight -= 1
        if not self.open_loop:
            conn.send_next()
            return
        self.idle.append(conn)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class _Connection(asyncio.Protocol):
    def __init__(self, run: _Run, done: asyncio.Future[None]) -> None:
        self.run = run
        self.done = done
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.index = -1
        self.started = 0.0
        self.status = 0
        self.need = -1  # body bytes still expected; -1 while reading the head

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def send(self, index: int, started: float) -> None:
        """Send request `index`; its latency counts from `started`."""
        assert self.transport is not None
        self.index = index
        self.started = started
        self.run.in_flight += 1
        self.transport.write(self.run.requests[index])

    def send_next(self) -> None:
        """Closed loop: the next request at once, or close when there is none."""
        assert self.transport is not None
        index = self.run.take()
        if index < 0:
            self.transport.close()
            return
        self.send(index, time.perf_counter())

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        while True:
            if self.need < 0:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buffer[:end]
                self.status = int(head[9:12])
                self.need = content_length(head)
                buffer = buffer[end + 4 :]
            if len(buffer) < self.need:
                break
            finished = time.perf_counter()
            run, index = self.run, self.index
            run.latency[index] = finished - self.started
            run.status[index] = self.status
            if run.bodies is not None:
                run.bodies[index] = buffer[: self.need]
            buffer = buffer[self.need :]
            self.need = -1
            self.index = -1
            run.answered(self)
        self.buffer = buffer

    def connection_lost(self, exc: Exception | None) -> None:
        # A request still unanswered here stays without a status: counted as an error.
        if self in self.run.idle:
            self.run.idle.remove(self)
        if self.index >= 0:
            self.index = -1
            self.run.in_flight -= 1
            if self.run.waiter is not None and not self.run.waiter.done():
                self.run.waiter.set_result(None)
        if not self.done.done():
            self.done.set_result(None)


async def _offer(run: _Run, rate: float, started: float) -> None:
    """Open loop: request i is due at `started + i / rate`, whatever the answers do.

    A request goes out on the next idle connection; its latency counts from when it was due,
    so time spent waiting for a free connection is the server's (no coordinated omission).
    """
    loop = asyncio.get_running_loop()
    for index in range(len(run.requests)):
        due = started + index / rate
        delay = due - time.perf_counter()
        if delay > 0.001:
            await asyncio.sleep(delay)
        while not run.idle:
            run.waiter = loop.create_future()
            await run.waiter
            if not run.idle and run.in_flight == 0:
                return  # every connection is gone
        run.idle.popleft().send(index, due)
    while run.in_flight:
        run.waiter = loop.create_future()
        await run.waiter


async def drive(
    host: str,
    port: int,
    requests: list[bytes],
    *,
    connections: int = 64,
    keep_bodies: bool = False,
    rate: float | None = None,
) -> LoadResult:
    """Send every request once over `connections` keep-alive connections: each connection
    sends its next request as soon as it has an answer (closed loop), or, with `rate`, at
    `rate` requests per second however fast the answers come (open loop)."""
    loop = asyncio.get_running_loop()
    run = _Run(requests, keep_bodies, open_loop=rate is not None)
    conns: list[tuple[_Connection, asyncio.Future[None]]] = []
    for _ in range(min(connections, len(requests)) or 1):
        done: asyncio.Future[None] = loop.create_future()
        _, proto = await loop.create_connection(
            functools.partial(_Connection, run, done), host, port
        )
        conns.append((proto, done))
    cpu = time.process_time()
    started = time.perf_counter()
    if rate is None:
        for proto, _ in conns:
            proto.send_next()
    else:
        run.idle.extend(proto for proto, _ in conns)
        await _offer(run, rate, started)
        for proto, _ in conns:
            if proto.transport is not None:
                proto.transport.close()
    await asyncio.gather(*(done for _, done in conns))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    answered = [i for i in range(len(requests)) if run.status[i]]
    return LoadResult(
        requests=len(requests),
        connections=len(conns),
        completed=len(answered),
        errors=len(requests) - len(answered),  # unanswered: the server closed on them
        elapsed=elapsed,
        cpu_seconds=cpu,
        statuses=dict(Counter(run.status[i] for i in answered)),
        latencies=[run.latency[i] for i in answered],
        bodies=run.bodies,
    )
