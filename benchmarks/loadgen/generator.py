"""The generator process: kept for several runs (`LoadGenerator`) or used once
(`drive_in_subprocess`); the parent hands it the requests, then jobs, in pickled frames, and
the child (`serve`) drives each on its own event loop (uvloop when installed)."""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import subprocess
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from .connection import drive
from .result import LoadResult
from .wire import LoadError


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
            cwd=Path(__file__).resolve().parents[2],
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


def serve() -> None:
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
