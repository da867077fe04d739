"""What a reply must and must not say, and what it quotes of the knowledge base.

A criterion is a case-insensitive phrase, alternatives written `a | b` (runs of whitespace
aside), or a regular expression after a `re:` prefix. A reply quotes a passage when it repeats
`QUOTE_WORDS` words of it in a row, case and punctuation aside."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MONEY = r"re:(\$|€|£)\s?\d"
QUOTE_WORDS = 8  # words in a row from a passage that make a quotation of it
EXCERPT_CHARS = 90
_WORD = re.compile(r"\w+")


def met(criterion: str, text: str) -> bool:
    """Whether `text` says what `criterion` asks (see the module's docstring)."""
    return said_where(criterion, text) is not None


def said_where(criterion: str, text: str) -> str | None:
    """Where in `text` `criterion` is met, with a few words around, on one line; None when it
    is not."""
    if criterion.startswith("re:"):
        found = re.search(criterion[3:], text, re.IGNORECASE)
    else:  # any alternative, case and runs of whitespace aside
        alternatives = [r"\s+".join(map(re.escape, a.split())) for a in criterion.split("|")]
        either = "|".join(f"(?:{a})" for a in alternatives if a)
        found = re.search(either, text, re.IGNORECASE) if either else None
    if found is None:
        return None
    start, end = max(0, found.start() - 30), found.end() + 30
    shown = " ".join(text[start:end].split())
    if start:  # whole words only
        shown = "…" + shown.split(" ", 1)[-1]
    if end < len(text):
        shown = shown.rsplit(" ", 1)[0] + "…"
    return _short(shown, EXCERPT_CHARS)


def quotations(reply: str, passages: Iterable[Any]) -> dict[str, str]:
    """The articles whose passages `reply` repeats, `QUOTE_WORDS` words in a row or more (case
    and punctuation aside), each with the first words it repeats as the reply has them."""
    runs: dict[tuple[str, ...], str] = {}
    for passage in passages:
        words = [w.lower() for w in _WORD.findall(passage.text)]
        for n in range(len(words) - QUOTE_WORDS + 1):
            runs.setdefault(tuple(words[n : n + QUOTE_WORDS]), passage.article)
    said = list(_WORD.finditer(reply))
    lowered = [m.group().lower() for m in said]
    found: dict[str, str] = {}
    n = 0
    while n + QUOTE_WORDS <= len(said):
        article = runs.get(tuple(lowered[n : n + QUOTE_WORDS]))
        if article is None:
            n += 1
            continue
        end = n + QUOTE_WORDS
        while end < len(said) and runs.get(tuple(lowered[end - QUOTE_WORDS + 1 : end + 1])):
            end += 1
        text = " ".join(reply[said[n].start() : said[end - 1].end()].split())
        found.setdefault(article, _short(text, EXCERPT_CHARS))
        n = end
    return found


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def gist(reply: str) -> str:
    """The start of a reply after its greeting, on one line."""
    paragraphs = [" ".join(p.split()) for p in reply.split("\n\n") if p.strip()]
    if (
        len(paragraphs) > 1
        and len(paragraphs[0]) < 40
        and paragraphs[0].endswith((",", "，", "："))
    ):
        paragraphs = paragraphs[1:]
    return _short(" ".join(paragraphs), EXCERPT_CHARS)
