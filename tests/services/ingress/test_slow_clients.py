"""Slow clients against the real ingress's public port (uvicorn, a real nats-server): headers that
trickle in are cut off at the header deadline, a body that stops is cut off at the idle timeout,
and honest clients, slow bodies that keep coming and keep-alive connections are served."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from desk.natsserver import NatsServer
from tests.helpers import eventually
from tests.services_running import ServiceProcess

from .conftest import ingress_env, signed

HEADER_TIMEOUT = 2.0
IDLE_TIMEOUT = 1.5


@pytest.fixture(scope="module")
def ingress(module_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """An ingress with short deadlines (and the app's own body deadline out of their way)."""
    env = {
        **ingress_env(module_nats.url),
        "DESK_HTTP_HEADER_TIMEOUT": str(HEADER_TIMEOUT),
        "DESK_HTTP_IDLE_TIMEOUT": str(IDLE_TIMEOUT),
        "DESK_BODY_TIMEOUT": "60",
    }
    log: Path = tmp_path_factory.mktemp("slow") / "ingress.log"
    service = ServiceProcess(["ingress"], env, log).start()
    try:
        yield service.port
    finally:
        service.stop()


async def _trickle_headers(
    port: int, every: float, trickling: list[int] | None = None
) -> tuple[bytes, float]:
    """Open a connection and send a request line, then one header line every `every` seconds,
    never the blank line that ends them; return what the server said and when it hung up.
    Once the first header line is out, appends to `trickling`."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def trickle() -> None:
        writer.write(b"POST /webhooks/helpdesk HTTP/1.1\r\nHost: x\r\n")
        n = 0
        while True:
            await asyncio.sleep(every)
            writer.write(b"X-Slow-%d: still here\r\n" % n)
            await writer.drain()
            if n == 0 and trickling is not None:
                trickling.append(port)
            n += 1

    sender = asyncio.create_task(trickle())
    try:
        # the server's hang-up, or this test's own deadline: far past the header timeout
        answer = await asyncio.wait_for(reader.read(), timeout=HEADER_TIMEOUT + 8)
        return answer, time.monotonic() - started
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        writer.close()


async def test_twenty_slow_header_connections_are_closed_at_the_header_deadline(
    ingress: int,
) -> None:
    trickling: list[int] = []
    slow = [asyncio.create_task(_trickle_headers(ingress, 0.5, trickling)) for _ in range(20)]
    await eventually(lambda: len(trickling) == 20, message="twenty connections trickling")
    # while they trickle, an honest client is answered
    event_id = f"evt_{uuid.uuid4().hex[:12]}"
    body, headers = signed({"id": event_id, "type": "ticket.created"}, msg_id=event_id)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ingress}") as client:
        honest = await client.post("/webhooks/helpdesk", content=body, headers=headers)
    assert honest.status_code == 202, honest.text

    for answer, took in await asyncio.gather(*slow):
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert HEADER_TIMEOUT * 0.9 <= took < HEADER_TIMEOUT + 4, took


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """One whole response (headers and a Content-Length body) from a kept-alive connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


async def test_a_body_that_stops_is_cut_off_and_a_slow_complete_body_is_served(
    ingress: int,
) -> None:
    event_id = f"evt_{uuid.uuid4().hex[:12]}"
    body, headers = signed({"id": event_id, "type": "ticket.created"}, msg_id=event_id)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST /webhooks/helpdesk HTTP/1.1\r\nHost: x\r\n{head}Content-Length: {len(body)}\r\n\r\n"
    ).encode()

    # a body that keeps coming, slower than the header deadline in all, on a keep-alive
    # connection that then asks again (the deadline restarts after each answer)
    reader, writer = await asyncio.open_connection("127.0.0.1", ingress)
    try:
        writer.write(request)
        chunks = [body[i : i + 8] for i in range(0, len(body), 8)]
        pause = (HEADER_TIMEOUT + 1) / len(chunks)
        assert pause < IDLE_TIMEOUT
        for chunk in chunks:
            await asyncio.sleep(pause)
            writer.write(chunk)
            await writer.drain()
        assert (await asyncio.wait_for(_answer(reader), timeout=10)).startswith(b"HTTP/1.1 202 ")
        await asyncio.sleep(HEADER_TIMEOUT / 2)  # idle on the kept-alive connection
        writer.write(request + body)
        again = await asyncio.wait_for(_answer(reader), timeout=10)
        assert again.startswith(b"HTTP/1.1 202 "), again  # the same event: a duplicate, 202
    finally:
        writer.close()

    # a body that stops half-way: the connection is closed once it has been idle that long
    reader, writer = await asyncio.open_connection("127.0.0.1", ingress)
    try:
        started = time.monotonic()
        writer.write(request + body[:10])
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=IDLE_TIMEOUT + 8)
        took = time.monotonic() - started
        assert b"202" not in answer
        assert IDLE_TIMEOUT * 0.9 <= took < IDLE_TIMEOUT + 4, took
    finally:
        writer.close()
