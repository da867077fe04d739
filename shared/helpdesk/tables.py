"""The `sql` source's tables (SQLModel): customers, tickets and their conversations, and the rows
that store a `Ticket` or a `Message`.

Times are stored in UTC: every datetime written is converted to UTC first.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, Index, Text
from sqlmodel import Field, SQLModel

from .. import clock
from .base import Message, Ticket


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


def ticket_row(ticket: Ticket) -> TicketRow:
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


def message_row(ticket_id: str, seq: int, message: Message) -> MessageRow:
    return MessageRow(
        id=message.id,
        ticket_id=ticket_id,
        seq=seq,
        author=message.author,
        author_name=message.author_name,
        body=message.body,
        created_at=clock.utc(message.created_at),
    )


def message_rows(ticket: Ticket) -> list[MessageRow]:
    return [message_row(ticket.id, n, m) for n, m in enumerate(ticket.messages, start=1)]
