"""Routing rules: pure matching of (source, type, event JSON) to targets. No I/O but loading.

Rules are data, validated at start-up; an error names the rule (its `name`, or its number).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared import jsonpath, subjects
from shared.errors import first_error
from shared.inbox import QUEUE_PATTERN, Category
from shared.settings import ConfigError, read_toml

DEFAULT_RULES = Path(__file__).with_name("rules.toml")


class Predicate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    path: str
    equals: Any = None
    in_: list[Any] | None = Field(default=None, alias="in")
    exists: bool | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        jsonpath.parts(value)  # raises ValueError on a malformed path
        return value

    @model_validator(mode="after")
    def _one_test(self) -> Predicate:
        given = [k for k in ("equals", "in_", "exists") if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError("a predicate needs exactly one of equals, in, exists")
        return self

    def holds(self, document: Any) -> bool:
        value = jsonpath.lookup(document, self.path)
        if "exists" in self.model_fields_set:
            return (value is not jsonpath.MISSING) == self.exists
        if value is jsonpath.MISSING:
            return False
        if self.in_ is not None:
            return value in self.in_
        return bool(value == self.equals)


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    types: list[str] = Field(min_length=1)
    sources: list[str] | None = None
    when: list[Predicate] = Field(default_factory=list)
    targets: list[str] = Field(min_length=1)
    # the review queue its work goes to (the first matching rule that names one decides)
    queue: str | None = Field(default=None, pattern=QUEUE_PATTERN)
    # the category its work is (the first matching rule that names one decides): auto-send
    # sends a draft only in the category the rules gave its ticket, never the model's alone
    category: Category | None = None

    @field_validator("targets")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        for target in value:
            if "." in target:
                raise ValueError(f"target {target!r} must be a single subject token")
            subjects.token(target)
        return value

    def matches(self, source: str, event_type: str, document: Any) -> bool:
        if not any(fnmatch.fnmatchcase(event_type, glob) for glob in self.types):
            return False
        if self.sources is not None and source not in self.sources:
            return False
        return all(p.holds(document) for p in self.when)


class Rules:
    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules

    def targets(self, source: str, event_type: str, document: Any) -> list[str]:
        """Every target of every matching rule, each once, in rule order."""
        found: dict[str, None] = {}
        for rule in self.rules:
            if rule.matches(source, event_type, document):
                found.update(dict.fromkeys(rule.targets))
        return list(found)

    def queue(self, source: str, event_type: str, document: Any) -> str | None:
        """The queue of the first matching rule that names one, or None."""
        for rule in self.rules:
            if rule.queue is not None and rule.matches(source, event_type, document):
                return rule.queue
        return None

    def category(self, source: str, event_type: str, document: Any) -> str | None:
        """The category of the first matching rule that names one, or None."""
        for rule in self.rules:
            if rule.category is not None and rule.matches(source, event_type, document):
                return rule.category
        return None

    @property
    def queues(self) -> list[str]:
        """Every queue a rule names, each once, in rule order."""
        return list(dict.fromkeys(r.queue for r in self.rules if r.queue is not None))

    @classmethod
    def parse(cls, document: dict[str, Any], origin: str = "rules") -> Rules:
        raw = document.get("rules")
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{origin}: needs at least one [[rules]] entry")
        rules = []
        for number, spec in enumerate(raw, start=1):
            label = f"rule {number}"
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                label += f" ({spec['name']!r})"
            try:
                rules.append(Rule.model_validate(spec))
            except ValidationError as exc:
                raise ConfigError(f"{origin}: {label}: {first_error(exc, 'rule')}") from None
        return cls(rules)

    @classmethod
    def load(cls, path: Path | None) -> Rules:
        path = path or DEFAULT_RULES
        document = read_toml(path, "rules file")
        return cls.parse(document, origin=f"rules file {path}")
