"""`desk eval`: how good the drafts are, measured on a versioned set of cases.

A case file (YAML; the demo's is `desk/evals/demo.yaml`) holds tickets — a conversation whose
last customer messages are what the reply answers — each with the category a careful person
would pick, the knowledge articles a good retrieval finds for it (`articles: []`: none applies;
left out, as in cases from the review log: not known), facts the reply must state
(`must`: case-insensitive phrases, alternatives written `a | b`, a `re:` prefix for a regular
expression) and what it must never say (`must_not`: promises, sums of money), and optionally
the reply a reviewer sent (`reference`, from `--from-review-log`).

Each case is drafted exactly as the drafter drafts (`services.drafter.writer`: the same
retrieval, prompt, model call, checks and one redraft), against the configured model endpoint
(`DESK_LLM_*`, or `--model`; the built-in offline model when none is set), with the built-in
system prompt or `--prompt FILE`, and the knowledge base in `DESK_KNOWLEDGE_DIR` or
`--knowledge` (the demo's articles when neither nor a helpdesk is configured, as `desk up`
gives the demo's drafter). A case that expects no article fails when its draft cites one or
quotes a passage of one (`QUOTE_WORDS` words in a row of any passage of the knowledge base,
cited or not: an off-topic policy); a case that expects articles fails when its draft relies
only on others. The table says, per category and overall, how often the category was right,
how many criteria were met, how often retrieval found an expected article, and the tokens and
cost; each case not met is listed with what failed and an excerpt of its reply. `--json`
writes everything, case by case, with the case file's sha256 (the inbox recomputes the verdict
from those case results before it lets the report enable auto-send: `shared.evidence`). The
run passes when the category is right in at least 90 % of the cases, at least 90 % of the
criteria are met, no `must_not` was said, no draft relied on an article that does not apply
and no case failed; exit status 0 when it passes, 1 when it does not, 2 when
it could not run. Every run also measures the foreign-data screen on its labelled replies
(`desk/evals/screening.yaml`, or `--screening-cases`): precision and recall, printed after the
table and kept under `screening` in the JSON (`desk.screening_eval`).

`desk eval --from-review-log` turns what reviewers sent (accepted and edited replies, read from
the inbox API) into cases with their category and the sent text as `reference`, writes them to
a case file, and evaluates them: the similarity of each draft to what was sent is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, get_args
from urllib.parse import quote

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared import evidence
from shared.errors import DeskError, first_error
from shared.inbox import CATEGORIES
from shared.settings import ConfigError, DrafterSettings, RetrieverName

from . import screening_eval
from .private import write_private

DEMO_CASES = Path(__file__).parent / "evals" / "demo.yaml"
PASS_CATEGORY = evidence.PASS_CATEGORY  # the pass rule is shared: the inbox recomputes it
PASS_CRITERIA = evidence.PASS_CRITERIA
MONEY = r"re:(\$|€|£)\s?\d"
QUOTE_WORDS = 8  # words in a row from a passage that make a quotation of it
EXCERPT_CHARS = 90
_WORD = re.compile(r"\w+")


RETRIEVERS = get_args(RetrieverName)  # DESK_KNOWLEDGE_RETRIEVER's choices


class EvalError(Exception):
    """An expected failure: printed as one line, no traceback."""


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


def met(criterion: str, text: str) -> bool:
    """Whether `text` says what `criterion` asks (see the module's docstring)."""
    return said_where(criterion, text) is not None


def said_where(criterion: str, text: str) -> str | None:
    """Where in `text` `criterion` is met, with a few words around, on one line; None when it
    is not."""
    if criterion.startswith("re:"):
        found = re.search(criterion[3:], text, re.IGNORECASE)
    else:  # any alternative, case and runs of whitespace aside
        alternatives = [r"\s+".join(map(re.escape, a.split())) for a in criterion.split("|")]
        either = "|".join(f"(?:{a})" for a in alternatives if a)
        found = re.search(either, text, re.IGNORECASE) if either else None
    if found is None:
        return None
    start, end = max(0, found.start() - 30), found.end() + 30
    shown = " ".join(text[start:end].split())
    if start:  # whole words only
        shown = "…" + shown.split(" ", 1)[-1]
    if end < len(text):
        shown = shown.rsplit(" ", 1)[0] + "…"
    return _short(shown, EXCERPT_CHARS)


def quotations(reply: str, passages: Iterable[Any]) -> dict[str, str]:
    """The articles whose passages `reply` repeats, `QUOTE_WORDS` words in a row or more (case
    and punctuation aside), each with the first words it repeats as the reply has them."""
    runs: dict[tuple[str, ...], str] = {}
    for passage in passages:
        words = [w.lower() for w in _WORD.findall(passage.text)]
        for n in range(len(words) - QUOTE_WORDS + 1):
            runs.setdefault(tuple(words[n : n + QUOTE_WORDS]), passage.article)
    said = list(_WORD.finditer(reply))
    lowered = [m.group().lower() for m in said]
    found: dict[str, str] = {}
    n = 0
    while n + QUOTE_WORDS <= len(said):
        article = runs.get(tuple(lowered[n : n + QUOTE_WORDS]))
        if article is None:
            n += 1
            continue
        end = n + QUOTE_WORDS
        while end < len(said) and runs.get(tuple(lowered[end - QUOTE_WORDS + 1 : end + 1])):
            end += 1
        text = " ".join(reply[said[n].start() : said[end - 1].end()].split())
        found.setdefault(article, _short(text, EXCERPT_CHARS))
        n = end
    return found


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def gist(reply: str) -> str:
    """The start of a reply after its greeting, on one line."""
    paragraphs = [" ".join(p.split()) for p in reply.split("\n\n") if p.strip()]
    if (
        len(paragraphs) > 1
        and len(paragraphs[0]) < 40
        and paragraphs[0].endswith((",", "，", "："))
    ):
        paragraphs = paragraphs[1:]
    return _short(" ".join(paragraphs), EXCERPT_CHARS)


@dataclass
class Outcome:
    id: str
    category: str  # expected
    articles: list[str] | None = None  # expected ([]: no article applies; None: not known)
    drafted_category: str | None = None
    reply: str = ""
    retrieved: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    quoted: list[str] = field(default_factory=list)  # articles whose passages the reply repeats
    quotations: dict[str, str] = field(default_factory=dict)  # article: what it repeats
    missing: list[str] = field(default_factory=list)  # `must` not met
    said: list[str] = field(default_factory=list)  # `must_not` said
    criteria: int = 0
    criteria_met: int = 0
    retrieval_hit: bool | None = None  # None: the case expects no article
    similarity: float | None = None  # to the reference, when the case has one
    warnings: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    error: str | None = None

    @property
    def category_ok(self) -> bool:
        return self.drafted_category == self.category

    @property
    def wrong_articles(self) -> list[str]:
        return evidence.wrong_articles(self.articles, self.cited, self.quoted)

    @property
    def ok(self) -> bool:
        return not self.failures()

    def failures(self) -> list[tuple[str, str]]:
        """What failed, each with an excerpt of the reply that shows it."""
        if self.error is not None:
            return [(self.error, "")]
        found = []
        if not self.category_ok:
            found.append((f"category {self.drafted_category} (expected {self.category})", ""))
        for wrong in self.wrong_articles:
            named = wrong.replace(",", " ").split()
            shown = [q for a, q in self.quotations.items() if a in named]
            found.append((wrong, shown[0] if shown else gist(self.reply)))
        found += [(f"missing {c!r}", gist(self.reply)) for c in self.missing]
        found += [(f"said {c!r}", said_where(c, self.reply) or "") for c in self.said]
        return found


async def evaluate(case: Case, deps: Any, system: str) -> Outcome:
    from services.drafter import Asked, query, write
    from shared import similarity

    ticket, round_ = case.ticket()
    outcome = Outcome(case.id, case.category, case.articles)
    passages = []
    if deps.knowledge is not None:
        passages = deps.knowledge.search(query(ticket, round_), deps.passages)
    outcome.retrieved = list(dict.fromkeys(p.article for p in passages))
    if case.articles:
        outcome.retrieval_hit = bool(set(case.articles) & set(outcome.retrieved))
    try:
        written = await write(deps, ticket, round_, Asked(passages=passages, system=system))
    except DeskError as exc:
        outcome.error = str(exc)
        return outcome
    outcome.input_tokens, outcome.output_tokens = written.input_tokens, written.output_tokens
    outcome.usd = written.usd
    if written.draft is None:
        outcome.error = f"no usable draft: {written.problems[0]}"
        return outcome
    outcome.drafted_category = written.draft.category
    outcome.reply = written.draft.reply
    outcome.cited = list(written.draft.sources)
    if deps.knowledge is not None:
        outcome.quotations = quotations(outcome.reply, deps.knowledge.passages)
        outcome.quoted = list(outcome.quotations)
    outcome.warnings = written.problems
    outcome.missing = [c for c in case.must if not met(c, written.draft.reply)]
    outcome.said = [c for c in case.must_not if met(c, written.draft.reply)]
    outcome.criteria = len(case.must) + len(case.must_not)
    outcome.criteria_met = outcome.criteria - len(outcome.missing) - len(outcome.said)
    if case.reference:
        outcome.similarity = similarity.likeness(written.draft.reply, case.reference)
    return outcome


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


def configured(settings: DrafterSettings) -> tuple[Any, str]:
    """What a candidate drafts with (no helpdesk: every case carries its conversation), and
    the model's name."""
    from services.drafter import Deps, OfflineDraftModel

    try:
        deps = Deps.configured(settings, source=None)  # type: ignore[arg-type]
    except ConfigError as exc:  # the embeddings retriever without its packages or model
        raise EvalError(str(exc)) from None
    offline = isinstance(deps.model, OfflineDraftModel)
    return deps, "offline (built-in)" if offline else settings.llm_model


def candidate(
    model: str | None, knowledge: Path | None, retriever: str | None = None
) -> DrafterSettings:
    """The drafter's settings with a candidate model, knowledge base and retriever; the demo's
    articles when none is configured and no helpdesk is (what `desk up` gives the demo's
    drafter)."""
    from .helpdesk import DEMO_KNOWLEDGE

    try:
        settings = DrafterSettings()
    except ValidationError as exc:
        raise EvalError(first_error(exc, "settings")) from None
    except ConfigError as exc:
        raise EvalError(str(exc)) from None
    update: dict[str, Any] = {}
    if model:
        update["llm_model"] = model
    if retriever:
        update["knowledge_retriever"] = retriever
    if knowledge:
        update["knowledge_dir"] = knowledge
    elif settings.knowledge_dir is None and not {"DESK_HELPDESK_URL", "DESK_HELPDESK_KIND"} & set(
        os.environ
    ):
        update["knowledge_dir"] = DEMO_KNOWLEDGE
    return settings.model_copy(update=update)


async def run(cases: CaseFile, settings: DrafterSettings, system: str, prompt_name: str) -> Report:
    from services.drafter import close_model

    deps, name = configured(settings)
    try:
        outcomes = [await evaluate(case, deps, system) for case in cases.cases]
    finally:
        await close_model(deps.model)
    knowledge = str(settings.knowledge_dir) if settings.knowledge_dir else "none"
    if deps.knowledge is not None and settings.knowledge_retriever != "bm25":
        knowledge += f" ({settings.knowledge_retriever})"
    return Report(cases.name, cases.version, name, prompt_name, knowledge, outcomes, cases.sha256)


# -- from the review log ------------------------------------------------------------------


def cases_from_review_log(decisions: list[dict[str, Any]], items: dict[str, Any]) -> CaseFile:
    """A case for each reply a reviewer sent (accepted, or edited): its conversation up to
    the round, the category, and the sent text as the reference."""
    cases = []
    for d in decisions:
        item = items.get(d.get("item_id") or "")
        if d.get("type") not in ("accept", "edit") or not item or not d.get("final_text"):
            continue
        if item.get("category") not in CATEGORIES:
            continue
        conversation = list(item.get("conversation") or [])
        answering = set(item.get("round_messages") or [])
        ends = [n for n, m in enumerate(conversation) if m.get("id") in answering]
        upto = conversation[: ends[-1] + 1] if ends else conversation  # what the reply answered
        said = [
            {"from": m["author"], "text": m["body"]}
            for m in upto
            if m.get("author") in ("customer", "agent") and m.get("body")
        ]
        if not said:
            continue
        subject = str((item.get("action_request") or {}).get("args", {}).get("subject") or "")
        cases.append(
            {
                "id": f"{item.get('ticket_id') or item['id']}-{item.get('round') or 'r1'}",
                "subject": subject.removeprefix("Re: "),
                "customer": ((item.get("customer") or {}).get("name") or "Alex"),
                "messages": said,
                "category": item["category"],
                "must_not": [MONEY],
                "reference": d["final_text"],
            }
        )
    unique = list({c["id"]: c for c in cases}.values())
    if not unique:
        raise EvalError("the review log holds no sent replies to make cases of")
    return CaseFile.model_validate({"version": 1, "name": "review-log", "cases": unique})


async def _review_log(url: str, token: str) -> CaseFile:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
            answer = await client.get("/api/review-log")
            answer.raise_for_status()
            decisions = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
            items: dict[str, Any] = {}
            for d in decisions:
                if d.get("type") in ("accept", "edit") and d.get("item_id") not in items:
                    got = await client.get(f"/api/items/{quote(d['item_id'], safe='')}")
                    if got.status_code == 200:
                        items[d["item_id"]] = got.json()
    except httpx.HTTPStatusError as exc:
        raise EvalError(f"the inbox API answered HTTP {exc.response.status_code}") from None
    except httpx.HTTPError as exc:
        raise EvalError(f"the inbox API at {url} cannot be reached: {exc}") from None
    return cases_from_review_log(decisions, items)


# -- the command ----------------------------------------------------------------------------


def add_arguments(subparsers: Any) -> None:
    ev = subparsers.add_parser("eval", help="measure the drafts on a set of cases")
    ev.add_argument("--cases", type=Path, help=f"a case file (default: {DEMO_CASES.name})")
    ev.add_argument("--model", help="the model name at the endpoint (default: DESK_LLM_MODEL)")
    ev.add_argument("--prompt", type=Path, help="a file holding the system prompt to try")
    ev.add_argument(
        "--knowledge", type=Path, help="the knowledge directory (default: DESK_KNOWLEDGE_DIR)"
    )
    ev.add_argument(
        "--retriever",
        choices=RETRIEVERS,
        help="how passages are found (default: DESK_KNOWLEDGE_RETRIEVER, bm25)",
    )
    ev.add_argument(
        "--from-review-log",
        action="store_true",
        help="make cases of the replies reviewers sent (inbox API) and evaluate those",
    )
    ev.add_argument("--url", help="inbox API base URL (default: the running stack's)")
    ev.add_argument("--token", help="reviewer or viewer token (default: $DESK_TOKEN)")
    ev.add_argument("--write", type=Path, help="with --from-review-log: where to save the cases")
    ev.add_argument("--json", type=Path, help="write the full report as JSON here ('-': stdout)")
    ev.add_argument(
        "--screening-cases",
        type=Path,
        help="labelled replies to measure the foreign-data screen on"
        f" (default: {screening_eval.SCREENING_CASES.name})",
    )


def main(args: argparse.Namespace) -> int:
    from . import inbox

    try:
        settings = candidate(args.model, args.knowledge, args.retriever)
        system, prompt_name = prompt_of(args.prompt)
        if args.from_review_log:
            try:
                url, token = inbox.connection(args, settings.var_dir)
            except inbox.InboxError as exc:
                raise EvalError(str(exc)) from None
            cases = asyncio.run(_review_log(url, token))
            target = args.write or settings.var_dir / "evals" / "review-log.yaml"
            _save(cases, target)
            cases.sha256 = evidence.digest(target.read_bytes())  # the file as written
            print(f"{len(cases.cases)} cases from the review log written to {target}")
        else:
            cases = load(args.cases or DEMO_CASES)
        screened = args.screening_cases or screening_eval.SCREENING_CASES
        try:
            screening = screening_eval.report(screening_eval.load(screened), screened)
        except screening_eval.ScreeningError as exc:
            raise EvalError(str(exc)) from None
        report = asyncio.run(run(cases, settings, system, prompt_name))
        report.screening = screening
    except EvalError as exc:
        print(f"desk eval: {exc}", file=sys.stderr)
        return 2
    data = report.as_json()
    if args.json is not None and str(args.json) == "-":
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(render(report))
        if args.json is not None:
            write_private(args.json, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            print(f"report written to {args.json}")
    return 0 if data["passed"] else 1


def prompt_of(path: Path | None) -> tuple[str, str]:
    """The system prompt to try (the built-in one without a file), and what to call it."""
    from services.drafter import Asked

    if path is None:
        return Asked().system, "built-in"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        raise EvalError(f"cannot read the prompt {path}") from None
    if not text:
        raise EvalError(f"the prompt {path} is empty")
    return text, path.name


def _save(cases: CaseFile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = cases.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
