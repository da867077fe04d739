"""The inbox_api service (thin for now): starts, connects, provisions and reports healthy."""

from __future__ import annotations

from shared.service import Service
from shared.settings import InboxApiSettings


async def run(settings: InboxApiSettings) -> None:
    async with Service(settings) as svc:
        await svc.until_stopped()
