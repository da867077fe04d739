"""How passages are found: a `Retriever` (BM25 by default, or sentence embeddings opted
into: `embeddings.Embeddings`), and the relevance below which a passage is not found at all.

A passage is offered to a draft only when it is relevant enough: at or above a floor
(`DESK_KNOWLEDGE_FLOOR`), so that a ticket the knowledge base says nothing about gets no passage
at all rather than the least unrelated one (a photo-upload crash once got the refund policy for
sharing the word "photo"). A raw BM25 score cannot carry that floor: it grows with the length of
the query and the rarity of its words, so 5 is a strong match for a terse ticket and a weak one
for a chatty one. The BM25 retriever's floor is on a share instead: the part of the query's own
term weight that the passage matches, 0 to 1, which is comparable across queries. Each distinct
term of the query weighs 1 plus its BM25 idf over the passages (the 1 so that, in a help centre
of one article, a term every passage has still counts); a term no passage contains weighs as one
only one passage contains (evidence that the ticket is about something else, as much as the
rarest word the articles use, no more); numbers (order numbers, amounts, versions) and words
that say nothing of a topic (pronouns, question words, auxiliaries, greetings, dates: `_IDLE`)
weigh nothing. So "Refund not received yet / You confirmed my refund on Monday but the money
still hasn't reached my account. How long does it take?" matches 0.66 of its weight in the
refund article, while "Please delete my account / Yes, I confirm. Please delete everything."
matches 0.39 in a refund passage (on "account" and "confirm"). The passages are still ranked by
BM25 score; the share only decides which may be offered. `BM25_FLOOR` (0.40) is calibrated on
the demo's eval set: `python -m benchmarks.retrieval` prints the precision and recall of "an
article applies" around it (0.40 is the lowest round floor that no case expecting no article
reaches: the best unrelated passage there scores 0.385, the one above). The embeddings
retriever's floor is a cosine similarity (`embeddings.FLOOR`).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Protocol

from shared import similarity


class Retriever(Protocol):
    """How passages are found: an index built from their texts, searched with a query."""

    name: str
    # a query is a few hundred µs of CPU, cheaper than a hop to a worker thread and back
    quick: bool
    floor: float  # the relevance (0 to 1) below which a text is not found at all

    def index(self, texts: list[str]) -> Any: ...

    def retrieve(self, index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
        """Positions in the index (and relevance, 0 to 1) of the `k` best texts, best first,
        none below `floor`."""
        ...


# The share of a query's term weight a passage must match to be offered (module docstring).
BM25_FLOOR = 0.40


class Bm25:
    """BM25 (`bm25s`, English stemming): the default retriever."""

    name = "bm25"
    quick = True

    def __init__(self, floor: float = BM25_FLOOR) -> None:
        self.floor = floor

    def index(self, texts: list[str]) -> Any:
        return similarity.index(texts)

    def retrieve(self, index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
        """The `k` best passages by BM25 score, each with the share of the query's term weight
        it matches; none below `floor`, none that share no term."""
        return [
            (i, share)
            for i, share in relevance(index, count, query, k)
            if share >= self.floor and share > 0
        ]


def relevance(index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
    """The `k` best of `count` indexed passages for `query` by BM25 score, best first, each
    with the share (0 to 1) of the query's term weight it matches (module docstring); those
    that share no term are left out."""
    if count == 0 or k <= 0 or not query.strip():
        return []
    tokens = similarity.tokenize([query])
    words = {i: w for w, i in tokens.vocab.items()}
    idle = _idle_words()
    said = [
        words[i] for i in tokens.ids[0] if words[i] not in idle and not _NUMBER.fullmatch(words[i])
    ]
    if not said:
        return []
    known = index.vocab_dict
    rarest = _weight(count, 1)
    scores: dict[str, Any] = {}  # a term the passages contain: its BM25 score in each
    weight: dict[str, float] = {}
    for word in dict.fromkeys(said):
        if word in known:
            scores[word] = index.get_scores([known[word]])
            weight[word] = _weight(count, int((scores[word] > 0).sum()))
        else:
            weight[word] = rarest
    if not scores:
        return []
    total = sum(scores[w] for w in said if w in scores)
    whole = sum(weight.values())
    return [
        (int(i), sum(weight[w] for w, s in scores.items() if s[i] > 0) / whole)
        for i in (-total).argsort(kind="stable")[:k]
        if total[i] > 0
    ]


# Words that say nothing of what a ticket is about (pronouns, question words, auxiliaries,
# greetings), which BM25's short English stop list keeps: they weigh nothing in the share.
_IDLE = """i me my mine myself we our ours us you your yours he him his she her they them it its
what when where which who whom why how can could would should shall may might must do does did
done doing have has had having am been being get gets got getting so also still just any all
some here from up out about after before again now yet please thank thanks hi hello dear yes
ok okay very much more most too only even ever since over under off same other another new
usually usual really already don doesn didn isn wasn aren weren hasn haven hadn won wouldn
couldn shouldn january february march april may june july august september october november
december monday tuesday wednesday thursday friday saturday sunday one two three four five six
seven eight nine ten""".split()
_NUMBER = re.compile(r"\d+(?:st|nd|rd|th)?")  # an order number, an amount, a date's day


@functools.cache
def _idle_words() -> frozenset[str]:
    return frozenset(similarity.stemmer().stemWords(_IDLE)) | frozenset(_IDLE)


def _weight(count: int, containing: int) -> float:
    """A query term's weight: 1, plus its BM25 idf over `count` passages, `containing` of which
    contain it (bm25s's default, Lucene's). The 1 keeps a term every passage has from weighing
    nothing, which in a help centre of one or two articles would be every term."""
    return 1 + math.log(1 + (count - containing + 0.5) / (containing + 0.5))


def retriever_of(name: str, model: Path | None = None, floor: float | None = None) -> Retriever:
    """The retriever `DESK_KNOWLEDGE_RETRIEVER` names, with its relevance floor
    (`DESK_KNOWLEDGE_FLOOR`; None: the retriever's own calibrated one); embeddings load their
    model now (a `ConfigError` when they cannot)."""
    if name == "embeddings":
        from .embeddings import FLOOR, Embeddings

        return Embeddings(model, FLOOR if floor is None else floor)
    return Bm25(BM25_FLOOR if floor is None else floor)
