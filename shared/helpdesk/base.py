"""The source-system interface and its data shapes."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .. import clock
from ..errors import PermanentError

TicketStatus = Literal["open", "pending", "closed"]
Priority = Literal["low", "normal", "high", "urgent"]
AuthorKind = Literal["customer", "agent", "note"]


class Customer(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    email: str


class Message(BaseModel):
    """One message of a ticket's conversation: the customer's, an agent's, or an internal note."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1, max_length=200)
    author: AuthorKind
    author_name: str = ""
    # the sender's address, where the conversation knows it (a mail conversation: each mail's
    # From): a reply goes to the author of the round it answers
    author_email: str | None = Field(default=None, max_length=320)
    body: str
    created_at: dt.datetime

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return clock.utc(value)


def opening_message_id(ticket_id: str) -> str:
    """The id given to a ticket's opening message when the helpdesk sends no conversation."""
    return f"{ticket_id}-m1"


class Ticket(BaseModel):
    """A ticket and its conversation (`messages`, oldest first, newest last).

    A helpdesk that sends no `messages` gets one: the opening customer message, built from
    `body`, `customer` and `created_at` (id `<ticket>-m1`). `body` is the opening message.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    customer: Customer
    subject: str
    body: str
    status: TicketStatus
    priority: Priority = "normal"
    created_at: dt.datetime
    updated_at: dt.datetime
    messages: list[Message] = Field(default_factory=list)

    @field_validator("created_at", "updated_at")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return clock.utc(value)

    @model_validator(mode="before")
    @classmethod
    def _opening_message(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("messages"):
            return data
        customer = data.get("customer")
        name = customer.get("name", "") if isinstance(customer, dict) else ""
        if isinstance(customer, Customer):
            name = customer.name
        opening = {
            "id": opening_message_id(str(data.get("id", ""))),
            "author": "customer",
            "author_name": name,
            "body": data.get("body", ""),
            "created_at": data.get("created_at"),
        }
        return {**data, "messages": [opening]}


class TicketPage(BaseModel):
    tickets: list[Ticket]
    next_cursor: str | None = None  # None: this was the last page


class Article(BaseModel):
    """A help-centre article as the helpdesk's articles endpoint gives it (Markdown body)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=200)
    title: str = Field(min_length=1)
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    url: str | None = None
    body: str


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


@runtime_checkable
class ReplyRecorder(Protocol):
    """A source that takes the replies this system sends into the ticket's conversation (the
    demo helpdesk); a real helpdesk records them itself when its reply API is the channel."""

    async def record_reply(
        self, ticket_id: str, message_id: str, body: str, author_name: str
    ) -> bool: ...
