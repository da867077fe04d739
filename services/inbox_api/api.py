"""The review inbox as a JSON API (described at /openapi.json).

Reading needs any reviewer token (`viewer` or `reviewer`); deciding and replaying dead letters
need the `reviewer` role; the counts (`/api/stats`) also take the daily report's `reporter`
token, which reads nothing else. The reviewer's name comes from the token, never from the client.
A client address that keeps presenting wrong tokens gets 429 (see `throttle`); bodies are
limited before any route reads them (see `web.middleware`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared import deadletters
from shared.errors import first_error
from shared.http import HTTPError
from shared.inbox import QUEUE_PATTERN

from . import store
from .auth import bearer
from .core import attempt_refused, bus_of, client_address, inbox_of, perimeter
from .guidance import publish_guidance
from .openapi import document
from .outboxes import publish_audits, publish_decision
from .schemas import ClaimRequest, DecisionRequest
from .watch import Watch

log = logging.getLogger(__name__)


Role = Literal["reporter", "viewer", "reviewer"]
Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, store.Reviewer], Awaitable[Response]]  # given the reviewer


def authorize(request: Request, role: Role) -> store.Reviewer:
    """The token's reviewer, if it may act as `role`; else the refusal (401, 403, 429)."""
    token = bearer(request.headers.get("authorization"))
    if token is None:
        raise HTTPError(401, "a reviewer token is required", headers={"WWW-Authenticate": "Bearer"})
    edge, client = perimeter(request.app), client_address(request)
    wait = edge.throttle.retry_after(client)
    if wait:
        raise HTTPError(
            429,
            f"too many wrong tokens from your address; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    reviewers = inbox_of(request).reviewers
    reviewer = reviewers.authenticate(token)
    if reviewer is None and (reporter := reviewers.reporter(token)) is not None:
        if role == "reporter":
            return reporter
        raise HTTPError(403, "this token reads the counts (/api/stats) only")
    if reviewer is None:
        attempt_refused(edge.throttle, client, "API token")
        raise HTTPError(
            401,
            "this token is not a reviewer's (unknown, or removed from DESK_REVIEWERS)",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    if role == "reviewer" and reviewer.role != "reviewer":
        raise HTTPError(403, "this token may read the inbox but not decide")
    return reviewer


def requires(role: Role) -> Callable[[Handler], Endpoint]:
    """The route answers only a token that may act as `role` (`authorize`); its handler is
    given the token's reviewer."""

    def decorate(handler: Handler) -> Endpoint:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            return await handler(request, authorize(request, role))

        return endpoint

    return decorate


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


async def _in_store(call: Any, *args: Any, missing: str | None = None, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)` off the event loop; the store's refusals raised as their
    answers (404 with `missing`, or the store's words; 409; 422)."""
    try:
        return await asyncio.to_thread(functools.partial(call, *args, **kwargs))
    except store.NotFound as exc:
        raise HTTPError(404, missing or str(exc)) from None
    except store.claims.Claimed as exc:  # who holds it, for a client to show or to take over
        until = exc.until.isoformat()
        raise HTTPError(409, str(exc), claimed_by=exc.reviewer, until=until) from None
    except store.Conflict as exc:
        raise HTTPError(409, str(exc)) from None
    except store.Invalid as exc:
        raise HTTPError(422, str(exc)) from None


Parsed = TypeVar("Parsed", bound=BaseModel)


def _parsed(model: type[Parsed], raw: bytes) -> Parsed:
    """A JSON request body as `model`, or the 400 (not JSON) / 422 (not that shape) answer."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        status = 400 if exc.errors()[0]["type"] == "json_invalid" else 422
        raise HTTPError(status, first_error(exc, "body")) from None


@requires("reviewer")
async def post_decision(request: Request, who: store.Reviewer) -> Response:
    body = _parsed(DecisionRequest, await request.body())
    kind, args = body.normalized()
    engine = inbox_of(request).engine
    decision = await _in_store(
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
    body = _parsed(ClaimRequest, await request.body() or b"{}")
    inbox = inbox_of(request)
    held = await _in_store(
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
    released = await _in_store(
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
async def list_dead_letters(request: Request, who: store.Reviewer) -> Response:
    bus = bus_of(request)
    if bus is None or not bus.connected:
        raise HTTPError(503, "the event store is unavailable", headers={"Retry-After": "5"})
    letters = await deadletters.list_dead_letters(bus.js, limit=200)
    return JSONResponse({"dead_letters": [d.model_dump(mode="json") for d in letters]})


@requires("reviewer")
async def replay_dead_letter(request: Request, who: store.Reviewer) -> Response:
    try:
        letter_id = int(request.path_params["id"])
    except ValueError:
        raise HTTPError(404, "no such dead letter") from None
    bus = bus_of(request)
    if bus is None or not bus.connected:
        raise HTTPError(503, "the event store is unavailable", headers={"Retry-After": "5"})
    try:
        result = await deadletters.replay(bus, letter_id)
    except LookupError:
        raise HTTPError(404, "no such dead letter") from None
    except deadletters.RefusedReplay as exc:
        log.warning("dead letter %s refused for replay: %s", letter_id, exc.why)
        raise HTTPError(422, str(exc)) from None
    log.info("dead letter %s replayed by %s", letter_id, who.name)
    return JSONResponse({"replayed": letter_id, **result.model_dump(mode="json")}, status_code=202)


@requires("viewer")
async def get_review_log(request: Request, who: store.Reviewer) -> Response:
    rows = await asyncio.to_thread(store.review_log, inbox_of(request).engine)
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return Response(body, media_type="application/x-ndjson")


@requires("viewer")
async def list_instructions(request: Request, who: store.Reviewer) -> Response:
    removed = request.query_params.get("removed") in ("1", "true", "yes")
    rows = await asyncio.to_thread(
        store.list_instructions, inbox_of(request).engine, removed=removed
    )
    return JSONResponse({"instructions": rows})


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise HTTPError(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise HTTPError(422, "body: an object is expected")
    return body


@requires("reviewer")
async def post_instruction(request: Request, who: store.Reviewer) -> Response:
    """A reviewer writes a standing instruction for a category."""
    body = await _json_object(request)
    inbox = inbox_of(request)
    engine = inbox.engine
    row = await _in_store(
        store.write_instruction,
        engine,
        body.get("category"),
        body.get("text"),
        who.name,
        admin=who.name in inbox.admins,
    )
    log.info("standing instruction %s written by %s (%s)", row["id"], who.name, row["status"])
    await publish_guidance(bus_of(request), engine)
    return JSONResponse(row, status_code=201)


@requires("reviewer")
async def change_instruction(request: Request, who: store.Reviewer) -> Response:
    """PATCH edits an instruction's text; DELETE removes it (kept as removed)."""
    try:
        instruction_id = int(request.path_params["id"])
    except ValueError:
        raise HTTPError(404, "no such standing instruction") from None
    text = None
    if request.method == "PATCH":
        body = await _json_object(request)
        text = body.get("text")
    inbox = inbox_of(request)
    engine = inbox.engine
    row = await _in_store(
        store.change_instruction,
        engine,
        instruction_id,
        who.name,
        text=text,
        remove=request.method == "DELETE",
        admin=who.name in inbox.admins,
        missing="no such standing instruction",
    )
    verb = "removed" if request.method == "DELETE" else "edited"
    log.info("standing instruction %s %s by %s", instruction_id, verb, who.name)
    await publish_guidance(bus_of(request), engine)
    return JSONResponse(row)


@requires("reviewer")
async def approve_instruction(request: Request, who: store.Reviewer) -> Response:
    """An admin approves an instruction (or the edit proposed for it): drafts get it."""
    return await _judge_instruction(request, who, store.approve_instruction, "approved")


@requires("reviewer")
async def reject_instruction(request: Request, who: store.Reviewer) -> Response:
    """An admin turns down a pending instruction or the edit proposed for it."""
    return await _judge_instruction(request, who, store.reject_instruction, "turned down")


async def _judge_instruction(
    request: Request, who: store.Reviewer, call: Any, verdict: str
) -> Response:
    inbox = inbox_of(request)
    if who.name not in inbox.admins:
        raise HTTPError(403, "only an admin (DESK_ADMINS) may approve standing instructions")
    try:
        instruction_id = int(request.path_params["id"])
    except ValueError:
        raise HTTPError(404, "no such standing instruction") from None
    row = await _in_store(
        call, inbox.engine, instruction_id, who.name, missing="no such standing instruction"
    )
    log.warning("standing instruction %s: %s by %s", instruction_id, verdict, who.name)
    await publish_guidance(bus_of(request), inbox.engine)
    return JSONResponse(row)


@requires("viewer")
async def get_autosend(request: Request, who: store.Reviewer) -> Response:
    inbox = inbox_of(request)
    return JSONResponse(
        await asyncio.to_thread(store.autosend.overview, inbox.engine, inbox.policy)
    )


@requires("reviewer")
async def post_autosend(request: Request, who: store.Reviewer) -> Response:
    """An admin turns auto-send on (with a passing eval report) or off for a category."""
    inbox = inbox_of(request)
    if who.name not in inbox.admins:
        raise HTTPError(403, "only an admin (DESK_ADMINS) may turn auto-send on or off")
    body = await _json_object(request)
    on = body.get("enabled")
    if not isinstance(on, bool):
        raise HTTPError(422, "enabled: true or false")
    category = request.path_params["category"]
    row = await _in_store(
        store.autosend.change, inbox.engine, category, on, who.name, inbox.policy, body.get("eval")
    )
    log.warning("auto-send %s for %s by %s", row["action"], category, who.name)
    await publish_guidance(bus_of(request), inbox.engine)  # what its drafts are given changed
    return JSONResponse(row)


@requires("reviewer")
async def post_audit(request: Request, who: store.Reviewer) -> Response:
    """A person's audit of an auto-sent reply: fine, or edited (it needed changes)."""
    body = await _json_object(request)
    inbox = inbox_of(request)
    found = await _in_store(
        store.autosend.audit,
        inbox.engine,
        request.path_params["id"],
        body.get("verdict"),
        who.name,
        body.get("note"),
        inbox.policy,
        missing="no such auto-sent item",
    )
    if found["demoted"]:
        log.warning("auto-send demoted for %s: audits found edits", found["demoted"]["category"])
    await publish_audits(bus_of(request), inbox.engine)  # else the relay publishes it
    return JSONResponse(found)


async def openapi(request: Request) -> Response:
    return JSONResponse(document())


routes = [
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/api/items", list_items, methods=["GET"]),
    Route("/api/items/{id}", get_item, methods=["GET"]),
    Route("/api/items/{id}/decision", post_decision, methods=["POST"]),
    Route("/api/items/{id}/claim", post_claim, methods=["POST"]),
    Route("/api/items/{id}/claim", delete_claim, methods=["DELETE"]),
    Route("/api/stats", get_stats, methods=["GET"]),
    Route("/api/deadletters", list_dead_letters, methods=["GET"]),
    Route("/api/deadletters/{id}/replay", replay_dead_letter, methods=["POST"]),
    Route("/api/review-log", get_review_log, methods=["GET"]),
    Route("/api/instructions", list_instructions, methods=["GET"]),
    Route("/api/instructions", post_instruction, methods=["POST"]),
    Route("/api/instructions/{id}", change_instruction, methods=["PATCH", "DELETE"]),
    Route("/api/instructions/{id}/approve", approve_instruction, methods=["POST"]),
    Route("/api/instructions/{id}/reject", reject_instruction, methods=["POST"]),
    Route("/api/autosend", get_autosend, methods=["GET"]),
    Route("/api/autosend/{category}", post_autosend, methods=["POST"]),
    Route("/api/items/{id}/audit", post_audit, methods=["POST"]),
]
