"""Text search over the inbox (summary, description, ticket id; any substring, any case) that
stays fast at a year's volume, with an index of trigrams on each database.

- SQLite: an FTS5 table with the trigram tokenizer (`inbox_search`: the item's id and its
  searchable text), written with each item; its `LIKE` is answered from the index. A term found
  in fewer than `FEW` items is looked up there; a common one is found faster by walking the
  list in its order and testing each row (the first page's worth turns up within a few hundred
  rows), so that is what happens for it.
- PostgreSQL: a GIN index of the same text with `pg_trgm` (installed in `public` when the
  database allows it); the planner chooses between it and walking the list by itself.

Terms shorter than three characters have no trigram: they are always found by walking. Where
neither index can be made, search still works, by walking.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import func, literal, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, col

from .tables import ItemRow

log = logging.getLogger(__name__)

TABLE = "inbox_search"
PG_INDEX = "ix_inbox_items_search_trgm"
FEW = 2000  # fewer matches than this: from the index; more: by walking the list

_ready: dict[int, bool] = {}  # id(engine): the index exists there


def searchable(indexed: bool = True) -> Any:
    """The text a search looks in, as SQL: as the PostgreSQL index is built on it, or (not
    `indexed`) in an order no index is built on, so that the rows a query has are read."""
    first, second = (ItemRow.summary, ItemRow.description)
    if not indexed:
        first, second = second, first
    return func.lower(
        func.coalesce(col(first), "")
        + literal(" ")
        + func.coalesce(col(second), "")
        + literal(" ")
        + func.coalesce(col(ItemRow.ticket_id), "")
    )


def body_of(row: ItemRow) -> str:
    return " ".join(x for x in (row.summary, row.description, row.ticket_id) if x)


def create(engine: Engine) -> None:
    """Make the index (and fill it from the items there are), once per database."""
    try:
        if engine.dialect.name == "sqlite":
            _create_sqlite(engine)
        elif engine.dialect.name == "postgresql":
            _create_postgresql(engine)
        else:
            return
    except DBAPIError as exc:  # no FTS5 or no pg_trgm here: search walks the list
        log.warning("no text-search index (%s): searching reads the list", exc.orig)
        _ready[id(engine)] = False
        return
    _ready[id(engine)] = True


def _create_sqlite(engine: Engine) -> None:
    with engine.begin() as connection:
        exists = connection.execute(
            text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name"),
            {"name": TABLE},
        ).first()
        if exists:
            return
        connection.execute(
            text(
                f"CREATE VIRTUAL TABLE {TABLE} USING fts5("
                "item_id UNINDEXED, body, tokenize = 'trigram')"
            )
        )
        connection.execute(  # the items there were before the index
            text(
                f"INSERT INTO {TABLE} (item_id, body) SELECT id, "
                "trim(coalesce(summary, '') || ' ' || coalesce(description, '') || ' ' "
                "|| coalesce(ticket_id, '')) FROM inbox_items"
            )
        )


def _create_postgresql(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
    expression = (
        "lower(coalesce(summary, '') || ' ' || coalesce(description, '') || ' ' "
        "|| coalesce(ticket_id, ''))"
    )
    with engine.begin() as connection:
        connection.execute(
            text(
                f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON inbox_items "
                f"USING gin (({expression}) public.gin_trgm_ops)"
            )
        )


def _indexed(session: Session | Connection) -> bool:
    """Whether this SQLite database has the index (looked up once per engine)."""
    bind = session.engine if isinstance(session, Connection) else session.get_bind()
    found = _ready.get(id(bind))
    if found is None:
        found = _ready[id(bind)] = bool(
            session.execute(
                text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name"),
                {"name": TABLE},
            ).first()
        )
    return found


_ADD = text(f"INSERT INTO {TABLE} (item_id, body) VALUES (:id, :body)")


def add(connection: Connection, row: ItemRow) -> None:
    """Index a new item, in the transaction that stores it (SQLite; PostgreSQL indexes the
    row itself)."""
    if connection.dialect.name == "sqlite" and _indexed(connection):
        connection.execute(_ADD, {"id": row.id, "body": body_of(row)})


def remove(session: Session, item_ids: list[str]) -> None:
    """Take archived items out of the index, in the transaction that deletes them (SQLite)."""
    if session.get_bind().dialect.name == "sqlite" and _indexed(session):
        session.execute(
            text(f"DELETE FROM {TABLE} WHERE item_id IN (SELECT value FROM json_each(:ids))"),
            {"ids": json.dumps(item_ids)},
        )


def condition(session: Session, term: str, narrow: bool = False) -> Any:
    """The WHERE clause for items whose text contains `term` (any case). `narrow`: the other
    filters leave few rows (what waits), which are then read rather than the index (on
    PostgreSQL the planner would take the index for a common term: slower there)."""
    literal_term = not any(c in term for c in "%_\\")
    pattern = f"%{term.lower()}%"
    text_of = searchable(indexed=not narrow)
    walk = (
        text_of.like(pattern) if literal_term else text_of.contains(term.lower(), autoescape=True)
    )
    if narrow:
        return walk
    if (
        session.get_bind().dialect.name != "sqlite"
        or len(term) < 3
        or not literal_term  # the index's LIKE takes no ESCAPE
        or not _indexed(session)
    ):
        return walk
    found = session.execute(
        text(f"SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE body LIKE :pattern LIMIT {FEW})"),
        {"pattern": pattern},
    ).scalar_one()
    if found >= FEW:
        return walk  # common: the list's own order finds a page of it soonest
    matching = select(text("item_id")).select_from(text(TABLE))
    matching = matching.where(text("body LIKE :pattern").bindparams(pattern=pattern))
    return col(ItemRow.id).in_(matching)
