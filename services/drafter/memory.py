"""What the drafter learned from reviewers: the replies the team sent, kept as examples.

A round whose reply a person approved as drafted, or edited and then approved (the edited text
is the better example), is remembered in the LangGraph store beside the checkpoints (as
`examples.Example`): the category, the helpdesk the ticket belongs to (`helpdesk_of`) and the
reply that went out, with the customer's personal data replaced by typed placeholders when it
is written (`[name]`, `[email]`, `[phone]`, `[address]`, `[order]`, `[iban]`, `[vat]`,
`[card]`, `[number]`, `[url]`; `shared.personal`, with the ticket's customer name and address
as names, and the name the reply greets). Never what the customer wrote: every draft is shown
examples, and a model can be talked into quoting them to the next customer. A reply auto-send
sent was read by no person: it is held apart (`hold`, in a namespace no draft reads) with the
inbox item it was sent as, and becomes an example only when a person's audit finds it fine
(`audited`; an audit that found edits drops it). The held record is the thread's own, written
when its auto decision finished the round: an audit notice about anything else (another item
version, a draft still waiting, a reply a person approved) plants nothing. The next round from
the same helpdesk, in that category, is shown the most similar of them (BM25 over the replies),
and the newest when fewer are similar. One example per round, keyed by thread and round, so a
redelivered decision (or audit) rewrites the same one; a reply the sender withdrew (the ticket
closed, a person answered, the customer wrote again) never went out and is forgotten, held or
kept.

Examples kept before (`v` 1: what the customer wrote, the reply as sent) are rewritten by
`prepare`, once: what the customer wrote dropped, the reply redacted, marked `v` 2, and given
the helpdesk their ticket id says (a mail conversation's `mail-…`, else the ticket helpdesk).

Which examples are ranked is one indexed read of the newest `RECENT` of the helpdesk (and the
category), not the store's own search: LangGraph's `asearch` on a namespace matches it as
`prefix = … OR prefix GLOB …` (SQLite) or by pattern (PostgreSQL) and filters the JSON of every
row, so each draft read and sorted every example ever kept (the archive period is a year):
200 ms of SQLite per search at 48,000 examples in a soak, and growing with every reply sent.
With the indexes `prepare` adds to the store's table (by namespace, helpdesk and time; by
namespace, helpdesk, category and time) it walks only the rows it returns: 1.3 ms of SQLite at
the same 48,000 (4 ms with the 500 values decoded).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from langgraph.store.base import BaseStore

from shared import personal, similarity

from .examples import VERSION, Example, example_of, key, redacted, rewritten
from .lite import SqliteMemory

log = logging.getLogger(__name__)

NAMESPACE = ("examples",)
UNAUDITED = ("unaudited",)  # auto-sent replies waiting for a person's audit: shown to no draft
RECENT = 500  # the newest examples of a category that are ranked for each draft


async def remember(
    store: BaseStore, thread: str, example: Example, *, names: Iterable[str] = ()
) -> None:
    """Keep `example`, its reply redacted: `names` are the customer's (names, addresses)."""
    value = {**asdict(example), "reply": redacted(example.reply, names), "v": VERSION}
    await store.aput(NAMESPACE, key(thread, example.round), value, index=False)


async def forget(store: BaseStore, thread: str, round_: str) -> None:
    """The round's reply never went out: neither an example nor waiting for an audit."""
    await store.adelete(NAMESPACE, key(thread, round_))
    await store.adelete(UNAUDITED, key(thread, round_))


async def hold(
    store: BaseStore,
    thread: str,
    example: Example,
    *,
    item: str,
    version: int,
    names: Iterable[str] = (),
) -> None:
    """Keep an auto-sent reply as it would be remembered (redacted now: the customer's names
    are the thread's), apart, with the inbox item (`item`, `version`) it was sent as."""
    value = {**asdict(example), "reply": redacted(example.reply, names), "v": VERSION}
    await store.aput(
        UNAUDITED,
        key(thread, example.round),
        {**value, "item": item, "version": version},
        index=False,
    )


async def sent(store: BaseStore, thread: str, round_: str) -> None:
    """The sender reported the round's reply sent: an auto-sent reply held for its audit is
    marked so (an audit of a reply that never went out makes no example)."""
    found = await store.aget(UNAUDITED, key(thread, round_))
    if found is not None and not found.value.get("sent"):
        await store.aput(UNAUDITED, key(thread, round_), {**found.value, "sent": True}, index=False)


async def held(
    store: BaseStore, thread: str, round_: str, *, item: str, version: int
) -> dict[str, Any] | None:
    """The auto-sent reply `thread` holds for its round's audit, if it was sent as `item`
    v`version` (None: none was, it was withdrawn, or it was audited already)."""
    found = await store.aget(UNAUDITED, key(thread, round_))
    value = dict(found.value) if found is not None else {}
    if value.get("item") != item or value.get("version") != version:
        return None
    return value


async def audited(store: BaseStore, thread: str, round_: str, *, fine: bool) -> None:
    """A person's audit of the auto-sent reply `thread` holds for its round (`held`): fine, it
    is remembered as an example; not, it is dropped. Idempotent: the example is written under
    the round's key before the held reply goes."""
    found = await store.aget(UNAUDITED, key(thread, round_))
    if found is None:
        return
    if fine:
        kept = {k: v for k, v in found.value.items() if k not in ("item", "version", "sent")}
        await store.aput(NAMESPACE, key(thread, round_), kept, index=False)
    await store.adelete(UNAUDITED, key(thread, round_))


# The store's own table, as LangGraph's SQLite and PostgreSQL stores create it: the newest
# examples of a helpdesk (of a category) are read along these indexes, newest first, and no
# further. The indexes of before examples named their helpdesk are dropped: nothing reads them.
_SQLITE_INDEXES = (
    "CREATE INDEX IF NOT EXISTS store_examples_source"
    " ON store (prefix, json_extract(value, '$.source'), updated_at)",
    "CREATE INDEX IF NOT EXISTS store_examples_source_category ON store"
    " (prefix, json_extract(value, '$.source'), json_extract(value, '$.category'), updated_at)",
    "DROP INDEX IF EXISTS store_recent",
    "DROP INDEX IF EXISTS store_recent_category",
)
_POSTGRES_INDEXES = (
    "CREATE INDEX IF NOT EXISTS store_examples_source"
    " ON store (prefix, (value->>'source'), updated_at)",
    "CREATE INDEX IF NOT EXISTS store_examples_source_category"
    " ON store (prefix, (value->>'source'), (value->>'category'), updated_at)",
    "DROP INDEX IF EXISTS store_recent",
    "DROP INDEX IF EXISTS store_recent_category",
)
_SQLITE_RECENT = (
    "SELECT key, value, updated_at FROM store"
    " WHERE prefix = ? AND json_extract(value, '$.source') = ?{category}"
    " ORDER BY updated_at DESC LIMIT ?"
)
_POSTGRES_RECENT = (
    "SELECT key, value, updated_at FROM store"
    " WHERE prefix = %s AND value->>'source' = %s{category}{unexpired}"
    " ORDER BY updated_at DESC LIMIT %s"
)
# the examples not yet rewritten (`VERSION`), a batch at a time in key order
_SQLITE_OLD = (
    "SELECT key, value FROM store WHERE prefix = ? AND key > ?"
    " AND coalesce(json_extract(value, '$.v'), 1) < ? ORDER BY key LIMIT ?"
)
_SQLITE_REWRITE = "UPDATE store SET value = ? WHERE prefix = ? AND key = ?"
_POSTGRES_OLD = (
    "SELECT key, value FROM store WHERE prefix = %s AND key > %s"
    " AND (value->>'v') IS DISTINCT FROM %s ORDER BY key LIMIT %s"
)
_POSTGRES_REWRITE = "UPDATE store SET value = %s WHERE prefix = %s AND key = %s"
_BATCH = 200
_PREFIX = ".".join(NAMESPACE)  # how both stores write a namespace in `prefix`


async def prepare(store: BaseStore) -> None:
    """The indexes the newest examples are read by, and the examples kept before `VERSION`
    rewritten (idempotent: a second run, or a second replica, finds nothing to do; a store of
    another kind needs neither)."""
    if isinstance(store, SqliteMemory):

        def create() -> None:
            with store.lock:
                for statement in _SQLITE_INDEXES:
                    store.conn.execute(statement)

        await store.run(create)
        await _migrate_sqlite(store)
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
        await _migrate_postgres(pool)


async def _migrate_sqlite(store: SqliteMemory) -> None:
    after, total = "", 0
    while True:

        def batch(after: str = after) -> tuple[str, int]:
            with store.lock:
                rows = store.conn.execute(_SQLITE_OLD, (_PREFIX, after, VERSION, _BATCH)).fetchall()
                store.conn.execute("BEGIN")  # one write of the batch (the connection autocommits)
                try:
                    for found, value in rows:
                        new = json.dumps(rewritten(_loaded(value)), ensure_ascii=False)
                        store.conn.execute(_SQLITE_REWRITE, (new, _PREFIX, found))
                except BaseException:
                    store.conn.execute("ROLLBACK")
                    raise
                store.conn.execute("COMMIT")
            return (rows[-1][0] if rows else ""), len(rows)

        after, done = await store.run(batch)
        total += done
        if done < _BATCH:
            break
    if total:
        log.info("rewrote %d examples kept with what customers wrote", total)


async def _migrate_postgres(pool: Any) -> None:
    from psycopg.types.json import Jsonb

    after, total = "", 0
    while True:
        async with pool.connection() as conn:
            cur = await conn.execute(_POSTGRES_OLD, (_PREFIX, after, str(VERSION), _BATCH))
            rows = await cur.fetchall()
            new = await asyncio.to_thread(_rewritten_all, [row["value"] for row in rows])
            async with conn.transaction():
                for row, value in zip(rows, new, strict=True):
                    await conn.execute(_POSTGRES_REWRITE, (Jsonb(value), _PREFIX, row["key"]))
        total += len(rows)
        if len(rows) < _BATCH:
            break
        after = rows[-1]["key"]
    if total:
        log.info("rewrote %d examples kept with what customers wrote", total)


def _rewritten_all(values: list[Any]) -> list[dict[str, Any]]:
    return [rewritten(value) for value in values]


def _loaded(value: Any) -> Any:
    try:
        return json.loads(value) if isinstance(value, str | bytes) else value
    except ValueError:
        return None


def _postgres_pool(store: BaseStore) -> Any:
    try:
        from langgraph.store.postgres.aio import AsyncPostgresStore
    except ImportError:  # pragma: no cover - a dependency
        return None
    return store.conn if isinstance(store, AsyncPostgresStore) else None


async def _recent(
    store: BaseStore, source: str, category: str | None, limit: int
) -> list[tuple[str, dict[str, Any], str]]:
    """The newest `limit` examples of the helpdesk `source` (of `category`, if given): key,
    value, when last written."""
    params = (_PREFIX, source, category, limit) if category else (_PREFIX, source, limit)
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
    wanted = {"source": source, **({"category": category} if category else {})}
    found = await store.asearch(NAMESPACE, filter=wanted, limit=limit)
    return [(item.key, item.value, str(item.updated_at)) for item in found]


async def similar(
    store: BaseStore,
    query: str,
    category: str | None,
    k: int,
    *,
    source: str,
    besides: str = "",
) -> list[Example]:
    """`k` remembered rounds from the helpdesk `source`, of `category` when it is known (any
    otherwise): those whose replies are most like `query` first, then the newest (the replies
    are the team's words, so fewer share a customer's words than their messages did); never
    the round `besides` (a thread's own `key`)."""
    if k <= 0 or not query.strip() or not source:
        return []
    kept = [
        found for found in await _recent(store, source, category, RECENT) if found[0] != besides
    ]
    if not kept:
        return []
    signature = tuple((key, at) for key, _, at in kept)
    ranked = _RANKED.get((source, category))
    if ranked is None or ranked.signature != signature:  # indexed again only when it changed
        examples = [e for _, value, _ in kept if (e := example_of(value)) is not None]
        texts = [_PLACEHOLDER.sub(" ", e.reply) for e in examples]
        built = await asyncio.to_thread(similarity.index, texts)
        ranked = _Ranked(signature, examples, built)
        _RANKED[(source, category)] = ranked
    # on the loop: a query of a built index is a few hundred µs, cheaper than a thread hop
    chosen = [i for i, _ in similarity.retrieve(ranked.index, len(ranked.examples), query, k)]
    if len(chosen) < k:  # fewer replies share its words: the newest others show the team's tone
        shown = set(chosen)
        chosen += [i for i in range(len(ranked.examples)) if i not in shown][: k - len(chosen)]
    return [ranked.examples[i] for i in chosen]


# a placeholder says nothing about what a reply is about: not ranked on
_PLACEHOLDER = re.compile(r"\[(?:" + "|".join(personal.KINDS) + r")\]")


@dataclass(frozen=True)
class _Ranked:
    """A helpdesk's (category's) examples as last indexed, and what they were (keys, times)."""

    signature: tuple[tuple[str, str], ...]
    examples: list[Example]
    index: Any


_RANKED: dict[tuple[str, str | None], _Ranked] = {}
