"""The inbox_api service: projects items into SQL and serves the review inbox (API, page, CLI)."""

from __future__ import annotations

import functools
import logging

from shared.db import archiving
from shared.http import HTTPError
from shared.service import Service
from shared.settings import InboxApiSettings

from . import api, metrics, outboxes, policy, store, web
from .auth import Reviewers
from .core import Inbox, Perimeter
from .handlers import ItemProjection, ResultProjection
from .notices import Notices
from .standing import publish_standing
from .watch import SECONDS, Watch

log = logging.getLogger(__name__)


async def run(settings: InboxApiSettings) -> None:
    reviewers = Reviewers.load(settings.reviewers, settings.var_dir)
    rules = policy.configured(settings)
    watch = Watch()  # the model's state and the dead letters, for the pages
    svc = Service(settings)
    engine = await svc.database("inbox", store.create_tables)
    inbox = Inbox.configured(settings, engine, reviewers, rules)
    edge = Perimeter.build(inbox, settings)  # sessions, the attempt throttle, body limits
    state = {"inbox": inbox, "watch": watch, "perimeter": edge}
    refused = {HTTPError: web.refused}  # JSON for the API, a page for a browser
    routes, limits = [*api.routes, *web.routes], [*web.middleware(), *api.middleware()]
    svc.serve(routes, state=state, middleware=limits, exception_handlers=refused)
    async with svc:
        if not reviewers:
            log.warning("no reviewer tokens configured: every API call will get 401")
        metrics.known_queues(reviewers.queues)  # the waiting count and the oldest item's age
        read = functools.partial(metrics.refresh, functools.partial(store.waiting, engine))
        svc.every(metrics.REFRESH_SECONDS, read, name="inbox metrics")
        archive = archiving(store.archive, engine, settings.archive_days)
        svc.every(store.ARCHIVE_SECONDS, archive, name="inbox archive")
        targets = store.targets.Targets(settings.sla_targets, settings.sla_near)
        projection = ItemProjection(engine, svc.bus, rules, targets)
        await svc.consume("inbox_api", projection.handlers())
        await svc.consume("inbox_api-results", ResultProjection(engine).on_result)
        outboxes.relay(svc.bus, engine).start(svc, settings.relay_interval)  # decisions, …
        standing = functools.partial(publish_standing, svc.bus, engine)  # the drafter's copy
        svc.every(settings.relay_interval, standing, name="standing instructions")
        scan, digest = settings.sla_scan_seconds, settings.digest_minutes * 60
        mentions = reviewers.mentions()  # who an escalation or digest mentions, per queue
        notices = Notices(engine, svc.bus, mentions, scan_seconds=scan, digest_seconds=digest)
        svc.every(scan, notices.scan, name="notices")
        watch.attach(svc.bus)
        svc.every(SECONDS, watch.refresh, name="model and dead letters")
        await svc.until_stopped()
