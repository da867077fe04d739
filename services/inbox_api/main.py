"""The inbox_api service: projects items into SQL and serves the review inbox (API, page, CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

from shared import catalog
from shared.consumer import Consumer
from shared.db import database_url, make_engine, reachable
from shared.service import Service
from shared.settings import InboxApiSettings

from . import metrics, store, web
from .api import Inbox
from .api import routes as api_routes
from .auth import Reviewers
from .handlers import Projection, Results, relay

log = logging.getLogger(__name__)


async def run(settings: InboxApiSettings) -> None:
    engine = make_engine(database_url(settings.database_url, settings.var_dir, "inbox"))
    await asyncio.to_thread(store.create_tables, engine)
    reviewers = Reviewers.load(settings.reviewers, settings.var_dir)
    inbox = Inbox(engine, reviewers, settings.helpdesk_ticket_url)
    stop_metrics = asyncio.Event()  # waiting count and oldest age, refreshed off the event loop
    metering = asyncio.create_task(
        metrics.refresh(functools.partial(store.waiting, engine), stop_metrics)
    )
    try:
        service = Service(
            settings,
            routes=[*api_routes, *web.routes],
            state={"inbox": inbox},
            checks={"database": functools.partial(reachable, engine)},
        )
        assert service.app is not None  # it has routes: the public app
        for layer in web.middleware():  # before the server starts
            service.app.add_middleware(layer.cls, *layer.args, **layer.kwargs)
        async with service as svc:
            if not reviewers:
                log.warning("no reviewer tokens configured: every API call will get 401")
            if svc.bus is not None:
                projection = Projection(engine)
                await svc.consume(
                    Consumer.of(
                        catalog.INBOX_API.consumer("inbox_api"),
                        projection.on_message,
                        **settings.consumer_options(),
                    )
                )
                await svc.consume(
                    Consumer.of(
                        catalog.INBOX_API.consumer("inbox_api-results"),
                        Results(engine).on_result,
                        **settings.consumer_options(),
                    )
                )
                stop = asyncio.Event()
                relaying = asyncio.create_task(
                    relay(svc.bus, engine, settings.relay_interval, stop)
                )
                await svc.until_stopped()
                stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await relaying
            else:
                await svc.until_stopped()
    finally:
        stop_metrics.set()
        await metering
        engine.dispose()
