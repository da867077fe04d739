"""The fresh-state check: the ticket read again from the helpdesk right before a reply leaves.

Closed, answered by a person in the helpdesk, or written to again by the customer since the
draft was made → the draft no longer answers the conversation, and nothing is sent. A decision
auto-sent (no person approved it) is checked harder: its round must be one the helpdesk lists
as waiting, and its text is screened again against the conversation the helpdesk has.
"""

from __future__ import annotations

import asyncio

from shared import conversation, screening
from shared.errors import PermanentError
from shared.helpdesk import SourceSystem

from . import store


class FreshState:
    def __init__(self, source: SourceSystem | None) -> None:
        self.source = source  # None: no fresh-state check (tests of the outbox alone)

    async def moved_on(self, item: store.ItemRow) -> str | None:
        """Why this draft must not be sent any more, from the ticket as it is now; None if it
        still answers the conversation."""
        if self.source is None or item.in_helpdesk is False or not item.ticket_id:
            return None
        try:
            ticket = await self.source.get_ticket(item.ticket_id)
        except PermanentError:
            return "the ticket no longer exists in the helpdesk"
        change = conversation.change_since(ticket, item.seen_through)
        return conversation.REASONS[change] or None

    async def not_for_auto(self, item: store.ItemRow, text: str) -> str | None:
        """Why an auto-sent decision must not be carried out (None: it may). No person approved
        it, and the item it sends is the word of whoever published it: its round must be a
        customer message of the ticket as the helpdesk lists it now, one not answered yet, and
        the newest message the draft saw must be the ticket's too; and the text is screened
        again against that conversation as the helpdesk has it (not the item's copy of it, which
        its publisher wrote). A mail conversation has no ticket to read again, so nothing
        auto-sent goes to one."""
        if item.in_helpdesk is False or not item.ticket_id:
            return "auto-send refused: a mail conversation has no ticket to check the round in"
        if self.source is None:
            return "auto-send refused: no helpdesk to check the round in"
        try:
            ticket = await self.source.get_ticket(item.ticket_id)
        except PermanentError:
            return "auto-send refused: the ticket does not exist in the helpdesk"
        waiting = conversation.open_round(ticket)
        rounds = {conversation.round_id(m.id) for m in waiting.messages} if waiting else set()
        if item.round not in rounds:
            return (
                f"auto-send refused: round {item.round} is no customer message of ticket "
                f"{item.ticket_id} waiting for an answer"
            )
        if item.seen_through not in {m.id for m in ticket.messages}:
            return f"auto-send refused: the draft saw a conversation ticket {item.ticket_id} lacks"
        said = (
            ticket.subject,
            ticket.customer.model_dump(),
            [m.model_dump() for m in ticket.messages],
        )
        found = await asyncio.to_thread(
            screening.screen,
            text,
            conversation=screening.conversation_texts(*said),
            knowledge=item.knowledge or [],
            customer=screening.customer_texts(*said),
        )
        if found:
            return "auto-send refused: " + "; ".join(found)
        return None
