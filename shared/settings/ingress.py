"""The ingress's settings: webhook sources, and the mail poller's (`desk ingress imap`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, SecretStr

from .base import DeskSettings


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
