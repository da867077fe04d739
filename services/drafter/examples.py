"""An example as kept: the team's reply to a round, redacted, with what it was about.

What is kept of a reply is the team's words with the customer's personal data as placeholders
(`redacted`); never what the customer wrote. Examples kept before (`v` 1) read as none until
`memory.prepare` has rewritten them (`rewritten`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared import personal

VERSION = 2  # what a kept value is: 2, the team's reply redacted (1: with the customer's words)
MAILBOX = "mail"  # the helpdesk of mail conversations (threads `mail-…`)
TICKETS = "helpdesk"  # the helpdesk every ticket is read from (one per deployment today)


def helpdesk_of(ticket_id: str) -> str:
    """The helpdesk a ticket belongs to, whichever way its event came (a webhook, a backfill, a
    stale scan): a mail conversation's examples are the mailbox's, a ticket's the helpdesk's."""
    return MAILBOX if ticket_id.startswith("mail-") else TICKETS


@dataclass(frozen=True)
class Example:
    ticket: str
    round: str
    category: str
    source: str  # the helpdesk the ticket came from: its examples are shown to its drafts only
    reply: str  # what was sent; kept with the customer's personal data as placeholders
    edited: bool
    at: str  # when it was approved (ISO 8601)

    @property
    def ref(self) -> str:
        return f"{self.ticket}/{self.round}"


def key(thread: str, round_: str) -> str:
    return f"{thread}:{round_}"


def redacted(reply: str, names: Iterable[str] = ()) -> str:
    """The reply as an example keeps it: the customer's personal data as placeholders, the
    name it greets (which may not be the helpdesk's spelling of it) among the names."""
    return personal.redact(reply, names=[*names, *greeted(reply)])


_GREETING = re.compile(
    r"^[ \t]*(?i:hi|hello|hey|dear|good (?:morning|afternoon|evening)|hallo|guten tag|liebe[rs]?"
    r"|sehr geehrte[rs]?|bonjour|bonsoir|cher|chère|hola|buenos días|buenas tardes|estimad[oa]s?"
    r"|querid[oa]s?)[ \t]+(?P<name>[A-ZÀ-ÖØ-Þ][\w'’.-]*(?:[ \t]+[A-ZÀ-ÖØ-Þ][\w'’.-]*){0,3})"
    r"[ \t]*[,!:]",
    re.MULTILINE,
)
_NOT_NAMES = frozenset(
    "team support customer customers sir madam all everyone there friend friends kunde kundin"
    " client cliente madame monsieur señor señora frau herr mr mrs ms".split()
)


def greeted(reply: str) -> list[str]:
    """Who the reply greets ("Dear Anna Schmidt," "Hallo Herr Müller!"), as a name."""
    found = []
    for m in _GREETING.finditer(reply[:500]):
        words = [w for w in m.group("name").split() if w.casefold().strip(".") not in _NOT_NAMES]
        if words:
            found.append(" ".join(words))
    return found


def rewritten(value: Any) -> dict[str, Any]:
    """An example kept before `VERSION` as it is kept now: without what the customer wrote,
    its reply redacted (the name it greets among the names: the customer's is not kept), of the
    helpdesk its ticket id says."""
    old = value if isinstance(value, dict) else {}
    return {
        "ticket": str(old.get("ticket") or ""),
        "round": str(old.get("round") or ""),
        "category": str(old.get("category") or "other"),
        "source": helpdesk_of(str(old.get("ticket") or "")),
        "reply": redacted(str(old.get("reply") or "")),
        "edited": bool(old.get("edited")),
        "at": str(old.get("at") or ""),
        "v": VERSION,
    }


def example_of(value: dict[str, object]) -> Example | None:
    """An example as kept now (`VERSION`); one kept before and not yet rewritten is none."""
    if value.get("v") != VERSION:
        return None
    try:
        return Example(
            ticket=str(value["ticket"]),
            round=str(value["round"]),
            category=str(value["category"]),
            source=str(value["source"]),
            reply=str(value["reply"]),
            edited=bool(value.get("edited")),
            at=str(value.get("at") or dt.datetime.now(dt.UTC).isoformat()),
        )
    except KeyError:
        return None
