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

from .. import store, views
from ..core import bus_of, inbox_of
from ..openapi import answer, errors, model_body, operation, path_id
from ..outboxes import publish_decision
from ..schemas import ClaimRequest, DecisionRequest
from ..watch import Watch
from .access import in_store, parsed, requires

ITEM_ID = path_id("item id, <thread>~v<version>")
LIST_QUERY = [
    {"name": "status", "in": "query", "schema": {"enum": list(store.STATUSES)}},
    {"name": "category", "in": "query", "schema": {"type": "string"}},
    {"name": "source", "in": "query", "schema": {"type": "string"}},
    {"name": "text", "in": "query", "schema": {"type": "string"}},
    {"name": "priority", "in": "query", "schema": {"enum": list(store.PRIORITIES)}},
    {"name": "queue", "in": "query", "schema": {"type": "string"}},
    {
        "name": "mine",
        "in": "query",
        "description": "only the items of the caller's queues and those they have claimed",
        "schema": {"type": "boolean"},
    },
    {"name": "sort", "in": "query", "schema": {"enum": ["oldest", "newest", "priority"]}},
    {"name": "cursor", "in": "query", "schema": {"type": "string"}},
    {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": 200},
    },
]


@operation(
    "Items, oldest waiting first by default",
    parameters=LIST_QUERY,
    responses={
        "200": answer("a page of items", views.ItemPage),
        **errors(401, 422, 503),
    },
)
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


@operation(
    "One item with its versions, feedback, decisions and result",
    parameters=[ITEM_ID],
    responses={
        "200": answer("the item", views.Item),
        **errors(401, 404, 503),
    },
)
@requires("viewer")
async def get_item(request: Request, who: store.Reviewer) -> Response:
    item = await asyncio.to_thread(
        store.get_item, inbox_of(request).engine, request.path_params["id"]
    )
    if item is None:
        raise HTTPError(404, "no such item")
    item["ticket_url"] = inbox_of(request).link(item.get("ticket_id"))
    return JSONResponse(item)


@operation(
    "Decide on the version you saw",
    description="`version` is the version the reviewer saw; a named version that is no longer "
    "current gets 409. Without it (LangChain's clients send none) the version the item id "
    "names is decided, if it still waits. The same decision posted again is answered 202 with "
    "the recorded one.",
    parameters=[ITEM_ID],
    request=model_body(DecisionRequest),
    responses={
        "202": answer("recorded (or recorded already) and published", views.Decided),
        **errors(400, 401, 403, 404, 409, 422, 503),
    },
)
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


@operation(
    "Claim the item for the token's reviewer, or renew the claim",
    description="While claimed, others see who works on it and may not decide it without "
    "taking it over (`take_over`). A claim held by another reviewer is answered 409 with "
    "`claimed_by` and `until`.",
    parameters=[ITEM_ID],
    request=model_body(ClaimRequest, required=False),
    responses={
        "200": answer("the claim", views.Claim),
        **errors(400, 401, 403, 404, 409, 422, 503),
    },
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


@operation(
    "Let go of the token's reviewer's claim on the item",
    parameters=[ITEM_ID],
    responses={
        "200": answer("whether a claim was let go", views.Released),
        **errors(401, 403, 404, 503),
    },
)
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


@operation(
    "Counts, oldest waiting item, decision mix, dead letters, and the review analytics and "
    "drafts of the last `days` (also for the daily report's reporter token, which may read "
    "nothing else)",
    parameters=[
        {
            "name": "days",
            "in": "query",
            "description": "the review analytics' window: the last N x 24 h",
            "schema": {
                "type": "integer",
                "minimum": 1,
                "maximum": store.MAX_REVIEW_DAYS,
                "default": store.REVIEW_DAYS,
            },
        }
    ],
    responses={
        "200": answer("statistics", views.Stats),
        **errors(401, 422, 503),
    },
)
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


@operation(
    "Every decision, as JSON lines",
    responses={
        "200": {
            "description": "JSON lines",
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
        },
        **errors(401, 503),
    },
)
@requires("viewer")
async def get_review_log(request: Request, who: store.Reviewer) -> Response:
    rows = await asyncio.to_thread(store.review_log, inbox_of(request).engine)
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return Response(body, media_type="application/x-ndjson")
