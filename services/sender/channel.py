"""Delivery channels behind the outbox. `webhook` POSTs the reply with an Idempotency-Key.

Outcomes, the status read by `shared.answers`: delivered (2xx), failed (a permanent answer:
the other 4xx, retrying cannot help), retry (a transient answer: 408, 409, 425, 429, 5xx, with
its Retry-After; or could not connect: nothing was received; the breaker or the rate limit
refusing the call raises `Unavailable` instead: no request was made), unknown (the request went
out and no answer came back: re-checked by sending again with the same Idempotency-Key, never
as a new message).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from shared import answers, mail
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.errors import Unavailable
from shared.settings import SenderSettings
from shared.signatures import standard_sign

from .ratelimit import TokenBucket
from .store import OutboxRow

log = logging.getLogger(__name__)

Outcome = Literal["delivered", "failed", "retry", "unknown", "wait"]  # wait: no request made


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    status_code: int | None
    duration_ms: int
    error: str | None = None
    retry_after: float | None = None


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
        self.url = url
        self.secret = secret
        self.breaker = breaker
        self.bucket = bucket
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self.client = httpx.AsyncClient(timeout=timeout)

    async def close(self) -> None:
        await self.client.aclose()

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
        """One attempt; raises Unavailable when the breaker or the rate limit says wait."""
        if not self.breaker.allow():
            raise Unavailable("channel circuit open", retry_after=self.breaker.retry_after())
        if not await self.bucket.take(max_wait=5.0):
            self.breaker.release()  # no call made: hand back a half-open probe slot, if taken
            raise Unavailable("channel rate limit", retry_after=self.bucket.wait_time())
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
        started = time.monotonic()
        try:
            response = await self.client.post(self.url, content=body, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            self.breaker.record(False)
            return Attempt("retry", None, _ms(started), f"not sent: {exc.__class__.__name__}")
        except httpx.TimeoutException as exc:
            self.breaker.record(False)
            return Attempt("unknown", None, _ms(started), f"no answer: {exc.__class__.__name__}")
        except httpx.HTTPError as exc:
            self.breaker.record(False)
            return Attempt(
                "unknown", None, _ms(started), f"broken exchange: {exc.__class__.__name__}"
            )
        code = response.status_code
        verdict = answers.kind(code)
        if verdict == "ok":
            self.breaker.record(True)
            return Attempt("delivered", code, _ms(started))
        if verdict == "transient":
            self.breaker.record(False)
            wait = answers.retry_after(response.headers)
            return Attempt("retry", code, _ms(started), f"answered {code}", wait)
        self.breaker.record(True)  # the channel works; it refused this request for good
        return Attempt("failed", code, _ms(started), f"refused with {code}: {response.text[:200]}")


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


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
