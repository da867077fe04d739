"""The demo helpdesk database, for `desk helpdesk create` and for seeding by `desk up`.

Synchronous, so they work from the CLI and (briefly blocking) from inside an event loop alike.
"""

from __future__ import annotations

from typing import cast

from shared.source import Ticket
from shared.source.base import Priority
from shared.source.sql import SqlSource


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


def ensure_demo(url: str) -> bool:
    """Create the tables and load the demo helpdesk if it has no tickets; True if it loaded."""
    source = SqlSource(url)
    try:
        source.create_tables()
        return source.seed_demo()
    finally:
        source.engine.dispose()
