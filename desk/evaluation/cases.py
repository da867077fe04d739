"""A case file: tickets with what a good draft for each would do, versioned, read from YAML."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared import evidence
from shared.errors import first_error
from shared.inbox import CATEGORIES

from .errors import EvalError

DEMO_CASES = Path(__file__).parents[1] / "evals" / "demo.yaml"


class Said(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    author: str = Field(alias="from", pattern="^(customer|agent)$")
    text: str = Field(min_length=1)


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    subject: str
    customer: str = "Alex"
    messages: list[Said] = Field(min_length=1)
    category: str
    articles: list[str] | None = None  # []: no article applies; left out: not known
    must: list[str] = Field(default_factory=list)
    must_not: list[str] = Field(default_factory=list)
    reference: str | None = None  # the reply a reviewer sent (cases from the review log)

    @field_validator("category")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}")
        return value

    @field_validator("must", "must_not")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for criterion in value:
            if criterion.startswith("re:"):
                try:
                    re.compile(criterion[3:])
                except re.error as exc:
                    raise ValueError(f"{criterion!r} is no regular expression: {exc}") from None
        return value

    def ticket(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ticket as the drafter reads it, and the round its reply answers (the customer
        messages after the last agent message)."""
        start = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)
        messages = [
            {
                "id": f"{self.id}-m{n}",
                "author": said.author,
                "author_name": self.customer if said.author == "customer" else "Support",
                "body": said.text.strip(),
                "created_at": (start + dt.timedelta(hours=n)).isoformat(),
            }
            for n, said in enumerate(self.messages, start=1)
        ]
        answering: list[str] = []
        for m in reversed(messages):
            if m["author"] != "customer":
                break
            answering.insert(0, m["id"])
        ticket = {
            "id": self.id,
            "subject": self.subject,
            "body": messages[0]["body"],
            "status": "open",
            "priority": "normal",
            "customer": {"id": "C-eval", "name": self.customer},
            "messages": messages,
        }
        return ticket, {"kind": "answer", "messages": answering}


class CaseFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    name: str
    cases: list[Case] = Field(min_length=1)
    sha256: str = Field(default="", exclude=True)  # of the file as read (`sha256sum`)


def load(path: Path) -> CaseFile:
    try:
        data = path.read_bytes()
        raw = yaml.safe_load(data.decode("utf-8"))
    except OSError as exc:
        raise EvalError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise EvalError(f"{path} is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise EvalError(f"{path} is not YAML: {exc}") from None
    try:
        found = CaseFile.model_validate(raw)
    except ValidationError as exc:
        raise EvalError(f"{path}: {first_error(exc, '')}") from None
    seen: set[str] = set()
    for case in found.cases:
        if case.id in seen:
            raise EvalError(f"{path}: two cases have the id {case.id!r}")
        seen.add(case.id)
    found.sha256 = evidence.digest(data)
    return found
