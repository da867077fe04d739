"""Auto-send over the API: its state per category, an admin turning it on or off, and a
person's audit of an auto-sent reply."""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared.http import HTTPError
from shared.inbox import CATEGORIES

from .. import store
from ..core import bus_of, inbox_of
from ..openapi import answer, errors, model_body, operation, path_id
from ..outboxes import publish_audits
from ..schemas import AuditRequest, AutosendChange
from ..standing import publish_standing
from .access import in_store, json_object, requires

log = logging.getLogger(__name__)


@operation(
    "Auto-send per category: on or off, the evidence now, the audits waiting; and its trail "
    "(every enabling, disabling and demotion)",
    responses={"200": answer("the policy", {"type": "object"}), **errors(401, 503)},
)
@requires("viewer")
async def get_autosend(request: Request, who: store.Reviewer) -> Response:
    inbox = inbox_of(request)
    return JSONResponse(
        await asyncio.to_thread(store.autosend.overview, inbox.engine, inbox.policy)
    )


@operation(
    "Turn auto-send on (with the evidence and a passing eval report) or off for a category; "
    "admins only (DESK_ADMINS)",
    parameters=[
        {"name": "category", "in": "path", "required": True, "schema": {"enum": list(CATEGORIES)}}
    ],
    request=model_body(AutosendChange),
    responses={
        "200": answer("the trail entry", {"type": "object"}),
        **errors(400, 401, 403, 404, 409, 422, 503),
    },
)
@requires("reviewer")
async def post_autosend(request: Request, who: store.Reviewer) -> Response:
    """An admin turns auto-send on (with a passing eval report) or off for a category."""
    inbox = inbox_of(request)
    if who.name not in inbox.admins:
        raise HTTPError(403, "only an admin (DESK_ADMINS) may turn auto-send on or off")
    body = await json_object(request)
    on = body.get("enabled")
    if not isinstance(on, bool):
        raise HTTPError(422, "enabled: true or false")
    category = request.path_params["category"]
    row = await in_store(
        store.autosend.change, inbox.engine, category, on, who.name, inbox.policy, body.get("eval")
    )
    log.warning("auto-send %s for %s by %s", row["action"], category, who.name)
    await publish_standing(bus_of(request), inbox.engine)  # what its drafts are given changed
    return JSONResponse(row)


@operation(
    "Audit an auto-sent reply: fine, or edited (it needed changes)",
    description="Once the reply is sent, the drafter is told: a reply found fine becomes an "
    "example for later drafts.",
    parameters=[path_id("item id")],
    request=model_body(AuditRequest),
    responses={
        "200": answer("recorded; `demoted` when it demoted the category"),
        **errors(400, 401, 403, 404, 409, 422, 503),
    },
)
@requires("reviewer")
async def post_audit(request: Request, who: store.Reviewer) -> Response:
    """A person's audit of an auto-sent reply: fine, or edited (it needed changes)."""
    body = await json_object(request)
    inbox = inbox_of(request)
    found = await in_store(
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
