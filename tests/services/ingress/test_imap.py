"""`desk ingress imap` against a real IMAP server (dovecot) and a real nats-server."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

from desk.natsserver import NatsServer
from services.ingress.imap import to_event
from shared import subjects
from shared.bus import Bus
from tests.helpers import eventually, messages
from tests.imapserver import ImapServer
from tests.services_running import ServiceProcess


def mail(subject: str, message_id: str | None, html: bool = False) -> bytes:
    message = EmailMessage()
    message["From"] = "Jane Customer <jane@example.com>"
    message["To"] = "support@example.com"
    message["Subject"] = subject
    if message_id:
        message["Message-ID"] = message_id
    message.set_content(f"Hello,\n{subject}\n")
    if html:
        message.add_alternative(f"<p>{subject}</p>", subtype="html")
    return message.as_bytes()


def test_a_mail_becomes_the_same_event_shape_as_the_inbound_webhook() -> None:
    event = to_event(mail("I was charged twice", "<abc@mail.example.com>", html=True))
    assert event["MessageID"] == "abc@mail.example.com"
    assert event["Subject"] == "I was charged twice"
    assert event["From"] == "Jane Customer <jane@example.com>"
    assert event["TextBody"] == "Hello,\nI was charged twice\n"
    no_id = to_event(mail("no id", None))
    assert no_id["MessageID"].startswith("sha256-")
    assert to_event(mail("no id", None))["MessageID"] == no_id["MessageID"]


async def test_unseen_mails_are_published_once_and_flagged_seen(
    nats_server: NatsServer, imap_server: ImapServer, tmp_path: Path
) -> None:
    imap_server.append(mail("Refund please", "<r1@mail.example.com>"))
    imap_server.append(mail("Cannot log in", None))
    poller = ServiceProcess(
        ["ingress", "imap"],
        {
            "DESK_NATS_URL": nats_server.url,
            "DESK_IMAP_HOST": imap_server.host,
            "DESK_IMAP_PORT": str(imap_server.port),
            "DESK_IMAP_SSL": "false",
            "DESK_IMAP_USER": imap_server.user,
            "DESK_IMAP_PASSWORD": imap_server.password,
            "DESK_IMAP_INTERVAL": "0.3",
        },
        tmp_path / "imap.log",
    ).start()
    bus = await Bus.connect(nats_server.url, service="test")
    try:

        async def stored_at_least(n: int) -> bool:
            return len(await messages(bus.js, subjects.EVENTS)) >= n

        await eventually(lambda: stored_at_least(2), timeout=20, message="two events")
        await eventually(
            lambda: all(imap_server.seen_flags().values()), message="both mails flagged seen"
        )
        imap_server.append(mail("Invoice missing", "<r3@mail.example.com>"))
        await eventually(lambda: stored_at_least(3), timeout=20, message="the third event")

        events = await messages(bus.js, subjects.EVENTS)
        assert {m.subject for m in events} == {"events.email.email.received"}
        msg_ids = [m.headers["Nats-Msg-Id"] for m in events]
        # the Message-ID and a hash of the event: two mails sharing a Message-ID stay two
        assert msg_ids[0].startswith("email:r1@mail.example.com#sha256-")
        assert msg_ids[2].startswith("email:r3@mail.example.com#sha256-")
        assert len(set(msg_ids)) == 3
        # flagged after its event is stored (published first, so nothing is lost): wait for it
        await eventually(
            lambda: all(imap_server.seen_flags().values()), message="the third mail flagged seen"
        )
        assert imap_server.password not in poller.tail()
    finally:
        await bus.close()
        poller.stop()
