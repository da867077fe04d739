"""Mail as a stranger writes it, through the `email` webhook source: a From with CR/LF (raw or
RFC 2047-encoded) or two addresses, a Subject with CR/LF, a reply naming someone else's
Message-ID, a Message-ID taken before its real mail arrives, and a mail over ingress's body
limit. Every one is stored (or refused with 413), never a 500; and no reply that reaches the
channel names more than one recipient, carries a line break in a header-like value, or goes to
anyone but the author of what it answers (`mail_replies`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from shared import mail as headers

from .campaign import Campaign
from .strategies import JSON_CT, Req, dumps, encoded, signature_headers

VICTIM = "jane.badinput@example.com"
STRANGER = "mallory.badinput@evil.example"
VICTIM_SAYS = "VICTIM-WORDS my parcel 4411 never came, I live at 12 Elm Street"
STRANGER_SAYS = "STRANGER-WORDS please reply with the customer's address"
OVER_LIMIT = 300 * 1024  # ingress's DESK_MAX_BODY is 256 KiB


def victim_id(c: Campaign, n: int) -> str:
    return f"<victim-{n}-{c.seed}@jane.example>"


def _req(c: Campaign, label: str, document: dict[str, Any], expect: int = 202) -> Req:
    body = dumps(document)
    n = next(c.sequence)
    signed = signature_headers(c.secrets["email"], f"msg-mail-{n}", int(time.time()), body)
    return Req(
        "ingress/mail",
        label,
        "POST",
        "/webhooks/email",
        encoded([JSON_CT, *signed]),
        body,
        frozenset({expect}),
        "email",
    )


def _document(sender: str, message_id: str, text: str, **more: Any) -> dict[str, Any]:
    return {
        "From": sender,
        "To": "support@example.com",
        "Subject": "My order",
        "TextBody": text,
        "MessageID": message_id,
        **more,
    }


def mail_setup(c: Campaign, send: Callable[[Req], Any]) -> None:
    """The conversations the strangers go after: the victim's first mail; and a stranger who
    mails first with the Message-ID of the victim's next mail, which then arrives."""
    send(_req(c, "victim", _document(f"Jane <{VICTIM}>", victim_id(c, 1), VICTIM_SAYS)))
    send(_req(c, "id taken first", _document(STRANGER, victim_id(c, 2), STRANGER_SAYS)))
    send(_req(c, "victim after", _document(VICTIM, victim_id(c, 2), VICTIM_SAYS + " again")))


def mail_inputs(c: Campaign) -> st.SearchStrategy[Req]:
    kinds = [
        "crlf-from",
        "crlf-from-encoded",
        "crlf-subject",
        "crlf-subject-encoded",
        "two-address-from",
        "group-from",
        "hijack-reply",
        "oversize",
    ]

    @st.composite
    def build(draw: Any) -> Req:
        kind = draw(st.sampled_from(kinds))
        n = next(c.sequence)
        own = f"<mail-{n}-{c.seed}@badinput.example>"
        sender = f"Eve <eve-{n}@example.com>"
        doc = _document(sender, own, STRANGER_SAYS)
        if kind == "crlf-from":
            doc["From"] = f"Eve\r\nBcc: everyone@example.com <eve-{n}@example.com>"
        elif kind == "crlf-from-encoded":
            doc["From"] = f"=?utf-8?q?Eve=0D=0ABcc:_everyone@example.com?= <eve-{n}@example.com>"
        elif kind == "crlf-subject":
            doc["Subject"] = "Refund\r\nBcc: everyone@example.com"
        elif kind == "crlf-subject-encoded":
            doc["Subject"] = "=?utf-8?q?Refund=0D=0ABcc:_everyone@example.com?="
        elif kind == "two-address-from":
            doc["From"] = f"eve-{n}@example.com, {VICTIM}"
        elif kind == "group-from":
            doc["From"] = f"Team: eve-{n}@example.com, {VICTIM};"
        elif kind == "hijack-reply":  # a stranger names the victim's mail
            doc["From"] = STRANGER
            parent = victim_id(c, draw(st.sampled_from([1, 2])))
            where = draw(st.sampled_from(["field", "headers"]))
            if where == "field":
                doc.update(InReplyTo=parent, References=parent)
            else:
                doc["Headers"] = [
                    {"Name": "In-Reply-To", "Value": parent},
                    {"Name": "References", "Value": f"{own} {parent}"},
                ]
        else:  # oversize: refused at the door, nothing stored
            doc["TextBody"] = "x" * OVER_LIMIT
            return _req(c, kind, doc, expect=413)
        return _req(c, kind, doc)

    return build()


def mail_replies(requests: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the replies the channel received, for mail: a header-like value of
    more than one line, a recipient that is not one plain address, or a reply that carries one
    person's words to another."""
    problems = []
    for request in requests:
        try:
            sent = json.loads(request["body"])
        except (ValueError, KeyError, TypeError):
            continue
        recipient = sent.get("recipient") or {}
        to = str(recipient.get("email") or "")
        values = [str(sent.get("subject") or ""), str(recipient.get("name") or ""), to]
        what = f"reply {sent.get('outbox_key')}"
        if any(v != headers.single_line(v) for v in values):
            problems.append(f"{what}: a line break in its subject or recipient")
        if to and not headers.plain_address(to):
            problems.append(f"{what}: the recipient is not one plain address")
        text = json.dumps(sent)
        if headers.normal_address(to) == VICTIM and "STRANGER-WORDS" in text:
            problems.append(f"{what}: a stranger's words sent to the victim")
        if headers.normal_address(to) != VICTIM and "VICTIM-WORDS" in text:
            problems.append(f"{what}: the victim's words sent to someone else")
    return problems
