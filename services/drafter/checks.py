"""Deterministic rules around the model: escalation words before it, output checks after it."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from shared import screening

from .knowledge import Passage

# Words that mean a supervisor must see the ticket before anyone replies. English is matched on
# word boundaries; Chinese as substrings (no spaces between words).
_ESCALATION_EN = re.compile(
    r"\b(lawyers?|attorneys?|solicitors?|lawsuits?|sue|suing|legal action|court|"
    r"regulators?|ombudsman|consumer (?:protection|association|council|rights)|"
    r"trading standards|small claims)\b",
    re.IGNORECASE,
)
_ESCALATION_ZH = ("律师", "起诉", "诉讼", "法院", "监管", "消协", "消费者协会", "12315", "投诉到")

_AMOUNT = re.compile(
    r"[$€£¥]\s?\d|\b\d+(?:[.,]\d{1,2})?\s?(?:USD|EUR|GBP|CNY|RMB|dollars?|euros?|pounds?)\b"
    r"|\d+(?:\.\d+)?\s?元",
    re.IGNORECASE,
)
_LINK = re.compile(r"https?://|\bwww\.", re.IGNORECASE)


def escalation_terms(text: str) -> list[str]:
    """The escalation words found in `text`, in order, each once."""
    found = [m.group(0).lower() for m in _ESCALATION_EN.finditer(text)]
    found += [word for word in _ESCALATION_ZH if word in text]
    return list(dict.fromkeys(found))


def draft_problems(
    summary: str,
    reply: str,
    *,
    max_reply_chars: int,
    allow_links: bool,
    sources: Sequence[str] = (),
    given: Collection[str] = (),
) -> list[str]:
    """What is wrong with a draft; empty when it may go to review as it is. `sources` are the
    articles the draft says it relied on, `given` those it was shown."""
    problems = []
    invented = [s for s in dict.fromkeys(sources) if s not in given]
    if invented:
        problems.append(
            "the draft cites knowledge articles it was not given: "
            + ", ".join(repr(s) for s in invented)
            + "; cite only the articles in <knowledge>"
        )
    if len(reply.strip()) < 20:
        problems.append("the reply is too short to send to a customer")
    if len(reply) > max_reply_chars:
        problems.append(f"the reply is longer than {max_reply_chars} characters")
    if "\n" in summary.strip() or len(summary) > 200:
        problems.append("the summary must be one line of at most 200 characters")
    if _AMOUNT.search(reply):
        problems.append("the reply names an amount of money; never promise a refund amount")
    if not allow_links and _LINK.search(reply):
        problems.append("the reply contains a link; links are not allowed")
    return problems


def foreign_data(
    reply: str,
    ticket: Mapping[str, Any],
    cited: Iterable[Passage],
    feedback: Iterable[str] = (),
) -> list[str]:
    """What the foreign-data screen (`shared.screening`) finds in a reply to `ticket`: the
    conversation as the customer and the team wrote it, against the `cited` knowledge passages
    (their text, title and address) and the reviewers' `feedback` on this draft. The inbox
    screens an item on the same texts. A standing instruction vouches for nothing: what every
    reply of a category may name belongs in the knowledge base."""
    said = (ticket.get("subject"), ticket.get("customer"), ticket.get("messages") or ())
    knowledge = [text for p in cited for text in (p.text, p.title, p.url) if text]
    return screening.screen(
        reply,
        conversation=screening.conversation_texts(*said),
        knowledge=[*knowledge, *feedback],
        customer=screening.customer_texts(*said),
    )
