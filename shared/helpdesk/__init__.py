"""The helpdesk: where tickets live, which the drafter reads, the reconciler lists and the sender
checks again before a reply leaves.

One small interface (`SourceSystem`, the helpdesk as the services read it) with two adapters:
`sql` (a helpdesk database through SQLModel; the demo helpdesk) and `http` (the JSON REST
helpdesk contract, `helpdesk.openapi.json`).
"""

from .base import (
    Customer,
    Message,
    SourceSystem,
    Ticket,
    TicketPage,
    TicketStatus,
    ticket_not_found,
)

__all__ = [
    "Customer",
    "Message",
    "SourceSystem",
    "Ticket",
    "TicketPage",
    "TicketStatus",
    "ticket_not_found",
]
