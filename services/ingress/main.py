"""The ingress service: the front door. Verifies, records to EVENTS, answers fast."""

from __future__ import annotations

import logging

from shared.service import Service
from shared.settings import IngressSettings

from . import sources
from .app import Intake, routes

log = logging.getLogger(__name__)


async def run(settings: IngressSettings) -> None:
    configured = sources.load(settings.sources_file, settings.sources, settings.var_dir)
    intake = Intake(configured, settings.max_body, settings.retry_after)
    async with Service(
        settings,
        routes=routes,
        state={"intake": intake},
    ) as svc:
        if configured:
            log.info("accepting webhooks for %s", ", ".join(sorted(configured)))
        else:
            log.warning("no webhook sources configured: every request will get 404")
        await svc.until_stopped()
