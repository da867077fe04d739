"""The reconciler service (thin for now): starts, connects, provisions and reports healthy."""

from __future__ import annotations

from shared.service import Service
from shared.settings import ReconcilerSettings


async def run(settings: ReconcilerSettings) -> None:
    async with Service(settings) as svc:
        await svc.until_stopped()
