"""The `sql` source on real databases: a temp SQLite file, and PostgreSQL when one answers."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, inspect
from sqlmodel import Session, SQLModel

from services.drafter.checks import escalation_terms
from shared.conversation import open_round, waiting_on_customer
from shared.errors import PermanentError, TransientError
from shared.helpdesk import Ticket
from shared.helpdesk.demo import TICKETS
from shared.helpdesk.sql import SqlSource
from shared.helpdesk.tables import TABLES, CustomerRow, TicketRow
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
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlSource]:
    """An SqlSource on an empty database (no tables)."""
    with contextlib.ExitStack() as stack:
        if request.param == "postgresql":
            made = stack.enter_context(postgres_source())
        else:
            made = SqlSource(f"sqlite:///{tmp_path}/nested/helpdesk.db")  # parent made on demand
            stack.callback(made.engine.dispose)
        yield made


@pytest.fixture
def source(blank: SqlSource) -> SqlSource:
    """An SqlSource with empty tables."""
    blank.create_tables()
    return blank


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
        for t in (ticket.created_at, ticket.updated_at, *(m.created_at for m in ticket.messages))
    )


def round_ids(ticket: Ticket) -> list[str]:
    """The messages the ticket's open round answers ([] when nothing waits for a reply)."""
    found = open_round(ticket)
    return found.message_ids if found else []


@contextlib.contextmanager
def statements(source: SqlSource) -> Iterator[list[str]]:
    """The SQL statements the source's engine runs meanwhile."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    event.listen(source.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(source.engine, "before_cursor_execute", record)


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

    one = await seeded.get_ticket("T1012")  # one customer message: round two is a test's to add
    assert [(m.id, m.author, m.body) for m in one.messages] == [("T1012-m1", "customer", one.body)]
    assert len((await seeded.get_ticket("T1041")).messages) == 1
    # escalation words only where the landmark is, and there in the customer's own words
    flagged = {(t.id, m.author) for t in tickets for m in t.messages if escalation_terms(m.body)}
    assert flagged == {("T1027", "customer")}
    assert round_ids(lawyer) == ["T1027-m1"] and escalation_terms(lawyer.messages[0].body)
    assert [m.author for m in chinese.messages] == ["customer"]


async def test_demo_conversations(seeded: SqlSource) -> None:
    tickets = {t.id: t for t in await everything(seeded, limit=100)}
    for t in tickets.values():
        times = [m.created_at for m in t.messages]
        assert times == sorted(times) and times[0] == t.created_at <= times[-1] <= t.updated_at
        assert [m.id for m in t.messages] == [f"{t.id}-m{n}" for n in range(1, len(times) + 1)]
        assert t.messages[0].body == t.body and t.messages[0].author == "customer"
        assert all(m.author_name for m in t.messages)
    assert [i for i, t in tickets.items() if t.messages[-1].created_at != t.updated_at] == ["T1012"]
    after_reply = sorted(  # the customer wrote again after an agent's reply
        i for i, t in tickets.items() if round_ids(t) and round_ids(t)[0] != f"{i}-m1"
    )
    assert {"T1003", "T1014", "T1021"} <= set(after_reply) and len(after_reply) >= 5
    waiting = sorted(i for i, t in tickets.items() if waiting_on_customer(t))
    pending = sorted(i for i, t in tickets.items() if t.status == "pending")
    assert waiting == sorted([*pending, "T1040"])  # every pending ticket, and the closed one
    assert "T1011" in waiting and len(pending) >= 3
    assert all(round_ids(tickets[i]) == [] for i in waiting)
    noted = [i for i, t in tickets.items() if any(m.author == "note" for m in t.messages)]
    assert noted and all(round_ids(tickets[i]) for i in noted)  # a note is no reply
    t1003 = tickets["T1003"]
    assert [m.author for m in t1003.messages] == ["customer", "agent", "customer"]
    assert round_ids(t1003) == ["T1003-m3"]
    # stale: open or pending, untouched since before 2026-11-08 (20 days before 2026-11-28)
    stale = [
        i
        for i, t in tickets.items()
        if t.status != "closed" and t.updated_at < dt.datetime(2026, 11, 8, tzinfo=dt.UTC)
    ]
    assert len(stale) == 7
    assert tickets["T1019"].updated_at == tickets["T1020"].updated_at


async def test_a_page_reads_its_conversations_in_one_more_query(seeded: SqlSource) -> None:
    with statements(seeded) as seen:
        page = await seeded.list_tickets(limit=20)
    assert len(page.tickets) == 20 and sum(len(t.messages) for t in page.tickets) > 20
    assert len([q for q in seen if q.lstrip().upper().startswith("SELECT")]) == 2
    with statements(seeded) as seen:
        ticket = await seeded.get_ticket("T1008")
    assert len(ticket.messages) == 5
    assert len([q for q in seen if q.lstrip().upper().startswith("SELECT")]) == 2


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

    assert [(m.id, m.author, m.author_name, m.body) for m in ticket.messages] == [
        ("T1042-m1", "customer", "New Customer", "Order #1?")
    ]
    assert ticket.messages[0].created_at == ticket.created_at

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


async def test_messages_move_the_conversation_and_the_status(seeded: SqlSource) -> None:
    before = await seeded.get_ticket("T1012")
    ticket, message = seeded.add_message("T1012", "Still charged twice, any news?")
    assert (message.id, message.author, message.author_name) == (
        "T1012-m2",
        "customer",
        "Daniel Murphy",
    )
    assert ticket.updated_at == message.created_at > before.updated_at and aware(ticket)
    assert ticket.messages == [*before.messages, message] and ticket.status == "open"
    assert await seeded.get_ticket("T1012") == ticket
    assert (await everything(seeded, updated_since=ticket.updated_at)) == [ticket]
    assert round_ids(ticket) == ["T1012-m1", "T1012-m2"]

    answered, reply = seeded.add_message("T1012", "Refunded, sorry!", "agent")
    assert (reply.id, reply.author_name, answered.status) == ("T1012-m3", "Support team", "pending")
    assert waiting_on_customer(answered) and round_ids(answered) == []
    noted, note = seeded.add_message("T1012", "Refund ref R-1", "note", "Maya Chen")
    assert (note.id, note.author_name, noted.status) == ("T1012-m4", "Maya Chen", "pending")
    again, _ = seeded.add_message("T1012", "Thanks, got it.")
    assert again.status == "open" and round_ids(again) == ["T1012-m5"]
    assert [m.author for m in again.messages] == [
        "customer",
        "customer",
        "agent",
        "note",
        "customer",
    ]
    assert again.updated_at > noted.updated_at > answered.updated_at > ticket.updated_at

    closed = seeded.set_status("T1012", "closed")
    assert closed.messages == again.messages and closed.updated_at > again.updated_at
    agent_on_closed, _ = seeded.add_message("T1012", "One more thing.", "agent")
    assert agent_on_closed.status == "closed"
    reopened, _ = seeded.add_message("T1012", "Actually, it happened again.")
    assert reopened.status == "open"
    waiting, _ = seeded.add_message("T1001", "I can see the refund now.")  # T1001 is pending
    assert waiting.status == "open"


async def test_message_mistakes(seeded: SqlSource) -> None:
    with pytest.raises(PermanentError, match="T9999 does not exist"):
        seeded.add_message("T9999", "hello")
    with pytest.raises(ValueError, match="empty"):
        seeded.add_message("T1012", "  \n")
    with pytest.raises(ValueError, match="author"):
        seeded.add_message("T1012", "hello", "robot")  # type: ignore[arg-type]
    assert len((await seeded.get_ticket("T1012")).messages) == 1


async def test_a_database_from_before_conversations_gains_them(blank: SqlSource) -> None:
    old = [t for t in TABLES if t.name != "ticket_messages"]
    SQLModel.metadata.create_all(blank.engine, tables=old)
    demo = next(t for t in TICKETS if t.id == "T1041")
    with Session(blank.engine) as session:
        c = demo.customer
        session.add(CustomerRow(id=c.id, name=c.name, email=c.email))
        session.flush()
        session.add(
            TicketRow(
                id=demo.id,
                customer_id=c.id,
                subject=demo.subject,
                body=demo.body,
                status=demo.status,
                priority=demo.priority,
                created_at=demo.created_at,
                updated_at=demo.updated_at,
            )
        )
        session.commit()
    blank.create_tables()
    assert "ticket_messages" in inspect(blank.engine).get_table_names()
    assert await blank.get_ticket("T1041") == demo  # its opening message, made up by the model
    assert blank.seed_demo() is False  # it has tickets already
    ticket, message = blank.add_message("T1041", "Also, can I get it as a PDF?")
    assert message.id == "T1041-m2"
    assert ticket.messages == [*demo.messages, message]
    assert await blank.get_ticket("T1041") == ticket


async def test_concurrent_messages_get_distinct_numbers(seeded: SqlSource) -> None:
    start = threading.Barrier(2)
    added: list[str] = []

    def writer(name: str) -> None:
        start.wait()
        for n in range(4):  # fewer rivals' inserts than add_message's attempts: none can starve
            added.append(seeded.add_message("T1041", f"{name} {n}")[1].id)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ticket = await seeded.get_ticket("T1041")
    assert sorted(added) == sorted(f"T1041-m{n}" for n in range(2, 10))
    assert [m.id for m in ticket.messages] == [f"T1041-m{n}" for n in range(1, 10)]
    assert sorted(m.body for m in ticket.messages[1:]) == sorted(
        f"{w} {n}" for w in "ab" for n in range(4)
    )


async def test_an_unreachable_database_is_transient() -> None:
    source = SqlSource("postgresql://postgres@127.0.0.1:1/none")
    try:
        with pytest.raises(TransientError, match="source database error"):
            await source.get_ticket("T1001")
    finally:
        await source.close()
