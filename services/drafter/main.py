"""The drafter service: starts, connects, provisions and reports healthy; its work lands in its issue."""

from __future__ import annotations

from shared.service import Service
from shared.settings import DrafterSettings


async def run(settings: DrafterSettings) -> None:
    async with Service(settings) as svc:
        await svc.until_stopped()
