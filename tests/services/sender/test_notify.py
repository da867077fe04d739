"""Supervisor notifications: real sender processes on a real nats-server, a seeded demo helpdesk,
and a real local HTTP server standing in for the Slack-compatible incoming webhook."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from desk.helpdesk import ensure_demo
from services.sender import notifications
from services.sender.notifier import SlackWebhook, message
from shared import chat, ids, subjects
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.bus import Bus
from shared.db import database_url, make_engine
from shared.envelope import Envelope
from shared.helpdesk.events import ticket_event, ticket_ref
from shared.inbox import Notice
from shared.ratelimit import TokenBucket
from standins.channel import FakeChannel
from tests.helpers import eventually

from .conftest import Senders, data, results

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

T1008_TEXT = (
    'Urgent ticket T1008 — "Locked out after changing phone (2FA)" from Mateus Oliveira. '
    "Review it in the inbox."
)


@pytest.fixture
def helpdesk(senders: Senders, tmp_path: Path) -> str:
    """The seeded demo helpdesk the sender loads tickets from."""
    url = f"sqlite:///{tmp_path / 'helpdesk.sqlite'}"
    ensure_demo(url)
    senders.env["DESK_HELPDESK_URL"] = url
    return url


def webhook(senders: Senders, channel: FakeChannel) -> None:
    senders.env.update({"DESK_NOTIFY_WEBHOOK_URL": channel.url, "DESK_NOTIFY_READ_TIMEOUT": "1"})


def urgent_event(ticket: str, event_id: str, **data: Any) -> Envelope:
    """What the router publishes on work.notify.<type> for an urgent helpdesk ticket event."""
    body = ticket_event("ticket.created", ticket, event_id=event_id, priority="urgent", **data)
    return Envelope(
        id=ids.ingress("helpdesk", event_id), source="helpdesk", type="ticket.created", data=body
    )


async def route(bus: Bus, envelope: Envelope, msg_id: str | None = None) -> None:
    await bus.publish(
        subjects.work("notify", envelope.type),
        envelope.to_bytes(),
        msg_id=msg_id or ids.router(envelope.id, "notify"),
    )


async def settled(bus: Bus) -> bool:
    info = await bus.js.consumer_info(subjects.WORK, "sender-notify")
    return info.num_pending == 0 and info.num_ack_pending == 0


async def published(bus: Bus, kind: str, n: int = 1) -> bool:
    return len(await results(bus, kind)) >= n


def http_date(seconds_from_now: float) -> str:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds_from_now)
    return email.utils.format_datetime(later, usegmt=True)


def rows(senders: Senders) -> list[notifications.NotificationRow]:
    engine = make_engine(database_url(None, senders.root / "var", "sender"))
    try:
        return notifications.rows(engine)
    finally:
        engine.dispose()


def texts(channel: FakeChannel) -> list[str]:
    return [json.loads(r["body"])["text"] for r in channel.requests]


async def test_an_urgent_ticket_posts_one_message_and_publishes_notify_sent_once(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    webhook(senders, fake_channel)
    senders.start()
    event = urgent_event("T1008", "evt_urgent_1")
    await route(bus, event)
    await eventually(lambda: published(bus, "notify.sent"), timeout=15, message="notify.sent")

    # the same event again, past the broker's duplicate window (another Nats-Msg-Id), twice
    await route(bus, event, msg_id="beyond-the-window-1")
    await route(bus, event, msg_id="beyond-the-window-2")
    await eventually(lambda: settled(bus), timeout=15, message="the duplicates handled")

    assert texts(fake_channel) == [T1008_TEXT]
    assert fake_channel.requests[0]["headers"]["content-type"] == "application/json"
    [sent] = await results(bus, "notify.sent")
    key = ids.notify(event.id)
    assert (sent.specversion, sent.id, sent.source) == ("1.0", f"notify.sent:{key}", "/desk/sender")
    assert sent.subject == "T1008"
    assert data(sent) == {
        "ticket_id": "T1008",
        "event_id": "helpdesk:evt_urgent_1",
        "event_type": "ticket.created",
        "channel": "slack",
        "status_code": 200,
    }
    assert await results(bus, "notify.failed") == []
    [row] = rows(senders)
    assert (row.key, row.status, row.attempts, row.channel) == (key, "sent", 1, "slack")


async def test_a_500_then_a_200_is_one_success_after_the_retry_after(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    fake_channel.fail_next(500)
    fake_channel.retry_after = "2"
    webhook(senders, fake_channel)
    senders.start()
    await route(bus, urgent_event("T1008", "evt_urgent_2"))
    await eventually(lambda: published(bus, "notify.sent"), timeout=20, message="notify.sent")
    await eventually(lambda: settled(bus), timeout=10, message="the event handled")

    assert texts(fake_channel) == [T1008_TEXT, T1008_TEXT]
    first, second = (r["at"] for r in fake_channel.requests)
    assert second - first >= 1.9  # Retry-After: 2 wins over the 0.3 s backoff
    assert len(await results(bus, "notify.sent")) == 1
    [row] = rows(senders)
    assert (row.status, row.attempts, row.status_code) == ("sent", 2, 200)


async def test_a_503_with_a_retry_after_date_is_retried_at_that_date(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    webhook(senders, fake_channel)
    senders.start()
    fake_channel.fail_next(503)
    fake_channel.retry_after = http_date(6)  # at least 5 s from now: whole seconds
    await route(bus, urgent_event("T1008", "evt_urgent_date"))
    await eventually(lambda: published(bus, "notify.sent"), timeout=25, message="notify.sent")

    first, second = (r["at"] for r in fake_channel.requests)
    assert second - first >= 3  # the date wins over the 0.3 s backoff
    [row] = rows(senders)
    assert (row.status, row.attempts, row.status_code) == ("sent", 2, 200)


async def test_a_400_fails_with_notify_failed_and_no_retry(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    fake_channel.fail_next(400, times=5)
    fake_channel.error_text = "invalid_payload for mateus.oliveira@example.com"
    webhook(senders, fake_channel)
    senders.start()
    await route(bus, urgent_event("T1008", "evt_urgent_3"))
    await eventually(lambda: published(bus, "notify.failed"), timeout=15, message="notify.failed")
    await eventually(lambda: settled(bus), timeout=10, message="the event handled")

    assert len(fake_channel.requests) == 1
    [failed] = await results(bus, "notify.failed")
    assert failed.subject == "T1008"
    assert (data(failed)["channel"], data(failed)["status_code"]) == ("slack", 400)
    assert "400" in data(failed)["error"]
    assert "mateus.oliveira@example.com" not in data(failed)["error"]
    assert await results(bus, "notify.sent") == []
    [row] = rows(senders)
    assert (row.status, row.attempts) == ("failed", 1)


async def test_without_a_webhook_the_notification_is_logged_and_recorded_as_sent(
    bus: Bus, senders: Senders, helpdesk: str
) -> None:
    process = senders.start()
    event = urgent_event("T1008", "evt_urgent_4")
    await route(bus, event)
    await eventually(lambda: published(bus, "notify.sent"), timeout=15, message="notify.sent")
    await route(bus, event, msg_id="beyond-the-window")
    await eventually(lambda: settled(bus), timeout=10, message="the duplicate handled")

    [sent] = await results(bus, "notify.sent")
    assert data(sent) == {
        "ticket_id": "T1008",
        "event_id": "helpdesk:evt_urgent_4",
        "event_type": "ticket.created",
        "channel": "log",
        "status_code": None,
    }
    log = process.log.read_text()
    [line] = [line for line in log.splitlines() if "notification for T1008" in line]
    assert "logged" in line
    assert "mateus" not in log.lower() and "Locked out" not in log


async def test_a_sender_killed_while_a_retry_waits_is_finished_by_the_next_one(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    fake_channel.fail_next(503)
    fake_channel.retry_after = "3"
    webhook(senders, fake_channel)
    first = senders.start()
    await route(bus, urgent_event("T1008", "evt_urgent_5"))
    await eventually(lambda: any(r.attempts == 1 for r in rows(senders)), message="the 503")
    first.kill()

    senders.start()  # the killed one's delivery comes back after ack_wait, or after the nak
    await eventually(lambda: published(bus, "notify.sent"), timeout=20, message="notify.sent")
    assert texts(fake_channel) == [T1008_TEXT, T1008_TEXT]
    assert len(await results(bus, "notify.sent")) == 1
    [row] = rows(senders)
    assert (row.status, row.attempts) == ("sent", 2)


async def test_killed_between_commit_and_publish_notify_sent_is_published_once(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    info = await bus.js.stream_info(subjects.RESULTS)
    info.config.subjects = ["results.nothing"]  # the relay cannot publish: held after the commit
    await bus.js.update_stream(info.config)
    webhook(senders, fake_channel)
    first = senders.start(DESK_PROVISION="false")
    event = urgent_event("T1008", "evt_urgent_6")
    await route(bus, event)
    await eventually(lambda: [r.status for r in rows(senders)] == ["sent"], message="the commit")
    first.kill()

    info.config.subjects = ["results.>"]
    await bus.js.update_stream(info.config)
    senders.start()
    await eventually(lambda: published(bus, "notify.sent"), timeout=15, message="the republish")
    await route(bus, event, msg_id="beyond-the-window")
    await eventually(lambda: settled(bus), timeout=10, message="the duplicate handled")
    assert len(fake_channel.requests) == 1
    assert len(await results(bus, "notify.sent")) == 1


async def test_without_the_ticket_the_message_says_what_the_event_says(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str
) -> None:
    webhook(senders, fake_channel)
    senders.start()
    await route(bus, urgent_event("T9999", "evt_missing", subject="Checkout down for everyone"))
    mail = Envelope(
        id=ids.ingress("email", "m-1"),
        source="email",
        type="email.received",
        data={
            "MessageID": "<m-1@example.com>",
            "From": "Jane Doe <jane.doe@example.com>",
            "Subject": "Call me at +1 415 555 0134",
            "TextBody": "It is urgent.",
        },
    )
    await route(bus, mail)
    await eventually(
        lambda: published(bus, "notify.sent", 2), timeout=15, message="two notify.sent"
    )

    assert sorted(texts(fake_channel)) == [
        'Urgent e-mail — "Call me at [phone]" from Jane Doe. Review it in the inbox.',
        'Urgent ticket T9999 — "Checkout down for everyone". Review it in the inbox.',
    ]
    by_event = {data(e)["event_id"]: e for e in await results(bus, "notify.sent")}
    assert by_event["email:m-1"].subject is None
    assert data(by_event["email:m-1"])["ticket_id"] is None
    assert by_event["helpdesk:evt_missing"].subject == "T9999"


# -- the webhook's reading of an answer, without a broker ----------------------------------------


@pytest.fixture
async def slack(fake_channel: FakeChannel) -> AsyncIterator[SlackWebhook]:
    made = SlackWebhook(
        fake_channel.url,
        connect_timeout=1.0,
        read_timeout=1.0,
        breaker=CircuitBreaker(BreakerSettings(window=50, min_samples=50)),
        bucket=TokenBucket(100, 100),
    )
    try:
        yield made
    finally:
        await made.close()


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500, 503])
async def test_a_transient_answer_is_retried_with_its_retry_after(
    fake_channel: FakeChannel, slack: SlackWebhook, status: int
) -> None:
    fake_channel.fail_next(status)
    fake_channel.retry_after = "4"
    attempt = await slack.post("hello")
    assert (attempt.outcome, attempt.status_code, attempt.retry_after) == ("retry", status, 4.0)


@pytest.mark.parametrize("status", [400, 403, 404, 410])
async def test_another_4xx_is_a_failed_notification(
    fake_channel: FakeChannel, slack: SlackWebhook, status: int
) -> None:
    fake_channel.fail_next(status)
    fake_channel.retry_after = "4"
    attempt = await slack.post("hello")
    assert (attempt.outcome, attempt.status_code, attempt.retry_after) == ("failed", status, None)


@pytest.mark.parametrize(("value", "lowest", "highest"), [("7", 7, 7), ("date", 28, 30)])
async def test_the_retry_after_is_read_as_seconds_or_a_date(
    fake_channel: FakeChannel, slack: SlackWebhook, value: str, lowest: float, highest: float
) -> None:
    fake_channel.fail_next(429)
    fake_channel.retry_after = http_date(30) if value == "date" else value
    attempt = await slack.post("hello")
    assert attempt.retry_after is not None and lowest <= attempt.retry_after <= highest


async def test_an_open_breaker_makes_no_call_and_the_notification_waits_in_place(
    fake_channel: FakeChannel,
) -> None:
    """The supervisors' webhook answers an open breaker as the reply channel does: no call,
    `Unavailable` (the consumer runtime holds the delivery, spending none of its attempts),
    where it used to spend one and, on the last, report the notification failed."""
    from shared.errors import Unavailable

    failing = SlackWebhook(
        fake_channel.url,
        connect_timeout=1.0,
        read_timeout=1.0,
        breaker=CircuitBreaker(BreakerSettings(window=2, min_samples=2, open_seconds=60)),
        bucket=TokenBucket(100, 100),
    )
    try:
        for _ in range(2):
            fake_channel.fail_next(503)
            assert (await failing.post("hello")).outcome == "retry"
        calls = len(fake_channel.requests)
        with pytest.raises(Unavailable, match="notify circuit open") as held:
            await failing.post("hello")
        assert held.value.retry_after is not None and held.value.retry_after > 0
        assert len(fake_channel.requests) == calls, "no call was made"
    finally:
        await failing.close()


# -- the message, without a broker ------------------------------------------------------------


def test_the_message_escapes_slack_control_characters_and_masks_contact_details() -> None:
    event = urgent_event(
        "T1", "e", subject="<!channel> refund & call +1 415 555 0134 or a@b.example.com"
    )
    text = message(event, ticket_ref(event.data), None)
    assert text == (
        'Urgent ticket T1 — "&lt;!channel&gt; refund &amp; call [phone] or [email]". '
        "Review it in the inbox."
    )


def test_an_event_with_no_subject_names_its_type() -> None:
    event = urgent_event("T2", "e")
    text = message(event, ticket_ref(event.data), None)
    assert text.replace(chat.JOINER, "") == (
        "Urgent ticket T2 (ticket.created). Review it in the inbox."
    )


# -- customer text in the team's chat is inert ----------------------------------------------------

HOSTILE_SUBJECT = (
    "Refund\r\nBcc: all@desk.example *bold* _now_ ~gone~ `x` @channel <!channel> <@U024BE7LH> "
    "evil-support.com/login [click](https://evil.example/reset) ![](https://evil.example/p.png)"
)
HOSTILE_NAME = "Eve @all <!here> *VIP* http://evil.example/x"
# what would be live if the chat read it as markup: a mention, a link, a bare domain
LIVE_MENTION = re.compile(r"(?i)@(?:channel|all|here|everyone)\b|<[!@#]")
LIVE_LINK = re.compile(r"(?i)\b(?:https?|ftp)://|\b[\w-]+\.(?:example|com)\b")


def assert_inert(body: dict[str, Any], flavour: str, ours: str = "") -> str:
    """The text of one webhook post in which nothing the customer wrote is live in `flavour`'s
    markup; `ours` is our own markup at its start (a Slack mention), the only one allowed."""
    text = body["text"]
    assert text.startswith(ours)
    rest = text[len(ours) :]
    assert "\n" not in text and "\r" not in text
    assert not LIVE_MENTION.search(rest), rest
    assert not LIVE_LINK.search(rest), rest
    if flavour == "slack":
        assert (body["unfurl_links"], body["unfurl_media"]) == (False, False)
        assert not set("<>*_~`") & set(rest), rest  # no tag, link or formatting mark
    else:
        html = MarkdownIt("commonmark").enable(["strikethrough", "table"]).render(rest)
        for tag in ("<a", "<img", "<strong", "<em", "<s>", "<code", "<!", "<h", "<ul", "<ol"):
            assert tag not in html, html
    # quoted, not dropped: the team still reads what the customer wrote
    shown = rest.replace(chat.JOINER, "")
    assert "@channel" in shown or "@all" in shown
    return shown


@pytest.mark.parametrize("flavour", ["slack", "mattermost"])
async def test_customer_text_in_urgent_and_sla_posts_is_inert(
    bus: Bus, senders: Senders, fake_channel: FakeChannel, helpdesk: str, flavour: str
) -> None:
    webhook(senders, fake_channel)
    senders.start(DESK_CHAT_FORMAT=flavour)
    event = urgent_event(
        "T9999", "evt_hostile", subject=HOSTILE_SUBJECT, customer={"name": HOSTILE_NAME}
    )
    await route(bus, event)
    at = dt.datetime.now(dt.UTC)
    notice = Notice(
        id="sla.past:T9999:r1",
        kind="sla.past",
        at=at,
        queue="billing",
        ticket_id="T9999",
        priority="urgent",
        customer=HOSTILE_NAME,
        summary=HOSTILE_SUBJECT,
        due_at=at,
        mention=["U0ANA"],
    )
    envelope = Envelope(
        id=notice.id,
        source="/desk/inbox_api",
        type=subjects.INBOX_NOTICE,
        time=at,
        data=notice.model_dump(mode="json"),
    )
    await bus.publish_envelope(subjects.INBOX_NOTICE, envelope)
    await eventually(lambda: published(bus, "notify.sent", 2), timeout=15, message="two posts")

    bodies = [json.loads(r["body"]) for r in fake_channel.requests]
    [urgent] = [b for b in bodies if b["text"].startswith("Urgent")]
    [sla] = [b for b in bodies if "past its target" in b["text"]]
    shown = assert_inert(urgent, flavour)
    assert shown.startswith("Urgent ticket T9999 — ")
    assert "Bcc" in shown  # on the same line: a subject cannot add a line of its own
    assert_inert(sla, flavour, ours="<@U0ANA> " if flavour == "slack" else "")
