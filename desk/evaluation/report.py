"""The report of a run: figures per category and overall, the verdict, the table printed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shared import evidence

from .. import screening_eval
from .outcome import Outcome

PASS_CATEGORY = evidence.PASS_CATEGORY  # the pass rule is shared: the inbox recomputes it
PASS_CRITERIA = evidence.PASS_CRITERIA


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    hits = [o.retrieval_hit for o in outcomes if o.retrieval_hit is not None]
    similar = [o.similarity for o in outcomes if o.similarity is not None]
    criteria = sum(o.criteria for o in outcomes)
    return {
        "cases": len(outcomes),
        "cases_ok": _share(sum(o.ok for o in outcomes), len(outcomes)),
        "category_accuracy": _share(sum(o.category_ok for o in outcomes), len(outcomes)),
        "criteria": criteria,
        "criteria_met": _share(sum(o.criteria_met for o in outcomes), criteria),
        "must_not_said": sum(len(o.said) for o in outcomes),
        "wrong_articles": sum(bool(o.wrong_articles) for o in outcomes),
        "retrieval_hit_rate": _share(sum(hits), len(hits)),
        "similarity_to_sent": round(sum(similar) / len(similar), 3) if similar else None,
        "errors": sum(o.error is not None for o in outcomes),
        "input_tokens": sum(o.input_tokens for o in outcomes),
        "output_tokens": sum(o.output_tokens for o in outcomes),
        "usd": round(sum(o.usd for o in outcomes), 6),
    }


def passed(overall: dict[str, Any]) -> bool:
    return evidence.passes(overall)


@dataclass
class Report:
    name: str
    version: int
    model: str
    prompt: str
    knowledge: str
    outcomes: list[Outcome]
    sha256: str = ""  # the case file's, as read: the evidence names the file it was run on
    screening: dict[str, Any] | None = None  # the foreign-data screen's figures

    def as_json(self) -> dict[str, Any]:
        by_category = {
            c: summary([o for o in self.outcomes if o.category == c])
            for c in dict.fromkeys(o.category for o in self.outcomes)
        }
        overall = summary(self.outcomes)
        return {
            "cases_file": {"name": self.name, "version": self.version, "sha256": self.sha256},
            "model": self.model,
            "prompt": self.prompt,
            "knowledge": self.knowledge,
            "overall": overall,
            "by_category": by_category,
            "passed": passed(overall),
            "cases": [
                {
                    **asdict(o),
                    "ok": o.ok,
                    "failures": [{"what": w, "excerpt": e} for w, e in o.failures()],
                }
                for o in self.outcomes
            ],
            "screening": self.screening,
        }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def render(report: Report) -> str:
    data = report.as_json()
    lines = [
        f"eval {report.name} v{report.version} · {len(report.outcomes)} cases"
        f" · model {report.model} · prompt {report.prompt} · knowledge {report.knowledge}",
        "",
        f"{'category':<10} {'cases':>5} {'cases ok':>9} {'category ok':>12} {'criteria met':>13}"
        f" {'retrieval hit':>14} {'like sent':>10} {'tokens':>8} {'cost':>10}",
    ]
    rows = [*data["by_category"].items(), ("all", data["overall"])]
    for name, s in rows:
        lines.append(
            f"{name:<10} {s['cases']:>5} {_pct(s['cases_ok']):>9}"
            f" {_pct(s['category_accuracy']):>12}"
            f" {_pct(s['criteria_met']):>13} {_pct(s['retrieval_hit_rate']):>14}"
            f" {_pct(s['similarity_to_sent']):>10}"
            f" {s['input_tokens'] + s['output_tokens']:>8} {'$' + format(s['usd'], '.4f'):>10}"
        )
    failing = [o for o in report.outcomes if not o.ok]
    if failing:
        lines += ["", "cases not met:"]
        for o in failing:
            for n, (what, excerpt) in enumerate(o.failures()):
                lead = f"  {o.id}: " if n == 0 else " " * (len(o.id) + 4)
                lines.append(lead + what + (f" — “{excerpt}”" if excerpt else ""))
    overall = data["overall"]
    lines += [
        "",
        f"must-not said: {overall['must_not_said']}"
        f" · wrong article: {overall['wrong_articles']} · errors: {overall['errors']}"
        f" · passed: {'yes' if data['passed'] else 'no'}"
        f" (needs category ≥ {PASS_CATEGORY:.0%}, criteria ≥ {PASS_CRITERIA:.0%},"
        " nothing it must not say, no article where none applies, no errors)",
    ]
    if report.screening is not None:
        lines += ["", *screening_eval.render(report.screening)]
    return "\n".join(lines)
