"""Every service's HTTP faces: the ops server (`/healthz`, `/readyz`, `/metrics`) and, for a
service with routes of its own (ingress, inbox_api), the public server carrying only those.

The two listen on separate ports so that whatever exposes the public one (a load balancer, a
Kubernetes Service) never exposes health or metrics: only the kubelet and Prometheus reach the
ops port. uvicorn runs inside the service's event loop on a socket bound up front (so port 0
works and the real port is known), without its own signal handling: the service owns the
signals.
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

ReadyCheck = Callable[[], Awaitable[dict[str, bool]]]
ExceptionHandler = Callable[[Request, Exception], Awaitable[Response]]


def health_routes(ready: ReadyCheck) -> list[BaseRoute]:
    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        checks = await ready()
        ok = all(checks.values())
        return JSONResponse(
            {"status": "ready" if ok else "not ready", "checks": checks},
            status_code=200 if ok else 503,
        )

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the service handles SIGTERM/SIGINT and tells us when to stop


class HttpServer:
    def __init__(
        self,
        app: Starlette,
        host: str,
        port: int,
        *,
        forwarded_allow_ips: str = "127.0.0.1",
        grace: float = 10.0,
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
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._socket.close()


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
    """The public app: the service's own routes and nothing else (no health, no metrics)."""
    handlers: dict[Any, ExceptionHandler] = {Exception: unexpected_error}
    handlers.update(exception_handlers or {})
    return Starlette(routes=list(routes), exception_handlers=handlers)


def make_ops_app(ready: ReadyCheck) -> Starlette:
    """The ops app: `/healthz`, `/readyz` and `/metrics`, for probes and Prometheus only."""
    return make_app(health_routes(ready))
