"""What the reviewer sees of a conversation, and what the inbox does when it moves on: against
a real inbox_api process and a real nats-server, on SQLite and on PostgreSQL."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import Overdue
from shared.results import ITEM_WITHDRAWN, NOTIFY_SENT, REPLY_WITHDRAWN, SOURCE_SENDER, event_id
from tests.helpers import eventually
from tests.inbox_items import conversation, draft_item, publish_withdrawal

from .conftest import Api
from .test_api import decisions, new_thread, stored, waiting


async def publish(bus: Bus, subject: str, kind: str, msg_id: str, data: dict[str, Any]) -> None:
    envelope = Envelope(id=msg_id, source=SOURCE_SENDER, type=kind, data=data)
    await bus.publish(subject, envelope.to_bytes(), msg_id=msg_id)


async def test_the_item_shows_the_whole_conversation_and_the_customer(
    api: Api, nats_bus: Bus
) -> None:
    thread = new_thread()
    said = conversation(
        thread,
        ("customer", "I was charged twice."),
        ("agent", "Refunded one of them."),
        ("customer", "Thanks, but the refund has not arrived."),
    )
    item = draft_item(thread, round_id=said[-1].id, conversation=said, priority="urgent")
    await waiting(api, nats_bus, item)
    detail = await stored(api, item.id)
    assert detail is not None
    assert [m["body"] for m in detail["conversation"]] == [m.body for m in said]
    assert [m["author"] for m in detail["conversation"]] == ["customer", "agent", "customer"]
    assert detail["round_messages"] == [said[-1].id]
    assert detail["customer"] == {"id": "C1", "name": "Jane Doe", "email": "jane.doe@example.com"}
    assert (detail["priority"], detail["ticket_status"]) == ("urgent", "open")
    async with api.client() as client:
        urgent = (await client.get("/api/items", params={"priority": "urgent"})).json()["items"]
        first = (await client.get("/api/items", params={"sort": "priority"})).json()["items"][0]
        bad = await client.get("/api/items", params={"priority": "whenever"})
    assert item.id in [i["id"] for i in urgent]
    assert all(i["priority"] == "urgent" for i in urgent)
    assert first["priority"] == "urgent"
    assert bad.status_code == 422


async def test_an_edit_changes_the_text_never_the_target(api: Api, nats_bus: Bus) -> None:
    thread, other = new_thread(), new_thread()
    item = draft_item(thread)
    await waiting(api, nats_bus, item)
    args = item.action_request.args
    async with api.client() as client:
        renamed = await client.post(
            f"/api/items/{item.id}/decision",
            json={
                "type": "edit",
                "version": 1,
                "args": {"action": "notify_supervisor", "args": {"reply": "Hi"}},
            },
        )
        retargeted = await client.post(
            f"/api/items/{item.id}/decision",
            json={
                "type": "edit",
                "version": 1,
                "args": {"action": "send_reply", "args": {**args, "ticket_id": other}},
            },
        )
        extra = await client.post(
            f"/api/items/{item.id}/decision",
            json={"type": "edit", "version": 1, "args": {"reply": "Hi", "to": "x@example.com"}},
        )
        assert (renamed.status_code, retargeted.status_code, extra.status_code) == (422, 422, 422)
        assert "action" in renamed.json()["error"]
        assert "ticket_id" in retargeted.json()["error"]
        assert await decisions(nats_bus, thread) == []
        fine = await client.post(
            f"/api/items/{item.id}/decision",
            json={
                "type": "edit",
                "version": 1,
                "args": {"action": "send_reply", "args": {**args, "reply": "Edited."}},
            },
        )
    assert fine.status_code == 202, fine.text
    [published] = await decisions(nats_bus, thread)
    assert published["args"]["action"] == "send_reply"
    assert published["args"]["args"]["ticket_id"] == thread
    assert published["args"]["args"]["reply"] == "Edited."


async def test_a_withdrawn_draft_cannot_be_decided_and_says_why(api: Api, nats_bus: Bus) -> None:
    thread = new_thread()
    item = draft_item(thread)
    await waiting(api, nats_bus, item)
    await publish_withdrawal(nats_bus, item, "a person answered in the helpdesk")

    async def withdrawn() -> bool:
        detail = await stored(api, item.id)
        return detail is not None and detail["status"] == "withdrawn"

    await eventually(withdrawn, timeout=15, message="withdrawn")
    async with api.client() as client:
        answer = await client.post(
            f"/api/items/{item.id}/decision", json={"type": "accept", "version": 1}
        )
    assert answer.status_code == 409
    assert "a person answered in the helpdesk" in answer.json()["error"]
    assert await decisions(nats_bus, thread) == []
    # the sender's item.withdrawn result later agrees, and changes nothing
    await publish(
        nats_bus,
        subjects.result(ITEM_WITHDRAWN),
        ITEM_WITHDRAWN,
        event_id(ITEM_WITHDRAWN, item.id),
        {"item_id": item.id, "reason": "a person answered in the helpdesk"},
    )
    detail = await stored(api, item.id)
    assert detail is not None and detail["withdrawn_reason"] == "a person answered in the helpdesk"


async def test_a_withdrawal_shows_the_tickets_status_when_the_senders_result_came_first(
    api: Api, nats_bus: Bus
) -> None:
    """The sender's item.withdrawn result and the drafter's notice race: whichever the inbox
    reads first, the reviewer sees the ticket as it is now (closed), not as it was drafted."""
    thread = new_thread()
    item = draft_item(thread)
    await waiting(api, nats_bus, item)
    reason = "the ticket was closed"
    await publish(
        nats_bus,
        subjects.result(ITEM_WITHDRAWN),
        ITEM_WITHDRAWN,
        event_id(ITEM_WITHDRAWN, item.id),
        {"item_id": item.id, "reason": reason},
    )

    async def withdrawn() -> bool:
        detail = await stored(api, item.id)
        return detail is not None and detail["status"] == "withdrawn"

    await eventually(withdrawn, timeout=15, message="withdrawn by the result")
    await publish_withdrawal(nats_bus, item, reason, ticket_status="closed")

    async def closed() -> bool:
        detail = await stored(api, item.id)
        return detail is not None and detail["ticket_status"] == "closed"

    await eventually(closed, timeout=15, message="the ticket's status from the notice")
    detail = await stored(api, item.id)
    assert detail is not None
    assert (detail["status"], detail["withdrawn_reason"]) == ("withdrawn", reason)


async def test_reply_withdrawn_ends_a_sending_item_and_overdue_items_come_first(
    api: Api, nats_bus: Bus
) -> None:
    thread, late = new_thread(), new_thread()
    item = draft_item(thread)
    overdue = draft_item(late, created_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    await waiting(api, nats_bus, item, overdue)
    async with api.client() as client:
        sent = await client.post(
            f"/api/items/{item.id}/decision", json={"type": "accept", "version": 1}
        )
    assert sent.status_code == 202
    assert (await stored(api, item.id) or {})["status"] == "sending"
    await publish(
        nats_bus,
        subjects.result(REPLY_WITHDRAWN),
        REPLY_WITHDRAWN,
        event_id(REPLY_WITHDRAWN, f"{thread}/r1/send_reply"),
        {"item_id": item.id, "reason": "the ticket was closed"},
    )

    async def ended() -> bool:
        detail = await stored(api, item.id)
        return detail is not None and detail["status"] == "withdrawn"

    await eventually(ended, timeout=15, message="the item withdrawn")
    assert (await stored(api, item.id) or {})["withdrawn_reason"] == "the ticket was closed"

    day = dt.date(2026, 12, 1)
    notice = Overdue(
        item_id=overdue.id,
        thread=late,
        version=1,
        ticket_id=late,
        day=day,
        at=dt.datetime.now(dt.UTC),
    )
    await publish(
        nats_bus,
        subjects.INBOX_OVERDUE,
        subjects.INBOX_OVERDUE,
        f"overdue:{late}",
        notice.model_dump(mode="json"),
    )

    async def marked() -> bool:
        detail = await stored(api, overdue.id)
        return detail is not None and detail["overdue_since"] == day.isoformat()

    await eventually(marked, timeout=15, message="marked overdue")
    async with api.client() as client:
        listed = (await client.get("/api/items", params={"status": "waiting"})).json()["items"]
    assert listed[0]["id"] == overdue.id


async def test_a_supervisor_notification_shows_on_the_tickets_items(
    api: Api, nats_bus: Bus
) -> None:
    thread = new_thread()
    item = draft_item(thread)
    await waiting(api, nats_bus, item)
    await publish(
        nats_bus,
        subjects.result(NOTIFY_SENT),
        NOTIFY_SENT,
        event_id(NOTIFY_SENT, f"notify:helpdesk:{thread}"),
        {"ticket_id": thread, "channel": "slack", "status_code": 200},
    )

    async def notified() -> bool:
        detail = await stored(api, item.id)
        return bool(detail and detail["notifications"])

    await eventually(notified, timeout=15, message="the notification on the item")
    detail = await stored(api, item.id)
    assert detail is not None
    assert [(n["type"], n["channel"]) for n in detail["notifications"]] == [(NOTIFY_SENT, "slack")]
