"""Bounded state: a finished conversation's checkpoints are deleted after its retention period, a
draft waiting for a reviewer never is (only its older checkpoints are, and its decision still
resumes it), and the ticket's next round continues the thread's count of versions (no item id
is used twice). A real drafter process, on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator

import psycopg
import pytest

from services.drafter.retention import checkpoint_id_at
from shared import subjects
from shared.bus import Bus
from shared.helpdesk.sql import SqlSource
from tests.helpers import eventually
from tests.postgres import POSTGRES_URL, fresh_schema, url_in

from .conftest import Harness, decide, items, send_event, settled

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

Threads = Callable[[], Counter[str]]  # checkpoints per thread


def test_a_cut_off_id_sorts_between_the_checkpoints_made_before_and_after_it() -> None:
    from langgraph.checkpoint.base.id import uuid6

    before = str(uuid6(clock_seq=3))
    mark = checkpoint_id_at(dt.datetime.now(dt.UTC) + dt.timedelta(milliseconds=5))
    after = checkpoint_id_at(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1))
    assert before < mark < after
    assert checkpoint_id_at(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) < before


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, harness: Harness) -> Iterator[Threads]:
    """The database the drafter keeps its threads in, and how to list the threads there."""
    if request.param == "sqlite":
        path = harness.root / "var" / "drafter-checkpoints.sqlite"

        def on_sqlite() -> Counter[str]:
            if not path.exists():
                return Counter()
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                return Counter(row[0] for row in db.execute("SELECT thread_id FROM checkpoints"))

        yield on_sqlite
        return
    with fresh_schema() as schema:
        harness.env["DESK_DATABASE_URL"] = url_in(schema)

        def on_postgres() -> Counter[str]:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as db:
                rows = db.execute(f"SELECT thread_id FROM {schema}.checkpoints").fetchall()
            return Counter(row[0] for row in rows)

        yield on_postgres


async def test_a_finished_thread_is_deleted_after_its_retention_and_its_next_round_goes_on(
    bus: Bus, harness: Harness, backend: Threads
) -> None:
    # about two seconds of retention, looked at twice a second
    harness.start(DESK_THREAD_RETENTION_DAYS="0.00002", DESK_PRUNE_INTERVAL="0.5")
    await send_event(bus, "T1013", "evt_waits")  # its draft is never decided
    await eventually(lambda: _count(bus, 1), timeout=30, message="T1013's draft")
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: _count(bus, 2), timeout=30, message="T1012's draft")
    v1 = next(i for i in await items(bus) if i.ticket_id == "T1012")
    await decide(bus, v1, "accept")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="resumed")

    await eventually(lambda: "T1012" not in backend(), timeout=30, message="T1012 deleted")
    # T1013's draft is older than T1012's answer, so the pass that deleted T1012 saw it: kept,
    # with only its newest checkpoint (the one its decision resumes from)
    assert backend()["T1013"] == 1, "a draft waiting for a reviewer is kept however old"

    # the event again, after its thread is gone: the round was answered, nothing is drafted
    await send_event(bus, "T1012", "evt_1", router_msg_id="redelivered-after-retention")
    await eventually(lambda: settled(bus), message="the old event handled")
    assert len(await items(bus)) == 2

    # the customer writes again: the next round, numbered on from the deleted thread
    _, message = SqlSource(harness.helpdesk_url).add_message("T1012", "Still charged twice.")
    await send_event(bus, "T1012", "evt_2", event_type="ticket.message.created")
    await eventually(lambda: _count(bus, 3), timeout=30, message="round two's item")
    v2 = [i for i in await items(bus) if i.ticket_id == "T1012"][-1]
    assert (v2.version, v2.round_messages) == (2, [message.id])
    assert v2.id != v1.id  # the inbox still holds v1: its id is not used again
    assert len(await items(bus)) == 3

    # the compacted waiting thread takes its decision: feedback, and the redraft answers it
    t1013 = next(i for i in await items(bus) if i.ticket_id == "T1013")
    await decide(bus, t1013, "response", "Mention the tracking link, please.")
    await eventually(lambda: _count(bus, 4), timeout=30, message="T1013's redraft")
    redraft = (await items(bus))[-1]
    assert (redraft.thread, redraft.version) == ("T1013", 2)
    assert redraft.feedback == ["Mention the tracking link, please."]


async def _count(bus: Bus, n: int) -> bool:
    return len(await items(bus)) >= n


async def test_a_thread_that_cannot_be_read_does_not_stop_the_others_being_deleted(
    bus: Bus, harness: Harness
) -> None:
    """A checkpoint that no longer decodes (older than every other thread, so looked at first,
    and due both its compaction and its deletion) is logged and passed over: the finished
    thread after it is still deleted, and the drafter goes on."""
    path = harness.root / "var" / "drafter-checkpoints.sqlite"
    drafter = harness.start(DESK_THREAD_RETENTION_DAYS="0.00002", DESK_PRUNE_INTERVAL="0.5")
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: _count(bus, 1), timeout=30, message="T1012's draft")
    year_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=365)
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as db, db:
        db.executemany(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
            " metadata) VALUES ('broken', '', ?, 'msgpack', X'C1', X'80')",
            [(checkpoint_id_at(year_ago + dt.timedelta(seconds=s)),) for s in (0, 1)],
        )
    v1 = (await items(bus))[0]
    await decide(bus, v1, "accept")
    await eventually(lambda: settled(bus, subjects.INBOX, "drafter-decisions"), message="resumed")

    def threads() -> Counter[str]:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return Counter(row[0] for row in db.execute("SELECT thread_id FROM checkpoints"))

    await eventually(lambda: "T1012" not in threads(), timeout=30, message="T1012 deleted")
    assert threads()["broken"] == 2  # kept as it is, for whoever looks into it
    assert "thread broken passed over by the retention pass" in drafter.log.read_text()
    assert drafter.proc is not None and drafter.proc.poll() is None  # still running
