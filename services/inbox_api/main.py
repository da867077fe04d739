"""The inbox_api service: projects items into SQL and serves the review inbox (API, page, CLI)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import secrets

from sqlalchemy.engine import Engine

from shared import subjects
from shared.db import database_url, make_engine, reachable
from shared.inbox import InboxItem, Overdue, Withdrawal
from shared.service import Service
from shared.settings import InboxApiSettings

from . import metrics, store, web
from .api import Inbox
from .api import routes as api_routes
from .auth import Reviewers
from .handlers import ItemProjection, ResultProjection, relay
from .notices import Notices
from .watch import SECONDS, Watch

log = logging.getLogger(__name__)


async def run(settings: InboxApiSettings) -> None:
    engine = make_engine(database_url(settings.database_url, settings.var_dir, "inbox"))
    await asyncio.to_thread(store.create_tables, engine)
    reviewers = Reviewers.load(settings.reviewers, settings.var_dir)
    policy = store.autosend.Policy(
        settings.autosend_evidence,
        settings.autosend_unedited,
        settings.autosend_audit,
        settings.autosend_demote,
        per_ticket_day=settings.autosend_per_ticket_day,
        audit_key=_audit_key(settings),
    )
    inbox = Inbox(
        engine,
        reviewers,
        settings.helpdesk_ticket_url,
        policy,
        frozenset(settings.admins),
        settings.claim_seconds,
    )
    watch = Watch()  # the model's state and the dead letters, for the pages
    try:
        service = Service(
            settings,
            routes=[*api_routes, *web.routes],
            state={"inbox": inbox, "watch": watch},
            checks={"database": functools.partial(reachable, engine)},
        )
        assert service.app is not None  # it has routes: the public app
        for layer in web.middleware():  # before the server starts
            service.app.add_middleware(layer.cls, *layer.args, **layer.kwargs)
        async with service as svc:
            # the waiting count and the oldest item's age, read off the event loop
            metrics.known_queues(reviewers.queues)
            read = functools.partial(store.waiting, engine)
            svc.every(metrics.REFRESH_SECONDS, lambda: metrics.refresh(read), name="inbox metrics")
            svc.every(
                store.ARCHIVE_SECONDS,
                functools.partial(_archive, engine, settings.archive_days),
                name="inbox archive",
            )
            if not reviewers:
                log.warning("no reviewer tokens configured: every API call will get 401")
            if svc.bus is not None:
                targets = store.targets.Targets(settings.sla_targets, settings.sla_near)
                projection = ItemProjection(engine, svc.bus, policy, targets)
                await svc.consume(
                    "inbox_api",
                    {
                        subjects.INBOX_ITEM: projection.on_item,
                        subjects.INBOX_WITHDRAWN: projection.on_withdrawn,
                        subjects.INBOX_OVERDUE: projection.on_overdue,
                    },
                    payload={
                        subjects.INBOX_ITEM: InboxItem,
                        subjects.INBOX_WITHDRAWN: Withdrawal,
                        subjects.INBOX_OVERDUE: Overdue,
                    },
                )
                await svc.consume("inbox_api-results", ResultProjection(engine).on_result)
                bus = svc.bus
                svc.every(
                    settings.relay_interval, lambda: relay(bus, engine), name="decision relay"
                )
                notices = Notices(
                    engine,
                    bus,
                    reviewers.mentions(),
                    scan_seconds=settings.sla_scan_seconds,
                    digest_seconds=settings.digest_minutes * 60,
                )
                svc.every(settings.sla_scan_seconds, notices.scan, name="notices")
                watch.attach(bus)
                svc.every(SECONDS, watch.refresh, name="model and dead letters")
            await svc.until_stopped()
    finally:
        engine.dispose()


def _audit_key(settings: InboxApiSettings) -> bytes:
    """DESK_AUDIT_KEY (required with configured reviewers; `desk up` passes the one it made);
    without one, a key of this run's own: the audit sample stays unpredictable."""
    if settings.audit_key is not None:
        return settings.audit_key.get_secret_value().encode()
    log.warning("no DESK_AUDIT_KEY: the audit sample is keyed with a key of this run's own")
    return secrets.token_bytes(32)


async def _archive(engine: Engine, days: float) -> None:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    await asyncio.to_thread(store.archive, engine, before)
