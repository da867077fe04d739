"""The source system: the helpdesk the drafter loads tickets from and the reconciler lists.

One small interface (`SourceSystem`) with two adapters: `sql` (a helpdesk database through
SQLModel; the demo helpdesk) and `http` (a generic JSON REST helpdesk).
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
