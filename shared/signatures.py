"""Webhook signatures over the raw body bytes, all compared in constant time.

- Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64> …`,
  HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed with the base64 part of a `whsec_` secret.
- Stripe-style: `t=<unix>,v1=<hex>[,v1=<hex>]`, HMAC-SHA256 of `<t>.<body>` keyed with the
  secret's bytes.
- GitHub-style: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body (no timestamp).
- Basic: `Authorization: Basic …` against configured `user:password` pairs (inbound-mail relays).

Verification takes several secrets at once, so a secret can be rotated without downtime.
GitHub-style and Basic carry no timestamp: nothing bounds a replay in time, so what is signed
(the body) is all a replay can be recognised by: `body_digest`.
Pure functions: no I/O, no clock unless `now` is omitted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping
from typing import Literal

Reason = Literal["missing", "malformed", "mismatch"]


class SignatureError(Exception):
    """The request is not proven to come from the source (answer 401)."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class TimestampError(Exception):
    """Signed, but outside the tolerance window: a replay or a skewed clock (answer 400)."""


def body_digest(body: bytes) -> str:
    """`sha256-<hex>` of the raw body: the same signed bytes, the same digest."""
    return "sha256-" + hashlib.sha256(body).hexdigest()


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def _any_match(expected: Iterable[bytes], given: Iterable[bytes]) -> bool:
    matched = False
    given = list(given)
    for e in expected:
        for g in given:
            # no short-circuit: every comparison runs, each in constant time
            matched |= hmac.compare_digest(e, g)
    return matched


def _check_window(timestamp: int, tolerance: float, now: float | None) -> None:
    current = time.time() if now is None else now
    if timestamp < current - tolerance:
        raise TimestampError(
            f"timestamp is {int(current - timestamp)}s old (tolerance {tolerance:g}s)"
        )
    if timestamp > current + tolerance:
        raise TimestampError(f"timestamp is {int(timestamp - current)}s in the future")


def _timestamp(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise SignatureError("malformed", "timestamp is not a whole number of seconds") from None


# -- Standard Webhooks -------------------------------------------------------------------------


def standard_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret; ValueError if it is not one."""
    raw = secret.removeprefix("whsec_")
    try:
        key = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a Standard Webhooks secret is 'whsec_' followed by base64") from None
    if not key:
        raise ValueError("empty webhook secret")
    return key


def standard_sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(_hmac(standard_key(secret), signed)).decode()


def standard_verify(
    secrets: Iterable[str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> int:
    """Verify; return the signed timestamp. `headers` keys must be lower-case."""
    msg_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    signature = headers.get("webhook-signature", "")
    if not (msg_id and stamp and signature):
        raise SignatureError(
            "missing", "webhook-id, webhook-timestamp and webhook-signature needed"
        )
    timestamp = _timestamp(stamp)
    given = []
    for part in signature.split():
        version, _, value = part.partition(",")
        if version == "v1":
            try:
                given.append(base64.b64decode(value, validate=True))
            except (binascii.Error, ValueError):
                continue
    if not given:
        raise SignatureError("malformed", "no v1 signature in webhook-signature")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    if not _any_match((_hmac(standard_key(s), signed) for s in secrets), given):
        raise SignatureError("mismatch", "no signature matches a configured secret")
    _check_window(timestamp, tolerance, now)
    return timestamp


# -- Stripe-style ------------------------------------------------------------------------------


def stripe_sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = _hmac(secret.encode(), f"{timestamp}.".encode() + body).hex()
    return f"t={timestamp},v1={digest}"


def stripe_verify(
    secrets: Iterable[str],
    header: str | None,
    body: bytes,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> int:
    if not header:
        raise SignatureError("missing", "signature header missing")
    stamp: str | None = None
    given: list[bytes] = []
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t":
            stamp = value
        elif key == "v1":
            try:
                given.append(bytes.fromhex(value))
            except ValueError:
                continue
    if stamp is None or not given:
        raise SignatureError("malformed", "signature header needs t= and v1=")
    timestamp = _timestamp(stamp)
    signed = f"{timestamp}.".encode() + body
    if not _any_match((_hmac(s.encode(), signed) for s in secrets), given):
        raise SignatureError("mismatch", "no signature matches a configured secret")
    _check_window(timestamp, tolerance, now)
    return timestamp


# -- GitHub-style ------------------------------------------------------------------------------


def github_sign(secret: str, body: bytes) -> str:
    return "sha256=" + _hmac(secret.encode(), body).hex()


def github_verify(secrets: Iterable[str], header: str | None, body: bytes) -> None:
    if not header:
        raise SignatureError("missing", "X-Hub-Signature-256 missing")
    algorithm, _, value = header.strip().partition("=")
    try:
        given = bytes.fromhex(value)
    except ValueError:
        given = b""
    if algorithm != "sha256" or not given:
        raise SignatureError("malformed", "expected sha256=<hex>")
    if not _any_match((_hmac(s.encode(), body) for s in secrets), [given]):
        raise SignatureError("mismatch", "no signature matches a configured secret")


# -- Basic auth --------------------------------------------------------------------------------


def basic_verify(credentials: Iterable[str], header: str | None) -> None:
    """`credentials` are `user:password` strings."""
    if not header:
        raise SignatureError("missing", "Authorization missing")
    scheme, _, value = header.strip().partition(" ")
    try:
        given = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        given = b""
    if scheme.lower() != "basic" or not given:
        raise SignatureError("malformed", "expected Basic credentials")
    if not _any_match((c.encode() for c in credentials), [given]):
        raise SignatureError("mismatch", "credentials do not match")
