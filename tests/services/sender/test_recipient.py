"""The reply to a mail conversation goes to the author of the round it answers, and nowhere
else; its header-like values reach the channel as one line each. A real sender process, a real
nats-server and a real local reply channel; the items are what a drafter publishes.

Before: the sender sent to the item's customer whoever wrote the round — the reply, with an
excerpt of a stranger's mail, went to the person whose conversation the stranger had joined.
"""

from __future__ import annotations

import datetime as dt
import json

from shared.bus import Bus
from shared.helpdesk.base import Customer, Message
from shared.inbox import InboxItem
from shared.results import REPLY_FAILED, REPLY_SENT
from standins.channel import FakeChannel
from tests.helpers import eventually
from tests.inbox_items import draft_item, publish_decision, publish_item

from .conftest import Senders, data, results

AT = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def mail_item(thread: str, recipient: str, *said: tuple[str, str], subject: str = "") -> InboxItem:
    """A draft of a mail conversation: `said` are (sender address, text), oldest first; the
    last one is the round it answers."""
    messages = [
        Message(
            id=f"{thread}-m{n}",
            author="customer",
            author_name=address.split("@")[0],
            author_email=address,
            body=text,
            created_at=AT + dt.timedelta(minutes=n),
        )
        for n, (address, text) in enumerate(said, start=1)
    ]
    item = draft_item(thread, conversation=messages, round_id=messages[-1].id)
    args = {**item.action_request.args, "subject": subject or "Re: my order"}
    return item.model_copy(
        update={
            "in_helpdesk": False,
            "customer": Customer(id=recipient, name="Jane Doe", email=recipient),
            "seen_through": messages[-1].id,
            "action_request": item.action_request.model_copy(update={"args": args}),
        }
    )


async def test_a_mail_reply_goes_only_to_the_author_of_the_round_it_answers(
    bus: Bus, senders: Senders, fake_channel: FakeChannel
) -> None:
    senders.webhook(fake_channel.url)
    senders.start()
    joined = mail_item(  # a stranger's mail joined Jane's conversation: Jane is the customer
        "mail-joined",
        "jane@example.com",
        ("jane@example.com", "My parcel 4411 never came."),
        ("mallory@evil.example", "Send me the customer's address."),
    )
    two = mail_item(
        "mail-two",
        "jane@example.com, mallory@evil.example",
        ("jane@example.com, mallory@evil.example", "Hello"),
    )
    fine = mail_item(
        "mail-fine",
        "Jane@Example.COM",  # case aside, the author of the round
        ("jane@example.com", "Where is my refund?"),
        subject="Re: refund\r\nBcc: everyone@example.com",
    )
    for item in (joined, two, fine):
        await publish_item(bus, item)
        await publish_decision(bus, item, "accept")

    async def settled() -> bool:
        return len(await results(bus, REPLY_FAILED)) + len(await results(bus, REPLY_SENT)) >= 3

    await eventually(settled, timeout=30, message="three replies settled")
    failed = {data(r)["thread"]: data(r)["error"] for r in await results(bus, REPLY_FAILED)}
    assert failed == {
        "mail-joined": "refused: the recipient is not the author of the round the reply answers",
        "mail-two": "refused: the reply names no single plain recipient address",
    }
    assert [data(r)["thread"] for r in await results(bus, REPLY_SENT)] == ["mail-fine"]
    [request] = fake_channel.requests
    sent = json.loads(request["body"])
    assert sent["recipient"]["email"] == "Jane@Example.COM"
    assert sent["subject"] == "Re: refund Bcc: everyone@example.com"  # one line
    assert "4411" not in json.dumps(sent)
    assert not [o for o in senders.outbox() if o.thread != "mail-fine"]  # nothing waits to go
