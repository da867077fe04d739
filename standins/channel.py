"""A real HTTP endpoint standing in for a helpdesk's reply API (the sender's webhook channel),
or for a Slack-compatible incoming webhook (the sender's supervisor notifications).

`POST /replies` is answered 200 `{"received": true}` and recorded, unless something says
otherwise: `down` (every request 503), `fail_for(seconds)` (503 for a while: the fault suite's
channel outage), `fail_first_per_key` (every Idempotency-Key's first request 503: a flaky
endpoint), or the scripted steps `fail_next` / `hang_next`, taken first in, first out, one per
request (a hang sleeps, then answers 200). A scripted status carries `error_text` and, when set,
`retry_after` as Retry-After.

    channel = FakeChannel().start()      # or: with FakeChannel() as channel: ...
    ... DESK_CHANNEL_URL=channel.url ...
    channel.keys()                       # the Idempotency-Key of every request, in order
    channel.delivered()                  # ... of those answered 200
    channel.stop()

Every request is recorded in `requests` (a snapshot list) as {"headers" (lower-case names),
"body" (bytes), "at" (time.monotonic() on arrival), "status" (what it was answered)}.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .server import ThreadedServer


class FakeChannel:
    """A reply endpoint on 127.0.0.1, in a background thread."""

    def __init__(self) -> None:
        self.script: list[tuple[str, float]] = []  # ("status", code) or ("hang", seconds)
        self.error_text = "scripted"
        self.retry_after: str | None = None  # sent as Retry-After with each scripted status
        self.down = False
        self.fail_first_per_key = False
        self._down_until = 0.0
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._server = ThreadedServer(
            Starlette(routes=[Route("/replies", self._reply, methods=["POST"])]),
            name="FakeChannel",
        )

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self._server.base_url}/replies"

    def start(self, timeout: float = 10.0) -> FakeChannel:
        self._server.start(timeout)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (a request still hanging is woken and answered first). Idempotent."""
        self._server.stop(timeout)

    def __enter__(self) -> FakeChannel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- scripting ---------------------------------------------------------------------------

    def fail_next(self, status: int, times: int = 1) -> None:
        with self._lock:
            self.script += [("status", status)] * times

    def hang_next(self, seconds: float, times: int = 1) -> None:
        with self._lock:
            self.script += [("hang", seconds)] * times

    def fail_for(self, seconds: float) -> None:
        """Answer 503 to every request for the next `seconds`."""
        with self._lock:
            self._down_until = time.monotonic() + seconds

    # ---- what was asked ----------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def keys(self) -> list[str]:
        """The Idempotency-Key of every request, oldest first."""
        return [r["headers"].get("idempotency-key", "") for r in self.requests]

    def delivered(self) -> list[str]:
        """The Idempotency-Key of every request answered 200, oldest first."""
        return [
            r["headers"].get("idempotency-key", "") for r in self.requests if r["status"] == 200
        ]

    @property
    def refused(self) -> int:
        """How many requests were answered with something other than 200."""
        return sum(1 for r in self.requests if r["status"] != 200)

    # ---- the endpoint ------------------------------------------------------------------------

    async def _reply(self, request: Request) -> Response:
        body = await request.body()
        at = time.monotonic()
        key = request.headers.get("idempotency-key", "")
        with self._lock:
            kind, value = "ok", 200.0
            if self.down or at < self._down_until:
                kind, value = "down", 503
            elif self.fail_first_per_key and not self._seen(key):
                kind, value = "flaky", 503
            elif self.script:
                kind, value = self.script.pop(0)
            status = 200 if kind in ("ok", "hang") else int(value)
            self._requests.append(
                {"headers": dict(request.headers), "body": body, "at": at, "status": status}
            )
        if kind in ("down", "flaky"):
            return JSONResponse({"error": kind}, status_code=503)
        if kind == "status":
            headers = {"Retry-After": self.retry_after} if self.retry_after else None
            return JSONResponse({"error": self.error_text}, status_code=int(value), headers=headers)
        if kind == "hang":
            await self._server.sleep(value)
        return JSONResponse({"received": True}, status_code=200)

    def _seen(self, key: str) -> int:
        return sum(1 for r in self._requests if r["headers"].get("idempotency-key", "") == key)
