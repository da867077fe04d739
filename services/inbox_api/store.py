"""The inbox in SQL: items projected from `inbox.item`, and the decisions on them (the trail).

Idempotent projection: an item already stored, or an older version arriving after a newer
one, changes nothing that matters (the older one is kept as history, superseded). One decision
per item version, enforced by a UNIQUE constraint, so a double click decides once.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import JSON, Column, DateTime, UniqueConstraint, and_, case, func, or_
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, col, select

from shared.db import add_missing_columns
from shared.inbox import (
    EDITABLE_ARGS,
    ActionRequest,
    Decision,
    InboxItem,
    InterruptConfig,
    Overdue,
    Withdrawal,
)

from . import metrics

Status = Literal[
    "waiting", "redrafting", "sending", "sent", "failed", "withdrawn", "ignored", "superseded"
]
STATUSES: tuple[str, ...] = (
    "waiting",  # a reviewer's turn
    "redrafting",  # feedback given: the next version is being drafted
    "sending",  # accepted or edited: the sender is at work
    "sent",
    "failed",
    "withdrawn",  # the ticket closed, a person answered, or the customer wrote before delivery
    "ignored",
    "superseded",  # a newer version of the same conversation replaced it
)
OPEN_STATUSES = ("waiting", "redrafting", "sending")
PRIORITIES = ("urgent", "high", "normal", "low")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


class ItemRow(SQLModel, table=True):
    __tablename__ = "inbox_items"
    __table_args__ = (UniqueConstraint("thread", "version", name="uq_inbox_item_version"),)

    id: str = Field(primary_key=True)
    thread: str = Field(index=True)
    version: int
    status: str = Field(index=True)
    category: str | None = Field(default=None, index=True)
    ticket_id: str | None = None
    summary: str | None = None
    description: str | None = None
    action: str
    action_request: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    config: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    trigger_source: str = Field(index=True)
    trigger_type: str
    trigger_event_id: str
    cost: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    warnings: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    feedback: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    decision: str | None = None
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    updated_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    # the conversation (nullable: rows from before conversations keep working)
    round: str | None = None
    round_kind: str | None = None
    cause: str | None = None
    priority: str | None = Field(default=None, index=True)
    ticket_status: str | None = None
    customer: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    conversation: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    round_messages: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    overdue_since: dt.date | None = None
    withdrawn_reason: str | None = None
    traceparent: str | None = None  # the trace the item belongs to: its decision continues it


class DecisionRow(SQLModel, table=True):
    """The approval trail: who decided what, on which draft, when."""

    __tablename__ = "inbox_decisions"
    __table_args__ = (UniqueConstraint("thread", "version", name="uq_inbox_decision_version"),)

    id: int | None = Field(default=None, primary_key=True)
    item_id: str = Field(index=True)
    thread: str = Field(index=True)
    version: int
    type: str
    reviewer: str
    category: str | None = None
    decided_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    args: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    model_draft: str | None = None
    final_text: str | None = None
    feedback: str | None = None
    published: bool = Field(default=False, index=True)
    round: str | None = None


class NotificationRow(SQLModel, table=True):
    """A supervisor notified about a ticket (notify.sent / notify.failed), shown on its items."""

    __tablename__ = "inbox_notifications"

    id: str = Field(primary_key=True)  # the result event id
    ticket_id: str = Field(index=True)
    type: str
    channel: str | None = None
    at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))


class SessionRow(SQLModel, table=True):
    """A web session: the sha256 of its id (only the cookie holds the id itself), the digest of
    the token it was opened with (its role is looked up again on every request), when it
    began, and a one-time message for the next page."""

    __tablename__ = "inbox_sessions"

    key: str = Field(primary_key=True, max_length=64)
    token_sha256: str = Field(max_length=64)
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    flash: str | None = None


class NotFound(LookupError):
    pass


class Conflict(Exception):
    """409: the item is not waiting, or the version the reviewer saw is no longer current."""


class Invalid(ValueError):
    """422: a decision the item does not allow, or one that is incomplete."""


@dataclass(frozen=True)
class Reviewer:
    name: str
    role: Literal["reviewer", "viewer"]


TABLES = [
    ItemRow.__table__,  # type: ignore[attr-defined]
    DecisionRow.__table__,  # type: ignore[attr-defined]
    NotificationRow.__table__,  # type: ignore[attr-defined]
    SessionRow.__table__,  # type: ignore[attr-defined]
]


def create_tables(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine, tables=TABLES)
    add_missing_columns(engine, TABLES)


# -- projection --------------------------------------------------------------------------------


def project(engine: Engine, item: InboxItem, traceparent: str | None = None) -> bool:
    """Store one item version; True if it was new. Order-independent: versions of one thread
    may arrive in any order, and concurrently, and end in the same rows."""
    with Session(engine, expire_on_commit=False) as session:
        if session.get(ItemRow, item.id) is not None:
            return False
        now = _now()
        session.add(
            ItemRow(
                id=item.id,
                thread=item.thread,
                version=item.version,
                status="waiting",
                category=item.category,
                ticket_id=item.ticket_id,
                summary=item.summary,
                description=item.description,
                action=item.action_request.action,
                action_request=item.action_request.model_dump(mode="json"),
                config=item.config.model_dump(mode="json"),
                trigger_source=item.trigger.source,
                trigger_type=item.trigger.type,
                trigger_event_id=item.trigger.event_id,
                cost=item.cost.model_dump(mode="json"),
                warnings=list(item.warnings),
                feedback=list(item.feedback),
                created_at=item.created_at,
                updated_at=now,
                round=item.round,
                round_kind=item.round_kind,
                cause=item.cause,
                priority=item.priority,
                ticket_status=item.ticket_status,
                customer=item.customer.model_dump(mode="json") if item.customer else None,
                conversation=[m.model_dump(mode="json") for m in item.conversation],
                round_messages=list(item.round_messages),
                traceparent=traceparent,
            )
        )
        try:
            session.commit()
        except IntegrityError:  # another replica stored it a moment ago
            session.rollback()
            return False
    supersede_older(engine, item.thread)
    return True


def supersede_older(engine: Engine, thread: str) -> None:
    """Every version but the newest that still waits (or waits for its redraft) is superseded,
    and so is one of the newest's round that was accepted too late: the drafter and the sender
    refuse a decision on an older version of a round, so no result would ever end it (if the
    sender did act on it first, its result replaces this status).

    Run after each insert, in its own transaction, so whichever of two concurrent inserts
    commits last sees both rows."""
    with Session(engine, expire_on_commit=False) as session:
        newest = session.exec(
            select(ItemRow).where(ItemRow.thread == thread).order_by(col(ItemRow.version).desc())
        ).first()
        if newest is None:
            return
        older = session.exec(
            select(ItemRow).where(
                ItemRow.thread == thread,
                ItemRow.version < newest.version,
                or_(
                    col(ItemRow.status).in_(("waiting", "redrafting")),
                    and_(col(ItemRow.status) == "sending", col(ItemRow.round) == newest.round),
                ),
            )
        ).all()
        for old in older:
            old.status = "superseded"
            old.updated_at = _now()
            session.add(old)
        session.commit()


def set_result(engine: Engine, item_id: str, status: str, result: dict[str, Any]) -> bool:
    """Record what became of an item (sent, failed, ignored, withdrawn); False if unknown.

    A final status stays final: a late `item.withdrawn` never turns a sent reply back."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, item_id)
        if row is None:
            return False
        if row.status == status and row.result == result:
            return True
        if row.status in ("sent", "failed") and status != row.status:
            return True
        row.status = status
        row.result = result
        if status == "withdrawn":
            row.withdrawn_reason = str(result.get("reason") or "") or row.withdrawn_reason
        row.updated_at = _now()
        session.add(row)
        session.commit()
        return True


def withdraw(engine: Engine, notice: Withdrawal) -> bool:
    """The drafter took a waiting draft back: nobody may decide it; False if not projected."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, notice.item_id)
        if row is None:
            return False
        if row.status in ("waiting", "redrafting"):
            row.status = "withdrawn"
            row.withdrawn_reason = notice.reason
        elif row.status != "withdrawn":
            return True  # decided or replaced first: the notice changes nothing
        # The sender's item.withdrawn result may have come first (both follow this notice):
        # the ticket's status now is only in the notice.
        row.withdrawn_reason = row.withdrawn_reason or notice.reason
        row.ticket_status = notice.ticket_status or row.ticket_status
        row.updated_at = _now()
        session.add(row)
        session.commit()
        return True


def mark_overdue(engine: Engine, notice: Overdue) -> bool:
    """The stale scan found this draft still waiting; False if not projected yet."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, notice.item_id)
        if row is None:
            return False
        if row.overdue_since is None:
            row.overdue_since = notice.day
            row.updated_at = _now()
            session.add(row)
            session.commit()
        return True


def record_notification(engine: Engine, result_id: str, kind: str, data: dict[str, Any]) -> None:
    ticket = str(data.get("ticket_id") or "")
    if not ticket:
        return
    with Session(engine, expire_on_commit=False) as session:
        if session.get(NotificationRow, result_id) is not None:
            return
        session.add(
            NotificationRow(
                id=result_id, ticket_id=ticket, type=kind, channel=data.get("channel"), at=_now()
            )
        )
        try:
            session.commit()
        except IntegrityError:
            session.rollback()


# -- decisions ---------------------------------------------------------------------------------


def _edited_request(row: ItemRow, args: Any) -> ActionRequest:
    """Accept an Agent Inbox ActionRequest, a partial args object, or plain text.

    An edit changes the text (and the subject), never the target: the action and every other
    argument (the ticket) come from the item; trying to change them is refused (422)."""
    current = ActionRequest.model_validate(row.action_request)
    if isinstance(args, dict) and isinstance(args.get("args"), dict):
        action = args.get("action")
        if action not in (None, "", current.action):
            raise Invalid(f"an edit cannot change the action ({current.action})")
        changes = args["args"]
    elif isinstance(args, dict):
        changes = args
    elif isinstance(args, str):
        changes = {"reply": args}
    else:
        raise Invalid("an edit needs the edited action request (or the edited reply)")
    for name, value in changes.items():
        if name in EDITABLE_ARGS:
            if not isinstance(value, str):
                raise Invalid(f"{name} must be text")
            continue
        if name not in current.args or current.args[name] != value:
            raise Invalid(
                f"an edit may change only {' and '.join(sorted(EDITABLE_ARGS))}, not {name}"
            )
    return ActionRequest(action=current.action, args={**current.args, **changes})


def decide(
    engine: Engine, item_id: str, kind: str, args: Any, version: int, reviewer: Reviewer
) -> Decision:
    """Record a decision (the trail row) and return it for publishing; raises 404/409/422 kinds."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, item_id)
        if row is None:
            raise NotFound(f"no item {item_id}")
        if version != row.version:
            raise Conflict(f"you saw v{version}; this item is v{row.version}")
        if row.status != "waiting":
            latest = session.exec(
                select(func.max(ItemRow.version)).where(ItemRow.thread == row.thread)
            ).one()
            if row.status == "superseded" and latest:
                newer = session.exec(
                    select(ItemRow).where(ItemRow.thread == row.thread, ItemRow.version == latest)
                ).first()
                why = f" ({newer.cause})" if newer is not None and newer.cause else ""
                raise Conflict(f"v{row.version} was superseded by v{latest}{why}")
            if row.status == "withdrawn":
                raise Conflict(f"this draft was withdrawn: {row.withdrawn_reason or 'no reason'}")
            raise Conflict(f"this item is {row.status}, not waiting for a decision")
        config = InterruptConfig.model_validate(row.config)
        if not config.allows(kind):  # type: ignore[arg-type]
            raise Invalid(f"{kind} is not allowed on this item")
        draft = str(row.action_request.get("args", {}).get("reply") or "") or None
        final_text = feedback = None
        if kind == "edit":
            edited = _edited_request(row, args)
            final_text = str(edited.args.get("reply") or "").strip()
            if not final_text:
                raise Invalid("an edit needs a non-empty reply")
            args = edited.model_dump(mode="json")
        elif kind == "response":
            feedback = str(args or "").strip()
            if not feedback:
                raise Invalid("feedback must not be empty")
            args = feedback
        elif kind == "accept":
            final_text = draft
            args = None
        else:
            args = None
        decided_at = _now()
        session.add(
            DecisionRow(
                item_id=row.id,
                thread=row.thread,
                version=row.version,
                type=kind,
                reviewer=reviewer.name,
                category=row.category,
                decided_at=decided_at,
                args=args,
                model_draft=draft,
                final_text=final_text,
                feedback=feedback,
                round=row.round,
            )
        )
        row.status = {"ignore": "ignored", "response": "redrafting"}.get(kind, "sending")
        row.decision = kind
        row.updated_at = decided_at
        session.add(row)
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            raise Conflict("this item was decided a moment ago") from None
        metrics.DECISIONS.labels(row.category or "other", kind).inc()
        return Decision(
            type=kind,  # type: ignore[arg-type]
            args=args,
            item_id=row.id,
            thread=row.thread,
            version=row.version,
            reviewer=reviewer.name,
            decided_at=decided_at,
            round=row.round or "r1",
        )


def traceparent_of(engine: Engine, item_id: str) -> str | None:
    with Session(engine) as session:
        row = session.get(ItemRow, item_id)
        return row.traceparent if row else None


def mark_published(engine: Engine, thread: str, version: int) -> None:
    with Session(engine, expire_on_commit=False) as session:
        row = session.exec(
            select(DecisionRow).where(DecisionRow.thread == thread, DecisionRow.version == version)
        ).first()
        if row is not None and not row.published:
            row.published = True
            session.add(row)
            session.commit()


def unpublished(engine: Engine, older_than: float) -> list[Decision]:
    """Decisions recorded but not yet on the bus (a crash between commit and publish)."""
    cutoff = _now() - dt.timedelta(seconds=older_than)
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(DecisionRow).where(
                col(DecisionRow.published).is_(False), col(DecisionRow.decided_at) <= cutoff
            )
        ).all()
        return [
            Decision(
                type=r.type,  # type: ignore[arg-type]
                args=r.args,
                item_id=r.item_id,
                thread=r.thread,
                version=r.version,
                reviewer=r.reviewer,
                decided_at=_utc(r.decided_at),  # type: ignore[arg-type]
                round=r.round or "r1",
            )
            for r in rows
        ]


# -- reading -----------------------------------------------------------------------------------


def item_json(row: ItemRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "thread": row.thread,
        "version": row.version,
        "status": row.status,
        "category": row.category,
        "ticket_id": row.ticket_id,
        "summary": row.summary,
        "description": row.description,
        "action_request": row.action_request,
        "config": row.config,
        "trigger": {
            "source": row.trigger_source,
            "type": row.trigger_type,
            "event_id": row.trigger_event_id,
        },
        "cost": row.cost,
        "warnings": row.warnings,
        "feedback": row.feedback,
        "decision": row.decision,
        "result": row.result,
        "created_at": _utc(row.created_at).isoformat(),  # type: ignore[union-attr]
        "updated_at": _utc(row.updated_at).isoformat(),  # type: ignore[union-attr]
        "round": row.round,
        "round_kind": row.round_kind,
        "cause": row.cause,
        "priority": row.priority,
        "ticket_status": row.ticket_status,
        "customer": row.customer,
        "round_messages": row.round_messages or [],
        "overdue_since": row.overdue_since.isoformat() if row.overdue_since else None,
        "withdrawn_reason": row.withdrawn_reason,
    }


def detail_json(row: ItemRow) -> dict[str, Any]:
    """One item with its whole conversation (the list leaves the conversation out)."""
    detail = item_json(row)
    detail["conversation"] = row.conversation or []
    return detail


def decision_json(row: DecisionRow) -> dict[str, Any]:
    return {
        "item_id": row.item_id,
        "thread": row.thread,
        "version": row.version,
        "type": row.type,
        "reviewer": row.reviewer,
        "category": row.category,
        "decided_at": _utc(row.decided_at).isoformat(),  # type: ignore[union-attr]
        "args": row.args,
        "model_draft": row.model_draft,
        "final_text": row.final_text,
        "feedback": row.feedback,
    }


def encode_cursor(created_at: dt.datetime, item_id: str) -> str:
    raw = json.dumps([_utc(created_at).isoformat(), item_id]).encode()  # type: ignore[union-attr]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, item_id = json.loads(raw)
        return dt.datetime.fromisoformat(stamp), str(item_id)
    except (ValueError, TypeError, json.JSONDecodeError):
        raise Invalid("cursor is not one this API gave out") from None


def list_items(
    engine: Engine,
    *,
    status: str | None = None,
    category: str | None = None,
    source: str | None = None,
    text: str | None = None,
    priority: str | None = None,
    sort: Literal["oldest", "newest", "priority"] = "oldest",
    cursor: str | None = None,
    limit: int = 50,
) -> tuple[list[dict[str, Any]], str | None]:
    """Items, overdue ones first; then by age (or by priority, urgent first, then age)."""
    if sort == "priority":
        return _by_priority(engine, status, category, source, text, priority, cursor, limit)
    # two sections, each paged by (created_at, id): overdue items, then the rest; a cursor
    # into the overdue section says so ("o:"), and its last page runs on into the rest
    if cursor == "r:":  # the rest, from its start
        cursor = ""
    overdue_cursor = cursor[2:] if cursor and cursor.startswith("o:") else None
    base = _filtered(select(ItemRow), status, category, source, text, priority)
    found: list[dict[str, Any]] = []
    if cursor is None or (cursor and overdue_cursor is not None):
        overdue = base.where(col(ItemRow.overdue_since).is_not(None))
        found, after = _plain_list(engine, overdue, sort, overdue_cursor or None, limit)
        if after is not None:
            return found, "o:" + after
        cursor = None
    rest = base.where(col(ItemRow.overdue_since).is_(None))
    more, next_cursor = _plain_list(engine, rest, sort, cursor, limit - len(found))
    if limit - len(found) <= 0:  # the overdue section filled this page exactly
        return found, _first_cursor(engine, rest)
    return found + more, next_cursor


def _first_cursor(engine: Engine, query: Any) -> str | None:
    """A cursor that starts a section at its beginning, if the section has anything."""
    with Session(engine, expire_on_commit=False) as session:
        exists = session.exec(query.limit(1)).first()
    return "r:" if exists is not None else None


def _filtered(
    query: Any,
    status: str | None,
    category: str | None,
    source: str | None,
    text: str | None,
    priority: str | None,
) -> Any:
    if status:
        query = query.where(ItemRow.status == status)
    if priority:
        query = query.where(ItemRow.priority == priority)
    if category:
        query = query.where(ItemRow.category == category)
    if source:
        query = query.where(ItemRow.trigger_source == source)
    if text:
        pattern = f"%{text.lower()}%"
        query = query.where(
            or_(
                func.lower(func.coalesce(ItemRow.summary, "")).like(pattern),
                func.lower(func.coalesce(ItemRow.description, "")).like(pattern),
                func.lower(func.coalesce(ItemRow.ticket_id, "")).like(pattern),
            )
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
    engine: Engine,
    status: str | None,
    category: str | None,
    source: str | None,
    text: str | None,
    priority: str | None,
    cursor: str | None,
    limit: int,
) -> tuple[list[dict[str, Any]], str | None]:
    """Urgent first (overdue first within each priority), then oldest first; offset paging."""
    try:
        offset = int(cursor[2:]) if cursor and cursor.startswith("p:") else 0
    except ValueError:
        raise Invalid("cursor is not one this API gave out") from None
    if cursor and not cursor.startswith("p:"):
        raise Invalid("cursor is not one this API gave out")
    rank = case(
        {p: i for i, p in enumerate(PRIORITIES)},
        value=col(ItemRow.priority),
        else_=len(PRIORITIES),
    )
    query = _filtered(select(ItemRow), status, category, source, text, priority)
    query = query.order_by(
        rank,
        col(ItemRow.overdue_since).is_(None),
        col(ItemRow.created_at),
        col(ItemRow.id),
    )
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(query.offset(offset).limit(limit + 1)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    return [item_json(r) for r in rows], f"p:{offset + limit}" if more else None


def get_item(engine: Engine, item_id: str) -> dict[str, Any] | None:
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, item_id)
        if row is None:
            return None
        versions = session.exec(
            select(ItemRow).where(ItemRow.thread == row.thread).order_by(col(ItemRow.version))
        ).all()
        decisions = session.exec(
            select(DecisionRow)
            .where(DecisionRow.thread == row.thread)
            .order_by(col(DecisionRow.id))
        ).all()
        notified = (
            session.exec(
                select(NotificationRow)
                .where(NotificationRow.ticket_id == row.ticket_id)
                .order_by(col(NotificationRow.at))
            ).all()
            if row.ticket_id
            else []
        )
        detail = detail_json(row)
        detail["versions"] = [
            {
                "id": v.id,
                "version": v.version,
                "status": v.status,
                "round": v.round,
                "cause": v.cause,
                "reply": v.action_request.get("args", {}).get("reply"),
                "feedback": v.feedback,
                "created_at": _utc(v.created_at).isoformat(),  # type: ignore[union-attr]
            }
            for v in versions
        ]
        detail["decisions"] = [decision_json(d) for d in decisions]
        detail["notifications"] = [
            {
                "type": n.type,
                "channel": n.channel,
                "at": _utc(n.at).isoformat(),  # type: ignore[union-attr]
            }
            for n in notified
        ]
        return detail


def stats(engine: Engine) -> dict[str, Any]:
    with Session(engine, expire_on_commit=False) as session:
        by_status = dict(
            session.exec(select(ItemRow.status, func.count()).group_by(ItemRow.status)).all()
        )
        by_category = {
            category or "none": count
            for category, count in session.exec(
                select(ItemRow.category, func.count()).group_by(ItemRow.category)
            ).all()
        }
        oldest = session.exec(
            select(ItemRow)
            .where(ItemRow.status == "waiting")
            .order_by(col(ItemRow.created_at), col(ItemRow.id))
            .limit(1)
        ).first()
        mix: dict[str, dict[str, int]] = {}
        for category, kind, count in session.exec(
            select(DecisionRow.category, DecisionRow.type, func.count()).group_by(
                DecisionRow.category, DecisionRow.type
            )
        ).all():
            mix.setdefault(category or "none", {})[kind] = count
    oldest_json = None
    if oldest is not None:
        created = _utc(oldest.created_at)
        assert created is not None
        oldest_json = {
            "id": oldest.id,
            "created_at": created.isoformat(),
            "age_seconds": int((_now() - created).total_seconds()),
        }
    return {
        "by_status": {s: int(by_status.get(s, 0)) for s in STATUSES},
        "by_category": {k: int(v) for k, v in by_category.items()},
        "oldest_waiting": oldest_json,
        "decision_mix": mix,
    }


def waiting(engine: Engine) -> tuple[int, dt.datetime | None]:
    """How many items wait for a reviewer, and when the oldest of them was created."""
    with Session(engine, expire_on_commit=False) as session:
        count, oldest = session.exec(
            select(func.count(), func.min(ItemRow.created_at)).where(ItemRow.status == "waiting")
        ).one()
    return int(count), _utc(oldest)


def review_log(engine: Engine) -> list[dict[str, Any]]:
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(select(DecisionRow).order_by(col(DecisionRow.id))).all()
        return [decision_json(r) for r in rows]


# -- web sessions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredSession:
    token_sha256: str
    created_at: dt.datetime
    flash: str | None


def open_session(engine: Engine, key: str, token_sha256: str, now: dt.datetime) -> None:
    with Session(engine) as session:
        session.add(SessionRow(key=key, token_sha256=token_sha256, created_at=now))
        session.commit()


def find_session(engine: Engine, key: str) -> StoredSession | None:
    with Session(engine) as session:
        row = session.get(SessionRow, key)
        if row is None:
            return None
        created = _utc(row.created_at)
        assert created is not None
        return StoredSession(row.token_sha256, created, row.flash)


def close_session(engine: Engine, key: str) -> None:
    with Session(engine) as session:
        row = session.get(SessionRow, key)
        if row is not None:
            session.delete(row)
            session.commit()


def set_flash(engine: Engine, key: str, text: str | None) -> None:
    with Session(engine) as session:
        row = session.get(SessionRow, key)
        if row is not None and row.flash != text:
            row.flash = text
            session.add(row)
            session.commit()


def purge_sessions(engine: Engine, begun_before: dt.datetime) -> int:
    """Delete the sessions that began before `begun_before` (expired); how many."""
    with Session(engine) as session:
        rows = session.exec(
            select(SessionRow).where(col(SessionRow.created_at) < begun_before)
        ).all()
        for row in rows:
            session.delete(row)
        session.commit()
        return len(rows)
