"""The router service: rule-based (never model-based) fan-out from EVENTS to WORK."""

from __future__ import annotations

from shared.envelope import decode_json
from shared.ledger import Ledger
from shared.service import Service
from shared.settings import RouterSettings

from .handlers import Router
from .rules import Rules


async def run(settings: RouterSettings) -> None:
    rules = Rules.load(settings.rules_file)  # a bad rule stops the start, naming the rule
    async with Service(settings) as svc:
        if svc.bus is not None:
            router = Router(
                svc.bus,
                rules,
                await Ledger.open(svc.bus.js, svc.name, keep=settings.archive_seconds),
            )
            await svc.consume("router", router.handle, decode=decode_json)
        await svc.until_stopped()
