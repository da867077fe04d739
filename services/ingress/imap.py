"""`desk ingress imap`: poll a mailbox; each unseen mail becomes an `email.received` event.

The event body has the same shape an inbound-email webhook carries (Postmark-style `From`,
`To`, `Subject`, `TextBody`, `MessageID`, `Date`), so everything downstream treats both alike.
A mail is flagged \\Seen only after its event is acknowledged by the broker; a crash in between
republishes it with the same id, which the broker drops. The id is the Message-ID and a hash of
the event (`<source>:<Message-ID>#sha256-…`): a sender picks its Message-ID, so two different
mails may share one, and the second must not be dropped as a copy of the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import email
import email.policy
import hashlib
import imaplib
import json
import logging
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from shared import ids, subjects
from shared.bus import Bus
from shared.errors import PermanentError, TransientError
from shared.service import Service
from shared.settings import ImapSettings
from shared.signatures import body_digest

from .intake import nats_headers

log = logging.getLogger(__name__)

EVENT_TYPE = "email.received"
BATCH = 50


@dataclass(frozen=True)
class Mail:
    uid: str
    raw: bytes


def to_event(raw: bytes) -> dict[str, Any]:
    """A mail as the JSON an inbound-email webhook would have sent."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    message_id = str(message.get("Message-ID", "")).strip().strip("<>").strip()
    if not message_id:
        message_id = "sha256-" + hashlib.sha256(raw).hexdigest()
    body = message.get_body(preferencelist=("plain",))
    text = ""
    if body is not None:
        with contextlib.suppress(LookupError, UnicodeDecodeError):
            text = str(body.get_content())
    return {
        "MessageID": message_id,
        "From": str(message.get("From", "")),
        "To": str(message.get("To", "")),
        "Subject": str(message.get("Subject", "")),
        "Date": str(message.get("Date", "")),
        "TextBody": text,
        # a reply names the mail(s) it answers: it joins that conversation
        "InReplyTo": str(message.get("In-Reply-To", "")).strip(),
        "References": str(message.get("References", "")).strip(),
    }


def event_id_of(message_id: str, body: bytes) -> str:
    """The same mail (the same event body) always gets the same id; two mails that only
    share a Message-ID do not."""
    return f"{message_id}#{body_digest(body)}"


class Mailbox:
    """Blocking IMAP access (stdlib imaplib); call it from a worker thread."""

    def __init__(self, settings: ImapSettings) -> None:
        self.s = settings

    def _open(self) -> imaplib.IMAP4:
        s = self.s
        conn: imaplib.IMAP4
        if s.imap_ssl:
            conn = imaplib.IMAP4_SSL(s.imap_host, s.imap_port, timeout=30)
        else:
            conn = imaplib.IMAP4(s.imap_host, s.imap_port, timeout=30)
        conn.login(s.imap_user, s.imap_password.get_secret_value())
        conn.select(s.imap_mailbox)
        return conn

    def unseen(self, limit: int = BATCH) -> list[Mail]:
        conn = self._open()
        try:
            _, found = conn.uid("SEARCH", "UNSEEN")
            uids = [u.decode() for u in (found[0] or b"").split()[:limit]]
            mails = []
            for uid in uids:
                _, parts = conn.uid("FETCH", uid, "(BODY.PEEK[])")  # PEEK: not flagged seen yet
                raw = next((p[1] for p in parts if isinstance(p, tuple)), None)
                if raw is not None:
                    mails.append(Mail(uid, raw))
            return mails
        finally:
            with contextlib.suppress(imaplib.IMAP4.error, OSError):
                conn.logout()

    def mark_seen(self, uids: list[str]) -> None:
        if not uids:
            return
        conn = self._open()
        try:
            conn.uid("STORE", ",".join(uids), "+FLAGS", r"(\Seen)")
        finally:
            with contextlib.suppress(imaplib.IMAP4.error, OSError):
                conn.logout()


async def poll_once(mailbox: Mailbox, bus: Bus, source: str) -> int:
    """Publish every unseen mail; flag seen those the broker acknowledged. Returns how many."""
    mails = await asyncio.to_thread(mailbox.unseen)
    done: list[str] = []
    for mail in mails:
        document = to_event(mail.raw)
        body = json.dumps(document).encode()
        event_id = event_id_of(document["MessageID"], body)
        msg_id = ids.ingress(source, event_id)
        headers = nats_headers([], source, event_id, EVENT_TYPE, msg_id, dt.datetime.now(dt.UTC))
        try:
            await bus.publish(
                subjects.event(source, EVENT_TYPE), body, msg_id=msg_id, headers=headers
            )
        except (TransientError, PermanentError) as exc:
            log.warning("mail not stored, will retry next poll: %s", exc)
            break
        done.append(mail.uid)
    await asyncio.to_thread(mailbox.mark_seen, done)
    return len(done)


async def run(settings: ImapSettings) -> None:
    mailbox = Mailbox(settings)
    async with Service(settings) as svc:
        if svc.bus is not None:
            bus = svc.bus

            async def poll() -> None:
                try:
                    count = await poll_once(mailbox, bus, settings.imap_source)
                except (imaplib.IMAP4.error, OSError) as exc:
                    log.warning("mailbox poll failed: %s", exc.__class__.__name__)
                    return
                if count:
                    log.info("stored %d mails", count)

            svc.every(settings.imap_interval, poll, name="mailbox poll")
        await svc.until_stopped()
