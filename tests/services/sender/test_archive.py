"""The sender's archive policy on SQLite and PostgreSQL: finished rows older than the archive
period leave; a reply not yet delivered (or whose delivery is unknown), a result event not yet
published and the item an accept could still come for stay however old."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from services.sender import archive, notifications, store
from services.sender.notifications import NotificationRow
from services.sender.store import AuditRow, ItemRow, OutboxRow, ResultRow
from shared.db import database_url, make_engine
from tests.postgres import fresh_schema, url_in

NOW = dt.datetime.now(dt.UTC)
OLD = NOW - dt.timedelta(days=400)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with fresh_schema() if request.param == "postgresql" else contextlib.nullcontext("") as schema:
        made = make_engine(database_url(url_in(schema) if schema else None, tmp_path, "sender"))
        store.create_tables(made)
        notifications.create_tables(made)
        try:
            yield made
        finally:
            made.dispose()


def outbox(key: str, item_id: str, delivery: str) -> OutboxRow:
    thread = item_id.split("~")[0]
    return OutboxRow(
        key=key,
        item_id=item_id,
        thread=thread,
        version=int(item_id.split("~v")[1]),
        action="send_reply",
        final_text="Hello",
        decision_type="accept",
        reviewer="reviewer",
        channel="webhook",
        delivery=delivery,
        created_at=OLD,
    )


def item(item_id: str) -> ItemRow:
    thread, version = item_id.split("~v")
    return ItemRow(
        item_id=item_id,
        thread=thread,
        version=int(version),
        action="send_reply",
        args={},
        seen_at=OLD,
    )


def test_finished_rows_leave_after_the_archive_period_and_unfinished_ones_stay(
    engine: Engine,
) -> None:
    with Session(engine) as session:
        for row in (
            outbox("T1/r1/send_reply", "T1~v1", "delivered"),
            outbox("T2/r1/send_reply", "T2~v1", "pending"),
            outbox("T3/r1/send_reply", "T3~v1", "unknown"),
            outbox("T4/r1/send_reply", "T4~v2", "withdrawn"),
            item("T1~v1"),  # sent: nothing more can come for it
            item("T4~v1"),  # a newer version replaced it
            item("T4~v2"),
            item("T5~v1"),  # the newest of its conversation, nothing sent: an accept may come
            ResultRow(
                id="reply.sent:T1", type="reply.sent", data={}, created_at=OLD, published=True
            ),
            ResultRow(id="reply.sent:T9", type="reply.sent", data={}, created_at=OLD),
            AuditRow(
                outbox_key="T1/r1/send_reply",
                channel="webhook",
                attempt=1,
                duration_ms=5,
                outcome="delivered",
                at=OLD,
            ),
            NotificationRow(
                key="notify:a",
                event_id="a",
                event_type="t",
                channel="log",
                status="sent",
                created_at=OLD,
            ),
            NotificationRow(
                key="notify:b", event_id="b", event_type="t", channel="log", created_at=OLD
            ),
            # finished, but recent
            ResultRow(
                id="reply.sent:T8", type="reply.sent", data={}, created_at=NOW, published=True
            ),
        ):
            session.add(row)
        session.commit()

    counts = archive.archive(engine, NOW - dt.timedelta(days=365))

    with Session(engine) as session:
        assert sorted(r.key for r in session.exec(select(OutboxRow))) == [
            "T2/r1/send_reply",
            "T3/r1/send_reply",
        ]
        assert sorted(r.item_id for r in session.exec(select(ItemRow))) == ["T5~v1"]
        assert sorted(r.id for r in session.exec(select(ResultRow))) == [
            "reply.sent:T8",
            "reply.sent:T9",
        ]
        assert list(session.exec(select(AuditRow))) == []
        assert [r.key for r in session.exec(select(NotificationRow))] == ["notify:b"]
    assert counts["outbox rows"] == 2 and counts["items"] == 3
    assert archive.archive(engine, NOW - dt.timedelta(days=365)) == dict.fromkeys(counts, 0)
