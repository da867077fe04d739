"""Deterministic rules around the model: escalation words before it, output checks after it."""

from __future__ import annotations

import difflib
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


# A reviewer's words in a draft: the feedback or a standing instruction pasted into the reply
# instead of followed. A sentence of it counts once it is sentence-length (`_LONG_ENOUGH` words;
# a CJK character counts half a word), so a short common phrase ("Thank you for your patience",
# "The Support Team") never does; it is repeated when the reply has `_REPEATED` of its words in
# order (case, punctuation and spacing aside: a typo fixed or a word changed is still a copy).
# An instruction that asks for words ("Say that the invoice is attached") is followed by
# writing those words: only a copy that keeps the asking part ("Say that ...") is repeated.
_LONG_ENOUGH = 6.0
_REPEATED = 0.85
_CJK_CHAR = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK_CHAR}]|[^\\W_{_CJK_CHAR}]+")
_SENTENCES = re.compile(r"(?<=[.!?;。！？；])\s*|\n+")
# how an instruction that asks for words begins, in the languages of the demo's tickets
_ASKS_FOR_WORDS = re.compile(
    r"^(?:(?:please|also|and|bitte|s'il vous plaît|por favor)\s+)*"
    r"(?:(?:say|mention|tell|write|add|include|state|explain|confirm|let)\b"
    r"(?:\s+(?:the\s+customer|them|him|her|the\s+user))?(?:\s+know)?(?:\s+that)?"
    r"|(?:start|begin|end|open|close)\s+with"
    r"|(?:sagen|schreiben|erwähnen|erklären)\s+sie(?:\s+(?:dem\s+kunden|ihm|ihr))?,?(?:\s+dass)?"
    r"|(?:dites|écrivez|mentionnez|précisez)(?:\s+(?:au\s+client|lui))?(?:\s+qu[e']?)?"
    r"|(?:di|diga|escribe|escriba|menciona|mencione)(?:\s+(?:al\s+cliente|le))?(?:\s+que)?"
    r"|请?(?:告诉客户|告知客户|说明|写明|提到|注明))"
    r"\s*:?\s*",
    re.IGNORECASE,
)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _long_enough(tokens: list[str]) -> bool:
    return sum(0.5 if re.match(f"[{_CJK_CHAR}]", t) else 1.0 for t in tokens) >= _LONG_ENOUGH


def _repeated(said: str, reply: list[str]) -> bool:
    """Whether `reply` (tokens) holds the sentence `said` verbatim or nearly."""
    tokens = _tokens(said)
    if not _long_enough(tokens):
        return False
    asking = _ASKS_FOR_WORDS.match(said.strip())
    lead = len(_tokens(asking.group(0))) if asking else 0
    matcher = difflib.SequenceMatcher(None, tokens, reply, autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    if not blocks:
        return False
    # the copy is one span of the reply, not the same words scattered over it
    start, end = blocks[0].b, blocks[-1].b + blocks[-1].size
    if end - start > len(tokens) * 1.5:
        best = max(blocks, key=lambda b: b.size)
        blocks = [best]
    copied = sum(b.size for b in blocks)
    kept_lead = lead == 0 or any(b.a < lead for b in blocks)
    return copied >= _REPEATED * len(tokens) and kept_lead


def repeated_guidance(
    reply: str, feedback: Iterable[str], instructions: Iterable[str] = ()
) -> list[str]:
    """Warnings for the reviewers' feedback and standing instructions the reply repeats
    (sentence by sentence) instead of following them."""
    said = _tokens(reply)
    warnings = []
    for kind, texts in (
        ("a reviewer's feedback", feedback),
        ("a standing instruction", instructions),
    ):
        for text in dict.fromkeys(texts):
            copied = [s for s in _SENTENCES.split(text) if s.strip() and _repeated(s, said)]
            if copied:
                shown = " ".join(copied[0].split())
                shown = shown if len(shown) <= 60 else shown[:59].rstrip() + "…"
                warnings.append(
                    f"the reply repeats {kind} instead of following it (“{shown}”): "
                    "the customer would read the instruction"
                )
    return warnings
