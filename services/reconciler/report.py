"""The daily report: what came in, what waits, what failed, what it cost.

Printed, published as a `report.daily` result event, and posted to a Slack-compatible
incoming-webhook URL when one is configured. A dead letter's error may quote what a customer
wrote, so every line posted is quoted inert for the chat's markup (`shared.chat`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
from collections import Counter
from typing import Any

import httpx

from shared import chat, deadletters, subjects
from shared.breaker import BreakerSettings, CircuitBreaker
from shared.bus import Bus
from shared.envelope import Envelope
from shared.history import stored_since
from shared.logging import redact
from shared.outbound import Endpoint
from shared.ratelimit import TokenBucket
from shared.results import REPORT_DAILY, event_id

log = logging.getLogger(__name__)

SOURCE = "/desk/reconciler"


async def inbox_figures(url: str, token: str, start: dt.datetime, days: int = 1) -> dict[str, Any]:
    """Stats (their review analytics, the drafts made and their cost, over the last `days`
    x 24 h) from the inbox's counts endpoint, all a reporter token may read. An inbox older
    than the analytics ignores `days` and has no `review`; one older than the draft figures
    has its items paged for the cost of drafts created since `start`."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
        answer = await client.get("/api/stats", params={"days": days})
        stats = answer.raise_for_status().json()
        made = stats.pop("drafts", None)
        if isinstance(made, dict):
            return {"stats": stats, "cost_usd": made["cost_usd"], "drafts": made["count"]}
        cost, drafts, cursor = 0.0, 0, None
        while True:
            params: dict[str, Any] = {"sort": "newest", "limit": 200}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/api/items", params=params)).raise_for_status().json()
            older = False
            for item in page["items"]:
                if dt.datetime.fromisoformat(item["created_at"]) < start:
                    older = True
                    break
                drafts += 1
                cost += float((item.get("cost") or {}).get("usd") or 0)
            cursor = page.get("next_cursor")
            if older or not cursor:
                break
    return {"stats": stats, "cost_usd": round(cost, 6), "drafts": drafts}


def _age(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min" if hours else f"{rest // 60} min"


def _percent(share: Any) -> str | None:
    return f"{round(share * 100)} %" if isinstance(share, int | float) else None


def _wait(figures: dict[str, Any]) -> str | None:
    median = (figures.get("time_to_decision_seconds") or {}).get("median")
    if not isinstance(median, int | float):
        return None
    return f"{round(median)} s" if median < 60 else _age(int(median))


def review_lines(review: Any) -> list[str]:
    """The review analytics in two lines: the window's decisions, the share sent unedited and
    the median time to decision, then the same per category. No line from an inbox without them
    (older than the analytics, or a malformed answer)."""
    if not isinstance(review, dict) or not isinstance(review.get("overall"), dict):
        return []
    days = review.get("days")
    window = "last 24 h" if days == 1 else f"last {days} days"
    overall = review["overall"]
    if not overall.get("decisions"):
        return [f"Review, {window}: no decisions"]
    kinds = ", ".join(f"{k} {overall.get(k, 0)}" for k in ("accept", "edit", "response", "ignore"))
    parts = [f"{overall['decisions']} decisions ({kinds})"]
    if (unedited := _percent(overall.get("unedited_share"))) is not None:
        parts.append(f"sent unedited {unedited}")
    if (wait := _wait(overall)) is not None:
        parts.append(f"median time to decision {wait}")
    lines = [f"Review, {window}: " + "; ".join(parts)]
    categories = []
    for name, figures in sorted((review.get("by_category") or {}).items()):
        if not isinstance(figures, dict) or not figures.get("decisions"):
            continue
        said = [f"{figures['decisions']}"]
        if (unedited := _percent(figures.get("unedited_share"))) is not None:
            said.append(f"unedited {unedited}")
        if (wait := _wait(figures)) is not None:
            said.append(f"median {wait}")
        categories.append(f"{name} " + ", ".join(said))
    if categories:
        lines.append("  by category: " + "; ".join(categories))
    return lines


async def build(
    bus: Bus, *, now: dt.datetime, inbox_url: str | None, token: str | None, hours: int = 24
) -> dict[str, Any]:
    start = now - dt.timedelta(hours=hours)
    events, results, letters = await asyncio.gather(
        stored_since(bus, subjects.EVENTS, start),
        stored_since(bus, subjects.RESULTS, start),
        deadletters.list_dead_letters(bus.js, limit=1000),
    )
    report: dict[str, Any] = {
        "date": now.date().isoformat(),
        "period_hours": hours,
        "events": dict(Counter((m.subject or "").split(".", 1)[-1] for m in events)),
        "results": dict(Counter((m.subject or "").split(".", 1)[-1] for m in results)),
        "dead_letters": [
            {
                "id": d.id,
                "service": d.service,
                "subject": d.subject,
                "attempts": d.attempts,
                "error": redact(d.error)[:160],
            }
            for d in letters
        ],
    }
    if inbox_url and token:
        try:
            days = max(1, math.ceil(hours / 24))
            report["inbox"] = await inbox_figures(inbox_url, token, start, days)
        except httpx.HTTPStatusError as exc:  # e.g. 401: DESK_REPORT_TOKEN is not a token
            report["inbox"] = {"unavailable": f"HTTP {exc.response.status_code}"}
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            report["inbox"] = {"unavailable": exc.__class__.__name__}
    return report


def render(report: dict[str, Any]) -> str:
    lines = [f"Ambient Desk daily report, {report['date']} (last {report['period_hours']} h)"]
    events = report["events"]
    lines.append(
        f"Events received: {sum(events.values())}"
        + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(events.items())) + ")" if events else "")
    )
    results = report["results"]
    lines.append(
        "Results: " + (", ".join(f"{k} {v}" for k, v in sorted(results.items())) or "none")
    )
    inbox = report.get("inbox") or {}
    stats = inbox.get("stats")
    if stats:
        by_status = ", ".join(f"{k} {v}" for k, v in stats["by_status"].items() if v)
        lines.append(f"Inbox: {by_status or 'empty'}")
        oldest = stats.get("oldest_waiting")
        lines.append(
            f"Oldest waiting: {oldest['id']}, {_age(int(oldest['age_seconds']))}"
            if oldest
            else "Oldest waiting: none"
        )
        mix = stats.get("decision_mix") or {}
        if mix:
            lines.append(
                "Decision mix: "
                + "; ".join(
                    f"{cat} " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                    for cat, kinds in sorted(mix.items())
                )
            )
        lines.extend(review_lines(stats.get("review")))
        lines.append(f"Cost of drafts: ${inbox['cost_usd']:.4f} ({inbox['drafts']} drafts)")
    elif inbox:
        lines.append(f"Inbox: unavailable ({inbox.get('unavailable')})")
    letters = report["dead_letters"]
    lines.append(f"Dead letters: {len(letters)}")
    for d in letters[:20]:
        lines.append(f"  #{d['id']} {d['service']} {d['subject']} x{d['attempts']}: {d['error']}")
    return "\n".join(lines)


async def publish(bus: Bus, report: dict[str, Any], now: dt.datetime) -> None:
    rid = event_id(REPORT_DAILY, report["date"])
    envelope = Envelope(
        id=rid, source=SOURCE, type=REPORT_DAILY, subject=report["date"], time=now, data=report
    )
    await bus.publish_envelope(subjects.result(REPORT_DAILY), envelope)


async def post_to_slack(url: str, text: str, flavour: chat.Flavour = "slack") -> bool:
    """Post the rendered report, every line quoted inert for `flavour`, previews off: once a
    day, one attempt (the next report is the retry)."""
    body = chat.payload(chat.quote_lines(text, flavour), flavour)
    endpoint = Endpoint(
        url,
        name="report",
        connect_timeout=3,
        read_timeout=8,
        breaker=CircuitBreaker(BreakerSettings()),
        bucket=TokenBucket(1.0, 1),
    )
    try:
        attempt = await endpoint.post(json=body)
    finally:
        await endpoint.close()
    if attempt.outcome != "ok":
        log.warning("report not posted to the chat webhook: %s", attempt.error)
    return attempt.outcome == "ok"
