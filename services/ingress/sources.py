"""Webhook sources: how each is verified and where its event id and type are.

Configured in a TOML file (`DESK_SOURCES_FILE`) or as JSON (`DESK_SOURCES`); without either,
the development credentials that `desk up` writes define the demo sources. Secrets may be
literal, `env:NAME` or `file:/path` (a mounted Secret); they are never logged or echoed.

    [sources.helpdesk]
    scheme = "standard"                      # standard | stripe | github | basic
    secrets = ["env:HELPDESK_SECRET", "file:/run/secrets/helpdesk-previous"]
    id_path = "id"                           # JSON path; header fallback: id_header
    id_with_digest = false                   # true for ids outsiders pick (a mail's
                                             # MessageID): the id becomes "<id>#<body hash>"
    type_path = "type"
    tolerance = 300                          # seconds
    event_types = ["ticket.created"]         # accepted types (default: any; required when
                                             # the type comes from an unsigned header)
    stored_headers = ["content-type"]        # request headers kept on the stored event
                                             # (default: content-type, user-agent, id/type
                                             # headers); never a credential

An id read from a header the signature does not cover is replaced by a hash of the body (a
replay may rewrite any header it likes); a type read from such a header must be one of
`event_types`. A scheme without a timestamp (github, basic) cannot bound a replay in time:
ingress remembers each body it recorded and answers a second copy as a duplicate (`replays`).
An id the sender of a message picks (a mail's Message-ID: anyone writing to the support address
chooses it) would let one message stand for another: a forged mail sent first with the
Message-ID of one to come makes the real one a "duplicate". `id_with_digest` names such an event
by the id and a hash of its body; the IMAP poller does the same.

One secret belongs to one source: a secret two sources share stops the start.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from shared import subjects
from shared.errors import first_error
from shared.settings import ConfigError, read_toml
from shared.signatures import standard_key

log = logging.getLogger(__name__)

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
# Whether the signature covers a timestamp (a replay window), and which headers it covers.
TIMESTAMPED: dict[str, bool] = {"standard": True, "stripe": True, "github": False, "basic": False}
SIGNED_HEADERS: dict[str, frozenset[str]] = {
    "standard": frozenset({"webhook-id", "webhook-timestamp"}),
    "stripe": frozenset(),
    "github": frozenset(),
    "basic": frozenset(),
}
# Request headers stored with each event unless `stored_headers` says otherwise (plus the
# source's id and type headers). Never a credential: see `_CREDENTIAL`.
DEFAULT_STORED_HEADERS = ("content-type", "user-agent")
# A header name that may carry a credential is never stored, whatever the configuration says.
_CREDENTIAL = re.compile(
    r"auth|token|secret|signature|password|passwd|cookie|api-?key|session|credential",
    re.IGNORECASE,
)
_RESERVED = ("nats-", "desk-")  # the broker's headers and ours: never taken from a request
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def credential_header(name: str) -> bool:
    """A header name that may carry a credential."""
    return bool(_CREDENTIAL.search(name))


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    scheme: Scheme = "standard"
    secrets: tuple[SecretStr, ...] = Field(min_length=1)
    signature_header: str = ""
    id_path: str | None = "id"
    id_header: str | None = None
    id_with_digest: bool = Field(
        default=False, description="append the body's hash to the id (ids outsiders choose)"
    )
    type_path: str | None = "type"
    type_header: str | None = None
    type_value: str | None = Field(default=None, description="a fixed type, e.g. email.received")
    tolerance: float = Field(default=300.0, gt=0)
    event_types: frozenset[str] | None = Field(
        default=None, description="the accepted event types; None: any"
    )
    stored_headers: frozenset[str] | None = Field(
        default=None,
        description="request headers stored with the event (lower-case); default: "
        "content-type, user-agent and the source's id and type headers",
    )

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
        self._check_event_types()
        self._check_stored_headers()
        return self

    def _check_event_types(self) -> None:
        if self.event_types is not None:
            if not self.event_types:
                raise ValueError("event_types is empty: no event could be accepted")
            for event_type in self.event_types:
                try:
                    subjects.token(event_type)
                except subjects.SubjectError:
                    raise ValueError(
                        "event_types: each type is letters, digits, '-', '_' and single dots"
                    ) from None
        elif self.unsigned_type_header is not None:
            raise ValueError(
                f"the event type comes from the unsigned header {self.unsigned_type_header}: "
                "list the accepted types in event_types"
            )

    def _check_stored_headers(self) -> None:
        signature = self.signature_header.lower()
        if self.stored_headers is None:
            defaults = (*DEFAULT_STORED_HEADERS, self.id_header, self.type_header)
            lower = frozenset(n.lower() for n in defaults if n)
            lower = frozenset(n for n in lower if not (credential_header(n) or n == signature))
            object.__setattr__(self, "stored_headers", lower)
            return
        lower = frozenset(n.strip().lower() for n in self.stored_headers)
        for name in sorted(lower):
            if not _HEADER_NAME.match(name):
                raise ValueError(f"stored_headers: {name!r} is not a header name")
            if credential_header(name) or name == signature:
                raise ValueError(f"stored_headers: {name} may carry a credential; never stored")
            if name.startswith(_RESERVED):
                raise ValueError(f"stored_headers: {name} is the broker's or ours; never stored")
        object.__setattr__(self, "stored_headers", lower)

    @property
    def timestamped(self) -> bool:
        """The signature covers a timestamp: a replay is refused once it is too old."""
        return TIMESTAMPED[self.scheme]

    @property
    def unsigned_type_header(self) -> str | None:
        """The header the type may be read from, when the signature does not cover it."""
        if self.type_value or not self.type_header:
            return None
        if self.type_header.lower() in SIGNED_HEADERS[self.scheme]:
            return None
        return self.type_header

    def signs_header(self, name: str) -> bool:
        return name.lower() in SIGNED_HEADERS[self.scheme]

    def kept_headers(self) -> frozenset[str]:
        assert self.stored_headers is not None  # filled in by the validator
        return self.stored_headers

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
            raise ConfigError(f"source {name!r}: {_first_error(exc)}") from None
        except (ConfigError, ValueError) as exc:
            raise ConfigError(f"source {name!r}: {exc}") from None
    _refuse_shared_secrets(sources)
    return sources


def _first_error(exc: ValidationError) -> str:
    """A check of the whole source says what it found as it is; a field error names the field
    (never the input: it may be a secret)."""
    first = exc.errors()[0]
    error = first.get("ctx", {}).get("error")
    if first["type"] == "value_error" and not first["loc"] and isinstance(error, ValueError):
        return str(error)
    return first_error(exc, "source")


def _key_bytes(source: Source, secret: str) -> bytes:
    """What a secret keys: the decoded key of a `whsec_` secret, else its bytes."""
    return standard_key(secret) if source.scheme == "standard" else secret.encode()


def _refuse_shared_secrets(sources: Mapping[str, Source]) -> None:
    """One secret, one source: a secret two sources accept lets either's sender (or a leak of
    either's requests) speak for the other. The error names the sources, never the secret."""
    seen: list[tuple[bytes, str]] = []
    for name, source in sources.items():
        for secret in source.secret_values():
            key = _key_bytes(source, secret)
            for other_key, other in seen:
                if other != name and hmac.compare_digest(key, other_key):
                    raise ConfigError(
                        f"sources {other!r} and {name!r} share a secret: give each source its own"
                    )
            seen.append((key, name))


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
            raw[name].update(
                id_path="MessageID",
                id_with_digest=True,
                type_path=None,
                type_value="email.received",
            )
    return build(raw)


def load(
    sources_file: Path | None, inline: Mapping[str, Mapping[str, Any]], var_dir: Path
) -> dict[str, Source]:
    if sources_file is not None:
        return from_file(sources_file)
    if inline:
        return build(inline)
    return from_dev_credentials(var_dir)


def announce(configured: Mapping[str, Source]) -> None:
    """Say at start which sources are accepted, and which refuse replays by body hash only."""
    if configured:
        log.info("accepting webhooks for %s", ", ".join(sorted(configured)))
    else:
        log.warning("no webhook sources configured: every request will get 404")
    for name in sorted(n for n, source in configured.items() if not source.timestamped):
        log.warning(
            "source %s: signature scheme has no timestamp; replays are refused by body hash only",
            name,
        )
