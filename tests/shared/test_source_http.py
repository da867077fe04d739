"""The `http` source against a real helpdesk API: Starlette on uvicorn, backed by the demo data."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.errors import PermanentError, TransientError
from shared.http import HttpServer
from shared.source import Ticket
from shared.source.demo import TICKETS
from shared.source.http import HttpSource, retry_after
from shared.source.sql import SqlSource
from tests.helpdesk_server import TOKEN, helpdesk_app

ORDERED = sorted(TICKETS, key=lambda t: (t.updated_at, t.id))


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[str]:
    """The helpdesk API's base URL."""
    source = SqlSource(f"sqlite:///{tmp_path}/helpdesk.db")
    source.create_tables()
    source.seed_demo()
    release = asyncio.Event()
    server = HttpServer(helpdesk_app(source, release), "127.0.0.1", 0)
    await server.start()
    try:
        yield server.url
    finally:
        release.set()
        await server.stop()
        await source.close()


def client(base_url: str, **options: Any) -> HttpSource:
    return HttpSource(base_url, **{"auth_value": TOKEN, **options})


@pytest.fixture
async def source(api: str) -> AsyncIterator[HttpSource]:
    made = client(api)
    try:
        yield made
    finally:
        await made.close()


async def list_all(source: HttpSource, limit: int) -> tuple[list[Ticket], int]:
    found: list[Ticket] = []
    cursor, pages = None, 0
    while True:
        page = await source.list_tickets(cursor=cursor, limit=limit)
        found.extend(page.tickets)
        pages += 1
        if page.next_cursor is None:
            return found, pages
        cursor = page.next_cursor


async def test_get_ticket(source: HttpSource) -> None:
    ticket = await source.get_ticket("T1033")
    assert ticket == next(t for t in TICKETS if t.id == "T1033")
    assert ticket.customer.name == "李娜"
    assert ticket.updated_at.tzinfo is not None


async def test_a_missing_ticket_is_permanent(source: HttpSource) -> None:
    with pytest.raises(PermanentError, match="T9999 does not exist"):
        await source.get_ticket("T9999")


async def test_pages_cover_every_ticket_once(source: HttpSource) -> None:
    assert await list_all(source, limit=10) == (ORDERED, 5)


async def test_paths_keys_parameters_and_auth_header_are_configurable(api: str) -> None:
    source = client(
        api,
        tickets_path="/v2/issues",
        ticket_path="/v2/issues/{id}/detail",
        auth_header="X-Api-Key",
        items_key="items",
        next_key="next",
        updated_since_param="since",
        cursor_param="after",
        limit_param="per_page",
    )
    try:
        assert (await source.get_ticket("T1041")).subject == "Question about my invoice"
        assert await list_all(source, limit=7) == (ORDERED, 6)
        since = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
        page = await source.list_tickets(updated_since=since)
        assert page.tickets == [t for t in ORDERED if t.updated_at >= since]
    finally:
        await source.close()


async def test_updated_since(source: HttpSource) -> None:
    since = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    page = await source.list_tickets(updated_since=since, limit=100)
    assert page.next_cursor is None
    assert page.tickets == [t for t in ORDERED if t.updated_at >= since]
    assert 0 < len(page.tickets) < len(ORDERED)


async def test_503_is_transient(api: str) -> None:
    source = client(api, ticket_path="/unavailable/{id}")
    try:
        with pytest.raises(TransientError, match="503") as caught:
            await source.get_ticket("T1001")
        assert caught.value.retry_after is None
    finally:
        await source.close()


async def test_429_is_transient_and_honours_retry_after(api: str) -> None:
    source = client(api, ticket_path="/busy/{id}")
    try:
        with pytest.raises(TransientError, match="429") as caught:
            await source.get_ticket("T1001")
        assert caught.value.retry_after == 7
    finally:
        await source.close()


async def test_a_read_timeout_is_transient(api: str) -> None:
    source = client(api, ticket_path="/slow/{id}", read_timeout=0.2)
    try:
        with pytest.raises(TransientError, match="timed out"):
            await source.get_ticket("T1001")
    finally:
        await source.close()


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = client(f"http://127.0.0.1:{port}", connect_timeout=1.0)
    try:
        with pytest.raises(TransientError, match="unreachable"):
            await source.list_tickets()
    finally:
        await source.close()


async def test_wrong_auth_is_permanent_and_never_echoed(api: str) -> None:
    source = client(api, auth_value="Bearer wrong-token")
    try:
        with pytest.raises(PermanentError, match="401") as caught:
            await source.get_ticket("T1001")
        assert "wrong-token" not in str(caught.value)
        with pytest.raises(PermanentError, match="401"):
            await source.list_tickets()
    finally:
        await source.close()


async def test_malformed_answers_are_permanent(api: str) -> None:
    source = client(api, ticket_path="/garbage/{id}", items_key="issues")
    try:
        with pytest.raises(PermanentError, match="malformed ticket from"):
            await source.get_ticket("T1001")
        with pytest.raises(PermanentError, match="malformed ticket list"):
            await source.list_tickets()  # no "issues" key in the answer
    finally:
        await source.close()


def test_retry_after_forms() -> None:
    now = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
    assert retry_after("7") == 7.0
    assert retry_after(" 1.5 ") == 1.5
    assert retry_after("Sat, 28 Nov 2026 12:00:30 GMT", now) == 30.0
    assert retry_after("Sat, 28 Nov 2026 11:00:00 GMT", now) == 0.0
    assert retry_after("soon") is None
    assert retry_after(None) is None
