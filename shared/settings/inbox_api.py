"""The inbox API's settings: reviewers, sessions, auto-send and service-level targets."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, get_args

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from ..helpdesk.base import Priority
from ..inbox import CATEGORIES, QUEUE_PATTERN
from .base import DeskSettings
from .values import http_url


class ReviewerConfig(BaseModel):
    name: str = Field(min_length=1)
    role: Literal["reviewer", "viewer", "reporter"] = Field(
        default="reviewer",
        description="reviewer decides; viewer reads the inbox; reporter (the daily report's "
        "token) reads counts only (/api/stats), never an item or a conversation",
    )
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 hex of the token")
    queues: list[Annotated[str, Field(pattern=QUEUE_PATTERN)]] = Field(
        default_factory=list, description="the review queues this reviewer works ('mine')"
    )
    notify: str | None = Field(
        default=None,
        pattern=r"^[UW][A-Z0-9]{2,20}$",
        description="a Slack member id to mention when an item of their queues passes its target",
    )


# Service-level targets: minutes to a decision, by priority or by category (the smaller wins).
SLA_KEYS: tuple[str, ...] = (*get_args(Priority), *CATEGORIES)
DEFAULT_SLA = {"urgent": 60.0, "high": 240.0, "normal": 1440.0, "low": 4320.0}


class InboxApiSettings(DeskSettings):
    service: ClassVar[str] = "inbox_api"
    http_port: int = 8001
    reviewers: list[ReviewerConfig] = Field(
        default_factory=list,
        description="JSON list of {name, role, token_sha256}; the dev tokens when empty",
    )
    cookie_secure: bool = Field(
        default=False, description="send the session cookie over HTTPS only"
    )
    session_lifetime: float = Field(
        default=8 * 3600,
        gt=0,
        description="seconds a web session lasts from its login, however often it is used",
    )
    auth_rate: float = Field(
        default=0.1,
        gt=0,
        description="failed token/login attempts per second a client address earns back",
    )
    auth_burst: int = Field(
        default=10, ge=1, description="failed attempts a client address may make before 429"
    )
    max_body: int = Field(
        default=1024 * 1024, gt=0, description="largest request body (bytes) the inbox reads"
    )
    body_timeout: float = Field(
        default=10.0, gt=0, description="seconds a request body may take to arrive (else 408)"
    )
    relay_interval: float = Field(default=5.0, gt=0, description="seconds between republish scans")
    admins: list[str] = Field(
        default_factory=list,
        description="JSON list of reviewer names who may turn auto-send on or off for a category "
        "and approve standing instructions while it is on",
    )
    autosend_evidence: int = Field(
        default=200, ge=1, description="the last N decisions of a category auto-send is judged on"
    )
    autosend_unedited: float = Field(
        default=0.98, gt=0, le=1, description="the share of those that must be unedited accepts"
    )
    autosend_audit: float = Field(
        default=0.10, ge=0, le=1, description="the share of auto-sent replies queued for audit"
    )
    autosend_demote: float = Field(
        default=0.10,
        ge=0,
        le=1,
        description="demote a category when more than this share of its last audits found edits",
    )
    autosend_per_ticket_day: int = Field(
        default=2,
        ge=1,
        le=100,
        description="auto-sent replies one ticket may get in any 24 hours; later drafts of it "
        "wait for a person",
    )
    audit_key: SecretStr | None = Field(
        default=None,
        description="a secret of this deployment (at least 16 characters) that decides which "
        "auto-sent replies wait for an audit, so nobody can predict them; required with "
        "DESK_REVIEWERS (`desk up` makes one)",
    )
    helpdesk_ticket_url: str | None = Field(
        default=None,
        description="link to a ticket in the helpdesk, a template with {ticket}",
    )
    claim_seconds: float = Field(
        default=300.0,
        ge=1,
        le=3600,
        description="how long opening an item claims it (its page renews the claim while open)",
    )

    sla_targets: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_SLA),
        description="JSON {priority or category: minutes to a decision}; {} turns targets off",
    )
    sla_near: float = Field(
        default=0.75, gt=0, lt=1, description="the share of its target after which an item nears it"
    )
    sla_scan_seconds: float = Field(
        default=30.0, gt=0, le=3600, description="seconds between scans for escalations"
    )
    digest_minutes: float = Field(
        default=0.0, ge=0, description="minutes between digests of waiting items per queue (0: off)"
    )

    @field_validator("sla_targets")
    @classmethod
    def _sla(cls, value: dict[str, float]) -> dict[str, float]:
        for key, minutes in value.items():
            if key not in SLA_KEYS:
                raise ValueError(
                    f"DESK_SLA_TARGETS: {key!r} is no priority or category "
                    f"(one of {', '.join(SLA_KEYS)})"
                )
            if not minutes > 0:
                raise ValueError(f"DESK_SLA_TARGETS: {key!r} needs a positive number of minutes")
        return value

    @model_validator(mode="after")
    def _ticket_url(self) -> InboxApiSettings:
        if self.helpdesk_ticket_url and "{ticket}" not in self.helpdesk_ticket_url:
            raise ValueError("DESK_HELPDESK_TICKET_URL must contain {ticket}")
        http_url(self.helpdesk_ticket_url, "DESK_HELPDESK_TICKET_URL")
        return self

    @model_validator(mode="after")
    def _audit_key(self) -> InboxApiSettings:
        key = self.audit_key.get_secret_value() if self.audit_key else ""
        if self.audit_key is not None and len(key) < 16:
            raise ValueError("DESK_AUDIT_KEY must be at least 16 characters")
        if self.reviewers and not key:  # a deployment, not the dev tokens of `desk up`
            raise ValueError(
                "DESK_AUDIT_KEY is required with DESK_REVIEWERS: the secret that decides which "
                "auto-sent replies are audited"
            )
        return self
