"""The one shape every service has.

async def run(settings):
    async with Service(settings) as svc:     # logs, signals, HTTP, NATS, provisioning
        await svc.consume("drafter-decisions", drafter.on_decision, payload=Decision)
        svc.every(5.0, relay.publish_pending, name="result relay", final=True)
        await svc.until_stopped()            # SIGTERM / SIGINT
    # leaving the block drains in uvicorn's order: not ready → consumers and periodic work
    # finish what they are doing (up to DESK_DRAIN_TIMEOUT) → final passes → HTTP stops
    # accepting and finishes requests (the same timeout) → NATS drains and closes. A second
    # signal exits at once.

A consumer is named as the service declares it in `shared.catalog` (its stream, subjects and
durable come from there, its retry and delivery options from the settings); `payload` is the
model its envelopes' data must be (one, or one per subject), checked once by the runtime.

Every service serves `/healthz`, `/readyz` and `/metrics` on its ops server (`svc.ops`,
DESK_OPS_PORT). A service given routes also runs the public server (`svc.http`,
DESK_HTTP_PORT) with those routes only; without routes there is none (`svc.http` is None).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from . import catalog, heap, telemetry
from . import logging as desk_logging
from .bus import Bus
from .consumer import Consumer, ConsumerRuntime, Decoder, Delivery, Handler
from .errors import PermanentError, TransientError
from .http import ExceptionHandler, HttpServer, make_app, make_ops_app
from .periodic import Periodic, Work
from .settings import DeskSettings
from .streams import Topology, missing_streams, provision

log = logging.getLogger(__name__)


class Service:
    def __init__(
        self,
        settings: DeskSettings,
        *,
        routes: Sequence[BaseRoute] = (),
        exception_handlers: Mapping[Any, ExceptionHandler] | None = None,
        state: Mapping[str, Any] | None = None,
        checks: Mapping[str, Callable[[], Awaitable[bool]]] | None = None,
        degraded: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.settings = settings
        self.checks = dict(checks or {})  # more of /readyz: what else the service depends on
        self.name = settings.service
        self.bus: Bus | None = None
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
        # the service's own routes, if it has any: nothing else is on this port
        self.app: Starlette | None = None
        self.http: HttpServer | None = None
        if routes:
            self.app = make_app(routes, exception_handlers)
            self.app.state.service = self  # routes reach the bus as request.app.state.service.bus
            for key, value in (state or {}).items():
                setattr(self.app.state, key, value)
            self.http = HttpServer(
                self.app,
                settings.http_host,
                settings.http_port,
                forwarded_allow_ips=settings.forwarded_allow_ips,
                grace=settings.drain_timeout,
                header_timeout=settings.http_header_timeout,
                idle_timeout=settings.http_idle_timeout,
            )
        self._stop = asyncio.Event()
        self._draining = False
        self._signals = 0
        self._streams_ok_until = 0.0

    async def __aenter__(self) -> Service:
        s = self.settings
        desk_logging.configure(self.name, s.log_level, s.log_format)
        telemetry.configure(self.name, s.otlp_endpoint, s.otlp_header_map())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        await self.ops.start()
        log.info("health and metrics on %s", self.ops.url, extra={"ops_url": self.ops.url})
        if self.http is not None:
            await self.http.start()
            log.info("listening on %s", self.http.url, extra={"url": self.http.url})
        await self._connect()
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
        if self.http is not None:
            await self.http.stop()
        await self.ops.stop()  # /readyz answered 503 throughout the drain
        if self.bus is not None:
            await self.bus.close()
        await asyncio.to_thread(telemetry.shutdown)  # the spans still queued go out
        log.info("stopped")

    def request_stop(self) -> None:
        self._stop.set()

    async def until_stopped(self) -> None:
        await self._stop.wait()

    async def consume(
        self,
        consumer: Consumer | str,
        handler: Handler | Mapping[str, Handler] | None = None,
        *,
        payload: Any = None,
        decode: Decoder | None = None,
    ) -> ConsumerRuntime | None:
        """Start a consumer: one this service declares in `shared.catalog`, by durable name,
        handled by `handler` (one per subject for a consumer of several kinds), or a
        `Consumer` built by hand. None when a stop came before NATS ever answered."""
        if isinstance(consumer, str):
            if handler is None:
                raise TypeError(f"consumer {consumer!r} needs a handler")
            if isinstance(handler, Mapping):
                handler = _by_subject(dict(handler))
            options = self.settings.consumer_options()
            if decode is not None:
                options["decode"] = decode
            declared = catalog.spec(self.name).consumer(consumer)
            consumer = Consumer.of(declared, handler, payload=payload, **options)
        if self.bus is None:
            return None
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
        bus = self.bus
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

    def _declared_durables(self) -> set[str]:
        try:
            return {c.durable for c in catalog.spec(self.name).consumers}
        except KeyError:  # a service the catalog does not know declares no consumers
            return set()

    async def _streams_present(self) -> bool:
        assert self.bus is not None
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
                self.bus = await Bus.connect(
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
        if self.bus is not None and s.provision:
            await provision(self.bus.js, Topology(s.stream_replicas, s.duplicate_window))


def _by_subject(handlers: dict[str, Handler]) -> Handler:
    """One handler per subject of a consumer of several kinds."""

    async def dispatch(delivery: Delivery[Any]) -> None:
        handler = handlers.get(delivery.subject)
        if handler is None:
            raise PermanentError(f"nothing handles {delivery.subject}")
        await handler(delivery)

    return dispatch
