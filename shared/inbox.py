"""The inbox contracts: items for review and the decisions on them.

An item follows the Agent Inbox `HumanInterrupt` shape (`action_request {action, args}`,
`config {allow_*}`, `description`) plus our own fields; a decision follows `HumanResponse`
(`type` accept | edit | response | ignore, `args`) plus the reviewer and the item version.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SEND_REPLY = "send_reply"
NOTIFY_SUPERVISOR = "notify_supervisor"

DecisionType = Literal["accept", "edit", "response", "ignore"]


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
NOTIFY_CONFIG = InterruptConfig(allow_ignore=True)


class Trigger(BaseModel):
    model_config = ConfigDict(frozen=True)

    source: str
    type: str
    event_id: str


class Cost(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0


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


def item_id(thread: str, version: int) -> str:
    return f"{thread}~v{version}"
