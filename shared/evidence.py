"""An eval report as evidence: the rule a `desk eval` run passes by, and that rule worked out
again from the report's own case results.

Auto-send is enabled on the strength of a `desk eval --json` report sent with the request. The
report's `passed` is a claim; what counts is its cases. `check` recomputes the figures the rule
looks at from the case results (each case's expected and drafted category, its criteria and
which were missed or said, the articles it expects and those its draft cited or quoted, its
error), checks each case agrees with itself, and refuses a
report whose cases do not pass, that has none, or that does not name the case file it was run
on by its sha256 (`sha256sum` of the file, so anyone can tell which file it was). A report
written by hand that claims `"passed": true` with no cases to show for it is refused.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import first_error

PASS_CATEGORY = 0.9  # cases whose drafted category is the expected one
PASS_CRITERIA = 0.9  # `must` and `must_not` criteria met


def wrong_articles(expected: list[str] | None, cited: list[str], quoted: list[str]) -> list[str]:
    """What a draft got wrong about the knowledge base, one phrase each (none: nothing): a case
    that expects no article (`[]`) fails when its draft cites one or quotes a passage of one (an
    off-topic policy, cited or not); a case that expects articles fails when its draft relies
    only on others; a case that does not say (None: from the review log) cannot fail so."""
    relied = list(dict.fromkeys([*cited, *quoted]))
    if expected is None:
        return []
    if not expected:
        return [
            *(f"cites {a}, where no article applies" for a in dict.fromkeys(cited)),
            *(
                f"quotes {a} without citing it, where no article applies"
                for a in dict.fromkeys(quoted)
                if a not in cited
            ),
        ]
    if relied and not set(relied) & set(expected):
        return [f"relies on {', '.join(relied)}, not on {', '.join(expected)}"]
    return []


class Unproven(Exception):
    """Why a report does not show what it claims (one line, for the refusal)."""


class CaseResult(BaseModel):
    """One case as `desk eval --json` reports it (other fields are kept, not needed)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    category: str  # the expected one
    drafted_category: str | None = None
    criteria: int = Field(ge=0)
    criteria_met: int = Field(ge=0)
    missing: list[str]  # `must` not met
    said: list[str]  # `must_not` said
    articles: list[str] | None  # expected ([]: no article applies; None: not known)
    cited: list[str]
    quoted: list[str]  # articles whose passages the reply repeats, cited or not
    error: str | None

    @model_validator(mode="after")
    def _agrees(self) -> CaseResult:
        if self.criteria_met != self.criteria - len(self.missing) - len(self.said):
            raise ValueError("criteria_met does not agree with its criteria, missing and said")
        return self


class CasesFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    version: int
    sha256: str = Field(pattern="^[0-9a-f]{64}$")


class Report(BaseModel):
    model_config = ConfigDict(extra="ignore")

    cases_file: CasesFile
    model: str
    passed: bool
    cases: list[CaseResult] = Field(min_length=1)


def digest(data: bytes) -> str:
    """A case file's sha256, as `sha256sum` prints it."""
    return hashlib.sha256(data).hexdigest()


def share(part: float, whole: float) -> float | None:
    return round(part / whole, 3) if whole else None


def figures(cases: list[CaseResult]) -> dict[str, Any]:
    """What the pass rule looks at, from the case results."""
    criteria = sum(c.criteria for c in cases)
    return {
        "cases": len(cases),
        "category_accuracy": share(
            sum(c.drafted_category == c.category for c in cases), len(cases)
        ),
        "criteria": criteria,
        "criteria_met": share(sum(c.criteria_met for c in cases), criteria),
        "must_not_said": sum(len(c.said) for c in cases),
        "wrong_articles": sum(bool(wrong_articles(c.articles, c.cited, c.quoted)) for c in cases),
        "errors": sum(c.error is not None for c in cases),
    }


def passes(overall: dict[str, Any]) -> bool:
    """The rule: the category right in at least 90 % of the cases, at least 90 % of the
    criteria met (all, when there are none), nothing it must not say, no draft relying on an
    article that does not apply (`wrong_articles`), no case failed."""
    met = overall["criteria_met"]
    return (
        (overall["category_accuracy"] or 0) >= PASS_CATEGORY
        and (met if met is not None else 1) >= PASS_CRITERIA
        and overall["must_not_said"] == 0
        and overall["wrong_articles"] == 0
        and overall["errors"] == 0
    )


def check(report: Any, category: str) -> dict[str, Any]:
    """What `report` shows for enabling `category`, recomputed from its cases (recorded with
    the enabling); raises `Unproven` saying why it shows too little."""
    if not isinstance(report, dict):
        raise Unproven(
            "a `desk eval --json` report of a run that passed must come with the request"
        )
    if report.get("passed") is not True:
        raise Unproven("the eval report did not pass")
    try:
        found = Report.model_validate(report)
    except ValidationError as exc:
        raise Unproven(
            f"the eval report is not a `desk eval --json` report with its case results "
            f"({first_error(exc, 'report')})"
        ) from None
    if len({c.id for c in found.cases}) != len(found.cases):
        raise Unproven("the eval report lists a case twice")
    overall = figures(found.cases)
    if not passes(overall):
        raise Unproven(
            "the eval report's case results do not pass: category right in "
            f"{_pct(overall['category_accuracy'])}, criteria met {_pct(overall['criteria_met'])}, "
            f"{overall['must_not_said']} must-not said, {overall['wrong_articles']} drafts "
            f"relying on an article that does not apply, {overall['errors']} errors"
        )
    own = [c for c in found.cases if c.category == category]
    if not own:
        raise Unproven(f"the eval report has no {category} cases")
    return {
        "cases_file": found.cases_file.model_dump(),
        "model": found.model,
        "overall": overall,
        "category": figures(own),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
