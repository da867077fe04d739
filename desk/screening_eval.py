"""How well the foreign-data screen (`shared.screening`) tells hostile replies from benign ones,
measured on a labelled set kept in the repository (`desk/evals/screening.yaml`).

Each case is a reply text with the conversation and knowledge it was drafted for (named
`contexts`, shared by many cases) and what the screen must say: `warn` (a hostile reply: a
link, a disguised link, another customer's details, a request for a secret, "verify your
account", a promise, a long quotation; its `kind` says which) or `clean` (a reply a person
would send as it is). `desk eval` prints the precision (of the replies warned about, how many
are hostile) and the recall (of the hostile replies, how many are warned about), per language
and per kind, and names the cases the screen got wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shared import screening
from shared.errors import first_error

SCREENING_CASES = Path(__file__).parent / "evals" / "screening.yaml"


class ScreeningError(Exception):
    """The case file cannot be read: one line, no traceback."""


class Context(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation: list[str] = Field(default_factory=list)
    knowledge: list[str] = Field(default_factory=list)


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    context: str
    expect: Literal["warn", "clean"]
    kind: str = Field(min_length=1)
    reply: str = Field(min_length=1)
    held_out: bool = False  # written after the screen's rules were settled

    @property
    def language(self) -> str:
        return self.context.split("-", 1)[0]


class ScreeningCases(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    name: str
    contexts: dict[str, Context]
    cases: list[Reply] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> ScreeningCases:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"two cases have the id {case.id!r}")
            seen.add(case.id)
            if case.context not in self.contexts:
                raise ValueError(
                    f"case {case.id!r} names no context of this file: {case.context!r}"
                )
            if (case.kind == "clean") != (case.expect == "clean"):
                raise ValueError(f"case {case.id!r}: kind 'clean' goes with expect 'clean' only")
        return self


def load(path: Path = SCREENING_CASES) -> ScreeningCases:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScreeningError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ScreeningError(f"{path} is not YAML: {exc}") from None
    try:
        return ScreeningCases.model_validate(raw)
    except ValidationError as exc:
        raise ScreeningError(f"{path}: {first_error(exc, '')}".replace(": : ", ": ")) from None


@dataclass(frozen=True)
class Verdict:
    id: str
    language: str
    kind: str
    expected: bool  # a warning expected
    warnings: list[str]
    held_out: bool = False

    @property
    def warned(self) -> bool:
        return bool(self.warnings)


def run(cases: ScreeningCases) -> list[Verdict]:
    verdicts = []
    for case in cases.cases:
        context = cases.contexts[case.context]
        warnings = screening.screen(
            case.reply, conversation=context.conversation, knowledge=context.knowledge
        )
        expected = case.expect == "warn"
        verdicts.append(
            Verdict(case.id, case.language, case.kind, expected, warnings, case.held_out)
        )
    return verdicts


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def figures(verdicts: Iterable[Verdict]) -> dict[str, Any]:
    verdicts = list(verdicts)
    tp = sum(v.expected and v.warned for v in verdicts)
    fp = sum(not v.expected and v.warned for v in verdicts)
    fn = sum(v.expected and not v.warned for v in verdicts)
    return {
        "cases": len(verdicts),
        "hostile": tp + fn,
        "benign": len(verdicts) - tp - fn,
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
    }


def report(cases: ScreeningCases, path: Path = SCREENING_CASES) -> dict[str, Any]:
    """The screen's figures on `cases`: overall, per language, recall per kind, and the cases
    it got wrong."""
    verdicts = run(cases)
    languages = dict.fromkeys(v.language for v in verdicts)
    kinds = dict.fromkeys(v.kind for v in verdicts if v.expected)
    return {
        "cases_file": {"name": cases.name, "version": cases.version, "path": str(path)},
        **figures(verdicts),
        "by_language": {
            lang: figures(v for v in verdicts if v.language == lang) for lang in languages
        },
        "held_out": figures(v for v in verdicts if v.held_out),
        "recall_by_kind": {
            kind: figures(v for v in verdicts if v.kind == kind)["recall"] for kind in kinds
        },
        "missed": [v.id for v in verdicts if v.expected and not v.warned],
        "false_alarms": [
            {"id": v.id, "warnings": v.warnings} for v in verdicts if not v.expected and v.warned
        ],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def render(data: dict[str, Any]) -> list[str]:
    """The report's lines for `desk eval`'s table output."""
    lines = [
        f"foreign-data screen on {data['cases_file']['name']} v{data['cases_file']['version']}"
        f" · {data['cases']} replies ({data['hostile']} hostile, {data['benign']} benign)"
        f" · precision {_pct(data['precision'])} · recall {_pct(data['recall'])}",
        f"{'language':<10} {'replies':>7} {'precision':>10} {'recall':>8}",
    ]
    for lang, s in data["by_language"].items():
        lines.append(
            f"{lang:<10} {s['cases']:>7} {_pct(s['precision']):>10} {_pct(s['recall']):>8}"
        )
    held = data["held_out"]
    if held["cases"]:
        lines.append(
            f"written after the rules were settled: {held['cases']} replies"
            f" · precision {_pct(held['precision'])} · recall {_pct(held['recall'])}"
        )
    by_kind = " · ".join(f"{k} {_pct(r)}" for k, r in data["recall_by_kind"].items())
    lines.append(f"recall by kind: {by_kind}")
    if data["missed"]:
        lines.append("missed: " + ", ".join(data["missed"]))
    if data["false_alarms"]:
        lines.append("false alarms: " + ", ".join(f["id"] for f in data["false_alarms"]))
    return lines
