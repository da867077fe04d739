"""The drafter process end to end: events in, inbox items out, decisions resume the thread."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.graph.state import CompiledStateGraph

from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from standins.llm import FakeLLM
from tests.helpers import eventually, messages
from tests.services_running import ServiceProcess

from .conftest import Harness, decide, items, send_event, settled

Graph = CompiledStateGraph[Any, Any, Any, Any]

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


async def test_a_ticket_becomes_an_inbox_item_in_the_human_interrupt_shape(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the inbox item")

    [item] = await items(bus)
    assert item.action_request.action == "send_reply"
    assert item.action_request.args["ticket_id"] == "T1012"
    assert item.action_request.args["reply"]
    assert item.config.allow_accept and item.config.allow_edit
    assert item.config.allow_respond and item.config.allow_ignore
    assert item.description and "T1012" in item.description
    assert (item.thread, item.version, item.id) == ("T1012", 1, "T1012~v1")
    assert item.category == "refund"
    assert item.trigger.event_id == "helpdesk:evt_1"
    assert item.cost.input_tokens > 0 and item.cost.output_tokens > 0
    expected = (item.cost.input_tokens * 0.15 + item.cost.output_tokens * 0.60) / 1e6
    assert abs(item.cost.usd - expected) < 1e-6
    [stored] = [m for m in await messages(bus.js, subjects.INBOX)]
    assert stored.headers["Nats-Msg-Id"] == "inbox.item:T1012:T1012-m1:v1"
    # the conversation the draft answers travels with it
    assert (item.round, item.round_kind, item.round_messages) == (
        "T1012-m1",
        "answer",
        ["T1012-m1"],
    )
    assert item.customer is not None and item.customer.name == "Daniel Murphy"
    assert item.conversation[-1].author == "customer"
    assert "charged twice" in item.conversation[-1].body
    assert (item.ticket_status, item.priority) == ("open", "high")
    [request] = fake_llm.requests
    assert request["tool_choice"]["function"]["name"] == "Draft"
    assert request["authorization"] == "Bearer test-key"
    assert "Charged twice" in request["messages"][-1]["content"]  # the ticket, as quoted data


async def test_a_server_refusing_tools_gets_drafts_with_the_default_output_setting(
    bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    with FakeLLM(tools="refuse") as llm:  # 400 for tools/tool_choice, like Ollama without tools
        harness = Harness(nats_server, tmp_path, llm)
        try:
            process = harness.start()  # DESK_LLM_OUTPUT unset: auto
            await send_event(bus, "T1012", "evt_auto_1")
            await eventually(lambda: items(bus), timeout=20, message="the first draft")
            await send_event(bus, "T1003", "evt_auto_2")

            async def two_items() -> bool:
                return len(await items(bus)) == 2

            await eventually(two_items, timeout=20, message="the second draft")
            await eventually(lambda: settled(bus), message="both work items acked")
        finally:
            harness.stop_all()
        asked = [("tools" in r, "response_format" in r, r["answer"]) for r in llm.requests]
    assert [i.ticket_id for i in await items(bus)] == ["T1012", "T1003"]
    assert all(i.action_request.action == "send_reply" for i in await items(bus))
    assert all(i.action_request.args["reply"] for i in await items(bus))
    assert (await bus.js.stream_info(subjects.DLQ)).state.messages == 0
    assert asked == [
        (True, False, "error 400"),  # the forced tool call, refused
        (False, True, "json_schema"),  # the same ticket at once, with the schema
        (False, True, "json_schema"),  # the next ticket goes straight to what worked
    ]
    assert "DESK_LLM_OUTPUT=auto chose json_schema" in process.log.read_text()


async def test_a_model_answering_503_twice_is_waited_out_in_place_to_one_item(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.fail_next(503, times=2)
    harness.start()
    await send_event(bus, "T1003", "evt_2")
    await eventually(lambda: items(bus), timeout=30, message="the item after two 503s")
    await eventually(lambda: settled(bus), message="the work item acked")
    assert len(fake_llm.requests) == 3
    assert len(await items(bus)) == 1
    info = await bus.js.consumer_info(subjects.WORK, "drafter")
    assert info.delivered.consumer_seq == 1  # held in place: no delivery spent on the model


async def test_rejected_model_credentials_are_an_outage_waited_out_not_a_dead_letter(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    """A wrong API key (or one revoked for a while) is the endpoint's problem, not the ticket's:
    the ticket waits, the drafter says why, and once the key works it is drafted."""
    fake_llm.fail_next(401, times=4)
    process = harness.start(DESK_LLM_PROBE_INTERVAL="1", DESK_MAX_DELIVER="2")
    await send_event(bus, "T1012", "evt_3")
    await eventually(
        lambda: "credentials" in _degraded(process).get("model", ""),
        timeout=30,
        message="the drafter saying the model refuses its credentials",
    )
    await eventually(lambda: items(bus), timeout=30, message="the item once the key works")
    assert await messages(bus.js, subjects.DLQ) == []
    assert len(fake_llm.requests) == 5
    await eventually(lambda: not _degraded(process), timeout=10, message="the model up again")


async def _count(bus: Bus, wanted: int) -> bool:
    return len(await items(bus)) >= wanted


def _degraded(process: ServiceProcess) -> dict[str, str]:
    try:
        answer = httpx.get(f"{process.ops_url}/readyz", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return dict(answer.get("degraded") or {})


async def test_a_ticket_whose_answers_stay_unusable_goes_to_a_person_without_a_draft(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.answer_text_next("I am not able to help with that.", times=2)
    harness.start(DESK_LLM_OUTPUT="tool", DESK_MAX_DELIVER="2")
    await send_event(bus, "T1003", "evt_unusable")
    await eventually(lambda: items(bus), timeout=30, message="an item without a draft")
    [item] = await items(bus)
    assert item.no_draft and "no usable draft" in item.no_draft
    assert item.action_request.args["reply"] == ""
    assert not item.config.allow_accept  # nothing to accept: a person writes it
    assert item.config.allow_edit and item.config.allow_respond and item.config.allow_ignore
    assert any("write the reply yourself" in w for w in item.warnings)
    assert await messages(bus.js, subjects.DLQ) == []

    # a reviewer asks the model to try again (one decision per version: the inbox refuses
    # accept on such an item before anything is published)
    await decide(bus, item, "response", "Please try again, they want a refund.")
    await eventually(lambda: _count(bus, 2), timeout=30, message="the redraft")
    second = (await items(bus))[-1]
    assert second.version == 2 and second.no_draft is None and second.action_request.args["reply"]


async def test_a_ticket_the_endpoint_refuses_goes_to_a_person_at_once(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.fail_next(400, message="This model's maximum context length is 8192 tokens.")
    harness.start(DESK_MAX_DELIVER="2")
    await send_event(bus, "T1012", "evt_refused")
    await eventually(lambda: items(bus), timeout=30, message="an item without a draft")
    [item] = await items(bus)
    assert item.no_draft and "refused the request (400)" in item.no_draft
    assert len(fake_llm.requests) == 1
    assert await messages(bus.js, subjects.DLQ) == []


async def test_an_unknown_ticket_is_dead_lettered_once_without_a_model_call(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T9999", "evt_4")
    await eventually(lambda: messages(bus.js, subjects.DLQ), timeout=20, message="a dead letter")
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.headers["Desk-Dlq-Attempts"] == "1"
    assert "T9999 does not exist" in dead.headers["Desk-Dlq-Error"]
    assert fake_llm.requests == []


async def test_a_closed_ticket_gets_no_model_call_and_no_item(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1040", "evt_5")
    await eventually(lambda: settled(bus), timeout=20, message="the event acked")
    assert fake_llm.requests == []
    assert await items(bus) == []
    assert (await bus.js.stream_info(subjects.DLQ)).state.messages == 0


async def test_a_lawyer_ticket_becomes_a_notify_item_that_refuses_accept(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1027", "evt_6")
    await eventually(lambda: items(bus), timeout=20, message="the notify item")
    [item] = await items(bus)
    assert item.action_request.action == "notify_supervisor"
    assert "lawyer" in item.action_request.args["matched"]
    assert item.config.allow_ignore and item.config.allow_edit  # "Take it": write the reply
    assert not (item.config.allow_accept or item.config.allow_respond)
    assert fake_llm.requests == []

    await decide(bus, item, "accept")
    await eventually(
        lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="the accept refused"
    )
    assert await items(bus) == [item]


async def test_feedback_produces_version_2_whose_prompt_carries_all_feedback(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1041", "evt_7")
    await eventually(lambda: items(bus), timeout=20, message="version 1")
    [v1] = await items(bus)

    await decide(bus, v1, "response", "Mention that the invoice is sent within 2 days")
    await eventually(lambda: _count(bus, 2), timeout=20, message="version 2")
    v2 = (await items(bus))[1]
    assert (v2.version, v2.id, v2.thread) == (2, "T1041~v2", "T1041")
    assert v2.feedback == ["Mention that the invoice is sent within 2 days"]
    assert (
        "- Mention that the invoice is sent within 2 days"
        in fake_llm.requests[-1]["messages"][-1]["content"]
    )
    assert "Mention that the invoice is sent within 2 days" in v2.action_request.args["reply"]

    await decide(bus, v2, "response", "Also apologise for the delay")
    await eventually(lambda: _count(bus, 3), timeout=20, message="version 3")
    last_prompt = fake_llm.requests[-1]["messages"][-1]["content"]
    assert "- Mention that the invoice is sent within 2 days" in last_prompt
    assert "- Also apologise for the delay" in last_prompt

    await decide(bus, v1, "accept")  # a decision on a superseded version is refused
    v3 = (await items(bus))[2]
    await decide(bus, v3, "accept")
    await eventually(
        lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="decisions handled"
    )
    assert len(await items(bus)) == 3
    assert len(fake_llm.requests) == 3


async def test_duplicate_events_and_a_second_event_for_the_ticket_make_one_item(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1012", "evt_8")
    await send_event(bus, "T1012", "evt_8", router_msg_id="beyond-the-dedup-window")
    await send_event(bus, "T1012", "evt_9", event_type="ticket.updated")
    await eventually(lambda: settled(bus), timeout=20, message="three events handled")
    assert len(await items(bus)) == 1
    assert len(fake_llm.requests) == 1


async def test_killed_after_the_model_call_the_item_is_emitted_once_without_calling_again(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    # INBOX takes decisions only for now, so the item cannot be published: the drafter is
    # held after the model call, with the draft checkpointed.
    info = await bus.js.stream_info(subjects.INBOX)
    info.config.subjects = [subjects.INBOX_DECISION]
    await bus.js.update_stream(info.config)
    first = harness.start(DESK_PROVISION="false")
    await send_event(bus, "T1012", "evt_10")
    await eventually(lambda: len(fake_llm.requests) == 1, timeout=20, message="the model call")
    await eventually(lambda: _waiting_for_review(harness), message="the draft checkpointed")
    first.kill()

    info.config.subjects = ["inbox.>"]
    await bus.js.update_stream(info.config)
    harness.start()
    await eventually(lambda: items(bus), timeout=30, message="the item after the restart")
    await eventually(lambda: settled(bus), timeout=20, message="the event acked")
    assert len(await items(bus)) == 1
    assert len(fake_llm.requests) == 1


def _waiting_for_review(harness: Harness) -> bool:
    path = harness.root / "var" / "drafter-checkpoints.sqlite"
    if not path.exists():
        return False
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT COUNT(*) FROM writes WHERE thread_id = 'T1012' AND channel = '__interrupt__'"
        ).fetchone()
    return bool(rows and rows[0])


async def test_a_draft_failing_the_checks_is_redrafted_once_then_reviewed_with_a_warning(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    def promises_money(body: dict[str, object]) -> dict[str, str]:
        return {
            "category": "refund",
            "summary": "Refund request",
            "reply": "Hi, we will refund $49.99 today, see https://example.com. The Support Team",
        }

    fake_llm.responder = promises_money
    harness.start()
    await send_event(bus, "T1012", "evt_11")
    await eventually(lambda: items(bus), timeout=20, message="the item")
    [item] = await items(bus)
    assert len(fake_llm.requests) == 2
    assert "names an amount of money" in fake_llm.requests[1]["messages"][-1]["content"]
    assert any("amount of money" in w for w in item.warnings)
    assert any("link" in w for w in item.warnings)
    assert item.description and "Check before sending" in item.description


async def test_a_redraft_cut_off_before_its_item_was_published_is_emitted_after_restart(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    first = harness.start(DESK_PROVISION="false")
    await send_event(bus, "T1041", "evt_12")
    await eventually(lambda: items(bus), timeout=20, message="version 1")
    [v1] = await items(bus)

    info = await bus.js.stream_info(subjects.INBOX)
    info.config.subjects = [subjects.INBOX_DECISION]  # v2 cannot be published: held after it
    await bus.js.update_stream(info.config)
    await decide(bus, v1, "response", "Mention the VAT number")
    await eventually(lambda: len(fake_llm.requests) == 2, timeout=20, message="the redraft")
    # the redraft is checkpointed once its publish was tried (and failed): then kill
    await eventually(
        lambda: "attempt 1 failed" in first.tail(), timeout=20, message="the publish failing"
    )
    first.kill()
    info.config.subjects = ["inbox.>"]
    await bus.js.update_stream(info.config)

    harness.start()  # the decision comes back; the thread already waits at v2
    await eventually(lambda: _count(bus, 2), timeout=30, message="version 2 published")
    assert [i.version for i in await items(bus)] == [1, 2]
    assert len(fake_llm.requests) == 2


async def test_a_thread_an_older_drafter_saved_between_its_load_and_guard_steps_drafts_once(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    """`load` applies the business rules itself now; a thread saved per step by a drafter
    whose graph still had them as a `guard` step after it must still go on from there."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    from services.drafter import Deps, OfflineDraftModel, Work
    from services.drafter.graph import nodes, routes
    from services.drafter.graph.state import State
    from shared.helpdesk.sql import SqlSource

    async def old_load(state: State, runtime: Any) -> dict[str, Any]:
        loaded = await nodes.load(state, runtime)
        return {k: v for k, v in loaded.items() if k not in ("outcome", "escalation")}

    builder: StateGraph[State, Deps, State, State] = StateGraph(State, context_schema=Deps)
    builder.add_node("load", old_load)
    for name in ("guard", "draft", "notify", "review", "finish"):
        builder.add_node(name, getattr(nodes, name))
    builder.add_edge(START, "load")
    builder.add_edge("load", "guard")
    builder.add_conditional_edges("guard", routes.after_rules)
    builder.add_edge("draft", "review")
    builder.add_edge("notify", "review")
    builder.add_conditional_edges("review", routes.after_review)
    builder.add_edge("finish", END)

    var = harness.root / "var"
    var.mkdir(parents=True, exist_ok=True)
    source = SqlSource(harness.helpdesk_url)
    trigger = {"source": "helpdesk", "type": "ticket.created", "event_id": "evt_old"}
    config = RunnableConfig(configurable={"thread_id": "T1012"})
    async with AsyncSqliteSaver.from_conn_string(str(var / "drafter-checkpoints.sqlite")) as saver:
        old: Graph = builder.compile(checkpointer=saver, interrupt_after=["load"])
        deps = Deps(source=source, model=OfflineDraftModel())
        await old.ainvoke(Work("T1012", "T1012", None, trigger, None).start(), config, context=deps)
        assert (await old.aget_state(config)).next == ("guard",)
    await source.close()

    harness.start()
    await send_event(bus, "T1012", "evt_old")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    await eventually(lambda: settled(bus), timeout=20, message="the event acked")
    [item] = await items(bus)
    assert item.ticket_id == "T1012" and item.version == 1
    assert len(fake_llm.requests) == 1


async def test_killed_during_the_model_call_the_redelivered_event_drafts_the_round_once(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    """A run is saved when it stops (durability "exit"): a drafter killed mid-run leaves
    nothing of that run, and the event delivered again drafts the round from the start."""
    fake_llm.delay = 30.0
    first = harness.start()
    await send_event(bus, "T1012", "evt_13")
    await eventually(lambda: fake_llm.in_flight == 1, timeout=20, message="the model call")
    first.kill()
    fake_llm.delay = 0.0

    harness.start()
    await eventually(lambda: items(bus), timeout=30, message="the draft after the restart")
    await eventually(lambda: settled(bus), timeout=20, message="the event acked")
    [item] = await items(bus)
    assert (item.ticket_id, item.version) == ("T1012", 1)
    assert len(fake_llm.requests) == 1  # answered once: the call the kill cut off never was
