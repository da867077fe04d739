"""The router service: rule-based (never model-based) fan-out from EVENTS to WORK."""

from __future__ import annotations

from shared.envelope import decode_json
from shared.service import Service
from shared.settings import RouterSettings

from .handlers import Router
from .rules import Rules


async def run(settings: RouterSettings) -> None:
    rules = Rules.load(settings.rules_file)  # a bad rule stops the start, naming the rule
    async with Service(settings) as svc:
        router = Router(svc.bus, rules, svc.ledger)
        await svc.consume("router", router.handle, decode=decode_json)
        await svc.until_stopped()
