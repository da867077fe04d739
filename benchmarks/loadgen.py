"""A keep-alive HTTP/1.1 load generator that costs little next to the server it measures.

Requests are encoded before timing; each of `connections` sockets sends one, waits for the
whole response (a minimal parser: status line, `Content-Length`, body) and sends the next, so
the offered load is closed-loop with at most `connections` requests in flight. With `rate` it
is open-loop instead: requests go out at that rate on whichever connection is free, and each
latency counts from when its request was due. Built on asyncio protocols (no stream or
coroutine per request) and uvloop when it is installed.

Run it in its own process so it does not share the GIL with the server, once:

    result = drive_in_subprocess("127.0.0.1", port, requests, connections=64)

or as a process kept for several runs (`LoadGenerator`), or in this process (`await drive(...)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import pickle
import subprocess
import sys
import time
import traceback
from array import array
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any


class LoadError(RuntimeError):
    pass


def encode_post(path: str, body: bytes, headers: dict[str, str], host: str = "127.0.0.1") -> bytes:
    """One HTTP/1.1 keep-alive POST, ready to write to a socket."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class LoadResult:
    requests: int
    connections: int
    completed: int = 0
    errors: int = 0
    elapsed: float = 0.0  # seconds from the first request sent to the last response read
    cpu_seconds: float = 0.0  # the generator's own CPU time over `elapsed`
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds, completed requests
    bodies: list[bytes] | None = None  # response bodies in request order, when asked for

    @classmethod
    def merge(cls, results: list[LoadResult]) -> LoadResult:
        """Several runs as one: counts, times and latencies added up."""
        statuses: Counter[int] = Counter()
        for r in results:
            statuses.update(r.statuses)
        return cls(
            requests=sum(r.requests for r in results),
            connections=max((r.connections for r in results), default=0),
            completed=sum(r.completed for r in results),
            errors=sum(r.errors for r in results),
            elapsed=sum(r.elapsed for r in results),
            cpu_seconds=sum(r.cpu_seconds for r in results),
            statuses=dict(statuses),
            latencies=[x for r in results for x in r.latencies],
            bodies=None
            if any(r.bodies is None for r in results)
            else [b for r in results for b in r.bodies or []],
        )

    @property
    def rps(self) -> float:
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def at(q: float) -> float:
            return percentile(ordered, q)

        return {
            "requests": self.requests,
            "connections": self.connections,
            "completed": self.completed,
            "errors": self.errors,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "elapsed_s": round(self.elapsed, 3),
            "rps": round(self.rps, 1),
            "p50_ms": round(at(50) * 1000, 2),
            "p95_ms": round(at(95) * 1000, 2),
            "p99_ms": round(at(99) * 1000, 2),
            "max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 2),
            "loadgen_cpu_s": round(self.cpu_seconds, 3),
        }


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (0.0 for none)."""
    if not ordered:
        return 0.0
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[min(len(ordered), max(1, rank)) - 1]


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
                self.need = _content_length(head)
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


def _content_length(head: bytes) -> int:
    lowered = head.lower()
    at = lowered.find(b"\r\ncontent-length:")
    if at < 0:
        if b"\r\ntransfer-encoding:" in lowered:
            raise LoadError("chunked responses are not supported by this generator")
        return 0
    start = at + len(b"\r\ncontent-length:")
    end = lowered.find(b"\r\n", start)
    return int(lowered[start : end if end >= 0 else len(lowered)])


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


def _event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()  # type: ignore[no-any-return]


class LoadGenerator:
    """A generator process kept for several runs; the requests are handed over once.

    with LoadGenerator({"main": requests}) as gen:
        first = gen.run(port, "main", 0, 4000)
        second = gen.run(other_port, "main", 0, 4000, keep_bodies=True)
    """

    def __init__(self, requests: dict[str, list[bytes]], host: str = "127.0.0.1") -> None:
        self.host = host
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.loadgen"],
            cwd=Path(__file__).resolve().parents[1],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._send(requests)

    def _send(self, value: object) -> None:
        assert self.proc.stdin is not None
        _write_frame(self.proc.stdin, value)

    def run(
        self,
        port: int,
        name: str,
        start: int = 0,
        stop: int | None = None,
        *,
        connections: int = 64,
        keep_bodies: bool = False,
        rate: float | None = None,
    ) -> LoadResult:
        """Send requests `name[start:stop]` to `port`; wait for the result."""
        self._send(
            {
                "host": self.host,
                "port": port,
                "name": name,
                "start": start,
                "stop": stop,
                "connections": connections,
                "keep_bodies": keep_bodies,
                "rate": rate,
            }
        )
        assert self.proc.stdout is not None
        answer = _read_frame(self.proc.stdout)
        if answer is None:
            raise LoadError(f"load generator exited with {self.proc.wait()}")
        if "error" in answer:
            raise LoadError(f"load generator failed: {answer['error']}")
        return LoadResult(**answer)

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LoadGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def drive_in_subprocess(
    host: str,
    port: int,
    requests: list[bytes],
    *,
    connections: int = 64,
    keep_bodies: bool = False,
) -> LoadResult:
    """`drive` once in a child Python process (its own GIL and core)."""
    with LoadGenerator({"all": requests}, host) as gen:
        return gen.run(port, "all", connections=connections, keep_bodies=keep_bodies)


def _write_frame(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "big") + data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> Any:
    size = stream.read(8)
    if len(size) < 8:
        return None
    return pickle.loads(stream.read(int.from_bytes(size, "big")))


def _serve() -> None:
    """The child: requests first, then one job per frame until stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    requests: dict[str, list[bytes]] = _read_frame(stdin)
    loop = _event_loop()
    try:
        while (job := _read_frame(stdin)) is not None:
            try:
                chosen = requests[job["name"]][job["start"] : job["stop"]]
                result = loop.run_until_complete(
                    drive(
                        job["host"],
                        job["port"],
                        chosen,
                        connections=job["connections"],
                        keep_bodies=job["keep_bodies"],
                        rate=job["rate"],
                    )
                )
                answer: dict[str, Any] = asdict(result)
            except Exception:  # report it to the parent, which raises LoadError
                answer = {"error": traceback.format_exc()[-2000:]}
            _write_frame(stdout, answer)
    finally:
        loop.close()


if __name__ == "__main__":
    _serve()
