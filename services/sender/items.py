"""The items the sender remembers (`inbox.item`): what a decision on one sends, on which ticket
and round, and to whom. A decision on an item not seen yet waits for it (a transient error).
"""

from __future__ import annotations

import asyncio

from sqlalchemy.engine import Engine

from shared.errors import BusinessReject, TransientError
from shared.inbox import Decision, InboxItem

from . import store
from .metrics import OUTCOMES


class Items:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def remember(self, item: InboxItem) -> None:
        await asyncio.to_thread(store.see_item, self.engine, _row(item))

    async def get(self, item_id: str) -> store.ItemRow:
        """The item a decision is on; one not seen yet may still be on its way."""
        item = await asyncio.to_thread(store.get_item, self.engine, item_id)
        if item is None:
            raise TransientError(f"item {item_id} not seen yet")
        return item

    async def check_current(self, decision: Decision) -> None:
        """A newer version of the same round (a redraft) replaces this one; a newer round is the
        fresh-state check's to judge (the customer wrote again → withdrawn)."""
        current = await asyncio.to_thread(
            store.current_version, self.engine, decision.thread, decision.round
        )
        if current is not None and decision.version < current:
            OUTCOMES.labels("superseded").inc()
            raise BusinessReject(
                f"decision on v{decision.version}; the thread is at v{current}",
                outcome="superseded",
            )


def _row(item: InboxItem) -> store.ItemRow:
    answering = next(
        (m for m in reversed(item.conversation) if m.id in set(item.round_messages)), None
    )
    return store.ItemRow(
        item_id=item.id,
        thread=item.thread,
        version=item.version,
        ticket_id=item.ticket_id,
        action=item.action_request.action,
        args=item.action_request.args,
        round=item.round,
        seen_through=item.seen_through,
        in_helpdesk=item.in_helpdesk,
        recipient=(
            {"name": item.customer.name, "email": item.customer.email} if item.customer else None
        ),
        in_reply_to=(
            {"message_id": answering.id, "excerpt": _excerpt(answering.body)} if answering else None
        ),
        round_author=answering.author_email if answering else None,
        knowledge=[t for c in item.citations for t in (c.title, c.passage, c.url or "") if t],
    )


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
