"""Delivery channels behind the outbox. `webhook` POSTs the reply with an Idempotency-Key.

An attempt's outcome is the outbound endpoint's (`shared.outbound`): ok (delivered), failed (a
permanent answer: retrying cannot help), retry (a transient answer with its Retry-After, or
nothing was received), unknown (the request went out and no answer came back: re-checked by
sending again with the same Idempotency-Key, never as a new message); the breaker or the rate
limit refusing the call raises `Unavailable` instead: no request was made.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from shared import mail
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.outbound import Attempt, Endpoint
from shared.ratelimit import TokenBucket
from shared.settings import SenderSettings
from shared.signatures import standard_sign

from .store import OutboxRow

log = logging.getLogger(__name__)


class WebhookChannel:
    name = "webhook"

    def __init__(
        self,
        url: str,
        secret: str | None,
        *,
        connect_timeout: float,
        read_timeout: float,
        breaker: CircuitBreaker,
        bucket: TokenBucket,
    ) -> None:
        self.secret = secret
        self.endpoint = Endpoint(
            url,
            name="channel",
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            breaker=breaker,
            bucket=bucket,
        )

    @property
    def url(self) -> str:
        return self.endpoint.url

    async def close(self) -> None:
        await self.endpoint.close()

    def body(self, row: OutboxRow) -> bytes:
        """The request body. Its header-like values (the subject, the recipient) are one line
        each, whatever an edit or an item said: a channel that writes them into a mail's
        headers cannot be made to add one."""
        return json.dumps(
            {
                "outbox_key": row.key,
                "item_id": row.item_id,
                "ticket_id": row.ticket_id,
                "round": row.round,
                "action": row.action,
                "subject": None if row.subject is None else mail.single_line(row.subject),
                "reply": row.final_text,
                "recipient": _one_line(row.recipient),
                "in_reply_to": row.in_reply_to,
                "reviewer": row.reviewer,
            },
            ensure_ascii=False,
        ).encode()

    async def deliver(self, row: OutboxRow) -> Attempt:
        """One attempt (`shared.outbound`); raises `Unavailable` when the breaker or the rate
        limit says wait. The outbox key is the Idempotency-Key (and the webhook id)."""
        body = self.body(row)
        stamp = int(time.time())
        headers = {"Content-Type": "application/json", "Idempotency-Key": row.key}
        if self.secret:
            headers.update(
                {
                    "webhook-id": row.key,
                    "webhook-timestamp": str(stamp),
                    "webhook-signature": standard_sign(self.secret, row.key, stamp, body),
                }
            )
        return await self.endpoint.post(content=body, headers=headers)


def breaker(settings: SenderSettings, what: str) -> CircuitBreaker:
    """A breaker of its own for an endpoint the sender posts to (the reply channel's settings)."""
    return CircuitBreaker(
        BreakerSettings(
            window=settings.breaker_window,
            min_samples=settings.breaker_min_samples,
            failure_rate=settings.breaker_failure_rate,
            open_seconds=settings.breaker_open_seconds,
        ),
        on_change=lambda old, new: log.warning("%s circuit %s → %s", what, old, new),
    )


def open_channel(settings: SenderSettings) -> WebhookChannel | None:
    """The reply channel DESK_CHANNEL names: None for `outbox` (replies are only recorded)."""
    if settings.channel == "outbox":
        return None
    assert settings.channel_url  # the settings refuse DESK_CHANNEL=webhook without it
    secret = settings.channel_secret.get_secret_value() if settings.channel_secret else None
    return WebhookChannel(
        settings.channel_url,
        secret,
        connect_timeout=settings.channel_connect_timeout,
        read_timeout=settings.channel_read_timeout,
        breaker=breaker(settings, "channel"),
        bucket=TokenBucket(settings.channel_rate, settings.channel_burst),
    )


def _one_line(recipient: dict[str, Any] | None) -> dict[str, Any] | None:
    if recipient is None:
        return None
    return {k: mail.single_line(v) if isinstance(v, str) else v for k, v in recipient.items()}
