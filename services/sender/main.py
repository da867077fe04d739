"""The sender service: the only one with a side effect on the customer."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging

from sqlalchemy.engine import Engine

from shared import subjects
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.consumer import Delivery
from shared.db import database_url, make_engine, reachable
from shared.envelope import Envelope
from shared.inbox import Decision, InboxItem, Notice, Withdrawal
from shared.ledger import Ledger
from shared.service import Service
from shared.settings import SenderSettings
from shared.source.configured import open_configured

from . import archive, notifications, store
from .channel import WebhookChannel
from .handlers import Sender
from .notifier import Notifier, SlackWebhook
from .ratelimit import TokenBucket
from .relay import Relay

log = logging.getLogger(__name__)


def make_channel(settings: SenderSettings) -> WebhookChannel | None:
    if settings.channel == "outbox":
        return None
    assert settings.channel_url  # the settings refuse DESK_CHANNEL=webhook without it
    breaker = CircuitBreaker(
        BreakerSettings(
            window=settings.breaker_window,
            min_samples=settings.breaker_min_samples,
            failure_rate=settings.breaker_failure_rate,
            open_seconds=settings.breaker_open_seconds,
        ),
        on_change=lambda old, new: log.warning("channel circuit %s → %s", old, new),
    )
    secret = settings.channel_secret.get_secret_value() if settings.channel_secret else None
    return WebhookChannel(
        settings.channel_url,
        secret,
        connect_timeout=settings.channel_connect_timeout,
        read_timeout=settings.channel_read_timeout,
        breaker=breaker,
        bucket=TokenBucket(settings.channel_rate, settings.channel_burst),
    )


def make_notify_webhook(settings: SenderSettings) -> SlackWebhook | None:
    """The supervisors' incoming webhook, with a breaker and a rate limit of its own."""
    if settings.notify_webhook_url is None:
        return None
    breaker = CircuitBreaker(
        BreakerSettings(  # the reply channel's breaker settings, a breaker of its own
            window=settings.breaker_window,
            min_samples=settings.breaker_min_samples,
            failure_rate=settings.breaker_failure_rate,
            open_seconds=settings.breaker_open_seconds,
        ),
        on_change=lambda old, new: log.warning("notify circuit %s → %s", old, new),
    )
    return SlackWebhook(
        settings.notify_webhook_url.get_secret_value(),
        connect_timeout=settings.notify_connect_timeout,
        read_timeout=settings.notify_read_timeout,
        breaker=breaker,
        bucket=TokenBucket(settings.notify_rate, settings.notify_burst),
        flavour=settings.chat_format,
    )


async def run(settings: SenderSettings) -> None:
    channel = make_channel(settings)
    source = open_configured(settings)
    notifier: Notifier | None = None
    engine = make_engine(database_url(settings.database_url, settings.var_dir, "sender"))
    await asyncio.to_thread(store.create_tables, engine)
    await asyncio.to_thread(notifications.create_tables, engine)
    try:
        checks = {"database": functools.partial(reachable, engine)}
        async with Service(settings, checks=checks) as svc:
            svc.every(
                archive.ARCHIVE_SECONDS,
                functools.partial(_archive, engine, settings.archive_days),
                name="sender archive",
            )
            if svc.bus is None:
                return
            log.info("delivering through %s", channel.url if channel else "the outbox only")
            relay = Relay(svc.bus, engine)
            relay.start(svc, settings.relay_interval)  # at once: republish what a crash left
            sender = Sender(
                engine,
                relay,
                channel,
                await Ledger.open(svc.bus.js, svc.name, keep=settings.archive_seconds),
                source,  # read again right before each reply leaves
                record_replies=settings.record_replies,
                delivery_deadline=settings.delivery_deadline,
                lease_ttl=max(5.0, settings.ack_wait),
                lease_wait=settings.channel_connect_timeout + settings.channel_read_timeout + 15,
            )
            # supervisor notifications: the router's `notify` target (work.notify.>), the
            # inbox's notices and escalation items
            notifier = Notifier(
                engine,
                relay,
                make_notify_webhook(settings),
                open_configured(settings),
                await Ledger.open(svc.bus.js, svc.name, keep=settings.archive_seconds),
                max_deliver=settings.max_deliver,
                lease_ttl=max(5.0, settings.ack_wait),
                lease_wait=settings.notify_connect_timeout + settings.notify_read_timeout + 15,
            )
            log.info(
                "supervisor notifications: %s",
                "posted to the incoming webhook" if notifier.webhook else "logged only",
            )
            escalations = notifier

            async def on_item(delivery: Delivery[Envelope]) -> None:
                await sender.on_item(delivery)  # remembered first: a taken escalation needs it
                await escalations.on_item(delivery)  # an escalation notifies like an urgent ticket

            await svc.consume(
                "sender-items",
                {subjects.INBOX_ITEM: on_item, subjects.INBOX_WITHDRAWN: sender.on_withdrawn},
                payload={subjects.INBOX_ITEM: InboxItem, subjects.INBOX_WITHDRAWN: Withdrawal},
            )
            await svc.consume("sender", sender.on_decision, payload=Decision)
            await svc.consume("sender-notify", notifier.on_event)
            await svc.consume("sender-notices", notifier.on_notice, payload=Notice)
            await svc.until_stopped()
    finally:
        if channel is not None:
            await channel.close()
        await source.close()
        if notifier is not None:
            await notifier.close()
        engine.dispose()


async def _archive(engine: Engine, days: float) -> None:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    await asyncio.to_thread(archive.archive, engine, before)
