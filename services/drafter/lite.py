"""The drafter's SQLite state: LangGraph's `SqliteSaver` and `SqliteStore`, each read or write one
trip to a thread of their own.

LangGraph's `AsyncSqliteSaver` sends every cursor call of an operation (open, execute, fetch,
commit, close) to aiosqlite's thread and back, one turn of the event loop each, and holds its
lock across all of them: a checkpoint read is about six trips, a write four, so with eight drafts
in flight a thread's checkpoint read waited ~19 ms and a run ~70 ms for about 1 ms of SQLite
(README, "Performance"). Here each operation is the synchronous saver's own code, run whole on
one thread the saver owns: one trip, the same tables, the same rows, the same commits. The
saver's `lock` and `conn` are the synchronous ones; `run` runs more work on that thread (the
retention pass's queries). The store of remembered replies (`memory`) is the same: a search was
about five trips of `AsyncSqliteStore`, ~14 ms of waiting per draft at eight in flight."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.base import Op, Result, TTLConfig
from langgraph.store.sqlite import SqliteStore

T = TypeVar("T")


class _OneThread:
    """Work run on one thread of its own, in order."""

    def __init__(self, name: str) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on the thread (where the connection is used)."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._thread, call)

    def close(self) -> None:
        """Wait for what is under way, then stop the thread (the connection closes after)."""
        self._thread.shutdown(wait=True)


class SqliteCheckpoints(_OneThread, SqliteSaver):
    """`SqliteSaver` with its async methods: each the sync one, on the saver's one thread."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        SqliteSaver.__init__(self, conn)
        _OneThread.__init__(self, "checkpoints")

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def listed() -> list[CheckpointTuple]:
            return list(self.list(config, filter=filter, before=before, limit=limit))

        for found in await self.run(listed):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.run(self.delete_thread, thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await self.run(self.get_delta_channel_history, config=config, channels=channels)


class SqliteMemory(_OneThread, SqliteStore):
    """`SqliteStore` with its async operations (every one goes through `abatch`): the sync
    `batch`, on the store's one thread. Its TTL sweeper is the sync store's own thread."""

    def __init__(self, conn: sqlite3.Connection, ttl: TTLConfig | None) -> None:
        SqliteStore.__init__(self, conn, ttl=ttl)
        _OneThread.__init__(self, "memory")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.run(self.batch, list(ops))


@contextlib.contextmanager
def sqlite_memory(path: str, ttl: TTLConfig | None) -> Iterator[SqliteMemory]:
    """The store on the database file at `path` (autocommit, as `SqliteStore.from_conn_string`
    opens it), set up, its sweeper running while `ttl` says items expire."""
    with contextlib.closing(
        sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    ) as conn:
        store = SqliteMemory(conn, ttl)
        store.setup()
        if ttl:
            store.start_ttl_sweeper()
        try:
            yield store
        finally:
            store.stop_ttl_sweeper(timeout=5.0)
            store.close()


@contextlib.contextmanager
def sqlite_checkpoints(path: str) -> Iterator[SqliteCheckpoints]:
    """The saver on the database file at `path`, its tables created now (not at the first
    checkpoint: the retention pass reads them), its thread stopped before the file closes (the
    connection is shared across threads, as `SqliteSaver.from_conn_string` allows)."""
    with contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = SqliteCheckpoints(conn)
        saver.setup()
        try:
            yield saver
        finally:
            saver.close()
