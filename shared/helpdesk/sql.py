"""The `sql` source: a helpdesk database (SQLite or PostgreSQL) through SQLModel.

Sessions are synchronous and run in a worker thread (`asyncio.to_thread`) for the protocol's
async methods; the administrative methods (`create_tables`, `seed_demo`, `create_ticket`,
`add_message`, `set_status`) are plain synchronous calls for the CLI and start-up.

A ticket's conversation is in `ticket_messages`, ordered by `seq` within the ticket. A ticket
with no message rows (a database from before conversations) reads as its opening message.

Times are stored in UTC. SQLite keeps no time zone, so every datetime read back is made aware
(UTC) here, and every datetime written or compared is converted to UTC first.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args

from sqlalchemy import DateTime, Index, Text, and_, bindparam, func, or_
from sqlalchemy import select as core_select
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from .. import clock
from ..db import private_sqlite_file
from ..errors import PermanentError, TransientError
from . import demo
from .base import (
    AuthorKind,
    Customer,
    Message,
    Priority,
    Ticket,
    TicketPage,
    TicketStatus,
    opening_message_id,
    ticket_not_found,
)

T = TypeVar("T")


class CustomerRow(SQLModel, table=True):
    __tablename__ = "customers"

    id: str = Field(primary_key=True, max_length=64)
    name: str
    email: str = Field(unique=True, max_length=320)


class TicketRow(SQLModel, table=True):
    __tablename__ = "tickets"
    __table_args__ = (Index("ix_tickets_updated_at_id", "updated_at", "id"),)

    id: str = Field(primary_key=True, max_length=64)
    customer_id: str = Field(foreign_key="customers.id", index=True, max_length=64)
    subject: str
    body: str = Field(sa_type=Text)
    status: str = Field(max_length=16)
    priority: str = Field(default="normal", max_length=16)
    created_at: dt.datetime = Field(sa_type=DateTime(timezone=True))
    updated_at: dt.datetime = Field(sa_type=DateTime(timezone=True))


class MessageRow(SQLModel, table=True):
    """One message of a ticket's conversation; `seq` (1, 2, …) orders it within the ticket."""

    __tablename__ = "ticket_messages"
    __table_args__ = (Index("ux_ticket_messages_ticket_seq", "ticket_id", "seq", unique=True),)

    id: str = Field(primary_key=True, max_length=200)
    ticket_id: str = Field(foreign_key="tickets.id", index=True, max_length=64)
    seq: int
    author: str = Field(max_length=16)
    author_name: str = Field(default="")
    body: str = Field(sa_type=Text)
    created_at: dt.datetime = Field(sa_type=DateTime(timezone=True))


TABLES = [
    CustomerRow.__table__,  # type: ignore[attr-defined]
    TicketRow.__table__,  # type: ignore[attr-defined]
    MessageRow.__table__,  # type: ignore[attr-defined]
]

AGENT_NAME = "Support team"  # the author name of an agent message given without one


def encode_cursor(updated_at: dt.datetime, ticket_id: str) -> str:
    raw = json.dumps([clock.utc(updated_at).isoformat(), ticket_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, ticket_id = json.loads(raw)
        return clock.utc(dt.datetime.fromisoformat(stamp)), str(ticket_id)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise PermanentError("invalid cursor") from exc


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    """Database failures become `TransientError`, naming the driver's error (not the SQL)."""
    try:
        yield
    except SQLAlchemyError as exc:
        origin = getattr(exc, "orig", None) or exc
        lines = str(origin).strip().splitlines()
        detail = f": {lines[0][:200]}" if lines else ""
        raise TransientError(f"source database error: {type(origin).__name__}{detail}") from exc


def _engine(url: str, connect_args: dict[str, Any] | None) -> Engine:
    parsed: URL = make_url(url)
    args = dict(connect_args or {})
    options: dict[str, Any] = {"pool_pre_ping": True}
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3, not psycopg2
    if parsed.get_backend_name() == "sqlite":
        args.setdefault("check_same_thread", False)
        database = parsed.database or ""
        if database in ("", ":memory:") or "mode=memory" in url:
            options["poolclass"] = StaticPool  # one connection, or each thread sees its own db
        elif not database.startswith("file:"):
            private_sqlite_file(Path(database))  # customer data: 0600 before SQLite opens it
    elif parsed.get_backend_name() == "postgresql":
        args.setdefault("connect_timeout", 5)
    return create_engine(parsed, connect_args=args, **options)


_CUSTOMERS, _TICKETS, _MESSAGES = (t.c for t in TABLES)
# What `get_ticket` runs: Core statements, compiled once (through the ORM a read cost ~5x the CPU)
_TICKET_BY_ID = (
    core_select(
        _TICKETS.id,
        _TICKETS.subject,
        _TICKETS.body,
        _TICKETS.status,
        _TICKETS.priority,
        _TICKETS.created_at,
        _TICKETS.updated_at,
        _CUSTOMERS.id.label("customer_id"),
        _CUSTOMERS.name.label("customer_name"),
        _CUSTOMERS.email.label("customer_email"),
    )
    .join_from(TicketRow, CustomerRow, _TICKETS.customer_id == _CUSTOMERS.id)
    .where(_TICKETS.id == bindparam("ticket_id"))
)
_MESSAGES_OF_TICKET = (
    core_select(
        _MESSAGES.id,
        _MESSAGES.author,
        _MESSAGES.author_name,
        _MESSAGES.body,
        _MESSAGES.created_at,
    )
    .where(_MESSAGES.ticket_id == bindparam("ticket_id"))
    .order_by(_MESSAGES.seq)
)

_MESSAGE_EXISTS = core_select(_MESSAGES.id).where(_MESSAGES.id == bindparam("id"))


def _read(connection: Connection, ticket_id: str) -> Ticket:
    """One ticket with its conversation, oldest message first."""
    found = connection.execute(_TICKET_BY_ID, {"ticket_id": ticket_id}).first()
    if found is None:
        raise ticket_not_found(ticket_id)
    messages = connection.execute(_MESSAGES_OF_TICKET, {"ticket_id": ticket_id}).all()
    customer = Customer(id=found.customer_id, name=found.customer_name, email=found.customer_email)
    return _ticket(found, customer, messages)


def _message(row: Any) -> Message:
    """From a `MessageRow`, or a Core row of its columns."""
    return Message(
        id=row.id,
        author=row.author,  # type: ignore[arg-type]  # validated by the model
        author_name=row.author_name,
        body=row.body,
        created_at=clock.utc(row.created_at),
    )


def _ticket(row: Any, customer: CustomerRow | Customer, messages: Sequence[Any]) -> Ticket:
    """The ticket with its conversation; no message rows → the model adds the opening one.
    From ORM rows, or Core rows of the same columns."""
    return Ticket(
        id=row.id,
        customer=Customer(id=customer.id, name=customer.name, email=customer.email),
        subject=row.subject,
        body=row.body,
        status=row.status,  # type: ignore[arg-type]  # validated by the model
        priority=row.priority,  # type: ignore[arg-type]
        created_at=clock.utc(row.created_at),
        updated_at=clock.utc(row.updated_at),
        messages=[_message(m) for m in messages],
    )


def _messages_of(session: Session, ticket_ids: list[str]) -> dict[str, list[MessageRow]]:
    """The conversations of `ticket_ids` in one query, each oldest first."""
    grouped: dict[str, list[MessageRow]] = {tid: [] for tid in ticket_ids}
    if not ticket_ids:
        return grouped
    rows = session.exec(
        select(MessageRow)
        .where(col(MessageRow.ticket_id).in_(ticket_ids))
        .order_by(col(MessageRow.ticket_id), col(MessageRow.seq))
    ).all()
    for row in rows:
        grouped[row.ticket_id].append(row)
    return grouped


def _next_id(session: Session, prefix: str, column: Any, first: int) -> str:
    """`prefix` + one more than the highest number among ids `prefix<digits>`."""
    last = session.exec(
        select(column)
        .where(col(column).like(f"{prefix}%"))
        .order_by(func.length(column).desc(), col(column).desc())
        .limit(1)
    ).first()
    number = int(last[len(prefix) :]) + 1 if last and last[len(prefix) :].isdigit() else first
    return f"{prefix}{number}" if prefix == "T" else f"{prefix}{number:03d}"


def _name_from_email(email: str) -> str:
    local = email.split("@", 1)[0]
    return " ".join(p.capitalize() for p in local.replace("_", ".").split(".") if p) or email


class SqlSource:
    """The source system over a SQLAlchemy URL (`sqlite:///var/helpdesk.db`, `postgresql://…`)."""

    def __init__(self, url: str, *, connect_args: dict[str, Any] | None = None) -> None:
        self.engine = _engine(url, connect_args)

    # -- the SourceSystem protocol ---------------------------------------------------------

    async def get_ticket(self, ticket_id: str) -> Ticket:
        return await asyncio.to_thread(self._read, ticket_id)

    async def list_tickets(
        self,
        *,
        updated_since: dt.datetime | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> TicketPage:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        after = decode_cursor(cursor) if cursor else None
        return await asyncio.to_thread(
            self._session, lambda s: self._list(s, updated_since, after, limit)
        )

    async def close(self) -> None:
        await asyncio.to_thread(self.engine.dispose)

    # -- administration (synchronous) ------------------------------------------------------

    def create_tables(self) -> None:
        """Create the `customers`, `tickets` and `ticket_messages` tables where missing (a
        database from before conversations gains `ticket_messages`)."""
        with _mapped_errors():
            SQLModel.metadata.create_all(self.engine, tables=TABLES)

    def seed_demo(self) -> bool:
        """Insert the demo helpdesk if the tickets table is empty; True if this call did."""

        def seed(session: Session) -> bool:
            if session.exec(select(func.count()).select_from(TicketRow)).one():
                return False
            for c in demo.CUSTOMERS:
                session.merge(CustomerRow(id=c.id, name=c.name, email=c.email))
            session.flush()
            for t in demo.TICKETS:
                session.add(_row(t))
            session.flush()
            for t in demo.TICKETS:
                session.add_all(_message_rows(t))
            session.commit()
            return True

        try:
            return self._session(seed)
        except TransientError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False  # another process seeded it at the same moment
            raise

    def create_ticket(
        self, customer: str, subject: str, body: str, priority: Priority = "normal"
    ) -> Ticket:
        """A new open ticket with the next `T` number; `customer` is an id or an e-mail.

        An unknown e-mail creates the customer; an unknown id raises `ValueError`.
        """
        if priority not in get_args(Priority):
            raise ValueError(f"priority must be one of {', '.join(get_args(Priority))}")
        attempts = 5  # two writers may pick the same next id: the loser tries the next one
        while True:
            try:
                return self._session(lambda s: self._create(s, customer, subject, body, priority))
            except TransientError as exc:
                attempts -= 1
                if attempts == 0 or not isinstance(exc.__cause__, IntegrityError):
                    raise

    def add_message(
        self,
        ticket_id: str,
        body: str,
        author: AuthorKind = "customer",
        author_name: str | None = None,
    ) -> tuple[Ticket, Message]:
        """Append a message (id `<ticket>-m<n>`) to a ticket's conversation and bump its
        `updated_at`; return the ticket as it is now and the new message.

        A customer message reopens a `pending` or `closed` ticket; an agent message on an `open`
        ticket makes it `pending` (waiting on the customer); a note changes no status.
        `author_name` defaults to the customer's name (customer) or "Support team" (agent, note).
        An unknown ticket raises `ticket_not_found`; an empty body or unknown author `ValueError`.
        """
        if author not in get_args(AuthorKind):
            raise ValueError(f"author must be one of {', '.join(get_args(AuthorKind))}")
        if not body.strip():
            raise ValueError("the message body is empty")

        def add(session: Session) -> tuple[Ticket, Message]:
            row = self._append(session, ticket_id, body, author, author_name)
            return self._get(session, ticket_id), _message(row)

        attempts = 5  # two writers may pick the same next seq: the loser tries the next one
        while True:
            try:
                return self._session(add)
            except TransientError as exc:
                attempts -= 1
                if attempts == 0 or not isinstance(exc.__cause__, IntegrityError):
                    raise

    def set_status(self, ticket_id: str, status: TicketStatus) -> Ticket:
        """Change a ticket's status and bump its `updated_at`."""
        if status not in get_args(TicketStatus):
            raise ValueError(f"status must be one of {', '.join(get_args(TicketStatus))}")

        def update(session: Session) -> Ticket:
            row = self._locked(session, ticket_id)
            row.status = status
            row.updated_at = _later(row.updated_at)
            session.add(row)
            session.commit()
            return self._get(session, ticket_id)

        return self._session(update)

    # -- internals --------------------------------------------------------------------------

    def _session(self, work: Callable[[Session], T]) -> T:
        with _mapped_errors(), Session(self.engine, expire_on_commit=False) as session:
            return work(session)

    def _read(self, ticket_id: str) -> Ticket:
        with _mapped_errors(), self.engine.connect() as connection:
            return _read(connection, ticket_id)

    @staticmethod
    def _get(session: Session, ticket_id: str) -> Ticket:
        session.flush()
        return _read(session.connection(), ticket_id)

    @staticmethod
    def _locked(session: Session, ticket_id: str) -> TicketRow:
        """The ticket's row, locked for this transaction where the database can (PostgreSQL)."""
        row = session.exec(
            select(TicketRow).where(TicketRow.id == ticket_id).with_for_update()
        ).first()
        if row is None:
            raise ticket_not_found(ticket_id)
        return row

    async def record_reply(
        self, ticket_id: str, message_id: str, body: str, author_name: str
    ) -> bool:
        """A reply this system sent, added to the ticket's conversation as an agent message
        (what a helpdesk does with a reply posted through its API); once per `message_id`.

        True if this call added it; False if it was there already."""

        def work(session: Session) -> bool:
            if session.execute(_MESSAGE_EXISTS, {"id": message_id}).first() is not None:
                return False
            self._append(session, ticket_id, body, "agent", author_name, message_id)
            return True

        attempts = 5
        while True:
            try:
                return await asyncio.to_thread(self._session, work)
            except TransientError as exc:
                attempts -= 1
                if attempts == 0 or not isinstance(exc.__cause__, IntegrityError):
                    raise

    def _append(
        self,
        session: Session,
        ticket_id: str,
        body: str,
        author: AuthorKind,
        author_name: str | None,
        message_id: str | None = None,
    ) -> MessageRow:
        """The message stored and the ticket's status and `updated_at` moved on, committed."""
        ticket = self._locked(session, ticket_id)
        last = session.exec(
            select(func.max(MessageRow.seq)).where(MessageRow.ticket_id == ticket_id)
        ).one()
        if last is None:  # a ticket from before conversations: store its opening message first
            opening = self._get(session, ticket_id).messages[0]
            session.add(_message_row(ticket_id, 1, opening))
            last = 1
        if author_name is None:
            customer = session.get(CustomerRow, ticket.customer_id)
            author_name = customer.name if author == "customer" and customer else AGENT_NAME
        stamp = _later(ticket.updated_at)
        row = MessageRow(
            id=message_id or f"{ticket_id}-m{last + 1}",
            ticket_id=ticket_id,
            seq=last + 1,
            author=author,
            author_name=author_name,
            body=body,
            created_at=stamp,
        )
        session.add(row)
        if author == "customer" and ticket.status in ("pending", "closed"):
            ticket.status = "open"
        elif author == "agent" and ticket.status == "open":
            ticket.status = "pending"
        ticket.updated_at = stamp
        session.add(ticket)
        session.commit()
        return row

    def _list(
        self,
        session: Session,
        updated_since: dt.datetime | None,
        after: tuple[dt.datetime, str] | None,
        limit: int,
    ) -> TicketPage:
        query = select(TicketRow, CustomerRow).join(
            CustomerRow, col(TicketRow.customer_id) == col(CustomerRow.id)
        )
        if updated_since is not None:
            query = query.where(col(TicketRow.updated_at) >= self._stamp(updated_since))
        if after is not None:
            stamp, last_id = self._stamp(after[0]), after[1]
            query = query.where(
                or_(
                    col(TicketRow.updated_at) > stamp,
                    and_(col(TicketRow.updated_at) == stamp, col(TicketRow.id) > last_id),
                )
            )
        query = query.order_by(col(TicketRow.updated_at), col(TicketRow.id)).limit(limit + 1)
        found = session.exec(query).all()
        more = len(found) > limit
        found = found[:limit]
        conversations = _messages_of(session, [row.id for row, _ in found])
        tickets = [_ticket(row, customer, conversations[row.id]) for row, customer in found]
        last = tickets[-1] if more else None
        return TicketPage(
            tickets=tickets, next_cursor=encode_cursor(last.updated_at, last.id) if last else None
        )

    def _create(
        self, session: Session, customer: str, subject: str, body: str, priority: str
    ) -> Ticket:
        row = session.get(CustomerRow, customer)
        if row is None and "@" in customer:
            row = session.exec(select(CustomerRow).where(CustomerRow.email == customer)).first()
            if row is None:
                row = CustomerRow(
                    id=_next_id(session, "C", CustomerRow.id, 1),
                    name=_name_from_email(customer),
                    email=customer,
                )
                session.add(row)
                session.flush()
        if row is None:
            raise ValueError(f"no customer {customer!r}; give a customer id or an e-mail address")
        now = dt.datetime.now(dt.UTC)
        ticket = TicketRow(
            id=_next_id(session, "T", TicketRow.id, 1001),
            customer_id=row.id,
            subject=subject,
            body=body,
            status="open",
            priority=priority,
            created_at=now,
            updated_at=now,
        )
        session.add(ticket)
        session.flush()
        opening = MessageRow(
            id=opening_message_id(ticket.id),
            ticket_id=ticket.id,
            seq=1,
            author="customer",
            author_name=row.name,
            body=body,
            created_at=now,
        )
        session.add(opening)
        session.commit()
        return _ticket(ticket, row, [opening])

    def _stamp(self, value: dt.datetime) -> dt.datetime:
        """A datetime as the database compares it: UTC, and naive on SQLite (stored naive)."""
        value = clock.utc(value)
        return value.replace(tzinfo=None) if self.engine.dialect.name == "sqlite" else value


def _row(ticket: Ticket) -> TicketRow:
    return TicketRow(
        id=ticket.id,
        customer_id=ticket.customer.id,
        subject=ticket.subject,
        body=ticket.body,
        status=ticket.status,
        priority=ticket.priority,
        created_at=clock.utc(ticket.created_at),
        updated_at=clock.utc(ticket.updated_at),
    )


def _message_row(ticket_id: str, seq: int, message: Message) -> MessageRow:
    return MessageRow(
        id=message.id,
        ticket_id=ticket_id,
        seq=seq,
        author=message.author,
        author_name=message.author_name,
        body=message.body,
        created_at=clock.utc(message.created_at),
    )


def _message_rows(ticket: Ticket) -> list[MessageRow]:
    return [_message_row(ticket.id, n, m) for n, m in enumerate(ticket.messages, start=1)]


def _later(previous: dt.datetime) -> dt.datetime:
    """Now, or just after `previous` if the clock is behind it: a ticket's version only grows."""
    return max(dt.datetime.now(dt.UTC), clock.utc(previous) + dt.timedelta(microseconds=1))
