"""The ingress service: the front door. Verifies, records to EVENTS, answers fast."""

from __future__ import annotations

from shared.bus.pipeline import Pipeline
from shared.service import Service
from shared.settings import IngressSettings

from . import metrics, sources
from .app import WebhookConfig, routes, settle_gc
from .replays import Replays


async def run(settings: IngressSettings) -> None:
    configured = sources.load(settings.sources_file, settings.sources, settings.var_dir)
    metrics.initialise(configured)
    config = WebhookConfig(
        configured, settings.max_body, settings.retry_after, settings.body_timeout
    )
    pipeline = Pipeline(settings.publish_timeout, settings.service)
    replays = Replays()
    state = {"webhook_config": config, "pipeline": pipeline, "replays": replays}
    svc = Service(settings)
    svc.serve(routes, state=state)
    await svc.enter(pipeline)
    async with svc:  # webhooks are answered (503) while NATS is not yet connected
        # before the first await: from here on requests are served, and a source whose
        # signature has no timestamp is refused (503) until its replays can be checked
        replays.attach(svc.ledger)
        await pipeline.attach(svc.bus)  # until then, events go out through `Bus.publish`
        settle_gc()
        sources.announce(configured)
        await svc.until_stopped()
