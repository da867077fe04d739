"""Inbox items as the drafter publishes them, for tests of everything downstream of it."""

from __future__ import annotations

import datetime as dt

from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import (
    DRAFT_CONFIG,
    NOTIFY_CONFIG,
    NOTIFY_SUPERVISOR,
    SEND_REPLY,
    ActionRequest,
    Cost,
    InboxItem,
    Trigger,
    item_id,
)


def draft_item(
    thread: str,
    version: int = 1,
    *,
    reply: str = "Hi Jane,\n\nWe are on it.\n\nBest regards,\nThe Support Team",
    category: str = "refund",
    created_at: dt.datetime | None = None,
    feedback: list[str] | None = None,
) -> InboxItem:
    return InboxItem(
        action_request=ActionRequest(
            action=SEND_REPLY, args={"ticket_id": thread, "subject": "Re: help", "reply": reply}
        ),
        config=DRAFT_CONFIG,
        description=f"Ticket {thread} from Jane Doe: needs a reply",
        id=item_id(thread, version),
        thread=thread,
        version=version,
        ticket_id=thread,
        category=category,
        summary=f"{category.capitalize()}: help with {thread}",
        trigger=Trigger(source="helpdesk", type="ticket.created", event_id=f"helpdesk:{thread}"),
        created_at=created_at or dt.datetime.now(dt.UTC),
        cost=Cost(input_tokens=120, output_tokens=60, usd=0.0001),
        feedback=feedback or [],
    )


def notify_item(thread: str) -> InboxItem:
    return InboxItem(
        action_request=ActionRequest(
            action=NOTIFY_SUPERVISOR, args={"ticket_id": thread, "matched": ["lawyer"]}
        ),
        config=NOTIFY_CONFIG,
        description=f"Ticket {thread} mentions lawyer",
        id=item_id(thread, 1),
        thread=thread,
        version=1,
        ticket_id=thread,
        category="escalation",
        summary="Escalation",
        trigger=Trigger(source="helpdesk", type="ticket.created", event_id=f"helpdesk:{thread}"),
        created_at=dt.datetime.now(dt.UTC),
    )


async def publish_item(bus: Bus, item: InboxItem) -> None:
    msg_id = ids.inbox_item(item.thread, item.version)
    envelope = Envelope(
        id=msg_id,
        source="/desk/drafter",
        type=subjects.INBOX_ITEM,
        subject=item.thread,
        time=item.created_at,
        data=item.model_dump(mode="json"),
    )
    await bus.publish(subjects.INBOX_ITEM, envelope.to_bytes(), msg_id=msg_id)


async def publish_decision(
    bus: Bus,
    item: InboxItem,
    kind: str,
    args: object = None,
    *,
    reviewer: str = "reviewer",
    msg_id: str | None = None,
) -> None:
    """A decision as inbox_api publishes it (`msg_id` overrides the dedup id, to redeliver)."""
    from shared.inbox import Decision

    decision = Decision(
        type=kind,  # type: ignore[arg-type]
        args=args,
        item_id=item.id,
        thread=item.thread,
        version=item.version,
        reviewer=reviewer,
        decided_at=dt.datetime.now(dt.UTC),
    )
    envelope = Envelope(
        source="/desk/inbox_api",
        type=subjects.INBOX_DECISION,
        data=decision.model_dump(mode="json"),
    )
    await bus.publish(
        subjects.INBOX_DECISION,
        envelope.to_bytes(),
        msg_id=msg_id or ids.decision(item.thread, item.version),
    )
