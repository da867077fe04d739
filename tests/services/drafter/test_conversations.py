"""A ticket is a conversation: each customer message gets its round, a waiting draft follows
what happens in the helpdesk (superseded, withdrawn, overdue), and stale tickets waiting on the
customer get one follow-up a day. A real drafter process, a real helpdesk database, FakeLLM."""

from __future__ import annotations

import datetime as dt

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from services.drafter.handlers import COMMAND_WRITES
from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.helpdesk.events import ticket_event
from shared.helpdesk.sql import SqlSource
from shared.inbox import InboxItem, Overdue, Withdrawal
from standins.llm import FakeLLM
from tests.helpers import eventually, messages

from .conftest import Harness, decide, items, send_event, settled

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


def helpdesk(harness: Harness) -> SqlSource:
    return SqlSource(harness.helpdesk_url)


async def notices(bus: Bus, subject: str) -> list[Envelope]:
    return [
        Envelope.model_validate_json(m.data)
        for m in await messages(bus.js, subjects.INBOX)
        if m.subject == subject
    ]


async def the_withdrawal(bus: Bus) -> Withdrawal:
    """The one withdrawal the drafter publishes, once it has."""
    await eventually(
        lambda: notices(bus, subjects.INBOX_WITHDRAWN), timeout=20, message="the withdrawal"
    )
    [notice] = await notices(bus, subjects.INBOX_WITHDRAWN)
    return Withdrawal.model_validate(notice.data)


async def item_count(bus: Bus, n: int) -> bool:
    return len(await items(bus)) >= n


async def test_a_customer_message_after_the_answer_is_a_new_round_with_its_own_item(
    bus: Bus, harness: Harness
) -> None:
    harness.start()
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="round one's item")
    [v1] = await items(bus)
    await decide(bus, v1, "accept")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="resumed")
    await publish_reply_sent(bus, v1)  # the sender's word (a new round waits for it)

    # the same event again, and a backfill of it, change nothing: the round is answered
    await send_event(bus, "T1012", "evt_1", router_msg_id="redelivered-1")
    _, message = helpdesk(harness).add_message("T1012", "Any news? Still two charges.")
    await send_event(bus, "T1012", "evt_2", event_type="ticket.message.created")
    await eventually(lambda: item_count(bus, 2), timeout=20, message="round two's item")
    await eventually(lambda: settled(bus), message="every event handled")

    v1_, v2 = await items(bus)
    assert v1_.id == v1.id and len(await items(bus)) == 2
    assert (v2.version, v2.round, v2.round_messages) == (2, message.id, [message.id])
    assert v2.round != v1.round
    assert [m.id for m in v2.conversation][-1] == message.id
    stored = {m.headers["Nats-Msg-Id"] for m in await messages(bus.js, subjects.INBOX)}
    assert ids.inbox_item("T1012", message.id, 2) in stored


async def test_a_customer_message_while_a_draft_waits_supersedes_it_answering_both(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1041", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the first draft")
    [v1] = await items(bus)
    _, message = helpdesk(harness).add_message("T1041", "Also, can I get the invoice as PDF?")
    await send_event(bus, "T1041", "evt_2", event_type="ticket.message.created")
    await eventually(lambda: item_count(bus, 2), timeout=20, message="the redraft")

    v2 = (await items(bus))[1]
    assert v2.version == 2 and v2.cause == "the customer wrote again"
    assert v2.round == message.id and v2.round_messages == [v1.round, message.id]
    assert v2.trigger.event_id == "helpdesk:evt_2"
    last_prompt = fake_llm.requests[-1]["messages"][-1]["content"]
    assert "invoice as PDF" in last_prompt and "INV-2026-1187" in last_prompt  # both messages

    await decide(bus, v1, "accept")  # a decision on the superseded version is refused
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="refused")
    assert len(await items(bus)) == 2


async def test_an_agent_reply_in_the_helpdesk_withdraws_the_waiting_draft(
    bus: Bus, harness: Harness
) -> None:
    harness.start()
    await send_event(bus, "T1003", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    [v1] = await items(bus)
    helpdesk(harness).add_message("T1003", "Fixed in 4.2.2, please update.", author="agent")
    await send_event(bus, "T1003", "evt_2", event_type="ticket.message.created")
    withdrawal = await the_withdrawal(bus)
    assert (withdrawal.item_id, withdrawal.reason) == (v1.id, "a person answered in the helpdesk")

    await decide(bus, v1, "accept")  # the thread no longer waits: refused, nothing drafted
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="refused")
    assert len(await items(bus)) == 1
    assert len(await notices(bus, subjects.INBOX_WITHDRAWN)) == 1


async def test_closing_the_ticket_withdraws_the_waiting_draft(bus: Bus, harness: Harness) -> None:
    harness.start()
    await send_event(bus, "T1002", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    helpdesk(harness).set_status("T1002", "closed")
    await send_event(bus, "T1002", "evt_2", event_type="ticket.closed")
    withdrawal = await the_withdrawal(bus)
    assert (withdrawal.reason, withdrawal.ticket_status) == ("the ticket was closed", "closed")


async def stale_event(bus: Bus, ticket: str, day: dt.date, *, copy: int = 0) -> None:
    """What the reconciler publishes for a stale ticket (the router forwards it)."""
    key = ids.stale(ticket, day)
    body = ticket_event("ticket.stale", ticket, event_id=key, date=day.isoformat())
    envelope = Envelope(id=key, source="reconciler", type="ticket.stale", data=body)
    await bus.publish(
        subjects.work("drafter", "ticket.stale"),
        envelope.to_bytes(),
        msg_id=f"{ids.router(key, 'drafter')}#{copy}",  # copy > 0: past the broker's window
    )


async def test_a_stale_scan_marks_a_waiting_draft_overdue_and_adds_no_item(
    bus: Bus, harness: Harness
) -> None:
    harness.start()
    await send_event(bus, "T1005", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    day = dt.date(2026, 12, 1)
    await stale_event(bus, "T1005", day)
    await stale_event(bus, "T1005", day, copy=1)  # a second scan, another replica
    await eventually(lambda: notices(bus, subjects.INBOX_OVERDUE), timeout=20, message="overdue")
    await eventually(lambda: settled(bus), message="both reminders handled")
    [item] = await items(bus)
    [notice] = await notices(bus, subjects.INBOX_OVERDUE)  # once a day, however many scans
    overdue = Overdue.model_validate(notice.data)
    assert (overdue.item_id, overdue.day) == (item.id, day)


async def test_a_reminder_delivered_again_after_its_overdue_draft_was_ignored_drafts_nothing(
    bus: Bus, harness: Harness
) -> None:
    harness.start()
    await send_event(bus, "T1005", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    [v1] = await items(bus)
    day = dt.date(2026, 12, 1)
    await stale_event(bus, "T1005", day)
    await eventually(lambda: notices(bus, subjects.INBOX_OVERDUE), timeout=20, message="overdue")
    await eventually(lambda: settled(bus), message="the reminder handled")
    await decide(bus, v1, "ignore")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="ignored")
    # the same reminder again (a redelivery whose first ack was lost): it did its work
    await stale_event(bus, "T1005", day, copy=1)
    await eventually(lambda: settled(bus), message="the redelivered reminder handled")
    assert [i.id for i in await items(bus)] == [v1.id]
    # the next day's reminder redrafts the ignored round, as ever
    await stale_event(bus, "T1005", day + dt.timedelta(days=1))
    await eventually(lambda: item_count(bus, 2), timeout=20, message="the next day's redraft")


async def test_a_ticket_waiting_on_the_customer_gets_one_follow_up_a_day(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    harness.start()
    await send_event(bus, "T1009", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the answer")
    [v1] = await items(bus)
    await decide(bus, v1, "accept")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="sent")
    helpdesk(harness).add_message("T1009", v1.action_request.args["reply"], author="agent")

    day = dt.date(2026, 12, 1)
    for copy in range(2):  # two scans, or two reconciler replicas
        await stale_event(bus, "T1009", day, copy=copy)
    await eventually(lambda: item_count(bus, 2), timeout=20, message="the follow-up")
    await eventually(lambda: settled(bus), message="both reminders handled")
    follow_up = (await items(bus))[-1]
    assert len(await items(bus)) == 2
    assert (follow_up.round, follow_up.round_kind) == ("followup-2026-12-01", "followup")
    assert '"followup": true' in fake_llm.requests[-1]["messages"][-1]["content"]
    assert follow_up.cause and "follow-up" in follow_up.cause

    await decide(bus, follow_up, "ignore")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="ignored")
    await stale_event(bus, "T1009", day, copy=2)  # the same day again: nothing more
    await stale_event(bus, "T1009", day + dt.timedelta(days=1))  # the next day: one more
    await eventually(lambda: item_count(bus, 3), timeout=20, message="the next day's follow-up")
    await eventually(lambda: settled(bus), message="reminders handled")
    assert [i.round for i in await items(bus)][-1] == "followup-2026-12-02"
    assert len(await items(bus)) == 3


async def mail_event(bus: Bus, message_id: str, body: str, **headers: str) -> None:
    event_id = ids.ingress("email", message_id)
    data = {
        "MessageID": message_id,
        "From": "Jane Doe <jane@example.com>",
        "Subject": "Printer on fire",
        "TextBody": body,
        **headers,
    }
    envelope = Envelope(id=event_id, source="email", type="email.received", data=data)
    await bus.publish(
        subjects.work("drafter", "email.received"),
        envelope.to_bytes(),
        msg_id=ids.router(event_id, "drafter"),
    )


async def test_a_reply_mail_joins_the_first_mails_conversation(bus: Bus, harness: Harness) -> None:
    harness.start()
    await mail_event(bus, "first@mail.example", "My printer is on fire.")
    await eventually(lambda: items(bus), timeout=20, message="the first mail's draft")
    [v1] = await items(bus)
    await decide(bus, v1, "accept")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="sent")
    await publish_reply_sent(bus, v1)

    await mail_event(
        bus,
        "second@mail.example",
        "It is still burning.",
        InReplyTo="<first@mail.example>",
        References="<first@mail.example>",
    )
    await eventually(lambda: item_count(bus, 2), timeout=20, message="the reply mail's draft")
    v2: InboxItem = (await items(bus))[1]
    assert v2.thread == v1.thread and v2.version == 2
    bodies = [m.body for m in v2.conversation]
    assert bodies[0] == "My printer is on fire." and bodies[-1] == "It is still burning."
    assert [m.author for m in v2.conversation] == ["customer", "agent", "customer"]
    assert v2.round != v1.round and not v2.in_helpdesk


async def test_a_customer_message_after_an_answer_that_overtook_the_draft_is_not_lost(
    bus: Bus, harness: Harness
) -> None:
    """The draft waits; an agent answers and the customer writes again before the drafter
    hears of either: the draft is withdrawn and the customer's new message gets its round."""
    harness.start()
    await send_event(bus, "T1007", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    helpdesk(harness).add_message("T1007", "Yes, we ship to Switzerland.", author="agent")
    _, message = helpdesk(harness).add_message("T1007", "Great, and how long does it take?")
    await send_event(bus, "T1007", "evt_2", event_type="ticket.message.created")
    await eventually(lambda: item_count(bus, 2), timeout=20, message="the next round's draft")
    await eventually(lambda: settled(bus), message="the event handled")
    [notice] = await notices(bus, subjects.INBOX_WITHDRAWN)
    assert Withdrawal.model_validate(notice.data).reason == "a person answered in the helpdesk"
    v2 = (await items(bus))[1]
    assert (v2.round, v2.round_messages) == (message.id, [message.id])


async def publish_reply_result(
    bus: Bus, item: InboxItem, kind: str, data: dict[str, object], n: int = 0
) -> None:
    """What the sender publishes about an approved reply to `item` (`reply.<kind>`)."""
    key = ids.outbox(item.thread, item.round, "send_reply")
    envelope = Envelope(
        id=f"{kind}:{key}",
        source="/desk/sender",
        type=kind,
        data={
            "outbox_key": key,
            "item_id": item.id,
            "thread": item.thread,
            "round": item.round,
            "version": item.version,
            "ticket_id": item.ticket_id,
            **data,
        },
    )
    await bus.publish(subjects.result(kind), envelope.to_bytes(), msg_id=f"{envelope.id}#{n}")


async def publish_reply_withdrawn(bus: Bus, item: InboxItem, n: int = 0) -> None:
    """The customer wrote again before an approved reply left."""
    await publish_reply_result(
        bus, item, "reply.withdrawn", {"reason": "the customer wrote again"}, n
    )


async def publish_reply_sent(bus: Bus, item: InboxItem) -> None:
    """An approved reply went out."""
    await publish_reply_result(
        bus, item, "reply.sent", {"decision": "accept", "seen_through": item.seen_through}
    )


async def test_a_reply_withdrawn_before_delivery_leaves_its_messages_to_the_next_draft(
    bus: Bus, harness: Harness
) -> None:
    """Approved, then the customer wrote before it went out (the sender withdrew it): the
    next draft answers both messages, whichever of the two news reaches the drafter first.
    The message's own event waits for the sender's word on the approved reply, so that one
    draft answers both: a draft of the new message alone, redrafted when the withdrawal came,
    could be approved meanwhile and go out answering half (the fault suite met that)."""
    drafter = harness.start()
    await send_event(bus, "T1017", "evt_1")
    await send_event(bus, "T1013", "evt_2")
    await eventually(lambda: item_count(bus, 2), timeout=20, message="both drafts")
    first = {i.thread: i for i in await items(bus)}
    for ticket in ("T1017", "T1013"):
        await decide(bus, first[ticket], "accept")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="accepted")
    late = {t: helpdesk(harness).add_message(t, "One more thing!")[1] for t in ("T1017", "T1013")}

    # T1017: the withdrawal arrives first, then the message's own event
    await publish_reply_withdrawn(bus, first["T1017"])
    await eventually(lambda: item_count(bus, 3), timeout=20, message="T1017's next draft")
    await send_event(bus, "T1017", "evt_3", event_type="ticket.message.created")
    # T1013: the message's event first (it waits for the approved reply's fate), then the
    # withdrawal
    await send_event(bus, "T1013", "evt_4", event_type="ticket.message.created")
    await eventually(
        lambda: f"T1013 round {first['T1013'].round} is still with the sender" in drafter.tail(),
        timeout=20,
        message="the new message waiting for the sender's word",
    )
    assert len(await items(bus)) == 3  # no draft of the new message alone
    await publish_reply_withdrawn(bus, first["T1013"])
    await publish_reply_withdrawn(bus, first["T1013"], n=1)  # and once more
    await eventually(lambda: item_count(bus, 4), timeout=20, message="T1013's second draft")
    await eventually(lambda: settled(bus), message="every event handled")
    await eventually(lambda: settled(bus, subjects.RESULTS, "drafter-results"), message="results")

    by_ticket: dict[str, list[InboxItem]] = {}
    for item in await items(bus):
        by_ticket.setdefault(item.thread, []).append(item)
    assert [i.version for i in by_ticket["T1017"]] == [1, 2]
    assert [i.version for i in by_ticket["T1013"]] == [1, 2]
    for ticket in ("T1017", "T1013"):
        latest = by_ticket[ticket][-1]
        assert latest.round_messages == [first[ticket].round, late[ticket].id]
        assert latest.cause == "the approved reply was withdrawn: the customer wrote again"


async def test_a_reminder_whose_draft_was_cut_off_publishes_it_after_a_restart(
    bus: Bus, harness: Harness
) -> None:
    """The first event for a ticket waiting on the customer is a stale reminder; the drafter
    dies after checkpointing the follow-up but before publishing it. The redelivered reminder
    publishes the follow-up, and does not mark its own draft overdue."""
    first = harness.start(DESK_PROVISION="false")
    info = await bus.js.stream_info(subjects.INBOX)
    info.config.subjects = [subjects.INBOX_DECISION]  # items cannot be published for now
    await bus.js.update_stream(info.config)
    await stale_event(bus, "T1001", dt.date(2026, 12, 1))
    await eventually(lambda: "attempt 1 failed" in first.tail(), timeout=20, message="cut off")
    first.kill()
    info.config.subjects = ["inbox.>"]
    await bus.js.update_stream(info.config)

    harness.start()
    await eventually(lambda: items(bus), timeout=30, message="the follow-up published")
    await eventually(lambda: settled(bus), message="the reminder handled")
    [follow_up] = await items(bus)
    assert (follow_up.thread, follow_up.round_kind) == ("T1001", "followup")
    assert await notices(bus, subjects.INBOX_OVERDUE) == []


async def test_a_withdrawal_cut_off_mid_step_is_finished_not_stuck_for_good(
    bus: Bus, harness: Harness
) -> None:
    """The drafter died inside the command that withdraws a waiting draft: LangGraph had stored
    the command's resume value and state update, and the step had not run. A second command on
    the thread would write the same keys again, which LangGraph refuses on every attempt; the
    cut-off command is finished instead and the withdrawal goes out."""
    first = harness.start()
    await send_event(bus, "T1002", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    first.kill()
    config = {"configurable": {"thread_id": "T1002"}}
    path = harness.root / "var" / "drafter-checkpoints.sqlite"
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        saved = await saver.aget_tuple(config)  # type: ignore[arg-type]
        assert saved is not None
        cut_off = {"type": "withdraw", "reason": "the ticket was closed"}
        trigger = {"source": "helpdesk", "type": "ticket.closed", "event_id": "helpdesk:evt_2"}
        await saver.aput_writes(
            saved.config, [("__resume__", cut_off), ("trigger", trigger)], COMMAND_WRITES
        )
    helpdesk(harness).set_status("T1002", "closed")
    harness.start()
    await send_event(bus, "T1002", "evt_2", event_type="ticket.closed")  # its redelivery
    withdrawal = await the_withdrawal(bus)
    assert (withdrawal.reason, withdrawal.ticket_status) == ("the ticket was closed", "closed")
    await eventually(lambda: settled(bus), timeout=20, message="the event handled, not retried")


async def test_a_withdrawal_whose_publish_failed_after_its_run_goes_out_on_the_retry(
    bus: Bus, harness: Harness
) -> None:
    """The ticket was closed while its draft waited: the run that withdraws the draft finished
    and was saved, then the withdrawal's publish failed (the broker refused it here; a drafter
    killed at that moment is the same). The event's retry finds the thread finished: it
    publishes the withdrawal it owes, or the draft would wait in the inbox for good."""
    harness.start(DESK_PUBLISH_TIMEOUT="1")
    await send_event(bus, "T1002", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the draft")
    info = await bus.js.stream_info(subjects.INBOX)
    kept = info.config.subjects
    info.config.subjects = [
        subjects.INBOX_ITEM,
        subjects.INBOX_DECISION,
        subjects.INBOX_OVERDUE,
        subjects.INBOX_NOTICE,
        subjects.INBOX_AUDITED,
    ]
    await bus.js.update_stream(info.config)  # a withdrawal cannot be stored for now
    attempts = await bus.nc.subscribe(subjects.INBOX_WITHDRAWN)
    await bus.nc.flush()

    helpdesk(harness).set_status("T1002", "closed")
    await send_event(bus, "T1002", "evt_2", event_type="ticket.closed")
    await attempts.next_msg(timeout=20)  # the run finished; its withdrawal was refused
    await attempts.unsubscribe()
    info.config.subjects = kept
    await bus.js.update_stream(info.config)

    withdrawal = await the_withdrawal(bus)
    assert (withdrawal.item_id, withdrawal.ticket_status) == ("T1002~v1", "closed")
    await eventually(lambda: settled(bus), timeout=20, message="the event handled")


async def test_the_customer_writing_after_a_sent_reply_whose_decision_is_late_is_a_new_round(
    bus: Bus, harness: Harness
) -> None:
    """The sender sent the approved reply and the customer wrote again before the decision
    reached the drafter (it was down, or behind). The customer's new message is a round of its
    own, answered once: not a redraft of the sent one answering the first message again."""
    harness.start()
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="round one's draft")
    [v1] = await items(bus)
    await publish_reply_sent(bus, v1)
    await eventually(lambda: settled(bus, subjects.RESULTS, "drafter-results"), message="seen")

    _, message = helpdesk(harness).add_message("T1012", "Thanks. And the second charge?")
    await send_event(bus, "T1012", "evt_2", event_type="ticket.message.created")
    await eventually(
        lambda: "waiting for its decision" in harness.processes[-1].tail(),
        timeout=20,
        message="the event put off until the decision",
    )
    assert len(await items(bus)) == 1

    await decide(bus, v1, "accept")  # the late decision
    await eventually(lambda: item_count(bus, 2), timeout=30, message="round two's draft")
    await eventually(lambda: settled(bus), timeout=20, message="every event handled")
    [_, v2] = await items(bus)
    assert (v2.version, v2.round, v2.round_messages) == (2, message.id, [message.id])


async def test_a_reply_sent_after_its_thread_was_redrafted_leaves_the_redraft_the_new_message(
    bus: Bus, harness: Harness
) -> None:
    """The other order: the customer's new message redrafted the waiting round (answering
    both) before the drafter learnt that the first draft's reply had gone out. The redraft is
    drafted again, answering only the message after the sent reply."""
    harness.start()
    await send_event(bus, "T1041", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the first draft")
    [v1] = await items(bus)
    _, message = helpdesk(harness).add_message("T1041", "Also, can I get the invoice as PDF?")
    await send_event(bus, "T1041", "evt_2", event_type="ticket.message.created")
    await eventually(lambda: item_count(bus, 2), timeout=20, message="the redraft")
    v2 = (await items(bus))[1]
    assert v2.round_messages == [v1.round, message.id]

    await publish_reply_sent(bus, v1)  # it went out before the customer wrote
    await eventually(lambda: item_count(bus, 3), timeout=20, message="the redraft redrafted")
    await eventually(lambda: settled(bus, subjects.RESULTS, "drafter-results"), message="done")
    v3 = (await items(bus))[2]
    assert (v3.version, v3.round, v3.round_messages) == (3, message.id, [message.id])
    assert v3.cause == "the reply to the earlier messages went out: this answers what came after"

    await decide(bus, v1, "accept")  # the late decision on the sent draft: refused
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="refused")
    assert len(await items(bus)) == 3
