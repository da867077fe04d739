"""The sender's settings: the channel replies go out on, and supervisor notifications."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, model_validator

from ..chat import Flavour as ChatFormat
from .helpdesk import HelpdeskSettings
from .values import http_url, secret_text


class SenderSettings(HelpdeskSettings):
    """The sender re-reads each ticket from the helpdesk right before delivering a reply."""

    service: ClassVar[str] = "sender"

    channel: Literal["outbox", "webhook"] = Field(
        default="outbox", description="outbox: the outbox row is the send; webhook: POST it too"
    )
    channel_url: str | None = None
    channel_secret: SecretStr | None = Field(
        default=None, description="whsec_… secret to sign channel calls (Standard Webhooks)"
    )
    channel_connect_timeout: float = Field(default=3.0, gt=0)
    channel_read_timeout: float = Field(default=8.0, gt=0)
    channel_rate: float = Field(default=10.0, gt=0, description="calls per second")
    channel_burst: int = Field(default=10, ge=1)
    breaker_window: int = Field(default=20, ge=1)
    breaker_min_samples: int = Field(default=5, ge=1)
    breaker_failure_rate: float = Field(default=0.5, gt=0, le=1)
    breaker_open_seconds: float = Field(default=30.0, gt=0)
    relay_interval: float = Field(default=1.0, gt=0, description="seconds between relay scans")
    delivery_deadline: float = Field(
        default=4 * 3600,
        gt=0,
        description="seconds an approved reply may wait for its channel (open breaker, 5xx, "
        "rate limit) before it ends reply.failed",
    )
    record_replies: bool = Field(
        default=True,
        description="with the outbox channel and the sql (demo) helpdesk, add each sent reply "
        "to the ticket's conversation as an agent message",
    )
    # supervisor notifications (the router's `notify` target)
    notify_webhook_url: SecretStr | None = Field(
        default=None,
        description="a Slack-compatible incoming webhook; unset: notifications are logged",
    )
    notify_connect_timeout: float = Field(default=3.0, gt=0)
    notify_read_timeout: float = Field(default=8.0, gt=0)
    notify_rate: float = Field(default=1.0, gt=0, description="posts per second")
    notify_burst: int = Field(default=5, ge=1)
    chat_format: ChatFormat = Field(
        default="slack",
        description="the markup of the chat the webhook posts to: slack (mrkdwn) or mattermost "
        "(Markdown); customer text is quoted inert for it",
    )

    @model_validator(mode="after")
    def _breaker(self) -> SenderSettings:
        if self.breaker_min_samples > self.breaker_window:
            raise ValueError("breaker_min_samples cannot exceed breaker_window")
        if self.channel == "webhook" and not self.channel_url:
            raise ValueError("DESK_CHANNEL_URL is required when DESK_CHANNEL=webhook")
        http_url(self.channel_url, "DESK_CHANNEL_URL")
        http_url(secret_text(self.notify_webhook_url), "DESK_NOTIFY_WEBHOOK_URL")
        return self
