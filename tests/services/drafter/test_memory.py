"""The drafter learns from reviewers: a reply they sent (an edited one especially) is shown as
an example to the next similar round of its category, and one the sender withdrew is not; the
standing instructions the inbox publishes reach every draft. A real drafter process, a real
nats-server, FakeLLM."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from desk.helpdesk import DEMO_KNOWLEDGE
from shared import guidance, ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.guidance import Guidance, Instruction
from shared.inbox import InboxItem
from standins.llm import FakeLLM, default_responder
from tests.helpers import eventually
from tests.postgres import fresh_schema, url_in

from .conftest import Harness, decide, items, send_event, settled

EDITED = (
    "Hi, thank you for spotting this. The second charge was a pending authorisation from a "
    "retried payment; it drops off your statement within 3 to 5 business days. The Support Team"
)


def billing(body: dict[str, Any]) -> dict[str, Any]:
    return {**default_responder(body), "category": "billing"}


def quoted(request: dict[str, Any], tag: str) -> Any:
    text = request["messages"][-1]["content"]
    if f"<{tag}>" not in text:
        return None
    return json.loads(text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0])


async def count(bus: Bus, n: int) -> bool:
    return len(await items(bus)) >= n


async def publish_withdrawn(bus: Bus, item: InboxItem, reason: str) -> None:
    key = ids.outbox(item.thread, item.round, "send_reply")
    envelope = Envelope(
        id=f"reply.withdrawn:{key}",
        source="/desk/sender",
        type="reply.withdrawn",
        data={"outbox_key": key, "thread": item.thread, "round": item.round, "reason": reason},
    )
    await bus.publish(subjects.result("reply.withdrawn"), envelope.to_bytes(), msg_id=envelope.id)


async def test_an_edited_reply_becomes_the_example_for_the_next_similar_ticket(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = billing
    harness.start(DESK_KNOWLEDGE_DIR=str(DEMO_KNOWLEDGE))
    await send_event(bus, "T1012", "evt_1")  # "Charged twice for my subscription"
    await eventually(lambda: count(bus, 1), timeout=20, message="T1012's draft")
    [first] = await items(bus)
    assert quoted(fake_llm.requests[0], "examples") is None  # nothing learned yet
    assert first.examples == []
    edited = {"action": "send_reply", "args": {**first.action_request.args, "reply": EDITED}}
    await decide(bus, first, "edit", edited)
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="edit")

    await send_event(bus, "T1022", "evt_2")  # "Double charge on my credit card"
    await eventually(lambda: count(bus, 2), timeout=20, message="T1022's draft")
    second = (await items(bus))[1]
    # the newest call drafted T1022 (on a loaded machine T1012's first draft may have taken
    # more than one call: a redelivery after the ack wait, a retry after the model's timeout)
    [example] = quoted(fake_llm.requests[-1], "examples")
    assert example["team sent"] == EDITED  # what the reviewer sent, not what was drafted
    assert example["category"] == "billing"
    assert "Charged twice" in example["customer wrote"]
    assert second.examples == [f"T1012/{first.round}"]

    # the edited reply never went out (the ticket closed first): it is no example any more
    await publish_withdrawn(bus, first, "the ticket was closed")
    await eventually(lambda: settled(bus, subjects.RESULTS, "drafter-results"), message="result")
    await decide(bus, second, "response", "Shorter, please.")
    await eventually(lambda: count(bus, 3), timeout=20, message="T1022's redraft")
    assert quoted(fake_llm.requests[-1], "examples") is None
    assert (await items(bus))[2].examples == []


async def test_the_standing_instructions_reach_the_draft_and_its_item(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = billing
    standing = Guidance(
        instructions=[
            Instruction(id=1, category="billing", text="Always say when the money is back."),
            Instruction(id=2, category="refund", text="Mention the 5-day processing time."),
        ]
    )
    await guidance.write(bus.js, standing)
    harness.start()
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: count(bus, 1), timeout=20, message="the draft")
    [item] = await items(bus)
    asked = fake_llm.requests[0]["messages"][-1]["content"]
    assert "- billing: Always say when the money is back." in asked
    assert "- refund: Mention the 5-day processing time." in asked
    assert item.instructions == ["Always say when the money is back."]  # its category's

    # read again for every draft: what the reviewers changed meanwhile reaches the next one
    await guidance.write(
        bus.js, Guidance(instructions=[Instruction(id=3, category="billing", text="Say sorry.")])
    )
    await send_event(bus, "T1013", "evt_2")
    await eventually(lambda: count(bus, 2), timeout=20, message="the second draft")
    asked = fake_llm.requests[-1]["messages"][-1]["content"]
    assert "- billing: Say sorry." in asked
    assert "money is back" not in asked


async def test_a_remembered_example_expires_after_the_archive_period(tmp_path: Path) -> None:
    from services.drafter import memory
    from services.drafter.checkpoints import open_storage

    example = memory.Example("T1", "r1", "billing", "Charged twice", "Refunded.", False, "now")
    async with open_storage(None, tmp_path, keep_days=1 / 86400) as storage:  # one second
        await memory.remember(storage.store, "T1", example)
        assert [e.ref for e in await memory.similar(storage.store, "charged", "billing", 3)] == [
            "T1/r1"
        ]

        async def expired() -> bool:
            storage.store.sweep_ttl()  # type: ignore[attr-defined]  # the hourly sweep, now
            return not await memory.similar(storage.store, "charged", "billing", 3)

        await eventually(expired, timeout=10, message="the example's TTL to pass")


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_the_newest_examples_of_a_category_are_read_along_an_index(
    tmp_path: Path, database: str
) -> None:
    """What a draft is shown comes from the newest examples of its category, read along an
    index (a year of examples is kept: reading them all took 200 ms a draft at 48,000), and
    they are the ones LangGraph's own search of the store finds."""
    from services.drafter import memory
    from services.drafter.checkpoints import open_storage

    with contextlib.ExitStack() as stack:
        url = None
        if database == "postgres":
            url = url_in(stack.enter_context(fresh_schema()))
        async with open_storage(url, tmp_path) as storage:
            store = storage.store
            for i in range(120):
                category = "billing" if i % 3 else "shipping"
                asked = "charged twice" if i == 61 else f"question number {i}"
                example = memory.Example(f"T{i}", "r1", category, asked, f"reply {i}", False, "")
                await memory.remember(store, f"T{i}", example)

            newest = await memory._recent(store, "billing", 30)
            assert len(newest) == 30
            assert {value["category"] for _, value, _ in newest} == {"billing"}
            times = [at for _, _, at in newest]
            assert times == sorted(times, reverse=True)
            every = await memory._recent(store, "billing", 1000)
            theirs = await store.asearch(
                memory.NAMESPACE, filter={"category": "billing"}, limit=1000
            )
            assert {key for key, _, _ in every} == {item.key for item in theirs}
            assert len(every) == 80
            assert len(await memory._recent(store, None, 1000)) == 120

            found = await memory.similar(store, "I was charged twice", "billing", 1)
            assert [e.ref for e in found] == ["T61/r1"]
            assert await memory.similar(store, "I was charged twice", "returns", 1) == []

            if database == "sqlite":
                lite: Any = store
                for category in ("billing", None):
                    query = memory._SQLITE_RECENT.format(
                        category=" AND json_extract(value, '$.category') = ?" if category else ""
                    )
                    params = ("examples", category, 30) if category else ("examples", 30)
                    plan = " ".join(
                        row[-1] for row in lite.conn.execute("EXPLAIN QUERY PLAN " + query, params)
                    )
                    assert "USING INDEX store_recent" in plan and "TEMP B-TREE" not in plan, plan
            else:
                pool: Any = store.conn  # type: ignore[attr-defined]
                async with pool.connection() as conn:
                    cur = await conn.execute(
                        "SELECT indexname FROM pg_indexes WHERE tablename = 'store'"
                        " AND schemaname = current_schema()"
                    )
                    names = {row["indexname"] for row in await cur.fetchall()}
                assert {"store_recent", "store_recent_category"} <= names
