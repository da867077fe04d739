"""The one shape every service has.

async def run(settings):
    svc = Service(settings)
    engine = await svc.database("sender", store.create_tables)  # + /readyz check, disposal
    channel = make_channel(settings)
    svc.on_close(channel.close)              # closed when the service stops
    async with svc:                          # logs, signals, HTTP, NATS, provisioning
        sender = Sender(engine, svc.bus, svc.ledger, channel)  # connected, opened once
        await svc.consume("sender", sender.on_decision)
        svc.every(5.0, relay.publish_pending, name="result relay", final=True)
        await svc.until_stopped()            # SIGTERM / SIGINT
    # leaving the block drains in uvicorn's order: not ready → consumers and periodic work
    # finish what they are doing (up to DESK_DRAIN_TIMEOUT) → final passes → HTTP stops
    # accepting and finishes requests (the same timeout) → NATS drains and closes → what the
    # service entered or asked to close, in reverse order. A second signal exits at once.

Inside the block `svc.bus` is connected: entering waits for NATS (retrying), and a stop that
comes before NATS ever answers ends the start with `Stopped` (the CLI exits 0). `svc.ledger` is
the service's own processed-ledger, opened once, for a service the catalog grants one.

A consumer is named as the service declares it in `shared.catalog`: its stream, subjects,
durable and payload model (the one its envelopes' data must be, checked once by the runtime)
come from there, its retry and delivery options from the settings.

Every service serves `/healthz`, `/readyz` and `/metrics` on its ops server (`svc.ops`,
DESK_OPS_PORT). A service given routes (`svc.serve`, before the block) also runs the public
server (`svc.http`, DESK_HTTP_PORT) with those routes only; without routes there is none.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from . import catalog, db, heap, telemetry
from . import logging as desk_logging
from .bus import Bus
from .consumer import Consumer, ConsumerRuntime, Decoder, Delivery, Handler
from .errors import PermanentError, TransientError
from .http import ExceptionHandler, HttpServer, make_app, make_ops_app
from .ledger import Ledger
from .periodic import Periodic, Work
from .settings import DeskSettings
from .streams import Topology, missing_streams, provision

log = logging.getLogger(__name__)

R = TypeVar("R")


class Stopped(Exception):
    """A stop came before NATS ever answered: the service ends without having started."""


class Service:
    def __init__(
        self,
        settings: DeskSettings,
        *,
        degraded: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.settings = settings
        # more of /readyz: what else the service depends on (`check`, `database`)
        self.checks: dict[str, Callable[[], Awaitable[bool]]] = {}
        self.name = settings.service
        self.connection: Bus | None = None  # None until NATS first answers (routes may ask)
        self._ledger: Ledger | None = None
        self._resources = contextlib.AsyncExitStack()  # what `enter` and `on_close` hold
        self.runtimes: list[ConsumerRuntime] = []
        # health and metrics: probes and Prometheus only, never behind the public port
        self.ops = HttpServer(
            make_ops_app(self.ready_checks, degraded),
            settings.http_host,
            settings.ops_port,
            grace=settings.drain_timeout,
            header_timeout=settings.http_header_timeout,
            idle_timeout=settings.http_idle_timeout,
        )
        self.periodic: list[Periodic] = []
        # the service's own routes, if it has any (`serve`): nothing else is on this port
        self.app: Starlette | None = None
        self.http: HttpServer | None = None
        self._stop = asyncio.Event()
        self._draining = False
        self._signals = 0
        self._streams_ok_until = 0.0

    def serve(
        self,
        routes: Sequence[BaseRoute],
        *,
        state: Mapping[str, Any] | None = None,
        middleware: Sequence[Middleware] = (),
        exception_handlers: Mapping[Any, ExceptionHandler] | None = None,
    ) -> Starlette:
        """Serve `routes` (and nothing else) on the public port, from entering the block on;
        `state` is what they find in `request.app.state`."""
        if self.http is not None:
            raise RuntimeError(f"{self.name}: the public routes are given once")
        s = self.settings
        self.app = make_app(routes, exception_handlers)
        for layer in middleware:  # before the server starts
            self.app.add_middleware(layer.cls, *layer.args, **layer.kwargs)
        # routes reach the bus as request.app.state.service.connection (None until NATS answers)
        self.app.state.service = self
        for key, value in (state or {}).items():
            setattr(self.app.state, key, value)
        self.http = HttpServer(
            self.app,
            s.http_host,
            s.http_port,
            forwarded_allow_ips=s.forwarded_allow_ips,
            grace=s.drain_timeout,
            header_timeout=s.http_header_timeout,
            idle_timeout=s.http_idle_timeout,
        )
        return self.app

    @property
    def bus(self) -> Bus:
        """The connected bus: always there inside the block."""
        if self.connection is None:
            raise RuntimeError(f"{self.name}: the bus is used before the service started")
        return self.connection

    @property
    def ledger(self) -> Ledger:
        """The service's own processed-ledger, opened once on entering."""
        if self._ledger is None:
            raise RuntimeError(f"{self.name}: the catalog grants no ledger, or not started")
        return self._ledger

    async def enter(self, context: contextlib.AbstractAsyncContextManager[R]) -> R:
        """Enter an async context for the service's lifetime; it exits when the service stops
        (after NATS closes, in reverse order of entering)."""
        return await self._resources.enter_async_context(context)

    def on_close(self, close: Callable[[], Any]) -> None:
        """Call `close` (a function or a coroutine function) when the service stops."""
        if inspect.iscoroutinefunction(close):
            self._resources.push_async_callback(close)
        else:
            self._resources.callback(close)

    def check(self, name: str, ready: Callable[[], Awaitable[bool]]) -> None:
        """One more condition of /readyz: a store or endpoint the service depends on."""
        self.checks[name] = ready

    async def database(self, name: str, *setup: Callable[[Engine], None]) -> Engine:
        """The service's database (DESK_DATABASE_URL, or `var/<name>.sqlite`): `setup` run on
        it (its tables), reachable for /readyz, disposed of when the service stops."""
        s = self.settings
        engine = db.make_engine(db.database_url(s.database_url, s.var_dir, name))
        self.on_close(engine.dispose)
        for step in setup:
            await asyncio.to_thread(step, engine)
        self.check("database", functools.partial(db.reachable, engine))
        return engine

    async def __aenter__(self) -> Service:
        s = self.settings
        desk_logging.configure(self.name, s.log_level, s.log_format)
        telemetry.configure(self.name, s.otlp_endpoint, s.otlp_header_map())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self.ops.start()
            log.info("health and metrics on %s", self.ops.url, extra={"ops_url": self.ops.url})
            if self.http is not None:
                await self.http.start()
                log.info("listening on %s", self.http.url, extra={"url": self.http.url})
            await self._connect()
            if self.connection is None:
                raise Stopped(f"{self.name}: stopped before NATS answered")
            if catalog.LEDGER in self._spec().kv_writes:
                self._ledger = await Ledger.open(
                    self.connection.js, self.name, keep=s.archive_seconds
                )
        except BaseException:
            await self._close()
            raise
        if s.heap_trim_interval > 0 and heap.available():
            self.every(s.heap_trim_interval, heap.trim_pass, name="heap trim")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._draining = True
        log.info("draining")
        timeout = self.settings.drain_timeout
        started = time.monotonic()
        await asyncio.gather(
            *(rt.stop(timeout) for rt in self.runtimes),
            *(work.stop(timeout) for work in self.periodic),
        )
        left = max(1.0, timeout - (time.monotonic() - started))
        await asyncio.gather(*(work.finish(left) for work in self.periodic))
        await self._close()
        log.info("stopped")

    async def _close(self) -> None:
        if self.http is not None:
            await self.http.stop()
        await self.ops.stop()  # /readyz answered 503 throughout the drain
        if self.connection is not None:
            await self.connection.close()
        await self._resources.aclose()
        await asyncio.to_thread(telemetry.shutdown)  # the spans still queued go out

    def request_stop(self) -> None:
        self._stop.set()

    async def until_stopped(self) -> None:
        await self._stop.wait()

    async def consume(
        self,
        consumer: Consumer | str,
        handler: Handler | Mapping[str, Handler] | None = None,
        *,
        decode: Decoder | None = None,
    ) -> ConsumerRuntime:
        """Start a consumer: one this service declares in `shared.catalog`, by durable name,
        handled by `handler` (one per subject for a consumer of several kinds), or a
        `Consumer` built by hand."""
        if isinstance(consumer, str):
            if handler is None:
                raise TypeError(f"consumer {consumer!r} needs a handler")
            if isinstance(handler, Mapping):
                handler = _by_subject(dict(handler))
            options = self.settings.consumer_options()
            if decode is not None:
                options["decode"] = decode
            consumer = Consumer.of(self._spec().consumer(consumer), handler, **options)
        # A service with a NATS identity of its own may not create consumers (the admin's
        # `desk provision` does): it binds to the one provisioned. Anonymous development
        # brokers and self-provisioning services create their own.
        s = self.settings
        identity = s.nats_user or s.nats_token or s.nats_creds or s.nats_nkey_seed
        runtime = ConsumerRuntime(self.bus, self.name, consumer, create=s.provision or not identity)
        await runtime.start()
        self.runtimes.append(runtime)
        return runtime

    def every(self, interval: float, work: Work, *, name: str, final: bool = False) -> Periodic:
        """Run `work` now and then every `interval` seconds until the service stops; drained
        with the consumers, and run once more after them if `final`."""
        periodic = Periodic(name, interval, work, final=final).start()
        self.periodic.append(periodic)
        return periodic

    async def ready_checks(self) -> dict[str, bool]:
        bus = self.connection
        connected = bus is not None and bus.connected
        found = {
            "nats": connected,
            "streams": connected and await self._streams_present(),
            # every consumer the catalog declares for this service is bound: before that, a
            # "ready" service would not yet be taking its work
            "consuming": self._declared_durables() <= {rt.consumer.name for rt in self.runtimes},
            "accepting": not self._draining,
        }
        for name, check in self.checks.items():
            try:
                found[name] = await check()
            except Exception:  # a check that cannot answer says "not ready", never a 500
                found[name] = False
        return found

    def _spec(self) -> catalog.ServiceSpec:
        try:
            return catalog.spec(self.name)
        except KeyError:  # a service the catalog does not know: no consumers, no ledger
            return catalog.ServiceSpec(self.name, None)

    def _declared_durables(self) -> set[str]:
        return {c.durable for c in self._spec().consumers}

    async def _streams_present(self) -> bool:
        if time.monotonic() < self._streams_ok_until:
            return True
        try:
            missing = await missing_streams(self.bus.js)
        except Exception:  # a broker hiccup means "not ready", never a 500
            return False
        if missing:
            return False
        self._streams_ok_until = time.monotonic() + 5.0
        return True

    def _on_signal(self, sig: int) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second %s: exiting now", signal.Signals(sig).name)
            os._exit(128 + sig)
        log.info("%s received", signal.Signals(sig).name)
        self._stop.set()

    async def _connect(self) -> None:
        """Connect to NATS, retrying until it answers or a stop is requested."""
        s = self.settings
        delay = 0.5
        while not self._stop.is_set():
            try:
                self.connection = await Bus.connect(
                    s.nats_url,
                    service=self.name,
                    auth=s.nats_auth(),
                    connect_timeout=s.nats_connect_timeout,
                    publish_timeout=s.publish_timeout,
                )
                break
            except TransientError as exc:
                log.warning("%s; retrying in %.1fs", exc, delay)
                try:
                    await asyncio.wait_for(self._stop.wait(), delay)
                except TimeoutError:
                    pass
                delay = min(delay * 2, 5.0)
        if self.connection is not None and s.provision:
            await provision(self.connection.js, Topology(s.stream_replicas, s.duplicate_window))


def _by_subject(handlers: dict[str, Handler]) -> Handler:
    """One handler per subject of a consumer of several kinds."""

    async def dispatch(delivery: Delivery[Any]) -> None:
        handler = handlers.get(delivery.subject)
        if handler is None:
            raise PermanentError(f"nothing handles {delivery.subject}")
        await handler(delivery)

    return dispatch
