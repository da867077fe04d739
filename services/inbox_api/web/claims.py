"""Claims on the page: opening a waiting item claims it for the reviewer (`opened`), the open
page renews the claim and lets go of it when left (`renew`, `release`), and a reviewer who
finds someone else at work takes the item over only by saying so (the take-over form); "Take
it" on an escalation claims it and opens the editor for the reviewer's own reply (`take`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from .. import store
from ..core import inbox_of
from . import forms
from .responses import error_page, item_url

log = logging.getLogger(__name__)


async def opened(request: Request, item_id: str, who: store.Reviewer) -> dict[str, Any] | None:
    """The page of a waiting item claims it for a reviewer who opens it (renewing their own
    claim). The claim they now hold, or None: someone else holds it, or it waits no more."""
    if who.role != "reviewer":
        return None
    inbox = inbox_of(request)
    try:
        held: dict[str, Any] = await asyncio.to_thread(
            store.claims.claim, inbox.engine, item_id, who.name, inbox.claim_seconds
        )
    except (store.NotFound, store.Conflict):
        return None
    return held


async def renew(request: Request) -> Response:
    """The open page's renewal (JSON), or the take-over form (`take_over`: back to the item)."""
    form, who = await forms.reviewer_form(request)
    item_id = request.path_params["id"]
    take_over = forms.text(form, "take_over") == "1"
    inbox = inbox_of(request)
    try:
        held = await asyncio.to_thread(
            store.claims.claim,
            inbox.engine,
            item_id,
            who.name,
            inbox.claim_seconds,
            take_over=take_over,
        )
    except store.NotFound:
        return error_page(request, 404, "Not found", "There is no such item in the inbox.")
    except store.claims.Claimed as exc:  # only without take_over: a take-over takes it
        return JSONResponse({"claimed_by": exc.reviewer}, status_code=409)
    except store.Conflict as exc:
        if not take_over:
            return JSONResponse({"error": str(exc)}, status_code=409)
        return error_page(request, 409, "Changed meanwhile", str(exc), item_url(item_id))
    if not take_over:
        return JSONResponse({"until": held["until"]})
    log.info("%s took over %s", who.name, item_id)  # its page now says it is theirs
    return RedirectResponse(item_url(item_id), status_code=303)


async def take(request: Request) -> Response:
    """ "Take it": an escalation is claimed for the reviewer, whose page then opens the editor
    to write the reply themselves (sent as an edit: a reply on its ticket)."""
    _, who = await forms.reviewer_form(request)
    item_id = request.path_params["id"]
    inbox = inbox_of(request)
    try:
        await asyncio.to_thread(
            store.claims.claim, inbox.engine, item_id, who.name, inbox.claim_seconds
        )
    except store.NotFound:
        return error_page(request, 404, "Not found", "There is no such item in the inbox.")
    except store.claims.Claimed as exc:
        message = f"{exc.reviewer} is working on this; take it over on its page if you must."
        return error_page(request, 409, f"Claimed by {exc.reviewer}", message, item_url(item_id))
    except store.Conflict as exc:
        return error_page(request, 409, "Changed meanwhile", str(exc), item_url(item_id))
    log.info("%s took %s to write the reply", who.name, item_id)
    return RedirectResponse(item_url(item_id) + "?write=1#reply", status_code=303)


async def release(request: Request) -> Response:
    """The page was left: let go of the claim (a beacon; nothing to show)."""
    _, who = await forms.reviewer_form(request)
    try:
        await asyncio.to_thread(
            store.claims.release, inbox_of(request).engine, request.path_params["id"], who.name
        )
    except store.NotFound:
        return Response(status_code=404)
    return Response(status_code=204)
