"""Supervisor notifications: the router's `notify` target, posted to a Slack-compatible webhook.

For each routed event on `work.notify.<type>`, and for each escalation item (`inbox.item` with
`notify_supervisor`: a legal threat, say), once: a short message naming the ticket (loaded
from the helpdesk when it can be, else what the event says) is posted as `{"text": …}` to an
incoming webhook, behind timeouts, a circuit breaker and a rate limit like the reply channel.
Without a webhook the notification is logged and counted, and still recorded as sent (`log`).
What the customer wrote (a subject, a name, a summary) is quoted inert for the chat's markup,
Slack's or Mattermost's (`shared.chat`): it can link, embed, mention or format nothing.

| webhook answer                                  | outcome                                     |
|-------------------------------------------------|---------------------------------------------|
| 2xx                                             | `notify.sent`                               |
| 408, 409, 425, 429, 5xx, no connection, timeout | retried with backoff (Retry-After honoured) |
| other 4xx (and 3xx)                             | `notify.failed`, not retried                |
| retryable, on the last allowed attempt          | `notify.failed`                             |

The status is read by `shared.answers`, the rule every outbound client shares.

A post whose answer never came (a read timeout) is retried, so a webhook that was slow but did
receive it may show the message twice: incoming webhooks take no idempotency key, and a missed
urgent ticket costs more than a repeated line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from prometheus_client import Counter
from sqlalchemy.engine import Engine

from shared import chat, ids, subjects
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError, TransientError, Unavailable
from shared.helpdesk import SourceSystem, Ticket
from shared.helpdesk.configured import open_configured
from shared.helpdesk.events import TicketRef, ticket_ref
from shared.inbox import ESCALATION, NOTIFY_SUPERVISOR, InboxItem, Notice
from shared.ledger import Ledger
from shared.logging import redact
from shared.outbox import Relay
from shared.results import NOTIFY_FAILED, NOTIFY_SENT, event_id
from shared.settings import SenderSettings

from . import notifications
from .messages import escalation_message, message, notice_message
from .store import ResultRow, now
from .webhook import SLACK, SlackWebhook, open_notify_webhook

log = logging.getLogger(__name__)

TARGET = "notify"  # the router's target name: work items arrive on work.notify.<type>
LOG = "log"

NOTIFICATIONS = Counter(
    "desk_sender_notifications_total",
    "Supervisor notifications, by channel (slack, log) and outcome (sent, failed, retry, "
    "duplicate).",
    ["channel", "outcome"],
)
OUTCOMES = ("sent", "failed", "retry", "duplicate")


class Notifier:
    def __init__(
        self,
        engine: Engine,
        relay: Relay,
        webhook: SlackWebhook | None,
        source: SourceSystem | None,
        ledger: Ledger,
        *,
        max_deliver: int,
        lease_ttl: float,
        lease_wait: float,
    ) -> None:
        self.engine = engine
        self.relay = relay
        self.webhook = webhook
        self.source = source
        self.ledger = ledger
        self.max_deliver = max_deliver
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait
        for outcome in OUTCOMES:  # every series exists at 0
            NOTIFICATIONS.labels(self.channel, outcome)

    @classmethod
    def configured(
        cls, settings: SenderSettings, engine: Engine, relay: Relay, ledger: Ledger
    ) -> Notifier:
        """As the settings say: the incoming webhook if one is set (else notices are logged
        only), and a helpdesk client of its own for the ticket's subject and customer."""
        notifier = cls(
            engine,
            relay,
            open_notify_webhook(settings),
            open_configured(settings),
            ledger,
            max_deliver=settings.max_deliver,
            lease_ttl=max(5.0, settings.ack_wait),
            lease_wait=settings.notify_connect_timeout + settings.notify_read_timeout + 15,
        )
        log.info(
            "supervisor notifications: %s",
            "posted to the incoming webhook" if notifier.webhook else "logged only",
        )
        return notifier

    @property
    def channel(self) -> str:
        return self.webhook.name if self.webhook else LOG

    @property
    def flavour(self) -> chat.Flavour:
        return self.webhook.flavour if self.webhook else "slack"

    async def close(self) -> None:
        if self.webhook is not None:
            await self.webhook.close()
        if self.source is not None:
            await self.source.close()

    async def on_event(self, delivery: Delivery[Envelope]) -> None:
        envelope = delivery.body
        event_type = _event_type(delivery.subject)
        if envelope.type != event_type:
            raise PermanentError(f"a {envelope.type} event on the subject of {event_type}")
        ref = ticket_ref(envelope.data)
        ticket_id = ref.ticket_id if ref and ref.ticket_id else None

        async def text() -> str:
            return message(envelope, ref, await self._ticket(ref), self.flavour)

        # the event's id, not this copy's: a duplicate matches
        await self._once(envelope.id, ticket_id, event_type, text, delivery.attempt)

    async def on_notice(self, delivery: Delivery[Envelope, Notice]) -> None:
        """`inbox.notice`: an escalation or a queue's digest from the inbox, posted once per
        notice id (the inbox's idempotency key) like a routed event."""
        notice = delivery.payload  # checked by the runtime (Consumer.payload)

        async def text() -> str:
            return notice_message(notice, self.flavour)

        await self._once(notice.id, notice.ticket_id, notice.kind, text, delivery.attempt)

    async def on_item(self, delivery: Delivery[Envelope, InboxItem]) -> None:
        """`inbox.item`: an escalation (a supervisor item, no draft) is posted like an urgent
        ticket, to the same webhook, once per item (`notify:escalation:<item id>`)."""
        item = delivery.payload  # checked by the runtime (Consumer.payload)
        if item.action_request.action != NOTIFY_SUPERVISOR:
            return

        async def text() -> str:
            return escalation_message(item, self.flavour)

        await self._once(
            f"{ESCALATION}:{item.id}", item.ticket_id, ESCALATION, text, delivery.attempt
        )

    async def _once(
        self,
        event_id: str,
        ticket_id: str | None,
        event_type: str,
        text: Callable[[], Awaitable[str]],
        attempt: int,
    ) -> None:
        """Post `text()` for `event_id` unless its notification is final already."""
        key = ids.notify(event_id)
        # One worker per key at a time (across replicas); the UNIQUE key stops a second row.
        async with self.ledger.lease(key, ttl=self.lease_ttl, wait=self.lease_wait):
            row = await asyncio.to_thread(
                notifications.begin,
                self.engine,
                notifications.NotificationRow(
                    key=key,
                    ticket_id=ticket_id,
                    event_id=event_id,
                    event_type=event_type,
                    channel=self.channel,
                    created_at=now(),
                ),
            )
            if row.status in notifications.FINAL:
                NOTIFICATIONS.labels(row.channel, "duplicate").inc()
                raise BusinessReject(f"{key} was already {row.status}", outcome="duplicate")
            await self._notify(row, await text(), attempt)
        self.relay.wake()

    async def _ticket(self, ref: TicketRef | None) -> Ticket | None:
        """The ticket for a richer message, or None: the message then says what the event says."""
        if ref is None or not ref.ticket_id or self.source is None:
            return None
        try:
            return await self.source.get_ticket(ref.ticket_id)
        except (PermanentError, TransientError) as exc:
            log.warning("ticket %s not loaded for its notification: %s", ref.ticket_id, exc)
            return None

    async def _notify(self, row: notifications.NotificationRow, text: str, attempt: int) -> None:
        if self.webhook is None:
            log.info(
                "notification for %s (%s) logged: no DESK_NOTIFY_WEBHOOK_URL",
                row.ticket_id or "an event without a ticket",
                row.event_type,
            )
            await self._settle(row, LOG, "sent", None, None, attempted=True)
            return
        final = attempt >= self.max_deliver
        try:
            outcome = await self.webhook.post(text)
        except Unavailable:  # the breaker or the rate limit: no call made, none spent: it waits
            NOTIFICATIONS.labels(SLACK, "retry").inc()
            raise
        if outcome.outcome == "ok":
            await self._settle(row, SLACK, "sent", outcome.status_code, None, attempted=True)
            return
        if outcome.outcome == "failed" or final:
            await self._settle(
                row, SLACK, "failed", outcome.status_code, outcome.error, attempted=True
            )
            return
        NOTIFICATIONS.labels(SLACK, "retry").inc()
        await asyncio.to_thread(
            notifications.update,
            self.engine,
            row.key,
            status="pending",
            channel=SLACK,
            status_code=outcome.status_code,
            error=outcome.error,
            attempted=True,
            result=None,
        )
        raise TransientError(outcome.error or "notify failed", retry_after=outcome.retry_after)

    async def _settle(
        self,
        row: notifications.NotificationRow,
        channel: str,
        status: Literal["sent", "failed"],
        status_code: int | None,
        error: str | None,
        *,
        attempted: bool,
    ) -> None:
        data: dict[str, Any] = {
            "ticket_id": row.ticket_id,
            "event_id": row.event_id,
            "event_type": row.event_type,
            "channel": channel,
            "status_code": status_code,
        }
        if status == "failed":
            data["error"] = redact(error or "")[:500]
            log.warning("supervisor notification %s failed: %s", row.key, error)
        kind = NOTIFY_SENT if status == "sent" else NOTIFY_FAILED
        result = ResultRow(
            id=event_id(kind, row.key),
            type=kind,
            subject=row.ticket_id,
            data=data,
            created_at=now(),
        )
        await asyncio.to_thread(
            notifications.update,
            self.engine,
            row.key,
            status=status,
            channel=channel,
            status_code=status_code,
            error=error,
            attempted=attempted,
            result=result,
        )
        NOTIFICATIONS.labels(channel, status).inc()


def _event_type(subject: str) -> str:
    """The event type a work subject names; believed over what the body says about itself."""
    prefix = subjects.work_for(TARGET).removesuffix(">")
    if not subject.startswith(prefix) or len(subject) == len(prefix):
        raise PermanentError(f"not a {TARGET} work subject: {subject!r}")
    return subject[len(prefix) :]
