"""The archive policy: what finished longer ago than DESK_ARCHIVE_DAYS leaves the inbox with its
trail; what waits stays however old. A real inbox_api process, on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from desk.natsserver import NatsServer
from shared.bus import Bus
from shared.db import database_url, make_engine
from tests.helpers import eventually
from tests.inbox_items import draft_item, publish_item
from tests.postgres import fresh_schema, url_in
from tests.services_running import ServiceProcess

from .conftest import REVIEWER, write_credentials

HEADERS = {"Authorization": f"Bearer {REVIEWER}"}


def status(url: str, item: str) -> int:
    return httpx.get(f"{url}/api/items/{item}", headers=HEADERS).status_code


def search(url: str, term: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = httpx.get(
        f"{url}/api/items", params={"text": term}, headers=HEADERS
    ).json()["items"]
    return found


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_what_finished_before_the_archive_period_is_deleted_and_what_waits_stays(
    database: str, bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    write_credentials(tmp_path / "var")
    env = {"DESK_NATS_URL": nats_server.url, "DESK_VAR_DIR": str(tmp_path / "var")}
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        if schema:
            env["DESK_DATABASE_URL"] = url_in(schema)
        first = ServiceProcess(["inbox_api"], env, tmp_path / "a.log").start()
        try:
            for item in (draft_item("T1", 1), draft_item("T1", 2), draft_item("T2")):
                await publish_item(bus, item)
            await publish_item(bus, draft_item("T3", category="shipping"))
            await eventually(lambda: status(first.url, "T3~v1") == 200, message="the items")
            await eventually(lambda: status(first.url, "T1~v2") == 200, message="T1's v2")
            answer = httpx.post(
                f"{first.url}/api/items/T3~v1/decision",
                json={"type": "ignore", "version": 1},
                headers=HEADERS,
            )
            assert answer.status_code == 202, answer.text
            assert [i["id"] for i in search(first.url, "with T3")] == ["T3~v1"]
        finally:
            first.stop()

        # a year and more later (every row made that long ago)
        engine = make_engine(database_url(env.get("DESK_DATABASE_URL"), tmp_path / "var", "inbox"))
        long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=400)
        with engine.begin() as db:
            db.execute(
                text("UPDATE inbox_items SET created_at = :t, updated_at = :t"), {"t": long_ago}
            )
            db.execute(text("UPDATE inbox_decisions SET decided_at = :t"), {"t": long_ago})
            assert db.execute(text("SELECT count(*) FROM inbox_decisions")).scalar() == 1

        second = ServiceProcess(["inbox_api"], env, tmp_path / "b.log").start()  # a pass at start
        try:
            await eventually(lambda: status(second.url, "T3~v1") == 404, message="T3 archived")
            assert status(second.url, "T1~v1") == 404  # superseded a year ago
            assert status(second.url, "T1~v2") == 200  # waiting: kept however old
            assert status(second.url, "T2~v1") == 200
            assert search(second.url, "with T3") == []
            with engine.begin() as db:
                assert db.execute(text("SELECT count(*) FROM inbox_decisions")).scalar() == 0
            assert "archive: deleted what finished before" in second.tail()
        finally:
            second.stop()
            engine.dispose()
