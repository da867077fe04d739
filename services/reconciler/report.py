"""The daily report: what came in, what waits, what failed, what it cost.

Printed, published as a `report.daily` result event, and posted to a Slack-compatible
incoming-webhook URL when one is configured.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import Counter
from typing import Any

import httpx
import nats.js.errors as js_errors
from nats.js.api import RawStreamMsg

from shared import deadletters, subjects
from shared import headers as h
from shared.bus import Bus
from shared.envelope import Envelope
from shared.logging import redact
from shared.results import REPORT_DAILY, event_id

log = logging.getLogger(__name__)

SOURCE = "/desk/reconciler"


async def stored_since(bus: Bus, stream: str, start: dt.datetime) -> list[RawStreamMsg]:
    """Every message stored in `stream` since `start`, read message by message.

    No consumer is created: the reconciler may only read single messages (`shared.catalog`).
    The first message at or after `start` is found by bisecting the stream's sequences."""
    info = await bus.js.stream_info(stream)
    first, last = info.state.first_seq, info.state.last_seq
    if not info.state.messages:
        return []
    start = start.astimezone(dt.UTC)
    lo, hi = first, last + 1  # the answer is in [lo, hi]; hi means "none"
    while lo < hi:
        mid = (lo + hi) // 2
        msg = await _next_msg(bus, stream, mid)
        if msg is None or msg.seq is None:
            hi = mid
        elif msg.time is not None and msg.time >= start:
            hi = mid
        else:
            lo = msg.seq + 1
    found: list[RawStreamMsg] = []
    seq = lo
    while seq <= last:
        msg = await _next_msg(bus, stream, seq)
        if msg is None or msg.seq is None:
            break
        found.append(msg)
        seq = msg.seq + 1
    return found


async def _next_msg(bus: Bus, stream: str, seq: int) -> RawStreamMsg | None:
    """The first message stored at or after `seq`."""
    try:
        return await bus.js.get_msg(
            stream, seq=seq, subject=subjects.STREAM_SUBJECTS[stream][0], next=True
        )
    except js_errors.NotFoundError:
        return None


async def inbox_figures(url: str, token: str, start: dt.datetime) -> dict[str, Any]:
    """Stats and the cost of drafts created since `start`, from the inbox API."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
        stats = (await client.get("/api/stats")).raise_for_status().json()
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
            report["inbox"] = await inbox_figures(inbox_url, token, start)
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
    await bus.publish(
        subjects.result(REPORT_DAILY),
        envelope.to_bytes(),
        msg_id=rid,
        headers={h.CONTENT_TYPE: h.CLOUDEVENTS_JSON},
    )


async def post_to_slack(url: str, text: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(8, connect=3)) as client:
            answer = await client.post(url, json={"text": text})
        return answer.status_code < 300
    except httpx.HTTPError as exc:
        log.warning("report not posted to the chat webhook: %s", exc.__class__.__name__)
        return False
