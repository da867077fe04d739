"""The inbox contracts: items for review and the decisions on them.

An item follows the Agent Inbox `HumanInterrupt` shape (`action_request {action, args}`,
`config {allow_*}`, `description`) plus our own fields; a decision follows `HumanResponse`
(`type` accept | edit | response | ignore, `args`) plus the reviewer and the item version.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from .helpdesk.base import Customer, Message

SEND_REPLY = "send_reply"
NOTIFY_SUPERVISOR = "notify_supervisor"

DecisionType = Literal["accept", "edit", "response", "ignore"]
DECISION_TYPES: tuple[DecisionType, ...] = get_args(DecisionType)

# What an item is about: a draft has one of the categories the model chooses from (the Draft's
# schema), a supervisor notification is an ESCALATION. The metrics have a series per category
# from the start.
Category = Literal["refund", "billing", "invoice", "bug", "account", "other"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
ESCALATION = "escalation"


class ActionRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: str
    args: dict[str, Any] = Field(default_factory=dict)


class InterruptConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    allow_ignore: bool = True
    allow_respond: bool = False
    allow_edit: bool = False
    allow_accept: bool = False

    def allows(self, kind: DecisionType) -> bool:
        return {
            "accept": self.allow_accept,
            "edit": self.allow_edit,
            "response": self.allow_respond,
            "ignore": self.allow_ignore,
        }[kind]


DRAFT_CONFIG = InterruptConfig(
    allow_ignore=True, allow_respond=True, allow_edit=True, allow_accept=True
)
# an escalation: a supervisor acknowledges it, or takes it and writes the reply themselves
NOTIFY_CONFIG = InterruptConfig(allow_ignore=True, allow_edit=True)
# no draft (the model failed on this ticket): a person writes the reply (edit), or asks the model
# to try again with what they say (respond); nothing to accept
WRITE_CONFIG = InterruptConfig(allow_ignore=True, allow_respond=True, allow_edit=True)


# A work queue's name (routing rules put work in one; reviewers belong to queues).
QUEUE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"


class Trigger(BaseModel):
    """The work that started a round: the event, and where the WORK stream holds the router's
    message about it (`work_seq`). Auto-send reads that message itself and believes it, not
    these fields (services/inbox_api/provenance.py)."""

    model_config = ConfigDict(frozen=True)

    source: str
    type: str
    event_id: str
    queue: str | None = Field(default=None, pattern=QUEUE_PATTERN)  # the router's queue for it
    work_seq: int | None = Field(default=None, ge=1, lt=2**63)  # its WORK stream sequence


class Cost(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0


class Citation(BaseModel):
    """A knowledge-base passage the draft relies on, shown to the reviewer beside it."""

    model_config = ConfigDict(frozen=True)

    article: str  # the article's id (its file name without .md)
    title: str
    section: str = ""
    passage: str
    url: str | None = None


class InboxItem(BaseModel):
    """What a reviewer sees; one per thread version."""

    model_config = ConfigDict(frozen=True)

    # Agent Inbox HumanInterrupt
    action_request: ActionRequest
    config: InterruptConfig
    description: str | None = None
    # ours
    id: str
    thread: str
    version: int = Field(ge=1)
    ticket_id: str | None = None
    category: str | None = None
    summary: str | None = None
    trigger: Trigger
    created_at: dt.datetime
    cost: Cost = Field(default_factory=Cost)
    warnings: list[str] = Field(default_factory=list)
    feedback: list[str] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)  # the knowledge it relied on
    # what it learned from reviewers: the standing instructions of its category it was given,
    # and the past rounds (`<ticket>/<round>`) whose sent replies it was shown as examples
    instructions: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    # the conversation this draft answers
    round: str = "r1"  # the round id: the newest customer message answered, or followup-<date>
    round_kind: Literal["answer", "followup"] = "answer"
    round_messages: list[str] = Field(default_factory=list)  # ids of the messages answered
    seen_through: str | None = None  # the newest message of the conversation when drafted
    cause: str | None = None  # why this version exists: feedback, the customer wrote again, …
    conversation: list[Message] = Field(default_factory=list)  # oldest first
    customer: Customer | None = None
    ticket_status: str | None = None
    priority: str | None = None
    in_helpdesk: bool = True  # False for a mail conversation: there is no ticket to re-read
    # why there is no draft (the model failed on this ticket): a person writes the reply
    no_draft: str | None = None


class Withdrawal(BaseModel):
    """The drafter takes a waiting draft back: nobody may decide it any more."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    thread: str
    round: str
    version: int = Field(ge=1)
    ticket_id: str | None = None
    reason: str
    at: dt.datetime
    ticket_status: str | None = None  # the ticket's status now (closed, pending, …)


class Overdue(BaseModel):
    """The stale scan found a ticket whose draft still waits: mark it, add nothing."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    thread: str
    version: int = Field(ge=1)
    ticket_id: str | None = None
    day: dt.date
    at: dt.datetime


NoticeKind = Literal["sla.near", "sla.past", "digest"]
NOTICE_KINDS: tuple[NoticeKind, ...] = get_args(NoticeKind)


class QueueSummary(BaseModel):
    """What waits in one queue (`queue` None: work no rule put in a queue)."""

    model_config = ConfigDict(frozen=True)

    queue: str | None = None
    waiting: int = Field(ge=0)
    near: int = Field(default=0, ge=0)  # nearing their target
    past: int = Field(default=0, ge=0)  # past it
    oldest_seconds: float = Field(default=0.0, ge=0)


class Notice(BaseModel):
    """The inbox asks the notifier to tell the team something: an item nears or passed its
    service-level target (once per threshold per round), or a queue's digest (once per slot).
    Its `id` is its idempotency key. Names only: never a customer's address."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1, max_length=300)
    kind: NoticeKind
    at: dt.datetime
    queue: str | None = Field(default=None, pattern=QUEUE_PATTERN)
    item_id: str | None = None
    ticket_id: str | None = None
    priority: str | None = None
    category: str | None = None
    customer: str | None = None  # the customer's name
    summary: str | None = None
    due_at: dt.datetime | None = None
    mention: list[str] = Field(default_factory=list)  # Slack member ids to mention
    digest: QueueSummary | None = None


AuditVerdict = Literal["fine", "edited"]


class Audited(BaseModel):
    """A person audited an auto-sent reply: `fine` (it may be an example for later drafts) or
    `edited` (it needed changes). The inbox alone publishes it; the drafter believes no more of
    it than its own record of the auto-sent reply (`item_id`, `round`, `version`) confirms."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    thread: str
    round: str
    version: int = Field(ge=1)
    verdict: AuditVerdict
    at: dt.datetime


class Decision(BaseModel):
    """A reviewer's answer to one item version (Agent Inbox HumanResponse plus our fields)."""

    model_config = ConfigDict(frozen=True)

    type: DecisionType
    args: Any = None  # edit: the edited ActionRequest; response: the feedback text
    item_id: str
    thread: str
    version: int = Field(ge=1)
    reviewer: str
    decided_at: dt.datetime
    round: str = "r1"
    auto: bool = False  # sent by the category's auto-send policy, not by a person (AUTO_SEND)


AUTO_SEND = "auto-send"  # the reviewer an auto-sent decision is recorded as


def item_id(thread: str, version: int) -> str:
    """Versions count up across a thread's rounds, so this is unique for the whole ticket."""
    return f"{thread}~v{version}"


# What an edit may change: the text (and the subject). The action, ticket and round come from
# the item, so one approval can never become a message to someone else or a second message.
EDITABLE_ARGS = frozenset({"reply", "subject"})
