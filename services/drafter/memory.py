"""What the drafter learned from reviewers: the replies they sent, kept as examples.

A round whose reply a reviewer accepted, or edited and then approved (the edited text is the
better example), is remembered in the LangGraph store beside the checkpoints: what the customer
wrote, the category, and the reply that went out. The next similar round in that category is
shown the most similar of them (BM25 over what the customers wrote). One example per round,
keyed by thread and round, so a redelivered decision rewrites the same one; a reply the sender
withdrew (the ticket closed, a person answered, the customer wrote again) never went out and is
forgotten.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from langgraph.store.base import BaseStore

from shared import similarity

NAMESPACE = ("examples",)
RECENT = 500  # the newest examples of a category that are ranked for each draft


@dataclass(frozen=True)
class Example:
    ticket: str
    round: str
    category: str
    asked: str  # the subject and what the customer wrote in the round
    reply: str  # what was sent
    edited: bool
    at: str  # when it was approved (ISO 8601)

    @property
    def ref(self) -> str:
        return f"{self.ticket}/{self.round}"


def key(thread: str, round_: str) -> str:
    return f"{thread}:{round_}"


async def remember(store: BaseStore, thread: str, example: Example) -> None:
    await store.aput(NAMESPACE, key(thread, example.round), asdict(example), index=False)


async def forget(store: BaseStore, thread: str, round_: str) -> None:
    await store.adelete(NAMESPACE, key(thread, round_))


async def similar(
    store: BaseStore, query: str, category: str | None, k: int, *, besides: str = ""
) -> list[Example]:
    """The `k` remembered rounds most like `query`, best first: of `category` when it is
    known, any otherwise; never the round `besides` (a thread's own `key`)."""
    if k <= 0 or not query.strip():
        return []
    found = await store.asearch(
        NAMESPACE, filter={"category": category} if category else None, limit=RECENT
    )
    kept = [item for item in found if item.key != besides]
    if not kept:
        return []
    signature = tuple((item.key, str(item.updated_at)) for item in kept)
    ranked = _RANKED.get(category)
    if ranked is None or ranked.signature != signature:  # indexed again only when it changed
        examples = [e for item in kept if (e := _example(item.value)) is not None]
        built = await asyncio.to_thread(similarity.index, [e.asked for e in examples])
        ranked = _Ranked(signature, examples, built)
        _RANKED[category] = ranked
    # on the loop: a query of a built index is a few hundred µs, cheaper than a thread hop
    hits = similarity.retrieve(ranked.index, len(ranked.examples), query, k)
    return [ranked.examples[i] for i, _ in hits]


@dataclass(frozen=True)
class _Ranked:
    """A category's examples as last indexed, and what they were (keys and times)."""

    signature: tuple[tuple[str, str], ...]
    examples: list[Example]
    index: Any


_RANKED: dict[str | None, _Ranked] = {}


def _example(value: dict[str, object]) -> Example | None:
    try:
        return Example(
            ticket=str(value["ticket"]),
            round=str(value["round"]),
            category=str(value["category"]),
            asked=str(value["asked"]),
            reply=str(value["reply"]),
            edited=bool(value.get("edited")),
            at=str(value.get("at") or dt.datetime.now(dt.UTC).isoformat()),
        )
    except KeyError:
        return None
