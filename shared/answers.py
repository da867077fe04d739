"""What a foreign system's HTTP answer means: done, try again (and when), or give up.

One rule for every client that calls out (the helpdesk source, the model endpoint, the reply
channel, the Slack webhook):

- 2xx: `ok`;
- 408, 409, 425, 429 and every 5xx: `transient`;
- anything else: `permanent` (the other 4xx; a 3xx, as redirects are not followed; a 1xx).

408 (the server gave up waiting for our request), 425 (too early) and 429 (rate-limited) say
"not now". 409 counts as transient as well: an endpoint taking an Idempotency-Key answers 409
while a request with the same key is still in progress (the IETF Idempotency-Key draft), and
OpenAI's own client retries it as a lock timeout. Retries stay bounded by the caller's retry
policy or deadline, so a 409 that never clears still ends as a failure.

`retry_after` reads a Retry-After header (RFC 9110 §10.2.3) as seconds to wait. Callers that
raise use `error`/`raise_for` (a `TransientError` carrying the Retry-After, or a
`PermanentError`); callers that return outcome values branch on `kind`.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import re
from collections.abc import Mapping
from typing import Literal

from . import clock
from .errors import PermanentError, TransientError

Kind = Literal["ok", "transient", "permanent"]

TRANSIENT = frozenset({408, 409, 425, 429})  # and every 5xx
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # delay-seconds; a fraction is tolerated


def kind(status: int) -> Kind:
    """What an answer with `status` means for the call that got it."""
    if 200 <= status < 300:
        return "ok"
    if status in TRANSIENT or 500 <= status < 600:
        return "transient"
    return "permanent"


def retry_after(
    source: Mapping[str, str] | str | None,
    now: dt.datetime | None = None,
    *,
    cap: float | None = None,
) -> float | None:
    """Seconds to wait from a Retry-After value, or from the headers carrying one.

    Delta-seconds ("120", "1.5") or an HTTP-date in any of RFC 9110's three forms (a date in
    the past means now: 0). None when there is none or it is not one of those (negative,
    "inf", "soon"). `now` (for an HTTP-date) defaults to the wall clock; `cap` bounds the
    answer. Header names are matched without regard to case.
    """
    value = _header(source) if isinstance(source, Mapping) else source
    if not value:
        return None
    value = value.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        now = now or dt.datetime.now(dt.UTC)
        seconds = (clock.aware(when) - clock.aware(now)).total_seconds()  # HTTP-dates are GMT
    seconds = max(0.0, seconds)
    return seconds if cap is None else min(cap, seconds)


def error(
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    now: dt.datetime | None = None,
) -> TransientError | PermanentError:
    """The error for an answer that is not ok: a `TransientError` carrying the answer's
    Retry-After when `kind(status)` is transient, else a `PermanentError`. `message` is the
    error's text (no answer body in it: bodies may carry personal data or secrets)."""
    verdict = kind(status)
    if verdict == "ok":
        raise ValueError(f"{status} is a success, not an error")
    if verdict == "transient":
        return TransientError(message, retry_after=retry_after(headers, now))
    return PermanentError(message)


def raise_for(
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    now: dt.datetime | None = None,
) -> None:
    """Nothing for a 2xx; else raises `error(status, message, headers)`."""
    if kind(status) != "ok":
        raise error(status, message, headers, now=now)


def _header(headers: Mapping[str, str]) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
