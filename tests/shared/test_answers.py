"""One reading of a foreign HTTP answer: its kind, its Retry-After, and the error to raise."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from shared import answers
from shared.errors import PermanentError, TransientError

NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_a_2xx_is_ok(status: int) -> None:
    assert answers.kind(status) == "ok"


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500, 501, 502, 503, 504, 599])
def test_not_now_answers_and_every_5xx_are_transient(status: int) -> None:
    assert answers.kind(status) == "transient"


@pytest.mark.parametrize("status", [100, 301, 304, 400, 401, 403, 404, 405, 410, 413, 422, 451])
def test_every_other_answer_is_permanent(status: int) -> None:
    assert answers.kind(status) == "permanent"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        ("0", 0.0),
        (" 120 ", 120.0),
        ("1.5", 1.5),  # not RFC 9110's delay-seconds, but sent by some servers: tolerated
        ("Sat, 28 Nov 2026 12:00:30 GMT", 30.0),  # IMF-fixdate
        ("Saturday, 28-Nov-26 12:01:00 GMT", 60.0),  # obsolete RFC 850 form
        ("Sat Nov 28 12:00:05 2026", 5.0),  # obsolete asctime form, GMT without saying so
        ("Sat, 28 Nov 2026 14:00:10 +0200", 10.0),  # a zone other than GMT is converted
        ("Sat, 28 Nov 2026 11:00:00 GMT", 0.0),  # in the past: now
    ],
)
def test_retry_after_reads_delta_seconds_and_http_dates(value: str, seconds: float) -> None:
    assert answers.retry_after(value, NOW) == seconds


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "soon", "-5", "+5", "-0.5", "inf", "nan", "1e3", "1_000", ".5", "0x10"],
)
def test_retry_after_is_none_for_anything_else(value: str | None) -> None:
    assert answers.retry_after(value, NOW) is None


def test_retry_after_finds_the_header_in_any_case() -> None:
    assert answers.retry_after({"Retry-After": "3"}) == 3.0
    assert answers.retry_after({"retry-after": "3"}) == 3.0
    assert answers.retry_after({"RETRY-AFTER": "Sat, 28 Nov 2026 12:00:09 GMT"}, NOW) == 9.0
    assert answers.retry_after(httpx.Headers({"Retry-After": "4"})) == 4.0
    assert answers.retry_after({"Content-Type": "text/plain"}) is None
    assert answers.retry_after({}) is None


def test_an_http_date_is_measured_from_the_wall_clock_by_default() -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    seconds = answers.retry_after(later.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    assert seconds is not None and 28 <= seconds <= 30


def test_a_naive_now_is_taken_as_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert answers.retry_after("Sat, 28 Nov 2026 12:00:30 GMT", naive) == 30.0


def test_retry_after_can_be_capped() -> None:
    assert answers.retry_after("86400", cap=60) == 60.0
    assert answers.retry_after("Sun, 29 Nov 2026 12:00:00 GMT", NOW, cap=60) == 60.0
    assert answers.retry_after("5", cap=60) == 5.0
    assert answers.retry_after("soon", cap=60) is None


@pytest.mark.parametrize("status", [408, 409, 425, 429, 503])
def test_a_transient_answer_is_a_transient_error_carrying_its_retry_after(status: int) -> None:
    error = answers.error(status, f"answered {status}", {"Retry-After": "7"})
    assert type(error) is TransientError
    assert (str(error), error.retry_after) == (f"answered {status}", 7.0)
    dated = answers.error(status, "x", {"Retry-After": "Sat, 28 Nov 2026 12:00:20 GMT"}, now=NOW)
    assert isinstance(dated, TransientError) and dated.retry_after == 20.0
    bare = answers.error(status, "x")
    assert isinstance(bare, TransientError) and bare.retry_after is None


@pytest.mark.parametrize("status", [301, 400, 401, 404, 422])
def test_a_permanent_answer_is_a_permanent_error(status: int) -> None:
    error = answers.error(status, f"answered {status}", {"Retry-After": "7"})
    assert type(error) is PermanentError and str(error) == f"answered {status}"


def test_a_success_is_no_error() -> None:
    with pytest.raises(ValueError, match="success"):
        answers.error(200, "fine")
    answers.raise_for(200, "fine")
    answers.raise_for(204, "fine", {"Retry-After": "7"})


def test_raise_for_raises_the_error_of_the_answer() -> None:
    with pytest.raises(TransientError, match="answered 429") as transient:
        answers.raise_for(429, "answered 429", {"retry-after": "2"})
    assert transient.value.retry_after == 2.0
    with pytest.raises(PermanentError, match="answered 403"):
        answers.raise_for(403, "answered 403")
