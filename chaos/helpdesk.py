"""The demo helpdesk as the harness changes it: tickets, messages, closes, and old tickets.

Every write retries while the SQLite file is locked by a service reading it under load.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import TypeVar

from sqlmodel import Session, select

from desk.helpdesk import add_message, close
from shared.helpdesk import Message, Ticket
from shared.helpdesk.sql import SqlSource
from shared.helpdesk.tables import MessageRow, TicketRow

from .facts import Run, log

T = TypeVar("T")


def retrying(run: Run, what: str, write: Callable[[], T]) -> T | None:
    """`write()` until it succeeds; None if the run stopped first."""
    while not run.stop.is_set():
        try:
            return write()
        except Exception as exc:  # a locked SQLite file under load: try again
            log(f"{what} failed ({exc.__class__.__name__}: {exc}); retrying")
            time.sleep(0.2)
    return None


def message(run: Run, ticket: str, body: str, author: str) -> tuple[Ticket, Message] | None:
    return retrying(
        run, f"a message on {ticket}", lambda: add_message(run.helpdesk_url, ticket, body, author)
    )


def close_ticket(run: Run, ticket: str) -> Ticket | None:
    return retrying(run, f"closing {ticket}", lambda: close(run.helpdesk_url, ticket))


def backdate(run: Run, ticket: str, days: float) -> Ticket | None:
    """Make a ticket (and its conversation) `days` old, as if nobody had touched it since: what
    a stale ticket is. The demo helpdesk has no API for the past, so this writes its rows."""

    def write() -> Ticket:
        source = SqlSource(run.helpdesk_url)
        try:
            then = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
            with Session(source.engine) as session:
                row = session.get(TicketRow, ticket)
                if row is None:
                    raise LookupError(f"no ticket {ticket}")
                row.created_at = row.updated_at = then
                session.add(row)
                for m in session.exec(select(MessageRow).where(MessageRow.ticket_id == ticket)):
                    m.created_at = then
                    session.add(m)
                session.commit()
            return asyncio.run(source.get_ticket(ticket))
        finally:
            source.engine.dispose()

    return retrying(run, f"backdating {ticket}", write)
