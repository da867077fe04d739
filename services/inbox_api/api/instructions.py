"""Standing instructions over the API: written, edited, removed; approved or turned down by an
admin where auto-send is on for their category."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared.http import HTTPError

from .. import store, views
from ..core import bus_of, inbox_of
from ..openapi import answer, errors, model_body, operation, path_id
from ..schemas import InstructionEdit, InstructionWrite
from ..standing import publish_standing
from .access import in_store, json_object, requires

log = logging.getLogger(__name__)

INSTRUCTION = views.Instruction
INSTRUCTION_ID = path_id("instruction id", "integer")


@operation(
    "The standing instructions (with removed=1, removed ones too)",
    parameters=[{"name": "removed", "in": "query", "schema": {"enum": ["0", "1"]}}],
    responses={
        "200": answer("the instructions, by category", views.Instructions),
        **errors(401, 503),
    },
)
@requires("viewer")
async def list_instructions(request: Request, who: store.Reviewer) -> Response:
    removed = request.query_params.get("removed") in ("1", "true", "yes")
    rows = await asyncio.to_thread(
        store.list_instructions, inbox_of(request).engine, removed=removed
    )
    return JSONResponse({"instructions": rows})


@operation(
    "Write a standing instruction for a category",
    request=model_body(InstructionWrite),
    responses={"201": answer("written", INSTRUCTION), **errors(400, 401, 403, 422, 503)},
)
@requires("reviewer")
async def post_instruction(request: Request, who: store.Reviewer) -> Response:
    """A reviewer writes a standing instruction for a category."""
    body = await json_object(request)
    inbox = inbox_of(request)
    engine = inbox.engine
    row = await in_store(
        store.write_instruction,
        engine,
        body.get("category"),
        body.get("text"),
        who.name,
        admin=who.name in inbox.admins,
    )
    log.info("standing instruction %s written by %s (%s)", row["id"], who.name, row["status"])
    await publish_standing(bus_of(request), engine)
    return JSONResponse(row, status_code=201)


@operation(
    "Edit an instruction's text (with auto-send on for its category, a non-admin's edit waits "
    "for an admin)",
    method="patch",
    operation_id="edit_instruction",
    parameters=[INSTRUCTION_ID],
    request=model_body(InstructionEdit),
    responses={"200": answer("edited", INSTRUCTION), **errors(400, 401, 403, 404, 422, 503)},
)
@operation(
    "Remove an instruction (kept as removed: not learned again)",
    method="delete",
    operation_id="remove_instruction",
    parameters=[INSTRUCTION_ID],
    responses={"200": answer("removed", INSTRUCTION), **errors(401, 403, 404, 503)},
)
@requires("reviewer")
async def change_instruction(request: Request, who: store.Reviewer) -> Response:
    """PATCH edits an instruction's text; DELETE removes it (kept as removed)."""
    try:
        instruction_id = int(request.path_params["id"])
    except ValueError:
        raise HTTPError(404, "no such standing instruction") from None
    text = None
    if request.method == "PATCH":
        body = await json_object(request)
        text = body.get("text")
    inbox = inbox_of(request)
    engine = inbox.engine
    row = await in_store(
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
    await publish_standing(bus_of(request), engine)
    return JSONResponse(row)


@operation(
    "Approve an instruction, or the edit proposed for it; admins only (DESK_ADMINS)",
    parameters=[INSTRUCTION_ID],
    responses={"200": answer("approved", INSTRUCTION), **errors(401, 403, 404, 503)},
)
@requires("reviewer")
async def approve_instruction(request: Request, who: store.Reviewer) -> Response:
    """An admin approves an instruction (or the edit proposed for it): drafts get it."""
    return await _judge_instruction(request, who, store.approve_instruction, "approved")


@operation(
    "Turn down a pending instruction (removed) or the edit proposed for it; admins only "
    "(DESK_ADMINS)",
    parameters=[INSTRUCTION_ID],
    responses={"200": answer("turned down", INSTRUCTION), **errors(401, 403, 404, 409, 503)},
)
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
    row = await in_store(
        call, inbox.engine, instruction_id, who.name, missing="no such standing instruction"
    )
    log.warning("standing instruction %s: %s by %s", instruction_id, verdict, who.name)
    await publish_standing(bus_of(request), inbox.engine)
    return JSONResponse(row)
