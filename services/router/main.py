"""The router service (thin for now): starts, connects, provisions and reports healthy."""

from __future__ import annotations

from shared.service import Service
from shared.settings import RouterSettings


async def run(settings: RouterSettings) -> None:
    async with Service(settings) as svc:
        await svc.until_stopped()
