"""The demo helpdesk database, for `desk helpdesk create|message|close` and for seeding by
`desk up`.

Synchronous, so they work from the CLI and (briefly blocking) from inside an event loop alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from shared.helpdesk import Message, Ticket
from shared.helpdesk.base import AuthorKind, Priority
from shared.helpdesk.sql import SqlSource

# The demo helpdesk's knowledge base: its team's help articles (refunds, duplicate charges,
# invoices, 2FA and lockouts, exports, shipping, cancellations), which `desk up` grounds the
# demo's drafts in (`DESK_KNOWLEDGE_DIR`) while the helpdesk is the demo one.
DEMO_KNOWLEDGE = Path(__file__).resolve().parent / "knowledge"


def create(url: str, customer: str, subject: str, body: str, priority: str = "normal") -> Ticket:
    """A new open ticket; `customer` is an id (`C007`) or an e-mail (unknown e-mails are added).

    Raises `ValueError` for an unknown customer id or priority, `TransientError` if the database
    cannot be reached.
    """
    source = SqlSource(url)
    try:
        source.create_tables()
        return source.create_ticket(customer, subject, body, cast(Priority, priority))
    finally:
        source.engine.dispose()


def add_message(
    url: str, ticket_id: str, body: str, author: str = "customer", name: str | None = None
) -> tuple[Ticket, Message]:
    """Append a message to a ticket's conversation; the ticket as it is now, and the message.

    Raises `PermanentError` for an unknown ticket, `ValueError` for an empty body or unknown
    author, `TransientError` if the database cannot be reached.
    """
    source = SqlSource(url)
    try:
        source.create_tables()
        return source.add_message(ticket_id, body, cast(AuthorKind, author), name)
    finally:
        source.engine.dispose()


def close(url: str, ticket_id: str) -> Ticket:
    """Close a ticket (raises `PermanentError` for an unknown one)."""
    source = SqlSource(url)
    try:
        source.create_tables()
        return source.set_status(ticket_id, "closed")
    finally:
        source.engine.dispose()


def ensure_demo(url: str) -> bool:
    """Create the tables and load the demo helpdesk if it has no tickets; True if it loaded."""
    source = SqlSource(url)
    try:
        source.create_tables()
        return source.seed_demo()
    finally:
        source.engine.dispose()
