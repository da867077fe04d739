"""The source-system interface and its data shapes."""

from __future__ import annotations

import datetime as dt
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, field_validator

from ..errors import PermanentError

TicketStatus = Literal["open", "pending", "closed"]
Priority = Literal["low", "normal", "high", "urgent"]


class Customer(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    email: str


class Ticket(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    customer: Customer
    subject: str
    body: str
    status: TicketStatus
    priority: Priority = "normal"
    created_at: dt.datetime
    updated_at: dt.datetime

    @field_validator("created_at", "updated_at")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        """Aware UTC always: a naive time (SQLite, some helpdesks) is taken as UTC."""
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


class TicketPage(BaseModel):
    tickets: list[Ticket]
    next_cursor: str | None = None  # None: this was the last page


def ticket_not_found(ticket_id: str) -> PermanentError:
    return PermanentError(f"ticket {ticket_id} does not exist in the source system")


class SourceSystem(Protocol):
    """What the drafter and the reconciler need from a helpdesk.

    Errors: a ticket that does not exist raises `PermanentError` (use `ticket_not_found`); a
    source that is down, answers 5xx/429 or times out raises `TransientError`.
    """

    async def get_ticket(self, ticket_id: str) -> Ticket: ...

    async def list_tickets(
        self,
        *,
        updated_since: dt.datetime | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> TicketPage:
        """Tickets ordered by (updated_at, id) ascending, updated at or after `updated_since`."""
        ...

    async def close(self) -> None: ...
