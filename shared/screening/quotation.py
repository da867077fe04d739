"""A long verbatim quotation of what the customer wrote (`quoted`): `QUOTED_WORDS` words in a
row, or a reply mostly made of `QUOTED_MIN_WORDS` or more of the customer's words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .text import CJK, tokens_of

QUOTED_WORDS = 25  # words in a row copied from the conversation that make a quotation
QUOTED_SHARE = 0.6  # or this share of the reply, when it is at least QUOTED_MIN_WORDS words
QUOTED_MIN_WORDS = 15
_SHINGLE = 6  # words (CJK: characters) a copied passage is matched by


def _weight(token: str) -> float:
    return 0.5 if CJK.match(token) else 1.0  # two CJK characters are about a word


def _shingles(texts: Iterable[str]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for text in texts:
        tokens = tokens_of(text)
        found.update(tuple(tokens[i : i + _SHINGLE]) for i in range(len(tokens) - _SHINGLE + 1))
    return found


def quoted(reply: str, conversation: Sequence[str], knowledge: Sequence[str] = ()) -> float:
    """How many of the conversation's words the reply quotes (CJK: two characters a word; what
    the knowledge says too does not count) when that is a quotation: a run of `QUOTED_WORDS`
    copied word for word, or a reply mostly made of copied words; 0 when it is none."""
    tokens = tokens_of(reply)
    if len(tokens) < _SHINGLE:
        return 0.0
    said, known = _shingles(conversation), _shingles(knowledge)
    copied = [False] * len(tokens)
    for i in range(len(tokens) - _SHINGLE + 1):
        shingle = tuple(tokens[i : i + _SHINGLE])
        if shingle in said and shingle not in known:
            for j in range(i, i + _SHINGLE):
                copied[j] = True
    longest = run = 0.0
    for token, hit in zip(tokens, copied, strict=True):
        run = run + _weight(token) if hit else 0.0
        longest = max(longest, run)
    total = sum(_weight(t) for t in tokens)
    words = sum(_weight(t) for t, hit in zip(tokens, copied, strict=True) if hit)
    if longest >= QUOTED_WORDS:
        return longest
    if words >= QUOTED_MIN_WORDS and words >= QUOTED_SHARE * total:
        return words
    return 0.0
