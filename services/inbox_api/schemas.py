"""Request bodies of the inbox API (their JSON schemas also feed /openapi.json)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.inbox import CATEGORIES


class EditedAction(BaseModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class DecisionRequest(BaseModel):
    """An Agent Inbox HumanResponse plus the version the reviewer saw (optional: LangChain's
    clients never send one); LangChain's human-in-the-loop words (approve, reject, respond, edit
    with edited_action) work too."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["accept", "edit", "response", "ignore", "approve", "reject", "respond"]
    args: Any = None
    version: int | None = Field(
        default=None,
        ge=1,
        description="the version the reviewer saw: a named version that is no longer current "
        "gets 409; omitted (as LangChain clients do), the version the item id names",
    )
    edited_action: EditedAction | None = None
    message: str | None = None
    take_over: bool = Field(
        default=False, description="decide an item another reviewer has claimed, ending it"
    )

    def normalized(self) -> tuple[str, Any]:
        kind = {"approve": "accept", "reject": "ignore", "respond": "response"}.get(
            self.type, self.type
        )
        args = self.args
        if kind == "response" and args is None:
            args = self.message
        if kind == "edit" and self.edited_action is not None:
            args = {"action": self.edited_action.name, "args": self.edited_action.args}
        return kind, args


class ClaimRequest(BaseModel):
    """Claim an item (or renew the claim); `take_over` takes it from another reviewer."""

    model_config = ConfigDict(extra="forbid")

    take_over: bool = False


class InstructionWrite(BaseModel):
    """A standing instruction a reviewer writes (the store checks it, and says what is wrong)."""

    category: str = Field(json_schema_extra={"enum": list(CATEGORIES)})
    text: str = Field(max_length=500)


class InstructionEdit(BaseModel):
    text: str = Field(max_length=500)


class AutosendChange(BaseModel):
    enabled: bool
    eval: dict[str, Any] | None = Field(None, description="the `desk eval --json` report")


class AuditRequest(BaseModel):
    verdict: Literal["fine", "edited"]
    note: str | None = None
