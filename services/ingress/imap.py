"""`desk ingress imap`: poll a mailbox; each unseen mail becomes an `email.received` event.

The event body has the same shape an inbound-email webhook carries (Postmark-style `From`,
`To`, `Subject`, `TextBody`, `MessageID`, `Date`), so everything downstream treats both alike.
A mail is flagged \\Seen only after its event is acknowledged by the broker; a crash in between
republishes it with the same id, which the broker drops. The id is the Message-ID and a hash of
the event (`<source>:<Message-ID>#sha256-…`): a sender picks its Message-ID, so two different
mails may share one, and the second must not be dropped as a copy of the first.

Intake survives any mail. Header values are read as one line, a sender as one address
(`shared.mail`). A mail larger than `DESK_IMAP_MAX_BYTES` (its body is never fetched), or one
that cannot be read as a mail, is stored as a stand-in: the headers that could be read, its
size and "body not stored"; it is flagged seen like any other, moved to
`DESK_IMAP_QUARANTINE` if that is set, and counted in `desk_imap_quarantined_total`. Only the
mailbox or the broker failing stops a poll (`desk_imap_polls_total{outcome="failed"}`); the
mails it did not store wait for the next one.
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
import re
from dataclasses import dataclass
from email.message import EmailMessage, Message
from typing import Any

from shared import ids, mail, subjects
from shared.bus import Bus
from shared.errors import PermanentError, TransientError
from shared.service import Service
from shared.settings import ImapSettings
from shared.signatures import body_digest

from . import metrics
from .intake import nats_headers

log = logging.getLogger(__name__)

EVENT_TYPE = "email.received"
BATCH = 50
HEADER_BYTES = 64 * 1024  # of an oversize mail's header section, read for its stand-in
MAX_REFERENCES = 4000  # characters of In-Reply-To / References kept


@dataclass(frozen=True)
class Mail:
    uid: str
    raw: bytes  # the whole mail; only its header section when `whole` is False
    reported: int | None = None  # its size as the server reports it (RFC822.SIZE)
    whole: bool = True

    @property
    def size(self) -> int:
        return len(self.raw) if self.reported is None else self.reported


def to_event(raw: bytes) -> dict[str, Any]:
    """A mail as the JSON an inbound-email webhook would have sent. Raises on a mail that
    cannot be read as one (the poller then stores a stand-in)."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    headers = _headers(message)
    body = message.get_body(preferencelist=("plain",))
    text = ""
    if body is not None:
        with contextlib.suppress(LookupError, UnicodeDecodeError):
            text = str(body.get_content())
    return {**_header_fields(headers, raw), "TextBody": text}


def stand_in(raw: bytes, size: int, reason: str, quarantine: str = "") -> dict[str, Any]:
    """What is stored of a mail too large or unreadable: the headers that could be read (from
    `raw`, the mail or its header section), its size, and "body not stored". The same mail
    always gives the same stand-in (a republished one is dropped as a copy)."""
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        headers = _headers(message)
    except Exception:  # whatever a mail holds, its stand-in is stored
        headers = {}
    why = {
        "too_large": f"it is larger ({size} bytes) than the desk takes in",
        "unreadable": "it could not be read as a mail",
    }.get(reason, reason)
    where = f"the mailbox folder {quarantine}" if quarantine else "the mailbox"
    return {
        **_header_fields(headers, raw),
        "TextBody": f"[This mail's body was not stored: {why}. It is in {where}.]",
        "Quarantined": {"reason": reason, "size": size, "body": "not stored"},
    }


def _headers(message: Message) -> dict[str, str]:
    """The first raw value of each header, by lower-case name (as received: encoded words
    and all; `shared.mail` reads them)."""
    found: dict[str, str] = {}
    for name, value in message.raw_items():
        text = value if isinstance(value, str) else str(value)
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        found.setdefault(str(name).lower(), text)
    return found


def _header_fields(headers: dict[str, str], raw: bytes) -> dict[str, Any]:
    message_id = mail.single_line(headers.get("message-id", "")).strip("<>").strip()
    if not message_id:
        message_id = "sha256-" + hashlib.sha256(raw).hexdigest()
    sent_by = headers.get("from", "")
    try:
        sender = mail.sender(sent_by).formatted()
    except mail.HeaderError:
        sender = mail.single_line(sent_by)  # kept as one line; the drafter says why it refuses
    return {
        "MessageID": message_id,
        "From": sender,
        "To": mail.decoded(headers.get("to", "")),
        "Subject": mail.decoded(headers.get("subject", "")),
        "Date": mail.single_line(headers.get("date", "")),
        # a reply names the mail(s) it answers: it joins that conversation if its sender may
        "InReplyTo": mail.single_line(headers.get("in-reply-to", ""), MAX_REFERENCES),
        "References": mail.single_line(headers.get("references", ""), MAX_REFERENCES),
    }


def event_id_of(message_id: str, body: bytes) -> str:
    """The same mail (the same event body) always gets the same id; two mails that only
    share a Message-ID do not."""
    return f"{message_id}#{body_digest(body)}"


def event_of(found: Mail, max_bytes: int, quarantine: str = "") -> tuple[bytes, str | None]:
    """The stored event of a mail, and why it is a stand-in (None: the mail itself)."""
    reason: str | None = None
    if not found.whole or len(found.raw) > max_bytes:
        reason = "too_large"
    else:
        try:
            body = json.dumps(to_event(found.raw)).encode()
        except Exception:  # a mail no parser reads is still stored: as a stand-in
            reason = "unreadable"
        else:
            if len(body) <= max_bytes:
                return body, None
            reason = "too_large"  # its event would be: escapes, or many small parts
    return json.dumps(stand_in(found.raw, found.size, reason, quarantine)).encode(), reason


_UID = re.compile(rb"UID (\d+)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")


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
        """Unseen mails, oldest first: whole if at most DESK_IMAP_MAX_BYTES, else only their
        header section. A mail the server will not hand out is left for the next poll."""
        conn = self._open()
        try:
            _, found = conn.uid("SEARCH", "UNSEEN")
            uids = [u.decode() for u in (found[0] or b"").split()[:limit]]
            if not uids:
                return []
            sizes = _sizes(conn, uids)
            mails = []
            for uid in uids:
                size = sizes.get(uid)
                whole = size is None or size <= self.s.imap_max_bytes
                part = "BODY.PEEK[]" if whole else f"BODY.PEEK[HEADER]<0.{HEADER_BYTES}>"
                try:  # PEEK: not flagged seen yet
                    _, parts = conn.uid("FETCH", uid, f"({part})")
                except imaplib.IMAP4.abort:
                    raise
                except imaplib.IMAP4.error as exc:
                    log.warning("mail %s not fetched, next poll tries again: %s", uid, exc)
                    continue
                raw = next((p[1] for p in parts if isinstance(p, tuple)), None)
                if raw is not None:
                    mails.append(Mail(uid, raw, size, whole))
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

    def quarantine(self, uids: list[str], folder: str) -> None:
        """Move the mails to `folder` (created if missing)."""
        if not uids or not folder:
            return
        conn = self._open()
        try:
            conn.create(folder)  # NO if it exists: the move below says if it cannot be used
            numbers = ",".join(uids)
            if "MOVE" in conn.capabilities:
                status, data = conn.uid("MOVE", numbers, folder)
            else:
                status, data = conn.uid("COPY", numbers, folder)
                if status == "OK":
                    conn.uid("STORE", numbers, "+FLAGS", r"(\Deleted)")
                    conn.expunge()
            if status != "OK":
                log.warning("mails not moved to %s: %r", folder, data)
        finally:
            with contextlib.suppress(imaplib.IMAP4.error, OSError):
                conn.logout()


def _sizes(conn: imaplib.IMAP4, uids: list[str]) -> dict[str, int]:
    """Each mail's size as the server reports it (a mail it does not report is fetched whole
    and measured)."""
    _, answer = conn.uid("FETCH", ",".join(uids), "(RFC822.SIZE)")
    sizes: dict[str, int] = {}
    for line in answer:
        text = line[0] if isinstance(line, tuple) else line
        if not isinstance(text, bytes):
            continue
        uid, size = _UID.search(text), _SIZE.search(text)
        if uid and size:
            sizes[uid.group(1).decode()] = int(size.group(1))
    return sizes


@dataclass(frozen=True)
class Poll:
    stored: int
    quarantined: int
    failed: bool  # the broker refused a mail: it and those after it wait for the next poll


async def poll_once(
    mailbox: Mailbox, bus: Bus, source: str, max_bytes: int = 256 * 1024, quarantine: str = ""
) -> Poll:
    """Publish every unseen mail (a stand-in for one too large or unreadable); flag seen
    those the broker acknowledged, and move the stand-ins' mails to `quarantine`."""
    mails = await asyncio.to_thread(mailbox.unseen)
    done: list[str] = []
    set_apart: list[str] = []
    failed = False
    for found in mails:
        body, reason = event_of(found, max_bytes, quarantine)
        try:
            await _publish(bus, source, body)
        except PermanentError as exc:
            if reason is not None:
                log.warning("mail %s not stored, will retry next poll: %s", found.uid, exc)
                failed = True
                break
            reason = "unreadable"  # the broker refused the event itself: store what it can
            body = json.dumps(stand_in(found.raw, found.size, reason, quarantine)).encode()
            try:
                await _publish(bus, source, body)
            except (TransientError, PermanentError) as again:
                log.warning("mail %s not stored, will retry next poll: %s", found.uid, again)
                failed = True
                break
        except TransientError as exc:
            log.warning("mail %s not stored, will retry next poll: %s", found.uid, exc)
            failed = True
            break
        done.append(found.uid)
        if reason is not None:
            set_apart.append(found.uid)
            metrics.QUARANTINED.labels(reason).inc()
            log.warning("mail %s stored as a stand-in without its body: %s", found.uid, reason)
    await asyncio.to_thread(mailbox.mark_seen, done)
    if set_apart and quarantine:
        await asyncio.to_thread(mailbox.quarantine, set_apart, quarantine)
    return Poll(len(done), len(set_apart), failed)


async def _publish(bus: Bus, source: str, body: bytes) -> None:
    message_id = str(json.loads(body)["MessageID"])
    event_id = event_id_of(message_id, body)
    msg_id = ids.ingress(source, event_id)
    headers = nats_headers([], source, event_id, EVENT_TYPE, msg_id, dt.datetime.now(dt.UTC))
    await bus.publish(subjects.event(source, EVENT_TYPE), body, msg_id=msg_id, headers=headers)


async def run(settings: ImapSettings) -> None:
    mailbox = Mailbox(settings)
    async with Service(settings) as svc:
        bus = svc.bus

        async def poll() -> None:
            try:
                done = await poll_once(
                    mailbox,
                    bus,
                    settings.imap_source,
                    settings.imap_max_bytes,
                    settings.imap_quarantine,
                )
            except (imaplib.IMAP4.error, OSError) as exc:
                metrics.POLLS.labels("failed").inc()
                log.warning("mailbox poll failed: %s", exc.__class__.__name__)
                return
            except Exception:
                metrics.POLLS.labels("failed").inc()
                raise  # logged by the periodic runner; the next poll tries again
            metrics.POLLS.labels("failed" if done.failed else "ok").inc()
            if done.stored:
                log.info("stored %d mails (%d as stand-ins)", done.stored, done.quarantined)

        svc.every(settings.imap_interval, poll, name="mailbox poll")
        await svc.until_stopped()
