"""What the inbox API answers, as models: /openapi.json takes its response schemas from them
(`openapi.answer(description, Model)`), and the API's tests hold real answers to them."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from shared.inbox import DECISION_TYPES

from .store import STATUSES

Share = float | None  # a fraction 0-1, or null when there is nothing to divide by


class Closed(BaseModel):
    """A model whose answers have exactly these fields."""

    model_config = ConfigDict(extra="forbid")


class Error(Closed):
    error: str


class Customer(BaseModel):
    id: str | None = None
    name: str | None = None
    email: str | None = None


class ServiceLevel(BaseModel):
    """Where an item stands against its target time to a decision; `standing` is null once it
    no longer waits."""

    standing: Literal["ok", "near", "past"] | None = None
    waiting_since: dt.datetime | None = None
    near_at: dt.datetime | None = None
    due_at: dt.datetime | None = None


class Citation(BaseModel):
    article: str = Field(description="the article's id")
    title: str
    section: str | None = None
    passage: str
    url: str | None = None


class Message(BaseModel):
    id: str | None = None
    author: Literal["customer", "agent", "note"] | None = None
    author_name: str | None = None
    body: str | None = None
    created_at: dt.datetime | None = None


class Item(BaseModel):
    """An item: one version of a thread's draft, or a notification for a person. Its detail
    also carries its versions, feedback, decisions and result."""

    model_config = ConfigDict(extra="allow")

    id: str
    thread: str
    version: int
    status: Literal[STATUSES]  # type: ignore[valid-type]
    action_request: dict[str, Any]
    config: dict[str, Any]
    round: str | None = None
    round_kind: Literal["answer", "followup"] | None = None
    cause: str | None = None
    priority: str | None = None
    ticket_status: str | None = None
    customer: Customer | None = None
    round_messages: list[str] = []
    overdue_since: dt.date | None = None
    queue: str | None = Field(None, description="the review queue a routing rule put the work in")
    service_level: ServiceLevel | None = Field(
        None, description="where the item stands against its target (null: no target applies)"
    )
    withdrawn_reason: str | None = None
    trace_id: str | None = Field(
        None,
        description="the W3C trace the item belongs to: `desk trace <trace_id>` prints its "
        "path from the webhook to the result",
    )
    auto: bool = Field(
        False, description="decided by the category's auto-send policy, not by a person"
    )
    audit: Literal["waiting", "fine", "edited"] | None = Field(
        None, description="an auto-sent reply sampled for a person's audit, and its verdict"
    )
    instructions: list[str] = Field(
        [], description="the standing instructions of its category the draft was given"
    )
    examples: list[str] = Field(
        [],
        description="the past rounds (<ticket>/<round>) whose sent replies the draft was shown "
        "as examples",
    )
    no_draft: str | None = Field(
        None,
        description="why there is no draft (the model failed on this ticket): a person writes "
        "the reply (edit) or asks for another try (response); no accept",
    )
    citations: list[Citation] = Field(
        [], description="the knowledge-base passages the draft relies on"
    )
    conversation: list[Message] = Field(
        [], description="the ticket's messages, oldest first (item detail only)"
    )
    ticket_url: str | None = None


class ModelState(Closed):
    """Whether the model drafts: while it is down (`up` false), drafts are delayed; `since` and
    `reason` say since when and why."""

    up: bool
    since: dt.datetime | None = None
    reason: str | None = None


class ItemPage(Closed):
    items: list[Item]
    next_cursor: str | None = None
    model: ModelState | None = None


class Decided(Closed):
    accepted: bool
    item_id: str
    type: str
    reviewer: str
    published: bool


class Claim(Closed):
    reviewer: str
    item_id: str
    since: dt.datetime
    until: dt.datetime


class Released(Closed):
    released: bool


class TimeToDecision(Closed):
    """From the item version's creation to its decision."""

    median: float | None = None
    p90: float | None = None


_Rates = create_model(  # each kind's share of the decisions
    "Rates",
    __config__=ConfigDict(extra="forbid"),
    **{kind: (Share, Field(None, ge=0, le=1)) for kind in DECISION_TYPES},  # type: ignore[call-overload]
)


class _Figures(Closed):
    decisions: int = Field(ge=0)
    rates: _Rates  # type: ignore[valid-type]
    unedited_share: Share = Field(
        ge=0, le=1, description="accepts / (accepts + edits) on reply drafts whose reply went out"
    )
    replies_sent: int = Field(ge=0, description="how many of those replies went out")
    edit_ratio: Share = Field(
        ge=0, le=1, description="mean 1 - difflib ratio between draft and sent text, by character"
    )
    changed_chars: float | None = Field(
        description="mean characters removed from the draft plus characters added"
    )
    edits_measured: int = Field(ge=0)
    time_to_decision_seconds: TimeToDecision


ReviewFigures: type[_Figures] = create_model(  # the counts of each kind, beside the figures
    "ReviewFigures",
    __base__=_Figures,
    **{kind: (int, Field(ge=0)) for kind in DECISION_TYPES},  # type: ignore[call-overload]
)


class DayFigures(ReviewFigures):  # type: ignore[valid-type,misc]
    date: dt.date


class Review(Closed):
    """What reviewers did with the drafts in the last `days` x 24 hours."""

    days: int
    since: dt.datetime
    until: dt.datetime
    overall: ReviewFigures  # type: ignore[valid-type]
    by_category: dict[str, ReviewFigures]  # type: ignore[valid-type]
    by_day: list[DayFigures] = Field(description="every UTC date the window touches, oldest first")


class Drafts(Closed):
    """Drafts made in the window, and their cost."""

    days: int
    count: int
    cost_usd: float


class OldestWaiting(Closed):
    id: str
    created_at: dt.datetime
    age_seconds: int


class Stats(Closed):
    by_status: dict[str, int]
    by_category: dict[str, int]
    oldest_waiting: OldestWaiting | None = None
    decision_mix: dict[str, dict[str, int]]
    dead_letters: int | None = None
    review: Review
    drafts: Drafts


class Instruction(Closed):
    """A standing instruction every draft of its category is given."""

    id: int
    category: str
    text: str
    status: Literal["active", "pending", "removed"] = Field(
        description="pending: new in a category with auto-send on, it reaches no draft until "
        "an admin approves it"
    )
    origin: Literal["learned", "written"] = Field(
        description="learned from feedback that recurred across tickets, or written by a reviewer"
    )
    evidence: list[dict[str, Any]] = Field(
        description="the feedback it was learned from, oldest first"
    )
    tickets: list[str]
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    updated_by: str | None = None
    approved_by: str | None = Field(
        None,
        description="the admin who approved the text as it reads now; with auto-send on for "
        "the category, only approved instructions reach its drafts",
    )
    approved_at: dt.datetime | None = None
    proposed: str | None = Field(
        None, description="an edit waiting for an admin (the text stays in force until then)"
    )


class Instructions(Closed):
    instructions: list[Instruction]
