"""What every service's settings share: `DeskSettings`, the base class of each."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..bus import NatsAuth
from ..retry import RetryPolicy

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


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
