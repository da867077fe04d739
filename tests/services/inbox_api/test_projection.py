"""The projection is a pure function of the stream: re-reading it all yields the same rows."""

from __future__ import annotations

import contextlib
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine

from desk.natsserver import NatsServer
from services.inbox_api import store
from shared import subjects
from shared.bus import Bus
from shared.db import database_url, make_engine
from shared.inbox import InboxItem
from tests.helpers import eventually
from tests.inbox_items import draft_item, notify_item, publish_item
from tests.postgres import fresh_schema, url_in
from tests.services_running import ServiceProcess

from .conftest import REVIEWER, write_credentials


def rows(url: str) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {REVIEWER}"}
    items = httpx.get(f"{url}/api/items", params={"limit": 200}, headers=headers).json()["items"]
    return sorted(
        (
            {k: i[k] for k in ("id", "thread", "version", "status", "category", "action_request")}
            for i in items
        ),
        key=lambda r: r["id"],
    )


async def test_replaying_the_whole_stream_yields_the_same_rows(
    bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    write_credentials(tmp_path / "var")
    env = {"DESK_NATS_URL": nats_server.url, "DESK_VAR_DIR": str(tmp_path / "var")}
    first = ServiceProcess(["inbox_api"], env, tmp_path / "a.log").start()
    for item in (
        draft_item("T1", 1),
        draft_item("T1", 2),
        draft_item("T2"),
        notify_item("T3"),
        draft_item("T1", 1),
    ):  # a redelivered old version too
        await publish_item(bus, item)
    await eventually(lambda: len(rows(first.url)) == 4, timeout=15, message="four rows")
    httpx.post(
        f"{first.url}/api/items/T2~v1/decision",
        json={"type": "accept", "version": 1},
        headers={"Authorization": f"Bearer {REVIEWER}"},
    )
    before = rows(first.url)
    first.stop()

    await bus.js.delete_consumer(subjects.INBOX, "inbox_api")  # the next start re-reads it all
    second = ServiceProcess(["inbox_api"], env, tmp_path / "b.log").start()
    try:

        async def reread() -> bool:
            # ready means its consumers are bound: the one it re-created exists by now
            info = await bus.js.consumer_info(subjects.INBOX, "inbox_api")
            return (
                info.num_pending == 0
                and info.num_ack_pending == 0
                and info.delivered.stream_seq > 0
            )

        await eventually(reread, timeout=15, message="the stream re-read")
        assert rows(second.url) == before
        assert [r["status"] for r in before] == ["superseded", "waiting", "sending", "waiting"]
    finally:
        second.stop()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_what_became_of_an_item_is_recorded_and_a_final_one_stays(
    database: str, tmp_path: Path
) -> None:
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        engine = make_engine(
            url_in(schema) if schema else database_url(None, tmp_path / "var", "inbox")
        )
        try:
            store.create_tables(engine)
            assert store.project(engine, draft_item("T1"))
            assert not store.set_result(engine, "T9~v1", "sent", {"key": "T9/r1"})  # unknown
            late = {"reason": "the customer wrote again"}
            assert store.set_result(engine, "T1~v1", "withdrawn", late)
            item = store.get_item(engine, "T1~v1")
            assert item is not None
            assert (item["status"], item["withdrawn_reason"]) == ("withdrawn", late["reason"])
            sent = {"key": "T1/r1/send_reply", "delivered": True}
            assert store.set_result(engine, "T1~v1", "sent", sent)
            assert store.set_result(engine, "T1~v1", "withdrawn", late)  # too late: stays sent
            assert store.set_result(engine, "T1~v1", "failed", {"error": "x"})
            item = store.get_item(engine, "T1~v1")
            assert item is not None
            assert (item["status"], item["result"]) == ("sent", sent)
        finally:
            engine.dispose()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_an_item_delivered_again_changes_nothing(database: str, tmp_path: Path) -> None:
    """A redelivered item (or one another replica stored first) is no second row, no second
    entry in the search, and leaves what a reviewer did with the first one."""
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        engine = make_engine(
            url_in(schema) if schema else database_url(None, tmp_path / "var", "inbox")
        )
        try:
            store.create_tables(engine)
            item = draft_item("T7", 2)
            assert store.project(engine, draft_item("T7", 1))
            assert store.project(engine, item)
            assert store.set_result(engine, item.id, "sent", {"key": "T7/r1"})
            assert not store.project(engine, item)
            assert not store.project(engine, draft_item("T7", 1))
            found, _ = store.list_items(engine, status="sent", text="T7")
            assert [i["id"] for i in found] == [item.id]
            assert (store.get_item(engine, "T7~v1") or {}).get("status") == "superseded"
            assert (store.get_item(engine, item.id) or {}).get("status") == "sent"
        finally:
            engine.dispose()


def store_one(start: threading.Barrier, engine: Engine, item: InboxItem) -> bool:
    start.wait(timeout=10)  # all at the same moment
    return store.project(engine, item)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_versions_stored_at_once_in_any_order_leave_only_the_newest_waiting(
    database: str, tmp_path: Path
) -> None:
    """Replicas of the projection may store versions of one conversation at the same moment,
    and older ones last: whatever the interleaving, only the newest is left to decide."""
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        engine = make_engine(
            url_in(schema) if schema else database_url(None, tmp_path / "var", "inbox")
        )
        try:
            store.create_tables(engine)
            for trial in range(40):  # the race a wrong order loses shows within a few
                thread = f"T{trial}"
                versions = [draft_item(thread, v) for v in (1, 2, 3, 4, 5, 6)]
                random.Random(trial).shuffle(versions)
                start = threading.Barrier(len(versions))
                with ThreadPoolExecutor(len(versions)) as pool:
                    stored = pool.map(store_one, [start] * 6, [engine] * 6, versions)
                    assert all(stored)
                statuses = {
                    v: (store.get_item(engine, f"{thread}~v{v}") or {}).get("status")
                    for v in (1, 2, 3, 4, 5, 6)
                }
                assert statuses == {**dict.fromkeys((1, 2, 3, 4, 5), "superseded"), 6: "waiting"}
        finally:
            engine.dispose()
