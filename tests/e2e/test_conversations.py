"""A conversation through the whole system, as a user drives it with `desk`: every customer
message gets exactly one reviewed answer, and a draft the helpdesk overtook is never sent."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from tests.helpers import eventually, messages

from .test_stack import Stack, all_healthy, desk, stack

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

__all__ = ["stack"]


def item(stack: Stack, item_id: str) -> dict[str, Any] | None:
    state = stack.state()
    token = json.loads(Path(state["credentials"]).read_text())["reviewer_token"]
    url = state["services"]["inbox_api"]["url"]
    answer = httpx.get(
        f"{url}/api/items/{item_id}", headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    return answer.json() if answer.status_code == 200 else None


def status_of(stack: Stack, item_id: str, status: str) -> bool:
    found = item(stack, item_id)
    return found is not None and found["status"] == status


async def results(stack: Stack, kind: str) -> list[Envelope]:
    bus = await Bus.connect(stack.state()["nats_admin_url"], service="test")
    try:
        found = [Envelope.model_validate_json(m.data) for m in await messages(bus.js, "RESULTS")]
    finally:
        await bus.close()
    return [e for e in found if e.type == kind]


async def test_round_two_is_answered_once_after_redelivery_and_a_sender_kill(
    stack: Stack,
) -> None:
    stack.up()
    await eventually(lambda: all_healthy(stack), timeout=60, message="six healthy services")
    sent = desk(stack, "send-webhook", "--ticket", "T1012")
    assert sent.returncode == 0, sent.stderr
    await eventually(lambda: item(stack, "T1012~v1"), timeout=30, message="round one drafted")
    accepted = desk(stack, "inbox", "accept", "T1012~v1")
    assert accepted.returncode == 0, accepted.stderr
    await eventually(lambda: status_of(stack, "T1012~v1", "sent"), timeout=30, message="sent")

    wrote = desk(
        stack, "helpdesk", "message", "--ticket", "T1012", "--body", "I still see two charges."
    )
    assert wrote.returncode == 0, wrote.stderr
    await eventually(lambda: item(stack, "T1012~v2"), timeout=30, message="round two drafted")
    v2 = item(stack, "T1012~v2")
    assert v2 is not None and v2["status"] == "waiting"
    said = [(m["author"], m["body"]) for m in v2["conversation"]]
    assert [a for a, _ in said] == ["customer", "agent", "customer"]  # all three messages
    assert said[1][1] == (item(stack, "T1012~v1") or {})["action_request"]["args"]["reply"]
    assert said[2][1] == "I still see two charges."
    assert v2["round_messages"] == [v2["conversation"][-1]["id"]]

    # the sender dies; the decision is delivered while it is down, and once more after
    status = stack.status()
    sender_pid = status["services"]["sender"]["pid"]
    os.kill(sender_pid, signal.SIGKILL)
    accepted = desk(stack, "inbox", "accept", "T1012~v2")
    assert accepted.returncode == 0, accepted.stderr
    bus = await Bus.connect(stack.state()["nats_admin_url"], service="test")
    try:

        async def recorded() -> list[bytes]:
            return [
                m.data
                for m in await messages(bus.js, subjects.INBOX)
                if m.subject == subjects.INBOX_DECISION and b'"T1012~v2"' in m.data
            ]

        await eventually(recorded, timeout=20, message="the decision on the bus")
        [decision] = await recorded()
        # the same decision again, past the broker's dedup window (another msg id)
        await bus.publish(subjects.INBOX_DECISION, decision, msg_id="redelivered-by-test")
    finally:
        await bus.close()
    await eventually(lambda: status_of(stack, "T1012~v2", "sent"), timeout=60, message="sent")

    async def two_sent() -> bool:
        return len(await results(stack, "reply.sent")) >= 2

    await eventually(two_sent, timeout=30, message="two reply.sent")
    replies = await results(stack, "reply.sent")
    keys = [e.data["outbox_key"] for e in replies]  # type: ignore[index]
    assert len(replies) == 2 and len(set(keys)) == 2, keys
    assert all(k.startswith("T1012/") for k in keys)
    assert len({e.id for e in replies}) == 2


async def test_a_draft_the_helpdesk_overtook_is_withdrawn_not_sent(stack: Stack) -> None:
    stack.up()
    await eventually(lambda: all_healthy(stack), timeout=60, message="six healthy services")
    for ticket in ("T1041", "T1005"):
        sent = desk(stack, "send-webhook", "--ticket", ticket)
        assert sent.returncode == 0, sent.stderr
    await eventually(lambda: item(stack, "T1041~v1"), timeout=30, message="T1041 drafted")
    await eventually(lambda: item(stack, "T1005~v1"), timeout=30, message="T1005 drafted")

    answered = desk(
        stack, "helpdesk", "message", "--ticket", "T1041", "--author", "agent",
        "--body", "Yes, the difference is VAT.",
    )  # fmt: skip
    assert answered.returncode == 0, answered.stderr
    closed = desk(stack, "helpdesk", "close", "--ticket", "T1005")
    assert closed.returncode == 0, closed.stderr
    for item_id in ("T1041~v1", "T1005~v1"):
        await eventually(
            lambda i=item_id: status_of(stack, i, "withdrawn"),
            timeout=30,
            message=f"{item_id} withdrawn",
        )
    refused = desk(stack, "inbox", "accept", "T1041~v1")
    assert refused.returncode != 0 and "409" in refused.stderr
    assert "answered in the helpdesk" in refused.stderr
    overtaken = item(stack, "T1005~v1") or {}
    assert overtaken["withdrawn_reason"] == "the ticket was closed"
    assert overtaken["ticket_status"] == "closed"  # as it is now, not as it was when drafted

    async def withdrawn() -> bool:
        return len(await results(stack, "item.withdrawn")) == 2

    await eventually(withdrawn, timeout=30, message="two item.withdrawn results")
    assert await results(stack, "reply.sent") == []
