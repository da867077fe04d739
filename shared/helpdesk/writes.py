"""What the `sql` source writes, each in the caller's session: the demo helpdesk seeded, a new
ticket, and a message appended to a ticket's conversation (moving its status on).

A ticket's `updated_at` is its version: every write moves it on (`later`), never back.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from .. import clock
from . import demo, queries
from .base import AuthorKind, Ticket, opening_message_id, ticket_not_found
from .tables import CustomerRow, MessageRow, TicketRow, message_row, message_rows, ticket_row

AGENT_NAME = "Support team"  # the author name of an agent message given without one


def seed(session: Session) -> bool:
    """The demo helpdesk inserted if the tickets table is empty; True if this call did."""
    if session.exec(select(func.count()).select_from(TicketRow)).one():
        return False
    for c in demo.CUSTOMERS:
        session.merge(CustomerRow(id=c.id, name=c.name, email=c.email))
    session.flush()
    for t in demo.TICKETS:
        session.add(ticket_row(t))
    session.flush()
    for t in demo.TICKETS:
        session.add_all(message_rows(t))
    session.commit()
    return True


def locked(session: Session, ticket_id: str) -> TicketRow:
    """The ticket's row, locked for this transaction where the database can (PostgreSQL)."""
    row = session.exec(select(TicketRow).where(TicketRow.id == ticket_id).with_for_update()).first()
    if row is None:
        raise ticket_not_found(ticket_id)
    return row


def append(
    session: Session,
    ticket_id: str,
    body: str,
    author: AuthorKind,
    author_name: str | None,
    message_id: str | None = None,
) -> MessageRow:
    """The message stored and the ticket's status and `updated_at` moved on, committed."""
    ticket = locked(session, ticket_id)
    last = session.exec(
        select(func.max(MessageRow.seq)).where(MessageRow.ticket_id == ticket_id)
    ).one()
    if last is None:  # a ticket from before conversations: store its opening message first
        opening = queries.current(session, ticket_id).messages[0]
        session.add(message_row(ticket_id, 1, opening))
        last = 1
    if author_name is None:
        customer = session.get(CustomerRow, ticket.customer_id)
        author_name = customer.name if author == "customer" and customer else AGENT_NAME
    stamp = later(ticket.updated_at)
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


def create(session: Session, customer: str, subject: str, body: str, priority: str) -> Ticket:
    """A new open ticket with the next `T` number and its opening message, committed.

    `customer` is an id or an e-mail: an unknown e-mail creates the customer (the next `C`
    number), an unknown id raises `ValueError`."""
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
    return queries.ticket(ticket, row, [opening])


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


def later(previous: dt.datetime) -> dt.datetime:
    """Now, or just after `previous` if the clock is behind it: a ticket's version only grows."""
    return max(dt.datetime.now(dt.UTC), clock.utc(previous) + dt.timedelta(microseconds=1))
