"""The `sql` source on real databases: a temp SQLite file, and PostgreSQL when one answers."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.errors import PermanentError, TransientError
from shared.source import Ticket
from shared.source.demo import TICKETS
from shared.source.sql import SqlSource
from tests.postgres import POSTGRES_URL, fresh_schema

CJK = re.compile(r"[\u4e00-\u9fff]")


@contextlib.contextmanager
def postgres_source() -> Iterator[SqlSource]:
    """A source in a fresh schema of the test server (dropped afterwards), or a skip."""
    with fresh_schema() as schema:
        source = SqlSource(POSTGRES_URL, connect_args={"options": f"-csearch_path={schema}"})
        try:
            yield source
        finally:
            source.engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlSource]:
    """An SqlSource with empty tables."""
    with contextlib.ExitStack() as stack:
        if request.param == "postgresql":
            made = stack.enter_context(postgres_source())
        else:
            made = SqlSource(f"sqlite:///{tmp_path}/nested/helpdesk.db")  # parent made on demand
            stack.callback(made.engine.dispose)
        made.create_tables()
        yield made


@pytest.fixture
def seeded(source: SqlSource) -> SqlSource:
    assert source.seed_demo()
    return source


async def everything(source: SqlSource, limit: int = 7, **kwargs: object) -> list[Ticket]:
    found: list[Ticket] = []
    cursor = None
    while True:
        page = await source.list_tickets(cursor=cursor, limit=limit, **kwargs)  # type: ignore[arg-type]
        assert len(page.tickets) <= limit
        found.extend(page.tickets)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def aware(ticket: Ticket) -> bool:
    return all(
        t.tzinfo is not None and t.utcoffset() == dt.timedelta(0)
        for t in (ticket.created_at, ticket.updated_at)
    )


async def test_seeding_twice_loads_the_demo_once(source: SqlSource) -> None:
    assert source.seed_demo() is True
    source.create_tables()  # idempotent too
    assert source.seed_demo() is False
    tickets = await everything(source, limit=100)
    assert sorted(t.id for t in tickets) == [f"T{n}" for n in range(1001, 1042)]


async def test_a_missing_ticket_is_permanent(seeded: SqlSource) -> None:
    with pytest.raises(PermanentError, match="T9999 does not exist"):
        await seeded.get_ticket("T9999")


async def test_demo_landmarks(seeded: SqlSource) -> None:
    lawyer = await seeded.get_ticket("T1027")
    assert "lawyer" in lawyer.body and lawyer.status == "open"
    chinese = await seeded.get_ticket("T1033")
    assert CJK.search(chinese.subject + chinese.body)
    assert (await seeded.get_ticket("T1040")).status == "closed"
    for ticket_id in ("T1003", "T1012", "T1041"):
        assert (await seeded.get_ticket(ticket_id)).status == "open"
    tickets = await everything(seeded, limit=100)
    assert [t.id for t in tickets if t.status == "closed"] == ["T1040"]
    assert [t.id for t in tickets if "lawyer" in t.body.lower()] == ["T1027"]
    assert [t.id for t in tickets if CJK.search(t.subject + t.body)] == ["T1033"]
    assert all(aware(t) for t in tickets)
    assert tickets == sorted(TICKETS, key=lambda t: (t.updated_at, t.id))  # round trip


async def test_pages_of_seven_return_every_ticket_once_in_order(seeded: SqlSource) -> None:
    pages = []
    cursor = None
    while True:
        page = await seeded.list_tickets(cursor=cursor, limit=7)
        pages.append([t.id for t in page.tickets])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [len(p) for p in pages] == [7, 7, 7, 7, 7, 6]
    expected = sorted(TICKETS, key=lambda t: (t.updated_at, t.id))
    assert [i for p in pages for i in p] == [t.id for t in expected]


async def test_updated_since_filters(seeded: SqlSource) -> None:
    since = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    expected = sorted(
        (t for t in TICKETS if t.updated_at >= since), key=lambda t: (t.updated_at, t.id)
    )
    assert 3 < len(expected) < 41
    assert [t.id for t in await everything(seeded, updated_since=since, limit=3)] == [
        t.id for t in expected
    ]
    # the same instant in another zone, and exactly at a ticket's updated_at (inclusive)
    tokyo = since.astimezone(dt.timezone(dt.timedelta(hours=9)))
    assert await everything(seeded, updated_since=tokyo) == expected
    at = await seeded.get_ticket("T1027")
    assert (await everything(seeded, updated_since=at.updated_at))[0].id == "T1027"


async def test_a_bad_cursor_is_permanent(seeded: SqlSource) -> None:
    with pytest.raises(PermanentError, match="cursor"):
        await seeded.list_tickets(cursor="not a cursor!")


async def test_created_tickets_get_the_next_number_and_are_listed(seeded: SqlSource) -> None:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    ticket = seeded.create_ticket("new.customer@example.net", "Where is my parcel?", "Order #1?")
    assert ticket.id == "T1042"
    assert ticket.status == "open" and ticket.priority == "normal" and aware(ticket)
    assert ticket.created_at == ticket.updated_at >= before
    assert ticket.customer.email == "new.customer@example.net"
    assert ticket.customer.id == "C031"
    assert await seeded.get_ticket("T1042") == ticket

    again = seeded.create_ticket("new.customer@example.net", "Still waiting", "Hello?", "high")
    assert again.id == "T1043" and again.customer == ticket.customer
    by_id = seeded.create_ticket("C012", "Another charge", "Charged again.", "urgent")
    assert by_id.id == "T1044" and by_id.customer.name == "Daniel Murphy"

    recent = await everything(seeded, updated_since=before)
    assert [t.id for t in recent] == ["T1042", "T1043", "T1044"]
    assert len(await everything(seeded)) == 44
    with pytest.raises(ValueError, match="C999"):
        seeded.create_ticket("C999", "x", "y")


async def test_set_status_bumps_updated_at(seeded: SqlSource) -> None:
    closed = seeded.set_status("T1012", "closed")
    assert closed.status == "closed" and aware(closed)
    assert closed.updated_at > max(t.updated_at for t in TICKETS)
    assert (await everything(seeded))[-1] == closed == await seeded.get_ticket("T1012")
    with pytest.raises(PermanentError, match="T9999 does not exist"):
        seeded.set_status("T9999", "open")


async def test_an_unreachable_database_is_transient() -> None:
    source = SqlSource("postgresql://postgres@127.0.0.1:1/none")
    try:
        with pytest.raises(TransientError, match="source database error"):
            await source.get_ticket("T1001")
    finally:
        await source.close()
