"""What the `sql` source reads: one ticket with its conversation, and pages of tickets in
(`updated_at`, `id`) order with the cursor that continues them.

SQLite keeps no time zone: every datetime read back is made aware (UTC) here, and every
datetime compared is converted to UTC first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, bindparam, or_
from sqlalchemy import select as core_select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col, select

from .. import clock, cursor
from ..errors import PermanentError
from .base import Customer, Message, Ticket, TicketPage, ticket_not_found
from .tables import TABLES, CustomerRow, MessageRow, TicketRow


def decode_cursor(given: str) -> tuple[dt.datetime, str]:
    try:
        return cursor.decode(given)
    except ValueError:
        raise PermanentError("invalid cursor") from None


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

MESSAGE_EXISTS = core_select(_MESSAGES.id).where(_MESSAGES.id == bindparam("id"))


def read(connection: Connection, ticket_id: str) -> Ticket:
    """One ticket with its conversation, oldest message first."""
    found = connection.execute(_TICKET_BY_ID, {"ticket_id": ticket_id}).first()
    if found is None:
        raise ticket_not_found(ticket_id)
    messages = connection.execute(_MESSAGES_OF_TICKET, {"ticket_id": ticket_id}).all()
    customer = Customer(id=found.customer_id, name=found.customer_name, email=found.customer_email)
    return ticket(found, customer, messages)


def current(session: Session, ticket_id: str) -> Ticket:
    """One ticket as `session` sees it, its pending changes flushed first."""
    session.flush()
    return read(session.connection(), ticket_id)


def message(row: Any) -> Message:
    """From a `MessageRow`, or a Core row of its columns."""
    return Message(
        id=row.id,
        author=row.author,  # type: ignore[arg-type]  # validated by the model
        author_name=row.author_name,
        body=row.body,
        created_at=clock.utc(row.created_at),
    )


def ticket(row: Any, customer: CustomerRow | Customer, messages: Sequence[Any]) -> Ticket:
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
        messages=[message(m) for m in messages],
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


def page(
    session: Session,
    dialect: str,
    updated_since: dt.datetime | None,
    after: tuple[dt.datetime, str] | None,
    limit: int,
) -> TicketPage:
    """Up to `limit` tickets updated at or after `updated_since`, past the cursor's `after`."""
    query = select(TicketRow, CustomerRow).join(
        CustomerRow, col(TicketRow.customer_id) == col(CustomerRow.id)
    )
    if updated_since is not None:
        query = query.where(col(TicketRow.updated_at) >= _stamp(updated_since, dialect))
    if after is not None:
        stamp, last_id = _stamp(after[0], dialect), after[1]
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
    tickets = [ticket(row, customer, conversations[row.id]) for row, customer in found]
    last = tickets[-1] if more else None
    return TicketPage(
        tickets=tickets, next_cursor=cursor.encode(last.updated_at, last.id) if last else None
    )


def _stamp(value: dt.datetime, dialect: str) -> dt.datetime:
    """A datetime as the database compares it: UTC, and naive on SQLite (stored naive)."""
    value = clock.utc(value)
    return value.replace(tzinfo=None) if dialect == "sqlite" else value
