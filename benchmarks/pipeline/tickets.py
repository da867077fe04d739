"""The bench tickets: open tickets added to the helpdesk, and their signed `ticket.created`
webhooks."""

from __future__ import annotations

import datetime as dt
import json

from sqlmodel import Session

from desk.webhook import signed_headers
from shared.helpdesk.events import ticket_event
from shared.helpdesk.sql import SqlSource
from shared.helpdesk.tables import TicketRow

FIRST_TICKET = 500_000  # bench tickets are T500000…, far from the demo helpdesk's


def add_tickets(url: str, first: int, count: int) -> list[TicketRow]:
    """`count` open tickets T<first>… in one transaction (the demo customers own them)."""
    source = SqlSource(url)
    try:
        source.create_tables()
        source.seed_demo()
        now = dt.datetime.now(dt.UTC)
        rows = [
            TicketRow(
                id=f"T{first + i}",
                customer_id=f"C{1 + i % 9:03d}",
                subject="Where is my refund?",
                body="Hello, I returned the parcel two weeks ago. Could you check? Thanks.",
                status="open",
                priority="normal",
                created_at=now,
                updated_at=now,
            )
            for i in range(count)
        ]
        with Session(source.engine, expire_on_commit=False) as session:
            session.add_all(rows)
            session.commit()
        return rows
    finally:
        source.engine.dispose()


def signed_requests(
    secret: str, tickets: list[TicketRow], tag: str
) -> list[tuple[str, bytes, dict[str, str]]]:
    prepared = []
    for i, t in enumerate(tickets):
        event = ticket_event(
            "ticket.created",
            t.id,
            event_id=f"evt_bench_{tag}_{i}",
            updated_at=t.updated_at,
            priority="normal",
        )
        body = json.dumps(event).encode()
        prepared.append((t.id, body, signed_headers("standard", secret, event, body)))
    return prepared
