"""The pages a reviewer reads: the inbox list (its tabs, filters and pages, and the version
stamp it polls to reload), and one item in full (its conversation, its versions and what
changed, and the decisions it allows)."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import re
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared import edits
from shared.inbox import QUEUE_PATTERN

from .. import store
from ..core import inbox_of
from ..render import age, changes, fold, when
from .claims import opened
from .cookies import flash_of, session_of
from .decisions import allowed_kinds, draft_of
from .responses import error_page, item_url, page, to_login

PAGE_SIZE = 50
SORTS = ("oldest", "newest", "priority")
STATUS_MEANINGS = {  # what each status means, in the reviewer's words
    "waiting": "Waiting for a reviewer.",
    "redrafting": "Feedback given: the next version is being drafted.",
    "sending": "Approved: the sender is delivering it. Not sent yet.",
    "sent": "Sent to the customer.",
    "failed": "Sending failed.",
    "withdrawn": "Withdrawn: nothing will be sent.",
    "ignored": "Ignored: nothing was sent.",
    "superseded": "Replaced by a newer version.",
}


def version_stamp(stats: dict[str, Any]) -> str:
    """Changes whenever any item arrives or changes status (every change moves a count)."""
    counts = json.dumps(stats["by_status"], sort_keys=True).encode()
    return hashlib.sha256(counts).hexdigest()[:16]


def previous_version(item: dict[str, Any], versions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The version this one replaces, when comparing their replies says what changed: the
    one before it in the same round, or one it superseded (a reply already sent is history)."""
    before = [v for v in versions if v["version"] < item["version"]]
    if not before or not isinstance(before[-1].get("reply"), str):
        return None
    last = before[-1]
    if last["round"] == item["round"] or last["status"] in ("superseded", "redrafting"):
        return last
    return None


def due(item: dict[str, Any], now: dt.datetime) -> dict[str, str]:
    """When its target falls, for the list's badge: `due_label` (`14:05 UTC`), `due_in`
    (`in 12 min`)."""
    level = item.get("service_level") or {}
    if not level.get("due_at"):
        return {}
    at = when(level["due_at"])
    minutes = max(0, int((at - now).total_seconds() // 60))
    soon = "in < 1 min" if minutes < 1 else f"in {minutes} min"
    soon = f"in {minutes // 60} h" if minutes >= 120 else soon
    return {"due_label": f"{at:%Y-%m-%d %H:%M} UTC", "due_in": soon}


async def inbox_page(request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return to_login(request)
    q = request.query_params
    status = q.get("status") or "waiting"
    if status != "all" and status not in store.STATUSES:
        return error_page(
            request, 422, "Unknown status", f"Pick one of {', '.join(store.STATUSES)}."
        )
    sort = q.get("sort") or "oldest"
    if sort not in SORTS:
        return error_page(request, 422, "Unknown order", "Sort by oldest, newest or priority.")
    priority = q.get("priority") or ""
    if priority and priority not in store.PRIORITIES:
        return error_page(
            request, 422, "Unknown priority", f"Pick one of {', '.join(store.PRIORITIES)}."
        )
    category = (q.get("category") or "").strip()[:100]
    text = (q.get("text") or "").strip()[:200]
    queue = (q.get("queue") or "").strip()
    if queue and not re.fullmatch(QUEUE_PATTERN, queue):
        return error_page(
            request, 422, "Unknown queue", "A queue's name is lowercase letters and digits."
        )
    mine = q.get("mine") == "1"
    user = session.user
    engine = inbox_of(request).engine
    stats = await asyncio.to_thread(store.stats, engine)  # before the list: a change between
    try:  # the two queries costs at most one extra reload, never a missed one
        items, next_cursor = await asyncio.to_thread(
            store.list_items,
            engine,
            status=None if status == "all" else status,
            category=category or None,
            text=text or None,
            priority=priority or None,
            queue=queue or None,
            mine=store.Mine(user.name, user.queues) if mine else None,
            sort=sort,  # type: ignore[arg-type]
            cursor=q.get("cursor") or None,
            limit=PAGE_SIZE,
        )
        lanes = await asyncio.to_thread(store.notices.summaries, engine, store.tables.now())
    except store.Invalid as exc:
        return error_page(request, 422, "Bad page link", str(exc))
    items = await asyncio.to_thread(store.with_claims, engine, items)
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            **item,
            "age": age(when(item["created_at"]), now),
            "url": item_url(item["id"]),
            **due(item, now),
        }
        for item in items
    ]
    kept = {"priority": priority, "category": category, "text": text, "sort": sort}
    kept |= {"queue": queue} if queue else {}
    kept |= {"mine": "1"} if mine else {}
    known = dict.fromkeys([*inbox_of(request).reviewers.queues, *user.queues])
    known |= dict.fromkeys(lane.queue for lane in lanes if lane.queue)
    waiting_in = {lane.queue: lane.waiting for lane in lanes}
    tabs = [
        {
            "name": name,
            "count": None if name == "all" else stats["by_status"].get(name, 0),
            "url": "/inbox?" + urlencode({"status": name, **kept}),
            "current": name == status,
        }
        for name in (*store.STATUSES, "all")
    ]
    more = "/inbox?" + urlencode({"status": status, **kept, "cursor": next_cursor})
    context = {
        "items": rows,
        "tabs": tabs,
        "status": status,
        "sort": sort,
        "priority": priority,
        "priorities": store.PRIORITIES,
        "category": category,
        "text": text,
        "categories": sorted(c for c in stats["by_category"] if c != "none"),
        "queue": queue,
        "queues": [{"name": n, "waiting": waiting_in.get(n, 0)} for n in known],
        "mine": mine,
        "my_queues": user.queues,
        "next_url": more if next_cursor else None,
        "version": version_stamp(stats),
        "flash": await flash_of(request, session),
    }
    return page(request, "list.html", context)


async def inbox_version(request: Request) -> Response:
    if await session_of(request) is None:
        return JSONResponse({"error": "log in first"}, status_code=401)
    stats = await asyncio.to_thread(store.stats, inbox_of(request).engine)
    return JSONResponse(
        {"version": version_stamp(stats), "waiting": stats["by_status"].get("waiting", 0)},
        headers={"Cache-Control": "no-store"},
    )


def _claim_view(
    held: dict[str, Any] | None, mine: dict[str, Any] | None, who: store.Reviewer
) -> dict[str, Any] | None:
    """Who is working on the item, as its page says it: `mine`, or someone else's until when."""
    if held is None:
        return None
    return {
        "reviewer": held["reviewer"],
        "mine": mine is not None and held["reviewer"] == who.name,
        "until": f"{when(held['until']):%H:%M:%S} UTC",
    }


async def item_page(request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return to_login(request)
    who = session.user
    mine = await opened(request, request.path_params["id"], who)  # before it is read: shown
    item = await asyncio.to_thread(
        store.get_item, inbox_of(request).engine, request.path_params["id"]
    )
    if item is None:
        return error_page(request, 404, "Not found", "There is no such item in the inbox.")
    if mine is None and item["claim"] is None and item["status"] == "waiting":
        # the claim in the way ran out between the two reads: claim it now
        mine = item["claim"] = await opened(request, item["id"], who)
    item.update(due(item, dt.datetime.now(dt.UTC)))
    args = item["action_request"].get("args") or {}
    versions = [{**v, "url": item_url(v["id"])} for v in item["versions"]]
    latest = versions[-1] if versions else None
    allowed = allowed_kinds(item, who)
    reply = draft_of(item)
    earlier, recent = fold(item.get("conversation") or [], item.get("round_messages") or [])
    previous = previous_version(item, versions)
    lines = await asyncio.to_thread(changes, previous["reply"] or "", reply) if previous else []
    rewritten = bool(lines) and all(kind in ("removed", "added") for kind, _ in lines)
    result = item.get("result") or {}
    context = {
        "item": item,
        "url": item_url(item["id"]),
        "reply": reply,
        "rows": min(30, max(8, reply.count("\n") + 3)),
        "editing": request.query_params.get("edit") == "1" and allowed["edit"] and bool(reply),
        # no draft to edit: a person writes the reply (an escalation, once they take it)
        "takeable": allowed["edit"] and item["action_request"].get("action") in edits.TAKEN,
        "writing": allowed["edit"]
        and not reply
        and (bool(item.get("no_draft")) or request.query_params.get("write") == "1"),
        "subject": args.get("subject") if isinstance(args.get("subject"), str) else None,
        "other_args": {k: v for k, v in args.items() if k not in ("reply", "subject")},
        "age": age(when(item["created_at"]), dt.datetime.now(dt.UTC)),
        "allowed": allowed,
        "state": STATUS_MEANINGS.get(item["status"], item["status"]),
        "error": result.get("error") if item["status"] == "failed" else None,
        "customer": item.get("customer") or {},
        "ticket_url": inbox_of(request).link(item.get("ticket_id")),
        "notified": [n for n in item.get("notifications") or [] if n["type"] == "notify.sent"],
        "not_notified": [
            n for n in item.get("notifications") or [] if n["type"] == "notify.failed"
        ],
        "messages": len(earlier) + len(recent),
        "earlier_messages": earlier,
        "recent_messages": recent,
        "answered": [m for m in recent if m["answered"]],
        "previous": previous,
        # a rewrite has no line in common: the new text is above, show only what went
        "changes": [line for line in lines if line[0] == "removed"] if rewritten else lines,
        "rewritten": rewritten,
        "earlier": [v for v in versions if v["version"] != item["version"]],
        "latest": latest if latest and latest["version"] > item["version"] else None,
        "claim": _claim_view(item.get("claim"), mine, who),
        "claim_seconds": inbox_of(request).claim_seconds,
        # after a decision the next item opens, saying what was done (only then: a page
        # opened otherwise leaves the message to the page it was meant for)
        "flash": await flash_of(request, session)
        if request.query_params.get("after") == "decision"
        else None,
    }
    return page(request, "item.html", context)
