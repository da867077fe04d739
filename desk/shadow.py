"""`desk shadow`: a candidate model or prompt on the real traffic, beside the live drafts.

    desk shadow --since 24h [--model M] [--prompt F] [--knowledge D] [--json F]

The events stored in EVENTS since then name the tickets that arrived; for each round the live
drafter drafted for them, the inbox (read with a viewer token) holds the conversation the draft
answered, the live draft and what the reviewer did with it. Each round is drafted again with the
candidate configuration, exactly as the drafter drafts (`services.drafter.write`), and scored
side by side with the live draft: does the category agree, how close is each to the reply the
reviewer sent, what do the checks say, what did it cost.

It can send nothing and decide nothing, by construction rather than by care: it connects to the
broker as the `shadow` user, whose grants (`shared.catalog`) allow reading the EVENTS stream
message by message and nothing else (no publish, no consumer); it reads the inbox with a
viewer's token, which may not decide; it never talks to the helpdesk or the sender's database.
The candidate drafts go to a file (the shadow inbox: `var/shadow/<time>.json`, or `--json`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from shared import clock, similarity, subjects
from shared.bus import Bus, NatsAuth, without_credentials
from shared.errors import DeskError, TransientError
from shared.helpdesk.events import ticket_ref
from shared.history import stored_since
from shared.settings import DeskSettings, DrafterSettings

from .evaluation import RETRIEVERS, EvalError, candidate, configured, prompt_of
from .private import write_private
from .statefile import STATE_FILE

USER = "shadow"
_AGO = re.compile(r"^(\d+)\s*([mhd])$")


def since_of(text: str, now: dt.datetime) -> dt.datetime:
    """`30m`, `24h`, `7d`, or an ISO 8601 time (UTC when it names no zone)."""
    found = _AGO.match(text.strip())
    if found:
        unit = {"m": "minutes", "h": "hours", "d": "days"}[found.group(2)]
        return now - dt.timedelta(**{unit: int(found.group(1))})
    try:
        return clock.parse(text.strip())
    except ValueError:
        raise EvalError(f"--since {text!r}: give 30m, 24h, 7d or an ISO 8601 time") from None


async def tickets_since(bus: Bus, since: dt.datetime) -> tuple[int, list[str]]:
    """How many events arrived since `since`, and the tickets they name, first seen first."""
    found: dict[str, None] = {}
    events = await stored_since(bus, subjects.EVENTS, since)
    for msg in events:
        try:
            body = json.loads(msg.data or b"")
        except ValueError:
            continue
        ref = ticket_ref(body)
        if ref is not None and ref.ticket_id:
            found[ref.ticket_id] = None
    return len(events), list(found)


@dataclass
class Round:
    """One round the live drafter drafted, as the inbox holds it."""

    item: dict[str, Any]  # the round's last version, in full
    decision: dict[str, Any] | None  # what the reviewer did with it, if anything yet

    @property
    def sent(self) -> str | None:
        if self.decision and self.decision.get("type") in ("accept", "edit"):
            return self.decision.get("final_text")
        return None


async def rounds_of(client: httpx.AsyncClient, ticket: str) -> list[Round]:
    """The rounds the live drafter drafted for `ticket` (its thread), each as its last version."""
    detail = await _item(client, f"{ticket}~v1")
    if detail is None:
        return []
    last: dict[str, dict[str, Any]] = {}
    for v in detail.get("versions") or []:
        if v.get("reply") is not None:  # a draft, not a supervisor notification
            last[str(v.get("round"))] = v
    decisions = {d.get("version"): d for d in detail.get("decisions") or []}
    found = []
    for v in last.values():
        item = detail if v["id"] == detail["id"] else await _item(client, v["id"])
        if item is not None:
            found.append(Round(item, decisions.get(v["version"])))
    return found


async def _item(client: httpx.AsyncClient, item_id: str) -> dict[str, Any] | None:
    answer = await client.get(f"/api/items/{quote(item_id, safe='')}")
    if answer.status_code == 404:
        return None
    answer.raise_for_status()
    found: dict[str, Any] = answer.json()
    return found


@dataclass
class Scored:
    item_id: str
    ticket: str
    round: str
    decision: str | None
    live_category: str | None
    category: str | None = None
    live_reply: str = ""
    reply: str = ""
    sent: str | None = None
    live_like_sent: float | None = None
    like_sent: float | None = None
    warnings: list[str] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    error: str | None = None


async def replay(deps: Any, system: str, round_: Round) -> Scored:
    from services.drafter import Asked, query, write

    item = round_.item
    args = (item.get("action_request") or {}).get("args") or {}
    scored = Scored(
        item_id=item["id"],
        ticket=str(item.get("ticket_id") or item.get("thread")),
        round=str(item.get("round") or "r1"),
        decision=(round_.decision or {}).get("type"),
        live_category=item.get("category"),
        live_reply=str(args.get("reply") or ""),
        sent=round_.sent,
    )
    ticket = {
        "id": scored.ticket,
        "subject": str(args.get("subject") or "").removeprefix("Re: "),
        "status": item.get("ticket_status") or "open",
        "priority": item.get("priority") or "normal",
        "customer": item.get("customer") or {},
        "messages": item.get("conversation") or [],
    }
    answering = {"kind": item.get("round_kind") or "answer", "messages": item.get("round_messages")}
    passages = []
    if deps.knowledge is not None:
        passages = deps.knowledge.search(query(ticket, answering), deps.passages)
    try:
        written = await write(deps, ticket, answering, Asked(passages=passages, system=system))
    except DeskError as exc:
        scored.error = str(exc)
        return scored
    scored.input_tokens, scored.output_tokens, scored.usd = (
        written.input_tokens,
        written.output_tokens,
        written.usd,
    )
    if written.draft is None:
        scored.error = f"no usable draft: {written.problems[0]}"
        return scored
    scored.category, scored.reply, scored.warnings = (
        written.draft.category,
        written.draft.reply,
        written.problems,
    )
    if scored.sent:
        scored.like_sent = similarity.likeness(scored.reply, scored.sent)
        scored.live_like_sent = similarity.likeness(scored.live_reply, scored.sent)
    return scored


def summary(rows: list[Scored]) -> dict[str, Any]:
    drafted = [r for r in rows if r.error is None]
    sent = [r for r in drafted if r.sent]

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(sum(known) / len(known), 3) if known else None

    agree = sum(r.category == r.live_category for r in drafted)
    return {
        "rounds": len(rows),
        "drafted": len(drafted),
        "errors": len(rows) - len(drafted),
        "category_agreement": round(agree / len(drafted), 3) if drafted else None,
        "with_sent_reply": len(sent),
        "like_sent": mean([r.like_sent for r in sent]),
        "live_like_sent": mean([r.live_like_sent for r in sent]),
        "with_warnings": sum(bool(r.warnings) for r in drafted),
        "input_tokens": sum(r.input_tokens for r in rows),
        "output_tokens": sum(r.output_tokens for r in rows),
        "usd": round(sum(r.usd for r in rows), 6),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def render(report: dict[str, Any]) -> str:
    s = report["summary"]
    lines = [
        f"shadow since {report['since']} · {report['events']} events, {report['tickets']} "
        f"tickets, {s['rounds']} rounds drafted live · candidate model {report['model']}"
        f" · prompt {report['prompt']}",
        "",
        f"{'':<22} {'candidate':>10} {'live':>10}",
        f"{'like the sent reply':<22} {_pct(s['like_sent']):>10} {_pct(s['live_like_sent']):>10}"
        f"   ({s['with_sent_reply']} rounds a reviewer sent)",
        f"{'category agrees':<22} {_pct(s['category_agreement']):>10}",
        f"{'check warnings':<22} {s['with_warnings']:>10}",
        f"{'errors':<22} {s['errors']:>10}",
        f"{'tokens / cost':<22} {s['input_tokens'] + s['output_tokens']:>10}   ${s['usd']:.4f}",
        "",
        "nothing was sent or decided: the shadow user may only read the events",
    ]
    return "\n".join(lines)


def add_arguments(subparsers: Any) -> None:
    sh = subparsers.add_parser(
        "shadow", help="replay real events through a candidate model or prompt; sends nothing"
    )
    sh.add_argument("--since", required=True, help="30m, 24h, 7d, or an ISO 8601 time")
    sh.add_argument("--model", help="the candidate model at the endpoint")
    sh.add_argument("--prompt", type=Path, help="a file holding the candidate system prompt")
    sh.add_argument("--knowledge", type=Path, help="the knowledge directory to try")
    sh.add_argument("--retriever", choices=RETRIEVERS, help="how passages are found")
    sh.add_argument("--url", help="inbox API base URL (default: the running stack's)")
    sh.add_argument("--token", help="a viewer token (default: $DESK_TOKEN, else the stack's)")
    sh.add_argument("--json", type=Path, help="where the shadow inbox goes (default: var/shadow/)")


def _broker(settings: DeskSettings) -> tuple[str, NatsAuth]:
    """The operator's DESK_NATS_* (they must be the shadow user's), else the running stack's
    broker as the shadow user."""
    if "nats_url" in settings.model_fields_set:
        return settings.nats_url, settings.nats_auth()
    try:
        state = json.loads((settings.var_dir / STATE_FILE).read_text())
        creds = json.loads(Path(state["credentials"]).read_text())
        return str(state["nats_url"]), NatsAuth(user=USER, password=creds["nats_passwords"][USER])
    except (OSError, ValueError, KeyError):
        raise EvalError(
            f"no running stack found in {settings.var_dir} (start `desk up`), or set "
            "DESK_NATS_URL with the shadow user's DESK_NATS_USER and DESK_NATS_PASSWORD"
        ) from None


def _viewer(args: argparse.Namespace, var_dir: Path) -> tuple[str, str]:
    from . import inbox

    if not args.token and not os.environ.get("DESK_TOKEN"):
        try:  # a viewer's token: it may read the inbox and never decide
            creds = json.loads((var_dir / "dev-credentials.json").read_text())
            args.token = creds.get("viewer_token") or None
        except (OSError, ValueError):
            pass
    try:
        return inbox.connection(args, var_dir)
    except inbox.InboxError as exc:
        raise EvalError(str(exc)) from None


async def _run(args: argparse.Namespace, settings: DrafterSettings) -> dict[str, Any]:
    from services.drafter import close_model

    now = dt.datetime.now(dt.UTC)
    since = since_of(args.since, now)
    system, prompt_name = prompt_of(args.prompt)
    deps, model_name = configured(settings)
    url, token = _viewer(args, settings.var_dir)
    nats_url, auth = _broker(settings)
    try:
        bus = await Bus.connect(nats_url, service=USER, auth=auth, reconnect=False)
    except TransientError as exc:
        raise EvalError(f"{exc} ({without_credentials(nats_url)})") from None
    try:
        events, tickets = await tickets_since(bus, since)
    finally:
        await bus.close()
    rows: list[Scored] = []
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
            for ticket in tickets:
                for round_ in await rounds_of(client, ticket):
                    rows.append(await replay(deps, system, round_))
    except httpx.HTTPStatusError as exc:
        raise EvalError(f"the inbox API answered HTTP {exc.response.status_code}") from None
    except httpx.HTTPError as exc:
        raise EvalError(f"the inbox API at {url} cannot be reached: {exc}") from None
    finally:
        await close_model(deps.model)
    return {
        "since": since.isoformat(timespec="seconds"),
        "at": now.isoformat(timespec="seconds"),
        "events": events,
        "tickets": len(tickets),
        "model": model_name,
        "prompt": prompt_name,
        "summary": summary(rows),
        "rounds": [asdict(r) for r in rows],
    }


def main(args: argparse.Namespace) -> int:
    try:
        settings = candidate(args.model, args.knowledge, args.retriever)
        report = asyncio.run(_run(args, settings))
    except EvalError as exc:
        print(f"desk shadow: {exc}", file=sys.stderr)
        return 2
    target = args.json or settings.var_dir / "shadow" / f"{report['at'].replace(':', '')}.json"
    write_private(target, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(render(report))
    print(f"the shadow inbox (every candidate draft beside the live one): {target}")
    return 0
