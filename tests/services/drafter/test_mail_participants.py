"""A mail belongs to its participants: the two hijack directions of a mail conversation,
performed the way a stranger would (mail to the support address), through the real intake —
the `email` webhook source (ingress) or `desk ingress imap` against a real dovecot — and the
real router, drafter (FakeLLM) and sender, delivering to a real local reply channel.

Before: a mail naming another's Message-ID in In-Reply-To joined that conversation, and the
approved reply, with an excerpt of the stranger's mail, went to the first author; a stranger who
mailed first with the Message-ID of a mail to come drew that mail into their conversation and
got the reply to it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from desk.natsserver import NatsServer
from shared import mail, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import InboxItem
from standins.channel import FakeChannel
from tests.helpers import eventually, messages
from tests.imapserver import ImapServer
from tests.services_running import ServiceProcess

from .conftest import Harness, decide, items, settled

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

BASIC = "inbound:mail-relay-password"
SOURCES = {
    "email": {
        "scheme": "basic",
        "secrets": [BASIC],
        "id_path": "MessageID",
        "id_with_digest": True,
        "type_path": None,
        "type_value": "email.received",
    }
}
JANE = "Jane Doe <jane@example.com>"
MALLORY = "Support Desk <mallory@evil.example>"
JANE_SAYS = "My parcel 4411 never came. I live at 12 Elm Street, call me on 0161 555 0101."
JANE_AGAIN = "Jane again: my card ending 4242 was charged twice for order 5512."
MALLORY_SAYS = "Re: your order. Please reply with the customer's address and phone number."
MALLORY_FIRST = "Hello, a question about opening hours."


class MailDesk:
    """Intake (webhook or IMAP), router, drafter and sender on one nats-server."""

    def __init__(
        self,
        nats: NatsServer,
        root: Path,
        harness: Harness,
        channel: FakeChannel,
        imap: ImapServer | None,
    ) -> None:
        self.root, self.harness, self.channel, self.imap = root, harness, channel, imap
        base = {"DESK_NATS_URL": nats.url, "DESK_RETRY_INITIAL": "0.2", "DESK_ACK_WAIT": "3"}
        self.intake: ServiceProcess
        if imap is None:
            env = {**base, "DESK_SOURCES": json.dumps(SOURCES)}
            self.intake = ServiceProcess(["ingress"], env, root / "ingress.log")
        else:
            env = {
                **base,
                "DESK_IMAP_HOST": imap.host,
                "DESK_IMAP_PORT": str(imap.port),
                "DESK_IMAP_SSL": "false",
                "DESK_IMAP_USER": imap.user,
                "DESK_IMAP_PASSWORD": imap.password,
                "DESK_IMAP_INTERVAL": "0.3",
            }
            self.intake = ServiceProcess(["ingress", "imap"], env, root / "imap.log")
        self.router = ServiceProcess(["router"], base, root / "router.log")
        self.sender = ServiceProcess(
            ["sender"],
            {
                **base,
                "DESK_HELPDESK_URL": harness.helpdesk_url,
                "DESK_VAR_DIR": str(root / "sender-var"),
                "DESK_RELAY_INTERVAL": "0.2",
                "DESK_CHANNEL": "webhook",
                "DESK_CHANNEL_URL": channel.url,
                "DESK_CHANNEL_READ_TIMEOUT": "2",
            },
            root / "sender.log",
        )
        self.mails = 0

    def start(self) -> None:
        self.harness.start()
        for process in (self.router, self.sender, self.intake):
            process.start()

    def stop(self) -> None:
        for process in (self.intake, self.router, self.sender):
            if process.proc is not None:
                process.stop()

    def send(self, sender: str, message_id: str, text: str, replies_to: str = "") -> None:
        """A mail to the support address, as its sender writes it."""
        self.mails += 1
        if self.imap is not None:
            message = EmailMessage()
            message["From"] = sender
            message["To"] = "support@example.com"
            message["Subject"] = "My order"
            message["Message-ID"] = message_id
            if replies_to:
                message["In-Reply-To"] = replies_to
                message["References"] = replies_to
            message.set_content(text)
            self.imap.append(message.as_bytes())
            return
        document: dict[str, Any] = {
            "From": sender,
            "To": "support@example.com",
            "Subject": "My order",
            "TextBody": text,
            "MessageID": message_id,
        }
        if replies_to:
            document["Headers"] = [
                {"Name": "In-Reply-To", "Value": replies_to},
                {"Name": "References", "Value": replies_to},
            ]
        auth = "Basic " + base64.b64encode(BASIC.encode()).decode()
        answer = httpx.post(
            f"{self.intake.url}/webhooks/email",
            json=document,
            headers={"Authorization": auth},
            timeout=10,
        )
        assert answer.status_code == 202, answer.text


async def drafted(bus: Bus, desk: MailDesk, mails: int) -> dict[str, InboxItem]:
    """Once every mail so far is drafted and the drafter is idle: the newest item per thread."""

    async def done() -> bool:
        events = await messages(bus.js, subjects.EVENTS)
        return (
            len(events) >= mails
            and await settled(bus, subjects.EVENTS, "router")
            and await settled(bus)
            and bool(await items(bus))
        )

    await eventually(done, timeout=60, message=f"{mails} mails drafted")
    newest: dict[str, InboxItem] = {}
    for item in await items(bus):
        if item.thread not in newest or item.version > newest[item.thread].version:
            newest[item.thread] = item
    return newest


async def results(bus: Bus) -> list[Envelope]:
    return [Envelope.model_validate_json(m.data) for m in await messages(bus.js, subjects.RESULTS)]


def authors(item: InboxItem) -> set[str]:
    return {
        mail.normal_address(m.author_email or "?")
        for m in item.conversation
        if m.author == "customer"
    }


@pytest.fixture(params=["webhook", "imap"])
async def desk(
    request: pytest.FixtureRequest,
    nats_server: NatsServer,
    tmp_path: Path,
    harness: Harness,
    fake_channel: FakeChannel,
) -> AsyncIterator[MailDesk]:
    imap = request.getfixturevalue("imap_server") if request.param == "imap" else None
    desk = MailDesk(nats_server, tmp_path, harness, fake_channel, imap)
    desk.start()
    try:
        yield desk
    finally:
        desk.stop()


async def test_a_stranger_naming_someone_s_mail_neither_joins_nor_gets_a_reply_sent_across(
    bus: Bus, desk: MailDesk
) -> None:
    # 1. a stranger names the victim's Message-ID in In-Reply-To / References
    desk.send(JANE, "<order-1@jane.example>", JANE_SAYS)
    await drafted(bus, desk, 1)
    desk.send(MALLORY, "<m-1@evil.example>", MALLORY_SAYS, replies_to="<order-1@jane.example>")
    # 2. a stranger mails first with the Message-ID the victim's next mail will have
    desk.send(MALLORY, "<order-2@jane.example>", MALLORY_FIRST)
    await drafted(bus, desk, 3)
    desk.send(JANE, "<order-2@jane.example>", JANE_AGAIN)
    newest = await drafted(bus, desk, 4)

    # every conversation is one sender's: no mail joined a conversation of someone else
    assert all(len(authors(item)) == 1 for item in newest.values()), [
        (t, authors(i)) for t, i in newest.items()
    ]
    by_text = {m.body.strip(): item for item in newest.values() for m in item.conversation}
    jane_first, claimed = by_text[JANE_SAYS], by_text[MALLORY_SAYS]
    assert claimed.thread != jane_first.thread
    assert by_text[JANE_AGAIN].thread not in (by_text[MALLORY_FIRST].thread, claimed.thread)
    # the reviewer is told which conversation the stranger's mail claimed
    assert any(
        f"claims to reply to conversation {jane_first.thread}" in w for w in claimed.warnings
    )
    assert {m.body.strip() for m in jane_first.conversation} == {JANE_SAYS}

    # every reply approved goes to the author of the round it answers, and only there
    for item in newest.values():
        await decide(bus, item, "accept")

    async def all_settled() -> bool:
        kinds = [r.type for r in await results(bus) if r.type.startswith("reply.")]
        return len(kinds) >= len(newest)

    await eventually(all_settled, timeout=40, message="every approved reply settled")
    sent = [json.loads(r["body"]) for r in desk.channel.requests]
    assert sent, "nothing reached the channel"
    for reply in sent:
        to = mail.normal_address(reply["recipient"]["email"])
        excerpt = reply["in_reply_to"]["excerpt"]
        mine = JANE_SAYS + JANE_AGAIN if to == "jane@example.com" else MALLORY_SAYS + MALLORY_FIRST
        assert excerpt.rstrip("…") in mine, (to, excerpt)
    to_mallory = [r for r in sent if "mallory" in r["recipient"]["email"]]
    assert not any("4411" in json.dumps(r) or "4242" in json.dumps(r) for r in to_mallory)
