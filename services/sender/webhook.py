"""The supervisors' incoming webhook: an outbound endpoint (`shared.outbound`) with a circuit
breaker and a rate limit of its own, posting chat messages. What each outcome means for the
notification is the notifier's (`notifier`); an open breaker raises `Unavailable`, as for the
reply channel: the notification waits in place.
"""

from __future__ import annotations

from shared import chat
from shared.breaker import CircuitBreaker
from shared.outbound import Attempt, Endpoint
from shared.ratelimit import TokenBucket
from shared.settings import SenderSettings

from .channel import breaker

SLACK = "slack"


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
        self.flavour = flavour
        # the URL is a secret: it carries the webhook's token; never logged
        self.endpoint = Endpoint(
            url,
            name="notify",
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            breaker=breaker,
            bucket=bucket,
        )

    async def close(self) -> None:
        await self.endpoint.close()

    async def post(self, text: str) -> Attempt:
        """One attempt; raises `Unavailable` when the breaker or the rate limit says wait."""
        return await self.endpoint.post(json=chat.payload(text, self.flavour))


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
