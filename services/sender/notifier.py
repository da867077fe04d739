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
import datetime as dt
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import httpx
from prometheus_client import Counter
from sqlalchemy.engine import Engine

from shared import answers, chat, ids, jsonpath, subjects
from shared.breaker import CircuitBreaker
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError, TransientError
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
from .channel import breaker
from .ratelimit import TokenBucket
from .store import ResultRow, now

log = logging.getLogger(__name__)

TARGET = "notify"  # the router's target name: work items arrive on work.notify.<type>
SLACK = "slack"
LOG = "log"

NOTIFICATIONS = Counter(
    "desk_sender_notifications_total",
    "Supervisor notifications, by channel (slack, log) and outcome (sent, failed, retry, "
    "duplicate).",
    ["channel", "outcome"],
)

Outcome = Literal["sent", "failed", "retry"]


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    status_code: int | None
    error: str | None = None
    retry_after: float | None = None


class SlackWebhook:
    """One incoming webhook. `post` makes at most one call and never raises for its answer."""

    name = SLACK

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float,
        read_timeout: float,
        breaker: CircuitBreaker,
        bucket: TokenBucket,
        flavour: chat.Flavour = "slack",
    ) -> None:
        self.url = url  # a secret: it carries the webhook's token; never logged
        self.flavour = flavour
        self.breaker = breaker
        self.bucket = bucket
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout)
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def post(self, text: str) -> Attempt:
        """One attempt; raises TransientError when the breaker or the rate limit says wait."""
        if not self.breaker.allow():
            raise TransientError("notify circuit open", retry_after=self.breaker.retry_after())
        if not await self.bucket.take(max_wait=5.0):
            self.breaker.release()  # no call made: hand back a half-open probe slot, if taken
            raise TransientError("notify rate limit", retry_after=self.bucket.wait_time())
        try:
            response = await self.client.post(self.url, json=chat.payload(text, self.flavour))
        except httpx.HTTPError as exc:  # no connection, a timeout, a broken exchange
            self.breaker.record(False)
            return Attempt("retry", None, f"no answer: {exc.__class__.__name__}")
        code = response.status_code
        verdict = answers.kind(code)
        if verdict == "ok":
            self.breaker.record(True)
            return Attempt("sent", code)
        if verdict == "transient":
            self.breaker.record(False)
            wait = answers.retry_after(response.headers)
            return Attempt("retry", code, f"answered {code}", wait)
        self.breaker.record(True)  # the webhook works; it refused this message for good
        return Attempt("failed", code, f"refused with {code}: {response.text[:200]}")


def open_notify_webhook(settings: SenderSettings) -> SlackWebhook | None:
    """The supervisors' incoming webhook, with a breaker and a rate limit of its own."""
    if settings.notify_webhook_url is None:
        return None
    return SlackWebhook(
        settings.notify_webhook_url.get_secret_value(),
        connect_timeout=settings.notify_connect_timeout,
        read_timeout=settings.notify_read_timeout,
        breaker=breaker(settings, "notify"),
        bucket=TokenBucket(settings.notify_rate, settings.notify_burst),
        flavour=settings.chat_format,
    )


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
        for outcome in (*get_args(Outcome), "duplicate"):  # every series exists at 0
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

    async def on_notice(self, delivery: Delivery[Envelope]) -> None:
        """`inbox.notice`: an escalation or a queue's digest from the inbox, posted once per
        notice id (the inbox's idempotency key) like a routed event."""
        notice: Notice = delivery.payload  # checked by the runtime (Consumer.payload)

        async def text() -> str:
            return notice_message(notice, self.flavour)

        await self._once(notice.id, notice.ticket_id, notice.kind, text, delivery.attempt)

    async def on_item(self, delivery: Delivery[Envelope]) -> None:
        """`inbox.item`: an escalation (a supervisor item, no draft) is posted like an urgent
        ticket, to the same webhook, once per item (`notify:escalation:<item id>`)."""
        item: InboxItem = delivery.payload  # checked by the runtime (Consumer.payload)
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
        except TransientError as exc:  # the breaker or the rate limit: no call was made
            NOTIFICATIONS.labels(SLACK, "retry").inc()
            if not final:
                raise
            await self._settle(row, SLACK, "failed", None, str(exc), attempted=False)
            return
        if outcome.outcome == "sent":
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


# -- the message (pure) ----------------------------------------------------------------------

SUBJECT_PATHS = ("data.subject", "data.ticket.subject", "subject", "Subject")
NAME_PATHS = ("data.customer.name", "data.ticket.customer.name", "customer.name", "FromName")
MAX_SUBJECT = 150


def message(
    envelope: Envelope,
    ref: TicketRef | None,
    ticket: Ticket | None,
    flavour: chat.Flavour = "slack",
) -> str:
    """`Urgent ticket T1008 — "Locked out …" from Mateus Oliveira. Review it in the inbox.`

    No e-mail address or phone number: a name only, and anything that looks like either masked.
    Every value from the event or the ticket is quoted inert for `flavour`.
    """
    subject: str | None
    name: str | None
    if ticket is not None:
        what = f"Urgent ticket {chat.quote(ticket.id, flavour)}"
        subject, name = ticket.subject, ticket.customer.name
    else:
        body = envelope.data
        subject, name = _text(body, SUBJECT_PATHS), _text(body, NAME_PATHS) or _from_name(body)
        if ref is not None and ref.ticket_id:
            what = f"Urgent ticket {chat.quote(ref.ticket_id, flavour)}"
        elif isinstance(body, dict) and "From" in body:
            what = "Urgent e-mail"
        else:
            what = f"Urgent {chat.quote(envelope.type, flavour)} event"
        if not subject:
            what += f" ({chat.quote(envelope.type, flavour)})"
    text = what
    if subject:
        text += f' — "{_clean(subject, MAX_SUBJECT, flavour)}"'
    if name:
        text += f" from {_clean(name, 80, flavour)}"
    return text + ". Review it in the inbox."


def escalation_message(item: InboxItem, flavour: chat.Flavour = "slack") -> str:
    """`Escalation: ticket T1027 — "Escalation: Cancel and refund" from Jane Doe mentions
    lawyer. No reply was drafted: take it in the inbox.` Names only, masked and quoted like the
    rest."""
    what = f"ticket {item.ticket_id}" if item.ticket_id else f"conversation {item.thread}"
    text = chat.quote(f"Escalation: {what}", flavour)
    if item.summary:
        text += f' — "{_clean(item.summary, MAX_SUBJECT, flavour)}"'
    if item.customer and item.customer.name:
        text += f" from {_clean(item.customer.name, 80, flavour)}"
    matched = item.action_request.args.get("matched")
    if isinstance(matched, list) and matched:
        words = ", ".join(str(m) for m in matched)
        text += f" mentions {_clean(words, 80, flavour)}"
    return text + ". No reply was drafted: take it in the inbox."


def notice_message(notice: Notice, flavour: chat.Flavour = "slack") -> str:
    """An escalation: `Ticket T1012 (urgent, billing queue) from Mateus Oliveira is past its
    target (due 14:05 UTC): "Refund for a double charge". Review it in the inbox.`; a digest:
    `Billing queue: 4 waiting (1 past target, 2 nearing it); the oldest has waited 3 h 10 min.`
    Names only, masked and quoted like the rest; Slack mentions (`<@U…>`) of the queue's
    reviewers are the only markup it makes."""
    queue = f"{notice.queue} queue" if notice.queue else "no queue"
    if notice.kind == "digest" and notice.digest is not None:
        d = notice.digest
        text = f"{queue.capitalize()}: {d.waiting} waiting"
        late = [f"{d.past} past target"] if d.past else []
        late += [f"{d.near} nearing it"] if d.near else []
        if late:
            text += f" ({', '.join(late)})"
        text += f"; the oldest has waited {_duration(d.oldest_seconds)}."
        return chat.quote(text, flavour)
    what = f"Ticket {notice.ticket_id}" if notice.ticket_id else "An item"
    detail = ", ".join(x for x in (notice.priority, queue) if x)
    text = chat.quote(f"{what} ({detail})", flavour)
    if notice.customer:
        text += f" from {_clean(notice.customer, 80, flavour)}"
    if notice.kind == "sla.past":
        text += " is past its target"
    else:
        text += " nears its target"
    if notice.due_at is not None:
        text += f" (due {notice.due_at.astimezone(dt.UTC):%H:%M} UTC)"
    if notice.summary:
        text += f': "{_clean(notice.summary, MAX_SUBJECT, flavour)}"'
    text += ". Review it in the inbox."
    if flavour != "slack":  # member ids are Slack's
        return text
    mentions = [f"<@{m}>" for m in notice.mention if _MEMBER.fullmatch(m)]
    return " ".join([*mentions, text])


_MEMBER = re.compile(r"[UW][A-Z0-9]{2,20}")


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def _text(body: Any, paths: tuple[str, ...]) -> str | None:
    for path in paths:
        value = jsonpath.lookup(body, path)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _from_name(body: Any) -> str | None:
    """The display name of a mail's `From` ("Jane Doe <jane@…>"), never the address."""
    sender = jsonpath.lookup(body, "From")
    if not isinstance(sender, str) or "<" not in sender:
        return None
    return sender.split("<")[0].strip().strip('"') or None


def _clean(value: str, limit: int, flavour: chat.Flavour) -> str:
    """One line of customer text: contact details masked, cut to `limit`, then quoted inert."""
    text = redact(chat.one_line(value))
    text = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return chat.quote(text, flavour)
