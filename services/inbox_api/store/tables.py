"""The inbox's tables: items projected from `inbox.item`, the decisions on them (the trail), the
supervisors notified about their tickets, the web sessions, the standing instructions, the
auto-send trail, the reviewers' claims and the notices for the notifier; and the statuses an
item goes through."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from sqlalchemy import JSON, Column, DateTime, Index, UniqueConstraint
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from shared import clock
from shared.db import add_missing_columns, add_missing_indexes

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


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def as_utc(value: dt.datetime | None) -> dt.datetime | None:
    """A stored time as an aware UTC one (SQLite gives it back naive)."""
    if value is None:
        return None
    return clock.aware(value)


class ItemRow(SQLModel, table=True):
    __tablename__ = "inbox_items"
    # what the list's queries walk, newest or oldest first, at a year's volume (benchmarks/inbox)
    __table_args__ = (
        UniqueConstraint("thread", "version", name="uq_inbox_item_version"),
        Index("ix_inbox_items_status_created", "status", "created_at", "id"),
        Index("ix_inbox_items_queue_created", "queue", "created_at", "id"),
        Index("ix_inbox_items_category_created", "category", "created_at", "id"),
        Index("ix_inbox_items_priority_created", "priority", "created_at", "id"),
        Index("ix_inbox_items_status_near", "status", "near_at"),
        Index("ix_inbox_items_ticket", "ticket_id"),
        Index("ix_inbox_items_updated", "updated_at"),  # the archive's (store/archive.py)
    )

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
    citations: list[dict[str, Any]] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )  # the knowledge-base passages the draft relies on
    # what the draft learned from reviewers: its category's standing instructions, and the past
    # rounds (`<ticket>/<round>`) whose sent replies it was shown
    instructions: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    examples: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # auto-send: sent by the category's policy; a sample waits for a person's audit
    auto: bool | None = None
    audit: str | None = Field(default=None, index=True)  # waiting | fine | edited
    audit_by: str | None = None
    audit_note: str | None = None
    # the audit told to the drafter (`inbox.audited`): False until the broker has it (the relay
    # publishes it once the reply is sent); None: no audit yet, or audited before it was told
    audit_published: bool | None = Field(default=None, index=True)
    audited_at: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    # queues and service levels: the queue routing put it in; when its round's clock started
    # (the round's first draft), and when it nears and passes its target (None: no target)
    queue: str | None = Field(default=None, index=True)
    waiting_since: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    near_at: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True, index=True)
    )
    due_at: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    # why there is no draft (the model failed on this ticket): a person writes the reply
    no_draft: str | None = None


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
    auto: bool | None = None  # recorded by the auto-send policy (reviewer AUTO_SEND)
    # an auto decision: the ids of the (admin-approved) standing instructions the draft was given
    instructions: list[int] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class NotificationRow(SQLModel, table=True):
    """A supervisor notified about a ticket (notify.sent / notify.failed), shown on its items."""

    __tablename__ = "inbox_notifications"

    id: str = Field(primary_key=True)  # the result event id
    ticket_id: str = Field(index=True)
    type: str
    channel: str | None = None
    at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    # what it was about: the routed event's type (an urgent ticket), or sla.near / sla.past
    about: str | None = None


class SessionRow(SQLModel, table=True):
    """A web session: the sha256 of its id (only the cookie holds the id itself), the digest of
    the token it was opened with (its role is looked up again on every request), when it
    began, and a one-time message for the next page."""

    __tablename__ = "inbox_sessions"

    key: str = Field(primary_key=True, max_length=64)
    token_sha256: str = Field(max_length=64)
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    flash: str | None = None


class InstructionRow(SQLModel, table=True):
    """A standing instruction for a category: learned from feedback that recurred across
    tickets, or written by a reviewer; edited and removed by reviewers (a removed one is kept,
    so the same feedback does not bring it back)."""

    __tablename__ = "inbox_instructions"

    id: int | None = Field(default=None, primary_key=True)
    category: str = Field(index=True)
    text: str
    # active | pending (new in a category with auto-send on: waits for an admin) | removed
    status: str = Field(default="active", index=True)
    origin: str = "learned"  # learned (from recurring feedback) | written (by a reviewer)
    # the feedback it was learned from: [{ticket, item_id, reviewer, feedback, at}], oldest first
    evidence: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    updated_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    updated_by: str | None = None  # the reviewer who last edited or removed it
    # the admin who approved `text` as it reads now (None: no admin has): with auto-send on for
    # its category, only approved instructions reach drafts
    approved_by: str | None = None
    approved_at: dt.datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    proposed: str | None = None  # a reviewer's edit waiting for an admin; `text` stays in force


class AutoSendRow(SQLModel, table=True):
    """The auto-send trail: every time a category was enabled, disabled or demoted, by whom,
    and on what evidence. A category's state is its newest row."""

    __tablename__ = "inbox_autosend"

    id: int | None = Field(default=None, primary_key=True)
    category: str = Field(index=True)
    action: str  # enabled | disabled | demoted
    at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    by: str  # a reviewer's name, or AUTO_SEND for a demotion
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class ClaimRow(SQLModel, table=True):
    """Who is working on a conversation's waiting draft, and until when (one row a thread: a
    redraft stays with the reviewer who asked for it). Past `until`, it holds nobody."""

    __tablename__ = "inbox_claims"

    thread: str = Field(primary_key=True)
    item_id: str  # the item it was claimed on
    reviewer: str
    since: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))
    until: dt.datetime = Field(sa_column=Column(DateTime(timezone=True)))


class ClaimEventRow(SQLModel, table=True):
    """The claims trail: claimed, taken over, released (or ended by a decision), expired."""

    __tablename__ = "inbox_claim_events"

    id: int | None = Field(default=None, primary_key=True)
    thread: str = Field(index=True)
    item_id: str
    reviewer: str  # who claimed, took over or released; for `expired`, whose claim it was
    action: str  # claimed | taken over | released | decided | expired
    previous: str | None = None  # a take-over: whose claim it ended
    at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))


class NoticeRow(SQLModel, table=True):
    """A notice for the notifier: a service-level escalation (once per threshold per round of a
    conversation: the UNIQUE key) or a queue's digest (once per queue per slot); published to
    `inbox.notice` by the relay until the broker has it."""

    __tablename__ = "inbox_notices"

    # the idempotency key, also the message id on the bus: `sla.near:<thread>:<round>`,
    # `sla.past:<thread>:<round>` or `digest:<queue>:<slot>`
    id: str = Field(primary_key=True)
    kind: str
    queue: str | None = None
    item_id: str | None = Field(default=None, index=True)
    body: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), index=True))
    published: bool = Field(default=False, index=True)


TABLES = [
    ItemRow.__table__,  # type: ignore[attr-defined]
    DecisionRow.__table__,  # type: ignore[attr-defined]
    NotificationRow.__table__,  # type: ignore[attr-defined]
    SessionRow.__table__,  # type: ignore[attr-defined]
    InstructionRow.__table__,  # type: ignore[attr-defined]
    AutoSendRow.__table__,  # type: ignore[attr-defined]
    ClaimRow.__table__,  # type: ignore[attr-defined]
    ClaimEventRow.__table__,  # type: ignore[attr-defined]
    NoticeRow.__table__,  # type: ignore[attr-defined]
]


def create_tables(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine, tables=TABLES)
    add_missing_columns(engine, TABLES)
    add_missing_indexes(engine, TABLES)
    from . import search  # the text-search index (after the tables it indexes)

    search.create(engine)
