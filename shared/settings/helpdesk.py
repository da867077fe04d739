"""Where the helpdesk is: the settings of every service that reads it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from .base import DeskSettings
from .errors import ConfigError
from .values import http_url


class HelpdeskSettings(DeskSettings):
    """Where the helpdesk is: the drafter loads tickets from it, the reconciler lists them."""

    helpdesk_kind: Literal["sql", "http"] = "sql"
    helpdesk_url: str | None = Field(
        default=None,
        description="sql: a database URL (default: the demo helpdesk in var/); http: a base URL",
    )
    helpdesk_tickets_path: str = "/tickets"
    helpdesk_ticket_path: str = "/tickets/{id}"
    helpdesk_articles_path: str | None = Field(
        default=None,
        description="http: the help-centre articles the drafts are grounded in (e.g. /articles); "
        "unset: none are read from the helpdesk",
    )
    helpdesk_auth_header: str = "Authorization"
    helpdesk_auth_value: SecretStr | None = None
    helpdesk_connect_timeout: float = 3.0
    helpdesk_read_timeout: float = 10.0

    @model_validator(mode="after")
    def _helpdesk_url(self) -> HelpdeskSettings:
        if self.helpdesk_kind == "http":  # (sql: a database URL)
            http_url(self.helpdesk_url, "DESK_HELPDESK_URL")
        return self

    def helpdesk_location(self) -> str:
        if self.helpdesk_url:
            return self.helpdesk_url
        if self.helpdesk_kind == "http":
            raise ConfigError("DESK_HELPDESK_URL is required when DESK_HELPDESK_KIND=http")
        return f"sqlite:///{(self.var_dir / 'helpdesk.sqlite').resolve()}"
