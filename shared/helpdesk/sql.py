"""The `sql` source: a helpdesk database (SQLite or PostgreSQL) through SQLModel.

Sessions are synchronous and run in a worker thread (`asyncio.to_thread`) for the protocol's
async methods; the administrative methods (`create_tables`, `seed_demo`, `create_ticket`,
`add_message`, `set_status`) are plain synchronous calls for the CLI and start-up.

A ticket's conversation is in `ticket_messages`, ordered by `seq` within the ticket. A ticket
with no message rows (a database from before conversations) reads as its opening message.

Times are stored in UTC. SQLite keeps no time zone, so every datetime read back is made aware
(UTC) here, and every datetime written or compared is converted to UTC first.

The tables are in `tables`, the engine in `database`, what is read in `queries` and what is
written in `writes`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar, get_args

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel

from ..errors import TransientError
from . import queries, writes
from .base import AuthorKind, Message, Priority, Ticket, TicketPage, TicketStatus
from .database import engine, mapped_errors
from .tables import TABLES

T = TypeVar("T")


class SqlSource:
    """The source system over a SQLAlchemy URL (`sqlite:///var/helpdesk.db`, `postgresql://…`)."""

    def __init__(self, url: str, *, connect_args: dict[str, Any] | None = None) -> None:
        self.engine = engine(url, connect_args)

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
        after = queries.decode_cursor(cursor) if cursor else None
        dialect = self.engine.dialect.name
        return await asyncio.to_thread(
            self._session, lambda s: queries.page(s, dialect, updated_since, after, limit)
        )

    async def close(self) -> None:
        await asyncio.to_thread(self.engine.dispose)

    # -- the ReplyRecorder protocol --------------------------------------------------------

    async def record_reply(
        self, ticket_id: str, message_id: str, body: str, author_name: str
    ) -> bool:
        """A reply this system sent, added to the ticket's conversation as an agent message
        (what a helpdesk does with a reply posted through its API); once per `message_id`.

        True if this call added it; False if it was there already."""

        def work(session: Session) -> bool:
            if session.execute(queries.MESSAGE_EXISTS, {"id": message_id}).first() is not None:
                return False
            writes.append(session, ticket_id, body, "agent", author_name, message_id)
            return True

        attempts = 5
        while True:
            try:
                return await asyncio.to_thread(self._session, work)
            except TransientError as exc:
                attempts -= 1
                if attempts == 0 or not isinstance(exc.__cause__, IntegrityError):
                    raise

    # -- administration (synchronous) ------------------------------------------------------

    def create_tables(self) -> None:
        """Create the `customers`, `tickets` and `ticket_messages` tables where missing (a
        database from before conversations gains `ticket_messages`)."""
        with mapped_errors():
            SQLModel.metadata.create_all(self.engine, tables=TABLES)

    def seed_demo(self) -> bool:
        """Insert the demo helpdesk if the tickets table is empty; True if this call did."""
        try:
            return self._session(writes.seed)
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
                return self._session(lambda s: writes.create(s, customer, subject, body, priority))
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
            row = writes.append(session, ticket_id, body, author, author_name)
            return queries.current(session, ticket_id), queries.message(row)

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
            row = writes.locked(session, ticket_id)
            row.status = status
            row.updated_at = writes.later(row.updated_at)
            session.add(row)
            session.commit()
            return queries.current(session, ticket_id)

        return self._session(update)

    # -- internals --------------------------------------------------------------------------

    def _session(self, work: Callable[[Session], T]) -> T:
        with mapped_errors(), Session(self.engine, expire_on_commit=False) as session:
            return work(session)

    def _read(self, ticket_id: str) -> Ticket:
        with mapped_errors(), self.engine.connect() as connection:
            return queries.read(connection, ticket_id)
