"""The supervisors' incoming webhook: one post per call, behind a circuit breaker and a rate
limit of its own. Its answer is read by `shared.answers` as sent, retry or failed; what each
means for the notification is the notifier's (`notifier`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx

from shared import answers, chat
from shared.breaker import CircuitBreaker
from shared.errors import TransientError
from shared.settings import SenderSettings

from .channel import breaker
from .ratelimit import TokenBucket

SLACK = "slack"

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
