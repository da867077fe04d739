"""Inbox items as the drafter publishes them, for tests of everything downstream of it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.helpdesk.base import Customer, Message
from shared.inbox import (
    DRAFT_CONFIG,
    NOTIFY_CONFIG,
    NOTIFY_SUPERVISOR,
    SEND_REPLY,
    ActionRequest,
    Citation,
    Cost,
    InboxItem,
    Trigger,
    Withdrawal,
    item_id,
)
from tests.helpers import messages

# A knowledge-base passage as the drafter cites it (services/drafter/knowledge.py)
REFUND_CITATION = Citation(
    article="refunds",
    title="Refunds and how long they take",
    section="How long a refund takes",
    passage="Once we confirm a refund it is processed within 5 business days.",
    url="https://help.example.com/refunds",
)


def draft_item(
    thread: str,
    version: int = 1,
    *,
    reply: str = "Hi Jane,\n\nWe are on it.\n\nBest regards,\nThe Support Team",
    category: str = "refund",
    created_at: dt.datetime | None = None,
    feedback: list[str] | None = None,
    round_id: str = "r1",
    seen_through: str | None = None,
    conversation: list[Message] | None = None,
    priority: str | None = None,
    cause: str | None = None,
    citations: list[Citation] | None = None,
    queue: str | None = None,
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
        trigger=Trigger(
            source="helpdesk", type="ticket.created", event_id=f"helpdesk:{thread}", queue=queue
        ),
        created_at=created_at or dt.datetime.now(dt.UTC),
        cost=Cost(input_tokens=120, output_tokens=60, usd=0.0001),
        feedback=feedback or [],
        round=round_id,
        seen_through=seen_through,
        conversation=conversation or [],
        round_messages=[m.id for m in conversation or [] if m.id == round_id],
        customer=Customer(id="C1", name="Jane Doe", email="jane.doe@example.com"),
        ticket_status="open",
        priority=priority,
        cause=cause,
        citations=citations or [],
    )


def conversation(ticket: str, *said: tuple[str, str]) -> list[Message]:
    """Messages `(author, body)` of a ticket, oldest first, ids `<ticket>-m<n>`."""
    start = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
    return [
        Message(
            id=f"{ticket}-m{n}",
            author=author,  # type: ignore[arg-type]
            author_name="Jane Doe" if author == "customer" else "Sam from Support",
            body=body,
            created_at=start + dt.timedelta(minutes=10 * n),
        )
        for n, (author, body) in enumerate(said, start=1)
    ]


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
    msg_id = ids.inbox_item(item.thread, item.round, item.version)
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
    auto: bool = False,
) -> None:
    """A decision as inbox_api publishes it (`msg_id` overrides the dedup id, to redeliver;
    `auto`: as its auto-send policy records one)."""
    from shared.inbox import Decision

    decision = Decision(
        type=kind,  # type: ignore[arg-type]
        args=args,
        item_id=item.id,
        thread=item.thread,
        version=item.version,
        reviewer=reviewer,
        decided_at=dt.datetime.now(dt.UTC),
        round=item.round,
        auto=auto,
    )
    envelope = Envelope(
        source="/desk/inbox_api",
        type=subjects.INBOX_DECISION,
        data=decision.model_dump(mode="json"),
    )
    await bus.publish(
        subjects.INBOX_DECISION,
        envelope.to_bytes(),
        msg_id=msg_id or ids.decision(item.thread, item.round, item.version),
    )


async def publish_withdrawal(
    bus: Bus, item: InboxItem, reason: str, ticket_status: str | None = None
) -> None:
    """The drafter's notice that it took `item` back (the ticket moved on)."""
    notice = Withdrawal(
        item_id=item.id,
        thread=item.thread,
        round=item.round,
        version=item.version,
        ticket_id=item.ticket_id,
        reason=reason,
        at=dt.datetime.now(dt.UTC),
        ticket_status=ticket_status,
    )
    msg_id = ids.withdrawn(item.thread, item.round, item.version)
    envelope = Envelope(
        id=msg_id,
        source="/desk/drafter",
        type=subjects.INBOX_WITHDRAWN,
        data=notice.model_dump(mode="json"),
    )
    await bus.publish(subjects.INBOX_WITHDRAWN, envelope.to_bytes(), msg_id=msg_id)


async def published_decisions(bus: Bus, **match: str) -> list[dict[str, Any]]:
    """The decisions on INBOX whose data has every `match` field (thread=…, item_id=…)."""
    found = []
    for m in await messages(bus.js, subjects.INBOX):
        if m.subject == subjects.INBOX_DECISION and m.data:
            data = Envelope.model_validate_json(m.data).data
            if all(data.get(k) == v for k, v in match.items()):
                found.append(data)
    return found


async def routed(bus: Bus, item: InboxItem, category: str | None = None) -> InboxItem:
    """`item` answering work the router gave the drafter: the router's work message about its
    ticket, in the rules' `category` (the item's own unless told), is put on WORK, and the
    item's trigger names it; its round answers a customer message. What auto-send checks
    before it sends (services/inbox_api/provenance.py)."""
    trigger = item.trigger
    given: dict[str, Any] = {"category": category or item.category}  # the rules' extension
    work = Envelope(
        id=trigger.event_id,
        source=trigger.source,
        type=trigger.type,
        correlationid=trigger.event_id,
        data={"id": trigger.event_id, "type": trigger.type, "data": {"ticket_id": item.ticket_id}},
        **given,
    )
    published = await bus.publish(
        subjects.work("drafter", trigger.type),
        work.to_bytes(),
        msg_id=ids.router(trigger.event_id, "drafter"),
    )
    return item.model_copy(
        update={
            "trigger": trigger.model_copy(update={"work_seq": published.seq}),
            "round_messages": item.round_messages or [item.round],
        }
    )
