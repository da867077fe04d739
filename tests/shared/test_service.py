"""The service shape: health answers at once, readiness follows NATS and the streams."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

import httpx

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
        await eventually(lambda: service.http._server.started, message="the HTTP server")
        async with httpx.AsyncClient(base_url=service.http.url) as client:
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
