"""Where threads are checkpointed, and what reviewers sent is remembered (the LangGraph store of
`memory`): SQLite under var/ by default, PostgreSQL when configured (one pool for both)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore, TTLConfig

from shared.db import private_dir, private_sqlite_file

from . import memory


def postgres_url(database_url: str | None) -> str | None:
    """A libpq URL if `database_url` names PostgreSQL (SQLAlchemy driver suffixes removed)."""
    if not database_url:
        return None
    scheme, sep, rest = database_url.partition("://")
    if not sep or scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
        return None
    return f"postgresql://{rest}"


async def reachable(saver: BaseCheckpointSaver[str]) -> bool:
    """Whether the checkpoint store answers now (for /readyz): a pooled PostgreSQL connection
    within 2 s; SQLite is a local file."""
    from psycopg_pool import AsyncConnectionPool

    pool = getattr(saver, "conn", None)
    if not isinstance(pool, AsyncConnectionPool):
        return True
    async with pool.connection(timeout=2.0) as conn:
        await conn.execute("SELECT 1")
    return True


@dataclass(frozen=True)
class Storage:
    checkpointer: BaseCheckpointSaver[str]
    store: BaseStore


def _ttl(keep_days: float | None) -> TTLConfig | None:
    """Remembered examples expire `keep_days` after they were written (swept hourly)."""
    if keep_days is None:
        return None
    return TTLConfig(
        default_ttl=keep_days * 24 * 60, refresh_on_read=False, sweep_interval_minutes=60
    )


@contextlib.asynccontextmanager
async def _swept(store: BaseStore) -> AsyncIterator[BaseStore]:
    if getattr(store, "ttl_config", None):
        await store.start_ttl_sweeper()  # type: ignore[attr-defined]
    try:
        yield store
    finally:
        if getattr(store, "ttl_config", None):
            await store.stop_ttl_sweeper(timeout=5.0)  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def open_storage(
    database_url: str | None, var_dir: Path, *, keep_days: float | None = None
) -> AsyncIterator[Storage]:
    """The checkpointer and the store; what the store remembers is kept `keep_days` (None:
    for good)."""
    url = postgres_url(database_url)
    if url is not None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        # A pool that checks each connection before lending it: after a PostgreSQL restart or
        # failover (every backend terminated) the next run gets a new connection instead of
        # "the connection is closed" on every ticket from then on. The settings are the ones
        # AsyncPostgresSaver.from_conn_string uses; the application name says which process.
        pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=4,
            open=False,
            timeout=5.0,  # no connection in 5 s: the database is away, wait for it (Unavailable)
            check=AsyncConnectionPool.check_connection,
            kwargs={
                "autocommit": True,
                "prepare_threshold": 0,
                "row_factory": dict_row,
                "application_name": f"desk-drafter-{os.getpid()}",
            },
        )
        await pool.open(wait=True)
        try:
            from langgraph.store.postgres.aio import AsyncPostgresStore

            postgres = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await postgres.setup()  # idempotent
            store = AsyncPostgresStore(pool, ttl=_ttl(keep_days))  # type: ignore[arg-type]
            await store.setup()
            await memory.prepare(store)
            async with _swept(store):
                yield Storage(postgres, store)
        finally:
            await pool.close()
        return
    from .lite import sqlite_checkpoints, sqlite_memory

    # threads hold the tickets' text: a private directory, a 0600 file before SQLite opens it
    private = private_dir(Path(var_dir))
    path = private_sqlite_file(private / "drafter-checkpoints.sqlite")
    remembered = private_sqlite_file(private / "drafter-memory.sqlite")
    with (
        sqlite_checkpoints(str(path)) as saver,
        sqlite_memory(str(remembered), _ttl(keep_days)) as lite,
    ):
        await memory.prepare(lite)
        yield Storage(saver, lite)
