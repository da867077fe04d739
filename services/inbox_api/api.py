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
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared import deadletters
from shared.bus import Bus
from shared.errors import first_error
from shared.inbox import QUEUE_PATTERN
from shared.settings import InboxApiSettings

from . import store
from .auth import Reviewers, bearer
from .guidance import publish_guidance
from .openapi import document
from .outboxes import publish_audits, publish_decision
from .schemas import ClaimRequest, DecisionRequest
from .sessions import Sessions
from .throttle import Throttle
from .watch import Watch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inbox:
    engine: Engine
    reviewers: Reviewers
    ticket_url: str | None = None  # DESK_HELPDESK_TICKET_URL, a template with {ticket}
    policy: store.autosend.Policy = field(default_factory=store.autosend.Policy)
    admins: frozenset[str] = frozenset()  # DESK_ADMINS: who may turn auto-send on or off
    claim_seconds: float = 300.0  # DESK_CLAIM_SECONDS: how long opening an item claims it

    @classmethod
    def configured(
        cls,
        settings: InboxApiSettings,
        engine: Engine,
        reviewers: Reviewers,
        policy: store.autosend.Policy,
    ) -> Inbox:
        admins = frozenset(settings.admins)
        ticket_url, claim_seconds = settings.helpdesk_ticket_url, settings.claim_seconds
        return cls(engine, reviewers, ticket_url, policy, admins, claim_seconds)

    def link(self, ticket_id: str | None) -> str | None:
        """The ticket in the helpdesk, when a link template is configured."""
        if not self.ticket_url or not ticket_id:
            return None
        return self.ticket_url.replace("{ticket}", quote(ticket_id, safe=""))


@dataclass(frozen=True)
class Perimeter:
    """What the inbox holds at its edge: the web sessions, the failed-attempt throttle, the
    request body limits and whether cookies need HTTPS."""

    sessions: Sessions
    throttle: Throttle
    max_body: int
    body_timeout: float
    cookie_secure: bool

    @classmethod
    def build(cls, inbox: Inbox, settings: InboxApiSettings) -> Perimeter:
        return cls(
            sessions=Sessions(inbox.engine, inbox.reviewers, settings.session_lifetime),
            throttle=Throttle(settings.auth_rate, settings.auth_burst),
            max_body=settings.max_body,
            body_timeout=settings.body_timeout,
            cookie_secure=settings.cookie_secure,
        )


def perimeter(app: Starlette) -> Perimeter:
    """The app's Perimeter, built when the service started (`main.run`)."""
    found: Perimeter = app.state.perimeter
    return found


def client_address(request: Request) -> str:
    """The client's address (the proxy's X-Forwarded-For when uvicorn trusts the proxy)."""
    return request.client.host if request.client else "unknown"


def attempt_refused(throttle: Throttle, client: str, what: str) -> None:
    """Count a failed credential attempt against the client's address (never the credential)."""
    if throttle.failed(client):
        log.warning("%s refused from %s; its next attempts get 429 for a while", what, client)
    else:
        log.warning("%s refused from %s", what, client)


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, **extra)


def _inbox(request: Request) -> Inbox:
    inbox: Inbox = request.app.state.inbox
    return inbox


def _bus(request: Request) -> Bus | None:
    bus: Bus | None = request.app.state.service.connection
    return bus


def authorize(
    request: Request, role: Literal["reporter", "viewer", "reviewer"]
) -> store.Reviewer | Response:
    token = bearer(request.headers.get("authorization"))
    if token is None:
        return error(401, "a reviewer token is required", headers={"WWW-Authenticate": "Bearer"})
    edge, client = perimeter(request.app), client_address(request)
    wait = edge.throttle.retry_after(client)
    if wait:
        return error(
            429,
            f"too many wrong tokens from your address; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    reviewers = _inbox(request).reviewers
    reviewer = reviewers.authenticate(token)
    if reviewer is None and (reporter := reviewers.reporter(token)) is not None:
        if role == "reporter":
            return reporter
        return error(403, "this token reads the counts (/api/stats) only")
    if reviewer is None:
        attempt_refused(edge.throttle, client, "API token")
        return error(
            401,
            "this token is not a reviewer's (unknown, or removed from DESK_REVIEWERS)",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    if role == "reviewer" and reviewer.role != "reviewer":
        return error(403, "this token may read the inbox but not decide")
    return reviewer


async def list_items(request: Request) -> Response:
    who = authorize(request, "viewer")
    if isinstance(who, Response):
        return who
    q = request.query_params
    status = q.get("status") or None
    if status is not None and status not in store.STATUSES:
        return error(422, f"status must be one of {', '.join(store.STATUSES)}")
    sort = q.get("sort", "oldest")
    if sort not in ("oldest", "newest", "priority"):
        return error(422, "sort must be oldest, newest or priority")
    priority = q.get("priority") or None
    if priority is not None and priority not in store.PRIORITIES:
        return error(422, f"priority must be one of {', '.join(store.PRIORITIES)}")
    queue = q.get("queue") or None
    if queue is not None and not re.fullmatch(QUEUE_PATTERN, queue):
        return error(422, "queue is not a queue name (lowercase letters, digits, - and _)")
    mine = q.get("mine") or None
    if mine not in (None, "1", "true", "0", "false"):
        return error(422, "mine must be true or false")
    try:
        limit = int(q.get("limit", "50"))
    except ValueError:
        return error(422, "limit must be a whole number")
    if not 1 <= limit <= 200:
        return error(422, "limit must be between 1 and 200")
    try:
        items, next_cursor = await asyncio.to_thread(
            store.list_items,
            _inbox(request).engine,
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
        return error(422, str(exc))
    items = await asyncio.to_thread(store.with_claims, _inbox(request).engine, items)
    watch: Watch | None = getattr(request.app.state, "watch", None)
    model = watch.model() if watch is not None else {"up": True}  # drafts delayed while down
    return JSONResponse({"items": items, "next_cursor": next_cursor, "model": model})


async def get_item(request: Request) -> Response:
    who = authorize(request, "viewer")
    if isinstance(who, Response):
        return who
    item = await asyncio.to_thread(
        store.get_item, _inbox(request).engine, request.path_params["id"]
    )
    if item is None:
        return error(404, "no such item")
    item["ticket_url"] = _inbox(request).link(item.get("ticket_id"))
    return JSONResponse(item)


async def _in_store(call: Any, *args: Any, missing: str | None = None, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)` off the event loop; the store's refusals as their answers
    (404 with `missing`, or the store's words; 409; 422), returned as a Response."""
    try:
        return await asyncio.to_thread(functools.partial(call, *args, **kwargs))
    except store.NotFound as exc:
        return error(404, missing or str(exc))
    except store.claims.Claimed as exc:  # who holds it, for a client to show or to take over
        body = {"error": str(exc), "claimed_by": exc.reviewer, "until": exc.until.isoformat()}
        return JSONResponse(body, status_code=409)
    except store.Conflict as exc:
        return error(409, str(exc))
    except store.Invalid as exc:
        return error(422, str(exc))


Parsed = TypeVar("Parsed", bound=BaseModel)


def _parsed(model: type[Parsed], raw: bytes) -> Parsed | Response:
    """A JSON request body as `model`, or the 400 (not JSON) / 422 (not that shape) answer."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        status = 400 if exc.errors()[0]["type"] == "json_invalid" else 422
        return error(status, first_error(exc, "body"))


async def post_decision(request: Request) -> Response:
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    body = _parsed(DecisionRequest, await request.body())
    if isinstance(body, Response):
        return body
    kind, args = body.normalized()
    engine = _inbox(request).engine
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
    if isinstance(decision, Response):
        return decision
    published = await publish_decision(_bus(request), engine, decision)
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


async def post_claim(request: Request) -> Response:
    """Claim the item for the token's reviewer (or renew the claim); `{"take_over": true}`
    takes it from whoever holds it."""
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    body = _parsed(ClaimRequest, await request.body() or b"{}")
    if isinstance(body, Response):
        return body
    inbox = _inbox(request)
    held = await _in_store(
        store.claims.claim,
        inbox.engine,
        request.path_params["id"],
        who.name,
        inbox.claim_seconds,
        take_over=body.take_over,
        missing="no such item",
    )
    return held if isinstance(held, Response) else JSONResponse(held)


async def delete_claim(request: Request) -> Response:
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    released = await _in_store(
        store.claims.release,
        _inbox(request).engine,
        request.path_params["id"],
        who.name,
        missing="no such item",
    )
    return released if isinstance(released, Response) else JSONResponse({"released": released})


async def get_stats(request: Request) -> Response:
    who = authorize(request, "reporter")
    if isinstance(who, Response):
        return who
    try:
        days = store.review_days(request.query_params.get("days"))
    except store.Invalid as exc:
        return error(422, str(exc))
    engine = _inbox(request).engine
    result = await asyncio.to_thread(store.stats, engine)
    result["review"] = await asyncio.to_thread(store.review, engine, days)
    result["drafts"] = await asyncio.to_thread(store.drafts_since, engine, days)
    bus = _bus(request)
    result["dead_letters"] = await deadletters.count(bus.js) if bus and bus.connected else None
    return JSONResponse(result)


async def list_dead_letters(request: Request) -> Response:
    who = authorize(request, "viewer")
    if isinstance(who, Response):
        return who
    bus = _bus(request)
    if bus is None or not bus.connected:
        return error(503, "the event store is unavailable", headers={"Retry-After": "5"})
    letters = await deadletters.list_dead_letters(bus.js, limit=200)
    return JSONResponse({"dead_letters": [d.model_dump(mode="json") for d in letters]})


async def replay_dead_letter(request: Request) -> Response:
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    try:
        letter_id = int(request.path_params["id"])
    except ValueError:
        return error(404, "no such dead letter")
    bus = _bus(request)
    if bus is None or not bus.connected:
        return error(503, "the event store is unavailable", headers={"Retry-After": "5"})
    try:
        result = await deadletters.replay(bus, letter_id)
    except LookupError:
        return error(404, "no such dead letter")
    except deadletters.RefusedReplay as exc:
        log.warning("dead letter %s refused for replay: %s", letter_id, exc.why)
        return error(422, str(exc))
    log.info("dead letter %s replayed by %s", letter_id, who.name)
    return JSONResponse({"replayed": letter_id, **result.model_dump(mode="json")}, status_code=202)


async def get_review_log(request: Request) -> Response:
    who = authorize(request, "viewer")
    if isinstance(who, Response):
        return who
    rows = await asyncio.to_thread(store.review_log, _inbox(request).engine)
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return Response(body, media_type="application/x-ndjson")


async def list_instructions(request: Request) -> Response:
    who = authorize(request, "viewer")
    if isinstance(who, Response):
        return who
    removed = request.query_params.get("removed") in ("1", "true", "yes")
    rows = await asyncio.to_thread(store.list_instructions, _inbox(request).engine, removed=removed)
    return JSONResponse({"instructions": rows})


async def _json_object(request: Request) -> dict[str, Any] | Response:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return error(400, "the body is not JSON")
    if not isinstance(body, dict):
        return error(422, "body: an object is expected")
    return body


async def post_instruction(request: Request) -> Response:
    """A reviewer writes a standing instruction for a category."""
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    body = await _json_object(request)
    if isinstance(body, Response):
        return body
    inbox = _inbox(request)
    engine = inbox.engine
    row = await _in_store(
        store.write_instruction,
        engine,
        body.get("category"),
        body.get("text"),
        who.name,
        admin=who.name in inbox.admins,
    )
    if isinstance(row, Response):
        return row
    log.info("standing instruction %s written by %s (%s)", row["id"], who.name, row["status"])
    await publish_guidance(_bus(request), engine)
    return JSONResponse(row, status_code=201)


async def change_instruction(request: Request) -> Response:
    """PATCH edits an instruction's text; DELETE removes it (kept as removed)."""
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    try:
        instruction_id = int(request.path_params["id"])
    except ValueError:
        return error(404, "no such standing instruction")
    text = None
    if request.method == "PATCH":
        body = await _json_object(request)
        if isinstance(body, Response):
            return body
        text = body.get("text")
    inbox = _inbox(request)
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
    if isinstance(row, Response):
        return row
    verb = "removed" if request.method == "DELETE" else "edited"
    log.info("standing instruction %s %s by %s", instruction_id, verb, who.name)
    await publish_guidance(_bus(request), engine)
    return JSONResponse(row)


async def approve_instruction(request: Request) -> Response:
    """An admin approves an instruction (or the edit proposed for it): drafts get it."""
    return await _judge_instruction(request, store.approve_instruction, "approved")


async def reject_instruction(request: Request) -> Response:
    """An admin turns down a pending instruction or the edit proposed for it."""
    return await _judge_instruction(request, store.reject_instruction, "turned down")


async def _judge_instruction(request: Request, call: Any, verdict: str) -> Response:
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    inbox = _inbox(request)
    if who.name not in inbox.admins:
        return error(403, "only an admin (DESK_ADMINS) may approve standing instructions")
    try:
        instruction_id = int(request.path_params["id"])
    except ValueError:
        return error(404, "no such standing instruction")
    row = await _in_store(
        call, inbox.engine, instruction_id, who.name, missing="no such standing instruction"
    )
    if isinstance(row, Response):
        return row
    log.warning("standing instruction %s: %s by %s", instruction_id, verdict, who.name)
    await publish_guidance(_bus(request), inbox.engine)
    return JSONResponse(row)


async def get_autosend(request: Request) -> Response:
    who = authorize(request, "viewer")
    if isinstance(who, Response):
        return who
    inbox = _inbox(request)
    return JSONResponse(
        await asyncio.to_thread(store.autosend.overview, inbox.engine, inbox.policy)
    )


async def post_autosend(request: Request) -> Response:
    """An admin turns auto-send on (with a passing eval report) or off for a category."""
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    inbox = _inbox(request)
    if who.name not in inbox.admins:
        return error(403, "only an admin (DESK_ADMINS) may turn auto-send on or off")
    body = await _json_object(request)
    if isinstance(body, Response):
        return body
    on = body.get("enabled")
    if not isinstance(on, bool):
        return error(422, "enabled: true or false")
    category = request.path_params["category"]
    row = await _in_store(
        store.autosend.change, inbox.engine, category, on, who.name, inbox.policy, body.get("eval")
    )
    if isinstance(row, Response):
        return row
    log.warning("auto-send %s for %s by %s", row["action"], category, who.name)
    await publish_guidance(_bus(request), inbox.engine)  # what its drafts are given changed
    return JSONResponse(row)


async def post_audit(request: Request) -> Response:
    """A person's audit of an auto-sent reply: fine, or edited (it needed changes)."""
    who = authorize(request, "reviewer")
    if isinstance(who, Response):
        return who
    body = await _json_object(request)
    if isinstance(body, Response):
        return body
    inbox = _inbox(request)
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
    if isinstance(found, Response):
        return found
    if found["demoted"]:
        log.warning("auto-send demoted for %s: audits found edits", found["demoted"]["category"])
    await publish_audits(_bus(request), inbox.engine)  # else the relay publishes it
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
