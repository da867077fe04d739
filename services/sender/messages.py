"""The texts of supervisor notifications (pure: no I/O).

What the customer wrote (a subject, a name, a summary) is quoted inert for the chat's markup,
Slack's or Mattermost's (`shared.chat`): it can link, embed, mention or format nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from shared import chat, jsonpath
from shared.envelope import Envelope
from shared.helpdesk import Ticket
from shared.helpdesk.events import TicketRef
from shared.inbox import InboxItem, Notice
from shared.logging import redact

SUBJECT_PATHS = ("data.subject", "data.ticket.subject", "subject", "Subject")
NAME_PATHS = ("data.customer.name", "data.ticket.customer.name", "customer.name", "FromName")
MAX_SUBJECT = 150


def message(
    envelope: Envelope,
    ref: TicketRef | None,
    ticket: Ticket | None,
    flavour: chat.Flavour = "slack",
) -> str:
    """`Urgent ticket T1008 — "Locked out …" from Mateus Oliveira. Review it in the inbox.`

    No e-mail address or phone number: a name only, and anything that looks like either masked.
    Every value from the event or the ticket is quoted inert for `flavour`.
    """
    subject: str | None
    name: str | None
    if ticket is not None:
        what = f"Urgent ticket {chat.quote(ticket.id, flavour)}"
        subject, name = ticket.subject, ticket.customer.name
    else:
        body = envelope.data
        subject, name = _text(body, SUBJECT_PATHS), _text(body, NAME_PATHS) or _from_name(body)
        if ref is not None and ref.ticket_id:
            what = f"Urgent ticket {chat.quote(ref.ticket_id, flavour)}"
        elif isinstance(body, dict) and "From" in body:
            what = "Urgent e-mail"
        else:
            what = f"Urgent {chat.quote(envelope.type, flavour)} event"
        if not subject:
            what += f" ({chat.quote(envelope.type, flavour)})"
    text = what
    if subject:
        text += f' — "{_clean(subject, MAX_SUBJECT, flavour)}"'
    if name:
        text += f" from {_clean(name, 80, flavour)}"
    return text + ". Review it in the inbox."


def escalation_message(item: InboxItem, flavour: chat.Flavour = "slack") -> str:
    """`Escalation: ticket T1027 — "Escalation: Cancel and refund" from Jane Doe mentions
    lawyer. No reply was drafted: take it in the inbox.` Names only, masked and quoted like the
    rest."""
    what = f"ticket {item.ticket_id}" if item.ticket_id else f"conversation {item.thread}"
    text = chat.quote(f"Escalation: {what}", flavour)
    if item.summary:
        text += f' — "{_clean(item.summary, MAX_SUBJECT, flavour)}"'
    if item.customer and item.customer.name:
        text += f" from {_clean(item.customer.name, 80, flavour)}"
    matched = item.action_request.args.get("matched")
    if isinstance(matched, list) and matched:
        words = ", ".join(str(m) for m in matched)
        text += f" mentions {_clean(words, 80, flavour)}"
    return text + ". No reply was drafted: take it in the inbox."


def notice_message(notice: Notice, flavour: chat.Flavour = "slack") -> str:
    """An escalation: `Ticket T1012 (urgent, billing queue) from Mateus Oliveira is past its
    target (due 14:05 UTC): "Refund for a double charge". Review it in the inbox.`; a digest:
    `Billing queue: 4 waiting (1 past target, 2 nearing it); the oldest has waited 3 h 10 min.`
    Names only, masked and quoted like the rest; Slack mentions (`<@U…>`) of the queue's
    reviewers are the only markup it makes."""
    queue = f"{notice.queue} queue" if notice.queue else "no queue"
    if notice.kind == "digest" and notice.digest is not None:
        d = notice.digest
        text = f"{queue.capitalize()}: {d.waiting} waiting"
        late = [f"{d.past} past target"] if d.past else []
        late += [f"{d.near} nearing it"] if d.near else []
        if late:
            text += f" ({', '.join(late)})"
        text += f"; the oldest has waited {_duration(d.oldest_seconds)}."
        return chat.quote(text, flavour)
    what = f"Ticket {notice.ticket_id}" if notice.ticket_id else "An item"
    detail = ", ".join(x for x in (notice.priority, queue) if x)
    text = chat.quote(f"{what} ({detail})", flavour)
    if notice.customer:
        text += f" from {_clean(notice.customer, 80, flavour)}"
    if notice.kind == "sla.past":
        text += " is past its target"
    else:
        text += " nears its target"
    if notice.due_at is not None:
        text += f" (due {notice.due_at.astimezone(dt.UTC):%H:%M} UTC)"
    if notice.summary:
        text += f': "{_clean(notice.summary, MAX_SUBJECT, flavour)}"'
    text += ". Review it in the inbox."
    if flavour != "slack":  # member ids are Slack's
        return text
    mentions = [f"<@{m}>" for m in notice.mention if _MEMBER.fullmatch(m)]
    return " ".join([*mentions, text])


_MEMBER = re.compile(r"[UW][A-Z0-9]{2,20}")


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def _text(body: Any, paths: tuple[str, ...]) -> str | None:
    for path in paths:
        value = jsonpath.lookup(body, path)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _from_name(body: Any) -> str | None:
    """The display name of a mail's `From` ("Jane Doe <jane@…>"), never the address."""
    sender = jsonpath.lookup(body, "From")
    if not isinstance(sender, str) or "<" not in sender:
        return None
    return sender.split("<")[0].strip().strip('"') or None


def _clean(value: str, limit: int, flavour: chat.Flavour) -> str:
    """One line of customer text: contact details masked, cut to `limit`, then quoted inert."""
    text = redact(chat.one_line(value))
    text = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return chat.quote(text, flavour)
