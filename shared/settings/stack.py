"""`desk up`'s settings: the embedded broker and the public ports of the single-machine stack."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from .helpdesk import HelpdeskSettings

SyncMode = Literal["always", "relaxed"]


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
