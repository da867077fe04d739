"""Request bodies with a ceiling: 413 past `limit` bytes, declared or streamed; 408 when the
body does not arrive within `timeout` seconds. Nothing past the limit is ever buffered.

`read_limited` reads straight from an ASGI `receive`; `BodyLimit` is the same as middleware, for
an app whose routes would otherwise buffer whatever a client sends (`request.body()`,
`request.form()`): the route then sees the body replayed from memory.
"""

from __future__ import annotations

import asyncio
import json
import re

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyRefused(Exception):
    """The body is refused before the route sees it: `status` 413 (too large) or 408 (too slow)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_limited(
    receive: Receive, declared: str | None, limit: int, timeout: float | None = None
) -> bytes:
    """The whole body, or BodyRefused (413 past `limit`, 408 after `timeout` seconds);
    ClientDisconnect when the client goes away first."""
    if declared is not None and re.fullmatch(r"\s*[0-9]+\s*", declared) and int(declared) > limit:
        raise BodyRefused(413, f"request body larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyRefused(413, f"request body larger than {limit} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except TimeoutError:
        raise BodyRefused(408, f"request body not received within {timeout:g}s") from None


def closing(exc: BodyRefused) -> dict[str, str]:
    """After a 408 the rest of the body may still come: close rather than read it as the next
    request. After a 413 the server discards what is left and the client reads the answer
    (closing then would reset a connection the client is still sending on)."""
    return {"Connection": "close"} if exc.status == 408 else {}


class BodyLimit:
    """ASGI middleware: read each HTTP request's body (at most `limit` bytes, within `timeout`
    seconds) before the app runs; refuse it with a JSON error otherwise. Subclasses may choose
    the limits per request (`limits`) and how a refusal looks (`refusal`)."""

    def __init__(self, app: ASGIApp, limit: int = 1024 * 1024, timeout: float | None = 10.0):
        self.app = app
        self.limit = limit
        self.timeout = timeout

    def limits(self, scope: Scope) -> tuple[int, float | None]:
        return self.limit, self.timeout

    def refusal(self, scope: Scope, exc: BodyRefused) -> Response:
        return Response(
            json.dumps({"error": str(exc)}),
            status_code=exc.status,
            media_type="application/json",
            headers=closing(exc),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, timeout = self.limits(scope)
        declared = Headers(scope=scope).get("content-length")
        try:
            body = await read_limited(receive, declared, limit, timeout)
        except BodyRefused as exc:
            await self.refusal(scope, exc)(scope, receive, send)
            return
        except ClientDisconnect:
            return
        pending = True

        async def replay() -> Message:
            nonlocal pending
            if pending:
                pending = False
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body, only the disconnect is left to hear

        await self.app(scope, replay, send)
