"""An outbound webhook endpoint: the reply channel, the supervisors' chat webhook, the daily
report's. One `post` makes at most one call, behind the endpoint's circuit breaker and rate
limit, and never raises for the answer; what the answer means is one `Attempt`:

| outcome   | when                                                                          |
| --------- | ----------------------------------------------------------------------------- |
| `ok`      | a 2xx                                                                         |
| `failed`  | refused for good: any other 4xx (the endpoint works; this request it refuses) |
| `retry`   | nothing sent (no connection), or a transient answer (408, 409, 425, 429, 5xx) |
| `unknown` | sent, no answer (a timeout, a broken exchange): it may have arrived          |
| `wait`    | no call made: the caller's record of an `Unavailable` (`Attempt.waited`)      |

(`shared.answers` reads the status and `Retry-After`.) An open breaker or an exhausted rate
limit makes no call and raises `Unavailable`: the delivery waits in place, spending no attempt.
The URL may carry a token (a Slack webhook's does): it is never logged.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from . import answers
from .breaker import CircuitBreaker
from .errors import Unavailable
from .ratelimit import TokenBucket

Outcome = Literal["ok", "failed", "retry", "unknown", "wait"]  # wait: no call was made


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    status_code: int | None
    duration_ms: int
    error: str | None = None
    retry_after: float | None = None

    @classmethod
    def waited(cls, exc: Unavailable) -> Attempt:
        """The record of a post the breaker or the rate limit held back (`Unavailable`)."""
        return cls("wait", None, 0, str(exc), exc.retry_after)


class Endpoint:
    def __init__(
        self,
        url: str,
        *,
        name: str,
        connect_timeout: float,
        read_timeout: float,
        breaker: CircuitBreaker,
        bucket: TokenBucket,
    ) -> None:
        self.url = url
        self.name = name
        self.breaker = breaker
        self.bucket = bucket
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self.client = httpx.AsyncClient(timeout=timeout)

    async def close(self) -> None:
        await self.client.aclose()

    async def post(
        self,
        *,
        content: bytes | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Attempt:
        """One attempt; raises `Unavailable` when the breaker or the rate limit says wait."""
        if not self.breaker.allow():
            raise Unavailable(f"{self.name} circuit open", retry_after=self.breaker.retry_after())
        if not await self.bucket.take(max_wait=5.0):
            self.breaker.release()  # no call made: hand back a half-open probe slot, if taken
            raise Unavailable(f"{self.name} rate limit", retry_after=self.bucket.wait_time())
        started = time.monotonic()
        try:
            response = await self.client.post(
                self.url, content=content, json=json, headers=dict(headers or {})
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            self.breaker.record(False)
            return Attempt("retry", None, _ms(started), f"not sent: {exc.__class__.__name__}")
        except httpx.TimeoutException as exc:
            self.breaker.record(False)
            return Attempt("unknown", None, _ms(started), f"no answer: {exc.__class__.__name__}")
        except httpx.HTTPError as exc:
            self.breaker.record(False)
            broken = f"broken exchange: {exc.__class__.__name__}"
            return Attempt("unknown", None, _ms(started), broken)
        code = response.status_code
        verdict = answers.kind(code)
        if verdict == "ok":
            self.breaker.record(True)
            return Attempt("ok", code, _ms(started))
        if verdict == "transient":
            self.breaker.record(False)
            wait = answers.retry_after(response.headers)
            return Attempt("retry", code, _ms(started), f"answered {code}", wait)
        self.breaker.record(True)  # the endpoint works; it refused this request for good
        refused = f"refused with {code}: {response.text[:200]}"
        return Attempt("failed", code, _ms(started), refused)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
