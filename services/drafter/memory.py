"""What the drafter learned from reviewers: the replies they sent, kept as examples.

A round whose reply a reviewer accepted, or edited and then approved (the edited text is the
better example), is remembered in the LangGraph store beside the checkpoints: what the customer
wrote, the category, and the reply that went out. The next similar round in that category is
shown the most similar of them (BM25 over what the customers wrote). One example per round,
keyed by thread and round, so a redelivered decision rewrites the same one; a reply the sender
withdrew (the ticket closed, a person answered, the customer wrote again) never went out and is
forgotten.

Which examples are ranked is one indexed read of the newest `RECENT` of the category, not the
store's own search: LangGraph's `asearch` on a namespace matches it as `prefix = … OR prefix
GLOB …` (SQLite) or by pattern (PostgreSQL) and filters the JSON of every row, so each draft
read and sorted every example ever kept (the archive period is a year): 200 ms of SQLite per
search at 48,000 examples in a soak, and growing with every reply sent. With the indexes
`prepare` adds to the store's table (by namespace and time; by namespace, category and time)
it walks only the rows it returns: 1.3 ms of SQLite at the same 48,000 (4 ms with the 500
values decoded).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import Any

from langgraph.store.base import BaseStore

from shared import similarity

from .lite import SqliteMemory

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


# The store's own table, as LangGraph's SQLite and PostgreSQL stores create it: the newest
# examples (of a category) are read along these indexes, newest first, and no further.
_SQLITE_INDEXES = (
    "CREATE INDEX IF NOT EXISTS store_recent ON store (prefix, updated_at)",
    "CREATE INDEX IF NOT EXISTS store_recent_category"
    " ON store (prefix, json_extract(value, '$.category'), updated_at)",
)
_POSTGRES_INDEXES = (
    "CREATE INDEX IF NOT EXISTS store_recent ON store (prefix, updated_at)",
    "CREATE INDEX IF NOT EXISTS store_recent_category"
    " ON store (prefix, (value->>'category'), updated_at)",
)
_SQLITE_RECENT = (
    "SELECT key, value, updated_at FROM store WHERE prefix = ?{category}"
    " ORDER BY updated_at DESC LIMIT ?"
)
_POSTGRES_RECENT = (
    "SELECT key, value, updated_at FROM store WHERE prefix = %s{category}{unexpired}"
    " ORDER BY updated_at DESC LIMIT %s"
)
_PREFIX = ".".join(NAMESPACE)  # how both stores write a namespace in `prefix`


async def prepare(store: BaseStore) -> None:
    """The indexes the newest examples are read by (idempotent; a store of another kind
    needs none)."""
    if isinstance(store, SqliteMemory):

        def create() -> None:
            with store.lock:
                for statement in _SQLITE_INDEXES:
                    store.conn.execute(statement)

        await store.run(create)
        return
    pool = _postgres_pool(store)
    if pool is not None:
        import psycopg

        async with pool.connection() as conn:
            for statement in _POSTGRES_INDEXES:
                try:
                    await conn.execute(statement)
                except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                    pass  # another replica created it at the same moment


def _postgres_pool(store: BaseStore) -> Any:
    try:
        from langgraph.store.postgres.aio import AsyncPostgresStore
    except ImportError:  # pragma: no cover - a dependency
        return None
    return store.conn if isinstance(store, AsyncPostgresStore) else None


async def _recent(
    store: BaseStore, category: str | None, limit: int
) -> list[tuple[str, dict[str, Any], str]]:
    """The newest `limit` examples (of `category`, if given): key, value, when last written."""
    params = (_PREFIX, category, limit) if category else (_PREFIX, limit)
    if isinstance(store, SqliteMemory):
        query = _SQLITE_RECENT.format(
            category=" AND json_extract(value, '$.category') = ?" if category else ""
        )

        def read() -> list[tuple[str, dict[str, Any], str]]:
            with store.lock:
                rows = store.conn.execute(query, params).fetchall()
            return [(key, json.loads(value), str(at)) for key, value, at in rows]

        return await store.run(read)
    pool = _postgres_pool(store)
    if pool is not None:
        omit = getattr(store, "_omit_expired", False)
        query = _POSTGRES_RECENT.format(
            category=" AND value->>'category' = %s" if category else "",
            unexpired=" AND (expires_at IS NULL OR expires_at > NOW())" if omit else "",
        )
        async with pool.connection() as conn:
            cur = await conn.execute(query, params)
            rows = await cur.fetchall()
        return [(row["key"], row["value"], str(row["updated_at"])) for row in rows]
    found = await store.asearch(
        NAMESPACE, filter={"category": category} if category else None, limit=limit
    )
    return [(item.key, item.value, str(item.updated_at)) for item in found]


async def similar(
    store: BaseStore, query: str, category: str | None, k: int, *, besides: str = ""
) -> list[Example]:
    """The `k` remembered rounds most like `query`, best first: of `category` when it is
    known, any otherwise; never the round `besides` (a thread's own `key`)."""
    if k <= 0 or not query.strip():
        return []
    kept = [found for found in await _recent(store, category, RECENT) if found[0] != besides]
    if not kept:
        return []
    signature = tuple((key, at) for key, _, at in kept)
    ranked = _RANKED.get(category)
    if ranked is None or ranked.signature != signature:  # indexed again only when it changed
        examples = [e for _, value, _ in kept if (e := _example(value)) is not None]
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
