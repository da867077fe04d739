"""Memory a service freed goes back to the operating system: a heap left full of holes by
work that is over is trimmed, and every service does it on a timer (glibc only)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from prometheus_client import REGISTRY

from desk.natsserver import NatsServer
from shared import heap
from shared.service import Service
from shared.settings import DeskSettings

pytestmark = pytest.mark.skipif(not heap.available(), reason="malloc_trim is glibc's only")

MIB = 1024 * 1024


class ProbeSettings(DeskSettings):
    service: ClassVar[str] = "probe"


def released_total() -> float:
    return REGISTRY.get_sample_value("desk_heap_released_bytes_total") or 0.0


def test_memory_freed_below_what_is_still_held_goes_back_when_trimmed() -> None:
    # 32 MiB in small pieces (malloc's heap, not mmap), then one piece held above them all:
    # freed, they stay resident, since malloc gives back on its own only from a heap's top
    pieces = [bytearray(4096) for _ in range(32 * 256)]
    held = bytearray(4096)
    heap.trim()
    before_total = released_total()
    del pieces
    freed = heap.resident()
    released = heap.trim()
    assert released >= 16 * MIB, f"released {released / MIB:.1f} MiB"
    assert heap.resident() <= freed - 16 * MIB
    assert released_total() == before_total + released
    assert held  # still in use: the holes were below it


async def test_every_service_trims_its_heap_on_a_timer_unless_told_not_to(tmp_path: Path) -> None:
    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    try:
        for interval, trims in ((0.5, True), (0.0, False)):
            settings = ProbeSettings(nats_url=nats.url, heap_trim_interval=interval, _env_file=None)
            async with Service(settings) as service:
                names = [work.name for work in service.periodic]
                assert ("heap trim" in names) is trims
                async with httpx.AsyncClient(base_url=service.ops.url) as client:
                    metrics = (await client.get("/metrics")).text
                assert "desk_heap_released_bytes_total" in metrics
                service.request_stop()
    finally:
        nats.kill()


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="heap_trim_interval"):
        ProbeSettings(heap_trim_interval=-1, _env_file=None)
