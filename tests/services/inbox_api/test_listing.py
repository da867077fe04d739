"""Listing the inbox page by page: overdue items first, every item exactly once (a real SQLite
database, the store's own functions)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from services.inbox_api import store
from shared.db import make_engine
from shared.inbox import Overdue
from tests.inbox_items import draft_item


@pytest.mark.parametrize("sort", ["oldest", "newest", "priority"])
@pytest.mark.parametrize("limit", [1, 2, 3, 7])
def test_pages_list_overdue_items_first_and_every_item_once(
    tmp_path: Path, sort: str, limit: int
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}")
    store.create_tables(engine)
    start = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
    items = [draft_item(f"T{n}", created_at=start + dt.timedelta(minutes=n)) for n in range(7)]
    for item in items:
        store.project(engine, item)
    late = {"T1", "T4", "T5"}
    for item in items:
        if item.thread in late:
            notice = Overdue(
                item_id=item.id,
                thread=item.thread,
                version=1,
                day=dt.date(2026, 12, 1),
                at=dt.datetime.now(dt.UTC),
            )
            assert store.mark_overdue(engine, notice)
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        page, cursor = store.list_items(engine, sort=sort, cursor=cursor, limit=limit)  # type: ignore[arg-type]
        assert len(page) <= limit
        seen += [i["thread"] for i in page]
        if cursor is None:
            break
    engine.dispose()
    assert sorted(seen) == sorted(i.thread for i in items)  # each once, none lost
    assert set(seen[:3]) == late  # overdue first
