"""Listing the inbox page by page: overdue items first, every item exactly once (a real SQLite
database, the store's own functions); and its text search, on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from services.inbox_api import store
from shared.db import make_engine
from shared.inbox import Overdue
from tests.inbox_items import draft_item
from tests.postgres import fresh_schema, url_in


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


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_the_priority_order_pages_by_key_so_an_arrival_never_repeats_or_hides_an_item(
    tmp_path: Path, limit: int
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}")
    store.create_tables(engine)
    start = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
    given = ["low", "urgent", None, "normal", "urgent", "high", "low", None, "high"]
    for n, priority in enumerate(given):
        at = start + dt.timedelta(minutes=n)
        store.project(engine, draft_item(f"T{n}", created_at=at, priority=priority))
    overdue = Overdue(item_id="T7~v1", thread="T7", version=1, day=dt.date(2026, 12, 1), at=start)
    assert store.mark_overdue(engine, overdue)  # needs attention: first among its priority
    page, cursor = store.list_items(engine, sort="priority", limit=limit)
    seen = [i["thread"] for i in page]
    # an urgent item arrives after the first page was read
    store.project(engine, draft_item("T9", created_at=start, priority="urgent"))
    for _ in range(20):
        if cursor is None:
            break
        page, cursor = store.list_items(engine, sort="priority", cursor=cursor, limit=limit)
        assert len(page) <= limit
        seen += [i["thread"] for i in page]
    engine.dispose()
    expected = ["T1", "T4", "T5", "T8", "T3", "T0", "T6", "T7", "T2"]
    assert [t for t in seen if t != "T9"] == expected  # each once, in order, none lost
    assert seen.count("T9") <= 1


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with fresh_schema() if request.param == "postgresql" else contextlib.nullcontext("") as schema:
        url = url_in(schema) if schema else f"sqlite:///{tmp_path / 'inbox.sqlite'}"
        made = make_engine(url)
        try:
            store.create_tables(made)
            yield made
        finally:
            made.dispose()


def searched(engine: Engine, term: str, **filters: str) -> set[str]:
    found: set[str] = set()
    cursor = None
    for _ in range(50):
        page, cursor = store.list_items(engine, text=term, cursor=cursor, limit=2, **filters)  # type: ignore[arg-type]
        found |= {i["thread"] for i in page}
        if cursor is None:
            return found
    raise AssertionError("the search never ended")


@pytest.mark.parametrize("few", [2000, 2])  # rare terms from the index; common ones by walking
def test_search_finds_any_substring_in_any_case_and_takes_wildcards_literally(
    engine: Engine, few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store.search, "FEW", few)
    texts = {
        "S1": "Refund for a double charge",
        "S2": "Charged twice, REFUNDS please",
        "S3": "100% off_code not applied",
        "S4": "Where is my parcel?",
    }
    for thread, summary in texts.items():
        store.project(engine, draft_item(thread).model_copy(update={"summary": summary}))
    assert searched(engine, "refund") == {"S1", "S2"}
    assert searched(engine, "ReFuNd") == {"S1", "S2"}
    assert searched(engine, "harge") == {"S1", "S2"}
    assert searched(engine, "s4") == {"S4"}  # the ticket id
    assert searched(engine, "0% off_") == {"S3"}  # % and _ are themselves
    assert searched(engine, "%") == {"S3"}
    assert searched(engine, "_") == {"S3"}
    assert searched(engine, "is") == {"S4"}  # too short for a trigram: walked
    assert searched(engine, "nothing like it") == set()
    assert searched(engine, "refund", status="sent") == set()
    assert searched(engine, "refund", status="waiting") == {"S1", "S2"}  # read, not indexed
    assert searched(engine, "0% off_", status="waiting") == {"S3"}
    assert searched(engine, "refund", category="refund") == {"S1", "S2"}
