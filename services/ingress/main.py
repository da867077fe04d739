"""The ingress service (thin for now): starts, connects, provisions and reports healthy."""

from __future__ import annotations

from shared.service import Service
from shared.settings import IngressSettings


async def run(settings: IngressSettings) -> None:
    async with Service(settings) as svc:
        await svc.until_stopped()
