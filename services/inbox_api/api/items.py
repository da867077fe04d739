"""The items: listing and reading them, deciding one, claiming it; the counts and the trail."""

from __future__ import annotations

import asyncio
import json
import re

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared import deadletters
from shared.http import HTTPError
from shared.inbox import QUEUE_PATTERN

from .. import store
from ..core import bus_of, inbox_of
from ..outboxes import publish_decision
from ..schemas import ClaimRequest, DecisionRequest
from ..watch import Watch
from .access import in_store, parsed, requires


@requires("viewer")
async def list_items(request: Request, who: store.Reviewer) -> Response:
    q = request.query_params
    status = q.get("status") or None
    if status is not None and status not in store.STATUSES:
        raise HTTPError(422, f"status must be one of {', '.join(store.STATUSES)}")
    sort = q.get("sort", "oldest")
    if sort not in ("oldest", "newest", "priority"):
        raise HTTPError(422, "sort must be oldest, newest or priority")
    priority = q.get("priority") or None
    if priority is not None and priority not in store.PRIORITIES:
        raise HTTPError(422, f"priority must be one of {', '.join(store.PRIORITIES)}")
    queue = q.get("queue") or None
    if queue is not None and not re.fullmatch(QUEUE_PATTERN, queue):
        raise HTTPError(422, "queue is not a queue name (lowercase letters, digits, - and _)")
    mine = q.get("mine") or None
    if mine not in (None, "1", "true", "0", "false"):
        raise HTTPError(422, "mine must be true or false")
    try:
        limit = int(q.get("limit", "50"))
    except ValueError:
        raise HTTPError(422, "limit must be a whole number") from None
    if not 1 <= limit <= 200:
        raise HTTPError(422, "limit must be between 1 and 200")
    try:
        items, next_cursor = await asyncio.to_thread(
            store.list_items,
            inbox_of(request).engine,
            status=status,
            category=q.get("category") or None,
            source=q.get("source") or None,
            text=q.get("text") or None,
            priority=priority,
            queue=queue,
            mine=store.Mine(who.name, who.queues) if mine in ("1", "true") else None,
            sort=sort,  # type: ignore[arg-type]
            cursor=q.get("cursor") or None,
            limit=limit,
        )
    except store.Invalid as exc:
        raise HTTPError(422, str(exc)) from None
    items = await asyncio.to_thread(store.with_claims, inbox_of(request).engine, items)
    watch: Watch | None = getattr(request.app.state, "watch", None)
    model = watch.model() if watch is not None else {"up": True}  # drafts delayed while down
    return JSONResponse({"items": items, "next_cursor": next_cursor, "model": model})


@requires("viewer")
async def get_item(request: Request, who: store.Reviewer) -> Response:
    item = await asyncio.to_thread(
        store.get_item, inbox_of(request).engine, request.path_params["id"]
    )
    if item is None:
        raise HTTPError(404, "no such item")
    item["ticket_url"] = inbox_of(request).link(item.get("ticket_id"))
    return JSONResponse(item)


@requires("reviewer")
async def post_decision(request: Request, who: store.Reviewer) -> Response:
    body = parsed(DecisionRequest, await request.body())
    kind, args = body.normalized()
    engine = inbox_of(request).engine
    decision = await in_store(
        store.decide,
        engine,
        request.path_params["id"],
        kind,
        args,
        body.version,
        who,
        take_over=body.take_over,
        missing="no such item",
    )
    published = await publish_decision(bus_of(request), engine, decision)
    return JSONResponse(
        {
            "accepted": True,
            "item_id": decision.item_id,
            "type": decision.type,
            "reviewer": decision.reviewer,
            "published": published,
        },
        status_code=202,
    )


@requires("reviewer")
async def post_claim(request: Request, who: store.Reviewer) -> Response:
    """Claim the item for the token's reviewer (or renew the claim); `{"take_over": true}`
    takes it from whoever holds it."""
    body = parsed(ClaimRequest, await request.body() or b"{}")
    inbox = inbox_of(request)
    held = await in_store(
        store.claims.claim,
        inbox.engine,
        request.path_params["id"],
        who.name,
        inbox.claim_seconds,
        take_over=body.take_over,
        missing="no such item",
    )
    return JSONResponse(held)


@requires("reviewer")
async def delete_claim(request: Request, who: store.Reviewer) -> Response:
    released = await in_store(
        store.claims.release,
        inbox_of(request).engine,
        request.path_params["id"],
        who.name,
        missing="no such item",
    )
    return JSONResponse({"released": released})


@requires("reporter")
async def get_stats(request: Request, who: store.Reviewer) -> Response:
    try:
        days = store.review_days(request.query_params.get("days"))
    except store.Invalid as exc:
        raise HTTPError(422, str(exc)) from None
    engine = inbox_of(request).engine
    result = await asyncio.to_thread(store.stats, engine)
    result["review"] = await asyncio.to_thread(store.review, engine, days)
    result["drafts"] = await asyncio.to_thread(store.drafts_since, engine, days)
    bus = bus_of(request)
    result["dead_letters"] = await deadletters.count(bus.js) if bus and bus.connected else None
    return JSONResponse(result)


@requires("viewer")
async def get_review_log(request: Request, who: store.Reviewer) -> Response:
    rows = await asyncio.to_thread(store.review_log, inbox_of(request).engine)
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return Response(body, media_type="application/x-ndjson")
