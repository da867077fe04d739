"""The reconciler's settings: backfills, stale tickets and the daily report."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from pydantic import Field, SecretStr, model_validator

from ..chat import Flavour as ChatFormat
from .helpdesk import HelpdeskSettings
from .values import http_url, secret_text


class ReconcilerSettings(HelpdeskSettings):
    service: ClassVar[str] = "reconciler"

    reconcile_interval: float = Field(default=60.0, gt=0, description="seconds between backfills")
    reconcile_lookback: float = Field(
        default=300.0, ge=0, description="seconds re-listed before the stored cursor"
    )
    reconcile_since: dt.datetime | None = Field(
        default=None, description="where the very first backfill starts (default: start time)"
    )
    reconcile_page_size: int = Field(default=100, ge=1, le=1000)
    reconcile_grace: float = Field(
        default=120.0,
        ge=0,
        description="seconds a changed ticket may wait for its webhook before it counts as lost",
    )
    stale_days: int = Field(default=20, ge=1)
    stale_cron: str = "0 9 * * *"
    report_cron: str = "0 17 * * *"
    timezone: str = Field(default="UTC", description="time zone of the cron schedules")
    inbox_url: str | None = Field(default=None, description="inbox_api base URL, for the report")
    report_token: SecretStr | None = Field(
        default=None, description="a reporter token for it (reads the counts only)"
    )
    slack_webhook_url: SecretStr | None = None
    chat_format: ChatFormat = Field(
        default="slack",
        description="the markup of the chat the report is posted to: slack or mattermost",
    )

    @model_validator(mode="after")
    def _urls(self) -> ReconcilerSettings:
        http_url(self.inbox_url, "DESK_INBOX_URL")
        http_url(secret_text(self.slack_webhook_url), "DESK_SLACK_WEBHOOK_URL")
        return self
