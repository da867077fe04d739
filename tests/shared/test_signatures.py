"""Signatures are byte-compatible with the reference implementations, and rotation works."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import time

import pytest
import standardwebhooks
from stripe import WebhookSignature

from shared.signatures import (
    SignatureError,
    TimestampError,
    basic_verify,
    github_sign,
    github_verify,
    standard_sign,
    standard_verify,
    stripe_sign,
    stripe_verify,
)

SECRET = "whsec_" + base64.b64encode(b"a-thirty-two-byte-secret-key-123").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"the-previous-secret-being-rotated").decode()
BODY = '{"id":"evt_1","type":"ticket.created","data":{"subject":"Über café ☕"}}'.encode()


def sw_headers(signature: str, msg_id: str = "evt_1", stamp: int | None = None) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp if stamp is not None else int(time.time())),
        "webhook-signature": signature,
    }


def test_standard_webhooks_package_signatures_verify_here() -> None:
    now = dt.datetime.now(dt.UTC)
    signature = standardwebhooks.Webhook(SECRET).sign("evt_1", now, BODY.decode())
    standard_verify([SECRET], sw_headers(signature, stamp=int(now.timestamp())), BODY)


def test_our_standard_signatures_verify_in_the_package() -> None:
    stamp = int(time.time())
    headers = sw_headers(standard_sign(SECRET, "evt_1", stamp, BODY), stamp=stamp)
    assert standardwebhooks.Webhook(SECRET).verify(BODY, headers)["id"] == "evt_1"


def test_several_signatures_in_one_header_and_several_secrets_for_rotation() -> None:
    stamp = int(time.time())
    new = standard_sign(SECRET, "evt_1", stamp, BODY)
    old = standard_sign(OLD_SECRET, "evt_1", stamp, BODY)
    standard_verify([SECRET], sw_headers(f"v1,bm9wZQ== {new}", stamp=stamp), BODY)
    standard_verify([SECRET, OLD_SECRET], sw_headers(old, stamp=stamp), BODY)
    with pytest.raises(SignatureError) as refused:
        standard_verify([SECRET], sw_headers(old, stamp=stamp), BODY)
    assert refused.value.reason == "mismatch"


def test_one_changed_byte_fails() -> None:
    stamp = int(time.time())
    headers = sw_headers(standard_sign(SECRET, "evt_1", stamp, BODY), stamp=stamp)
    with pytest.raises(SignatureError):
        standard_verify([SECRET], headers, BODY.replace(b"evt_1", b"evt_2"))
    with pytest.raises(SignatureError):
        standard_verify([SECRET], {**headers, "webhook-id": "evt_2"}, BODY)


@pytest.mark.parametrize("age", [-301, 301, 3600])
def test_a_signed_request_outside_the_window_is_a_timestamp_error(age: int) -> None:
    stamp = int(time.time()) - age
    headers = sw_headers(standard_sign(SECRET, "evt_1", stamp, BODY), stamp=stamp)
    with pytest.raises(TimestampError):
        standard_verify([SECRET], headers, BODY, tolerance=300)


def test_missing_and_malformed_headers_are_signature_errors() -> None:
    with pytest.raises(SignatureError) as missing:
        standard_verify([SECRET], {}, BODY)
    assert missing.value.reason == "missing"
    with pytest.raises(SignatureError) as malformed:
        standard_verify([SECRET], sw_headers("v2,zzz"), BODY)
    assert malformed.value.reason == "malformed"


def test_stripe_package_headers_verify_here_and_ours_verify_in_stripe() -> None:
    secret = "whsec_stripe_test_secret"
    header = WebhookSignature.generate_signature_header(BODY.decode(), secret)
    stripe_verify([secret], header, BODY)
    ours = stripe_sign(secret, int(time.time()), BODY)
    assert WebhookSignature.verify_header(BODY.decode(), ours, secret, tolerance=300)


def test_stripe_replays_and_forgeries_are_refused() -> None:
    secret = "whsec_stripe_test_secret"
    stale = WebhookSignature.generate_signature_header(
        BODY.decode(), secret, timestamp=int(time.time()) - 600
    )
    with pytest.raises(TimestampError):
        stripe_verify([secret], stale, BODY, tolerance=300)
    forged = WebhookSignature.generate_signature_header(BODY.decode(), "another")
    with pytest.raises(SignatureError):
        stripe_verify([secret], forged, BODY)


def test_github_signatures_match_an_independent_hmac() -> None:
    expected = "sha256=" + hmac.new(b"gh-secret", BODY, hashlib.sha256).hexdigest()
    assert github_sign("gh-secret", BODY) == expected
    github_verify(["other", "gh-secret"], expected, BODY)
    with pytest.raises(SignatureError):
        github_verify(["other"], expected, BODY)
    with pytest.raises(SignatureError):
        github_verify(["gh-secret"], "sha1=abc", BODY)


def test_basic_credentials() -> None:
    header = "Basic " + base64.b64encode(b"inbound:pw").decode()
    basic_verify(["inbound:pw"], header)
    with pytest.raises(SignatureError):
        basic_verify(["inbound:other"], header)
    with pytest.raises(SignatureError):
        basic_verify(["inbound:pw"], "Bearer x")
