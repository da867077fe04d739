"""How alike two texts are: by their words, BM25 ranking (`bm25s`) and term overlap; by their
characters, the edit distance between a draft and the reply sent.

Words are lower-cased, English stop words dropped and the rest stemmed (PyStemmer), so
"refunds" and "refunded" are one term. Used for the knowledge base's passages, the past replies
the drafter is shown as examples, and the reviewer feedback that recurs across tickets.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import logging
import re
import threading
from collections import OrderedDict
from typing import Any

_WORD = re.compile(r"\w+", re.UNICODE)
REMEMBERED = 20_000  # edit distances kept (a digest and two numbers each)


@functools.cache
def stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@functools.cache
def _stopwords() -> frozenset[str]:
    _bm25s()
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@functools.cache
def _bm25s() -> Any:
    import bm25s

    # it sets its own logger to DEBUG on import: a line for every index built otherwise
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def tokenize(texts: list[str]) -> Any:
    """bm25s's tokens for `texts` (one id list per text, and the vocabulary)."""
    bm25s = _bm25s()

    return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer(), show_progress=False)


def index(texts: list[str]) -> Any:
    """A BM25 index of `texts` (none of them may be empty of words: they just never match)."""
    bm25s = _bm25s()

    built = bm25s.BM25()
    built.index(tokenize(texts), show_progress=False)
    return built


def retrieve(built: Any, size: int, query: str, k: int) -> list[tuple[int, float]]:
    """The positions (and scores) of the `k` documents of `built` that best match `query`, best
    first; none that share no term with it."""
    if size == 0 or not query.strip() or k <= 0:
        return []
    tokens = tokenize([query])
    if not tokens.vocab:
        return []
    # n_threads=0: in this thread (any other value starts and joins a thread pool per query)
    found, scores = built.retrieve(tokens, k=min(k, size), show_progress=False, n_threads=0)
    return [
        (int(i), float(score)) for i, score in zip(found[0], scores[0], strict=True) if score > 0
    ]


def rank(query: str, texts: list[str], k: int) -> list[int]:
    """The positions of the `k` texts that best match `query`, best first."""
    if not texts:
        return []
    return [i for i, _ in retrieve(index(texts), len(texts), query, k)]


def terms(text: str) -> frozenset[str]:
    """The stemmed words of `text` that carry meaning (numbers kept as written)."""
    stop = _stopwords()
    words = [w for w in _WORD.findall(text.lower()) if w not in stop]
    numbers = {w for w in words if w.isdigit()}
    return frozenset(stemmer().stemWords([w for w in words if w not in numbers])) | numbers


def overlap(a: str, b: str) -> float:
    """The share of terms two texts have in common (Jaccard), 0 to 1."""
    x, y = terms(a), terms(b)
    if not x or not y:
        return 0.0
    return len(x & y) / len(x | y)


_remembered: OrderedDict[bytes, tuple[float, int]] = OrderedDict()
_lock = threading.Lock()


def edit_distance(draft: str | None, final: str | None) -> tuple[float, int] | None:
    """(1 - SequenceMatcher ratio, characters removed plus added) from `draft` to `final`,
    character by character; None unless both texts are there."""
    if draft is None or final is None:
        return None
    key = hashlib.blake2b(f"{len(draft)}:{draft}{final}".encode(), digest_size=16).digest()
    with _lock:
        found = _remembered.get(key)
        if found is not None:
            _remembered.move_to_end(key)
            return found
    # autojunk off: on text it would count every common letter as junk past 200 characters
    matcher = difflib.SequenceMatcher(None, draft, final, autojunk=False)
    changed = sum(
        (i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    )
    measured = (round(1 - matcher.ratio(), 6), changed)
    with _lock:
        _remembered[key] = measured
        if len(_remembered) > REMEMBERED:
            _remembered.popitem(last=False)
    return measured


def likeness(draft: str, sent: str) -> float:
    """How much of a draft went out as written: 1 - `edit_distance`'s ratio (1: unchanged)."""
    found = edit_distance(draft, sent)
    return round(1 - found[0], 3) if found else 0.0
