"""The inbox list: filtered, sorted, and paged by cursors the API gives out."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import and_, not_, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from shared import cursor

from . import claims, search
from .documents import item_json
from .errors import Invalid
from .tables import PRIORITIES, ClaimRow, ItemRow, now


def encode_cursor(created_at: dt.datetime, item_id: str) -> str:
    return cursor.encode(created_at, item_id)


def decode_cursor(given: str) -> tuple[dt.datetime, str]:
    try:
        return cursor.decode(given)
    except ValueError:
        raise Invalid("cursor is not one this API gave out") from None


@dataclass(frozen=True)
class Mine:
    """ "Mine": the items of a reviewer's queues, and those they have claimed."""

    reviewer: str
    queues: tuple[str, ...] = ()


@dataclass(frozen=True)
class Filter:
    status: str | None = None
    category: str | None = None
    source: str | None = None
    text: str | None = None
    priority: str | None = None
    queue: str | None = None
    mine: Mine | None = None


def list_items(
    engine: Engine,
    *,
    status: str | None = None,
    category: str | None = None,
    source: str | None = None,
    text: str | None = None,
    priority: str | None = None,
    queue: str | None = None,
    mine: Mine | None = None,
    sort: Literal["oldest", "newest", "priority"] = "oldest",
    cursor: str | None = None,
    limit: int = 50,
) -> tuple[list[dict[str, Any]], str | None]:
    """Waiting items that need attention first (overdue, or nearing or past their target);
    then by age (or by priority, urgent first, then age)."""
    where = Filter(status, category, source, text, priority, queue, mine)
    matches = None
    if text:
        with Session(engine) as session:  # what waits is few: read it, not the index
            matches = search.condition(session, text, narrow=status == "waiting")
    if sort == "priority":
        return _by_priority(engine, where, cursor, limit, matches)
    # two sections, each paged by (created_at, id): items that need attention, then the rest; a
    # cursor into the first section says so ("o:"), and its last page runs on into the rest
    if cursor == "r:":  # the rest, from its start
        cursor = ""
    overdue_cursor = cursor[2:] if cursor and cursor.startswith("o:") else None
    base = _filtered(select(ItemRow), where, matches)
    late = _late(now())
    found: list[dict[str, Any]] = []
    if where.status not in (None, "waiting"):  # only what waits can need attention
        return _plain_list(engine, base, sort, overdue_cursor or cursor or None, limit)
    if cursor is None or (cursor and overdue_cursor is not None):
        overdue = base.where(late)
        found, after = _plain_list(engine, overdue, sort, overdue_cursor or None, limit)
        if after is not None:
            return found, "o:" + after
        cursor = None
    rest = base.where(not_(late))
    more, next_cursor = _plain_list(engine, rest, sort, cursor, limit - len(found))
    if limit - len(found) <= 0:  # the overdue section filled this page exactly
        return found, _first_cursor(engine, rest)
    return found + more, next_cursor


def with_claims(engine: Engine, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`items` (from `list_items`), each waiting one with who has claimed it (`claimed_by`;
    None: nobody)."""
    with Session(engine) as session:
        waiting = [i["thread"] for i in items if i["status"] == "waiting"]
        held = claims.live(session, waiting, now())
    for item in items:
        claim = held.get(item["thread"]) if item["status"] == "waiting" else None
        item["claimed_by"] = claim.reviewer if claim is not None else None
    return items


def _first_cursor(engine: Engine, query: Any) -> str | None:
    """A cursor that starts a section at its beginning, if the section has anything."""
    with Session(engine, expire_on_commit=False) as session:
        exists = session.exec(query.limit(1)).first()
    return "r:" if exists is not None else None


def _late(at: dt.datetime) -> Any:
    """Needs attention: waiting, and marked overdue by the stale scan or near its target."""
    return and_(  # never NULL: a row is in exactly one of the two sections
        col(ItemRow.status) == "waiting",
        or_(
            col(ItemRow.overdue_since).is_not(None),
            and_(col(ItemRow.near_at).is_not(None), col(ItemRow.near_at) <= at),
        ),
    )


def _filtered(query: Any, where: Filter, matches: Any = None) -> Any:
    """`query` narrowed to `where`; `matches`: the text search's clause (`search.condition`)."""
    status, category, source, text, priority = (
        where.status,
        where.category,
        where.source,
        where.text,
        where.priority,
    )
    if where.queue:
        query = query.where(ItemRow.queue == where.queue)
    if where.mine is not None:
        held = select(ClaimRow.thread).where(
            ClaimRow.reviewer == where.mine.reviewer, col(ClaimRow.until) > now()
        )
        query = query.where(
            or_(col(ItemRow.queue).in_(where.mine.queues), col(ItemRow.thread).in_(held))
        )
    if status:
        query = query.where(ItemRow.status == status)
    if priority:
        query = query.where(ItemRow.priority == priority)
    if category:
        query = query.where(ItemRow.category == category)
    if source:
        query = query.where(ItemRow.trigger_source == source)
    if text:
        query = query.where(
            matches
            if matches is not None
            else search.searchable().contains(text.lower(), autoescape=True)
        )
    return query


def _plain_list(
    engine: Engine, query: Any, sort: str, cursor: str | None, limit: int
) -> tuple[list[dict[str, Any]], str | None]:
    if limit <= 0:
        return [], None
    created, ident = col(ItemRow.created_at), col(ItemRow.id)
    if cursor:
        after_time, after_id = decode_cursor(cursor)
        if sort == "oldest":
            query = query.where(
                or_(created > after_time, (created == after_time) & (ident > after_id))
            )
        else:
            query = query.where(
                or_(created < after_time, (created == after_time) & (ident < after_id))
            )
    order = (created.asc(), ident.asc()) if sort == "oldest" else (created.desc(), ident.desc())
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(query.order_by(*order).limit(limit + 1)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = encode_cursor(rows[-1].created_at, rows[-1].id) if more and rows else None
    return [item_json(r) for r in rows], next_cursor


def _by_priority(
    engine: Engine, where: Filter, cursor: str | None, limit: int, matches: Any = None
) -> tuple[list[dict[str, Any]], str | None]:
    """Urgent first (those needing attention first within each priority), then oldest first.

    Keyset paging by sections, as the plain list: one section per priority and attention (an
    unknown priority last), each walked by (created_at, id); the cursor `k:<section>:<key>` says
    where the last page stopped, so an item arriving meanwhile never shifts the next page."""
    sections = _priority_sections(where)
    start, after = 0, None
    if cursor:
        section, sep, within = cursor[2:].partition(":")
        if not cursor.startswith("k:") or not sep or not section.isdigit():
            raise Invalid("cursor is not one this API gave out")
        start, after = int(section), within or None
        if start >= len(sections):
            raise Invalid("cursor is not one this API gave out")
    base = _filtered(select(ItemRow), where, matches)
    late = _late(now())
    found: list[dict[str, Any]] = []
    for n in range(start, len(sections)):
        query = _in_section(base, sections[n], late)
        rows, stop = _plain_list(
            engine, query, "oldest", after if n == start else None, limit - len(found)
        )
        found += rows
        if stop is not None:
            return found, f"k:{n}:{stop}"
        if len(found) >= limit:  # filled exactly at a section's end: does anything follow?
            for m in range(n + 1, len(sections)):
                if _first_cursor(engine, _in_section(base, sections[m], late)):
                    return found, f"k:{m}:"
            return found, None
    return found, None


def _priority_sections(where: Filter) -> list[tuple[str | None, bool]]:
    """(priority, needs attention) in the order the priority sort lists them; None: any other
    priority, or none. Only what waits can need attention."""
    priorities: list[str | None] = [*PRIORITIES, None]
    if where.priority:
        priorities = [where.priority]
    lateness = [True, False] if where.status in (None, "waiting") else [False]
    return [(p, is_late) for p in priorities for is_late in lateness]


def _in_section(query: Any, section: tuple[str | None, bool], late: Any) -> Any:
    priority, is_late = section
    if priority is None:
        column = col(ItemRow.priority)
        query = query.where(or_(column.is_(None), column.not_in(PRIORITIES)))
    else:
        query = query.where(ItemRow.priority == priority)
    return query.where(late if is_late else not_(late))
