"""`desk ingress imap` against a real IMAP server (dovecot) and a real nats-server."""

from __future__ import annotations

import json
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

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


def poller_env(nats_server: NatsServer, imap_server: ImapServer, **extra: str) -> dict[str, str]:
    return {
        "DESK_NATS_URL": nats_server.url,
        "DESK_IMAP_HOST": imap_server.host,
        "DESK_IMAP_PORT": str(imap_server.port),
        "DESK_IMAP_SSL": "false",
        "DESK_IMAP_USER": imap_server.user,
        "DESK_IMAP_PASSWORD": imap_server.password,
        "DESK_IMAP_INTERVAL": "0.3",
        **extra,
    }


def counted(process: ServiceProcess, name: str, **labels: str) -> float:
    """A sample of the process's /metrics (0 while it has none)."""
    text = httpx.get(f"{process.ops_url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def crlf_from() -> bytes:
    """A mail whose From display name carries an encoded CR/LF and a second header."""
    return (
        b"From: =?utf-8?q?Eve=0D=0ABcc:_everyone@example.com?= <eve@example.com>\r\n"
        b"To: support@example.com\r\n"
        b"Subject: =?utf-8?q?Hello=0D=0AX-Injected:_yes?=\r\n"
        b"Message-ID: <crlf@mail.example.com>\r\n"
        b"\r\n"
        b"Please call me back.\r\n"
    )


def two_megabytes() -> bytes:
    message = EmailMessage()
    message["From"] = "Big Sender <big@example.com>"
    message["To"] = "support@example.com"
    message["Subject"] = "Scans attached"
    message["Message-ID"] = "<big@mail.example.com>"
    message.set_content("The scans, attached.\n")
    message.add_attachment(b"\x89PNG" * (512 * 1024), maintype="image", subtype="png")
    raw = message.as_bytes()
    assert len(raw) > 2 * 1024 * 1024
    return raw


async def test_a_bad_or_huge_mail_is_stored_as_it_can_be_and_intake_goes_on(
    nats_server: NatsServer, imap_server: ImapServer, tmp_path: Path
) -> None:
    """Before: a From with an encoded CR/LF made every poll fail on it, and a mail over the
    broker's payload limit was never stored; the mails after either were never read."""
    imap_server.append(mail("Refund please", "<before@mail.example.com>"))
    imap_server.append(crlf_from())
    imap_server.append(two_megabytes())
    imap_server.append(mail("Invoice missing", "<after@mail.example.com>"))
    env = poller_env(nats_server, imap_server, DESK_IMAP_QUARANTINE="Quarantine")
    poller = ServiceProcess(["ingress", "imap"], env, tmp_path / "imap.log").start()
    bus = await Bus.connect(nats_server.url, service="test")
    try:

        async def stored() -> dict[str, dict[str, Any]]:
            events = [json.loads(m.data) for m in await messages(bus.js, subjects.EVENTS)]
            return {e["MessageID"]: e for e in events}

        async def all_four() -> bool:
            return len(await stored()) == 4

        await eventually(all_four, timeout=30, message=f"four events: {poller.tail()}")
        events = await stored()
        assert events["before@mail.example.com"]["Subject"] == "Refund please"
        assert events["after@mail.example.com"]["Subject"] == "Invoice missing"
        # one line each, one address: nothing reaches a header it could add a line to
        crlf = events["crlf@mail.example.com"]
        assert crlf["From"] == '"Eve Bcc: everyone@example.com" <eve@example.com>'
        assert crlf["Subject"] == "Hello X-Injected: yes"
        assert crlf["TextBody"] == "Please call me back.\r\n"
        assert "Quarantined" not in crlf
        # the big one: its headers, its size, no body
        big = events["big@mail.example.com"]
        assert big["Quarantined"]["reason"] == "too_large"
        assert big["Quarantined"]["body"] == "not stored"
        assert big["Quarantined"]["size"] > 2 * 1024 * 1024
        assert big["Subject"] == "Scans attached" and big["From"].endswith("<big@example.com>")
        assert "PNG" not in json.dumps(big) and "not stored" in big["TextBody"]

        # flagged seen; the stand-in's mail moved to the quarantine folder, kept whole
        def settled() -> bool:
            inbox = imap_server.seen_flags()
            return set(inbox) == {
                "<before@mail.example.com>",
                "<crlf@mail.example.com>",
                "<after@mail.example.com>",
            } and all(inbox.values())

        await eventually(settled, timeout=20, message="mails flagged seen, the big one moved")
        assert imap_server.seen_flags("Quarantine") == {"<big@mail.example.com>": True}
        assert counted(poller, "desk_imap_quarantined_total", reason="too_large") == 1
        assert counted(poller, "desk_imap_polls_total", outcome="ok") >= 1
        assert counted(poller, "desk_imap_polls_total", outcome="failed") == 0

        imap_server.append(mail("Still there?", "<later@mail.example.com>"))
        await eventually(
            lambda: _has(stored, "later@mail.example.com"), timeout=20, message="a later mail"
        )
        assert len(await stored()) == 5  # nothing stored twice
        assert "eve@example.com" not in poller.tail()  # no address in the log
    finally:
        await bus.close()
        poller.stop()


async def _has(stored: Any, message_id: str) -> bool:
    return message_id in await stored()
