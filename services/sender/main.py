"""The sender service: the only one with a side effect on the customer."""

from __future__ import annotations

from shared import subjects
from shared.consumer import Delivery
from shared.db import archiving
from shared.envelope import Envelope
from shared.helpdesk.configured import open_configured
from shared.inbox import InboxItem
from shared.service import Service
from shared.settings import SenderSettings

from . import archive, notifications, store
from .channel import open_channel
from .handlers import Sender
from .notifier import Notifier
from .relay import relay as result_relay


async def run(settings: SenderSettings) -> None:
    svc = Service(settings)
    engine = await svc.database("sender", store.create_tables, notifications.create_tables)
    days = settings.archive_days
    svc.every(
        archive.ARCHIVE_SECONDS, archiving(archive.archive, engine, days), name="sender archive"
    )
    channel = open_channel(settings)
    if channel is not None:
        svc.on_close(channel.close)
    source = open_configured(settings)  # read again right before each reply leaves
    svc.on_close(source.close)
    async with svc:
        relay = result_relay(svc.bus, engine)
        relay.start(svc, settings.relay_interval)  # at once: republish what a crash left
        sender = Sender.configured(settings, engine, relay, channel, svc.ledger, source)
        # supervisor notifications: the router's `notify` target (work.notify.>), the inbox's
        # notices and escalation items
        notifier = Notifier.configured(settings, engine, relay, svc.ledger)
        svc.on_close(notifier.close)

        async def on_item(delivery: Delivery[Envelope, InboxItem]) -> None:
            await sender.on_item(delivery)  # remembered first: a taken escalation needs it
            await notifier.on_item(delivery)  # an escalation notifies like an urgent ticket

        await svc.consume(
            "sender-items",
            {subjects.INBOX_ITEM: on_item, subjects.INBOX_WITHDRAWN: sender.on_withdrawn},
        )
        await svc.consume("sender", sender.on_decision)
        await svc.consume("sender-notify", notifier.on_event)
        await svc.consume("sender-notices", notifier.on_notice)
        await svc.until_stopped()
