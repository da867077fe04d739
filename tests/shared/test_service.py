"""The service shape: health answers at once, readiness follows NATS and the streams, and
both are on the ops port, never on the public one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from desk.natsserver import NatsServer
from desk.process import free_port
from shared.service import Service
from shared.settings import DeskSettings
from tests.helpers import eventually


class ProbeSettings(DeskSettings):
    service: ClassVar[str] = "probe"


async def test_ready_only_once_nats_answers_and_the_streams_exist(tmp_path: Path) -> None:
    port = free_port()
    settings = ProbeSettings(nats_url=f"nats://127.0.0.1:{port}", http_port=0, _env_file=None)
    service = Service(settings)
    task = asyncio.create_task(service.__aenter__())
    nats = NatsServer(tmp_path / "nats", port=port, sync_always=False)
    try:
        await eventually(lambda: service.ops._server.started, message="the ops server")
        assert service.http is None, "no routes: no public server"
        async with httpx.AsyncClient(base_url=service.ops.url) as client:
            assert (await client.get("/healthz")).status_code == 200
            not_ready = await client.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json()["checks"]["nats"] is False

            nats.start()
            await task  # connected and provisioned
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text

            metrics = await client.get("/metrics")
            assert 'desk_nats_connected{service="probe"} 1.0' in metrics.text
    finally:
        service.request_stop()
        if not task.done():
            task.cancel()
        await service.__aexit__(None, None, None)
        nats.kill()


async def test_not_ready_until_every_declared_consumer_is_bound(tmp_path: Path) -> None:
    """Readiness is the promise that the service is taking its work: a router whose consumer
    is not bound yet (created or found) is not ready, however well NATS answers."""
    from shared.settings import RouterSettings

    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    settings = RouterSettings(nats_url=nats.url, http_port=0, _env_file=None)

    async def handler(delivery: object) -> None:
        pass

    try:
        async with Service(settings) as service:
            async with httpx.AsyncClient(base_url=service.ops.url) as client:
                before = await client.get("/readyz")
                assert before.status_code == 503, before.text
                checks = before.json()["checks"]
                assert checks["consuming"] is False and checks["streams"] is True
                await service.consume("router", handler)
                after = await client.get("/readyz")
                assert after.status_code == 200, after.text
            service.request_stop()
    finally:
        nats.kill()


async def test_the_public_server_carries_only_the_services_routes(tmp_path: Path) -> None:
    """Health and metrics on the public port would hand them to whoever reaches the service
    (the internet, for ingress): there they are 404, and the routes are not on the ops port."""

    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    settings = ProbeSettings(nats_url=nats.url, _env_file=None)
    routes = [Route("/hello", hello), Route("/broken", broken)]
    try:
        service = Service(settings)
        service.serve(routes)
        async with service:
            assert service.http is not None and service.http.port != service.ops.port
            async with (
                httpx.AsyncClient(base_url=service.http.url) as public,
                httpx.AsyncClient(base_url=service.ops.url) as ops,
            ):
                assert (await public.get("/hello")).text == "hello"
                for path in ("/healthz", "/readyz", "/metrics"):
                    assert (await public.get(path)).status_code == 404, path
                    assert (await ops.get(path)).status_code == 200, path
                assert "desk_nats_connected" in (await ops.get("/metrics")).text
                assert (await ops.get("/hello")).status_code == 404
                failed = await public.get("/broken")  # the unexpected-error answer still holds
                assert failed.status_code == 503 and failed.headers["Retry-After"] == "5"
            service.request_stop()
    finally:
        nats.kill()


async def test_a_dependency_the_service_declares_decides_readiness_too(tmp_path: Path) -> None:
    """A store the service cannot reach (the drafter's database) makes it not ready, whether
    the check says so or cannot answer at all; health stays fine."""
    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    database = {"up": True}

    async def reachable() -> bool:
        if not database["up"]:
            raise OSError("connection refused")
        return True

    settings = ProbeSettings(nats_url=nats.url, http_port=0, _env_file=None)
    try:
        service = Service(settings)
        service.check("database", reachable)
        async with service:
            async with httpx.AsyncClient(base_url=service.ops.url) as client:
                ready = await client.get("/readyz")
                assert ready.status_code == 200 and ready.json()["checks"]["database"] is True
                database["up"] = False
                down = await client.get("/readyz")
                assert down.status_code == 503 and down.json()["checks"]["database"] is False
                assert (await client.get("/healthz")).status_code == 200
    finally:
        nats.kill()


async def test_a_named_consumer_and_periodic_work_are_drained_together_on_stop(
    tmp_path: Path,
) -> None:
    """The consumer comes from the catalog by its durable name; on stop, the handler under way
    and the pass under way both finish, then the final pass runs, then NATS closes."""
    from shared import subjects
    from shared.envelope import Envelope
    from shared.settings import RouterSettings

    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    order: list[str] = []
    handling = asyncio.Event()

    async def handler(delivery: object) -> None:
        handling.set()
        await asyncio.sleep(0.5)
        order.append("handler finished")

    async def relay() -> None:
        order.append("relay pass")

    settings = RouterSettings(
        nats_url=nats.url, http_port=0, drain_timeout=10, ack_wait=5, _env_file=None
    )
    try:
        async with Service(settings) as service:
            runtime = await service.consume("router", handler)
            assert runtime is not None and runtime.consumer.stream == subjects.EVENTS
            relaying = service.every(60, relay, name="relay", final=True)
            assert service.bus is not None
            data = Envelope(source="helpdesk", type="ticket.created", data={}).to_bytes()
            await service.bus.publish(
                subjects.event("helpdesk", "ticket.created"), data, msg_id="e1"
            )
            await asyncio.wait_for(handling.wait(), 10)
            assert relaying in service.periodic
        assert order == ["relay pass", "handler finished", "relay pass"]
    finally:
        nats.kill()


async def test_the_service_holds_its_resources_and_closes_them_after_nats(
    tmp_path: Path,
) -> None:
    """Inside the block the bus is connected and the service's own ledger open; what the
    service entered or asked to close is closed when it stops, after NATS, newest first; its
    database answers /readyz and is disposed of."""
    import contextlib

    from shared.settings import RouterSettings

    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    closed: list[str] = []

    @contextlib.asynccontextmanager
    async def resource(name: str):  # type: ignore[no-untyped-def]
        yield name
        closed.append(f"{name} exited, NATS {'open' if bus.connected else 'closed'}")

    async def close_later() -> None:
        closed.append("coroutine closed")

    def created(engine: object) -> None:
        closed.append("tables made")

    settings = RouterSettings(nats_url=nats.url, http_port=0, var_dir=tmp_path, _env_file=None)
    service = Service(settings)
    engine = await service.database("probe", created)
    pool = engine.pool
    try:
        assert await service.enter(resource("storage")) == "storage"
        service.on_close(close_later)
        async with service as svc:
            bus = svc.bus
            assert bus.connected
            await svc.ledger.claim("probe:1")
            assert await svc.ledger.seen("probe:1")
            service.on_close(lambda: closed.append("function closed"))
            async with httpx.AsyncClient(base_url=svc.ops.url) as client:
                checks = (await client.get("/readyz")).json()["checks"]
                assert checks["database"] is True
            svc.request_stop()
        assert closed == [
            "tables made",
            "function closed",
            "coroutine closed",
            "storage exited, NATS closed",
        ]
        assert engine.pool is not pool, "the engine's pool is disposed of"
    finally:
        nats.kill()


async def test_a_stop_before_nats_ever_answers_ends_the_start_and_closes_what_was_opened(
    tmp_path: Path,
) -> None:
    """A SIGTERM while the broker has never answered: entering ends with `Stopped` (the CLI
    exits 0) rather than running the block without a bus; the ports and resources are
    released."""
    from shared.service import Stopped

    settings = ProbeSettings(
        nats_url=f"nats://127.0.0.1:{free_port()}", http_port=0, _env_file=None
    )
    service = Service(settings)
    closed: list[str] = []
    service.on_close(lambda: closed.append("closed"))
    entering = asyncio.create_task(service.__aenter__())
    await eventually(lambda: service.ops._server.started, message="the ops server")
    service.request_stop()
    with pytest.raises(Stopped):
        await asyncio.wait_for(entering, 30)
    assert closed == ["closed"]
    with pytest.raises(httpx.ConnectError):  # the ops port is let go
        httpx.get(service.ops.url + "/healthz")
    with pytest.raises(RuntimeError, match="before the service started"):
        service.bus  # noqa: B018
