from __future__ import annotations

import io
import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.logging import _PATTERNS, JsonFormatter, bound, redact


@pytest.fixture
def capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("router"))
    logger = logging.getLogger("test.redaction")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


@pytest.mark.parametrize(
    "secret",
    [
        "jane.doe@example.com",
        "+1 (415) 555-0134",
        "+49 30 1234 5678",
        "415-555-0134",
        "030.1234.5678",
        "030.123.456.78",
        "13812345678",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "sk-proj-abcdefghijklmnop",
    ],
)
def test_personal_data_and_secrets_never_reach_the_log(
    capture: tuple[logging.Logger, io.StringIO], secret: str
) -> None:
    logger, stream = capture
    logger.info("customer wrote from %s", secret, extra={"detail": f"contact {secret}"})
    assert secret not in stream.getvalue()


def test_secret_looking_pairs_and_bearer_tokens_are_redacted() -> None:
    text = redact(
        'token=abc123 "api_key": "zzz" Authorization: Bearer eyJhbGciOi.x.y password=hunter2'
    )
    for value in ("abc123", "zzz", "eyJhbGciOi", "hunter2"):
        assert value not in text


def test_ordinary_numbers_stay_readable() -> None:
    text = "seq 1234567 at 2026-11-29T07:59:47Z from 127.0.0.1:4222 took 0.125s, ts 1764403187"
    assert redact(text) == text


def test_client_addresses_stay_readable() -> None:
    """Throttling logs the client's address; an operator must be able to read it."""
    text = "login throttled for 192.168.100.200, then 10.244.1.123 and 203.0.113.254"
    assert redact(text) == text


def test_records_carry_the_event_and_correlation_ids(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = capture
    with bound("helpdesk:e1", "corr-7"):
        logger.info("handled")
    logger.info("outside")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event_id"] == "helpdesk:e1"
    assert first["correlation_id"] == "corr-7"
    assert first["service"] == "router"
    assert "event_id" not in second


def _every_pattern(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "Bearer abc.def",
                "BEARER x",
                "api_key=",
                "ApiKey: ",
                "tOkEn=",
                "Signature",
                "whsec_QUJD",
                "sk-abcdefgh12",
                "v1,QUJDREVGR0hJSktMTU5PUFFSUw==",
                "ann@example.com",
                "+49 30 1234 5678",
                "(030) 1234 5678",
                "ſecret=",  # long s: (?i) matches it as "s"
                "K",  # Kelvin sign
                '"password": "hunter2"',
                " ",
                ":",
                "=",
                '"',
            ]
        )
        | st.text(max_size=12),
        max_size=12,
    ).map("".join)
)
def test_redaction_is_the_same_as_running_every_pattern(text: str) -> None:
    assert redact(text) == _every_pattern(text)
