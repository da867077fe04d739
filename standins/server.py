"""A Starlette app served by uvicorn on 127.0.0.1, on a free port, from a background thread.

The thread runs its own event loop, so the server answers code in this process (async tests on
their own loop, threads) and in other processes alike. It never touches signal handlers (the
process that starts it owns them), and `sleep` lets a scripted hang end early when the server
stops.

    server = ThreadedServer(app, name="FakeLLM").start()
    ... f"http://127.0.0.1:{server.port}" ...
    server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # never touch signal handlers: the test process owns them


class ThreadedServer:
    def __init__(self, app: ASGIApp, *, name: str) -> None:
        self.app = app
        self.name = name
        self.port = 0
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        if not self.port:
            raise RuntimeError(f"{self.name} is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0, *, port: int = 0) -> ThreadedServer:
        """Serve on `port` (0: a free one; the port it served on before: back after `stop`)."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted connections only when
        # the listening socket says TCP; with proto 0 every keep-alive request stalls ~40 ms
        # (Nagle + delayed ACK).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=30,
        )
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._run, name=f"{self.name}:{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"{self.name} failed to start") from self._error
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start within {timeout}s")
            time.sleep(0.01)
        return self

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
            assert self._server is not None and self._socket is not None
            await self._server.serve(sockets=[self._socket])

        try:
            asyncio.run(serve())
        except BaseException as exc:  # reported by start()
            self._error = exc

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (requests still in `sleep` are woken and answered first). Idempotent."""
        if self._thread is None:
            return
        if self._server is not None:
            self._server.should_exit = True
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._thread = None
        self._server = None

    async def sleep(self, seconds: float) -> None:
        """Sleep in a request handler, ending early once the server is stopping."""
        stopping = self._stopping
        if stopping is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), seconds)
