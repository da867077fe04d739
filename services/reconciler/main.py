"""The reconciler service: starts, connects, provisions and reports healthy; its work lands in its issue."""

from __future__ import annotations

from shared.service import Service
from shared.settings import ReconcilerSettings


async def run(settings: ReconcilerSettings) -> None:
    async with Service(settings) as svc:
        await svc.until_stopped()
