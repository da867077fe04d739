"""Every service's HTTP faces: the ops server (`/healthz`, `/readyz`, `/metrics`) and, for a
service with routes of its own (ingress, inbox_api), the public server carrying only those.

The two listen on separate ports so that whatever exposes the public one (a load balancer, a
Kubernetes Service) never exposes health or metrics: only the kubelet and Prometheus reach the
ops port. uvicorn runs inside the service's event loop on a socket bound up front (so port 0
works and the real port is known), without its own signal handling: the service owns the
signals.

Slow clients cannot hold connections: uvicorn only times out a keep-alive connection that sends
nothing, so its HTTP protocol gets two deadlines here (`deadline_protocol`). A request's line
and headers must be complete within `header_timeout` seconds of the connection opening or of the
previous response, however slowly they trickle in (else 408 and the connection is closed); a
request body may pause for at most `idle_timeout` seconds between two reads (else the connection
is closed and the app sees the client gone). A slow body that keeps coming is fine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from uvicorn.protocols.http.auto import AutoHTTPProtocol

ReadyCheck = Callable[[], Awaitable[dict[str, bool]]]
# what is impaired without making the service unready (the model down: drafts wait)
Degraded = Callable[[], Mapping[str, str]]
ExceptionHandler = Callable[[Request, Exception], Awaitable[Response]]


def health_routes(ready: ReadyCheck, degraded: Degraded | None = None) -> list[BaseRoute]:
    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        checks = await ready()
        ok = all(checks.values())
        body: dict[str, Any] = {"status": "ready" if ok else "not ready", "checks": checks}
        impaired = dict(degraded()) if degraded is not None else {}
        if impaired:
            body["degraded"] = impaired
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]


REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 24\r\nconnection: close\r\n\r\nrequest headers too slow"
)


def deadline_protocol(
    header_timeout: float, idle_timeout: float, base: type[asyncio.Protocol] = AutoHTTPProtocol
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`base`: httptools' or h11's) with a header deadline and an idle
    timeout for request bodies; see the module's docstring."""

    class DeadlineProtocol(base):  # type: ignore[valid-type,misc]
        _header_timer: asyncio.TimerHandle | None = None
        _idle_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_request()

        def connection_lost(self, exc: Exception | None) -> None:
            for timer in (self._header_timer, self._idle_timer):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._reading_body():
                if self._idle_timer is not None:
                    self._idle_timer.cancel()
                self._idle_timer = self.loop.call_later(idle_timeout, self._idle)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self._between_requests():
                self._await_request()

        def _await_request(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _between_requests(self) -> bool:
            """No request whose headers are complete is being answered."""
            return self.cycle is None or self.cycle.response_complete

        def _reading_body(self) -> bool:
            return not self._between_requests() and self.cycle.more_body

        def _headers_late(self) -> None:
            self._header_timer = None
            if self._between_requests() and not self.transport.is_closing():
                self.transport.write(REQUEST_TIMEOUT)
                self.transport.close()

        def _idle(self) -> None:
            self._idle_timer = None
            if not self._reading_body() or self.transport.is_closing():
                return
            if self.flow.read_paused:  # the app is behind, not the client
                self._idle_timer = self.loop.call_later(idle_timeout, self._idle)
                return
            self.transport.close()

    return DeadlineProtocol


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the service handles SIGTERM/SIGINT and tells us when to stop

    def exit(self) -> None:
        self.should_exit = True
        self._exit.set()

    async def main_loop(self) -> None:
        """uvicorn's loop (a tick every 0.1 s), but a stop ends the wait at once."""
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), 0.1)


class HttpServer:
    def __init__(
        self,
        app: Starlette,
        host: str,
        port: int,
        *,
        forwarded_allow_ips: str = "127.0.0.1",
        grace: float = 10.0,
        header_timeout: float = 10.0,
        idle_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.host = host
        # IPPROTO_TCP (not 0) so asyncio sets TCP_NODELAY on accepted connections; without it
        # keep-alive requests stall ~40 ms on delayed ACKs.
        self._socket = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET,
            socket.SOCK_STREAM,
            socket.IPPROTO_TCP,
        )
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.port: int = self._socket.getsockname()[1]
        # X-Forwarded-For/-Proto count only from these proxies (addresses or networks): the
        # client address is what the inbox throttles failed logins by.
        config = uvicorn.Config(
            app,
            http=deadline_protocol(header_timeout, idle_timeout),
            ws="none",  # no route speaks WebSocket: an upgrade is an ordinary request
            log_config=None,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=max(1, round(grace)),  # seconds requests get on stop
            proxy_headers=True,
            forwarded_allow_ips=forwarded_allow_ips,
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]), name="http")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises the start-up error
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, close."""
        if self._task is None:
            return
        self._server.exit()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._socket.close()


class HTTPError(Exception):
    """A refusal, raised where it is found (an unknown token, a body that is not the model, an
    item decided meanwhile) rather than returned up through every caller: the app's handler
    renders it. By default as JSON, `{"error": message, **fields}` with `headers`; an app that
    also serves pages renders it as a page (`title`, `back`) for a browser. `answer`, when set,
    is sent as it is instead (a redirect to the login)."""

    def __init__(
        self,
        status: int,
        message: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        title: str | None = None,
        back: str | None = None,
        answer: Response | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        self.title = title
        self.back = back
        self.answer = answer
        self.fields = fields

    @classmethod
    def sending(cls, answer: Response) -> HTTPError:
        """Stop handling the request and send `answer` (a redirect, a page) as it is."""
        return cls(answer.status_code, answer=answer)


async def http_error(request: Request, exc: Exception) -> Response:
    """An `HTTPError` as its JSON answer (or the answer it carries)."""
    assert isinstance(exc, HTTPError)
    if exc.answer is not None:
        return exc.answer
    return JSONResponse(
        {"error": exc.message, **exc.fields}, status_code=exc.status, headers=exc.headers
    )


async def unexpected_error(request: Request, exc: Exception) -> Response:
    """A bug must not look like a refusal: log it, answer 503 with Retry-After, never a 500."""
    logging.getLogger("desk.http").exception("unexpected error answering %s", request.url.path)
    return JSONResponse(
        {"error": "temporarily unable to answer; retry later"},
        status_code=503,
        headers={"Retry-After": "5"},
    )


def make_app(
    routes: Sequence[BaseRoute],
    exception_handlers: Mapping[Any, ExceptionHandler] | None = None,
) -> Starlette:
    """The public app: the service's own routes and nothing else (no health, no metrics). An
    `HTTPError` is answered as JSON unless `exception_handlers` renders it otherwise."""
    handlers: dict[Any, ExceptionHandler] = {Exception: unexpected_error, HTTPError: http_error}
    handlers.update(exception_handlers or {})
    return Starlette(routes=list(routes), exception_handlers=handlers)


def make_ops_app(ready: ReadyCheck, degraded: Degraded | None = None) -> Starlette:
    """The ops app: `/healthz`, `/readyz` and `/metrics`, for probes and Prometheus only.
    `/readyz` also says what is `degraded` (it stays ready: the service takes work, which
    waits for what is impaired)."""
    return make_app(health_routes(ready, degraded))
