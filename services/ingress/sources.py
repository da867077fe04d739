"""Webhook sources: how each is verified and where its event id and type are.

Configured in a TOML file (`DESK_SOURCES_FILE`) or as JSON (`DESK_SOURCES`); without either,
the development credentials that `desk up` writes define the demo sources. Secrets may be
literal, `env:NAME` or `file:/path` (a mounted Secret); they are never logged or echoed.

    [sources.helpdesk]
    scheme = "standard"                      # standard | stripe | github | basic
    secrets = ["env:HELPDESK_SECRET", "file:/run/secrets/helpdesk-previous"]
    id_path = "id"                           # JSON path; header fallback: id_header
    type_path = "type"
    tolerance = 300                          # seconds
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from shared.settings import ConfigError, first_error, read_toml
from shared.signatures import standard_key

Scheme = Literal["standard", "stripe", "github", "basic"]

_DEFAULT_SIGNATURE_HEADER: dict[str, str] = {
    "standard": "webhook-signature",
    "stripe": "Stripe-Signature",
    "github": "X-Hub-Signature-256",
    "basic": "Authorization",
}
_DEFAULT_ID_HEADER: dict[str, str | None] = {
    "standard": "webhook-id",
    "stripe": None,
    "github": "X-GitHub-Delivery",
    "basic": None,
}
_DEFAULT_TYPE_HEADER: dict[str, str | None] = {
    "standard": None,
    "stripe": None,
    "github": "X-GitHub-Event",
    "basic": None,
}


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    scheme: Scheme = "standard"
    secrets: tuple[SecretStr, ...] = Field(min_length=1)
    signature_header: str = ""
    id_path: str | None = "id"
    id_header: str | None = None
    type_path: str | None = "type"
    type_header: str | None = None
    type_value: str | None = Field(default=None, description="a fixed type, e.g. email.received")
    tolerance: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _defaults(self) -> Source:
        updates: dict[str, Any] = {}
        if not self.signature_header:
            updates["signature_header"] = _DEFAULT_SIGNATURE_HEADER[self.scheme]
        if self.id_header is None and "id_header" not in self.model_fields_set:
            updates["id_header"] = _DEFAULT_ID_HEADER[self.scheme]
        if self.type_header is None and "type_header" not in self.model_fields_set:
            updates["type_header"] = _DEFAULT_TYPE_HEADER[self.scheme]
        for key, value in updates.items():
            object.__setattr__(self, key, value)
        if self.scheme == "standard":
            for secret in self.secrets:
                standard_key(secret.get_secret_value())  # raises ValueError with a clear text
        if self.scheme == "basic" and any(":" not in s.get_secret_value() for s in self.secrets):
            raise ValueError("basic credentials are 'user:password'")
        if not (self.id_path or self.id_header):
            raise ValueError("need id_path or id_header")
        if not (self.type_path or self.type_header or self.type_value):
            raise ValueError("need type_path, type_header or type_value")
        return self

    def secret_values(self) -> list[str]:
        return [s.get_secret_value() for s in self.secrets]


def resolve_secret(reference: str, *, base: Path | None = None) -> str:
    """`env:NAME`, `file:/path` or the literal secret."""
    if reference.startswith("env:"):
        name = reference[4:]
        value = os.environ.get(name)
        if not value:
            raise ConfigError(f"environment variable {name} is not set")
        return value.strip()
    if reference.startswith("file:"):
        path = Path(reference[5:])
        if base is not None and not path.is_absolute():
            path = base / path
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read secret file {path}: {exc.strerror}") from None
    return reference


def build(raw: Mapping[str, Mapping[str, Any]], *, base: Path | None = None) -> dict[str, Source]:
    sources: dict[str, Source] = {}
    for name, spec in raw.items():
        try:
            if not isinstance(spec, Mapping):
                raise ConfigError("must be a table")
            fields = dict(spec)
            refs = fields.get("secrets", [])
            if isinstance(refs, str):
                refs = [refs]
            fields["secrets"] = [resolve_secret(str(r), base=base) for r in refs]
            sources[name] = Source(name=name, **fields)
        except ValidationError as exc:
            raise ConfigError(f"source {name!r}: {first_error(exc, 'source')}") from None
        except (ConfigError, ValueError) as exc:
            raise ConfigError(f"source {name!r}: {exc}") from None
    return sources


def from_file(path: Path) -> dict[str, Source]:
    document = read_toml(path, "sources file")
    return build(document.get("sources", {}), base=path.parent)


def from_dev_credentials(var_dir: Path) -> dict[str, Source]:
    """The demo sources `desk up` creates: `helpdesk` tickets and `email` (inbound mail)."""
    path = var_dir / "dev-credentials.json"
    try:
        secrets = json.loads(path.read_text()).get("webhook_secrets", {})
    except (OSError, ValueError):
        return {}
    raw: dict[str, dict[str, Any]] = {}
    for name, secret in secrets.items():
        raw[name] = {"scheme": "standard", "secrets": [secret]}
        if name == "email":
            raw[name].update(id_path="MessageID", type_path=None, type_value="email.received")
    return build(raw)


def load(
    sources_file: Path | None, inline: Mapping[str, Mapping[str, Any]], var_dir: Path
) -> dict[str, Source]:
    if sources_file is not None:
        return from_file(sources_file)
    if inline:
        return build(inline)
    return from_dev_credentials(var_dir)
