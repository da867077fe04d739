"""Finished conversations are forgotten after `DESK_THREAD_RETENTION_DAYS`.

LangGraph's savers keep every checkpoint of every thread for ever: each step of each round adds
one, with the conversation's text in it (about 36 KB a finished round here). A pass (hourly,
`DESK_PRUNE_INTERVAL`) first deletes each thread whose newest checkpoint is older than the
retention period and that, under its lease, is still finished and still that old; then it
compacts every thread at rest for an hour (or half the retention period, if shorter), finished
or waiting for a reviewer, to its newest checkpoint (the one any later run starts from, with the
pending writes a decision resumes: about 8 KB). A draft waiting for a reviewer, or a run that
failed mid-way, is never deleted (that would lose the draft or the retry).

Deleting comes first because it is what bounds the store: a pass that compacts a backlog of
thousands of threads (a drafter slowed down, or back after a long stop) still deletes first.
A thread the pass cannot read (a checkpoint no longer decodes) is logged and passed over, so
one bad thread never stops every later one from being deleted; the database away ends the pass.

What outlives a deleted thread, in the drafter's ledger for `DESK_ARCHIVE_DAYS`: its version
counter and the newest message its rounds answered (`thread:<id>`). Item ids are
`<thread>~v<version>`, so a later round of the same ticket continues the count instead of
reusing an id the inbox still holds. Past that, the inbox has archived the thread's items too.

Checkpoint ids are LangGraph's uuid6, whose text sorts by time: "older than" is a comparison
with the id a checkpoint made at the cut-off would have had.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from shared import db
from shared.errors import TransientError
from shared.ledger import Ledger

from . import metrics
from .lite import SqliteCheckpoints

log = logging.getLogger(__name__)

_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


def checkpoint_id_at(moment: dt.datetime) -> str:
    """The smallest uuid6 text of a checkpoint made at `moment`."""
    ticks = int(moment.timestamp() * 10_000_000) + _UUID_EPOCH
    value = ((ticks >> 12) & 0xFFFFFFFFFFFF) << 80 | 0x6 << 76 | (ticks & 0x0FFF) << 64
    return str(uuid.UUID(int=value | 0b10 << 62))  # version 6, the RFC 4122 variant


def memo_key(thread: str) -> str:
    """Ledger key: what a deleted thread's next round continues from."""
    return f"thread:{thread}"


async def memo(ledger: Ledger, thread: str) -> dict[str, Any]:
    """What a deleted thread left (`version`, `covered`), for the input of its next start; {}
    for a thread never deleted."""
    raw = await ledger.get(memo_key(thread))
    if not raw:
        return {}
    try:
        left = json.loads(raw)
    except ValueError:
        return {}
    found: dict[str, Any] = {}
    if isinstance(left.get("version"), int):
        found["version"] = left["version"]
    if isinstance(left.get("covered"), str):
        found["covered"] = left["covered"]
    return found


# the threads whose newest checkpoint is older than the mark (and, to compact, that have more
# than one), oldest first, after a bound
_OLD_THREADS = """
SELECT thread_id, MAX(checkpoint_id) AS newest FROM checkpoints WHERE checkpoint_ns = ''
GROUP BY thread_id HAVING MAX(checkpoint_id) < {p} AND MAX(checkpoint_id) > {p}{more}
ORDER BY MAX(checkpoint_id) LIMIT {limit}
"""
# keep the newest checkpoint of a thread (with its pending writes), delete the ones before it
_COMPACT_SQLITE = (
    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id < ?",
    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id < ?",
)
# at rest this long (or half the retention period, if shorter): only its newest checkpoint is kept
COMPACT_AFTER = dt.timedelta(hours=1)


class Retention:
    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        ledger: Ledger,
        *,
        keep_days: float,
        lease_ttl: float,
        batch: int = 500,
    ) -> None:
        saver = graph.checkpointer
        assert isinstance(saver, BaseCheckpointSaver)
        self.graph = graph
        self.saver = saver
        self.ledger = ledger
        self.keep = dt.timedelta(days=keep_days)
        self.compact_after = min(COMPACT_AFTER, self.keep / 2)
        self.lease_ttl = lease_ttl
        self.batch = batch

    async def prune(self, now: dt.datetime | None = None) -> int:
        """One pass: delete the finished threads idle past the retention period, then keep
        only the newest checkpoint of each thread at rest for an hour (finished, or waiting for
        a reviewer); `batch` threads looked at a time, oldest first. The number deleted."""
        started = time.monotonic()
        now = now or dt.datetime.now(dt.UTC)
        mark = checkpoint_id_at(now - self.keep)
        deleted = compacted = 0
        async for thread in self._threads(mark):
            deleted += await self._at_rest(thread, mark, self._forget)
        async for thread in self._threads(checkpoint_id_at(now - self.compact_after), many=True):
            compacted += await self._at_rest(thread, mark, self._compact, waiting_too=True)
        metrics.THREADS_PRUNED.inc(deleted)
        if deleted or compacted:
            log.info(
                "deleted %d finished threads idle more than %s, compacted %d (%.1fs)",
                deleted,
                self.keep,
                compacted,
                time.monotonic() - started,
            )
        return deleted

    async def _threads(self, mark: str, *, many: bool = False) -> AsyncIterator[str]:
        """The threads whose newest checkpoint is older than `mark` (with more than one
        checkpoint, if `many`), oldest first, `batch` at a time."""
        after = ""
        while found := await self._page(mark, after, many):
            for thread, newest in found:
                after = newest
                yield thread

    async def _page(self, mark: str, after: str, many: bool) -> list[tuple[str, str]]:
        more = " AND COUNT(*) > 1" if many else ""
        saver: Any = self.saver
        if isinstance(saver, SqliteCheckpoints):  # one connection, on its thread, under its lock
            query = _OLD_THREADS.format(p="?", more=more, limit=self.batch)

            def page() -> list[tuple[str, str]]:
                with saver.lock:
                    rows = saver.conn.execute(query, (mark, after)).fetchall()
                return [(row[0], row[1]) for row in rows]

            return await saver.run(page)
        async with saver.conn.connection() as pg:  # AsyncPostgresSaver: its pool
            query = _OLD_THREADS.format(p="%s", more=more, limit=self.batch)
            cur = await pg.execute(query, (mark, after))
            return [(row["thread_id"], row["newest"]) for row in await cur.fetchall()]

    async def _at_rest(
        self,
        thread: str,
        mark: str,
        action: Callable[[str, str, StateSnapshot], Awaitable[None]],
        *,
        waiting_too: bool = False,
    ) -> int:
        """Under the thread's lease, `action` on it if it is at rest: finished (and older than
        `mark`, when deleting), or waiting for a reviewer if `waiting_too`. 1 if it was done."""
        config = RunnableConfig(configurable={"thread_id": thread})
        try:
            async with self.ledger.lease(f"thread:{thread}", ttl=self.lease_ttl, wait=0.0):
                saved = await self.saver.aget_tuple(config)
                if saved is None:
                    return 0
                newest = str(saved.config["configurable"].get("checkpoint_id", ""))
                state = await self.graph.aget_state(config)
                finished = not state.next and not state.interrupts and not saved.pending_writes
                waiting = bool(state.interrupts) and waiting_too
                if not (finished or waiting) or (not waiting_too and newest >= mark):
                    return 0  # at work, failed or cut off mid-run; or it moved on meanwhile
                await action(thread, newest, state)
                return 1
        except TransientError:  # its lease is held: it is at work
            return 0
        except Exception as exc:
            if db.is_outage(exc):
                raise  # the pass ends; the next one retries
            # the class only: a decoding error may quote what the checkpoint holds
            log.warning(
                "thread %s passed over by the retention pass (%s): its checkpoint could not"
                " be read or changed",
                thread,
                exc.__class__.__name__,
            )
            return 0

    async def _forget(self, thread: str, newest: str, state: StateSnapshot) -> None:
        values = state.values
        left = {"version": int(values.get("version") or 0), "covered": values.get("covered")}
        # first the memo, then the delete: a crash between them leaves a memo of a thread still
        # there, which its next start never reads (it has a state)
        await self.ledger.put(memo_key(thread), json.dumps(left).encode())
        await self.saver.adelete_thread(thread)

    async def _compact(self, thread: str, newest: str, state: StateSnapshot) -> None:
        """Only the newest checkpoint stays: the one every later run starts from (with the
        pending writes of a draft waiting for its decision); LangGraph's own `keep_latest` on
        PostgreSQL."""
        saver: Any = self.saver
        if isinstance(saver, SqliteCheckpoints):

            def compact() -> None:
                with saver.lock, saver.conn:  # one transaction, committed at the end
                    for statement in _COMPACT_SQLITE:
                        saver.conn.execute(statement, (thread, newest))

            await saver.run(compact)
            return
        await saver.aprune([thread], strategy="keep_latest")
