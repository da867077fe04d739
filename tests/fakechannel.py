"""A real HTTP endpoint standing in for a helpdesk's reply API (the sender's webhook channel),
or for a Slack-compatible incoming webhook (the sender's supervisor notifications)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.http import HttpServer


class FakeChannel:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[str, float]] = []  # ("status", code) or ("hang", seconds)
        self.error_text = "scripted"
        self.retry_after: str | None = None  # sent as Retry-After with each scripted status
        self.down = False
        self.fail_first_per_key = False  # a flaky endpoint: every key's first request gets 503
        self.server = HttpServer(
            Starlette(routes=[Route("/replies", self.reply, methods=["POST"])]), "127.0.0.1", 0
        )

    @property
    def url(self) -> str:
        return f"{self.server.url}/replies"

    def fail_next(self, status: int, times: int = 1) -> None:
        self.script += [("status", status)] * times

    def hang_next(self, seconds: float, times: int = 1) -> None:
        self.script += [("hang", seconds)] * times

    async def reply(self, request: Request) -> Response:
        body = await request.body()
        self.requests.append(
            {"headers": dict(request.headers), "body": body, "at": time.monotonic()}
        )
        if self.down:
            return JSONResponse({"error": "down"}, status_code=503)
        key = request.headers.get("idempotency-key", "")
        if self.fail_first_per_key and self.keys().count(key) == 1:
            return JSONResponse({"error": "flaky"}, status_code=503)
        if self.script:
            kind, value = self.script.pop(0)
            if kind == "hang":
                await asyncio.sleep(value)
            else:
                headers = {"Retry-After": self.retry_after} if self.retry_after else None
                return JSONResponse(
                    {"error": self.error_text}, status_code=int(value), headers=headers
                )
        return JSONResponse({"received": True}, status_code=200)

    def keys(self) -> list[str]:
        return [r["headers"].get("idempotency-key", "") for r in self.requests]


@pytest.fixture
async def fake_channel() -> AsyncIterator[FakeChannel]:
    channel = FakeChannel()
    await channel.server.start()
    try:
        yield channel
    finally:
        await channel.server.stop()
