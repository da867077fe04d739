"""The sender against a real nats-server, a real database and a real channel endpoint."""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import json

import pytest

from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.helpdesk.sql import SqlSource
from shared.inbox import AUTO_SEND
from shared.signatures import standard_verify
from standins.channel import FakeChannel
from tests.helpers import eventually, settled
from tests.inbox_items import draft_item, notify_item, publish_decision, publish_item
from tests.postgres import fresh_schema, url_in

from .conftest import SECRET, Senders, data, results

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


async def test_one_decision_delivered_three_times_is_one_row_and_one_reply_sent(
    bus: Bus, senders: Senders
) -> None:
    senders.start()
    item = draft_item("T1012")
    await publish_item(bus, item)
    for n in range(3):
        await publish_decision(bus, item, "accept", msg_id=f"redelivered-{n}")
    await eventually(lambda: results(bus, "reply.sent"), timeout=15, message="reply.sent")

    async def handled() -> bool:
        return await settled(bus.js, subjects.INBOX, "sender", delivered=True)

    await eventually(handled, message="all three decisions handled")
    [row] = senders.outbox()
    assert (row.key, row.delivery, row.decision_type) == (
        "T1012/r1/send_reply",
        "delivered",
        "accept",
    )
    assert row.final_text == item.action_request.args["reply"]
    [sent] = await results(bus, "reply.sent")
    assert sent.specversion == "1.0" and sent.id == "reply.sent:T1012/r1/send_reply"
    assert data(sent)["text"] == item.action_request.args["reply"]
    assert data(sent)["reviewer"] == "reviewer"
    assert data(sent)["auto"] is False


async def test_an_auto_sent_reply_goes_through_the_outbox_and_says_auto(
    bus: Bus, senders: Senders
) -> None:
    """What the inbox's auto-send policy approves is sent like any approval: one outbox row,
    one reply.sent, marked auto (and by AUTO_SEND) for every subscriber to see."""
    senders.start()
    item = draft_item("T1013", round_id="T1013-m1", seen_through="T1013-m1")
    await publish_item(bus, item)
    await publish_decision(bus, item, "accept", reviewer=AUTO_SEND, auto=True)
    await eventually(lambda: results(bus, "reply.sent"), timeout=15, message="reply.sent")
    [row] = senders.outbox()
    assert (row.key, row.reviewer, row.auto) == ("T1013/T1013-m1/send_reply", AUTO_SEND, True)
    [sent] = await results(bus, "reply.sent")
    assert (data(sent)["auto"], data(sent)["reviewer"]) == (True, AUTO_SEND)


async def test_an_edit_sends_the_edited_text_through_the_webhook_once(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    senders.webhook(fake_channel.url)
    senders.start()
    item = draft_item("T1041")
    await publish_item(bus, item)
    edited = {
        "action": "send_reply",
        "args": {**item.action_request.args, "reply": "Edited by Ana."},
    }
    for n in range(3):
        await publish_decision(bus, item, "edit", edited, msg_id=f"edit-{n}")
    await eventually(lambda: results(bus, "reply.sent"), timeout=15, message="reply.sent")

    assert len(fake_channel.requests) == 1
    [request] = fake_channel.requests
    assert request["headers"]["idempotency-key"] == "T1041/r1/send_reply"
    standard_verify([SECRET], request["headers"], request["body"])  # signed by the sender
    assert json.loads(request["body"])["reply"] == "Edited by Ana."
    [row] = senders.outbox()
    assert (row.final_text, row.model_draft, row.delivery) == (
        "Edited by Ana.",
        item.action_request.args["reply"],
        "delivered",
    )
    assert [a.outcome for a in senders.audit()] == ["delivered"]


async def test_an_escalation_notifies_once_and_taken_its_reply_joins_the_ticket_once(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    """A legal threat is told to the supervisors' webhook like an urgent ticket, once however
    often its item arrives; the person who takes it writes the reply, an edit to `send_reply`,
    and the ticket gets it once, as a public reply."""
    senders.env.update({"DESK_NOTIFY_WEBHOOK_URL": fake_channel.url})
    senders.start()
    item = notify_item("T1027").model_copy(update={"summary": "Escalation: Refund or lawyer"})
    await publish_item(bus, item)
    again = Envelope(
        id="redelivered",
        type=subjects.INBOX_ITEM,
        source="/desk/drafter",
        subject=item.thread,
        data=item.model_dump(mode="json"),
    )
    await bus.publish(subjects.INBOX_ITEM, again.to_bytes(), msg_id="beyond-the-window")
    await eventually(lambda: results(bus, "notify.sent"), timeout=15, message="notify.sent")

    async def items_handled() -> bool:
        return await settled(bus.js, subjects.INBOX, "sender-items", delivered=True)

    await eventually(items_handled, message="both copies of the item handled")
    posted = [json.loads(r["body"])["text"] for r in fake_channel.requests]
    assert posted == [
        'Escalation: ticket T1027 — "Escalation: Refund or lawyer" mentions lawyer. '
        "No reply was drafted: take it in the inbox."
    ]
    [told] = await results(bus, "notify.sent")
    assert (data(told)["ticket_id"], data(told)["event_type"]) == ("T1027", "escalation")

    reply = "Dear customer,\n\nI have your case in hand and will call you today.\n\nSam"
    taken = {"action": "send_reply", "args": {"ticket_id": "T1027", "reply": reply}}
    for n in range(2):
        await publish_decision(bus, item, "edit", taken, msg_id=f"taken-{n}")
    await eventually(lambda: results(bus, "reply.sent"), timeout=15, message="reply.sent")
    await eventually(lambda: settled(bus.js, subjects.INBOX, "sender", delivered=True))
    [row] = senders.outbox()
    assert (row.key, row.action, row.final_text, row.delivery) == (
        "T1027/r1/send_reply",
        "send_reply",
        reply,
        "delivered",
    )
    [sent] = await results(bus, "reply.sent")
    assert (data(sent)["action"], data(sent)["decision"]) == ("send_reply", "edit")
    source = SqlSource(senders.helpdesk_url)
    try:
        ticket = await source.get_ticket("T1027")
    finally:
        await source.close()
    assert [m.body for m in ticket.messages if m.author == "agent"][-1:] == [reply]
    assert sum(m.body == reply for m in ticket.messages) == 1


async def test_killed_between_commit_and_publish_the_result_is_published_once(
    bus: Bus, senders: Senders
) -> None:
    info = await bus.js.stream_info(subjects.RESULTS)
    info.config.subjects = ["results.nothing"]  # the relay cannot publish: held after the commit
    await bus.js.update_stream(info.config)
    first = senders.start(DESK_PROVISION="false")
    item = draft_item("T1003")
    await publish_item(bus, item)
    await publish_decision(bus, item, "accept")
    await eventually(lambda: senders.outbox(), timeout=15, message="the outbox commit")
    first.kill()

    info.config.subjects = ["results.>"]
    await bus.js.update_stream(info.config)
    senders.start()
    await eventually(lambda: results(bus, "reply.sent"), timeout=15, message="the republish")
    second_look = await results(bus, "reply.sent")
    assert len(second_look) == 1
    assert len(senders.outbox()) == 1
    # marked once published: the relay's passes do not publish it again and again
    await eventually(lambda: not senders.unpublished(), timeout=15, message="marked published")


async def test_a_channel_answering_503_twice_delivers_on_the_third_try_with_growing_gaps(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    fake_channel.fail_next(503, times=2)
    senders.webhook(fake_channel.url)
    senders.start()
    item = draft_item("T1020")
    await publish_item(bus, item)
    await publish_decision(bus, item, "accept")
    await eventually(lambda: results(bus, "reply.sent"), timeout=20, message="delivered")
    times = [r["at"] for r in fake_channel.requests]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.3 and times[2] - times[1] >= 0.6
    assert set(fake_channel.keys()) == {"T1020/r1/send_reply"}
    assert [a.outcome for a in senders.audit()] == ["retry", "retry", "delivered"]


async def test_a_channel_naming_a_date_in_retry_after_is_waited_for_until_then(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    """Retry-After as an HTTP-date (RFC 9110), read by the rule every client shares."""
    senders.webhook(fake_channel.url)
    senders.start()
    item = draft_item("T1020")
    await publish_item(bus, item)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=6)  # at least 5 s: whole seconds
    fake_channel.fail_next(503)
    fake_channel.retry_after = email.utils.format_datetime(later, usegmt=True)
    await publish_decision(bus, item, "accept")
    await eventually(lambda: results(bus, "reply.sent"), timeout=25, message="delivered")
    first, second = (r["at"] for r in fake_channel.requests)
    assert second - first >= 3  # the date wins over the 0.3 s backoff
    assert [a.outcome for a in senders.audit()] == ["retry", "delivered"]


async def test_a_400_fails_with_reply_failed_and_no_retry(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    fake_channel.fail_next(400, times=5)
    fake_channel.error_text = "no customer jane.doe@example.com, call +1 415 555 0134"
    senders.webhook(fake_channel.url)
    senders.start()
    item = draft_item("T1021")
    await publish_item(bus, item)
    await publish_decision(bus, item, "accept")
    await eventually(lambda: results(bus, "reply.failed"), timeout=15, message="reply.failed")
    [failed] = await results(bus, "reply.failed")
    assert "400" in data(failed)["error"]
    assert len(fake_channel.requests) == 1
    assert await results(bus, "reply.sent") == []
    [row] = senders.outbox()
    assert row.delivery == "failed"
    [attempt] = senders.audit()
    assert (attempt.outcome, attempt.status_code, attempt.attempt) == ("failed", 400, 1)
    assert attempt.error and "400" in attempt.error
    assert "jane.doe@example.com" not in attempt.error and "555" not in attempt.error


async def test_an_unknown_outcome_is_rechecked_with_the_same_key_not_sent_as_new(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    fake_channel.hang_next(2.0)  # longer than the 1 s read timeout: did it arrive?
    senders.webhook(fake_channel.url)
    senders.start()
    item = draft_item("T1022")
    await publish_item(bus, item)
    await publish_decision(bus, item, "accept")
    await eventually(lambda: results(bus, "reply.sent"), timeout=20, message="delivered")
    assert fake_channel.keys() == ["T1022/r1/send_reply", "T1022/r1/send_reply"]
    assert [a.outcome for a in senders.audit()] == ["unknown", "delivered"]
    assert len(await results(bus, "reply.sent")) == 1


async def test_a_channel_down_opens_the_breaker_and_it_closes_after_recovery(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    fake_channel.down = True
    senders.webhook(
        fake_channel.url,
        DESK_BREAKER_MIN_SAMPLES="3",
        DESK_BREAKER_WINDOW="5",
        DESK_BREAKER_OPEN_SECONDS="3",
        DESK_MAX_DELIVER="50",
        DESK_RETRY_MAX="0.5",
    )
    process = senders.start()
    items = [draft_item(t) for t in ("T1002", "T1005", "T1007", "T1009")]
    for item in items:
        await publish_item(bus, item)
        await publish_decision(bus, item, "accept")
    await eventually(lambda: len(fake_channel.requests) >= 3, timeout=15, message="failures")
    await eventually(lambda: "closed → open" in process.tail(), message="the breaker opening")
    opened_at = len(fake_channel.requests)
    # no call reaches the channel while the breaker is open (3 s): at most one that was in
    # flight as it opened, and the probe the half-open breaker lets through
    await eventually(lambda: "open → half_open" in process.tail(), message="the breaker half-open")
    assert len(fake_channel.requests) <= opened_at + 2
    fake_channel.down = False
    await eventually(lambda: _all_sent(bus, 4), timeout=30, message="all delivered after recovery")
    assert "half_open → closed" in process.tail()


async def _all_sent(bus: Bus, n: int) -> bool:
    return len(await results(bus, "reply.sent")) == n


async def test_a_superseded_decision_writes_nothing(bus: Bus, senders: Senders) -> None:
    senders.start()
    v1, v2 = draft_item("T1030", 1), draft_item("T1030", 2)
    await publish_item(bus, v1)
    await publish_item(bus, v2)

    async def seen_v2() -> bool:
        return await settled(bus.js, subjects.INBOX, "sender-items", delivered=True)

    await eventually(seen_v2, timeout=15, message="both items seen")
    await publish_decision(bus, v1, "accept")

    async def handled() -> bool:
        return await settled(bus.js, subjects.INBOX, "sender", delivered=True)

    await eventually(handled, timeout=15, message="the decision handled")
    assert senders.outbox() == []
    assert await results(bus) == []


async def test_a_later_version_approved_after_its_rounds_reply_went_out_is_withdrawn_visibly(
    bus: Bus, senders: Senders
) -> None:
    """v2 approved and sent; v3 of the same round (a redraft made meanwhile) approved too: one
    reply for the round, and v3 ends as withdrawn, saying why, not waiting for a send."""
    senders.start()
    v2, v3 = draft_item("T1031", 2), draft_item("T1031", 3, reply="Hello again")
    await publish_item(bus, v2)
    await publish_decision(bus, v2, "accept")
    await eventually(lambda: results(bus, "reply.sent"), timeout=15, message="v2 sent")
    await publish_item(bus, v3)
    await publish_decision(bus, v3, "accept")
    await eventually(lambda: results(bus, "item.withdrawn"), timeout=15, message="v3 withdrawn")
    [withdrawn] = await results(bus, "item.withdrawn")
    assert data(withdrawn)["item_id"] == "T1031~v3"
    assert "went out already, as v2" in data(withdrawn)["reason"]
    assert [data(r)["version"] for r in await results(bus, "reply.sent")] == [2]
    assert [(r.version, r.delivery) for r in senders.outbox()] == [(2, "delivered")]


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_two_sender_processes_racing_on_one_key_write_one_row(
    bus: Bus, senders: Senders, database: str
) -> None:
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        if schema:
            senders.env["DESK_DATABASE_URL"] = url_in(schema)
        senders.start(DESK_CONCURRENCY="8")
        senders.start(DESK_CONCURRENCY="8")
        item = draft_item("T1033")
        await publish_item(bus, item)
        for n in range(40):
            await publish_decision(bus, item, "accept", msg_id=f"race-{n}")

        async def handled() -> bool:
            return await settled(bus.js, subjects.INBOX, "sender", delivered=True)

        await eventually(handled, timeout=30, message="forty decisions handled")
        await eventually(lambda: results(bus, "reply.sent"), timeout=10, message="reply.sent")
        assert len(senders.outbox()) == 1
        assert len(await results(bus, "reply.sent")) == 1
        senders.stop_all()
